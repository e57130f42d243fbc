"""`agentwatch`: the live dashboard of agent activity.

Envelopes from the LiveSource land in a bounded buffer (never touching widgets from the source's
callback); a timer drains it into the model and repaints at most a few times a second, so a flood
of events costs a repaint, not a repaint per event. History comes from the HistorySource in a
worker thread.
"""

from __future__ import annotations

import json
import time
from collections import deque
from collections.abc import Callable
from typing import Any, ClassVar

from rich.text import Text
from textual import on, work
from textual.app import App, ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import DataTable, Footer, Header, Input, Static

from agentwatch.tui.model import (
    FAILED,
    IDLE,
    STOPPED,
    THINKING,
    WAITING,
    WORKING,
    Feed,
    FeedFilter,
    Roster,
    sparkline,
)
from agentwatch.tui.sources import (
    RECENT_EVENTS_SQL,
    HistorySource,
    LiveSource,
    event_payload_sql,
    rows_as_envelopes,
)

PENDING_MAX = 50_000
# Seconds live events wait for the history before they are shown anyway.
HISTORY_PATIENCE = 5.0
REPAINT_SECONDS = 0.25
FEED_ROWS = 400
STATE_STYLE = {
    WORKING: "bold green",
    THINKING: "cyan",
    WAITING: "bold yellow",
    IDLE: "dim",
    STOPPED: "dim italic",
    FAILED: "bold red",
}
KIND_STYLE = {
    "tool_call": "green",
    "tool_result": "dim green",
    "tool_error": "bold red",
    "failure": "bold red",
    "permission": "bold yellow",
    "permission_denied": "yellow",
    "prompt": "bold cyan",
    "response": "cyan",
    "message": "magenta",
    "idle": "dim",
}
SORTS = ("state", "recent", "name", "errors")


def _age(seconds: float | None) -> str:
    if seconds is None:
        return ""
    if seconds < 60:
        return f"{seconds:.0f}s"
    if seconds < 3600:
        return f"{seconds / 60:.0f}m"
    return f"{seconds / 3600:.1f}h"


def _clock(at: float) -> str:
    return time.strftime("%H:%M:%S", time.gmtime(at))


class EventScreen(ModalScreen[None]):
    """One event in full: the envelope's headline and its payload, markers left visible."""

    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape,q", "dismiss", "Close")]

    def __init__(self, envelope: dict[str, Any]) -> None:
        super().__init__()
        self.envelope = envelope

    def compose(self) -> ComposeResult:
        env = self.envelope
        head = {k: v for k, v in env.items() if k != "data"}
        with VerticalScroll(id="event-body"):
            yield Static(
                Text(f"{env.get('event', '')} by {env.get('agent', '')}", style="bold"), id="event-title"
            )
            yield Static(Text(json.dumps(head, indent=2, ensure_ascii=False)), classes="json")
            yield Static(Text("data", style="bold"))
            yield Static(
                Text(json.dumps(env.get("data"), indent=2, ensure_ascii=False)[:200_000]), classes="json"
            )


class HelpScreen(ModalScreen[None]):
    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape,q,question_mark", "dismiss", "Close")]

    def compose(self) -> ComposeResult:
        lines = [
            "agentwatch: live activity of your agents",
            "",
            "Roster (left): one row per agent, subagents and teammates under their lead.",
            "  state  working (a tool is running) · waiting (for permission) · thinking",
            "         idle (turn over) · stopped (session ended) · failed (API error)",
            "Feed (right): one line per event, newest at the bottom.",
            "",
            "  enter   open the selected event (feed) or agent (roster)",
            "  /       filter the feed (agent:NAME, tool:NAME, event:KIND, or free text)",
            "  f       follow the newest event on/off     p  pause/resume the feed",
            "  s       cycle the roster's sort            tab  move between panes",
            "  ?       this help                          q  quit",
        ]
        yield Static("\n".join(lines), id="help-body")


