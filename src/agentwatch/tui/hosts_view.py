"""The hosts view: the fleet's agent hosts as `agentwatch hosts` shows them, asked again every few
seconds.

Per host: its link (cut, and since when), its last event and events in the last hour, the backlog
not yet at the hub and the age of its oldest message, the hook's spool and the versions it runs.
On an agent host (`up --hub`) the one row is the host as it sees itself, its backlog growing
while its link is cut (what the hub cannot see).
The rows come from a callable the command that opens the dashboard hands the app (the one
`agentwatch hosts --json` prints, cli/hosts.py), called in a worker thread: it asks the bus and the
store, which takes up to a few seconds when either is away.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, ClassVar

from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.screen import Screen
from textual.widgets import DataTable, Footer, Static

from agentwatch.format import HOST_COLUMNS, host_cells, one_line
from agentwatch.tui.common import refill
from agentwatch.tui.store_screen import table

# The fleet's rows, one dict per host (cli/hosts.py host_rows); raises when it cannot be read.
HostsSource = Callable[[], list[dict[str, Any]]]
REFRESH_SECONDS = 5.0
NO_HOSTS = (
    "no hosts: `agentwatch hosts add NAME` on the hub prints the URL host NAME joins with "
    "(`agentwatch up --hub URL`, docs/deploy.md)"
)


class HostsScreen(Screen[None]):
    """The fleet's hosts, one row each, asked again every REFRESH_SECONDS."""

    HELP: ClassVar[str] = "Hosts"  # its keys' title in the help

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape,q", "app.pop_screen", "Back"),
        Binding("r", "reload", "Refresh"),
    ]

    def __init__(self, source: HostsSource, refresh_seconds: float = REFRESH_SECONDS) -> None:
        super().__init__()
        self.source = source
        self.refresh_seconds = refresh_seconds
        self.sub_title = "hosts"
        self.head = Static(Text("asking the fleet ...", style="dim"), id="hosts-head", classes="store-head")
        self.rows: list[dict[str, Any]] = []
        self.problem = ""

    def compose(self) -> ComposeResult:
        yield self.head
        yield table("hosts-table", *(c.lower() for c in HOST_COLUMNS))
        yield Footer()

    def on_mount(self) -> None:
        self.load()
        self.set_interval(self.refresh_seconds, self.load)

    def action_reload(self) -> None:
        self.load()

    def load(self) -> None:
        self._fetch()

    @work(thread=True, exclusive=True, group="hosts")
    def _fetch(self) -> None:
        try:
            rows = self.source()
        except Exception as exc:  # a bus or store away: said on the head line, asked again later
            self.app.call_from_thread(self._failed, one_line(exc, 300))
            return
        self.app.call_from_thread(self._answered, rows)

    def _answered(self, rows: list[dict[str, Any]]) -> None:
        if not self.is_attached:
            return
        self.rows, self.problem = rows, ""
        now = time.time()
        refill(self.query_one("#hosts-table", DataTable), [host_cells(r, now) for r in rows])
        if not rows:
            self.head.update(Text(NO_HOSTS, style="dim"))
            return
        cut = sum(1 for r in rows if r["link"] != "up")
        if rows[0].get("seen_from") == "this host":  # a host's own row: the hub cannot see it while cut
            head = Text(f"this host, as it sees itself: the link to the hub {rows[0]['link']}", style="bold")
            if cut:
                head.append(f" · {rows[0]['backlog']:,} events wait here for the hub", style="bold red")
        else:
            head = Text(f"hosts  {len(rows)} in the fleet", style="bold")
            if cut:
                head.append(f" · {cut} cut off", style="bold red")
        head.append(f"   asked every {self.refresh_seconds:g}s; r asks now", style="dim")
        self.head.update(head)

    def _failed(self, text: str) -> None:
        if not self.is_attached:
            return
        self.problem = text
        self.head.update(Text(f"fleet: {text}  (asked again in {self.refresh_seconds:g}s)", style="bold red"))
