"""The read side: every query the dashboard and the commands send, and how one is answered.

Values a person can influence (an agent name, an event id, a window) are bound by ClickHouse
itself as `{name:Type}` parameters: nothing user-visible is formatted into SQL. The query text
and its parameters travel together (`Query`), to a ClickHouse server directly or through the
store's query service on the bus (bus/query.py), and are run here by `run_query`.

Importing this module loads no ClickHouse client: the dashboard builds queries with it and
sends them over the bus.
"""

from __future__ import annotations

import datetime as dt
import time
from typing import TYPE_CHECKING, Any, NamedTuple

from agentwatch.agents import LOST_AFTER_S
from agentwatch.store import guard, live_window
from agentwatch.store.agents_sql import scope_sql
from agentwatch.store.plain import plain_rows

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping, Sequence

    from clickhouse_connect.driver.client import Client

# Limits of the read-only query path (agentwatch sql, the dashboard's history).
QUERY_MAX_SECONDS = 30
QUERY_MAX_ROWS = 10_000


class Query(NamedTuple):
    """SQL with `{name:Type}` placeholders, and the values ClickHouse binds to them."""

    sql: str
    params: dict[str, Any] | None = None


# --- answering ----------------------------------------------------------------------------------


def _clean_error(exc: Exception) -> str:
    """ClickHouse's message without its stack trace and the FORMAT clause the client appended."""
    message = str(exc).strip().split("Stack trace", 1)[0].strip()
    return message.replace(" FORMAT Native", "").replace("FORMAT Native", "")[:4000]


def run_query(
    client: Client,
    sql: str,
    params: Mapping[str, Any] | None = None,
    max_rows: int = QUERY_MAX_ROWS,
    *,
    on_error: Callable[[Exception], None] | None = None,
) -> dict[str, Any]:
    """Run one read-only query; never raises for a bad query (the reply carries the error).

    Only what guard.check lets through runs: one read statement without output clause, format
    or settings of its own (`refused` marks the reply of one that did not pass).

    The reply: {"columns", "types", "rows", "truncated", "elapsed_ms"} or {"error": message}.
    `on_error` sees the exception first and may raise its own (a server that cannot be used at
    all is no bad query: see cli/sources.py).
    """
    found = guard.statements(sql)
    if not found:
        return {"error": "empty query"}
    if len(found) > 1:
        return {"error": f"one statement at a time: this has {len(found)}; run them one by one"}
    sql = found[0]
    if params is not None and not isinstance(params, dict):
        return {"error": "params must be a JSON object of {name: value}"}
    started = time.perf_counter()
    try:
        guard.check(client, sql, params)
        result = client.query(sql, parameters=dict(params) if params else None)
    except guard.Refused as exc:
        return {"error": str(exc), "refused": True}
    except Exception as exc:
        if on_error is not None:
            on_error(exc)
        message = guard.hint(sql, _clean_error(exc))
        return {"error": message, "refused": True} if guard.is_refusal(message) else {"error": message}
    rows = result.result_rows
    types = [t.name for t in result.column_types]
    limit = max(1, min(max_rows, QUERY_MAX_ROWS))
    return {
        "columns": list(result.column_names),
        "types": types,
        "rows": plain_rows(rows[:limit], types),
        "truncated": len(rows) > limit,
        "elapsed_ms": round((time.perf_counter() - started) * 1000, 1),
    }


# --- the dashboard's feed and roster ------------------------------------------------------------

