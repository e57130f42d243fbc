"""What agents may ask the store through `agentwatch mcp`: six read-only tools, their schemas, and
how each is answered through the read side (a `Reader`: the commands' and the dashboard's
`cli/sources.History`, one connection for its life).

Every tool's schema is sent to the model with every request that may use it, so they are few and
short (`schema_bytes` measures them; the README gives the figure). Answers are JSON: the rows as
{column: value} with times in ISO text (UTC), as `agentwatch sql --format json` prints them.
No MCP SDK here: ask/server.py speaks the protocol; this module is plain data and functions.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Mapping
from typing import Any, Protocol

from agentwatch import config
from agentwatch.store import door_queries, live_roster, queries
from agentwatch.store.answer import Answer, plain_rows
from agentwatch.store.queries import Query

SQL_ROWS = 100  # the SQL tool's rows when the caller names no cap
SQL_MAX_ROWS = 1000  # and at most: an answer goes into the model's context
ROSTER_ROWS = 50
TIMELINE_ROWS = 40
LIST_ROWS = 50  # cost, alerts, coverage


class Reader(Protocol):
    """Read-only SQL over the history (cli/sources.History)."""

    def query(self, sql: str, params: Mapping[str, Any] | None = None, max_rows: int = ...) -> Answer:
        """The typed answer; raises HistoryError and nothing else."""


class ToolInputError(ValueError):
    """The arguments do not fit the tool's schema: the message says what to send."""


def _obj(properties: dict[str, Any], required: tuple[str, ...] = ()) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "object", "properties": properties}
    if required:
        schema["required"] = list(required)
    return schema


_INT = "integer"
_STR = {"type": "string"}
# name -> (description, input schema). Short on purpose: every word costs context on each request.
TOOLS: dict[str, tuple[str, dict[str, Any]]] = {
    "roster": (
        "Agents (key: host, scope = session or team, agent) with state, current tool, calls, errors, "
        "messages; live first.",
        _obj({"limit": {"type": _INT}}),
    ),
    "cost": (
        "Tokens and USD grouped by `by`, with the total.",
        _obj({"by": {"enum": list(queries.COST_BY)}, "hours": {"type": _INT, "description": "last N hours"}}),
    ),
    "alerts": (
        "Alerts firing now; all=true: every change in the last 24 h.",
        _obj({"all": {"type": "boolean"}}),
    ),
    "timeline": (
        "Recent events, oldest first, of one agent (agent, optional scope/host) or of one scope.",
        _obj({"agent": _STR, "scope": _STR, "host": _STR, "limit": {"type": _INT}}),
    ),
    "sql": (
        "Read-only ClickHouse SQL over the history (tables: docs/queries.md), rows capped.",
        _obj({"query": {"type": "string"}, "max_rows": {"type": _INT}}, ("query",)),
    ),
    "coverage": (
        "Sessions with missing events, unpaired calls or open subagents, and the totals; all=true: every "
        "session.",
        _obj({"all": {"type": "boolean"}}),
    ),
}


def tool_list() -> list[dict[str, Any]]:
    """The tools as tools/list sends them (name, description, inputSchema, read-only)."""
    return [
        {"name": name, "description": text, "inputSchema": schema, "annotations": {"readOnlyHint": True}}
        for name, (text, schema) in TOOLS.items()
    ]


def schema_bytes(tools: list[dict[str, Any]] | None = None) -> int:
    """The tools' definitions as compact JSON, in bytes (/ 4: a tokenizer-free estimate of tokens)."""
    text = json.dumps(tool_list() if tools is None else tools, separators=(",", ":"), ensure_ascii=False)
    return len(text.encode())


# --- arguments -----------------------------------------------------------------------------------


def _int(args: Mapping[str, Any], name: str, default: int, most: int) -> int:
    value = args.get(name)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int | float) or int(value) != value or value < 1:
        raise ToolInputError(f"{name} must be a whole number from 1 (got {value!r})")
    return min(int(value), most)


def _str(args: Mapping[str, Any], name: str) -> str:
    value = args.get(name)
    if value is None:
        return ""
    if not isinstance(value, str):
        raise ToolInputError(f"{name} must be a string (got {value!r})")
    return value.strip()


def _bool(args: Mapping[str, Any], name: str) -> bool:
    value = args.get(name, False)
    if not isinstance(value, bool):
        raise ToolInputError(f"{name} must be true or false (got {value!r})")
    return value


def _since(hours: int, now: dt.datetime | None = None) -> str:
    """The start of the UTC hour `hours` back (the cost rollups are hourly), as DateTime64 text."""
    when = (now or dt.datetime.now(dt.UTC)) - dt.timedelta(hours=hours)
    return when.strftime("%Y-%m-%d %H:00:00.000")


# --- answers -------------------------------------------------------------------------------------


