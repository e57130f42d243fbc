"""The live window (020_live_window.sql, store/live_window.py): the dashboard's roster, costs and
edges read the scopes active lately and the newest finished ones, found through scope_hours, and
answer what the `agents` and `agent_costs` views answer for those scopes."""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

import clickhouse_connect
from clickhouse_connect.driver.client import Client

from agentwatch.format import utc_datetime
from agentwatch.store import agents_sql, live_roster, live_window, queries
from agentwatch.store.answer import Answer, from_rows
from agentwatch.store.migrations import SCHEMA_DIR, apply_migrations
from agentwatch.store.writes import insert_batch
from tests.integration.test_rollups import history, store_before_rollups
from tests.integration.test_schema import split

# Finished sessions days ago (a lead and its subagent each, one API message each, one message from
# the subagent to its lead), five seconds apart; then one live session, now.
_OLD_EVENTS = """
INSERT INTO events (id, timestamp, event, kind, agent, parent_agent, session_id, host)
SELECT concat('old-', toString(number)),
    now64(3) - INTERVAL 3 DAY + toIntervalMillisecond(intDiv(number, 4) * 5000 + number % 4),
    ['SessionStart', 'SubagentStart', 'SubagentStop', 'SessionEnd'][1 + number % 4], 'agent',
    if(number % 4 IN (1, 2), 'sub', 'lead'), if(number % 4 IN (1, 2), 'lead', ''),
    concat('s-', leftPad(toString(intDiv(number, 4)), 6, '0')),
    concat('host-', toString(intDiv(number, 4) % 3))
FROM numbers({sessions} * 4)"""
_OLD_USAGE = """
INSERT INTO usage_in (session_id, message_id, request_id, timestamp, agent, host, model, output_tokens,
                      cost_usd, version)
SELECT concat('s-', leftPad(toString(number), 6, '0')), concat('m-', toString(number)), 'r',
    now64(3) - INTERVAL 3 DAY + toIntervalMillisecond(number * 5000 + 30), 'lead',
    concat('host-', toString(number % 3)),
    'claude-opus-4-1', 100, 0.5, 1
FROM numbers({sessions})"""
_OLD_MESSAGES = """
INSERT INTO message_envelopes (id, timestamp, v, event, kind, agent, team, peer, text, session_id, host, data)
SELECT concat('msg-', toString(number)),
    now64(3) - INTERVAL 3 DAY + toIntervalMillisecond(number * 5000 + 20), 1,
    'PostToolUse', 'message', 'sub', 'crew', 'lead', 'done', concat('s-', leftPad(toString(number), 6, '0')),
    concat('host-', toString(number % 3)), '{{"from":"sub","to":"lead","summary":"done","message":"ok"}}'
FROM numbers({sessions})"""
_LIVE = """
INSERT INTO events (id, timestamp, event, kind, agent, parent_agent, session_id, host, tool_name)
VALUES ('live-1', now64(3) - INTERVAL 5 SECOND, 'SessionStart', 'agent', 'lead', '', 'live', 'host-9', ''),
       ('live-2', now64(3) - INTERVAL 2 SECOND, 'PreToolUse', 'tool_call', 'sub', 'lead', 'live', 'host-9',
        'Bash')"""
_LIVE_MESSAGE = """
INSERT INTO message_envelopes (id, timestamp, v, event, kind, agent, team, peer, text, session_id, host, data)
VALUES ('msg-live', now64(3), 1, 'PostToolUse', 'message', 'lead', 'crew', 'sub', 'go', 'live', 'host-9',
        '{"from":"lead","to":"sub","summary":"go","message":"go"}')"""
# The roster's columns that do not move with the clock between two questions.
STEADY = ("agent", "host", "scope", "team", "parent_agent", "state", "current_tool", "first_seen",
          "last_seen", "tool_calls", "errors", "messages_sent", "events")  # fmt: skip