# The roster and feed need the headline of recent events, not their payloads (fetched one at a
# time when a person opens an event): a reply must fit one NATS message. Tasks are the one thing
# the team view needs from the payload: two short fields, for task events only. Messages live in
# their own table; they come back in the shape of the live message envelopes.
HEADLINE_SQL = (
    "SELECT * FROM (SELECT * FROM ("
    "SELECT * FROM ("
    "SELECT id, timestamp, event, kind, agent, team, peer, parent_agent, agent_type, session_id, host, "
    "tool_name, tool_use_id, text, "
    "if(kind IN ('task_created', 'task_completed'), JSONExtractString(data, 'task_id'), '') AS task_id, "
    "if(kind IN ('task_created', 'task_completed'), JSONExtractString(data, 'task_subject'), '') "
    "AS task_subject "
    "FROM events {where}ORDER BY timestamp DESC LIMIT {{limit:UInt32}}) "
    "UNION ALL SELECT * FROM ("
    "SELECT id, timestamp, 'PostToolUse' AS event, 'message' AS kind, from_agent AS agent, team, "
    "to_agent AS peer, '' AS parent_agent, '' AS agent_type, session_id, '' AS host, "
    "'SendMessage' AS tool_name, '' AS tool_use_id, "
    "concat('→ ', to_agent, ': ', leftUTF8(if(summary != '', summary, text), 200)) AS text, "
    "'' AS task_id, '' AS task_subject "
    "FROM messages {message_where}ORDER BY timestamp DESC LIMIT {{limit:UInt32}})"
    ") ORDER BY timestamp DESC LIMIT {{limit:UInt32}}"
    ") ORDER BY timestamp"
)
_RECENT_SQL = HEADLINE_SQL.format(where="", message_where="")
# One agent: its name, host and scope (agentwatch.agents.scope, in SQL).
_AGENT_SQL = HEADLINE_SQL.format(
    where=f"WHERE agent = {{agent:String}} AND host = {{host:String}} AND {scope_sql()} = {{scope:String}} ",
    message_where=f"WHERE from_agent = {{agent:String}} AND {scope_sql()} = {{scope:String}} ",
)


def recent_events(limit: int) -> Query:
    """The newest `limit` events, oldest first, without payloads (the dashboard asks the last
    day first: live_roster.newest_events)."""
    return Query(_RECENT_SQL, {"limit": int(limit)})


def agent_events(key: tuple[str, str, str], limit: int) -> Query:
    """The newest `limit` events of one agent (its key: host, scope, name), oldest first, without
    payloads."""
    host, scope, agent = key
    return Query(_AGENT_SQL, {"host": host, "scope": scope, "agent": agent, "limit": int(limit)})


def event_payload(event_id: str) -> Query:
    """One event's payload (its `data` JSON text)."""
    return Query("SELECT data FROM events WHERE id = {id:String} LIMIT 1", {"id": event_id})


# --- agentwatch status --------------------------------------------------------------------------

STATUS = Query(
    "SELECT (SELECT count() FROM events FINAL) AS events, (SELECT count() FROM messages FINAL) AS messages, "
    "(SELECT count() FROM dead_letters) AS dead_letters, (SELECT max(timestamp) FROM events) AS latest"
)


# --- coverage -----------------------------------------------------------------------------------


def coverage(limit: int = 200, below_only: bool = False) -> Query:
    """Sessions by how complete their record is, those below 100% first, then the newest."""
    where = (
        "WHERE coalesce(c.coverage_pct, 100) < 100 OR c.unpaired_calls > 0 OR c.open_subagents > 0 "
        if below_only
        else ""
    )
    # `where` is one of two fixed texts; every value is a parameter.
    return Query(
        "SELECT c.session_id AS session_id, c.host AS host, c.max_seq AS max_seq, c.stored AS stored, "  # noqa: S608
        "c.missing AS missing, c.coverage_pct AS coverage_pct, c.unpaired_calls AS unpaired_calls, "
        "c.open_subagents AS open_subagents, c.ended AS ended, c.spool_bytes AS spool_bytes, "
        "s.last_seen AS last_seen "
        "FROM coverage AS c LEFT JOIN sessions AS s ON s.session_id = c.session_id "
        f"{where}"
        "ORDER BY coalesce(c.coverage_pct, 100) >= 100, s.last_seen DESC "
        "LIMIT {limit:UInt32}",
        {"limit": int(limit)},
    )


COVERAGE_TOTAL = Query(
    "SELECT count() AS sessions, sum(c.max_seq) AS total_emitted, sum(c.stored) AS total_stored, "
    "sum(c.missing) AS total_missing, "
    "if(total_emitted = 0, NULL, round(100 * total_stored / total_emitted, 2)) AS total_pct "
    "FROM coverage AS c"
)


# --- the dashboard's tools and history view -----------------------------------------------------

TOOLS_LIMIT = 500
SESSIONS_LIMIT = 200

# Sort name -> ORDER BY of `tool_stats` (its columns). ClickHouse binds values, not clauses: the
# ORDER BY is not a value, so it is SQL text, picked by name from this fixed dict (a name not here
# is refused), never text a person typed.
TOOL_SORTS: dict[str, str] = {
    "calls": "calls DESC, tool",
    "failure rate": "failure_pct DESC NULLS LAST, failures DESC, calls DESC, tool",
    "p95": "p95_ms DESC NULLS LAST, calls DESC, tool",
}

