"""tool_calls as 017_history_windows.sql and 018_time_windows.sql read it (call_rollup's whole rows,
loose_calls, and `events` for results without their call) against the view as 004 defined it over
the raw events:
the same rows, whatever the engine has merged, for calls whose result falls in the next hour,
calls still running, results without a call, a second result after the first was paired, and a
tool_use_id used twice in one insert; and loose_calls keeps only the calls that are not one whole row."""

from __future__ import annotations

import re
from typing import Any

from clickhouse_connect.driver.client import Client

from agentwatch.store.migrations import apply_migrations
from tests.integration.test_rollups import store_before_rollups

# tool_calls as 004_views.sql defined it: every call paired from the events at each question.
RAW_TOOL_CALLS = """
SELECT
    session_id,
    tool_use_id,
    argMin(agent, (is_call = 0, timestamp, id)) AS agent,
    argMin(team, (is_call = 0, timestamp, id)) AS team,
    argMin(agent_id, (is_call = 0, timestamp, id)) AS agent_id,
    argMin(host, (is_call = 0, timestamp, id)) AS host,
    argMin(tool_name, (is_call = 0, timestamp, id)) AS tool,
    argMin(text, (is_call = 0, timestamp, id)) AS text,
    minOrNullIf(timestamp, is_call = 1) AS started,
    maxOrNullIf(timestamp, is_call = 0) AS ended,
    coalesce(maxOrNullIf(payload_duration_ms, is_call = 0), dateDiff('millisecond', started, ended))
        AS duration_ms,
    multiIf(
        countIf(is_call = 1) = 0, 'orphan',
        countIf(event = 'PermissionDenied') > 0, 'denied',
        countIf(event = 'PostToolUseFailure' AND is_interrupt) > 0, 'interrupted',
        countIf(event = 'PostToolUseFailure') > 0, 'error',
        countIf(event = 'PostToolUse') > 0, 'ok',
        'running'
    ) AS status,
    anyIf(failure_error, event = 'PostToolUseFailure') AS error
FROM
(
    SELECT
        tool_use_id, agent, team, session_id, agent_id, host, tool_name, text, timestamp, id, event,
        toUInt8(event = 'PreToolUse') AS is_call,
        if(event = 'PreToolUse', NULL, JSONExtract(data, 'duration_ms', 'Nullable(Int64)'))
            AS payload_duration_ms,
        if(event = 'PostToolUseFailure', JSONExtractBool(data, 'is_interrupt'), false) AS is_interrupt,
        if(event = 'PostToolUseFailure', JSONExtractString(data, 'error'), '') AS failure_error
    FROM events FINAL
    WHERE tool_use_id != ''
      AND event IN ('PreToolUse', 'PostToolUse', 'PostToolUseFailure', 'PermissionDenied')
)
GROUP BY session_id, tool_use_id
"""
ORDER = " ORDER BY session_id, tool_use_id"
# The windows a person asks for, the hour before the scripted hour's start included.
WINDOWS = (
    "",
    " WHERE started >= toStartOfHour(now64(3)) - INTERVAL 2 HOUR",
    " WHERE started >= {h} + INTERVAL 30 MINUTE",
)
# The scripted hour: two hours ago, whole, so that its next hour is in the past too.
HOUR = "toStartOfHour(now64(3)) - INTERVAL 2 HOUR"
COLUMNS = "id, timestamp, event, kind, agent, team, session_id, host, tool_name, tool_use_id, text, data"


def event(key: str, minute: float, name: str, tool_use_id: str, data: str = "{}", agent: str = "a") -> str:
    """One events row, `minute` minutes after the scripted hour's start."""
    at = f"{HOUR} + toIntervalMillisecond({int(minute * 60_000)})"
    return (
        f"('{key}', {at}, '{name}', 'tool', '{agent}', 't', 's-1', 'h', 'Bash', '{tool_use_id}', "
        f"'{name} of {tool_use_id} by {agent}', '{data}')"
    )


def insert(client: Client, *rows: str) -> None:
    client.command(f"INSERT INTO events ({COLUMNS}) VALUES {', '.join(rows)}")  # noqa: S608 (the test's constants)


def answers(client: Client, sql: str) -> list[tuple[Any, ...]]:
    return [tuple(row) for row in client.query(sql).result_rows]


def assert_like_004(client: Client) -> None:
    for window in WINDOWS:
        where = window.format(h=HOUR)
        view = answers(client, f"SELECT * FROM tool_calls{where}{ORDER}")  # noqa: S608
        raw = answers(client, f"SELECT * FROM ({RAW_TOOL_CALLS}){where}{ORDER}")  # noqa: S608
        assert view == raw, where
        assert view, where


FAILURE = '{"error": "Exit code 1", "is_interrupt": false, "duration_ms": 30}'


