"""What the dashboard's screens share: formatting, colours from the theme, the event detail."""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from typing import Any, ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import DataTable, Static

from agentwatch.tui.model import FAILED, IDLE, STOPPED, THINKING, WAITING, WORKING


def age(seconds: float | None) -> str:
    """A duration as a person reads it in a narrow column: 45s, 12m, 3.2h."""
    if seconds is None:
        return ""
    if seconds < 60:
        return f"{seconds:.0f}s"
    if seconds < 3600:
        return f"{seconds / 60:.0f}m"
    return f"{seconds / 3600:.1f}h"


def duration(seconds: float) -> str:
    """A tool call's duration: 85ms, 3.4s, 2m05s."""
    if seconds < 1:
        return f"{seconds * 1000:.0f}ms"
    if seconds < 60:
        return f"{seconds:.1f}s"
    minutes, secs = divmod(int(seconds), 60)
    return f"{minutes}m{secs:02d}s" if minutes < 60 else f"{minutes // 60}h{minutes % 60:02d}m"


def clock(at: float) -> str:
    return time.strftime("%H:%M:%S", time.gmtime(at))


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
        self.state = {
            WORKING: f"bold {ok}",
            THINKING: primary,
            WAITING: f"bold {warn}",
            IDLE: "dim",
            STOPPED: "dim italic",
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
        self.status = {"ok": ok, "running": warn, "failed": f"bold {err}", "denied": warn}
        self.error = f"bold {err}"
        self.good = ok


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