# Read from the tool_hourly rollup (009_rollups.sql): the cost does not grow with the history.
# A window is made of whole UTC hours, the hours that began within it and the current one; all
# time is read from tool_daily (011_tool_daily.sql), the same states folded into days.
_TOOL_STATS_SQL = """\
SELECT
    tool,
    sum(calls) AS calls,
    sum(failures) AS failures,
    sum(denied) AS denied,
    sum(finished) AS finished,
    if(finished = 0, NULL, round(100 * failures / finished, 1)) AS failure_pct,
    sum(timed) AS timed,
    quantilesTimingMerge(0.5, 0.95)(durations) AS q,
    if(timed = 0, NULL, toInt64(q[1])) AS p50_ms,
    if(timed = 0, NULL, toInt64(q[2])) AS p95_ms,
    max({table}.max_ms) AS max_ms,
    toUInt64(greatest(toInt64(calls) - toInt64(finished), 0)) AS unpaired,
    argMaxMerge(last_error) AS last_error
FROM {table}
{where}GROUP BY tool
ORDER BY {order}
LIMIT {{limit:UInt32}}"""

_TOOLS_IN_WINDOW = "WHERE hour >= toStartOfHour(now() - toIntervalSecond({window_s:UInt32}))\n"

# The newest sessions first, in two steps. NEWEST picks their ids from the sessions rollup's plain
# min/max columns (no aggregate state is merged); _SESSION_DETAILS reads the `sessions` view, their
# coverage (session_seq_rollup) and cost (session_cost) for those ids only: the per-session rollups
# have small granules (009_rollups.sql), so a list of ids reads a few rows of each. The dashboard
# asks the two in turn and hands the ids over as a parameter; `active_sessions` nests the first in
# the second (the same answer in one question, slower: each IN (subquery) is run again).
_NEWEST_SESSIONS_SQL = """\
SELECT session_id
FROM session_rollup
GROUP BY session_id
{having}ORDER BY coalesce(min(first_start), min(first_seen)) DESC, session_id
LIMIT {{limit:UInt32}}"""

_SESSION_DETAILS_SQL = """\
SELECT
    s.session_id AS session_id, s.agent AS agent, s.team AS team, s.host AS host,
    s.started AS started, s.ended AS ended, s.end_reason AS end_reason, s.last_seen AS last_seen,
    dateDiff('millisecond', s.started, coalesce(s.ended, s.last_seen)) AS duration_ms,
    dateDiff('second', s.last_seen, now64(3)) AS seen_s, s.events AS events, s.tool_calls AS tool_calls,
    s.errors AS errors, s.prompts AS prompts, s.subagents AS subagents, s.outcome AS outcome,
    cov.coverage_pct AS coverage_pct, cost.cost_usd AS cost_usd, cost.tokens AS tokens,
    s.person AS person, s.repo AS repo, s.branch AS branch
FROM
(
    SELECT session_id, agent, team, host, started, ended, end_reason, last_seen, events, tool_calls, errors,
        prompts, subagents, outcome, person, repo, branch
    FROM sessions
    WHERE session_id IN {ids}
) AS s
LEFT JOIN
(
    SELECT session_id, if(sum(max_seq) = 0, NULL, round(100 * sum(stored) / sum(max_seq), 1)) AS coverage_pct
    FROM
    (
        SELECT session_id, host, max(max_seq) AS max_seq, uniqExactMerge(stored) AS stored
        FROM session_seq_rollup
        WHERE session_id IN {ids}
        GROUP BY session_id, host
    )
    GROUP BY session_id
) AS cov ON cov.session_id = s.session_id
LEFT JOIN
(
    SELECT
        session_id,
        if(sum(api_calls) > 0 AND sum(unpriced_calls) = sum(api_calls), NULL, sum(priced_usd)) AS cost_usd,
        toUInt64(sum(input_tokens) + sum(output_tokens) + sum(cache_read_tokens) + sum(cache_write_5m_tokens)
            + sum(cache_write_1h_tokens)) AS tokens
    FROM session_cost
    WHERE session_id IN {ids}
    GROUP BY session_id
    HAVING sum(api_calls) > 0
) AS cost ON cost.session_id = s.session_id
ORDER BY s.started DESC, s.session_id"""

