"""The rollups (009_rollups.sql) against the raw history: every rollup-backed view answers exactly
what the same question asked of `events FINAL` / `messages FINAL` answers, after events were
inserted twice, redelivered after a merge, and when the rollups were built by the backfill over
a store that existed before them."""

from __future__ import annotations

import re
import time
from typing import Any

import orjson
import pytest
from clickhouse_connect.driver.client import Client

from agentwatch.store import agents_sql, live_roster, queries, writes
from agentwatch.store.answer import Answer, decode
from agentwatch.store.migrations import (
    MIGRATIONS_TABLE,
    SCHEMA_DIR,
    apply_migrations,
    migrations,
    split_statements,
)
from agentwatch.store.usage import COST_STATE_COLUMNS, USAGE_COLUMNS, UsageRows, insert_usage, usage_rows
from agentwatch.store.writes import insert_batch
from tests.integration.test_schema import Envelope, _scripted, fixture_envelopes, split

# The views as 004 defined them, over the raw tables: the reference answers.
_RAW_VIEWS = ("sessions",)
# The agents (012) over the raw tables, by the same generated rules: per host, scope and name, the
# latest event's fields and the latest state event's, counts, and the messages each sent (a
# message's host is its SendMessage event's).
SILENT = "dateDiff('millisecond', scope_last_seen, now64(3)) / 1000"
RAW_AGENTS = f"""
SELECT
    e.agent AS agent, l.1 AS team, l.2 AS parent_agent, l.3 AS agent_type, l.4 AS agent_id,
    l.5 AS session_id, e.host AS host, first_seen, last_seen, l.6 AS last_event,
    {agents_sql.shown_state_sql("raw_state", SILENT)} AS state,
    if(raw_state IN ({agents_sql.tool_states_sql()}), s.3, '') AS current_tool,
    tool_calls, errors, coalesce(m.sent, 0) AS messages_sent, events, e.scope AS scope,
    if(s.1 = '', NULL, s.4) AS state_since, s.1 AS state_event, s.2 AS state_note, s.5 AS state_id,
    scope_last_seen
FROM
(
    SELECT *, {agents_sql.state_case_sql("s.1", "s.2")} AS raw_state,
        max(last_seen) OVER (PARTITION BY host, scope) AS scope_last_seen
    FROM
    (
        SELECT
            host, scope, agent,
            argMax((toString(team), toString(parent_agent), toString(agent_type), agent_id, session_id,
                    toString(event)), (timestamp, id)) AS l,
            argMaxIf(
                (toString(event), note, toString(tool_name), timestamp, id), (timestamp, id), is_state
            ) AS s,
            min(timestamp) AS first_seen, max(timestamp) AS last_seen,
            countIf(event = 'PreToolUse') AS tool_calls,
            countIf(event IN ('PostToolUseFailure', 'StopFailure')) AS errors, count() AS events
        FROM
        (
            SELECT *, {agents_sql.scope_sql()} AS scope, {agents_sql.is_state_sql()} AS is_state
            FROM (
                SELECT *, if(event = 'Notification', JSONExtractString(data, 'notification_type'), '') AS note
                FROM events FINAL
            )
        )
        GROUP BY host, scope, agent
    )
) AS e
LEFT JOIN
(
    SELECT
        toString(coalesce(ev.host, '')) AS host, {agents_sql.scope_sql("m.team", "m.session_id")} AS scope,
        toString(m.from_agent) AS agent, count() AS sent
    FROM messages AS m FINAL
    LEFT JOIN (SELECT id, any(host) AS host FROM events GROUP BY id) AS ev ON ev.id = m.event_id
    GROUP BY host, scope, agent
) AS m ON m.host = toString(e.host) AND m.scope = e.scope AND m.agent = toString(e.agent)
ORDER BY host, scope, agent
SETTINGS join_use_nulls = 1"""  # noqa: S608 - the project's own generated SQL
VIEW_AGENTS = "SELECT * EXCEPT (silent_s) FROM agents WHERE last_event != 'Usage' ORDER BY host, scope, agent"