def a_history(client: Client, sessions: int) -> None:
    apply_migrations(client)
    for sql in (_OLD_EVENTS, _OLD_USAGE, _OLD_MESSAGES):
        client.command(sql.format(sessions=sessions))
    client.command(_LIVE)
    client.command(_LIVE_MESSAGE)


def ask(client: Client, query: queries.Query) -> list[dict[str, Any]]:
    result = client.query(query.sql, parameters=query.params)
    return [dict(zip(result.column_names, row, strict=True)) for row in result.result_rows]


def newest_scopes(sessions: int, count: int) -> set[tuple[str, str]]:
    """The live scope and the newest `count - 1` finished ones."""
    old = {(f"host-{i % 3}", f"s-{i:06d}") for i in range(sessions - count + 1, sessions)}
    return {("host-9", "live"), *old}


def test_the_roster_is_the_agents_view_of_the_live_scope_and_the_newest_finished_ones(
    chdb_database: Client,
) -> None:
    a_history(chdb_database, sessions=40)
    roster = ask(chdb_database, queries.roster(5))
    window = newest_scopes(40, 5)
    in_window = ", ".join(f"('{h}', '{s}')" for h, s in sorted(window))
    view = ask(
        chdb_database,
        queries.Query(
            f"SELECT * FROM agents WHERE (host, scope) IN ({in_window}) "  # noqa: S608 - the test's own names
            "ORDER BY state IN ('lost', 'stopped'), last_seen DESC, agent"
        ),
    )
    assert len(view) == 10, "a lead and its subagent in each of the 5 scopes"
    assert [[r[c] for c in STEADY] for r in roster] == [[r[c] for c in STEADY] for r in view[:5]]
    assert [r["scope"] for r in roster[:2]] == ["live", "live"] and roster[0]["state"] not in (
        "lost",
        "stopped",
    )
    first = roster[0]
    assert (first["agents_total"], first["events_total"]) == (10, sum(r["events"] for r in view))
    assert first["messages_total"] == sum(r["messages_sent"] for r in view) == 5
    # Every agent of a bigger window: the view restricted to the 300 newest scopes (all 41).
    everyone = ask(chdb_database, queries.roster(300))
    assert len(everyone) == 82 == everyone[0]["agents_total"]


def test_the_roster_costs_and_edges_read_the_window_not_the_history(chdb_database: Client) -> None:
    sessions = 20_000
    a_history(chdb_database, sessions=sessions)
    for table in ("agent_key_rollup", "agent_cost_rollup", "scope_hours"):
        chdb_database.command(f"OPTIMIZE TABLE {table} FINAL")
    agents = chdb_database.query("SELECT count() FROM agent_key_rollup").result_rows[0][0]
    assert agents == 2 * sessions + 2
    roster = queries.roster(5)
    read = int(chdb_database.query(roster.sql, parameters=roster.params).summary["read_rows"])
    assert read < agents / 2, f"the roster read {read} rows of a history of {agents} agents"
    # The costs: the window's agents and teams only, each as agent_costs says.
    window = newest_scopes(sessions, 300)
    rows = ask(chdb_database, queries.DASHBOARD_COSTS)
    costs = {(r["host"], r["scope"], r["name"]): r["usd"] for r in rows if r["what"] == "agent"}
    assert {(h, s) for h, s, _ in costs} == window - {("host-9", "live")}, "the live session has no usage"
    stored = ask(chdb_database, queries.Query("SELECT host, scope, agent, cost_usd FROM agent_costs"))
    assert costs == {
        (r["host"], r["scope"], r["agent"]): r["cost_usd"]
        for r in stored
        if (r["host"], r["scope"]) in window
    }
    # The edges of the window's hours (from the hour of its oldest scope's latest activity): the
    # live message, and the old ones of that hour and later, not those of the history before.
    edges = ask(chdb_database, queries.window_edges(roster_limit=5))
    # The window's first hour: that of the newest 4 x 5 rows of scope_hours (at least the hour of
    # the oldest of the roster's 5 scopes; one more when that hour holds fewer than 20 scopes).
    (first,) = ask(
        chdb_database,
        queries.Query(f"SELECT {live_window.WINDOW_START} AS start", {"limit": 5, "lost_after_s": 600}),
    )
    start = first["start"]
    oldest = min(r["scope_last_seen"] for r in ask(chdb_database, queries.roster(5)))
    assert start <= oldest.replace(tzinfo=start.tzinfo) and oldest.timestamp() - start.timestamp() < 2 * 3600
    since = queries.Query(
        "SELECT count() AS n FROM messages FINAL "
        "WHERE from_agent = 'sub' AND timestamp >= {start:DateTime64(3, 'UTC')}",
        {"start": start},
    )
    (old,) = ask(chdb_database, since)
    assert 0 < old["n"] < sessions / 10
    got = sorted((e["from_agent"], e["to_agent"], e["messages"]) for e in edges)
    assert got == [("lead", "sub", 1), ("sub", "lead", old["n"])]


