"""The alerts the dashboard knows: what the watchdog publishes on agentwatch.alert.>, merged with
the store's open and recent alerts.

`Alerts` keeps the open alerts and the recent changes, says how many are open for the status line,
which agents to mark in the roster, and whether a change is a new firing alert (the bell, unless
AGENTWATCH_ALERT_BELL=0). No Textual here: the live view's model (tui/live.py) holds one, the alerts
view (tui/alerts_view.py) paints it.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from typing import Any

from agentwatch.agents import AgentKey, key_of
from agentwatch.store.answer import seconds

RECENT = 200
# Alerts kept at most (the resolved ones beyond it are forgotten, oldest first).
KEEP = 5000
MARK = "! "
# An alert's states in the order they happen: a merge keeps the later one.
_RANK = {"firing": 0, "resolved": 1}


def is_alert(message: Mapping[str, Any]) -> bool:
    """An alert change (not an event envelope): a rule and a state, no event."""
    return "rule" in message and "state" in message and "event" not in message


class Alerts:
    """Every alert the dashboard knows, one per id in its latest state: the store's open and recent
    alerts, merged with the changes that arrive live. An alert's states only move forward (firing,
    then resolved), so merging the two in any order gives the same answer."""

    def __init__(self, environ: Mapping[str, str] = os.environ, keep: int = KEEP) -> None:
        self.bell = environ.get("AGENTWATCH_ALERT_BELL", "1").strip().lower() not in (
            "0",
            "false",
            "no",
            "off",
        )
        self.keep = keep
        self.by_id: dict[str, dict[str, Any]] = {}
        self.open: dict[str, dict[str, Any]] = {}
        self._agents: dict[AgentKey, int] = {}

    def _merge(self, alert: Mapping[str, Any]) -> bool:
        """One change in; True when it made a firing alert known for the first time."""
        alert_id, state = str(alert.get("id", "")), str(alert.get("state", ""))
        if not alert_id or state not in _RANK:
            return False
        known = self.by_id.get(alert_id)
        if known is not None and _RANK[str(known.get("state"))] > _RANK[state]:
            return False
        self.by_id[alert_id] = dict(alert)
        if state == "firing":
            self.open[alert_id] = self.by_id[alert_id]
        else:
            self.open.pop(alert_id, None)
        return known is None and state == "firing"

    def _after(self) -> None:
        if len(self.by_id) > self.keep:  # forget the oldest resolved alerts
            resolved = sorted((a for a in self.by_id.values() if a.get("state") == "resolved"), key=_at)
            for alert in resolved[: len(self.by_id) - self.keep]:
                del self.by_id[str(alert["id"])]
        self._agents = {}
        for a in self.open.values():
            key = alert_key(a)
            if key[2]:
                self._agents[key] = self._agents.get(key, 0) + 1

    def take(self, alert: Mapping[str, Any]) -> bool:
        """One change from the bus; True when it is a new firing alert (ring the bell)."""
        new = self._merge(alert)
        self._after()
        return new

    def load(self, rows: Iterable[Mapping[str, Any]]) -> None:
        """The store's open and recent alerts (queries.alerts rows): merged, never rung."""
        for row in rows:
            self._merge(row)
        self._after()

    def marked(self, agent: AgentKey) -> bool:
        return agent in self._agents

    def mark(self, agent: AgentKey) -> str:
        """What goes before the agent's name in the roster: MARK while it has an open alert."""
        return MARK if agent in self._agents else ""

    def status(self) -> str:
        return f"{len(self.open)} open alert{'s' if len(self.open) != 1 else ''}" if self.open else ""

    def rows(self) -> list[dict[str, Any]]:
        """Each alert once: the open ones, then the resolved, newest first."""
        opened = sorted(self.open.values(), key=_at, reverse=True)
        resolved = sorted(
            (a for a in self.by_id.values() if a.get("state") != "firing"), key=_at, reverse=True
        )
        return [*opened, *resolved[:RECENT]]


def _at(alert: Mapping[str, Any]) -> float:
    return seconds(alert.get("at"))


def alert_key(alert: Mapping[str, Any]) -> AgentKey:
    """The key of the agent an alert is about (its name '' when it is about no one agent)."""
    return key_of(alert)