def records(answer: Answer, columns: tuple[str, ...] | None = None) -> list[dict[str, Any]]:
    """The rows as {column: value}, times as ISO text; only `columns` when given."""
    rows = [dict(zip(answer.columns, row, strict=True)) for row in plain_rows(answer)]
    if columns is None:
        return rows
    return [{c: row.get(c) for c in columns} for row in rows]


def _ask(reader: Reader, query: Query, max_rows: int = queries.QUERY_MAX_ROWS) -> Answer:
    return reader.query(query.sql, query.params, max_rows=max_rows)


ROSTER_COLUMNS = ("agent", "host", "scope", "team", "parent_agent", "state", "current_tool", "state_since",
                  "last_seen", "tool_calls", "errors", "messages_sent", "events")  # fmt: skip
TIMELINE_COLUMNS = ("timestamp", "event", "agent", "peer", "tool_name", "text", "id")


def roster(reader: Reader, args: Mapping[str, Any]) -> dict[str, Any]:
    limit = _int(args, "limit", ROSTER_ROWS, queries.ROSTER_LIMIT)
    lost_after_s = config.lost_after_s(config.environ_now())  # the dashboard's setting
    window = live_roster.read(lambda q: _ask(reader, q), limit, lost_after_s)
    rows = [tuple(r.get(c) for c in ROSTER_COLUMNS) for r in window.roster]
    answer = Answer(columns=ROSTER_COLUMNS, types=("",) * len(ROSTER_COLUMNS), rows=rows)
    total = {"agents": window.agents_total, "events": window.events_total}
    return {"agents": records(answer, ROSTER_COLUMNS), "total": total}


def cost(reader: Reader, args: Mapping[str, Any]) -> dict[str, Any]:
    by = _str(args, "by") or "session"
    if by not in queries.COST_BY:
        raise ToolInputError(f"by must be one of {', '.join(queries.COST_BY)} (got {by!r})")
    hours = args.get("hours")
    since = queries.EPOCH if hours is None else _since(_int(args, "hours", 1, 24 * 366))
    rows = records(_ask(reader, queries.cost(by, since, LIST_ROWS)))
    total = records(_ask(reader, queries.cost_total(since)))
    return {"by": by, "since": since[:19] + "Z", "rows": rows, "total": total[0] if total else {}}


def alerts(reader: Reader, args: Mapping[str, Any]) -> dict[str, Any]:
    every = _bool(args, "all")
    since = _since(24) if every else queries.EPOCH
    query = queries.alerts(open_only=not every, since=since, limit=LIST_ROWS)
    return {"alerts": records(_ask(reader, query))}


def timeline(reader: Reader, args: Mapping[str, Any]) -> dict[str, Any]:
    agent, scope, host = _str(args, "agent"), _str(args, "scope"), _str(args, "host")
    limit = _int(args, "limit", TIMELINE_ROWS, 500)
    if not agent and not scope:
        raise ToolInputError("name an agent, a scope (a session id or team), or both")
    if not agent:
        events = records(_ask(reader, door_queries.scope_events(scope, limit)), TIMELINE_COLUMNS)
        return {"scope": scope, "events": events}
    found = _ask(reader, door_queries.agent_key(agent, scope, host)).first()
    if not found:
        where = f" in scope {scope!r}" if scope else ""
        raise ToolInputError(f"no agent {agent!r}{where}: see roster")
    key = (str(found["host"]), str(found["scope"]), str(found["agent"]))
    events = records(_ask(reader, queries.agent_events(key, limit)), TIMELINE_COLUMNS)
    return {"host": key[0], "scope": key[1], "agent": key[2], "events": events}


def sql(reader: Reader, args: Mapping[str, Any]) -> dict[str, Any]:
    text = _str(args, "query")
    if not text:
        raise ToolInputError("query is required: one SELECT")
    answer = reader.query(text, None, max_rows=_int(args, "max_rows", SQL_ROWS, SQL_MAX_ROWS))
    return {"rows": records(answer), "truncated": answer.truncated}


def coverage(reader: Reader, args: Mapping[str, Any]) -> dict[str, Any]:
    every = _bool(args, "all")
    sessions = records(_ask(reader, queries.coverage(LIST_ROWS, below_only=not every)))
    total = records(_ask(reader, queries.COVERAGE_TOTAL))
    return {"sessions": sessions, "total": total[0] if total else {}}


ANSWERS = {
    "roster": roster,
    "cost": cost,
    "alerts": alerts,
    "timeline": timeline,
    "sql": sql,
    "coverage": coverage,
}


def answer(reader: Reader, name: str, args: Mapping[str, Any] | None) -> str:
    """The tool's answer as JSON text; raises ToolInputError for arguments that do not fit, and the
    read side's HistoryError when the store cannot answer."""
    run = ANSWERS.get(name)
    if run is None:
        raise ToolInputError(f"no tool {name!r}: one of {', '.join(TOOLS)}")
    return json.dumps(run(reader, args or {}), ensure_ascii=False, separators=(",", ":"), default=str)
