"""The roster's start: every agent the store has seen (the `agents` view, read from its rollup),
newest first within the roster's cap, not only the agents of the recent events the feed loads.

The recent events are applied on top (state, tool, timeline); the rollup's counts then replace
the ones those events added, since the rollup counted every event of the agent's history.
Nothing here imports Textual."""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping, Sequence
from typing import Any

from agentwatch.store import queries
from agentwatch.tui.model import STATE_ORDER, Agent, Roster
from agentwatch.tui.sources import HistorySource

_NEEDED = frozenset({"agent", "state", "last_seen", "events"})


def roster_rows(history: HistorySource, limit: int) -> list[dict[str, Any]]:
    """The `agents` rows for the roster, as dicts; [] when the store cannot say (an older store
    without the rollup, an error): the roster then starts from the recent events alone."""
    try:
        result = history.query(*queries.roster(limit))
    except Exception:  # the recent events are in already: a roster from them is still right
        return []
    columns = [str(c) for c in result.get("columns") or []]
    if "error" in result or not set(columns) >= _NEEDED:
        return []
    return [dict(zip(columns, row, strict=False)) for row in result.get("rows") or []]


def _seconds(value: Any) -> float:
    if isinstance(value, (int, float)):
        return float(value)
    if not isinstance(value, str) or not value:
        return 0.0
    text = value.rstrip("Z").replace("T", " ")
    try:
        return dt.datetime.fromisoformat(text).replace(tzinfo=dt.UTC).timestamp()
    except ValueError:
        return 0.0


def seed(roster: Roster, rows: Sequence[Mapping[str, Any]]) -> None:
    """Put the stored agents in the roster (oldest first, so the cap keeps the newest)."""
    for row in sorted(rows, key=lambda r: _seconds(r.get("last_seen"))):
        name = str(row.get("agent") or "")
        if not name or roster.get(name) is not None:
            continue
        state = str(row.get("state") or "")
        agent = Agent(
            name=name,
            team=str(row.get("team") or ""),
            parent=str(row.get("parent_agent") or ""),
            agent_type=str(row.get("agent_type") or ""),
            session_id=str(row.get("session_id") or ""),
            host=str(row.get("host") or ""),
            state=state if state in STATE_ORDER else Agent.state,
            tool=str(row.get("current_tool") or ""),
            last_seen=_seconds(row.get("last_seen")),
        )
        roster.adopt(agent)
    settle(roster, rows)


def settle(roster: Roster, rows: Sequence[Mapping[str, Any]]) -> None:
    """The rollup's whole-history counts for the agents it knows."""
    for row in rows:
        agent = roster.get(str(row.get("agent") or ""))
        if agent is None:
            continue
        for attr, key in (("events", "events"), ("tool_calls", "tool_calls"), ("errors", "errors"),
                          ("messages", "messages_sent")):  # fmt: skip
            value = row.get(key)
            if isinstance(value, int):
                setattr(agent, attr, value)
        agent.last_seen = max(agent.last_seen, _seconds(row.get("last_seen")))
