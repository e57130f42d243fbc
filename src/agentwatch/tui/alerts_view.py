"""The alerts view: open then recent alerts (tui/alerts.py keeps them); Enter opens the agent of
the selected one.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, ClassVar

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.screen import Screen
from textual.widgets import Static

from agentwatch.agents import AgentKey
from agentwatch.format import utc_datetime
from agentwatch.tui.alerts import Alerts, alert_key, is_alert
from agentwatch.tui.table import Cell, Table

__all__ = ["Alerts", "AlertsScreen", "is_alert"]

COLUMNS: list[tuple[str, int | None]] = [
    ("at", 8),
    ("state", 8),
    ("severity", 8),
    ("rule", 20),
    ("agent", 20),
    ("summary", None),
]


def _cells(alert: Mapping[str, Any]) -> list[Cell]:
    state = str(alert.get("state", ""))
    style = "bold red" if state == "firing" else "dim"
    at = utc_datetime(alert.get("at"))
    return [
        f"{at:%H:%M:%S}" if at is not None else "",
        Text(state, style=style),
        str(alert.get("severity", "")),
        str(alert.get("rule", "")),
        str(alert.get("agent") or alert.get("host") or alert.get("team") or ""),
        str(alert.get("summary", "")),
    ]


class AlertsScreen(Screen[None]):
    """Open alerts, then the recent changes; Enter opens the selected alert's agent."""

    HELP: ClassVar[str] = "Alerts"  # its keys' title in the help

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "back", "Back"),
        Binding("q", "back", "Back", show=False),
        Binding("enter", "open_agent", "Agent", show=False),
    ]

    def __init__(self, alerts: Alerts, show_agent: Callable[[AgentKey], None]) -> None:
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
        opened = len(self.alerts.open)
        title = f"Alerts: {opened} open, {len(self.shown) - opened} resolved (Enter: the agent)"
        self.query_one("#alerts-title", Static).update(title)
        self.query_one("#alerts", Table).set_rows(self.shown, _cells)

    @on(Table.RowSelected, "#alerts")
    def selected(self, event: Table.RowSelected) -> None:
        self._open(event.cursor_row)

    def action_open_agent(self) -> None:
        self._open(self.query_one("#alerts", Table).cursor_row)

    def _open(self, index: int) -> None:
        if 0 <= index < len(self.shown):
            key = alert_key(self.shown[index])
            if key[2]:
                self.show_agent(key)
            else:
                self.notify("this alert is about no one agent", severity="warning")

    def action_back(self) -> None:
        self.app.pop_screen()
