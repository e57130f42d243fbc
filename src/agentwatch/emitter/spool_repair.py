"""The spool's rarer paths, loaded only when a run or a command takes one: the recovery of hook
runs killed before they settled (their in-flight files queued, their captures rebuilt or kept as
unreadable), a run the deadline caught while it read its stdin, the count of events a full disk
kept out, and the spool's status for `agentwatch spool status` and `agentwatch doctor`.

Apart from emitter/spool.py so that a run that takes none of them (almost every run: the bus up
and its event published, or the bus down and its event appended to the queue) does not load their
code: every hook run unmarshals the code of the modules it imports (emitter/bundle.py). Each is
reached through the Spool method of the same name, which imports this module when called.
Standard library only (`posix`, not `os`: see config.py).
"""

from __future__ import annotations

import posix
import time

from agentwatch.emitter.spoolformat import (
    COMPLETE,
    HELD,
    INFLIGHT_STALE_S,
    LOST_WIDTH,
    RAW_DIGITS,
    RAW_MARK,
    READING,
    UNREADABLE_KEEP,
    UNREADABLE_MAX_AGE_S,
    UNREADABLE_SUFFIX,
    drain,
    lines,
    lost_record,
    parse_lost,
)

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Mapping
    from typing import Protocol

    Message = tuple[str, str, bytes]

    class Spool(Protocol):
        """What of emitter/spool.py's Spool these paths use (this module imports nothing of
        spool.py, which imports it)."""

        path: str
        inflight: str
        rebuild: Callable[[bytes, bytes], list[Message]] | None
        environ: Mapping[str, str]
        _lost_path: str

        def release(self, held: str) -> None: ...
        def reserve(self) -> None: ...
        def lost(self) -> tuple[int, int, float]: ...
        def unreadable(self) -> list[str]: ...
        def _append_raw(self, data: bytes) -> bool: ...
        def _write_inflight(self, data: bytes, path: str) -> str: ...
        def _read_pos(self) -> int: ...
        def _chunks(self, fd: int, pos: int, size: int) -> tuple[bytes, int]: ...
        @staticmethod
        def _parse(chunk: bytes) -> tuple[list[Message], int]: ...


class SpoolStatus:
    __slots__ = (
        "bytes",
        "count",
        "lost",
        "lost_at",
        "malformed",
        "newest_id",
        "oldest_id",
        "path",
        "unreadable",
    )

    def __init__(self, path: str) -> None:
        self.path = path
        self.count = 0
        self.bytes = 0
        self.malformed = 0
        self.oldest_id = ""
        self.newest_id = ""
        # Messages a full disk kept from the spool (ever), and when the last was; captures nothing
        # could be made of (`inflight/*.unreadable`, redacted, kept for a person to see).
        self.lost = 0
        self.lost_at = 0.0
        self.unreadable = 0


def recover(spool: Spool) -> int:
    """Queue the in-flight messages of hook runs that ended without settling (killed); how many."""
    try:
        names = posix.listdir(spool.inflight)
    except FileNotFoundError:
        return 0
    moved = 0
    now = time.time()
    for name in names:
        if name.startswith("."):  # an earlier version's retired file (confirmed messages)
            continue
        path = f"{spool.inflight}/{name}"
        try:
            if alive(int(name.split(".", 1)[0])) and now - posix.stat(path).st_mtime < INFLIGHT_STALE_S:
                continue
            if name.endswith(".unreadable"):
                continue
            if name.endswith(".tmp"):  # a write that never finished
                spool.release(path)
                continue
            # Claimed by a rename, so two recovering processes never queue it twice; a claim
            # by a process that then died carries that pid and is recovered in turn.
            claimed = f"{spool.inflight}/{posix.getpid()}.r{name.replace('.', '_')}"
            posix.rename(path, claimed)
            with open(claimed, "rb") as f:
                data = f.read()
        except (ValueError, IndexError, OSError):
            continue
        try:
            moved += requeue(spool, claimed, data)
        except OSError:  # a full disk: the claimed file stays, and is recovered later
            continue
    return moved


def resume_capture(spool: Spool, stdin: int) -> None:
    """Add what `stdin` holds now to this process's capture, without waiting (`stdin` is
    non-blocking), and mark it complete if its end was reached."""
    fd = posix.open(f"{spool.inflight}/{posix.getpid()}", posix.O_RDWR)
    try:
        start = posix.pread(fd, 65536, 0).find(b"\n") + 1
        posix.lseek(fd, 0, 2)  # SEEK_END
        try:
            _, unwritten = drain(stdin, fd)
        except BlockingIOError:  # the writer is not done: the capture stays marked READING
            return
        if unwritten is None and start > 0:
            size = posix.lseek(fd, 0, 1) - start  # SEEK_CUR: the end
            posix.pwrite(fd, COMPLETE + b"%0*d" % (RAW_DIGITS, size), len(RAW_MARK))
    finally:
        posix.close(fd)


def queue_own_capture(spool: Spool) -> int:
    """Queue this process's own capture now: its run ran out of time before it made its
    messages (a capture still marked READING becomes the event that says so); how many."""
    path = f"{spool.inflight}/{posix.getpid()}"
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError:
        return 0
    return requeue(spool, path, data) if data.startswith(RAW_MARK) else 0


def requeue(spool: Spool, claimed: str, data: bytes) -> int:
    """Queue what one in-flight file holds; how many messages."""
    header, raw, held = split_capture(data) if data.startswith(RAW_MARK) else (b"", b"", data)
    if held is None:
        if spool.rebuild is None:
            return 0  # left for a recovery that can make its messages
        if header.startswith(READING) and not raw:  # stopped before a byte came: nothing to keep
            spool.release(claimed)
            return 0
        try:
            complete = lines(spool.rebuild(header, raw))
        except Exception as exc:  # a capture nothing can be made of: kept, redacted, for a person to see
            keep_unreadable(spool, claimed, data, exc)
            return 0
    else:
        complete = held[: held.rfind(b"\n") + 1]  # a run killed mid-write left a partial line
    if complete:
        spool._append_raw(complete)
    spool.release(claimed)
    return complete.count(b"\n")


