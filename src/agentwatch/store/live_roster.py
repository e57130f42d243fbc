"""The live window's roster and costs in a few plain questions, folded here.

`queries.roster` and `queries.dashboard_costs` are each one question that does everything in SQL:
which scopes are live, every agent's state by the state machine (agents.TRANSITIONS, generated into
SQL), their silence, the sort, the totals, the costs with subagents'. They are the reference and a
person's form. ClickHouse spends most of their time planning them, and their `IN (subquery)` does
not narrow the rollups by their sort key, so the dashboard asks instead, every refresh:

1. the window's scopes (scope_hours, newest hours first: a few milliseconds);
2. the agent rollup's rows of those scopes, flat (the argMax states merged, nothing computed);
3. the cost rollup's rows of those scopes, by agent, parent and team;
4. the cost of the hour (cost_hourly).

and folds the answers here with the same rules in Python (agents.state_after, agents.shown_state),
so each question is small, read through the rollups' sort keys, and the same for any history.
tests/integration/test_live_window.py checks the fold against the one-question reference.

Standard library only, like store/answer.py: the dashboard and the MCP server import it.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from agentwatch import agents
from agentwatch.store import live_window
from agentwatch.store.answer import Answer, seconds
from agentwatch.store.queries import HEADLINE_SQL, Query, recent_events

Ask = Callable[[Query], Answer]

# The window's (host, scope) pairs as two arrays of one length: ClickHouse's set for
# `(host, scope) IN arrayZip(...)` is built before the rollups' primary keys are read, so only the
# granules of those scopes are (an `IN (subquery)` here read every granule).
_PAIRS = "arrayZip({hosts:Array(String)}, {scopes:Array(String)})"

SCOPES_SQL = f"SELECT host, scope FROM {live_window.WINDOW_SCOPES}"  # noqa: S608 - constants only

AGENTS_SQL = (
    "SELECT toString(host) AS host, scope, toString(agent) AS agent, l.1 AS team, l.2 AS parent_agent, "  # noqa: S608
    "l.3 AS agent_type, l.4 AS agent_id, l.5 AS session_id, l.6 AS last_event, s.1 AS state_event, "
    "s.2 AS state_note, s.3 AS tool, if(s.1 = '', NULL, s.4) AS state_since, s.5 AS state_id, "
    "first_seen, last_seen, tool_calls, errors, events, messages_sent FROM ("
    "SELECT host, scope, agent, argMaxMerge(latest) AS l, argMaxMerge(state) AS s, "
    "min(first_seen) AS first_seen, max(last_seen) AS last_seen, sum(tool_calls) AS tool_calls, "
    "sum(errors) AS errors, sum(events) AS events, sum(messages_sent) AS messages_sent "
    f"FROM agent_key_rollup WHERE (host, scope) IN {_PAIRS} GROUP BY host, scope, agent)"
)

COSTS_SQL = (
    "SELECT host, scope, agent, parent_agent, team, c.1 AS l_team, c.2 AS l_parent, c.3 AS l_agent_id, "  # noqa: S608
    "c.4 AS l_agent_type, first_at, last_at, api_calls, priced_usd, unpriced_calls, tokens FROM ("
    "SELECT toString(host) AS host, scope, toString(agent) AS agent, "
    "toString(parent_agent) AS parent_agent, toString(team) AS team, argMaxMerge(latest) AS c, "
    "min(first_at) AS first_at, max(last_at) AS last_at, sum(api_calls) AS api_calls, "
    "sum(priced_usd) AS priced_usd, sum(unpriced_calls) AS unpriced_calls, "
    "sum(input_tokens) + sum(output_tokens) + sum(cache_read_tokens) + sum(cache_write_5m_tokens) "
    "+ sum(cache_write_1h_tokens) AS tokens "
    f"FROM agent_cost_rollup WHERE (host, scope) IN {_PAIRS} "
    "GROUP BY host, scope, agent, parent_agent, team)"
)

# The window's tasks (queries.window_tasks' rows) from its scopes and the first time of any of
# their agents: no event of theirs is older, and events are ordered by time, so only the parts
# since then are read (scanning every task event ever stored grew with the history).
TASKS_SQL = live_window.TASKS_TEMPLATE.replace(
    "@SCOPES@", f"timestamp >= {{since:DateTime64(3, 'UTC')}} AND (host, scope) IN {_PAIRS}"
)

HOUR_SQL = (
    "SELECT toString(toStartOfHour(now() - INTERVAL 1 HOUR)) AS since, sum(api_calls) AS api_calls, "
    "sum(priced_usd) AS priced_usd, sum(unpriced_calls) AS unpriced_calls, sum(input_tokens) "
    "+ sum(output_tokens) + sum(cache_read_tokens) + sum(cache_write_5m_tokens) "
    "+ sum(cache_write_1h_tokens) AS tokens "
    "FROM cost_hourly WHERE hour >= toStartOfHour(now() - INTERVAL 1 HOUR)"
)


def scopes_query(limit: int, lost_after_s: float) -> Query:
    return Query(SCOPES_SQL, {"limit": int(limit), "lost_after_s": max(0, int(lost_after_s))})


def _pairs(scopes: Sequence[tuple[str, str]]) -> dict[str, Any]:
    return {"hosts": [h for h, _ in scopes], "scopes": [s for _, s in scopes]}


def agents_query(scopes: Sequence[tuple[str, str]]) -> Query:
    return Query(AGENTS_SQL, _pairs(scopes))


def costs_query(scopes: Sequence[tuple[str, str]]) -> Query:
    return Query(COSTS_SQL, _pairs(scopes))


# The newest events of a team at work lie within the last day: asked there first, the feed's
# question reads that day's parts alone instead of every month's (events and messages are
# partitioned by month and ordered by time), and costs the same at 1M events as at 10M.
RECENT_WITHIN_S = 86_400
_WITHIN = "WHERE timestamp >= now64(3) - toIntervalSecond({within:UInt32}) "
RECENT_WITHIN_SQL = HEADLINE_SQL.format(where=_WITHIN, message_where=_WITHIN)


def recent_within(limit: int, within_s: int) -> Query:
    """queries.recent_events(limit) of the last `within_s` seconds only."""
    return Query(RECENT_WITHIN_SQL, {"limit": int(limit), "within": int(within_s)})


def newest_events(ask: Ask, limit: int) -> Answer:
    """queries.recent_events(limit), asked over the last RECENT_WITHIN_S first: when that finds
    `limit` rows they are the newest of all (every older row is older than each of them); else the
    whole history is asked."""
    answer = ask(recent_within(limit, RECENT_WITHIN_S))
    return answer if len(answer.rows) >= limit else ask(recent_events(limit))


def tasks_query(scopes: Sequence[tuple[str, str]], first_seen: float, limit: int) -> Query:
    """The tasks of `scopes`, none older than `first_seen` (Unix seconds): one second earlier is
    asked, so that a time's rounding never leaves one out."""
    since = dt.datetime.fromtimestamp(max(first_seen - 1.0, 0.0), dt.UTC).strftime("%Y-%m-%d %H:%M:%S")
    return Query(TASKS_SQL, {**_pairs(scopes), "since": since, "tasks": int(limit)})