# Per tool over the whole history, computed from the raw table with the rollup's own definitions.
RAW_TOOL_STATS = """\
SELECT
    tool_name AS tool, countIf(event = 'PreToolUse') AS calls,
    countIf(event = 'PostToolUseFailure') AS failures,
    countIf(event = 'PostToolUseFailure' AND JSONExtractBool(data, 'is_interrupt')) AS interrupted,
    countIf(event = 'PermissionDenied') AS denied, countIf(event != 'PreToolUse') AS finished,
    if(finished = 0, NULL, round(100 * failures / finished, 1)) AS failure_pct,
    countIf(event != 'PreToolUse' AND duration_ms IS NOT NULL) AS timed,
    quantilesTimingIf(0.5, 0.95)(
        assumeNotNull(duration_ms), event != 'PreToolUse' AND duration_ms IS NOT NULL
    ) AS q,
    if(timed = 0, NULL, toInt64(q[1])) AS p50_ms, if(timed = 0, NULL, toInt64(q[2])) AS p95_ms,
    maxIf(duration_ms, event != 'PreToolUse') AS max_ms,
    toUInt64(greatest(toInt64(calls) - toInt64(finished), 0)) AS unpaired,
    argMaxIf(JSONExtractString(data, 'error'), (timestamp, id),
             event = 'PostToolUseFailure' AND JSONExtractString(data, 'error') != '') AS last_error
FROM events FINAL
WHERE tool_name != '' AND event IN ('PreToolUse', 'PostToolUse', 'PostToolUseFailure', 'PermissionDenied')
GROUP BY tool ORDER BY tool"""
RAW_TOOL_STATS = f"SELECT * EXCEPT q FROM ({RAW_TOOL_STATS})"  # noqa: S608 - constants
ROLLUP_TOOL_STATS = (
    "SELECT tool, calls, failures, interrupted, denied, finished, failure_pct, timed, p50_ms, p95_ms, "
    "max_ms, unpaired, last_error FROM tool_stats WHERE window = 'all' ORDER BY tool"
)
DASHBOARD_TOOL_COLUMNS = (
    "SELECT tool, calls, failures, denied, finished, failure_pct, timed, p50_ms, p95_ms, max_ms, unpaired, "
    "last_error FROM tool_stats WHERE window = 'all' ORDER BY tool"
)
RAW_EDGES = (
    "SELECT team, from_agent, to_agent, count() AS messages, max(timestamp) AS last_at, "
    "argMax(summary, (timestamp, id)) AS last_summary FROM messages FINAL "
    "GROUP BY team, from_agent, to_agent ORDER BY from_agent, to_agent, team"
)
ROLLUP_EDGES = "SELECT * FROM team_edges ORDER BY from_agent, to_agent, team"


OWNER = ("person", "repo", "branch")  # 021_attribution
OWNER_COLUMNS = ", ".join(OWNER)


def raw_view(name: str) -> str:
    """The CREATE VIEW of `name` from 004_views.sql, renamed raw_<name>."""
    text = SCHEMA_DIR.joinpath("004_views.sql").read_text(encoding="utf-8")
    for statement in split_statements(text):
        if re.search(rf"CREATE VIEW IF NOT EXISTS {name} AS", statement):
            return statement.replace(f"VIEW IF NOT EXISTS {name} AS", f"VIEW IF NOT EXISTS raw_{name} AS")
    raise LookupError(name)


def count(client: Client, sql: str) -> int:
    return int(client.query(sql).result_rows[0][0])


def answers(client: Client, sql: str) -> list[tuple[Any, ...]]:
    return [tuple(row) for row in client.query(sql).result_rows]


def assert_rollups_match_raw(client: Client) -> None:
    for name in _RAW_VIEWS:
        client.command(raw_view(name))
        key = "session_id" if name == "sessions" else "agent"
        raw = answers(client, f"SELECT * FROM raw_{name} ORDER BY {key}")  # noqa: S608 - fixed names
        rolled = answers(client, f"SELECT * EXCEPT ({OWNER_COLUMNS}) FROM {name} ORDER BY {key}")  # noqa: S608
        assert rolled == raw, name
        assert raw, name
    assert answers(client, VIEW_AGENTS) == answers(client, RAW_AGENTS)
    assert answers(client, RAW_AGENTS), "the history has agents"
    assert answers(client, ROLLUP_TOOL_STATS) == answers(client, RAW_TOOL_STATS)
    # The dashboard's tools over all time (tool_daily) answer what the view's window 'all' does.
    tools = queries.tool_stats(None, limit=1000)
    dashboard = [(*row[:7], *row[8:]) for row in client.query(tools.sql, parameters=tools.params).result_rows]
    view = answers(client, DASHBOARD_TOOL_COLUMNS)
    assert sorted(dashboard, key=lambda row: row[0]) == view
    assert answers(client, ROLLUP_EDGES) == answers(client, RAW_EDGES)
    assert answers(client, RAW_EDGES), "the scripted history has messages"
    calls = answers(client, CALLS_SINCE)
    assert calls == answers(client, RAW_CALLS_SINCE)
    assert calls, "the history has tool calls"