def test_scope_hours_backfilled_equals_scope_hours_filled_live(
    chdb_engine: tuple[str, Client], chdb_database: Client
) -> None:
    events, messages = split(history())
    store_before_rollups(chdb_database, before=20)
    insert_batch(chdb_database, events, messages)
    assert apply_migrations(chdb_database)[:1] == ["020_live_window"]  # and those after it
    dsn, root = chdb_engine
    root.command("CREATE DATABASE live_window_filled_live")
    live = clickhouse_connect.get_client(dsn=dsn, database="live_window_filled_live")
    try:
        apply_migrations(live)
        insert_batch(live, events, messages)
        latest = (
            "SELECT host, scope, max(last_seen) FROM scope_hours GROUP BY host, scope ORDER BY host, scope"
        )
        backfilled = chdb_database.query(latest).result_rows
        assert backfilled == live.query(latest).result_rows
        assert backfilled
        view = (
            "SELECT host, scope, max(scope_last_seen) FROM agents GROUP BY host, scope ORDER BY host, scope"
        )
        assert backfilled == chdb_database.query(view).result_rows
    finally:
        live.close()
        root.command("DROP DATABASE live_window_filled_live")


def test_the_generated_sql_is_current() -> None:
    written = SCHEMA_DIR.joinpath(Path(live_window.OUTPUT).name).read_text(encoding="utf-8")
    assert written == live_window.render(), f"regenerate it: {live_window.COMMAND}"
    assert written.count(f"{agents_sql.scope_sql()} AS scope") == 3
    flat = SCHEMA_DIR.joinpath(Path(live_window.FLAT_OUTPUT).name).read_text(encoding="utf-8")
    assert flat == live_window.render_flat(), f"regenerate it: {live_window.FLAT_COMMAND}"
    since = SCHEMA_DIR.joinpath(Path(live_window.SINCE_OUTPUT).name).read_text(encoding="utf-8")
    assert since == live_window.render_since(), f"regenerate it: {live_window.SINCE_COMMAND}"


def test_the_flat_agents_views_answer_the_rows_of_the_layered_ones(chdb_database: Client) -> None:
    """026 replaced the `agents` view and agents_since with a two-layer SELECT, and 028 asked
    agents_since's scopes more simply: on a history with live, finished and cost-only agents, every
    row of both is what the four-layer SELECT of 012 and 020 answers, column for column."""
    a_history(chdb_database, sessions=40)
    chdb_database.command(  # an agent known by its API messages alone, in the live session
        "INSERT INTO usage_in (session_id, message_id, request_id, timestamp, agent, parent_agent, host, "
        "model, output_tokens, cost_usd, version) VALUES ('live', 'm-review', 'r', now64(3), 'reviewer', "
        "'lead', 'host-9', 'gpt-5.5', 50, 0.01, 1)"
    )
    since = "now64(3) - INTERVAL 1 DAY"
    layered = live_window._SINCE_SCOPES_020.replace("{since:DateTime64(3, 'UTC')}", f"({since})")
    pairs = [("agents", agents_sql.agents_select_layered()),
             (f"agents_since(since = {since})", agents_sql.agents_select_layered(layered))]  # fmt: skip
    every = "SELECT * EXCEPT (silent_s) FROM {} ORDER BY host, scope, agent"  # silent_s: of its own now
    for flat, old in pairs:
        got = chdb_database.query(every.format(flat)).result_rows
        assert got == chdb_database.query(every.format(f"({old})")).result_rows, flat
        assert {"lead", "sub", "reviewer"} <= {r[0] for r in got}, flat