_SESSIONS_IN_WINDOW = "HAVING max(last_seen) >= now64(3) - toIntervalSecond({window_s:UInt32})\n"


def _window_params(window_s: int | None, limit: int) -> dict[str, Any]:
    if window_s is None:
        return {"limit": int(limit)}
    if window_s <= 0:
        raise ValueError(f"a window is a positive number of seconds, not {window_s!r}")
    return {"window_s": int(window_s), "limit": int(limit)}


def tool_stats(window_s: int | None, sort: str = "calls", limit: int = TOOLS_LIMIT) -> Query:
    """One row per tool over the UTC hours that began in the last `window_s` seconds, the current
    one included (None: ever, from tool_daily), from the tool_hourly rollup: calls (PreToolUse), failures
    (PostToolUseFailure, interrupted included), denied, the failure rate over finished calls
    (results of any kind), p50/p95 (quantileTiming: exact below 1 s, to 16 ms below 30 s, 30,000
    for longer) and max duration in ms over the results that report one, unpaired (calls minus
    results, when positive) and the latest error text. See `tool_stats` in docs/queries.md."""
    if sort not in TOOL_SORTS:
        raise ValueError(f"unknown sort {sort!r}: one of {', '.join(TOOL_SORTS)}")
    where, table = ("", "tool_daily") if window_s is None else (_TOOLS_IN_WINDOW, "tool_hourly")
    sql = _TOOL_STATS_SQL.format(where=where, order=TOOL_SORTS[sort], table=table)
    return Query(sql, _window_params(window_s, limit))


def newest_sessions(window_s: int | None, limit: int = SESSIONS_LIMIT) -> Query:
    """The ids of the sessions with an event in the last `window_s` seconds (None: ever), newest
    first (by start), at most `limit`: the first of the dashboard's two questions."""
    having = "" if window_s is None else _SESSIONS_IN_WINDOW
    return Query(_NEWEST_SESSIONS_SQL.format(having=having), _window_params(window_s, limit))


def session_details(ids: Sequence[str]) -> Query:
    """The sessions `ids` (newest_sessions' answer), newest first: the `sessions` view's columns,
    plus duration_ms (start to end, or to the latest event while not ended), seen_s (seconds since
    the latest event), coverage_pct (stored of numbered events, over its hosts; NULL where the hook
    did not number them), cost_usd and tokens (NULL: no usage read, or no price known), and its
    person, repo and branch (its latest; '' where the hook did not say)."""
    return Query(_SESSION_DETAILS_SQL.format(ids="{ids:Array(String)}"), {"ids": [str(i) for i in ids]})


def active_sessions(window_s: int | None, limit: int = SESSIONS_LIMIT) -> Query:
    """newest_sessions and session_details as one question (for people and tests; the dashboard
    asks the two in turn, which is faster)."""
    newest = newest_sessions(window_s, limit)
    return Query(_SESSION_DETAILS_SQL.format(ids=f"({newest.sql})"), newest.params)


# --- cost ---------------------------------------------------------------------------------------

