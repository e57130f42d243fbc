"""A screen of the store's answers: asked from a worker thread, painted on the app's loop.

The screens of the past (sessions, a session, search, cost) ask the HistorySource questions that
take a few hundred milliseconds; `load` runs the screen's `fetch` in a thread worker and hands its
result to `show` on the event loop, or its HistoryError's message to the head line. Nothing here
touches a client: the history is the app's HistorySource.
"""

from __future__ import annotations

from typing import Any

from rich.text import Text
from textual import work
from textual.screen import Screen
from textual.widgets import DataTable, Static

from agentwatch.format import one_line
from agentwatch.store.answer import HistoryError
from agentwatch.tui.common import FittedTable
from agentwatch.tui.sources import HistorySource


def table(table_id: str, *columns: str) -> DataTable[Any]:
    """A row-cursor table with its columns."""
    found: DataTable[Any] = FittedTable(id=table_id, cursor_type="row", zebra_stripes=True)
    found.add_columns(*columns)
    return found


class StoreScreen(Screen[None]):
    """A screen painted from one question to the store (`fetch`, in a thread), asked again by `load`."""

    def __init__(self, history: HistorySource, head_id: str) -> None:
        super().__init__()
        self.history = history
        self.head = Static(id=head_id, classes="store-head")
        self.problem = ""
        self.loaded = False

    def fetch(self) -> Any:
        """The screen's answer (in a worker thread): raises HistoryError."""
        raise NotImplementedError

    def show(self, answer: Any) -> None:
        """Paint the answer (on the event loop)."""
        raise NotImplementedError

    def on_mount(self) -> None:
        # Textual calls every class's on_mount: a screen that starts otherwise overrides `start`.
        self.start()

    def start(self) -> None:
        self.load()

    def say(self, text: str | Text) -> None:
        self.head.update(text)

    def load(self) -> None:
        self.say(Text("asking the store ...", style="dim"))
        self._fetch()

    @work(thread=True, exclusive=True, group="store-screen")
    def _fetch(self) -> None:
        try:
            answer = self.fetch()
        except HistoryError as exc:
            self.app.call_from_thread(self._failed, one_line(exc, 300))
            return
        self.app.call_from_thread(self._answered, answer)

    def _answered(self, answer: Any) -> None:
        if not self.is_attached:
            return
        self.problem, self.loaded = "", True
        self.show(answer)

    def _failed(self, text: str) -> None:
        if not self.is_attached:
            return
        self.problem = text
        self.say(Text(f"store: {text}  (r asks again)", style="bold red"))
