"""The "Tools and history" view of the dashboard: per-tool statistics and recent sessions, from SQL
over the store, over a window of time the user picks.

The queries are store/queries.py's (`tool_stats`, `newest_sessions` then `session_details`),
asked for one of the known windows and sorts of tools_rows.py. While the screen is shown, a
timer asks the HistorySource again every few seconds from a thread worker, which posts the answer
as a message; its handler paints. A store that is away is said on screen and asked again at the next tick.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Sequence
from typing import Any, ClassVar

from rich.style import Style
from rich.text import Text
from textual import events, on, work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.message import Message
from textual.screen import Screen
from textual.timer import Timer
from textual.widgets import DataTable, Footer, Static
from textual.worker import Worker, get_current_worker

from agentwatch.format import clock, one_line
from agentwatch.store import queries
from agentwatch.store.answer import HistoryError
from agentwatch.store.queries import SESSIONS_LIMIT
from agentwatch.tui.common import FittedTable, Palette
from agentwatch.tui.sources import HistorySource
from agentwatch.tui.tools_rows import (
    FULL_SESSION_AT,
    NUMERIC_COLUMNS,
    SESSION_COLUMNS,
    SESSION_COLUMNS_WIDE,
    SORT_ORDER,
    TOOL_COLUMNS,
    TOOL_COLUMNS_WIDE,
    WIDE_AT,
    WINDOW_ORDER,
    WINDOWS,
    session_cells,
    sessions_query,
    tool_cells,
    tools_query,
    window_phrase,
    window_seconds,
)

REFRESH_SECONDS = 5.0
# A fetch that has not answered after this long no longer holds back the next one.
STUCK_SECONDS = 60.0


class ToolsScreen(Screen[None]):
    """Per-tool statistics and recent sessions over a window of time, refreshed while shown."""

    HELP: ClassVar[str] = "Tools and history"  # its keys' title in the help

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "back", "Back"),
        Binding("q", "back", "Back", show=False),
        Binding("1", "window('15m')", "15m"),
        Binding("2", "window('1h')", "1h"),
        Binding("3", "window('1d')", "1d"),
        Binding("4", "window('all')", "all"),
        Binding("w", "cycle_window", "Window"),
        Binding("s", "cycle_sort", "Sort"),
        Binding("r", "reload", "Refresh"),
    ]

    class Answered(Message):
        """The store's answer for a window and sort: its rows, or what went wrong (`problem`)."""

        def __init__(
            self,
            window: str,
            sort: str,
            tools: list[dict[str, Any]] | None = None,
            sessions: list[dict[str, Any]] | None = None,
            problem: str = "",
        ) -> None:
            super().__init__()
            self.window, self.sort, self.problem = window, sort, problem
            self.tools, self.sessions = tools or [], sessions or []

    def __init__(
        self,
        history: HistorySource,
        *,
        window: str = "1h",
        refresh_seconds: float = REFRESH_SECONDS,
        clock: Callable[[], float] = time.time,
    ) -> None:
        super().__init__()
        window_seconds(window)  # a known name, or ValueError
        self.history = history
        self.window = window
        self.sort = SORT_ORDER[0]
        self.refresh_seconds = refresh_seconds
        self.clock = clock
        self.tool_rows: list[dict[str, Any]] = []
        self.session_rows: list[dict[str, Any]] = []
        self.status_text = "asking the store ..."
        self.status_is_error = False
        self.updated_at: float | None = None
        self._fetching: Worker[None] | None = None
        self._asked_at = 0.0
        self._wide: bool | None = None
        self._timer: Timer | None = None

    # -- layout ----------------------------------------------------------------------------------

    def compose(self) -> ComposeResult:
        yield Static(id="tools-title")
        yield Static(id="tools-status")
        with Vertical(id="tools-stats-pane", classes="tools-pane"):
            yield FittedTable(id="tools-stats", cursor_type="row", zebra_stripes=True)
        with Vertical(id="tools-sessions-pane", classes="tools-pane"):
            yield FittedTable(id="tools-sessions", cursor_type="row", zebra_stripes=True)
        yield Footer()

    def on_mount(self) -> None:
        self._wide = self.size.width >= WIDE_AT if self.size.width else False
        self._paint()
        self._timer = self.set_interval(self.refresh_seconds, self._tick)
        self.app.theme_changed_signal.subscribe(self, lambda _theme: self._paint_tables())
        self.query_one("#tools-stats", DataTable).focus()
        self.reload()

    def on_resize(self, event: events.Resize) -> None:
        self._wide = event.size.width >= WIDE_AT
        self._paint_tables()  # the columns for the width, names cut to it

    def on_screen_suspend(self) -> None:
        if self._timer is not None:
            self._timer.pause()

    def on_screen_resume(self) -> None:
        if self._timer is not None:
            self._timer.resume()
            if self.updated_at is not None:
                self.reload()

    # -- data ------------------------------------------------------------------------------------

    def _tick(self) -> None:
        """Ask again, unless the last question is still out (and not stuck)."""
        waiting = self._fetching is not None and not self._fetching.is_finished
        if not waiting or time.monotonic() - self._asked_at > STUCK_SECONDS:
            self.reload()

    def reload(self) -> None:
        """Ask the store now (for the current window and sort); a question still out is dropped."""
        self._asked_at = time.monotonic()
        self._fetching = self._fetch(self.window, self.sort)

    @work(thread=True, exclusive=True, group="tools-view")
    def _fetch(self, window: str, sort: str) -> None:
        """Both queries, answered as one message; never raises (a store away is a `problem`)."""
        worker = get_current_worker()
        try:
            tools = self.history.query(*tools_query(window, sort)).dicts()
            sessions: list[dict[str, Any]] = []
            if not worker.is_cancelled:
                # Two questions: the newest ids from the rollup's plain columns, then those rows.
                ids = [str(i) for i in self.history.query(*sessions_query(window)).column("session_id")]
                if ids and not worker.is_cancelled:
                    sessions = self.history.query(*queries.session_details(ids)).dicts()
        except HistoryError as exc:  # never a traceback on screen
            answer = self.Answered(window, sort, problem=one_line(exc) or type(exc).__name__)
        else:
            answer = self.Answered(window, sort, tools, sessions)
        if not worker.is_cancelled:  # a newer question was asked meanwhile
            with contextlib.suppress(RuntimeError):  # the app closed meanwhile
                self.post_message(answer)

    @on(Answered)
    def _show_answer(self, answer: Answered) -> None:
        if (answer.window, answer.sort) != (self.window, self.sort):
            return  # asked before the window or sort changed: not what the titles say
        if answer.problem:
            self._set_status(f"store: {answer.problem}; retrying every {self.refresh_seconds:g}s", error=True)
        else:
            self.tool_rows, self.session_rows = answer.tools, answer.sessions
            self.updated_at = self.clock()
            self._set_status("", error=False)
            self._paint_tables()
        self._paint_title()

    def _set_status(self, text: str, *, error: bool) -> None:
        self.status_text = text
        self.status_is_error = error
        self._paint_status()

    # -- painting --------------------------------------------------------------------------------

    def _paint(self) -> None:
        self._paint_title()
        self._paint_status()
        self._paint_tables()

    def _paint_title(self) -> None:
        title = Text("Tools and history", style="bold")
        title.append(f" · {WINDOWS[self.window].label}")
        title.append(f" · sorted by {self.sort}")
        if self.updated_at is not None:
            stamp = clock(self.updated_at)
            title.append(f" · {'data from' if self.status_is_error else 'updated'} {stamp} UTC")
        self.query_one("#tools-title", Static).update(title)

    def _paint_status(self) -> None:
        status = self.query_one("#tools-status", Static)
        status.update(Text(self.status_text))
        status.set_class(self.status_is_error, "-error")
        status.set_class(not self.status_text, "-hidden")

    def _paint_tables(self) -> None:
        if self._wide is None:
            return
        self._paint_tools()
        self._paint_sessions()

    def _colors(self) -> dict[str, Style]:
        """Rich styles from the current theme's error/warning/success text colours."""
        return {
            name: Style.parse(color) for name, color in Palette(self.app.get_css_variables()).text.items()
        }

    def _widths(self) -> tuple[int, int]:
        """Cells for the tool name and the last error: what the numbers leave, within reason."""
        if not self._wide:
            return max(12, min(40, self.size.width - 56)), 0
        spare = self.size.width - 70
        tool = max(16, min(40, spare // 3))
        return tool, max(20, spare - tool)

    def _fill(self, table_id: str, labels: Sequence[str], rows: list[dict[str, Text]]) -> None:
        """Replace a table's columns and rows, the cursor kept on its row number.

        Each column is as wide as its widest cell, measured here: DataTable measures new rows only
        when it is next idle, and keeps the lines it drew before that with the columns too narrow.
        """
        table = self.query_one(table_id, DataTable)
        cursor = table.cursor_row
        table.clear(columns=True)
        for label in labels:
            width = max([Text(label).cell_len, *(row[label].cell_len for row in rows)])
            header = Text(label, justify="right") if label in NUMERIC_COLUMNS else Text(label)
            table.add_column(header, width=width, key=label)
        table.add_rows([[row[label] for label in labels] for row in rows])
        if rows:
            table.move_cursor(row=min(cursor, len(rows) - 1), animate=False)

    def _paint_tools(self) -> None:
        colors = self._colors()
        name_width, error_width = self._widths()
        self._fill(
            "#tools-stats",
            TOOL_COLUMNS_WIDE if self._wide else TOOL_COLUMNS,
            [tool_cells(row, colors, name_width, error_width) for row in self.tool_rows],
        )
        pane = self.query_one("#tools-stats-pane", Vertical)
        pane.border_title = f"tools · calls started {window_phrase(self.window)}"
        pane.border_subtitle = f"{len(self.tool_rows)} tools" if self.tool_rows else "no tool calls"

    def _paint_sessions(self) -> None:
        colors, now = self._colors(), self.clock()
        # The coverage and cost columns need room at 80 and 140 columns; from FULL_SESSION_AT on,
        # names are whole again.
        full = self.size.width >= FULL_SESSION_AT
        agent_width = 19 if full else 10
        session_width = 36 if self.size.width >= FULL_SESSION_AT else 8
        self._fill(
            "#tools-sessions",
            SESSION_COLUMNS_WIDE if self._wide else SESSION_COLUMNS,
            [
                session_cells(row, colors, now, agent_width, session_width, 16 if full else 13)
                for row in self.session_rows
            ],
        )
        pane = self.query_one("#tools-sessions-pane", Vertical)
        pane.border_title = f"sessions active {window_phrase(self.window)} · newest first"
        count = len(self.session_rows)
        more = f" (the newest {SESSIONS_LIMIT})" if count >= SESSIONS_LIMIT else ""
        pane.border_subtitle = f"{count} sessions{more}" if count else "no sessions"

    # -- actions ---------------------------------------------------------------------------------

    def action_back(self) -> None:
        if self.app.screen is self and len(self.app.screen_stack) > 1:
            self.app.pop_screen()

    def action_window(self, window: str) -> None:
        if window in WINDOWS:
            self._switch(window=window)

    def action_cycle_window(self) -> None:
        self._switch(window=WINDOW_ORDER[(WINDOW_ORDER.index(self.window) + 1) % len(WINDOW_ORDER)])

    def action_cycle_sort(self) -> None:
        self._switch(sort=SORT_ORDER[(SORT_ORDER.index(self.sort) + 1) % len(SORT_ORDER)])

    def action_reload(self) -> None:
        self.reload()

    def _switch(self, *, window: str | None = None, sort: str | None = None) -> None:
        if window is not None and window != self.window:
            self.window = window
            self.tool_rows, self.session_rows = [], []  # not the old window's rows under the new title
            self._set_status(f"asking the store ({WINDOWS[window].label}) ...", error=False)
        self.sort = sort or self.sort
        self._paint_title()
        self._paint_tables()  # the titles say the new window while its answer comes
        self.reload()
