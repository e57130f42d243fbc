"""The read side's queries for the doors into other tools: the MCP server's lookups (`agentwatch
mcp`) and the store's figures on /metrics. The same rules as store/queries.py (whose module is at
its size limit): SQL text with `{name:Type}` parameters, every value a person or an agent can
influence bound by ClickHouse. Importing it loads no ClickHouse client.
"""

from __future__ import annotations

from agentwatch.store.agents_sql import scope_sql
from agentwatch.store.queries import HEADLINE_SQL, Query

# --- the MCP server -----------------------------------------------------------------------------

_SCOPE_SQL = HEADLINE_SQL.format(
    where=f"WHERE {scope_sql()} = {{scope:String}} ",
    message_where=f"WHERE {scope_sql()} = {{scope:String}} ",
)


def scope_events(scope: str, limit: int) -> Query:
    """The newest `limit` events of one scope (a session, or a team's events without one), every
    agent's, oldest first, without payloads."""
    return Query(_SCOPE_SQL, {"scope": scope, "limit": int(limit)})


def agent_key(agent: str, scope: str = "", host: str = "") -> Query:
    """The key (host, scope, agent) of the agent of that name seen last, within `scope` and on
    `host` when they are given ('' matches any)."""
    return Query(
        "SELECT host, scope, agent FROM agents WHERE agent = {agent:String} "
        "AND ({scope:String} = '' OR scope = {scope:String}) "
        "AND ({host:String} = '' OR host = {host:String}) "
        "ORDER BY last_seen DESC LIMIT 1",
        {"agent": agent, "scope": scope, "host": host},
    )


# --- /metrics -----------------------------------------------------------------------------------

# What /metrics reads of the store, each from a rollup or a recent window, so a scrape costs what
# its answer's size costs. Label sets are bounded: at most METRIC_ROWS rows, the rest as "other".
METRIC_ROWS = 50

OPEN_ALERTS = Query(
    "SELECT rule, severity, count() AS n FROM open_alerts GROUP BY rule, severity ORDER BY rule, severity"
)

# Stored of numbered events over all sessions and hosts (the session_seq_rollup, not `coverage`,
# whose joins read the events).
COVERAGE = Query(
    "SELECT toUInt64(sum(max_seq)) AS emitted, toUInt64(sum(least(stored, max_seq))) AS stored FROM "
    "(SELECT session_id, host, max(max_seq) AS max_seq, uniqExactMerge(stored) AS stored "
    "FROM session_seq_rollup GROUP BY session_id, host)"
)

# USD and API calls per team and model (the agent cost rollup: its rows do not grow with history).
COST_BY_TEAM_MODEL = Query(
    "SELECT toString(team) AS team, toString(model) AS model, sum(priced_usd) AS usd, "
    "toInt64(sum(api_calls)) AS calls FROM agent_cost_rollup GROUP BY team, model "
    "HAVING calls > 0 ORDER BY usd DESC, team, model"
)

# Per repository (021_attribution.sql), the most active first: events, tool calls and failed ones
# (activity_by_owner), and API calls and their price (cost_by_owner). /metrics keeps the top N by
# events and sums the rest as "other".
EVENTS_BY_REPO = Query(
    "SELECT toString(repo) AS repo, toUInt64(sum(events)) AS events, "
    "toUInt64(sum(tool_calls)) AS tool_calls, toUInt64(sum(tool_errors)) AS tool_errors "
    "FROM activity_by_owner GROUP BY repo ORDER BY events DESC, repo"
)
COST_BY_REPO = Query(
    "SELECT toString(repo) AS repo, sum(priced_usd) AS usd, toInt64(sum(api_calls)) AS calls "
    "FROM cost_by_owner GROUP BY repo HAVING calls > 0 ORDER BY repo"
)

# The spool backlog each host's hook reported last (the event stored last: a flushed event says
# what its spool still held when it was sent), over the last day of numbered events.
SPOOL_BY_HOST = Query(
    "SELECT toString(host) AS host, argMax(spool_bytes, (stored_at, timestamp, id)) AS spool_bytes "
    "FROM events WHERE timestamp >= now64(3) - INTERVAL 1 DAY AND seq > 0 GROUP BY host "
    "ORDER BY spool_bytes DESC, host"
)
