"""The dashboard's ways into the past: its sessions, a search, the cost view (and the key that shows
the feed's bookkeeping events, whose action is the live view's); and the fleet's hosts.

A base of the app (AgentwatchApp), so its keys and the command palette reach these screens; each
needs the store (the HistorySource) and says so without one.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from textual.binding import Binding

from agentwatch.tui.sources import HistorySource

if TYPE_CHECKING:
    from textual.app import App

    _Base = App[None]
else:
    _Base = object

HISTORY_BINDINGS = [
    Binding("e", "sessions", "Sessions", tooltip="every session: its turns, events, agents, alerts, replay"),
    Binding("g", "search", "Search", tooltip="a word, an error, a file or a command in the whole history"),
    Binding("c", "cost", "Cost", tooltip="burn rate; cost by agent, team, model, day; the costliest turns"),
    Binding("m", "hosts", "Hosts", show=False,
            tooltip="the fleet's hosts: link, events, backlog, spool, versions"),
    Binding("b", "toggle_bookkeeping", "Bookkeeping", show=False,
            tooltip="show PostToolBatch, InstructionsLoaded and other bookkeeping in the feed, on/off"),
]  # fmt: skip


class HistoryActions(_Base):
    """The actions of HISTORY_BINDINGS that open a screen."""

    history: HistorySource | None
    # The fleet's hosts (`agentwatch hosts`' rows), set by the command that opens the dashboard.
    hosts: Callable[[], list[dict[str, Any]]] | None = None

    def _history_or_say(self) -> HistorySource | None:
        if self.history is None:
            self.notify("sessions, search and cost need the store (agentwatch up)", severity="warning")
        return self.history

    def _open(self, screen: Any) -> None:
        while len(self.screen_stack) > 1:
            self.pop_screen()
        self.push_screen(screen)

    def action_sessions(self) -> None:
        if (history := self._history_or_say()) is not None:
            from agentwatch.tui.sessions_view import SessionsScreen

            self._open(SessionsScreen(history))

    def action_search(self) -> None:
        if (history := self._history_or_say()) is not None:
            from agentwatch.tui.search_view import SearchScreen

            self._open(SearchScreen(history))

    def action_cost(self) -> None:
        if (history := self._history_or_say()) is not None:
            from agentwatch.tui.cost_view import CostScreen

            self._open(CostScreen(history))

    def action_hosts(self) -> None:
        if self.hosts is None:
            self.notify("the hosts view needs the fleet's bus (agentwatch up)", severity="warning")
            return
        from agentwatch.tui.hosts_view import HostsScreen

        self._open(HostsScreen(self.hosts))
