"""Each session's events numbered 1, 2, 3, ... on this host, so the store can tell what is missing.

Claude Code gives hook events no sequence number, and its hooks run as separate processes, often
at once. The number is a counter file per session in the data dir, read and advanced under an
exclusive lock (lockf, as the spool's): concurrent hook processes of one session never share or
skip a number.
Counters of sessions untouched for PRUNE_AFTER_S are removed now and then.

Standard library only: this module is on the hook's path (`posix`, not `os`: see config.py).
"""

from __future__ import annotations

import posix
import time

PRUNE_AFTER_S = 30 * 86400
_SAFE = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-")


def counter_path(data_dir: str, session_id: str) -> str:
    name = "".join(ch if ch in _SAFE else "_" for ch in session_id[:128])
    return f"{data_dir.rstrip('/')}/seq/{name}"


def open_locked(path: str) -> int:
    """A session's file (its folder made on first use), opened and locked against the other hook
    processes of the session; the caller closes it, which lets the lock go."""
    try:
        fd = posix.open(path, posix.O_RDWR | posix.O_CREAT, 0o600)
    except FileNotFoundError:
        import os

        os.makedirs(path.rpartition("/")[0], mode=0o700, exist_ok=True)
        fd = posix.open(path, posix.O_RDWR | posix.O_CREAT, 0o600)
    try:
        posix.lockf(fd, posix.F_LOCK, 0)
    except BaseException:
        posix.close(fd)
        raise
    return fd


def next_seq(data_dir: str, session_id: str) -> int:
    """The next number of `session_id` on this host (1 for its first event)."""
    fd = open_locked(counter_path(data_dir, session_id))
    try:
        text = posix.pread(fd, 32, 0)
        value = (int(text) if text.strip().isdigit() else 0) + 1
        data = str(value).encode()
        posix.pwrite(fd, data.ljust(20), 0)  # fixed width: no truncate, no stale digits
        return value
    finally:
        posix.close(fd)


def remove_untouched(folder: str, older_than_s: float, now: float | None = None) -> int:
    """Remove the files of `folder` not modified for `older_than_s`; how many."""
    now = time.time() if now is None else now
    removed = 0
    try:
        names = posix.listdir(folder)
    except OSError:
        return 0
    for name in names:
        path = f"{folder}/{name}"
        try:
            if now - posix.stat(path).st_mtime > older_than_s:
                posix.unlink(path)
                removed += 1
        except OSError:
            continue
    return removed


def prune(data_dir: str, now: float | None = None) -> int:
    """Remove counters untouched for PRUNE_AFTER_S; how many."""
    return remove_untouched(f"{data_dir.rstrip('/')}/seq", PRUNE_AFTER_S, now)
