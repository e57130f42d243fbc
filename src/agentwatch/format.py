"""How agentwatch writes sizes, durations, ages and cut text for a person: one set of rules for
the commands and the dashboard alike. Standard library only."""

from __future__ import annotations


def human_bytes(n: float) -> str:
    """1023 B, 1.5 KiB, 64.0 MiB, 2.1 GiB."""
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} GiB"


def ago(seconds: float) -> str:
    """A coarse age for a status line: 45s, 12m, 3.5h, 2.0d."""
    if seconds < 90:
        return f"{seconds:.0f}s"
    if seconds < 5400:
        return f"{seconds / 60:.0f}m"
    if seconds < 172800:
        return f"{seconds / 3600:.1f}h"
    return f"{seconds / 86400:.1f}d"


def truncate(text: str, width: int) -> str:
    """`text` in at most `width` characters, an ellipsis marking a cut."""
    if width <= 0:
        return ""
    return text if len(text) <= width else text[: width - 1] + "…"