# The per-call view of a window, and the raw per-call view's answer for the same window.
CALLS_SINCE = (
    "SELECT * FROM tool_calls_since(since = now64(3) - INTERVAL 1 DAY) ORDER BY session_id, tool_use_id"
)
RAW_CALLS_SINCE = (
    "SELECT * FROM tool_calls WHERE started >= now64(3) - INTERVAL 1 DAY ORDER BY session_id, tool_use_id"
)


def history() -> list[Envelope]:
    return _scripted(time.time() - 20) + fixture_envelopes(time.time() - 4000)


def test_duplicates_and_redelivery_after_a_merge_are_counted_once(chdb_database: Client) -> None:
    apply_migrations(chdb_database)
    envelopes = history()
    events, messages = split(envelopes)
    insert_batch(chdb_database, events + events[:5], messages + messages)  # repeats inside one batch
    insert_batch(chdb_database, events, messages)  # the whole batch again
    merged = (
        "events",
        "messages",
        "event_ids",
        "tool_hourly",
        "session_rollup",
        "agent_key_rollup",
        "agent_cost_rollup",
        "call_rollup",
    )
    for table in merged:
        chdb_database.command(f"OPTIMIZE TABLE {table} FINAL")
    insert_batch(chdb_database, events[::3], messages[::2])  # redelivered after the merge
    stored = chdb_database.query("SELECT count() FROM events").result_rows[0][0]
    assert stored == len({env["id"] for _, env, _ in envelopes if env["kind"] != "message"})
    assert_rollups_match_raw(chdb_database)


def store_before_rollups(client: Client, before: int = 9) -> None:
    """The store as it was before migration `before` (009, the rollups): the earlier migrations
    only, recorded as applied."""
    client.command(
        f"CREATE TABLE {MIGRATIONS_TABLE} (version UInt32, name String, applied_at DateTime DEFAULT now()) "
        "ENGINE = ReplacingMergeTree ORDER BY version"
    )
    for version, name, sql in migrations():
        if version >= before:
            break
        for statement in split_statements(sql):
            client.command(statement)
        client.insert(MIGRATIONS_TABLE, [[version, name]], column_names=["version", "name"])


def test_backfill_on_an_existing_store_equals_rollups_filled_live(chdb_database: Client) -> None:
    envelopes = history()
    events, messages = split(envelopes)
    store_before_rollups(chdb_database)  # and history written into it:
    insert_batch_raw(chdb_database, events, messages)
    insert_batch_raw(chdb_database, events[::2], messages)  # duplicates, before the rollups existed
    assert "009_rollups" in apply_migrations(chdb_database)
    assert_rollups_match_raw(chdb_database)
    # Live from now on: new events and redeliveries on top of the backfill.
    later = _scripted(time.time() - 5)
    more_events, more_messages = split(later)
    insert_batch(chdb_database, more_events + events[:7], more_messages)
    assert_rollups_match_raw(chdb_database)


