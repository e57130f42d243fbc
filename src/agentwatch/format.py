"""How agentwatch writes sizes, durations, ages, times and cut text for a person: one set of rules
for the commands and the dashboard alike. Standard library only."""

from __future__ import annotations

import datetime as dt
import time
from collections.abc import Iterable
from typing import Any


def human_bytes(n: float) -> str:
    """1023 B, 1.5 KiB, 64.0 MiB, 2.1 GiB."""
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} GiB"


# --- time spans ---------------------------------------------------------------------------------


def ago(seconds: float) -> str:
    """A coarse age for a sentence of a status report: 45s, 12m, 3.5h, 2.0d (a tenth of an hour
    or day says more than a whole one where there is room for it)."""
    if seconds < 90:
        return f"{seconds:.0f}s"
    if seconds < 5400:
        return f"{seconds / 60:.0f}m"
    if seconds < 172800:
        return f"{seconds / 3600:.1f}h"
    return f"{seconds / 86400:.1f}d"


def age(seconds: float | None, unknown: str = "-") -> str:
    """How long ago or how long for, in a narrow column: 5s, 12m, 3h, 2d; `unknown` when unknown."""
    if seconds is None or isinstance(seconds, bool):
        return unknown
    s = max(0, int(seconds))
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m"
    if s < 86400:
        return f"{s // 3600}h"
    return f"{s // 86400}d"


def duration(ms: float | None, unknown: str = "-") -> str:
    """A duration given in milliseconds: 850ms, 3.4s, 42s, 2m05s, 1h02m, 3d04h; `unknown` when unknown."""
    if ms is None or isinstance(ms, bool):
        return unknown
    ms = max(0.0, float(ms))
    if ms < 1000:
        return f"{ms:.0f}ms"
    seconds = ms / 1000
    if seconds < 10:
        return f"{seconds:.1f}s"
    whole = int(seconds)
    if whole < 60:
        return f"{whole}s"
    if whole < 3600:
        return f"{whole // 60}m{whole % 60:02d}s"
    if whole < 86400:
        return f"{whole // 3600}h{whole % 3600 // 60:02d}m"
    return f"{whole // 86400}d{whole % 86400 // 3600:02d}h"


def rate(pct: float | None) -> str:
    """A percentage with one decimal: 14.3%; '-' when there is none (nothing to divide by)."""
    if pct is None or isinstance(pct, bool):
        return "-"
    return f"{float(pct):.1f}%"


# --- moments ------------------------------------------------------------------------------------


def clock(at: float) -> str:
    """The time of day of a Unix time, in UTC: 14:03:27."""
    return time.strftime("%H:%M:%S", time.gmtime(at))


def day_time(at: dt.datetime | None, now: float) -> str:
    """A moment in UTC: HH:MM:SS when it is on the day of `now`, MM-DD HH:MM before; '-' when unknown."""
    if at is None:
        return "-"
    today = dt.datetime.fromtimestamp(now, dt.UTC).date()
    at = at.astimezone(dt.UTC)
    return at.strftime("%H:%M:%S") if at.date() == today else at.strftime("%m-%d %H:%M")


# --- text ---------------------------------------------------------------------------------------


def truncate(text: str, width: int) -> str:
    """`text` in at most `width` characters, an ellipsis marking a cut at the end."""
    if width <= 0:
        return ""
    return text if len(text) <= width else text[: width - 1] + "…"


def shorten(text: str, width: int) -> str:
    """`text` in at most `width` characters, the middle replaced by an ellipsis: both ends of a
    name such as mcp__server__action say something."""
    if width <= 0:
        return ""
    if len(text) <= width:
        return text
    if width < 6:
        return truncate(text, width)
    head = (width - 1) // 2
    tail = width - 1 - head
    return text[:head] + "…" + text[-tail:]


def one_line(text: object, limit: int = 200) -> str:
    """Any text on one line, runs of whitespace as one space, at most `limit` characters (an
    error message or a traceback told in a status line or a table cell)."""
    return " ".join(str(text or "").split())[:limit]


