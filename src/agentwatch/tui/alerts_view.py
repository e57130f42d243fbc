"""The dashboard's alerts: what the watchdog publishes on agentwatch.alert.>, and the alerts view.

`Alerts` (no Textual) keeps the open alerts and the recent changes, says how many are open for the
status line, which agents to mark in the roster, and whether a change is a new firing alert (the
bell, unless AGENTWATCH_ALERT_BELL=0). `AlertsScreen` lists open then recent alerts; Enter opens
the agent of the selected one.
"""

from __future__ import annotations

import os
from collections import deque
from collections.abc import Callable, Mapping
from typing import Any, ClassVar

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.screen import Screen
from textual.widgets import Static

from agentwatch.tui.table import Cell, Table

RECENT = 200
MARK = "! "
COLUMNS: list[tuple[str, int | None]] = [
    ("at", 8),
    ("state", 8),
    ("severity", 8),
    ("rule", 20),
    ("agent", 20),
    ("summary", None),
]


def is_alert(message: Mapping[str, Any]) -> bool:
    """An alert change (not an event envelope): a rule and a state, no event."""
    return "rule" in message and "state" in message and "event" not in message


class Alerts:
    """Open alerts by id and the last RECENT changes, newest first."""

    def __init__(self, environ: Mapping[str, str] = os.environ) -> None:
        self.bell = environ.get("AGENTWATCH_ALERT_BELL", "1").strip().lower() not in (
            "0",
            "false",
            "no",
            "off",
        )
        self.open: dict[str, dict[str, Any]] = {}
        self.recent: deque[dict[str, Any]] = deque(maxlen=RECENT)
        self._agents: dict[str, int] = {}

    def take(self, alert: Mapping[str, Any]) -> bool:
        """One change; True when it is a new firing alert (ring the bell)."""
        alert_id, state = str(alert.get("id", "")), str(alert.get("state", ""))
        self.recent.appendleft(dict(alert))
        new = state == "firing" and alert_id not in self.open
        if new:
            self.open[alert_id] = dict(alert)
        elif state == "resolved":
            self.open.pop(alert_id, None)
        self._agents = {}
        for a in self.open.values():
            name = str(a.get("agent", ""))
            if name:
                self._agents[name] = self._agents.get(name, 0) + 1
        return new

    def marked(self, agent: str) -> bool:
        return agent in self._agents

    def mark(self, agent: str) -> str:
        """What goes before the agent's name in the roster: MARK while it has an open alert."""
        return MARK if agent in self._agents else ""

    def status(self) -> str:
        return f"{len(self.open)} open alert{'s' if len(self.open) != 1 else ''}" if self.open else ""

    def rows(self) -> list[dict[str, Any]]:
        """Open alerts (newest first), then the recent changes."""
        opened = sorted(self.open.values(), key=lambda a: str(a.get("at", "")), reverse=True)
        return [*opened, *self.recent]


def _cells(alert: Mapping[str, Any]) -> list[Cell]:
    state = str(alert.get("state", ""))
    style = "bold red" if state == "firing" else "dim"
    return [
        str(alert.get("at", ""))[11:19],
        Text(state, style=style),
        str(alert.get("severity", "")),
        str(alert.get("rule", "")),
        str(alert.get("agent") or alert.get("host") or alert.get("team") or ""),
        str(alert.get("summary", "")),
    ]


class AlertsScreen(Screen[None]):
    """Open alerts, then the recent changes; Enter opens the selected alert's agent."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "back", "Back"),
        Binding("q", "back", "Back", show=False),
        Binding("enter", "open_agent", "Agent", show=False),
    ]

    def __init__(self, alerts: Alerts, show_agent: Callable[[str], None]) -> None:
        super().__init__()
        self.alerts = alerts
        self.show_agent = show_agent
        self.shown: list[dict[str, Any]] = []

    def compose(self) -> ComposeResult:
        yield Static(id="alerts-title")
        yield Table(id="alerts")

    def on_mount(self) -> None:
        self.query_one("#alerts", Table).set_columns(COLUMNS)
        self.paint()
        self.set_interval(1.0, self.paint)
        self.query_one("#alerts", Table).focus()

    def paint(self) -> None:
        self.shown = self.alerts.rows()
        opened, recent = len(self.alerts.open), len(self.alerts.recent)
        title = f"Alerts: {opened} open, {recent} recent changes (Enter: the agent)"
        self.query_one("#alerts-title", Static).update(title)
        self.query_one("#alerts", Table).set_rows(self.shown, _cells)

    @on(Table.RowSelected, "#alerts")
    def selected(self, event: Table.RowSelected) -> None:
        self._open(event.cursor_row)

    def action_open_agent(self) -> None:
        self._open(self.query_one("#alerts", Table).cursor_row)

    def _open(self, index: int) -> None:
        if 0 <= index < len(self.shown):
            agent = str(self.shown[index].get("agent", ""))
            if agent:
                self.show_agent(agent)
            else:
                self.notify("this alert is about no one agent", severity="warning")

    def action_back(self) -> None:
        self.app.pop_screen()