COST_BY = ("session", "agent", "team", "model", "day", "harness", "person", "repo", "branch")
# The groupings a --person or --repo filter applies to: those cost_by_owner (021_attribution.sql)
# answers, and the sessions (session_costs says each one's person and repository).
OWNER_BY = ("person", "repo", "branch", "model", "day", "session")
EPOCH = "1970-01-01 00:00:00.000"
# Sums over the cost_hourly rollup (009_rollups.sql): its rows are signed, so the sums are right
# whatever was replaced, and a group whose every message was replaced has api_calls 0.
_COST_SUMS = (
    "toUInt64(sum(api_calls)) AS api_calls, toUInt64(sum(input_tokens)) AS input_tokens, "
    "toUInt64(sum(output_tokens)) AS output_tokens, toUInt64(sum(cache_read_tokens)) AS cache_read_tokens, "
    "toUInt64(sum(cache_write_5m_tokens)) AS cache_write_5m_tokens, "
    "toUInt64(sum(cache_write_1h_tokens)) AS cache_write_1h_tokens, sum(priced_usd) AS priced_usd, "
    "toUInt64(sum(unpriced_calls)) AS unpriced_calls"
)
# NULL when no message could be priced (shown as unpriced), else what could be.
_COST_USD = "if(api_calls > 0 AND unpriced_calls = api_calls, NULL, coalesce(priced_usd, 0)) AS cost_usd"
# The hours of the rollup from the one that holds `since`.
_COST_SINCE = "hour >= toStartOfHour({since:DateTime64(3, 'UTC')})"
# What each grouping shows before the sums, and how its rows are ordered. Fixed texts: `by` only
# picks one; every value is a parameter.
_COST_GROUPS: dict[str, tuple[str, str, str]] = {
    "agent": (
        "agent, team, argMaxMerge(latest).2 AS parent_agent",
        "agent, team",
        "cost_usd DESC NULLS LAST, agent, team",
    ),
    "team": ("team", "team", "cost_usd DESC NULLS LAST, team"),
    "model": ("model", "model", "cost_usd DESC NULLS LAST, model"),
    "day": ("{day} AS day", "day", "day DESC"),
    # From cost_by_harness (013_harness.sql), with or without a start.
    "harness": (
        "harness, uniqExactMerge(sessions) AS sessions, toUInt64(sum(reasoning_tokens)) AS reasoning_tokens",
        "harness",
        "cost_usd DESC NULLS LAST, harness",
    ),
    # From cost_by_owner (021_attribution.sql), with or without a start.
    **{
        key: (f"{key}, uniqExactMerge(sessions) AS sessions", key, f"cost_usd DESC NULLS LAST, {key}")
        for key in ("person", "repo", "branch")
    },
}


def _owner_where(since: str, person: str, repo: str) -> str:
    """The WHERE clause of a question to cost_by_owner: the start, the person, the repository."""
    terms = [_COST_SINCE] if since != EPOCH else []
    terms += ["person = {person:String}"] if person else []
    terms += ["repo = {repo:String}"] if repo else []
    return f"WHERE {' AND '.join(terms)} " if terms else ""


def _cost_source(by: str, since: str, person: str = "", repo: str = "") -> tuple[str, str, str]:
    """(rollup, WHERE clause, day expression) for a cost question: over all time, the rollups
    without a time in their key (per agent, its host, scope, team and model; per day), whose rows
    do not grow with the history; since a time, cost_hourly from that time's hour. An agent is
    grouped with its team (its session's, or its named team): two agents of one name in two
    sessions are two rows. Per harness: cost_by_harness, all time or from the hour of `since`."""
    if by in ("person", "repo", "branch") or person or repo:
        return "cost_by_owner", _owner_where(since, person, repo), "toDate(hour)"
    if by == "harness":
        return "cost_by_harness", f"WHERE {_COST_SINCE} " if since != EPOCH else "", "toDate(hour)"
    if since != EPOCH:
        return "cost_hourly", f"WHERE {_COST_SINCE} ", "toDate(hour)"
    return ("cost_by_day" if by == "day" else "agent_cost_rollup"), "", "day"


def cost(by: str, since: str = EPOCH, limit: int = 100, person: str = "", repo: str = "") -> Query:
    """Tokens and cost per `by` (one of COST_BY) of the API messages from the UTC hour that holds
    `since` (`YYYY-MM-DD hh:mm:ss.sss`), read from the cost rollups. Per session: whole sessions
    whose last message is since then, from the session_costs view, with Claude Code's own total
    beside (a session with a cost-state and no API message stored is left out: the totals count
    messages). `person`, `repo`: only that person's or repository's messages (by one of OWNER_BY)."""
    if by not in COST_BY:
        raise ValueError(f"cost by {by!r}: one of {', '.join(COST_BY)}")
    if (person or repo) and by not in OWNER_BY:
        raise ValueError(f"--person and --repo group by one of {', '.join(OWNER_BY)}, not {by!r}")
    params = {"since": since, "limit": int(limit), "person": person, "repo": repo}
    if by == "session":
        # Fixed texts, chosen by which filters are given; values are parameters.
        owner = ("AND person = {person:String} " if person else "") + (
            "AND repo = {repo:String} " if repo else ""
        )
        return Query(
            "SELECT session_id, agent, team, api_calls, input_tokens, output_tokens, cache_read_tokens, "  # noqa: S608
            "cache_write_5m_tokens, cache_write_1h_tokens, cost_usd, unpriced_calls, claude_cost_usd, "
            "models, last_at, person, repo, branch FROM session_costs WHERE "
            f"last_at >= {{since:DateTime64(3, 'UTC')}} AND api_calls > 0 {owner}"
            "ORDER BY last_at DESC LIMIT {limit:UInt32}",
            params,
        )
    keys, group, order = _COST_GROUPS[by]
    table, where, day = _cost_source(by, since, person, repo)
    # The texts are fixed, chosen by `by` and by whether `since` is given; values are parameters.
    return Query(
        f"SELECT *, {_COST_USD} FROM (SELECT {keys.format(day=day)}, {_COST_SUMS} FROM {table} "  # noqa: S608
        f"{where}GROUP BY {group} HAVING api_calls > 0) ORDER BY {order} LIMIT {{limit:UInt32}}",
        params,
    )


