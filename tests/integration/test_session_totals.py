"""session_costs as 019_session_totals.sql reads it (session_totals: one row per session once
merged, folded by FINAL): an older store migrates and answers what it answered before and what
`usage FINAL` answers, and the newest sessions by last_at are the ones 009's view gave."""

from __future__ import annotations

from typing import Any

import pytest
from clickhouse_connect.driver.client import Client

from agentwatch.store import usage
from agentwatch.store.migrations import SCHEMA_DIR, apply_migrations
from agentwatch.store.usage import UsageRows, insert_usage
from tests.integration.test_rollups import (
    assert_costs_match_raw,
    bigger,
    cost_answers,
    store_before_rollups,
    usage_batch,
)

# The columns 009's view had (021 added person, repo and branch at the end).
COLUMNS_OF_009 = (
    "session_id, agent, team, api_calls, input_tokens, output_tokens, cache_read_tokens, "
    "cache_write_5m_tokens, cache_write_1h_tokens, cost_usd, unpriced_calls, claude_cost_usd, models, "
    "first_at, last_at"
)
NEWEST = f"SELECT {COLUMNS_OF_009} FROM {{view}} ORDER BY last_at DESC, session_id LIMIT 200"  # noqa: S608


def view_of_009(name: str, migration: str = "009_rollups") -> str:
    """The SELECT of `name` as 009_rollups.sql (or `migration`) defined it."""
    text = SCHEMA_DIR.joinpath(f"{migration}.sql").read_text(encoding="utf-8")
    head = f"CREATE OR REPLACE VIEW {name} AS\n"
    body = text[text.index(head) + len(head) :]
    return body[: body.index(";\n")]


def newest(client: Client, view: str) -> list[tuple[Any, ...]]:
    result = client.query(NEWEST.format(view=view))
    return [tuple(round(v, 9) if isinstance(v, float) else v for v in row) for row in result.result_rows]