def money(usd: float | None, tokens: int = 0) -> str:
    """$0.42, $12.3, $1,234; 'unpriced' for tokens no price is known for; '' for nothing at all."""
    if usd is None:
        return "unpriced" if tokens else ""
    if usd < 10:
        return f"${usd:.2f}"
    if usd < 100:
        return f"${usd:.1f}"
    return f"${usd:,.0f}"


# --- times as the wire and the store write them ---------------------------------------------------


def utc_datetime(value: object) -> dt.datetime | None:
    """An ISO-8601 time (`2026-11-24T09:00:00.123Z`, the store's `2026-11-24 09:00:00.123`, with or
    without an offset; no offset means UTC) or a datetime, as an aware UTC datetime; None when it
    is none. The one parser of times for the whole read side and the live feed."""
    if isinstance(value, dt.datetime):
        return value.replace(tzinfo=dt.UTC) if value.tzinfo is None else value.astimezone(dt.UTC)
    if not isinstance(value, str) or not value:
        return None
    text = value[:-1] + "+00:00" if value.endswith("Z") else value
    try:
        when = dt.datetime.fromisoformat(text)
    except ValueError:
        return None
    return when.replace(tzinfo=dt.UTC) if when.tzinfo is None else when.astimezone(dt.UTC)


def utc_seconds(value: object) -> float | None:
    """utc_datetime() as Unix seconds; None when it is no time. The wire's own form
    (`2026-11-24T09:00:00.123Z`, every envelope's) is read from its second, parsed once per
    second, and its milliseconds: the same value for a fraction of the cost, on every event the
    watchdog and the dashboard take."""
    if type(value) is str and len(value) == 24 and value[19] == "." and value[23] == "Z":
        ms = value[20:23]
        if ms.isascii() and ms.isdigit():
            whole = _SECONDS.get(value[:19])
            if whole is None:
                when = utc_datetime(value[:19] + "Z")
                if when is None:
                    return None
                if len(_SECONDS) >= 10_000:
                    _SECONDS.clear()
                whole = _SECONDS[value[:19]] = round(when.timestamp()) * 1000
            return (whole + int(ms)) / 1000  # as datetime.timestamp() divides: the same float
    when = utc_datetime(value)
    return None if when is None else when.timestamp()


_SECONDS: dict[str, int] = {}  # "2026-11-24T09:00:00" -> its Unix time in milliseconds


def tool_counts(tools: Iterable[str]) -> str:
    """`Bash ×3, Read, Edit ×2`: tools in the order first used, each with how often."""
    counts: dict[str, int] = {}
    for tool in tools:
        counts[tool] = counts.get(tool, 0) + 1
    return ", ".join(f"{tool} ×{n}" if n > 1 else tool for tool, n in counts.items())


HOST_COLUMNS = ("HOST", "LINK", "LAST EVENT", "EVENTS 1H", "BACKLOG", "OLDEST WAITING", "SPOOL", "VERSIONS")


def host_cells(row: dict[str, Any], now: float) -> tuple[str, ...]:
    """One host of `agentwatch hosts --json` as the cells of HOST_COLUMNS (the command's table and
    the dashboard's hosts view): a cut link with how long since the last contact, a backlog as of
    that contact as `>=N`."""
    link = row["link"] if row["link"] == "up" else f"cut {age(row['last_contact_s'], 'never')}"
    measured = row["backlog_measured"] or row["link"] == "up"
    backlog = f"{row['backlog']:,}" if measured else f">={row['backlog']:,}"
    spool = "-" if row["spool_bytes"] is None else human_bytes(row["spool_bytes"])
    versions = " ".join(x for x in (f"agentwatch {row['version'] or '?'}", row["harnesses"]) if x)
    last = "-" if row["last_event"] is None else f"{age(now - row['last_event'])} ago"
    oldest = age(row["oldest_waiting_s"])
    hour = "-" if row["events_1h"] is None else f"{row['events_1h']:,}"  # a host's own row: no store
    return (str(row["host"]), link, last, hour, backlog, oldest, spool, versions)