HOUR = Query(HOUR_SQL)


@dataclass
class Window:
    """The live window: its roster (rows as `queries.roster` gives them, at most `limit`), the
    totals over all of its agents, and the rows of `queries.dashboard_costs`."""

    roster: list[dict[str, Any]] = field(default_factory=list)
    scopes: list[tuple[str, str]] = field(default_factory=list)
    first_seen: float = 0.0  # Unix seconds: the earliest of every agent of the window
    agents_total: int = 0
    events_total: int = 0
    messages_total: int = 0
    done_total: int = 0
    costs: list[tuple[Any, ...]] = field(default_factory=list)


def _scopes(ask: Ask, limit: int, lost_after_s: float) -> list[tuple[str, str]]:
    return [(str(h), str(s)) for h, s in ask(scopes_query(limit, lost_after_s)).rows]


def costs(ask: Ask, limit: int, lost_after_s: float) -> list[tuple[Any, ...]]:
    """The window's rows of `queries.dashboard_costs` alone (asked again soon after usage arrives)."""
    scopes = _scopes(ask, limit, lost_after_s)
    rows = ask(costs_query(scopes)).dicts() if scopes else []
    return [*fold_costs(rows), *_hour_row(ask(HOUR).first())]


def tasks(ask: Ask, window: Window, limit: int) -> list[dict[str, Any]]:
    """queries.window_tasks' rows for `window` (as `read` gave it)."""
    if not window.scopes:
        return []
    return ask(tasks_query(window.scopes, window.first_seen, limit)).dicts()