def cost_total(since: str = EPOCH, person: str = "", repo: str = "") -> Query:
    """The totals of the API messages from the UTC hour that holds `since` (the cost rollups),
    and Claude Code's own totals of the sessions whose last cost-state is that recent."""
    table, where, _ = _cost_source("total", since, person, repo)
    return Query(
        f"SELECT *, {_COST_USD}, (SELECT sum(total_cost_usd) FROM cost_states FINAL "  # noqa: S608
        "WHERE timestamp >= toStartOfHour({since:DateTime64(3, 'UTC')})) AS claude_cost_usd "
        f"FROM (SELECT {_COST_SUMS}, uniqExactMerge(sessions) AS sessions FROM {table} {where})",
        {"since": since, "person": person, "repo": repo},
    )


# --- the dashboard's costs, roster and team: the live window (live_window.py) -------------------

ROSTER_LIMIT = live_window.ROSTER_LIMIT

# Per agent of the live window (host, scope, name: its own, and with its subagents of the same host
# and scope), per team (its agents of the window), and the current and previous UTC hour: what the
# roster, the team view and the status line show. One reply, three kinds of row, from the cost
# rollups (their signed sums need no per-key step here). An agent row's name is its scope and name;
# the hour row's name is the start of its window (UTC).


def _live_window(limit: int, lost_after_s: float) -> dict[str, Any]:
    return {"limit": int(limit), "lost_after_s": max(0, int(lost_after_s))}


def dashboard_costs(limit: int = ROSTER_LIMIT, lost_after_s: float = LOST_AFTER_S) -> Query:
    """The costs of the agents of `roster(limit, lost_after_s)`'s window, and of the hour."""
    return Query(live_window.DASHBOARD_COSTS_SQL, _live_window(limit, lost_after_s))


DASHBOARD_COSTS = dashboard_costs()


def window_tasks(
    limit: int = 2000, roster_limit: int = ROSTER_LIMIT, lost_after_s: float = LOST_AFTER_S
) -> Query:
    """The tasks created or completed in the scopes of `roster(roster_limit, lost_after_s)`'s
    window: open ones first, then the newest; each with the window's totals."""
    return Query(live_window.TASKS_SQL, {**_live_window(roster_limit, lost_after_s), "tasks": int(limit)})


def roster(limit: int = ROSTER_LIMIT, lost_after_s: float = LOST_AFTER_S) -> Query:
    """The agents of the live window (the `agents` view's rows of the scopes active in the last
    `lost_after_s` seconds and of the newest `limit` scopes), the live ones first (not lost, not
    stopped), then the newest, at most `limit`: the dashboard's roster is this answer plus the
    live events that came after it. The `*_total` columns count the window's agents, events and
    messages (every agent of those scopes, over all their time), not the whole history."""
    return Query(live_window.ROSTER_SQL, _live_window(limit, lost_after_s))


def window_edges(
    limit: int = 500, roster_limit: int = ROSTER_LIMIT, lost_after_s: float = LOST_AFTER_S
) -> Query:
    """team_edges over the hours of the live window of `roster(roster_limit, lost_after_s)`: from
    the hour of the oldest of its scopes' latest activity."""
    return Query(
        _EDGES_SQL.format(where=f"WHERE hour >= {live_window.WINDOW_START} "),
        {**_live_window(roster_limit, lost_after_s), "edges": int(limit)},
    )


_EDGES_SQL = (
    "SELECT from_agent, to_agent, team, sum(messages) AS messages, max(last_at) AS last_at, "
    "argMaxMerge(last_summary) AS last_summary FROM edge_hourly {where}"
    "GROUP BY from_agent, to_agent, team ORDER BY last_at DESC LIMIT {{edges:UInt32}}"
)


