"""A past session played again through the live views: the roster and the feed as they were.

The session's stored events (tui/session_page.py read them) go one by one into a roster and a feed
of the replay's own (tui/roster.py, tui/model.py: the live view's model, applying the same state
machine), at the pace they happened times the speed, on a clock of the replay's own: ages, running
tools and lost agents are as they were at that moment. Quiet stretches longer than QUIET_SKIP_S
(replay time) are skipped. Space plays and pauses, + and - change the speed, n steps one event,
0 starts again.
"""

from __future__ import annotations

from typing import Any, ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical
from textual.screen import Screen
from textual.widgets import Footer

from agentwatch.format import clock
from agentwatch.harnesses import short_id
from agentwatch.tui.alerts import Alerts
from agentwatch.tui.common import Line, Palette
from agentwatch.tui.costs import Costs
from agentwatch.tui.layout import COMPACT_ROSTER_COLUMNS
from agentwatch.tui.model import Feed, FeedLine, envelope_time
from agentwatch.tui.roster import Agent, Roster
from agentwatch.tui.status import roster_cells
from agentwatch.tui.table import Cell, Table

TICK_SECONDS = 0.1
SPEEDS = (0.5, 1.0, 2.0, 5.0, 10.0, 30.0, 100.0)
QUIET_SKIP_S = 5.0


class Replay:
    """The replay's model: the events, how far it got, its clock, its roster and feed. No Textual."""

    def __init__(self, envelopes: list[dict[str, Any]]) -> None:
        self.envelopes = [e for e in envelopes if e.get("kind") not in ("usage", "cost_state")]
        self.times = [envelope_time(e) for e in self.envelopes]
        self.restart()

    def restart(self) -> None:
        self.roster = Roster(lost_after_s=float("inf"))
        self.feed = Feed()
        self.done = 0
        self.now = self.times[0] if self.times else 0.0

    @property
    def finished(self) -> bool:
        return self.done >= len(self.envelopes)

    def step(self) -> None:
        """The next event, and the clock to its time."""
        if self.finished:
            return
        env = self.envelopes[self.done]
        self.now = max(self.now, self.times[self.done])
        line = self.feed.add(FeedLine.of(env))
        self.roster.apply(env, line)
        self.done += 1

    def advance(self, seconds: float) -> int:
        """Move the clock on `seconds` (a long quiet stretch is skipped); the events applied."""
        if self.finished:
            return 0
        self.now += seconds
        if self.times[self.done] - self.now > QUIET_SKIP_S:
            self.now = self.times[self.done]
        applied = 0
        while not self.finished and self.times[self.done] <= self.now:
            self.step()
            applied += 1
        return applied


class ReplayScreen(Screen[None]):
    """The roster and feed of a past session, as they were, played at a chosen speed."""

    HELP: ClassVar[str] = "Replay"  # its keys' title in the help

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape,q", "app.pop_screen", "Back"),
        Binding("space", "toggle_play", "Play/pause"),
        Binding("plus,equals_sign", "faster", "Faster"),
        Binding("minus", "slower", "Slower"),
        Binding("n,right", "step", "Step"),
        Binding("0", "restart", "Restart"),
    ]

    def __init__(self, session_id: str, envelopes: list[dict[str, Any]], *, playing: bool = True) -> None:
        super().__init__()
        self.session_id = session_id
        self.sub_title = f"replay {short_id(session_id)}"
        self.replay = Replay(envelopes)
        self.playing = playing
        self.speed_index = SPEEDS.index(5.0)
        self._costs, self._alerts = Costs(), Alerts(environ={})
        self._rows: list[tuple[int, Agent]] = []
        self.palette = Palette({})  # the theme's, once mounted

    @property
    def speed(self) -> float:
        return SPEEDS[self.speed_index]

    def compose(self) -> ComposeResult:
        yield Line(id="replay-status")
        with Horizontal(id="replay-main"):
            with Vertical(id="replay-roster-pane"):
                yield Table(id="replay-roster")
            with Vertical(id="replay-feed-pane"):
                yield Table(id="replay-feed")
        yield Footer()

    def on_mount(self) -> None:
        self.query_one("#replay-roster-pane").border_title = "agents, as they were"
        self.query_one("#replay-feed-pane").border_title = "events"
        self.query_one("#replay-roster", Table).set_columns(COMPACT_ROSTER_COLUMNS)
        self.query_one("#replay-feed", Table).set_columns(
            [("time", 8), ("agent", 20), ("event", 18), ("text", None)]
        )
        self.palette = Palette(self.app.get_css_variables())
        self.set_interval(TICK_SECONDS, self._tick)
        self.paint()

    def _tick(self) -> None:
        if not self.playing or self.replay.finished:
            return
        self.replay.advance(TICK_SECONDS * self.speed)
        self.playing = not self.replay.finished
        self.paint()

    def paint(self) -> None:
        r = self.replay
        status = Text(f"replay of {short_id(self.session_id)}  ", style="bold")
        status.append("playing" if self.playing else ("finished" if r.finished else "paused"))
        status.append(f" at {self.speed:g}x · event {r.done} of {len(r.envelopes)}", style="dim")
        if r.times:
            status.append(f" · {clock(r.now)} UTC", style="dim")
        self.query_one("#replay-status", Line).show(status)
        self._rows = r.roster.ordered("state", now=r.now, show_folded=True)
        self.query_one("#replay-roster", Table).set_rows(self._rows, self._roster_cells)
        self.query_one("#replay-feed", Table).set_rows(r.feed.lines(), self._feed_cells, follow=True)

    def _roster_cells(self, row: tuple[int, Agent]) -> list[Cell]:
        keys = [name for name, _ in COMPACT_ROSTER_COLUMNS]
        return roster_cells(row, self.replay.now, self.palette, self._costs, self._alerts, keys)

    def _feed_cells(self, line: FeedLine) -> list[Cell]:
        return [
            clock(line.at),
            line.agent,
            Text(line.event, style=self.palette.kind.get(line.kind, "")),
            line.text,
        ]

    def action_toggle_play(self) -> None:
        if self.replay.finished:
            self.replay.restart()
        self.playing = not self.playing
        self.paint()

    def action_faster(self) -> None:
        self.speed_index = min(len(SPEEDS) - 1, self.speed_index + 1)
        self.paint()

    def action_slower(self) -> None:
        self.speed_index = max(0, self.speed_index - 1)
        self.paint()

    def action_step(self) -> None:
        self.playing = False
        self.replay.step()
        self.paint()

    def action_restart(self) -> None:
        self.replay.restart()
        self.paint()
