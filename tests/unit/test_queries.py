"""The read side's queries are text with `{name:Type}` placeholders and a dict of values: no value
is ever formatted into the SQL (store/queries.py). Run against the real schema in tests/tui."""

from __future__ import annotations

import re

import pytest

from agentwatch.store import queries
from agentwatch.store.queries import SESSIONS_LIMIT, TOOL_SORTS, TOOLS_LIMIT

# Numbers no query would contain on its own: if one shows up in the SQL, it was formatted in.
ODD_WINDOW = 987_654
ODD_LIMIT = 4_321


def placeholders(sql: str) -> set[str]:
    return set(re.findall(r"\{(\w+):\w+\}", sql))


@pytest.mark.parametrize("sort", TOOL_SORTS)
def test_tool_stats_binds_its_window_and_limit(sort: str) -> None:
    query = queries.tool_stats(ODD_WINDOW, sort, limit=ODD_LIMIT)
    assert query.params == {"window_s": ODD_WINDOW, "limit": ODD_LIMIT}
    assert placeholders(query.sql) == {"window_s", "limit"}
    assert str(ODD_WINDOW) not in query.sql and str(ODD_LIMIT) not in query.sql
    assert "toIntervalSecond({window_s:UInt32})" in query.sql
    assert query.sql.rstrip().endswith("LIMIT {limit:UInt32}")
    assert f"ORDER BY {TOOL_SORTS[sort]}\n" in query.sql, "the sort is the fixed clause of its name"


def test_active_sessions_binds_its_window_and_limit() -> None:
    query = queries.active_sessions(ODD_WINDOW, limit=ODD_LIMIT)
    assert query.params == {"window_s": ODD_WINDOW, "limit": ODD_LIMIT}
    assert placeholders(query.sql) == {"window_s", "limit"}
    assert str(ODD_WINDOW) not in query.sql and str(ODD_LIMIT) not in query.sql


def test_all_time_has_no_window_and_the_default_limits() -> None:
    tools = queries.tool_stats(None)
    sessions = queries.active_sessions(None)
    assert tools.params == {"limit": TOOLS_LIMIT}
    assert sessions.params == {"limit": SESSIONS_LIMIT}
    for query in (tools, sessions):
        assert placeholders(query.sql) == {"limit"}
        assert "WHERE" not in query.sql, "all time: no condition at all"


def test_the_same_question_is_the_same_text() -> None:
    """Only the values differ between windows: ClickHouse can reuse what it made of the text."""
    assert queries.tool_stats(900).sql == queries.tool_stats(86_400).sql
    assert queries.active_sessions(900).sql == queries.active_sessions(3600, limit=5).sql


def test_unknown_sorts_and_empty_windows_are_refused() -> None:
    with pytest.raises(ValueError, match="unknown sort"):
        queries.tool_stats(3600, "tool; DROP TABLE events --")
    for window in (0, -60):
        with pytest.raises(ValueError, match="positive number of seconds"):
            queries.tool_stats(window)
        with pytest.raises(ValueError, match="positive number of seconds"):
            queries.active_sessions(window)
