"""What the dashboard's screens share: colours from the theme, the event detail, the key bar.

How numbers, times and text are worded is agentwatch/format.py's, shared with the commands."""

from __future__ import annotations

import gc
import json
import math
from collections.abc import Iterable, Mapping
from typing import Any, ClassVar

from rich.text import Text
from textual.app import ComposeResult, RenderResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import DataTable, Input, Static

from agentwatch.agents import FAILED, IDLE, LOST, STOPPED, THINKING, WAITING, WORKING
from agentwatch.tui.model import DENIED, FAILED_CALL, OK, RUNNING


class Pacer:
    """When live events are painted: at once when the screen is idle; under a flood, as often as
    the frames' cost allows. A frame is a repaint and the screen composited after it; the next one
    waits until the last one's CPU is at most `share` of the time between their starts (and at
    least `min_gap`), so however heavy the traffic, keys and the bus keep most of the event loop.

    A frame asked for and never reported (its screen went away before it was composited) stops
    counting after `stale` seconds."""

    def __init__(self, min_gap: float, share: float = 0.4, stale: float = 1.0) -> None:
        self.min_gap = self.gap = min_gap
        self.share, self.stale = share, stale
        self.done_at = -math.inf
        self.asked_at: float | None = None  # a frame is on its way, asked for then
        self.ready = False  # the screen is laid out

    def ask(self, now: float) -> float | None:
        """Seconds until the frame a new event asks for; None when one is on its way already
        (or the screen is not laid out yet: the regular timer paints it)."""
        if not self.ready or (self.asked_at is not None and now - self.asked_at < self.stale):
            return None
        self.asked_at = now
        return max(0.0, self.done_at + self.gap - now)

    def painted(self, cpu: float, now: float) -> None:
        """The frame is on screen; it took `cpu` seconds of the event loop's thread."""
        self.asked_at, self.done_at = None, now
        self.gap = max(self.min_gap, cpu / self.share - cpu)


class FullCollections:
    """Python's full garbage collections held off, for the app to run them on its own timer.

    Everything built before `hold` (Textual's widgets, styles, the app) lives as long as the app:
    frozen, out of the collector's way. Full collections walk every object Textual's render caches
    hold (50-100 ms on a small machine): under 2,000 events/s Python ran one every few seconds, the
    longest pauses a key press met. Young collections, which free short-lived garbage, are as they
    were. `release` gives Python its own settings back, for whatever runs in this process next.
    """

    NEVER = 1_000_000

    def __init__(self) -> None:
        self._threshold: tuple[int, int, int] | None = None

    def hold(self) -> None:
        gc.freeze()
        self._threshold = gc.get_threshold()
        young, middle, _ = self._threshold
        gc.set_threshold(young, middle, self.NEVER)

    def release(self) -> None:
        if self._threshold is not None:
            gc.set_threshold(*self._threshold)
            gc.unfreeze()
            self._threshold = None


class Palette:
    """Text styles from the theme's own text colours, so states read on dark and light themes.

    Textual derives `text-success`, `text-warning`, ... with enough contrast against the theme's
    background; a fixed "yellow" would vanish on a light terminal.
    """

    def __init__(self, variables: Mapping[str, str]) -> None:
        def var(name: str, fallback: str) -> str:
            value = variables.get(name, "")
            return value if value.startswith("#") else fallback

        ok, warn = var("text-success", "green"), var("text-warning", "yellow")
        err, primary = var("text-error", "red"), var("text-primary", "cyan")
        secondary = var("text-secondary", "magenta")
        # The plain colours, for views that set their own emphasis.
        self.text = {"success": ok, "warning": warn, "error": err}
        self.state = {
            WORKING: f"bold {ok}",
            THINKING: primary,
            WAITING: f"bold {warn}",
            IDLE: "dim",
            STOPPED: "dim italic",
            LOST: f"italic {warn}",
            FAILED: f"bold {err}",
        }
        self.kind = {
            "tool_call": ok,
            "tool_result": f"dim {ok}",
            "tool_error": f"bold {err}",
            "failure": f"bold {err}",
            "permission": f"bold {warn}",
            "permission_denied": warn,
            "prompt": f"bold {primary}",
            "response": primary,
            "message": secondary,
            "idle": "dim",
            "task_created": secondary,
            "task_completed": secondary,
        }
        self.status = {OK: ok, RUNNING: warn, FAILED_CALL: f"bold {err}", DENIED: warn}
        self.error = f"bold {err}"
        self.good = ok


