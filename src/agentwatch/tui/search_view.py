"""The dashboard's search: a word, an error, a file or a command across the whole history.

The same question as `agentwatch search` (store/session_queries.py: the text indexes of
015_search.sql), asked from a worker; Enter on a result opens its session's page at that event.
"""

from __future__ import annotations

import datetime as dt
from typing import Any, ClassVar

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.widgets import DataTable, Footer, Input

from agentwatch.harnesses import short_id
from agentwatch.store import session_queries
from agentwatch.tui.common import refill
from agentwatch.tui.sources import HistorySource
from agentwatch.tui.store_screen import StoreScreen, table


def result_cells(row: dict[str, Any]) -> tuple[Any, ...]:
    at = row["timestamp"]
    match = str(row.get("text") or "")
    if row.get("excerpt"):
        match += "  payload: …" + " ".join(str(row["excerpt"]).split()) + "…"
    when = f"{at:%Y-%m-%d %H:%M:%S}" if isinstance(at, dt.datetime) else str(at)
    session = short_id(str(row["session_id"]))
    return (when, session, str(row.get("agent") or ""), str(row.get("event") or ""), match)


class SearchScreen(StoreScreen):
    """Type, Enter: the events that hold it, newest first; Enter on one: its session, at it."""

    HELP: ClassVar[str] = "Search"  # its keys' title in the help

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "app.pop_screen", "Back"),
        Binding("slash", "focus_input", "Search"),
    ]

    def __init__(self, history: HistorySource, text: str = "") -> None:
        super().__init__(history, "search-head")
        self.sub_title = "search"
        self.text = text
        self.rows: list[dict[str, Any]] = []

    def compose(self) -> ComposeResult:
        yield self.head
        yield Input(
            value=self.text,
            placeholder="search the whole history: a word, an error, a file",
            id="search-input",
        )
        yield table("search-results", "time (UTC)", "session", "agent", "event", "match")
        yield Footer()

    def start(self) -> None:
        if self.text:
            self.load()
        else:
            self.say(Text("search  every word whole, in any case; Enter to search", style="dim"))
            self.query_one("#search-input", Input).focus()

    def fetch(self) -> list[dict[str, Any]]:
        return self.history.query(*session_queries.search(self.text)).dicts()

    def show(self, answer: list[dict[str, Any]]) -> None:
        self.rows = answer
        refill(self.query_one("#search-results", DataTable), [result_cells(r) for r in answer])
        found = f"{len(answer)} events" + (
            " (the newest)" if len(answer) >= session_queries.SEARCH_LIMIT else ""
        )
        self.say(Text(f"search  {self.text!r}: {found}   Enter: the session, at that event", style="bold"))
        if answer:
            self.query_one("#search-results", DataTable).focus()

    @on(Input.Submitted, "#search-input")
    def submitted(self, event: Input.Submitted) -> None:
        if not session_queries.searchable(event.value):
            self.say(Text("give a word: letters or digits", style="bold red"))
            return
        self.text = event.value
        self.load()

    @on(DataTable.RowSelected, "#search-results")
    def open_result(self, event: DataTable.RowSelected) -> None:
        if 0 <= event.cursor_row < len(self.rows):
            from agentwatch.tui.session_page import SessionScreen

            row = self.rows[event.cursor_row]
            self.app.push_screen(SessionScreen(self.history, str(row["session_id"]), at_event=str(row["id"])))

    def action_focus_input(self) -> None:
        self.query_one("#search-input", Input).focus()