class AgentwatchApp(App[None]):
    """The dashboard. Sources come in through the constructor (tests pass fakes)."""

    TITLE = "agentwatch"
    CSS_PATH = "agentwatch.tcss"
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("q", "quit", "Quit"),
        Binding("slash", "focus_filter", "Filter"),
        Binding("f", "toggle_follow", "Follow"),
        Binding("p", "toggle_pause", "Pause"),
        Binding("s", "cycle_sort", "Sort"),
        Binding("question_mark", "help", "Help"),
    ]

    def __init__(
        self,
        live: LiveSource,
        history: HistorySource | None = None,
        *,
        history_rows: int = 2000,
        clock: Callable[[], float] = time.time,
    ) -> None:
        super().__init__()
        self.clock = clock
        self.live = live
        self.history = history
        self.history_rows = history_rows
        self.roster = Roster()
        self.feed = Feed()
        self.filter = FeedFilter()
        self.follow = True
        self.paused = False
        self.sort = SORTS[0]
        self.bus_ok = False
        self.bus_text = "connecting to the bus ..."
        self.store_text = "store: not asked yet"
        self._pending: deque[dict[str, Any]] = deque(maxlen=PENDING_MAX)
        # Live events wait until the history is in: applied after it, states stay in time order.
        self._history_done = history is None
        self._history_ids: set[str] = set()
        self._dropped = 0
        self._dirty = True
        self._feed_ids: list[str] = []
        self._roster_names: list[str] = []

    # -- layout ------------------------------------------------------------------------------

    def compose(self) -> ComposeResult:
        yield Header()
        yield Static(id="status")
        with Horizontal(id="main"):
            with Vertical(id="roster-pane"):
                yield DataTable(id="roster", cursor_type="row", zebra_stripes=True)
            with Vertical(id="feed-pane"):
                yield Input(placeholder="filter: agent:NAME tool:NAME event:KIND or text", id="filter")
                yield DataTable(id="feed", cursor_type="row")
        yield Footer()

    def on_mount(self) -> None:
        roster = self.query_one("#roster", DataTable)
        roster.add_columns("agent", "team", "state", "tool", "for", "seen", "calls", "err", "msg", "activity")
        feed = self.query_one("#feed", DataTable)
        feed.add_columns("time", "agent", "event", "text")
        self.set_interval(REPAINT_SECONDS, self.repaint)
        self.run_live()
        if self.history is not None:
            self.load_history()
            self.set_timer(HISTORY_PATIENCE, self._stop_waiting_for_history)
        self.repaint()

    # -- data in -----------------------------------------------------------------------------

    def deliver(self, env: dict[str, Any]) -> None:
        """From the live source: buffer only; the repaint timer applies it."""
        if len(self._pending) == self._pending.maxlen:
            self._dropped += 1
        self._pending.append(env)

    def bus_status(self, ok: bool, text: str) -> None:
        self.bus_ok, self.bus_text = ok, text
        self._dirty = True

    @work(exclusive=True, group="live")
    async def run_live(self) -> None:
        await self.live.run(self.deliver, self.bus_status)

    @work(thread=True, exclusive=True, group="history")
    def load_history(self) -> None:
        assert self.history is not None
        try:
            result = self.history.query(RECENT_EVENTS_SQL.format(limit=self.history_rows))
        except Exception as exc:
            self.call_from_thread(self._store_status, f"store unreachable ({exc}); showing live events only")
            return
        if "error" in result:
            self.call_from_thread(self._store_status, f"store error: {str(result['error'])[:120]}")
            return
        envelopes = rows_as_envelopes(result)
        self.call_from_thread(self._apply_history, envelopes)

    def _stop_waiting_for_history(self) -> None:
        if not self._history_done:
            self._store_status("store slow to answer: showing live events; history follows when it comes")

    def _store_status(self, text: str) -> None:
        self.store_text = text
        self._history_done = True
        self._dirty = True

    def _apply_history(self, envelopes: list[dict[str, Any]]) -> None:
        for env in envelopes:
            self.roster.apply(env)
            self.feed.add(env)
            self._history_ids.add(str(env.get("id", "")))
        self.store_text = f"store: {len(envelopes)} recent events loaded"
        self._history_done = True
        self._dirty = True

    # -- repaint -----------------------------------------------------------------------------

    def repaint(self) -> None:
        drained = 0
        while self._pending and not self.paused and self._history_done:
            env = self._pending.popleft()
            if self._history_ids and str(env.get("id", "")) in self._history_ids:
                continue  # already in from the history
            self.roster.apply(env)
            self.feed.add(env)
            drained += 1
        if self._history_ids and not self._pending:
            self._history_ids.clear()
        if drained or self._dirty:
            self._dirty = False
            self._paint_status()
            self._paint_roster()
            self._paint_feed()
        elif self.roster:
            self._paint_roster()  # ages and running times move on

    def _paint_status(self) -> None:
        bus = Text("● " if self.bus_ok else "○ ", style="green" if self.bus_ok else "bold red")
        bus.append(self.bus_text)
        extra = []
        if self.paused:
            extra.append(f"PAUSED ({len(self._pending)} waiting)")
        if not self.follow:
            extra.append("follow off")
        if self._dropped:
            extra.append(f"{self._dropped} events dropped while behind")
        bus.append(
            f"   {self.store_text}   {len(self.roster)} agents · {self.feed.total} events", style="dim"
        )
        if extra:
            bus.append("   " + " · ".join(extra), style="bold yellow")
        self.query_one("#status", Static).update(bus)

    def _paint_roster(self) -> None:
        table = self.query_one("#roster", DataTable)
        now = self.clock()
        rows = self.roster.ordered(self.sort)
        cursor = table.cursor_row
        table.clear()
        self._roster_names = []
        for depth, agent in rows:
            name = ("  " * depth + ("└ " if depth else "") + agent.name)[:26]
            table.add_row(
                name,
                agent.team[:12],
                Text(agent.state, style=STATE_STYLE.get(agent.state, "")),
                agent.tool,
                _age(agent.tool_running_for(now)),
                _age(now - agent.last_seen if agent.last_seen else None),
                str(agent.tool_calls),
                Text(str(agent.errors), style="red" if agent.errors else ""),
                str(agent.messages),
                sparkline(list(agent.activity)[-12:]),
            )
            self._roster_names.append(agent.name)
        if rows:
            table.move_cursor(row=min(cursor, len(rows) - 1), animate=False)

    def _paint_feed(self) -> None:
        table = self.query_one("#feed", DataTable)
        lines = self.feed.lines(self.filter, last=FEED_ROWS)
        cursor = table.cursor_row
        table.clear()
        self._feed_ids = []
        for line in lines:
            style = KIND_STYLE.get(line.kind, "")
            table.add_row(_clock(line.at), line.agent[:24], Text(line.event, style=style), line.text)
            self._feed_ids.append(str(line.envelope.get("id", "")))
        if lines:
            if self.follow:
                table.move_cursor(row=len(lines) - 1, animate=False)
                self.call_after_refresh(table.scroll_end, animate=False)
            else:
                table.move_cursor(row=min(cursor, len(lines) - 1), animate=False)

    # -- interaction -------------------------------------------------------------------------

    @on(Input.Changed, "#filter")
    def filter_changed(self, event: Input.Changed) -> None:
        parts: dict[str, str] = {"agent": "", "tool": "", "event": ""}
        words = []
        for word in event.value.split():
            key, sep, value = word.partition(":")
            if sep and key in parts:
                parts[key] = value
            else:
                words.append(word)
        self.filter = FeedFilter(
            agent=parts["agent"], tool=parts["tool"], event=parts["event"], text=" ".join(words)
        )
        self._dirty = True
        self.repaint()

    @on(DataTable.RowSelected, "#feed")
    def open_event(self, event: DataTable.RowSelected) -> None:
        index = event.cursor_row
        lines = self.feed.lines(self.filter, last=FEED_ROWS)
        if not 0 <= index < len(lines):
            return
        envelope = dict(lines[index].envelope)
        if "data" in envelope or self.history is None:
            self.push_screen(EventScreen(envelope))
        else:
            self.open_from_history(envelope)

    @work(thread=True, group="payload")
    def open_from_history(self, envelope: dict[str, Any]) -> None:
        """An event loaded from history carries no payload: fetch it for the detail view."""
        assert self.history is not None
        sql = event_payload_sql(str(envelope.get("id", "")))
        try:
            result = self.history.query(sql) if sql else {"rows": []}
            rows = result.get("rows") or []
            envelope["data"] = json.loads(rows[0][0]) if rows else "(payload not found)"
        except Exception as exc:
            envelope["data"] = f"(payload not loaded: {exc})"
        self.call_from_thread(self.push_screen, EventScreen(envelope))

    @on(DataTable.RowSelected, "#roster")
    def filter_to_agent(self, event: DataTable.RowSelected) -> None:
        index = event.cursor_row
        if 0 <= index < len(self._roster_names):
            box = self.query_one("#filter", Input)
            box.value = f"agent:{self._roster_names[index]}"

    def action_focus_filter(self) -> None:
        self.query_one("#filter", Input).focus()

    def action_toggle_follow(self) -> None:
        self.follow = not self.follow
        self._dirty = True

    def action_toggle_pause(self) -> None:
        self.paused = not self.paused
        self._dirty = True

    def action_cycle_sort(self) -> None:
        self.sort = SORTS[(SORTS.index(self.sort) + 1) % len(SORTS)]
        self.notify(f"roster sorted by {self.sort}")
        self._dirty = True

    def action_help(self) -> None:
        self.push_screen(HelpScreen())


def run(environ: Any = None) -> None:
    import os

    from agentwatch import config
    from agentwatch.tui.sources import NatsLiveSource, StoreHistory

    env = os.environ if environ is None else environ
    AgentwatchApp(NatsLiveSource(config.nats_url(env)), StoreHistory(env)).run()
