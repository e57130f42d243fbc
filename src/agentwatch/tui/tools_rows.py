"""What the "Tools and history" view shows, apart from the screen itself: its windows of time and
sorts, its columns, and how a row of the store's answer becomes a row of cells.

Rich text only, no Textual: the cells are tested without running an app. The SQL is in
store/queries.py; the wording of numbers, times and cut names in agentwatch/format.py.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any, NamedTuple

from rich.style import Style
from rich.text import Text

from agentwatch.format import age, day_time, duration, money, one_line, rate, shorten, utc_datetime
from agentwatch.store import queries


class Window(NamedTuple):
    """A window of time the view offers: what its title says, and its length."""

    label: str
    seconds: int | None  # None: all time


WINDOWS: dict[str, Window] = {
    "15m": Window("last 15 min", 15 * 60),
    "1h": Window("last hour", 60 * 60),
    "1d": Window("last day", 24 * 60 * 60),
    "all": Window("all time", None),
}
WINDOW_ORDER: tuple[str, ...] = tuple(WINDOWS)
SORT_ORDER: tuple[str, ...] = tuple(queries.TOOL_SORTS)

# Screens at least this wide get the extra columns (team, last error, end reason, ...), and the
# whole session id from FULL_SESSION_AT.
WIDE_AT = 140
FULL_SESSION_AT = 180

# The tables' columns, narrow and wide (at least WIDE_AT cells).
TOOL_COLUMNS = ("tool", "calls", "fail", "fail%", "p50", "p95", "max", "unpaired")
TOOL_COLUMNS_WIDE = ("tool", "calls", "fail", "fail%", "p50", "p95", "max", "denied", "unpaired",
                     "last error")  # fmt: skip
SESSION_COLUMNS = ("session", "agent", "start UTC", "dur", "events", "calls", "err", "cov%", "outcome")
SESSION_COLUMNS_WIDE = ("session", "agent", "team", "start UTC", "duration", "seen", "events", "calls", "err",
                        "prompts", "subs", "cov%", "cost", "outcome", "end reason")  # fmt: skip
NUMERIC_COLUMNS = frozenset(
    {"calls", "fail", "fail%", "p50", "p95", "max", "denied", "unpaired", "dur", "duration", "seen", "events",
     "err", "prompts", "subs", "cov%", "cost"}
)  # fmt: skip


def window_seconds(window: str) -> int | None:
    """The window's length in seconds (None: all time); ValueError for a name not offered."""
    if window not in WINDOWS:
        raise ValueError(f"unknown window {window!r}: one of {', '.join(WINDOW_ORDER)}")
    return WINDOWS[window].seconds


def window_phrase(window: str) -> str:
    """'in the last hour', 'over all time': for titles."""
    return "over all time" if window_seconds(window) is None else f"in the {WINDOWS[window].label}"


def tools_query(window: str, sort: str = SORT_ORDER[0]) -> queries.Query:
    """The per-tool statistics of a named window, in a named sort."""
    return queries.tool_stats(window_seconds(window), sort)


def sessions_query(window: str) -> queries.Query:
    """The ids of the sessions active in a named window, newest first (then `session_details`)."""
    return queries.newest_sessions(window_seconds(window))


# -- the store's answer -------------------------------------------------------------------------


def whole(value: object) -> int:
    """A count from a query row (a number, or its text); 0 when it is none."""
    if isinstance(value, (bool, int, float)):
        return int(value)
    if isinstance(value, str):
        try:
            return int(float(value))
        except ValueError:
            return 0
    return 0


def number(value: object) -> float | None:
    """A measure from a query row (a number, or its text); None when it is none (NULL)."""
    if value is None or isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return float(value)
    if isinstance(value, str):
        try:
            return float(value)
        except ValueError:
            return None
    return None


# -- cells ----------------------------------------------------------------------------------------
# Every cell is Text: what the store holds (tool names, errors, agents) is shown as is, never read
# as markup. `colors` are the theme's text colours by name: error, warning, success.


def _right(text: str, style: Style | None = None) -> Text:
    return Text(text, style=style or Style(), justify="right")


def tool_cells(
    row: Mapping[str, Any], colors: Mapping[str, Style], name_width: int, error_width: int
) -> dict[str, Text]:
    """A row of tool_stats as the cells of every tool column, narrow and wide."""
    failures = whole(row.get("failures"))
    unpaired = whole(row.get("unpaired"))
    failed = colors["error"] if failures else None
    return {
        "tool": Text(shorten(str(row.get("tool") or "(none)"), name_width)),
        "calls": _right(str(whole(row.get("calls")))),
        "fail": _right(str(failures), failed),
        "fail%": _right(rate(number(row.get("failure_pct"))), failed),
        "p50": _right(duration(number(row.get("p50_ms")))),
        "p95": _right(duration(number(row.get("p95_ms")))),
        "max": _right(duration(number(row.get("max_ms")))),
        "denied": _right(str(whole(row.get("denied")))),
        "unpaired": _right(str(unpaired), colors["warning"] if unpaired else None),
        "last error": Text(shorten(one_line(row.get("last_error")), error_width)),
    }


def _coverage(pct: object, colors: Mapping[str, Style]) -> Text:
    """How much of the session's numbered events is stored, in percent: `-` where the hook did
    not number them."""
    value = number(pct)
    if value is None:
        return _right("-")
    # Rounded down: a session missing one event in a thousand must not read 100.
    return _right(str(math.floor(value)), colors["error"] if value < 100 else None)


def session_cells(
    row: Mapping[str, Any],
    colors: Mapping[str, Style],
    now: float,
    agent_width: int,
    session_width: int,
    team_width: int = 16,
) -> dict[str, Text]:
    """A row of active_sessions as the cells of every session column, narrow and wide; the session
    id cut to `session_width` (a UUID's first group tells sessions apart)."""
    outcome = str(row.get("outcome") or "")
    outcome_style = {"failed": colors["error"], "running": colors["success"]}
    errors = whole(row.get("errors"))
    took = _right(duration(number(row.get("duration_ms"))))
    return {
        "session": Text(str(row.get("session_id") or "")[:session_width]),
        "agent": Text(shorten(str(row.get("agent") or ""), agent_width)),
        "team": Text(shorten(str(row.get("team") or ""), team_width)),
        "start UTC": Text(day_time(utc_datetime(row.get("started")), now)),
        "dur": took,
        "duration": took,
        "seen": _right(age(number(row.get("seen_s")))),
        "events": _right(str(whole(row.get("events")))),
        "calls": _right(str(whole(row.get("tool_calls")))),
        "err": _right(str(errors), colors["error"] if errors else None),
        "prompts": _right(str(whole(row.get("prompts")))),
        "subs": _right(str(whole(row.get("subagents")))),
        "cov%": _coverage(row.get("coverage_pct"), colors),
        "cost": _right(money(number(row.get("cost_usd")), int(number(row.get("tokens")) or 0))),
        "outcome": Text(outcome, style=outcome_style.get(outcome, Style())),
        "end reason": Text(str(row.get("end_reason") or "")),
    }