def test_an_older_store_migrates_and_session_costs_answers_as_before(
    chdb_database: Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    store_before_rollups(chdb_database, before=19)
    found = usage_batch()
    # The store of that time wrote usage without the session's person, repo and branch (021).
    monkeypatch.setattr(usage, "USAGE_COLUMNS", usage.USAGE_COLUMNS[:-3])
    old = UsageRows([row[:-3] for row in found.usage], found.cost_states, [])
    insert_usage(chdb_database, old)
    insert_usage(chdb_database, UsageRows([row[:-3] for row in bigger(found.usage[::3], 7)], [], []))
    monkeypatch.undo()
    before = cost_answers(chdb_database, "session_costs", "session_id")
    assert any(row[11] is not None for row in before)  # sessions with Claude Code's own total

    assert "019_session_totals" in apply_migrations(chdb_database)
    assert cost_answers(chdb_database, "session_costs", "session_id") == before
    assert_costs_match_raw(chdb_database)
    # Live on top of the backfill: larger copies again, the cost-states again (no change).
    insert_usage(chdb_database, UsageRows(bigger(found.usage[::4], 9), found.cost_states, []))
    assert_costs_match_raw(chdb_database)
    # Once merged, one row per session: the view's FINAL has nothing left to fold.
    chdb_database.command("OPTIMIZE TABLE session_totals FINAL")
    assert chdb_database.command("SELECT count() FROM session_totals") == len(before)
    assert_costs_match_raw(chdb_database)


def test_the_newest_sessions_are_those_of_009s_view(chdb_database: Client) -> None:
    apply_migrations(chdb_database)
    # 20,000 API messages of 1,000 sessions with random ids over 10 days, two models, some of
    # subagents; a larger copy of every tenth (the stored one taken back out, sign -1); the
    # cost-states of every third session, and of 50 sessions without usage.
    usage = (
        "INSERT INTO usage_in (session_id, message_id, request_id, timestamp, agent, team, parent_agent, "
        "agent_id, model, output_tokens, cost_usd, version, sign) "
        "SELECT toString(cityHash64(intDiv(number, 20))), concat('m', toString(number)), 'r', "
        "now64(3) - toIntervalSecond(intDiv((20000 - number) * 864000, 20000) + {shift}), "
        "if(number % 5 = 0, 'helper', concat('agent-', toString(intDiv(number, 20) % 7))), "
        "concat('team-', toString(intDiv(number, 20) % 3)), "
        "if(number % 5 = 0, concat('agent-', toString(intDiv(number, 20) % 7)), ''), "
        "if(number % 5 = 0, 'sub', ''), ['opus', 'sonnet'][1 + number % 2], 100 + {extra}, "
        "if(number % 11 = 0, NULL, 0.01 + {extra} / 1e6), 1 + {extra}, {sign} "
        "FROM numbers(20000) WHERE {where}"
    )
    chdb_database.command(usage.format(shift=0, extra=0, sign=1, where="1"))
    chdb_database.command(usage.format(shift=0, extra=0, sign=-1, where="number % 10 = 0"))
    chdb_database.command(usage.format(shift=0, extra=5, sign=1, where="number % 10 = 0"))
    chdb_database.command(
        "INSERT INTO cost_states (session_id, timestamp, agent, team, total_cost_usd, version) "
        "SELECT toString(cityHash64(n)), now64(3) - toIntervalSecond(n * 600), 'agent-0', 'team-0', "
        "n / 100, n FROM (SELECT if(number < 334, number * 3, 2000 + number) AS n FROM numbers(384))"
    )
    ours = newest(chdb_database, "session_costs")
    assert len(ours) == 200
    assert ours == newest(chdb_database, f"({view_of_009('session_costs')})")
    every = cost_answers(chdb_database, "session_costs", "session_id")
    assert len(every) == 1050
    assert every == cost_answers(chdb_database, f"({view_of_009('session_costs')})", "session_id")


# Usage of 300 sessions (random ids) over two days, each by one of 7 people in one of 5
# repositories; the events of every other session, a day later than its usage on another branch;
# later usage on a branch of its own.
_OWNED_USAGE = (
    "INSERT INTO usage_in (session_id, message_id, request_id, timestamp, agent, model, output_tokens, "
    "cost_usd, version, sign, person, repo, branch) "
    "SELECT toString(cityHash64(intDiv(number, 10))), concat('m', toString(number)), 'r', "
    "now64(3) - toIntervalSecond(intDiv((3000 - number) * 172800, 3000) + {shift}), 'lead', 'opus', 100, "
    "0.01, 1, 1, concat('p', toString(intDiv(number, 10) % 7), '@example.com'), "
    "concat('example.com/team/r', toString(intDiv(number, 10) % 5)), '{branch}' "
    "FROM numbers(3000) WHERE {where}"
)
_OWNED_EVENTS = (
    "INSERT INTO events_in (id, timestamp, event, kind, agent, session_id, host, person, repo, branch) "
    "SELECT concat('e{tag}', toString(number)), now64(3) - toIntervalSecond({shift}), 'PreToolUse', "
    "'tool', 'lead', toString(cityHash64(number)), 'h1', concat('q', toString(number % 3)), "
    "concat('example.com/team/r', toString(number % 5)), concat('{tag}-', toString(number)) "
    "FROM numbers(300) WHERE number % 2 = 0"
)


def every_row(client: Client, view: str, where: str = "") -> list[tuple[Any, ...]]:
    """Every column of `view`'s rows, by session, its floats to 1e-9 (sums in another order)."""
    rows = client.query(f"SELECT * FROM {view} {where} ORDER BY session_id").result_rows  # noqa: S608
    return [tuple(round(v, 9) if isinstance(v, float) else v for v in row) for row in rows]


def test_the_owner_in_session_totals_is_the_one_021s_join_named(chdb_database: Client) -> None:
    """027: session_costs reads each session's owner from session_totals (its events and usage feed
    it) where 021 joined session_owner: every column, the person, repo and branch among them, is
    021's view's, migrated, live and merged; docs/queries.md's WHERE on the last day's sessions
    answers their rows."""
    of_021 = f"({view_of_009('session_costs', '021_attribution')})"
    store_before_rollups(chdb_database, before=27)
    chdb_database.command(_OWNED_USAGE.format(shift=86400, where="1", branch="main"))
    chdb_database.command(_OWNED_EVENTS.format(tag="old", shift=3600))
    before = every_row(chdb_database, "session_costs")
    assert len(before) == 300 and {row[-1] for row in before} == {"main"} | {
        f"old-{n}" for n in range(0, 300, 2)
    }

    assert "027_session_owner_in_totals" in apply_migrations(chdb_database)
    assert every_row(chdb_database, "session_costs") == before
    # Live: newer events on another branch, newer usage of a third of the sessions.
    chdb_database.command(_OWNED_EVENTS.format(tag="new", shift=60))
    chdb_database.command(_OWNED_USAGE.format(shift=0, where="number % 30 = 0", branch="next"))
    live = every_row(chdb_database, "session_costs")
    assert live == every_row(chdb_database, of_021)
    assert {row[-1] for row in live} >= {f"new-{n}" for n in range(0, 300, 2)} | {"next"}
    chdb_database.command("OPTIMIZE TABLE session_totals FINAL")
    assert every_row(chdb_database, "session_costs") == live

    recent = every_row(
        chdb_database,
        "session_costs",
        "WHERE session_id IN (SELECT scope FROM scope_hours WHERE hour >= now() - INTERVAL 1 DAY)",
    )
    active = {
        row[0]
        for row in chdb_database.query(
            "SELECT DISTINCT scope FROM scope_hours WHERE hour >= now() - INTERVAL 1 DAY"
        ).result_rows
    }
    assert 0 < len(recent) < len(live)
    assert recent == [row for row in live if row[0] in active]