def test_agents_since_is_the_agents_view_of_the_scopes_active_since(chdb_database: Client) -> None:
    a_history(chdb_database, sessions=40)
    (start,) = ask(
        chdb_database, queries.Query("SELECT min(timestamp) AS t FROM events WHERE session_id = 's-000030'")
    )
    since = {"since": start["t"]}  # the newest 10 old sessions, and the live one
    got = ask(
        chdb_database,
        queries.Query(
            "SELECT * FROM agents_since(since = {since:DateTime64(3, 'UTC')}) ORDER BY host, scope, agent",
            since,
        ),
    )
    want = ask(
        chdb_database,
        queries.Query(
            "SELECT * FROM agents WHERE (host, scope) IN (SELECT host, scope FROM agents "
            "GROUP BY host, scope HAVING max(scope_last_seen) >= {since:DateTime64(3, 'UTC')}) "
            "ORDER BY host, scope, agent",
            since,
        ),
    )
    steady = [[r[c] for c in STEADY] for r in got]
    assert steady == [[r[c] for c in STEADY] for r in want]
    assert len(got) == 2 * 11


# A session with a team: a lead with a priced and an unpriced call, its subagent with a call of its
# own and no event (usage alone), and a team member's call: every kind of cost row the fold makes.
_MIXED_USAGE = """
INSERT INTO usage_in (session_id, message_id, request_id, timestamp, agent, parent_agent, team, host,
                      model, output_tokens, cost_usd, version)
VALUES ('live', 'mx-1', 'r', now64(3) - INTERVAL 4 SECOND, 'lead', '', 'crew', 'host-9', 'claude-opus-4-1',
        200, 0.25, 1),
       ('live', 'mx-2', 'r', now64(3) - INTERVAL 3 SECOND, 'lead', '', 'crew', 'host-9', 'a-model-unknown',
        50, NULL, 1),
       ('live', 'mx-3', 'r', now64(3) - INTERVAL 3 SECOND, 'helper', 'lead', 'crew', 'host-9',
        'claude-opus-4-1', 70, 0.125, 1),
       ('live', 'mx-4', 'r', now64(3) - INTERVAL 1 SECOND, 'sub', 'lead', 'crew', 'host-9', 'claude-opus-4-1',
        30, 0.0625, 1)"""


def asker(client: Client) -> live_roster.Ask:
    def ask_one(query: queries.Query) -> Answer:
        result = client.query(query.sql, parameters=query.params)
        return from_rows(result.column_names, [t.name for t in result.column_types], result.result_rows)

    return ask_one


def steady(rows: list[dict[str, Any]]) -> list[list[Any]]:
    """The STEADY columns, times as seconds (an aware and a naive UTC time are the same time)."""
    return [[utc_datetime(r[c]) if isinstance(r[c], dt.datetime) else r[c] for c in STEADY] for r in rows]