def script(client: Client) -> None:
    """Calls of every shape, in inserts as the store makes them (one block per batch)."""
    insert(
        client,
        event("w1", 10, "PreToolUse", "tu-whole"),  # a call and its result: one whole row
        event("w2", 11, "PostToolUse", "tu-whole", '{"duration_ms": 61000}'),
        event("c1", 59.99, "PreToolUse", "tu-cross"),  # its result in the next hour
        event("r1", 0, "PreToolUse", "tu-running"),  # no result yet
        event("o1", 5, "PostToolUse", "tu-orphan", agent="z"),  # no call stored
        event("t1", 20, "PreToolUse", "tu-twice"),  # paired in its hour, then a second result
        event("t2", 21, "PostToolUseFailure", "tu-twice", FAILURE),
        event("s1", 40, "PreToolUse", "tu-split"),  # its result comes in the next insert
        # A tool_use_id used twice in one hour, in one insert; and another in two inserts (each
        # pair a whole row of its own part until the engine merges them: tool_calls reads them
        # with FINAL, as one call, where tool_calls_since shows it twice meanwhile).
        event("e1", 45, "PreToolUse", "tu-reused-apart"),
        event("e2", 46, "PostToolUse", "tu-reused-apart"),
        event("d1", 30, "PreToolUse", "tu-reused"),
        event("d2", 31, "PermissionDenied", "tu-reused"),
        event("d3", 32, "PreToolUse", "tu-reused"),
        event("d4", 33, "PostToolUse", "tu-reused"),
    )
    insert(
        client,
        event("c2", 60.01, "PostToolUseFailure", "tu-cross", FAILURE),
        event("t3", 65, "PermissionDenied", "tu-twice"),
        event("s2", 41, "PostToolUse", "tu-split"),
        event("e3", 47, "PreToolUse", "tu-reused-apart"),
        event("e4", 48, "PostToolUseFailure", "tu-reused-apart", FAILURE),
    )


def test_tool_calls_answers_like_the_events_whatever_is_merged(chdb_database: Client) -> None:
    apply_migrations(chdb_database)
    script(chdb_database)
    assert_like_004(chdb_database)
    # loose_calls merged, call_rollup not: tu-split's halves cancelled there, still two rows here.
    chdb_database.command("OPTIMIZE TABLE loose_calls FINAL")
    assert chdb_database.command("SELECT count() FROM call_rollup WHERE tool_use_id = 'tu-split'") == 2
    assert chdb_database.command("SELECT count() FROM loose_calls WHERE tool_use_id = 'tu-split'") == 0
    assert_like_004(chdb_database)
    for table in ("events", "call_rollup"):
        chdb_database.command(f"OPTIMIZE TABLE {table} FINAL")
    assert_like_004(chdb_database)
    # What stays loose: the crossing call's two halves, the running call, the orphan, and the second
    # result of tu-twice; the whole calls are forgotten.
    loose = "SELECT tool_use_id, count() FROM loose_calls GROUP BY tool_use_id ORDER BY tool_use_id"
    assert answers(chdb_database, loose) == [
        ("tu-cross", 2),
        ("tu-orphan", 1),
        ("tu-running", 1),
        ("tu-twice", 1),
    ]
    calls = {
        row[1]: row
        for row in answers(chdb_database, "SELECT * FROM tool_calls ORDER BY session_id, tool_use_id")
    }
    assert (calls["tu-twice"][11], calls["tu-cross"][11], calls["tu-orphan"][11]) == (
        "denied",
        "error",
        "orphan",
    )
    assert calls["tu-orphan"][2] == "z"  # the orphan's agent, from its result


def test_the_backfill_on_a_store_before_017_answers_the_same(chdb_database: Client) -> None:
    store_before_rollups(chdb_database, before=17)
    script(chdb_database)
    assert "017_history_windows" in apply_migrations(chdb_database)
    assert_like_004(chdb_database)
    # Live from now on, over the backfilled rows.
    insert(
        chdb_database, event("x1", 70, "PostToolUse", "tu-running"), event("x2", 80, "PreToolUse", "tu-late")
    )
    assert_like_004(chdb_database)


def test_a_store_before_018_migrates_and_a_window_reads_its_granules(chdb_database: Client) -> None:
    store_before_rollups(chdb_database, before=18)
    # Old history (three days ago, paired calls) under the scripted hour.
    chdb_database.command(
        "INSERT INTO events (id, timestamp, event, kind, agent, session_id, tool_name, tool_use_id) "
        "SELECT concat('old', toString(number)), now64(3) - INTERVAL 3 DAY + toIntervalMillisecond(number), "
        "if(number % 2 = 0, 'PreToolUse', 'PostToolUse'), 'tool_call', 'old-agent', 'old-session', 'Bash', "
        "concat('tu-old-', toString(intDiv(number, 2))) FROM numbers(400000)"
    )
    chdb_database.command("OPTIMIZE TABLE call_rollup FINAL")
    script(chdb_database)
    assert "018_time_windows" in apply_migrations(chdb_database)
    assert_like_004(chdb_database)
    # The index on `at` is built for the rows stored before (a mutation): then a window of
    # tool_calls reads the window's granules of call_rollup, not the 25 of the old calls.
    chdb_database.command("ALTER TABLE call_rollup MATERIALIZE INDEX by_at SETTINGS mutations_sync = 2")
    window = "SELECT * FROM tool_calls WHERE started >= toStartOfHour(now64(3)) - INTERVAL 2 HOUR"
    plan = "\n".join(r[0] for r in chdb_database.query(f"EXPLAIN indexes = 1 {window}").result_rows)
    found = re.search(r"Name: by_at\n(?:.*\n)*?\s*Granules: (\d+)/(\d+)", plan)
    assert found, plan
    read, total = int(found.group(1)), int(found.group(2))
    assert total > 20 and read * 10 < total, plan
    assert len(answers(chdb_database, window)) == 7  # the scripted calls but the orphan (no start)
