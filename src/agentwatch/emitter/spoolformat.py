"""The spool's files as written and read: the in-flight capture's layout, the record of lost
events, the unreadable captures kept, and the few helpers both emitter/spool.py (on every hook
run's path) and emitter/spool_repair.py (its rarer paths, loaded only when taken) use.

Apart from spool.py so that spool_repair.py needs nothing of spool.py, which imports it only when
a rare path is taken. Standard library only (`posix`, not `os`: see config.py).
"""

from __future__ import annotations

import posix

TYPE_CHECKING = False
if TYPE_CHECKING:
    Message = tuple[str, str, bytes]

# An in-flight file older than this is recovered even if a process with its pid is alive (the
# pid was reused): no hook run lives that long.
INFLIGHT_STALE_S = 120.0
# The first bytes of an in-flight file that holds a hook's stdin as read, then one byte: READING
# while stdin is read into it, COMPLETE once its end was reached, HELD once the run's messages
# follow it; then the size of the stdin kept (RAW_DIGITS digits, zeros while READING), the
# header, a newline, the stdin, and (HELD) the messages' lines. (A capture written by an earlier
# version has no size, and no state byte before that: its header follows the mark, whole.)
RAW_MARK = b"#stdin "
READING, COMPLETE, HELD = b"-", b"+", b"="
RAW_DIGITS = 12
# The record of events a full disk kept from the spool (Spool.note_lost): made while the disk has
# room, then only overwritten in place, which needs no new block: "count reported last-time".
LOST_NAME = "lost"
LOST_WIDTH = 64
# Captures nothing could be made of (`inflight/*.unreadable`, redacted): the newest kept, for a
# person to see (`agentwatch spool status`, `agentwatch doctor`), and none older than this.
UNREADABLE_KEEP = 20
UNREADABLE_MAX_AGE_S = 30 * 86400
UNREADABLE_SUFFIX = ".unreadable"


def drain(src: int, dst: int, limit: int = 1 << 62) -> tuple[int, bytes | None]:
    """Move everything `src` yields until its end to the end of file `dst`: the bytes written, and
    None; or, when `dst` refused a write or `limit` bytes were written, the bytes read and not
    written (the rest is left in `src`)."""
    size = 0
    splice = getattr(posix, "splice", None)  # Linux, Python 3.10+
    while splice is not None:
        if size >= limit:
            return size, b""
        try:
            moved = splice(src, dst, min(1 << 20, limit - size))
        except OSError:  # not a pipe (a socket, a file), or a full disk: read and write below
            break
        if not moved:
            return size, None
        size += moved
    while chunk := posix.read(src, 1 << 20):
        view = memoryview(chunk)
        if size >= limit:
            return size, chunk
        try:
            while view:
                written = posix.write(dst, view)
                view = view[written:]
                size += written
        except OSError:
            return size, bytes(view)
    return size, None


def lost_record(count: int, reported: int, last: float) -> bytes:
    return f"{count} {reported} {last:.3f}".encode().ljust(LOST_WIDTH - 1) + b"\n"


def parse_lost(data: bytes) -> tuple[int, int, float]:
    parts = data.split()
    try:
        return int(parts[0]), int(parts[1]), float(parts[2])
    except (IndexError, ValueError):
        return 0, 0, 0.0


def lines(messages: list[Message]) -> bytes:
    return b"".join(f"{subject} {msg_id} ".encode() + body + b"\n" for subject, msg_id, body in messages)
