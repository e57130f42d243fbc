"""The past's queries (store/session_queries.py, store/cost_queries.py): what a person types is a
bound parameter, never SQL text; the shapes each question takes."""

from __future__ import annotations

import pytest

from agentwatch.store import cost_queries, session_queries
from agentwatch.store.queries import EPOCH

HOSTILE = "x'); DROP TABLE events; --"


def test_search_binds_the_text_and_each_narrowing() -> None:
    query = session_queries.search(HOSTILE, since="2026-11-01 00:00:00.000", agent="rev'iewer", session="s'1")
    assert HOSTILE not in query.sql and "rev'iewer" not in query.sql and "s'1" not in query.sql
    assert query.params == {"q": HOSTILE, "since": "2026-11-01 00:00:00.000", "limit": 200,
                            "agent": "rev'iewer", "session": "s'1"}  # fmt: skip
    assert "hasAllTokens(text, {q:String})" in query.sql and "hasAllTokens(data, {q:String})" in query.sql
    plain = session_queries.search("make test")
    assert "{agent:String}" not in plain.sql and "{session:String}" not in plain.sql
    assert plain.params == {"q": "make test", "since": EPOCH, "limit": 200}


@pytest.mark.parametrize("text", ["", "   ", "--", "./*", "__"])
def test_search_wants_a_word(text: str) -> None:
    assert not session_queries.searchable(text)
    with pytest.raises(ValueError, match="give a word"):
        session_queries.search(text)


@pytest.mark.parametrize("text", ["a", "src/app.py", "é", "7"])
def test_a_letter_or_a_digit_is_a_word(text: str) -> None:
    assert session_queries.searchable(text)


def test_an_export_is_one_session_or_a_window() -> None:
    by_session = session_queries.export_page(session=HOSTILE, after=("2026-11-01 00:00:00.000", "id1"))
    assert HOSTILE not in by_session.sql and "session_id = {session:String}" in by_session.sql
    assert by_session.params == {"session": HOSTILE, "after_at": "2026-11-01 00:00:00.000", "after_id": "id1",
                                 "limit": 2000}  # fmt: skip
    by_time = session_queries.export_page(since="2026-11-01 00:00:00.000")
    assert "timestamp >= {since:DateTime64(3, 'UTC')}" in by_time.sql and "session_id =" not in by_time.sql
    assert session_queries.export_count(session="s").params == {"session": "s"}
    assert session_queries.export_count(since="2026-11-01 00:00:00.000").params == {
        "since": "2026-11-01 00:00:00.000"
    }


def test_turns_place_usage_by_time_within_the_session() -> None:
    query = session_queries.session_turns(HOSTILE)
    assert HOSTILE not in query.sql and query.params == {"session": HOSTILE}
    assert "anyLast(turn_start)" in query.sql and "PARTITION BY session_id" in query.sql
    assert "usage FINAL WHERE session_id = {session:String}" in query.sql


def test_top_turns_look_for_turn_starts_a_day_before_the_window() -> None:
    query = cost_queries.top_turns("2026-11-01 00:00:00.000", 5)
    assert query.params == {"since": "2026-11-01 00:00:00.000", "limit": 5}
    assert "timestamp >= {since:DateTime64(3, 'UTC')} - INTERVAL 1 DAY" in query.sql
    assert "share_pct" in query.sql