def read(ask: Ask, limit: int, lost_after_s: float, now: dt.datetime | None = None) -> Window:
    """The live window of the newest `limit` scopes and those active within `lost_after_s`."""
    scopes = _scopes(ask, limit, lost_after_s)
    hour = ask(HOUR).first()
    if not scopes:
        return Window(costs=_hour_row(hour))
    key_rows = ask(agents_query(scopes)).dicts()
    cost_rows = ask(costs_query(scopes)).dicts()
    now = now or dt.datetime.now(dt.UTC)
    every = fold_agents(key_rows, cost_rows, lost_after_s, now)
    every.sort(key=_order)
    return Window(
        roster=every[: max(0, int(limit))],
        scopes=scopes,
        first_seen=min((seconds(r["first_seen"]) for r in every), default=0.0),
        agents_total=len(every),
        events_total=sum(int(r["events"]) for r in every),
        messages_total=sum(int(r["messages_sent"]) for r in every),
        done_total=sum(1 for r in every if r["state"] in agents.DONE),
        costs=[*fold_costs(cost_rows), *_hour_row(hour)],
    )


def _order(row: Mapping[str, Any]) -> tuple[bool, float, str]:
    """`ORDER BY state IN ('lost', 'stopped'), last_seen DESC, agent` (UTF-8 sorts as code points)."""
    return (row["state"] in agents.DONE, -seconds(row["last_seen"]), str(row["agent"]))


def fold_agents(
    key_rows: Iterable[Mapping[str, Any]],
    cost_rows: Iterable[Mapping[str, Any]],
    lost_after_s: float,
    now: dt.datetime,
) -> list[dict[str, Any]]:
    """The `agents` view's rows of the window: an agent with events from the agent rollup, one
    with token usage alone from the cost rollup's latest row; states by agents.TRANSITIONS and
    the silence of the agent's scope."""
    rows: dict[tuple[str, str, str], dict[str, Any]] = {}
    for r in key_rows:
        event, note = str(r["state_event"]), str(r["state_note"])
        rows[(r["host"], r["scope"], r["agent"])] = {
            **{k: r[k] for k in _KEY_COLUMNS},
            "raw_state": agents.state_after(event, note) or agents.INITIAL,
            "tool": r["tool"],
        }
    for key, r in _usage_only(cost_rows, rows).items():
        rows[key] = {
            "agent": key[2], "host": key[0], "scope": key[1], "team": r["l_team"],
            "parent_agent": r["l_parent"], "agent_type": r["l_agent_type"], "agent_id": r["l_agent_id"],
            "session_id": key[1], "last_event": "Usage", "first_seen": r["first_at"],
            "last_seen": r["last_at"], "tool_calls": 0, "errors": 0, "events": 0, "messages_sent": 0,
            "raw_state": agents.INITIAL, "tool": "", "state_since": None, "state_event": "",
            "state_note": "", "state_id": "",
        }  # fmt: skip
    scope_seen: dict[tuple[str, str], float] = {}
    for (host, scope, _), row in rows.items():
        seen = seconds(row["last_seen"])
        scope_seen[(host, scope)] = max(scope_seen.get((host, scope), seen), seen)
    out = []
    now_ms = int(now.timestamp() * 1000)
    for (host, scope, _), row in rows.items():
        last = scope_seen[(host, scope)]
        silent_s = (now_ms - round(last * 1000)) / 1000
        raw = row.pop("raw_state")
        tool = row.pop("tool")
        row.update(
            state=agents.shown_state(raw, silent_s, lost_after_s),
            current_tool=tool if raw in agents.TOOL_STATES else "",
            scope_last_seen=dt.datetime.fromtimestamp(last, dt.UTC),
            silent_s=silent_s,
        )
        out.append(row)
    return out


