"""`agentwatch`: the live dashboard of agent activity.

Every figure on screen is the store's answer plus what arrived since (tui/truth.py): at open and
every few seconds a worker asks the HistorySource for the roster, the team's edges, the alerts and
the costs, and which of the live events counted on top of the last answer it now holds; the live
events it does not hold yet are counted on top of the new answer (model.Unconfirmed). So a
dashboard opened at any moment shows what `agentwatch sql` says, within one refresh.

Envelopes from the LiveSource go into the model as they arrive (never touching widgets from the
source's callback; into a bounded buffer while paused or while the history loads) and ask for a
frame: one repaint of what changed, at once when the screen is idle, else when the last frame's cost
allows (common.Pacer), so a flood of events costs a frame every few tens of ms, not a repaint per
event; a timer moves ages on. The feed's recent history comes from the HistorySource in a worker
thread.
"""

from __future__ import annotations

import dataclasses
import gc
import json
import time
from collections.abc import Callable, Iterable
from typing import Any, ClassVar, TypeVar

from rich.text import Text
from textual import on, work
from textual.app import App, ComposeResult, SystemCommand
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical
from textual.css.query import NoMatches
from textual.screen import ModalScreen, Screen
from textual.widget import Widget
from textual.widgets import Header, Input
from textual.worker import Worker, WorkerState

from agentwatch.agents import LOST_AFTER_S, AgentKey, key_of
from agentwatch.format import clock, one_line
from agentwatch.store import queries
from agentwatch.store.answer import HistoryError
from agentwatch.tui import truth
from agentwatch.tui.actions import HISTORY_BINDINGS, HistoryActions
from agentwatch.tui.alerts_view import AlertsScreen
from agentwatch.tui.commands import system_commands
from agentwatch.tui.common import EventScreen, FilterInput, FullCollections, KeyBar, Line, Pacer, Palette
from agentwatch.tui.help import HelpScreen, other_screens
from agentwatch.tui.layout import (
    ABOUT,
    COMPACT_ROSTER_COLUMNS,
    COMPACT_WIDTH,
    ROSTER_COLUMNS,
    SHORT_EVENTS,
    SIDE_BY_SIDE_WIDTH,
)
from agentwatch.tui.live import SORTS, LiveState
from agentwatch.tui.model import FeedFilter, FeedLine
from agentwatch.tui.roster import Agent
from agentwatch.tui.sources import HistorySource, LiveSource
from agentwatch.tui.status import EMPTY_HINT, fit, live_segments, roster_cells, roster_title
from agentwatch.tui.store_side import (
    HISTORY_RETRY_SECONDS,
    CostsIn,
    HistoryFailed,
    HistoryIn,
    PayloadIn,
    StoreSide,
    TruthFailed,
    TruthIn,
    TruthSame,
)
from agentwatch.tui.table import Cell, Table
from agentwatch.tui.views import AgentScreen, TeamScreen

W = TypeVar("W", bound=Widget)
__all__ = ["EMPTY_HINT", "AgentwatchApp", "EventScreen", "HelpScreen"]

# Full garbage collections: on a timer, not when Python's counts say (common.FullCollections).
FULL_COLLECTION_SECONDS = 20.0
# Seconds live events wait for the history before they are shown anyway.
HISTORY_PATIENCE = 5.0
# The timer that moves ages on; new events are painted as they come (deliver), a frame at least
# MIN_REPAINT_GAP after the last, later when frames cost more than FRAME_SHARE of the event loop.
# Under a flood an event waits for the next frame up to the gap: 50 ms was a third of the 150 ms
# hook-to-screen target; a frame that only paints costs about 12 ms, so the share sets the gap.
REPAINT_SECONDS = 0.25
MIN_REPAINT_GAP = 0.025
FRAME_SHARE = 0.4
DARK, LIGHT = "textual-dark", "textual-light"
# Costs come with the store's answer (tui/truth.py), and are asked a second after usage arrives.
COST_AFTER_USAGE_SECONDS = 1.0