def keep_unreadable(spool: Spool, claimed: str, data: bytes, exc: BaseException) -> None:
    """Keep a capture nothing could be made of as `*.unreadable`, its secrets taken out (as an
    event's are), after a line that says why; the oldest such files beyond UNREADABLE_KEEP, or
    older than UNREADABLE_MAX_AGE_S, go. Where the redacted copy cannot be written (a full
    disk), the capture is dropped and counted as lost: never kept as it came."""
    from agentwatch.envsecrets import redact_environment
    from agentwatch.redact import redact_text

    text, count = redact_text(data.decode("utf-8", "replace"))
    text, count = redact_environment(text, count, spool.environ)
    why = f"# unreadable: {type(exc).__name__}: {str(exc)[:200]}".replace("\n", " ")
    try:
        spool._write_inflight(f"{why}\n{text}".encode("utf-8", "replace"), claimed + UNREADABLE_SUFFIX)
    except OSError:
        note_lost(spool, 1)
    spool.release(claimed)
    prune_unreadable(spool)


def prune_unreadable(spool: Spool, now: float | None = None) -> int:
    """Remove the unreadable captures beyond the newest UNREADABLE_KEEP or older than
    UNREADABLE_MAX_AGE_S; how many."""
    now = time.time() if now is None else now
    aged = []
    for name in spool.unreadable():
        try:
            aged.append((posix.stat(f"{spool.inflight}/{name}").st_mtime, name))
        except OSError:
            continue
    aged.sort(reverse=True)
    removed = 0
    for i, (mtime, name) in enumerate(aged):
        if i >= UNREADABLE_KEEP or now - mtime > UNREADABLE_MAX_AGE_S:
            spool.release(f"{spool.inflight}/{name}")
            removed += 1
    return removed


def note_lost(spool: Spool, count: int = 0, reported: bool = False) -> None:
    """Count `count` messages the disk had no room for (or, `reported`, mark every one counted
    as reported): written over the record in place, which needs no new block of the disk, so
    it is kept where nothing else can be. Never raises."""
    try:
        fd = posix.open(spool._lost_path, posix.O_RDWR)
    except OSError:
        return  # no record was made while there was room: nothing can be kept
    try:
        posix.lockf(fd, posix.F_LOCK, 0)
        total, told, last = parse_lost(posix.pread(fd, LOST_WIDTH, 0))
        if count:
            total, last = total + count, time.time()
        posix.pwrite(fd, lost_record(total, total if reported else told, last), 0)
    except OSError:
        pass
    finally:
        posix.close(fd)


def status(spool: Spool) -> SpoolStatus:
    recover(spool)
    st = SpoolStatus(spool.path)
    spool.reserve()
    st.lost, _, st.lost_at = spool.lost()
    prune_unreadable(spool)
    st.unreadable = len(spool.unreadable())
    try:
        fd = posix.open(spool.path, posix.O_RDONLY)
    except FileNotFoundError:
        return st
    try:
        size = posix.fstat(fd).st_size
        pos = spool._read_pos()
        pos = 0 if pos > size else pos
        st.bytes = size - pos
        while pos < size:
            chunk, pos_next = spool._chunks(fd, pos, size)
            if not chunk:
                break
            messages, malformed = spool._parse(chunk)
            st.malformed += malformed
            st.count += len(messages)
            if messages:
                st.oldest_id = st.oldest_id or messages[0][1]
                st.newest_id = messages[-1][1]
            pos = pos_next
    finally:
        posix.close(fd)
    return st


def split_capture(data: bytes) -> tuple[bytes, bytes, bytes | None]:
    """A capture's header as its run's rebuild takes it (the state byte, then the JSON), its
    stdin, and the messages its run kept after it (None when it kept none)."""
    line, _, rest = data[len(RAW_MARK) :].partition(b"\n")
    digits = line[1 : 1 + RAW_DIGITS]
    if line[:1] not in (READING, COMPLETE, HELD) or len(digits) != RAW_DIGITS or not digits.isdigit():
        return line, rest, None  # an earlier version's capture: the stdin is the rest
    header = line[:1] + line[1 + RAW_DIGITS :]
    if line[:1] == READING:
        return header, rest, None  # killed while it read: what it read is the rest
    size = int(digits)
    return header, rest[:size], (rest[size:] if line[:1] == HELD else None)


def whole_head(head: bytes, body: bytes) -> bytes | None:
    """`SUBJECT ID` of the whole line that ends a glued one, whose body begins with `body`, from
    the bytes before that body (`head`: the partial line, then the subject and the id); None
    when they do not name one. The subject is the last `genie.` in `head` that holds the body's
    agent as one of its tokens (the partial line may end in bytes a subject can hold)."""
    before, _, msg_id = head.rpartition(b" ")
    if not msg_id or b'"id":"' + msg_id + b'"' not in body:
        return None
    at = body.find(b'"agent":"') + 9
    agent = body[at : body.find(b'"', at)] if at >= 9 else b""
    starts = []
    i = before.find(b"genie.")
    while i >= 0:
        starts.append(i)
        i = before.find(b"genie.", i + 1)
    for i in reversed(starts):
        subject = before[i:]
        if b" " not in subject and (b"." + agent + b".") in subject + b".":
            return subject + b" " + msg_id
    return None


def alive(pid: int) -> bool:
    try:
        posix.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