class FittedTable(DataTable[Any]):
    """A DataTable whose cells are painted at the widths their contents ask for.

    DataTable measures new rows when it is next idle, and caches each cell's rendering under keys
    that leave out its column's width. A paint of the screen between the rows' arrival and that
    moment (for another widget, or a store answer taken from a worker) cached the cells at the
    headers' widths, and they stayed so until the next resize: "11:01" for "11:01:07", "$0.1" for
    "$0.16". When the measure changes a width, the cached renderings go."""

    def _update_dimensions(self, new_rows: Iterable[Any]) -> None:
        before = [column.get_render_width(self) for column in self.columns.values()]
        super()._update_dimensions(new_rows)
        if [column.get_render_width(self) for column in self.columns.values()] != before:
            self.notify_style_update()  # drops every cached rendering and repaints


def refill(table: DataTable[Any], rows: list[tuple[Any, ...]]) -> None:
    """Replace a table's rows, keeping the cursor on the same row number."""
    cursor = table.cursor_row
    table.clear()
    for row in rows:
        # Cell text is the agents' own text: never read as markup ("[/]" would fail, "[b]" vanish).
        table.add_row(*(Text(cell) if isinstance(cell, str) else cell for cell in row))
    if rows:
        table.move_cursor(row=min(cursor, len(rows) - 1), animate=False)


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


class KeyBar(Static):
    """The live view's key hints, drawn once from the app's bindings.

    Textual's Footer rebuilds its widgets whenever focus changes the active bindings: measured at
    100-200 ms per Tab or `/` on a 2-core machine, the slowest key presses of the live view.
    """

    DEFAULT_CSS = """
    KeyBar {
        dock: bottom;
        height: 1;
        background: $footer-background;
        color: $footer-foreground;
    }
    """

    def render(self) -> RenderResult:
        colors = self.app.get_css_variables()
        key_style = f"bold {colors.get('footer-key-foreground', '')}".strip()
        bar = Text(no_wrap=True, overflow="ellipsis")
        for binding in self.app.BINDINGS:
            if isinstance(binding, Binding) and binding.show:
                bar.append(f" {self.app.get_key_display(binding)} ", style=key_style)
                bar.append(f"{binding.description} ")
        palette = Text("^p", style=key_style)
        palette.append(" palette ")
        bar.append(" " * max(1, self.size.width - bar.cell_len - palette.cell_len))
        bar.append_text(palette)
        return bar


class Line(Static):
    """A one-line status whose text changes several times a second. Static.update asks Textual
    for a new layout of the whole screen each time (it cannot know the size stays the same):
    20 ms a time on a 2-core machine, four times a second. This only repaints the line."""

    DEFAULT_CSS = """
    Line {
        height: 1;
    }
    """

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self._line: Text = Text()

    def show(self, text: Text) -> None:
        if text != self._line:
            self._line = text
            self.refresh()

    def render(self) -> RenderResult:
        return self._line


class FilterInput(Input):
    """The feed's filter box: Enter applies it and returns to the feed; Escape clears it, or
    leaves it when it is empty."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "leave", "Clear", tooltip="clear the filter; on an empty one, back to the feed"),
    ]

    def action_leave(self) -> None:
        if self.value:
            self.value = ""
        else:
            self.screen.query_one("#feed").focus()