class AgentwatchApp(StoreSide, HistoryActions, App[None]):
    """The dashboard. Sources come in through the constructor (tests pass fakes)."""

    TITLE = "agentwatch"
    CSS_PATH = "agentwatch.tcss"
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("q", "quit", "Quit", tooltip="leave agentwatch"),
        # Ctrl-C quits as in every terminal program (`up --dashboard` then stops what it started),
        # not Textual's "press ctrl+q" toast.
        Binding("ctrl+c", "quit", "Quit", show=False, priority=True, tooltip="leave agentwatch"),
        Binding(
            "a", "agent_detail", "Agent", tooltip="the selected agent: timeline, tool calls, prompts, errors"
        ),
        Binding("t", "team", "Team", tooltip="who messaged whom, tasks, idle teammates"),
        Binding("exclamation_mark", "alerts", "Alerts", tooltip="open and recent alerts; Enter: the agent"),
        Binding("h", "tools", "Tools", tooltip="durations and failure rates of tools, sessions (from SQL)"),
        *HISTORY_BINDINGS,
        Binding(
            "slash", "focus_filter", "Filter", tooltip="the feed by agent:NAME, tool:NAME, event:KIND or text"
        ),
        Binding(
            "escape", "clear_filter", "Clear", show=False, tooltip="an applied feed filter (in the feed)"
        ),
        Binding("f", "toggle_follow", "Follow", tooltip="keep the newest event selected, on/off"),
        Binding("p", "toggle_pause", "Pause", tooltip="hold the feed and roster still, on/off"),
        Binding("s", "cycle_sort", "Sort", tooltip="the roster by " + ", ".join(SORTS) + ", in turn"),
        Binding(
            "o", "toggle_folded", "Folded", tooltip="show the stopped and lost agents folded away, on/off"
        ),
        Binding("d", "toggle_dark", "Dark/light", show=False, tooltip="the theme"),
        Binding("question_mark", "help", "Help", tooltip="this help"),
    ]

    def __init__(
        self,
        live: LiveSource,
        history: HistorySource | None = None,
        *,
        history_rows: int = 2000,
        clock: Callable[[], float] = time.time,
        theme: str | None = None,
        lost_after_s: float = LOST_AFTER_S,
        refresh_seconds: float = truth.REFRESH_SECONDS,
    ) -> None:
        super().__init__()
        self.full_collection_seconds = FULL_COLLECTION_SECONDS
        self._collections = FullCollections()
        if theme:
            self.theme = theme
        self.clock = clock
        self.live = live
        self.history = history
        self.history_rows = history_rows
        self.refresh_seconds = refresh_seconds
        self.state = LiveState(
            stored=history is not None,
            lost_after_s=lost_after_s,
            bell=self._ring,
            usage=lambda: self.set_timer(COST_AFTER_USAGE_SECONDS, self._ask_costs),
            skipped=lambda exc: self.log.error(f"live event skipped: {exc!r}"),
        )
        # What is painted, and when: the live view's widgets read the state above.
        self._status_at, self._painted_at = 0.0, 0.0
        self._pacer = Pacer(MIN_REPAINT_GAP, FRAME_SHARE)
        self._palette: Palette | None = None
        self._palette_theme = ""
        self._dirty = True
        self._feed_lines: list[FeedLine] = []
        self._roster_rows: list[tuple[int, Agent]] = []
        self._main: Screen[Any] | None = None
        self._roster_keys: list[str] = [name for name, _ in ROSTER_COLUMNS]
        self._compact = False

    # -- layout ------------------------------------------------------------------------------

    def compose(self) -> ComposeResult:
        yield Header()
        yield Line(id="status")
        with Horizontal(id="main"):
            with Vertical(id="roster-pane"):
                yield Table(id="roster")
            with Vertical(id="feed-pane"):
                yield FilterInput(placeholder="filter: agent:NAME tool:NAME event:KIND or text", id="filter")
                yield Table(id="feed")
        yield KeyBar()

    def on_mount(self) -> None:
        self._main = self.screen
        self.theme_changed_signal.subscribe(self, self._theme_changed)
        self.query_one("#roster-pane").border_title = "agents"
        self.query_one("#feed-pane").border_title = "events"
        self._fit_layout()
        self.set_interval(REPAINT_SECONDS, self._tick)
        self.run_live()
        if self.history is not None:
            self.refresh_truth()
            self.set_timer(HISTORY_PATIENCE, self.state.stop_waiting_for_history)
            self.set_interval(self.refresh_seconds, self.refresh_truth)
        self.repaint()
        self.call_after_refresh(self._laid_out)
        self._collections.hold()
        self.set_interval(self.full_collection_seconds, self._collect_garbage)

    def _theme_changed(self, _theme: Any) -> None:
        """New colours: the feed's kept lines are drawn again, and everything is repainted."""
        self._main_query("#feed", Table).forget_lines()
        self._dirty = True

    def _collect_garbage(self) -> None:
        gc.collect()

    def on_unmount(self) -> None:
        self._collections.release()

    # -- data in -----------------------------------------------------------------------------

    def deliver(self, env: dict[str, Any] | bytes) -> None:
        """From the live source (on the app's event loop): into the model at once (buffered while
        paused, while the history loads, or behind what is), and painted now when the screen is
        idle, else as soon as the last frame's cost allows (a flood is coalesced). A frame then
        only paints: under a flood, applying its events was half of it, the event loop held."""
        self.state.deliver(env)
        self._ask_frame()

    def _ask_frame(self) -> None:
        wait = self._pacer.ask(time.monotonic())
        if wait is not None and wait > 0:
            self.set_timer(wait, self._frame)
        elif wait is not None:
            self.call_next(self._frame)

    def _frame(self) -> None:
        """A repaint for live events; the pacer learns its cost once the screen is composited."""
        started = time.thread_time()
        self.repaint()
        self.call_after_refresh(self._framed, started)

    def _framed(self, started: float) -> None:
        self._pacer.painted(time.thread_time() - started, time.monotonic())
        if self.state.fresh or (self.state.pending and not self.state.paused):
            self._ask_frame()  # what came during the frame

    def _laid_out(self) -> None:
        self._pacer.ready = True  # a frame now lands where it should
        if self.state.pending or self.state.fresh:
            self._ask_frame()

    def _tick(self) -> None:
        """Ages, running times and lost agents move on; skipped while live frames paint anyway."""
        if time.monotonic() - self._painted_at >= 0.8 * REPAINT_SECONDS:
            self.repaint()

    @property
    def waiting(self) -> int:
        return self.state.waiting

    def bus_status(self, ok: bool, text: str) -> None:
        self.state.bus_status(ok, text)
        self._dirty = True

    @work(exclusive=True, group="live", exit_on_error=False)
    async def run_live(self) -> None:
        await self.live.run(self.deliver, self.bus_status)

    # -- the store's answers -------------------------------------------------------------------

    def refresh_truth(self) -> None:
        """Ask the store for its answer again (unless the last question is still out)."""
        if self.history is not None and (question := self.state.ask_truth()) is not None:
            asked, since, asked_since = question
            roster = self.state.roster
            self.load_truth(asked, roster.max_agents, roster.lost_after_s, since, asked_since)

    def _answer_taken(self) -> None:
        """A store's answer painted now, paced as live events are (not at the next tick)."""
        self._dirty = True
        self._ask_frame()

    @on(TruthIn)
    def _truth_in(self, message: TruthIn) -> None:
        if self.state.take_truth(message.value) and self.history is not None:
            self.load_history(self.history_rows)
        self._answer_taken()

    @on(TruthSame)
    def _truth_same(self, message: TruthSame) -> None:
        if self.state.truth_same(message.value):
            self._answer_taken()

    @on(TruthFailed)
    def _truth_failed(self, message: TruthFailed) -> None:
        if self.state.truth_failed(message.value):  # a dashboard opened before the store
            self.set_timer(HISTORY_RETRY_SECONDS, self.refresh_truth)
        self._dirty = True

    @on(HistoryIn)
    def _history_in(self, message: HistoryIn) -> None:
        self.state.take_history(message.value)
        self._answer_taken()

    @on(HistoryFailed)
    def _history_failed(self, message: HistoryFailed) -> None:
        self.state.history_failed(message.value)
        self.set_timer(HISTORY_RETRY_SECONDS, lambda: self.load_history(self.history_rows))
        self._dirty = True

    def _ring(self) -> None:
        self.bell()  # looked up at each alert: a test may stand in for the bell

    def _ask_costs(self) -> None:
        self.state.ask_costs()
        self.load_costs(self.state.roster.max_agents, self.state.roster.lost_after_s)

    @on(CostsIn)
    def _costs_in(self, message: CostsIn) -> None:
        self.state.take_costs(message.value)
        self._dirty = True

    @on(Worker.StateChanged)
    def _worker_failed(self, event: Worker.StateChanged) -> None:
        """Every worker's unexpected failure (the store's are expected: their messages say why):
        logged, said on the status line, and the dashboard goes on."""
        worker = event.worker
        if event.state != WorkerState.ERROR:
            return
        error = worker.error
        text = f"{worker.group} failed: {one_line(f'{type(error).__name__}: {error}', 160)}"
        self.log.error(f"worker {worker.name!r} failed: {error!r}")
        if worker.group == "live":
            self.bus_status(False, text)
        elif worker.group == "truth":
            self.state.truth_failed(text)
        else:
            self.state.store_status(f"store: {text}")
        self._dirty = True

    # -- repaint -----------------------------------------------------------------------------

    def repaint(self) -> None:
        self._painted_at = time.monotonic()
        self._repaint()

    def _repaint(self) -> int:
        """Apply what waited (paused, the history loading) and paint; how many events are new on it."""
        drained = self.state.drain()
        if not self._main_visible():
            self._dirty = self._dirty or drained > 0  # painted when the live view is back
            return drained
        try:
            if not self.state.paused:  # paused: states hold still too
                self.state.roster.settle(self.clock())
            if drained or self._dirty:
                self._dirty = False
                self._paint_status()
                self._paint_roster()
                self._paint_feed()
            elif self.state.roster:
                self._paint_roster()  # ages, running times and lost agents move on
                if time.monotonic() - self._status_at >= 1.0:
                    self._paint_status()
        except NoMatches:  # the app is closing: its timer outlived the live view's widgets
            pass
        return drained

    def on_resize(self) -> None:
        if self._main is not None:
            self.call_after_refresh(self._fit_layout)

    def _fit_layout(self) -> None:
        """Stack or place side by side, and size the columns so the feed's text gets the rest."""
        width = self.size.width
        main = self._main_query("#main", Horizontal)
        stacked = width < SIDE_BY_SIDE_WIDTH
        main.set_class(stacked, "stacked")
        pane = self._main_query("#roster-pane", Vertical)
        pane.styles.width = "1fr" if stacked else self._roster_width()
        compact = width < COMPACT_WIDTH
        columns = COMPACT_ROSTER_COLUMNS if compact else ROSTER_COLUMNS
        self._main_query("#roster", Table).set_columns(columns)
        self._roster_keys = [name for name, _ in columns]
        agent_w, event_w = (14, 13) if compact else (20, 18)
        self._compact = compact
        self._main_query("#feed", Table).set_columns(
            [("time", 8), ("agent", agent_w), ("event", event_w), ("text", None)]
        )
        self._dirty = True
        self.repaint()

    def _roster_width(self) -> int:
        return sum(size + 2 for _, size in ROSTER_COLUMNS) + 4

    def _main_visible(self) -> bool:
        """The live view is on screen (under a modal dialog counts): worth painting."""
        stack = self.screen_stack
        if self._main is None or not stack or stack[0] is not self._main:
            return False
        return all(isinstance(screen, ModalScreen) for screen in stack[1:])

    @property
    def palette(self) -> Palette:
        """Styles from the current theme's text colours (recomputed when the theme changes)."""
        if self._palette is None or self._palette_theme != self.theme:
            self._palette = Palette(self.get_css_variables())
            self._palette_theme = self.theme
        return self._palette

    def _paint_status(self) -> None:
        self._status_at = time.monotonic()
        segments = live_segments(self.state, self.palette, self.clock())
        self._main_query("#status", Line).show(fit(segments, self.size.width))

    def _paint_roster(self) -> None:
        """Hand the ordered roster to the table: it formats only the rows on screen."""
        # `agent:NAME` in the filter narrows the roster too (by name or team, as a substring), and
        # `person:`, `repo:`, `branch:` by whose the agent's session is.
        now, state = self.clock(), self.state
        at = state.paused_at if state.paused else now  # paused: the order holds still
        self._roster_rows = state.roster.ordered(
            state.sort,
            text=state.filter.agent,
            now=at,
            show_folded=state.show_folded,
            owner=state.filter.owner,
        )
        self._main_query("#roster", Table).set_rows(self._roster_rows, self._roster_cells)
        title = roster_title(state.roster, now, state.show_folded)
        pane = self._main_query("#roster-pane", Vertical)
        if pane.border_title != title:  # setting it repaints the whole pane, its border and all
            pane.border_title = title

    def _roster_cells(self, row: tuple[int, Agent]) -> list[Cell]:
        state = self.state
        return roster_cells(row, self.clock(), self.palette, state.costs, state.alerts, self._roster_keys)

    def _paint_feed(self) -> None:
        """The whole (filtered) feed goes to the table by reference; following keeps the newest
        line selected, otherwise the selected line stays selected as others come and go."""
        table = self._main_query("#feed", Table)
        previous, state = self._feed_lines, self.state
        lines = state.feed.lines(state.filter)
        self._feed_lines = lines
        if state.follow or not previous or not 0 <= table.cursor_row < len(previous):
            table.set_rows(lines, self._feed_cells, follow=state.follow, stable=True)
            return
        selected = previous[table.cursor_row]
        table.set_rows(lines, self._feed_cells, stable=True)
        start = max(0, table.cursor_row - (len(previous) - len(lines)) - state.feed.maxlen)
        for index in range(min(table.cursor_row, len(lines) - 1), start - 1, -1):
            if lines[index] is selected:
                table.move_cursor(index, scroll=False)
                break

    def _feed_cells(self, line: FeedLine) -> list[Cell]:
        # A SendMessage delivery shares its tool event's name: say what it is.
        label = "message" if line.kind == "message" else line.event
        if self._compact:
            label = SHORT_EVENTS.get(label, label)
        return [
            clock(line.at),
            line.agent,
            Text(label, style=self.palette.kind.get(line.kind, "")),
            line.text,
        ]

    # -- interaction -------------------------------------------------------------------------

    @on(Input.Submitted, "#filter")
    def filter_applied(self) -> None:
        """Enter: the filter stays applied and the keys go back to the feed."""
        self.query_one("#feed", Table).focus()

    @on(Input.Changed, "#filter")
    def filter_changed(self, event: Input.Changed) -> None:
        self.state.filter = FeedFilter.parse(event.value, self.state.filter.bookkeeping)
        self._dirty = True
        self.repaint()

    @on(Table.RowSelected, "#feed")
    def open_event(self, event: Table.RowSelected) -> None:
        index = event.cursor_row
        lines = self._feed_lines
        if not 0 <= index < len(lines):
            return
        self.open_envelope(lines[index].full())

    def open_envelope(self, envelope: dict[str, Any]) -> None:
        """The event in full; an event from history has its payload fetched first."""
        if "data" in envelope or self.history is None:
            self.push_screen(EventScreen(envelope))
        else:
            self.open_from_history(envelope)

    @work(thread=True, group="payload")
    def open_from_history(self, envelope: dict[str, Any]) -> None:
        """An event loaded from history carries no payload: fetch it for the detail view."""
        assert self.history is not None
        event_id = str(envelope.get("id", ""))
        try:
            payload = self.history.query(*queries.event_payload(event_id)).scalar() if event_id else None
            envelope["data"] = json.loads(payload) if payload is not None else "(payload not found)"
        except (HistoryError, ValueError) as exc:
            envelope["data"] = f"(payload not loaded: {exc})"
        self.post_message(PayloadIn(envelope))

    @on(PayloadIn)
    def _payload_in(self, message: PayloadIn) -> None:
        self.push_screen(EventScreen(message.value))

    @on(Table.RowSelected, "#roster")
    def open_agent(self, event: Table.RowSelected) -> None:
        index = event.cursor_row
        if 0 <= index < len(self._roster_rows):
            self.show_agent(self._roster_rows[index][1].key)

    def _main_query(self, selector: str, kind: type[W]) -> W:
        """A widget of the live view, whichever screen is on top."""
        return (self._main or self.screen).query_one(selector, kind)

    def selected_agent(self) -> AgentKey | None:
        """The agent under the roster's cursor, else the agent of the feed line under its cursor."""
        roster = self._main_query("#roster", Table)
        feed = self._main_query("#feed", Table)
        if feed.has_focus and 0 <= feed.cursor_row < len(self._feed_lines):
            return key_of(self._feed_lines[feed.cursor_row].envelope)
        if 0 <= roster.cursor_row < len(self._roster_rows):
            return self._roster_rows[roster.cursor_row][1].key
        return None

    def show_agent(self, key: AgentKey) -> None:
        self._to_live_view()
        self.push_screen(AgentScreen(self, key))

    def _to_live_view(self) -> None:
        while len(self.screen_stack) > 1:
            self.pop_screen()

    def action_agent_detail(self) -> None:
        key = self.selected_agent()
        if key is None:
            self.notify("no agent yet: the roster is empty", severity="warning")
            return
        self.show_agent(key)

    def action_team(self) -> None:
        self._to_live_view()
        self.push_screen(TeamScreen(self))

    def action_tools(self) -> None:
        if self.history is None:
            self.notify("tools and history need the store (agentwatch up)", severity="warning")
            return
        from agentwatch.tui.tools_view import ToolsScreen

        self._to_live_view()
        self.push_screen(ToolsScreen(self.history))

    def action_alerts(self) -> None:
        self._to_live_view()
        self.push_screen(AlertsScreen(self.state.alerts, self.show_agent))

    def action_live(self) -> None:
        self._to_live_view()

    def action_toggle_dark(self) -> None:
        self.theme = LIGHT if self.current_theme.dark else DARK

    def get_system_commands(self, screen: Screen[Any]) -> Iterable[SystemCommand]:
        yield from super().get_system_commands(screen)
        yield from system_commands(self)

    def action_focus_filter(self) -> None:
        self.query_one("#filter", Input).focus()

    def action_clear_filter(self) -> None:
        if self._main_visible():
            self._main_query("#filter", Input).value = ""  # Input.Changed repaints the feed

    def action_toggle_follow(self) -> None:
        self.state.follow = not self.state.follow
        self._dirty = True

    def action_toggle_folded(self) -> None:
        shown = self.state.show_folded = not self.state.show_folded
        self.notify("stopped and lost agents shown" if shown else "stopped and lost agents folded")
        self._dirty = True

    def action_toggle_pause(self) -> None:
        self.state.toggle_pause(self.clock())
        self._dirty = True

    def action_toggle_bookkeeping(self) -> None:
        shown = not self.state.filter.bookkeeping
        self.state.filter = dataclasses.replace(self.state.filter, bookkeeping=shown)
        self.notify("bookkeeping events shown" if shown else "bookkeeping events folded away")
        self._dirty = True

    def action_cycle_sort(self) -> None:
        state = self.state
        state.sort = SORTS[(SORTS.index(state.sort) + 1) % len(SORTS)]
        self.notify(f"roster sorted by {state.sort}")
        self._dirty = True

    def action_help(self) -> None:
        """The help, made once and kept: composing and wrapping its text was most of a `?`."""
        if not self.is_screen_installed("help"):
            live = [*self.BINDINGS, *Table.BINDINGS, *FilterInput.BINDINGS]
            self.install_screen(HelpScreen(ABOUT, live, other_screens()), "help")
        self.push_screen("help")