def team_edges(window_s: int | None, limit: int = 500) -> Query:
    """Who messaged whom in the hours that began within the last `window_s` seconds (None: ever),
    from the edge_hourly rollup: sender, recipient, team, messages, the last one's time and summary."""
    where = (
        ""
        if window_s is None
        else "WHERE hour >= toStartOfHour(now() - toIntervalSecond({window_s:UInt32})) "
    )
    params = _window_params(window_s, limit)
    params["edges"] = params.pop("limit")
    return Query(_EDGES_SQL.format(where=where), params)


def stored_ids(ids: Sequence[str], since: float | None = None) -> Query:
    """Which of `ids` (events or messages) the store holds: the dashboard's watermark. A live event
    it holds is in the store's answers already; one it does not is added to them. With `since`
    (Unix seconds, at or before every one of their times), the events and messages since then are
    asked, which are ordered by time: event_ids, ordered by id, has the ids in every granule, and
    reads more of them as the history grows."""
    params: dict[str, Any] = {"ids": [str(i) for i in ids]}
    if since is None:
        return Query("SELECT id FROM event_ids WHERE id IN {ids:Array(String)} GROUP BY id", params)
    params["since"] = dt.datetime.fromtimestamp(max(since, 0.0), dt.UTC).strftime("%Y-%m-%d %H:%M:%S")
    return Query(
        "SELECT id FROM events WHERE timestamp >= {since:DateTime64(3, 'UTC')} AND id IN {ids:Array(String)} "
        "UNION ALL SELECT id FROM messages WHERE timestamp >= {since:DateTime64(3, 'UTC')} "
        "AND id IN {ids:Array(String)}",
        params,
    )


# What moves whenever anything the dashboard's figures read can have changed: the row counts of
# the tables every rollup it reads is fed from, and of the alerts. ClickHouse answers a table's
# count() from its parts' metadata (a Distributed table's from each shard's): a few milliseconds
# at any size. A merge that folds duplicates lowers a count: one refresh more, never one less.
STORE_MARK = Query(
    "SELECT (SELECT count() FROM events) AS events, (SELECT count() FROM messages) AS messages, "
    "(SELECT count() FROM usage) AS usage, (SELECT count() FROM alerts) AS alerts"
)


# --- alerts -------------------------------------------------------------------------------------

ALERT_FIELDS = "id, rule, severity, state, agent, team, session_id, host, summary, details, since, at"


def alerts(open_only: bool = False, since: str = EPOCH, limit: int = 200) -> Query:
    """Alert changes since `since` (UTC, `YYYY-MM-DD hh:mm:ss.sss`), newest first; with
    `open_only`, the alerts firing now (the open_alerts view)."""
    source = "open_alerts" if open_only else "alerts FINAL"
    # `source` is one of two fixed texts; the values are parameters.
    return Query(
        f"SELECT {ALERT_FIELDS} FROM {source} WHERE at >= {{since:DateTime64(3, 'UTC')}} "  # noqa: S608
        "ORDER BY at DESC LIMIT {limit:UInt32}",
        {"since": since, "limit": int(limit)},
    )


def replay_events(seconds: int) -> Query:
    """What the watchdog needs of the last `seconds` of events to rebuild its state, oldest first."""
    return Query(
        "SELECT id, timestamp, event, agent, team, session_id, host, tool_name, tool_use_id, spool_bytes, "
        "data "
        "FROM events FINAL WHERE timestamp >= now64(3) - toIntervalSecond({seconds:UInt32}) "
        "AND event NOT IN ('Usage', 'CostState') ORDER BY timestamp, id",
        {"seconds": int(seconds)},
    )


# Built from constants only: what each session, agent and team cost (the budget rule). An agent is
# named with its scope (`scope/agent`): agents of one name in two sessions are two budgets.
BUDGET_COSTS = Query(
    "SELECT 'session' AS scope, session_id AS name, cost_usd FROM session_costs WHERE cost_usd IS NOT NULL "
    "UNION ALL SELECT 'agent' AS scope, concat(agent_costs.scope, '/', agent) AS name, cost_usd "
    "FROM agent_costs WHERE cost_usd IS NOT NULL "
    "UNION ALL SELECT 'team' AS scope, team AS name, sum(s.cost_usd) AS cost_usd FROM session_costs AS s "
    "WHERE team != '' AND s.cost_usd IS NOT NULL GROUP BY team"
)