def test_the_folded_window_equals_the_one_question_roster_and_costs(chdb_database: Client) -> None:
    """store/live_roster.py asks four small questions and folds them with agents.py's rules: its
    roster, totals and costs are those of queries.roster and queries.dashboard_costs."""
    a_history(chdb_database, sessions=40)
    chdb_database.command(_MIXED_USAGE)
    ask_one = asker(chdb_database)
    for limit, lost_after_s in ((5, 600), (300, 600), (300, 1)):
        window = live_roster.read(ask_one, limit, lost_after_s)
        reference = ask_one(queries.roster(limit, lost_after_s)).dicts()
        assert steady(window.roster) == steady(reference)
        for mine, theirs in zip(window.roster, reference, strict=True):
            assert abs(mine["silent_s"] - theirs["silent_s"]) < 5
            for column in ("state_event", "state_note", "state_id", "agent_type", "session_id"):
                assert mine[column] == theirs[column], column
            assert utc_datetime(mine["state_since"]) == utc_datetime(theirs["state_since"])
        first = reference[0]
        assert (window.agents_total, window.events_total, window.messages_total, window.done_total) == (
            first["agents_total"],
            first["events_total"],
            first["messages_total"],
            first["done_total"],
        )
        expected = sorted(ask_one(queries.dashboard_costs(limit, lost_after_s)).rows, key=repr)
        got = sorted(window.costs, key=repr)
        assert [r[:4] + r[6:] for r in got] == [r[:4] + r[6:] for r in expected]
        for mine_cost, their_cost in zip(got, expected, strict=True):
            for a, b in zip(mine_cost[4:6], their_cost[4:6], strict=True):
                assert (a is None) == (b is None) and (a is None or abs(a - b) < 1e-9)
    helper = next(r for r in live_roster.read(ask_one, 300, 600).roster if r["agent"] == "helper")
    assert (helper["events"], helper["parent_agent"], helper["team"]) == (0, "lead", "crew")
    lead = next(r for r in window.costs if r[0] == "agent" and r[3] == "lead" and r[2] == "live")
    assert lead[4] == 0.25 and lead[5] == 0.25 + 0.125 + 0.0625 and lead[7] == 1


def test_the_folded_window_reads_the_window_not_the_history(chdb_database: Client) -> None:
    sessions = 20_000
    a_history(chdb_database, sessions=sessions)
    for table in ("agent_key_rollup", "agent_cost_rollup", "scope_hours"):
        chdb_database.command(f"OPTIMIZE TABLE {table} FINAL")
    scopes = [(str(h), str(s)) for h, s in asker(chdb_database)(live_roster.scopes_query(5, 600)).rows]
    assert set(scopes) == newest_scopes(sessions, 5)
    for query in (live_roster.agents_query(scopes), live_roster.costs_query(scopes)):
        read = int(chdb_database.query(query.sql, parameters=query.params).summary["read_rows"])
        assert read < sessions / 2, f"{query.sql[:60]} read {read} rows of {2 * sessions} agents"


def test_the_watermark_asks_the_events_and_messages_since_the_oldest_asked(chdb_database: Client) -> None:
    """queries.stored_ids with a time reads events and messages from then on (ordered by time), and
    finds every stored one of the ids asked, as event_ids does; an id stored before it is not."""
    a_history(chdb_database, sessions=40)
    newest = chdb_database.query(
        "SELECT id, toUnixTimestamp64Milli(timestamp) / 1000 FROM "
        "(SELECT id, timestamp FROM events UNION ALL SELECT id, timestamp FROM messages) "
        "ORDER BY timestamp DESC LIMIT 60"
    ).result_rows
    ids = [str(i) for i, _ in newest] + ["never-stored"]
    oldest = min(float(t) for _, t in newest)
    assert {r["id"] for r in ask(chdb_database, queries.stored_ids(ids, oldest))} == set(ids) - {
        "never-stored"
    }
    assert {r["id"] for r in ask(chdb_database, queries.stored_ids(ids, oldest + 1.0))} < set(ids[:-1])
    in_events = {r["id"] for r in ask(chdb_database, queries.stored_ids(ids))}
    assert in_events and in_events <= {r["id"] for r in ask(chdb_database, queries.stored_ids(ids, oldest))}