_KEY_COLUMNS = (
    "agent", "host", "scope", "team", "parent_agent", "agent_type", "agent_id", "session_id",
    "last_event", "first_seen", "last_seen", "tool_calls", "errors", "events", "messages_sent",
    "state_since", "state_event", "state_note", "state_id",
)  # fmt: skip


def _usage_only(
    cost_rows: Iterable[Mapping[str, Any]], keyed: Mapping[tuple[str, str, str], Any]
) -> dict[tuple[str, str, str], dict[str, Any]]:
    """Per agent with token usage and no event: its newest cost row's identity (the rollup's
    argMax by time), its first and last API message, if it made any call."""
    rows: dict[tuple[str, str, str], list[Mapping[str, Any]]] = {}
    for r in cost_rows:
        key = (r["host"], r["scope"], r["agent"])
        if key not in keyed:
            rows.setdefault(key, []).append(r)
    out: dict[tuple[str, str, str], dict[str, Any]] = {}
    for key, mine in rows.items():
        timed = [r for r in mine if r["last_at"] is not None]
        if not timed or sum(int(r["api_calls"]) for r in mine) <= 0:
            continue
        firsts = [r["first_at"] for r in timed if r["first_at"] is not None]
        newest = max(timed, key=lambda r: seconds(r["last_at"]))
        out[key] = {**newest, "first_at": min(firsts, key=seconds) if firsts else None}
    return out


def _price(calls: int, priced: float, unpriced: int) -> float | None:
    """`if(sum(api_calls) > 0 AND sum(unpriced_calls) = sum(api_calls), NULL, sum(priced_usd))`."""
    return None if calls > 0 and unpriced == calls else priced


@dataclass
class _Sums:
    calls: int = 0
    priced: float = 0.0
    unpriced: int = 0
    tokens: int = 0

    def add(self, row: Mapping[str, Any]) -> None:
        self.calls += int(row["api_calls"])
        self.priced += float(row["priced_usd"])
        self.unpriced += int(row["unpriced_calls"])
        self.tokens += int(row["tokens"])

    @property
    def usd(self) -> float | None:
        return _price(self.calls, self.priced, self.unpriced)


def fold_costs(cost_rows: Iterable[Mapping[str, Any]]) -> list[tuple[Any, ...]]:
    """`queries.dashboard_costs`' agent and team rows: (what, host, scope, name, usd, usd with
    subagents, tokens, unpriced calls)."""
    own: dict[tuple[str, str, str], _Sums] = {}
    children: dict[tuple[str, str, str], float] = {}
    teams: dict[str, _Sums] = {}
    for r in cost_rows:
        own.setdefault((r["host"], r["scope"], r["agent"]), _Sums()).add(r)
        if r["parent_agent"]:
            key = (r["host"], r["scope"], r["parent_agent"])
            children[key] = children.get(key, 0.0) + float(r["priced_usd"])
        if r["team"]:
            teams.setdefault(r["team"], _Sums()).add(r)
    out: list[tuple[Any, ...]] = []
    for (host, scope, name), sums in own.items():
        if sums.calls <= 0:
            continue
        subs = children.get((host, scope, name), 0.0)
        usd = sums.usd
        with_subs = None if usd is None and subs == 0 else (usd or 0.0) + subs
        out.append(("agent", host, scope, name, usd, with_subs, sums.tokens, sums.unpriced))
    for team, sums in teams.items():
        if sums.calls > 0:
            out.append(("team", "", "", team, sums.usd, sums.usd, sums.tokens, sums.unpriced))
    return out


def _hour_row(hour: Mapping[str, Any]) -> list[tuple[Any, ...]]:
    """The hour's row (none when the store gave no answer row)."""
    if not hour:
        return []
    calls, priced = int(hour.get("api_calls") or 0), float(hour.get("priced_usd") or 0.0)
    unpriced = int(hour.get("unpriced_calls") or 0)
    usd = _price(calls, priced, unpriced)
    return [("hour", "", "", str(hour.get("since") or ""), usd, usd, int(hour.get("tokens") or 0), unpriced)]