def test_the_call_rollup_backfill_on_a_store_with_call_events_equals_it_filled_live(
    chdb_database: Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    """010 on a store that ran 009: call_rollup is filled from call_events, which goes."""
    events, messages = split(history())
    store_before_rollups(chdb_database, before=10)
    with monkeypatch.context() as m:  # the 009 write path (into `events`: no events_in yet)
        m.setattr(writes, "EVENTS_TABLE", "events")
        insert_batch(chdb_database, events, messages)  # call_events filled live
    assert count(chdb_database, "SELECT count() FROM call_events") > 10
    assert apply_migrations(chdb_database) == [name for version, name, _ in migrations() if version >= 10]
    tables = "SELECT name FROM system.tables WHERE database = currentDatabase() AND name LIKE 'call_%'"
    assert sorted(r[0] for r in chdb_database.query(tables).result_rows) == ["call_rollup", "call_rollup_mv"]
    assert_rollups_match_raw(chdb_database)
    later = _scripted(time.time() - 5)
    more_events, more_messages = split(later)
    insert_batch(chdb_database, more_events + events[:7], more_messages)
    assert_rollups_match_raw(chdb_database)


def insert_batch_raw(client: Client, events: list[bytes], messages: list[bytes]) -> None:
    """The pre-009 write path: straight into the tables, no id check."""
    from agentwatch.store.writes import INSERT_SETTINGS

    client.raw_insert("events", insert_block=b"\n".join(events), fmt="JSONEachRow", settings=INSERT_SETTINGS)
    client.raw_insert(
        "message_envelopes", insert_block=b"\n".join(messages), fmt="JSONEachRow", settings=INSERT_SETTINGS
    )


def test_the_roster_holds_an_agent_older_than_the_newest_100000_events(chdb_database: Client) -> None:
    apply_migrations(chdb_database)
    old = _scripted(time.time() - 86400 * 3)
    events, messages = split(old)
    insert_batch(chdb_database, events, messages)
    # 100,000 newer events of other agents, straight from numbers().
    chdb_database.command(
        "INSERT INTO events (id, timestamp, event, kind, agent, session_id) "
        "SELECT concat('bulk', toString(number)), now64(3) - toIntervalMillisecond(number), 'PreToolUse', "
        "'tool_call', concat('busy-', toString(number % 7)), 'bulk-session' FROM numbers(100000)"
    )
    old_agents = {str(env["agent"]) for _, env, _ in old}
    recent = queries.recent_events(2000)
    recent_agents = {r[4] for r in chdb_database.query(recent.sql, parameters=recent.params).result_rows}
    assert not old_agents & recent_agents
    roster = queries.roster(300)
    names = [r[0] for r in chdb_database.query(roster.sql, parameters=roster.params).result_rows]
    assert old_agents <= set(names)
    assert set(names[:7]) == {f"busy-{i}" for i in range(7)}  # the newest first


def test_the_feed_at_open_asks_the_last_day_first_and_answers_what_the_whole_history_does(
    chdb_database: Client,
) -> None:
    """live_roster.newest_events: the last day when it holds the newest `limit` rows, else everything;
    the same rows either way (events and messages, of the day and of three days ago)."""
    apply_migrations(chdb_database)
    events, messages = split(_scripted(time.time() - 86400 * 3))
    insert_batch(chdb_database, events, messages)
    chdb_database.command(
        "INSERT INTO events (id, timestamp, event, kind, agent, session_id) "
        "SELECT concat('day', toString(number)), now64(3) - toIntervalSecond(number * 10), 'PreToolUse', "
        "'tool_call', 'today', 'day-session' FROM numbers(300)"
    )
    asked: list[queries.Query] = []

    def ask(query: queries.Query) -> Answer:
        asked.append(query)
        return decode(queries.run_query(chdb_database, query.sql, query.params))

    for limit, bounded_only in ((100, True), (300, True), (301, False), (5000, False)):
        asked.clear()
        got = live_roster.newest_events(ask, limit)
        assert len(asked) == (1 if bounded_only else 2), limit
        assert "within" in (asked[0].params or {})
        whole = decode(queries.run_query(chdb_database, *queries.recent_events(limit)))
        assert got.rows == whole.rows and len(got.rows) == min(limit, 300 + len(events) + len(messages))


@pytest.mark.parametrize("window", [None, 3600, 86400])
def test_the_dashboards_tool_and_session_queries_run_on_the_rollups(
    chdb_database: Client, window: int | None
) -> None:
    apply_migrations(chdb_database)
    events, messages = split(history())
    insert_batch(chdb_database, events, messages)
    edges = queries.team_edges(window)
    assert chdb_database.query(edges.sql, parameters=edges.params).result_rows
    sessions = queries.active_sessions(window)
    assert chdb_database.query(sessions.sql, parameters=sessions.params).result_rows


# --- the cost rollup -----------------------------------------------------------------------------

_COST_VIEWS = {"session_costs": "session_id", "cost_daily": "day, team, model"}
# agent_costs (012) over `usage FINAL`: per host, scope and name, with its subagents' cost.
RAW_AGENT_COSTS = f"""
SELECT
    a.agent AS agent, a.team AS team, a.parent_agent AS parent_agent, a.agent_id AS agent_id,
    a.agent_type AS agent_type, a.sessions AS sessions, a.api_calls AS api_calls,
    a.input_tokens AS input_tokens, a.output_tokens AS output_tokens,
    a.cache_read_tokens AS cache_read_tokens,
    a.cache_write_5m_tokens AS cache_write_5m_tokens, a.cache_write_1h_tokens AS cache_write_1h_tokens,
    if(a.unpriced_calls = a.api_calls, NULL, coalesce(a.priced_usd, 0)) AS cost_usd,
    a.unpriced_calls AS unpriced_calls, a.models AS models, a.first_at AS first_at, a.last_at AS last_at,
    coalesce(s.priced_usd, 0) AS subagents_cost_usd,
    coalesce(a.priced_usd, 0) + coalesce(s.priced_usd, 0) AS cost_with_subagents_usd,
    a.host AS host, a.scope AS scope
FROM
(
    SELECT
        host, scope, agent,
        argMax(team, (timestamp, message_id)) AS team,
        argMax(parent_agent, (timestamp, message_id)) AS parent_agent,
        argMax(agent_id, (timestamp, message_id)) AS agent_id,
        argMax(agent_type, (timestamp, message_id)) AS agent_type,
        uniqExact(session_id) AS sessions, count() AS api_calls, sum(input_tokens) AS input_tokens,
        sum(output_tokens) AS output_tokens, sum(cache_read_tokens) AS cache_read_tokens,
        sum(cache_write_5m_tokens) AS cache_write_5m_tokens,
        sum(cache_write_1h_tokens) AS cache_write_1h_tokens,
        sum(cost_usd) AS priced_usd, countIf(cost_usd IS NULL) AS unpriced_calls,
        arraySort(groupUniqArray(model)) AS models, min(timestamp) AS first_at, max(timestamp) AS last_at
    FROM (SELECT *, {agents_sql.scope_sql()} AS scope FROM usage FINAL)
    GROUP BY host, scope, agent
) AS a
LEFT JOIN
(
    SELECT host, scope, parent_agent, sum(cost_usd) AS priced_usd
    FROM (SELECT *, {agents_sql.scope_sql()} AS scope FROM usage FINAL)
    WHERE parent_agent != ''
    GROUP BY host, scope, parent_agent
) AS s ON s.host = a.host AND s.scope = a.scope AND s.parent_agent = a.agent"""  # noqa: S608 - generated SQL


def raw_cost_view(name: str) -> str:
    """The CREATE VIEW of `name` from 006_usage.sql (over `usage FINAL`), renamed raw_<name>."""
    text = SCHEMA_DIR.joinpath("006_usage.sql").read_text(encoding="utf-8")
    for statement in split_statements(text):
        if f"CREATE VIEW IF NOT EXISTS {name} AS" in statement:
            return statement.replace(f"VIEW IF NOT EXISTS {name} AS", f"VIEW IF NOT EXISTS raw_{name} AS")
    raise LookupError(name)


def cost_answers(client: Client, view: str, key: str) -> list[tuple[Any, ...]]:
    """Every row of `view`, its dollar columns rounded to 1e-9 (the rollup adds them in another order)."""
    result = client.query(f"SELECT * FROM {view} ORDER BY {key}")  # noqa: S608 - fixed names
    money = {i for i, name in enumerate(result.column_names) if name.endswith("_usd")}
    owner = {i for i, name in enumerate(result.column_names) if name in OWNER}  # 021's: not in older views
    return [
        tuple(
            round(v, 9) if i in money and isinstance(v, float) else v
            for i, v in enumerate(row)
            if i not in owner
        )
        for row in result.result_rows
    ]


def rounded(client: Client, query: queries.Query) -> list[tuple[Any, ...]]:
    result = client.query(query.sql, parameters=query.params)
    return [tuple(round(v, 9) if isinstance(v, float) else v for v in row) for row in result.result_rows]


def assert_costs_match_raw(client: Client) -> None:
    for name, key in _COST_VIEWS.items():
        client.command(raw_cost_view(name))
        raw = cost_answers(client, f"raw_{name}", key)
        assert raw, name
        assert cost_answers(client, name, key) == raw, name
    client.command(f"CREATE VIEW IF NOT EXISTS raw_agent_costs AS {RAW_AGENT_COSTS}")
    raw = cost_answers(client, "raw_agent_costs", "host, scope, agent")
    assert raw and cost_answers(client, "agent_costs", "host, scope, agent") == raw


def usage_batch() -> UsageRows:
    from tests.integration.test_cost_store import all_bodies

    found = usage_rows([body for _, body in all_bodies()])
    assert found.bad == [] and found.usage and found.cost_states
    return found


def bigger(rows: list[list[Any]], extra: int) -> list[list[Any]]:
    """The same API messages read again with `extra` more output tokens (a later, larger copy):
    a larger version, and another price."""
    out = []
    for original in rows:
        row = list(original)
        row[14] += extra  # output_tokens
        row[23] += 2 * extra  # version
        row[19] = None if row[19] is None else row[19] + extra / 1e6
        out.append(row)
    return out


def test_cost_views_read_the_rollup_and_answer_what_usage_final_answers(chdb_database: Client) -> None:
    apply_migrations(chdb_database)
    found = usage_batch()
    insert_usage(chdb_database, found)
    assert_costs_match_raw(chdb_database)
    insert_usage(chdb_database, found)  # the whole batch again: nothing changes
    assert_costs_match_raw(chdb_database)
    output = "SELECT sum(output_tokens) FROM cost_hourly"
    before = chdb_database.query(output).result_rows[0][0]
    # Larger copies of a third of the messages replace them: their old figures leave the rollup.
    insert_usage(chdb_database, UsageRows(bigger(found.usage[::3], 7), [], []))
    assert_costs_match_raw(chdb_database)
    assert chdb_database.query(output).result_rows[0][0] == before + 7 * len(found.usage[::3])
    for table in ("usage", "cost_hourly"):
        chdb_database.command(f"OPTIMIZE TABLE {table} FINAL")
    # After the merge: smaller copies again (left out), and larger ones of some (replacing).
    insert_usage(chdb_database, UsageRows(found.usage[::2] + bigger(found.usage[::5], 11), [], []))
    assert_costs_match_raw(chdb_database)
    # Over all time the per-agent and per-day rollups answer, since a time the hourly one: the same.
    for by in ("agent", "team", "model", "day"):
        whole, since = queries.cost(by), queries.cost(by, since="2000-01-01 00:00:00.000")
        assert rounded(chdb_database, whole) == rounded(chdb_database, since), by
    totals = queries.cost_total()
    got = chdb_database.query(totals.sql, parameters=totals.params).named_results().__next__()
    raw = (
        chdb_database.query(
            "SELECT count() AS api_calls, sum(output_tokens) AS output_tokens, "
            "uniqExact(session_id) AS sessions FROM usage FINAL"
        )
        .named_results()
        .__next__()
    )
    assert {k: got[k] for k in raw} == raw


def test_cost_backfill_equals_the_rollup_filled_live(chdb_database: Client) -> None:
    store_before_rollups(chdb_database)
    found = usage_batch()
    # The store before 009 inserted into usage directly: copies and larger copies alike, of the
    # columns it had (013_harness added harness and reasoning_tokens, 021 the session's owner).
    old = [
        i for i, (name, _) in enumerate(USAGE_COLUMNS) if name not in ("harness", "reasoning_tokens", *OWNER)
    ]
    columns = [USAGE_COLUMNS[i][0] for i in old]
    for batch in (found.usage, found.usage[::2], bigger(found.usage[::3], 5)):
        chdb_database.insert("usage", [[row[i] for i in old] for row in batch], column_names=columns)
    chdb_database.insert("cost_states", found.cost_states, column_names=[n for n, _ in COST_STATE_COLUMNS])
    assert "009_rollups" in apply_migrations(chdb_database)
    assert_costs_match_raw(chdb_database)
    insert_usage(chdb_database, UsageRows(bigger(found.usage[::4], 9), [], []))  # live on top
    assert_costs_match_raw(chdb_database)


# --- per-call questions over a window -------------------------------------------------------------


def test_tool_calls_since_answers_what_tool_calls_answers_and_reads_only_its_window(
    chdb_database: Client,
) -> None:
    apply_migrations(chdb_database)
    # Old history (three days ago, paired calls) under the recent scripted and fixture history.
    chdb_database.command(
        "INSERT INTO events (id, timestamp, event, kind, agent, session_id, tool_name, tool_use_id) "
        "SELECT concat('old', toString(number)), now64(3) - INTERVAL 3 DAY + toIntervalMillisecond(number), "
        "if(number % 2 = 0, 'PreToolUse', 'PostToolUse'), 'tool_call', 'old-agent', 'old-session', 'Bash', "
        "concat('tu-old-', toString(intDiv(number, 2))) FROM numbers(200000)"
    )
    chdb_database.command("OPTIMIZE TABLE events FINAL")
    events, messages = split(history())
    insert_batch(chdb_database, events, messages)
    since = "now64(3) - INTERVAL 2 HOUR"
    windowed = f"SELECT * FROM tool_calls_since(since = {since}) ORDER BY session_id, tool_use_id"  # noqa: S608
    whole = f"SELECT * FROM tool_calls WHERE started >= {since} ORDER BY session_id, tool_use_id"  # noqa: S608
    assert answers(chdb_database, windowed) == answers(chdb_database, whole)
    assert len(answers(chdb_database, windowed)) > 10
    # The old calls are all before the window: its primary key leaves their granules unread.
    plan = "\n".join(r[0] for r in chdb_database.query(f"EXPLAIN indexes = 1 {windowed}").result_rows)
    read, total = map(int, re.findall(r"Granules: (\d+)/(\d+)", plan)[0])  # of all the table's
    assert read * 10 < total, plan
    # A call whose result falls in the next hour stays two rows in call_rollup, paired per query;
    # the others, once merged, are one row each and read as they are.
    hour = "toStartOfHour(now64(3) - INTERVAL 30 MINUTE)"  # its call and result both in the window
    columns = "id, timestamp, event, kind, agent, session_id, tool_name, tool_use_id, data"
    failure = """'{"error": "Exit code 2", "is_interrupt": true}'"""
    chdb_database.command(
        f"INSERT INTO events ({columns}) VALUES "  # noqa: S608 (constants of this test)
        f"('x-call', {hour} - INTERVAL 1 SECOND, 'PreToolUse', 'tool_call', 'a', 's-x', 'Bash', 'tu-x', "
        "'{}'), "
        f"('x-done', {hour} + INTERVAL 1 SECOND, 'PostToolUseFailure', 'tool_error', 'a', 's-x', 'Bash', "
        f"'tu-x', {failure})"
    )
    chdb_database.command("OPTIMIZE TABLE call_rollup FINAL")
    # Every finished call of the window whose result came in its own hour is one whole row.
    whole_rows = f"SELECT count() FROM call_rollup WHERE called AND outcome > 0 AND started >= {since}"  # noqa: S608
    in_one_hour = (
        f"SELECT count() FROM tool_calls WHERE started >= {since} AND ended IS NOT NULL "  # noqa: S608
        "AND toStartOfHour(started) = toStartOfHour(ended)"
    )
    assert count(chdb_database, whole_rows) == count(chdb_database, in_one_hour) > 10
    assert chdb_database.command("SELECT count() FROM call_rollup WHERE tool_use_id = 'tu-x'") == 2
    got = answers(chdb_database, windowed)
    assert got == answers(chdb_database, whole)
    crossing = [row for row in got if row[1] == "tu-x"]
    assert [row[10:] for row in crossing] == [(2000, "interrupted", "Exit code 2")]  # duration, status, error


def test_the_duplicate_check_finds_ids_of_any_text(chdb_database: Client) -> None:
    """Ids go to the lookup newline-joined; one with a newline in it (no emitter writes one) too."""
    apply_migrations(chdb_database)
    bodies = [
        orjson.dumps(
            {"v": 1, "id": key, "timestamp": "2026-11-20T10:00:00.000Z", "event": "Stop", "agent": "a"}
        )
        for key in ("plain-1", "with\nnewline", "with space", "quote'd")
    ]
    insert_batch(chdb_database, bodies, [])
    insert_batch(chdb_database, bodies + bodies, [])
    stored = chdb_database.query("SELECT id, count() FROM events GROUP BY id ORDER BY id").result_rows
    assert stored == sorted((key, 1) for key in ("plain-1", "with\nnewline", "with space", "quote'd"))
    assert chdb_database.query("SELECT sum(events) FROM agent_key_rollup").result_rows[0][0] == 4
