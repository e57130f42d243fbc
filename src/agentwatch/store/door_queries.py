"""The read side's queries for the doors into other tools: the MCP server's lookups (`agentwatch
mcp`) and the store's figures on /metrics. The same rules as store/queries.py (whose module is at
its size limit): SQL text with `{name:Type}` parameters, every value a person or an agent can
influence bound by ClickHouse. Importing it loads no ClickHouse client.
"""

from __future__ import annotations

from agentwatch.store.agents_sql import scope_sql
from agentwatch.store.queries import _HEADLINE_SQL, Query

# --- the MCP server -----------------------------------------------------------------------------

_SCOPE_SQL = _HEADLINE_SQL.format(
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
