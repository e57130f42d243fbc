"""The local spool: what the hook could not send waits here, oldest first, until the bus is back.

One append-only file of lines `SUBJECT ID BODY` (BODY is the envelope's one-line JSON), mode
0600, in the data dir. Appenders (concurrent hook processes) hold an exclusive lock on the file
for the single write of their lines, so lines never interleave. The spool is bounded: an append
that would grow it past its cap is refused (and the hook logs the drop).

A hook reads its stdin straight into a file of its own under `inflight/` (named by its pid),
adds its messages to that file before it sends anything, and deletes the file once the bus
confirmed them: a hook killed at any moment after that, even by SIGKILL, leaves the file behind,
and the next flush (a hook's drain, or `agentwatch spool flush`) moves the files of processes
that are gone into the queue. One file per run, written in place: creating a second one and
renaming it over the first cost a run about 0.35 ms here, and ext4 starts writing a file renamed
over another to disk at once, which the next rename or deletion then waited for (milliseconds on
a busy disk).

A flusher takes a separate lock (only one flushes at a time; a hook that finds it taken just
skips flushing), reads from the committed position, publishes a chunk, waits for the server's
confirmation, then commits the new position. Once everything is sent, it truncates the file under
the append lock. A flusher killed between a publish and its commit re-sends that chunk next time:
the message ids make JetStream drop the repeats.

The locks are POSIX record locks (`lockf`, built into the `posix` module: importing `fcntl` for
flock cost the hook half a millisecond). They belong to a process, not to a descriptor: threads
of one process do not exclude each other, so a process uses its spool from one thread.

Standard library only: this module is on the hook's path (`posix`, not `os`: see config.py).
"""

from __future__ import annotations

import posix
import time

from agentwatch.emitter.spoolformat import (
    COMPLETE,
    HELD,
    LOST_NAME,
    LOST_WIDTH,
    RAW_DIGITS,
    RAW_MARK,
    READING,
    UNREADABLE_SUFFIX,
    drain,
    lines,
    lost_record,
    parse_lost,
)

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Mapping

    from agentwatch.emitter.spool_repair import SpoolStatus

    Message = tuple[str, str, bytes]

DEFAULT_MAX_BYTES = 64 * 1024 * 1024
CHUNK_BYTES = 256 * 1024
# Stdin up to this size goes to disk as it is read (almost every hook payload is far smaller). A
# larger one is kept once its messages are made: writing and reading back tens of megabytes costs
# a run more than its deadline allows on a busy machine.
CAPTURE_MAX_BYTES = 1 << 20
# The in-flight file of a run whose stdin was not captured (too large, or the disk refused it):
# its messages alone, written whole as `PID.held.tmp`, then renamed.
HELD_SUFFIX = ".held"
# How every envelope's JSON begins, after `SUBJECT ID` (the contract's "v" comes first). A JSON
# body is compact: ` {"` never occurs inside one (a quote in a string is escaped), so a line with
# it twice is two lines glued (see Spool._parse).
BODY_START = b' {"v":'
# The queue's committed position is written at this width, in place (see Spool._write_pos).
POS_WIDTH = 20


class Spool:
    def __init__(
        self,
        directory: str,
        max_bytes: int = DEFAULT_MAX_BYTES,
        rebuild: Callable[[bytes, bytes], list[Message]] | None = None,
    ) -> None:
        self.directory = directory
        self.path = f"{directory}/queue"
        self.max_bytes = max_bytes
        self._pos_path = f"{directory}/queue.pos"
        self._lock_path = f"{directory}/flush.lock"
        self.inflight = f"{directory}/inflight"
        # Makes the messages of a hook run killed before it made them, from its captured stdin:
        # (capture header, stdin) -> messages. Without it such captures wait for one who can.
        self.rebuild = rebuild
        # The environment whose secret variables are taken out of a capture kept as unreadable.
        self.environ: Mapping[str, str] = {}
        self._lost_path = f"{directory}/{LOST_NAME}"
        # Set while a stdin larger than a capture is read on into memory (capture_stdin): the
        # capture holds its head alone, and nothing read later may be appended to it.
        self.head_only = False

    # -- in flight (the hook, before it sends) -----------------------------------------------

    def _write_inflight(self, data: bytes, path: str) -> str:
        """Write the in-flight file `path` whole (as `path.tmp`, then renamed to `path`, a name
        nothing has: see the module's docstring); its path."""
        tmp = path + ".tmp"
        fd = -1
        try:  # from before the open: a deadline right after it still removes the file
            try:
                fd = posix.open(tmp, posix.O_WRONLY | posix.O_CREAT | posix.O_TRUNC, 0o600)
            except FileNotFoundError:
                _makedirs(self.inflight)
                fd = posix.open(tmp, posix.O_WRONLY | posix.O_CREAT | posix.O_TRUNC, 0o600)
            _write_all(fd, data)
            # Forgotten before it is closed: a deadline between the two must not close it twice
            # (EBADF, raised in place of the deadline, left the temporary file behind).
            written, fd = fd, -1
            posix.close(written)
            posix.rename(tmp, path)
        except BaseException:  # the deadline or a stop, mid-write
            if fd >= 0:
                posix.close(fd)
            self.release(tmp)
            raise
        return path

    def capture_stdin(self, stdin: int, header: bytes) -> tuple[bytes, str]:
        """Read `stdin` to its end straight into this process's in-flight file, and return what was
        read and the file's path. The bytes are never only in this process's memory: a pipe is
        spliced into the file by the kernel (they leave the pipe as they enter the file), anything
        else is written as each chunk is read. A run killed at any moment after this, or while it
        makes its messages, is rebuilt from the file; one killed while reading leaves a capture
        marked READING, made into an InvalidPayload event that says so."""
        path = f"{self.inflight}/{posix.getpid()}"
        try:
            fd = posix.open(path, posix.O_RDWR | posix.O_CREAT | posix.O_TRUNC, 0o600)
        except FileNotFoundError:
            _makedirs(self.inflight)
            self.reserve()  # a data dir's first run: the record of lost events, while there is room
            fd = posix.open(path, posix.O_RDWR | posix.O_CREAT | posix.O_TRUNC, 0o600)
        try:
            try:
                first = RAW_MARK + READING + b"0" * RAW_DIGITS + header + b"\n"
                start = posix.write(fd, first)
                if start != len(first):
                    raise OSError(28, "No space left on device")  # ENOSPC: the header cut short
            except OSError:  # a full disk: no file stays behind (the run keeps stdin in memory)
                self.release(path)
                raise
            size, unwritten = drain(stdin, fd, CAPTURE_MAX_BYTES)
            raw = posix.pread(fd, size, start)
            if unwritten is None:
                posix.pwrite(fd, COMPLETE + b"%0*d" % (RAW_DIGITS, size), len(RAW_MARK))
                return raw, path
        finally:
            posix.close(fd)
        # The file took no more (a full disk), or stdin is larger than any payload the hook keeps
        # whole: the rest is read into memory. The capture, which holds its head, stays (marked
        # READING) until the end is read: a run stopped or killed meanwhile leaves the event that
        # says how far it read, with the session its head names. Then it is dropped; the run holds
        # its messages once made, and spools them as it can.
        self.head_only = True
        chunks = [raw, unwritten]
        while chunk := posix.read(stdin, 1 << 20):
            chunks.append(chunk)
        self.head_only = False
        self.release(path)
        return b"".join(chunks), ""

    def hold(self, messages: list[Message], held: str = "") -> str:
        """Put `messages` in this process's in-flight file before they are sent: after its
        capture `held` (marked HELD once they are all written), or in a file of their own when
        its stdin was not captured; the file's path."""
        if not held:
            return self._write_inflight(lines(messages), f"{self.inflight}/{posix.getpid()}{HELD_SUFFIX}")
        fd = posix.open(held, posix.O_WRONLY)
        try:
            _write_all(fd, lines(messages), posix.lseek(fd, 0, 2))  # SEEK_END
            posix.pwrite(fd, HELD, len(RAW_MARK))
        finally:
            posix.close(fd)
        return held

    def hand_over(self, held: str, pid: int, to: int = 0) -> str:
        """Name the in-flight file `held`, made by process `pid` (a parent leaving the run to its
        child), after process `to` (this process when 0), whose it is now; its new path. The
        parent names it before it leaves; the child does when the parent died first. (A file
        named after a process that is gone is another run's to recover.)"""
        name = held.rpartition("/")[2]
        if not held or not name.startswith(str(pid)):
            return held
        mine = f"{self.inflight}/{to or posix.getpid()}{name[len(str(pid)) :]}"
        try:
            posix.rename(held, mine)
        except FileNotFoundError:  # the parent named it, or a recovery queued it (a re-send: same event)
            return mine if posix.access(mine, posix.F_OK) else held
        except OSError:
            return held
        return mine

    def fork_over(self, held: str) -> tuple[int, str]:
        """Fork a child to take over the run whose in-flight file is `held`: (the child's pid, in
        the parent, once the file is named after the child; 0 in the child; -1 where fork fails)
        and the file's path. Named before the parent leaves, never after: a file named after a
        process that is gone is another run's to recover, and would be sent twice."""
        parent = posix.getpid()
        try:
            told, tell = posix.pipe()
        except OSError:
            return -1, held
        try:
            child = posix.fork()
        except OSError:
            child = -1
        if child > 0:
            self.hand_over(held, parent, child)
            return child, held  # the parent leaves, closing `tell`: the child reads its end
        posix.close(tell)
        if child == 0:
            posix.read(told, 1)  # the parent named the file, or died first (then the child names it)
            held = self.hand_over(held, parent)
        posix.close(told)
        return child, held

    def release(self, held: str) -> None:
        """The bus confirmed what `held` holds, or the queue took it: forget it. (Deleted: it was
        never renamed over another file, so ext4 has not begun writing it out, and nothing waits.)"""
        try:  # noqa: SIM105 - contextlib would cost the hook an import
            posix.unlink(held)
        except FileNotFoundError:
            pass

    def settle(self, held: str, messages: list[Message]) -> bool:
        """The bus did not confirm: queue `messages` for later and drop the in-flight copy.
        False when the spool is full (the messages are then dropped)."""
        kept = self.append(messages)
        if held:
            self.release(held)
        return kept

    def recover(self) -> int:
        """Queue the in-flight messages of hook runs that ended without settling (killed); how many
        (emitter/spool_repair.py)."""
        from agentwatch.emitter import spool_repair

        return spool_repair.recover(self)

    def resume_capture(self, stdin: int) -> None:
        """Add what `stdin` holds now to this process's capture, without waiting; mark it complete if
        its end was reached (emitter/spool_repair.py)."""
        from agentwatch.emitter import spool_repair

        spool_repair.resume_capture(self, stdin)

    def queue_own_capture(self) -> int:
        """Queue this process's own capture now, its messages unmade (emitter/spool_repair.py)."""
        from agentwatch.emitter import spool_repair

        return spool_repair.queue_own_capture(self)

    def unreadable(self) -> list[str]:
        """The names of the captures kept as unreadable."""
        try:
            return [n for n in posix.listdir(self.inflight) if n.endswith(UNREADABLE_SUFFIX)]
        except FileNotFoundError:
            return []

    def prune_unreadable(self, now: float | None = None) -> int:
        """Remove the unreadable captures beyond the newest UNREADABLE_KEEP or older than
        UNREADABLE_MAX_AGE_S; how many (emitter/spool_repair.py)."""
        from agentwatch.emitter import spool_repair

        return spool_repair.prune_unreadable(self, now)

    # -- events a full disk kept out ---------------------------------------------------------

    def reserve(self) -> None:
        """Make the record of lost events (see note_lost) while the disk has room; never raises."""
        try:
            fd = posix.open(self._lost_path, posix.O_WRONLY | posix.O_CREAT | posix.O_EXCL, 0o600)
        except OSError:  # made already (or no room: made another time)
            return
        try:
            _write_all(fd, lost_record(0, 0, 0.0))
        except OSError:
            self.release(self._lost_path)  # a record cut short would be overwritten with no block
        finally:
            posix.close(fd)

    def lost(self) -> tuple[int, int, float]:
        """(messages a full disk kept from the spool, how many of them were reported, when the
        last was)."""
        try:
            fd = posix.open(self._lost_path, posix.O_RDONLY)
        except OSError:
            return 0, 0, 0.0
        try:
            return parse_lost(posix.pread(fd, LOST_WIDTH, 0))
        except OSError:
            return 0, 0, 0.0
        finally:
            posix.close(fd)

    def note_lost(self, count: int = 0, reported: bool = False) -> None:
        """Count `count` messages the disk had no room for (or, `reported`, mark every one counted
        as reported), in place; never raises (emitter/spool_repair.py)."""
        from agentwatch.emitter import spool_repair

        spool_repair.note_lost(self, count, reported)

    # -- appending (the hook, bus down) ------------------------------------------------------

    def append(self, messages: list[Message]) -> bool:
        """Append `messages` as one write; False when the spool is full and they were not kept."""
        return self._append_raw(lines(messages))

    def _append_raw(self, data: bytes) -> bool:
        try:
            fd = posix.open(self.path, posix.O_RDWR | posix.O_APPEND | posix.O_CREAT, 0o600)
        except FileNotFoundError:
            _makedirs(self.directory)
            fd = posix.open(self.path, posix.O_RDWR | posix.O_APPEND | posix.O_CREAT, 0o600)
        try:
            posix.lockf(fd, posix.F_LOCK, 0)
            size = posix.fstat(fd).st_size
            if size + len(data) > self.max_bytes:
                return False
            if size and posix.pread(fd, 1, size - 1) != b"\n":
                data = b"\n" + data  # a writer killed mid-line left a partial one: never glue to it
            try:
                _write_all(fd, data)
            except BaseException:  # a disk that filled part-way (or a stop): none of it stays
                try:  # noqa: SIM105 - contextlib would cost the hook an import
                    posix.ftruncate(fd, size)
                except OSError:
                    pass
                raise
            if not size:  # the first line after the queue was empty: the lost-events record
                self.reserve()
            return True
        finally:
            posix.close(fd)  # releases the lock

    def is_empty(self) -> bool:
        """Cheap check for the hook's fast path: a stat, and a look at the in-flight files."""
        return self.pending_bytes() == 0 and not self._orphans()

    def pending_bytes(self) -> int:
        """Bytes queued and not yet sent."""
        try:
            return max(0, posix.stat(self.path).st_size - self._read_pos())
        except FileNotFoundError:
            return 0

    def _orphans(self) -> bool:
        """In-flight files other than this process's own (and the unreadable ones kept to be seen:
        no flush takes them, so none is tried for them)."""
        try:
            mine = f"{posix.getpid()}."
            return any(
                not name.startswith((mine, ".")) and not name.endswith(UNREADABLE_SUFFIX)
                for name in posix.listdir(self.inflight)
            )
        except FileNotFoundError:
            return False

    # -- position ----------------------------------------------------------------------------

    def _read_pos(self) -> int:
        try:
            with open(self._pos_path, "rb") as f:
                return int(f.read().strip() or 0)
        except (FileNotFoundError, ValueError):
            return 0

    def _write_pos(self, pos: int) -> None:
        """Overwrite the position in place, at a fixed width: it needs no new block of the disk,
        so a full disk never stops a flush from committing (and the flush that empties the queue
        is what frees the disk). Only a missing file is made, whole, then renamed."""
        data = str(pos).encode().ljust(POS_WIDTH)
        try:
            fd = posix.open(self._pos_path, posix.O_WRONLY)
        except FileNotFoundError:
            fd = -1
        if fd >= 0:
            try:
                if posix.fstat(fd).st_size == POS_WIDTH:
                    posix.pwrite(fd, data, 0)
                    return
            finally:
                posix.close(fd)
        tmp = f"{self._pos_path}.{posix.getpid()}"
        try:
            fd = posix.open(tmp, posix.O_WRONLY | posix.O_CREAT | posix.O_TRUNC, 0o600)
            try:
                _write_all(fd, data)
            finally:
                posix.close(fd)
            posix.replace(tmp, self._pos_path)
        except BaseException:
            self.release(tmp)
            raise

    # -- reading -----------------------------------------------------------------------------

    @staticmethod
    def _parse(chunk: bytes) -> tuple[list[Message], int]:
        messages: list[Message] = []
        malformed = 0
        for line in chunk.split(b"\n"):
            if not line:
                continue
            at = line.rfind(BODY_START)
            if at > 0 and (
                line.find(BODY_START) != at
                or line.count(b" ", 0, at) != 1
                or line.count(b"genie.", 0, at) != 1
            ):
                # Maybe a line glued to a partial one (a writer of an earlier version, cut short
                # by a full disk, and the next append after it): the whole message at its end is
                # sent, the partial one before it counts as damaged.
                from agentwatch.emitter.spool_repair import whole_head

                head = whole_head(line[:at], line[at + 1 : at + 256])
                if head is None or len(head) != at:
                    malformed += 1
                if head is None:
                    continue
                parts = [*head.split(b" "), line[at + 1 :]]
            else:
                parts = line.split(b" ", 2)
            if len(parts) != 3 or not parts[0].startswith(b"genie.") or not parts[2].startswith(b"{"):
                malformed += 1
                continue
            messages.append((parts[0].decode(), parts[1].decode(), parts[2]))
        return messages, malformed

    def _chunks(self, fd: int, pos: int, size: int) -> tuple[bytes, int]:
        """The complete lines from `pos` (at least one if there is one), and where they end."""
        want = CHUNK_BYTES
        while True:
            data = posix.pread(fd, min(want, size - pos), pos)
            end = data.rfind(b"\n")
            if end >= 0:
                return data[: end + 1], pos + end + 1
            if pos + len(data) >= size or not data:
                return b"", pos  # a line still being written, or nothing
            want *= 2

    def status(self) -> SpoolStatus:
        """What the spool holds, for `agentwatch spool status` and `doctor` (emitter/spool_repair.py)."""
        from agentwatch.emitter import spool_repair

        return spool_repair.status(self)

    # -- flushing ----------------------------------------------------------------------------

    def flush(
        self,
        send: Callable[[list[Message]], None],
        deadline: float,
        fit: Callable[[bytes], bytes] | None = None,
        wait_for_lock: bool = False,
    ) -> tuple[int, int]:
        """Publish spooled messages oldest first through `send` until done or `deadline`.

        `send` raises on failure; what it confirmed stays committed. `fit` may rewrite a body
        that no longer fits the server. Returns (messages sent, malformed lines skipped).
        """
        self.recover()
        try:
            lock = posix.open(self._lock_path, posix.O_RDWR | posix.O_CREAT, 0o600)
        except FileNotFoundError:
            return 0, 0
        sent = skipped = 0
        try:
            while True:
                try:
                    posix.lockf(lock, posix.F_TLOCK, 0)
                    break
                except (BlockingIOError, PermissionError):  # EAGAIN or EACCES: another flusher
                    if not wait_for_lock or time.monotonic() >= deadline:
                        return 0, 0
                    time.sleep(0.02)
            try:
                fd = posix.open(self.path, posix.O_RDWR)
            except FileNotFoundError:
                return 0, 0
            try:
                # The size under the append lock, and nothing read past it: an append the disk
                # stops part-way is cut back before the lock goes, so no byte of it is sent (and
                # no position is committed inside what is cut back, then written over).
                posix.lockf(fd, posix.F_LOCK, 0)
                size = posix.fstat(fd).st_size
                posix.lockf(fd, posix.F_ULOCK, 0)
                pos = self._read_pos()
                if pos > size:
                    pos = 0
                while pos < size and time.monotonic() < deadline:
                    chunk, pos_next = self._chunks(fd, pos, size)
                    if not chunk:
                        break
                    messages, malformed = self._parse(chunk)
                    skipped += malformed
                    left = size - pos_next  # what the spool holds once these are confirmed
                    messages = [(s, i, restamp(b, left)) for s, i, b in messages]
                    if fit is not None:
                        messages = [(s, i, fit(b)) for s, i, b in messages]
                    if messages:
                        send(messages)
                    sent += len(messages)
                    pos = pos_next
                    self._write_pos(pos)
                if pos >= size:
                    posix.lockf(fd, posix.F_LOCK, 0)  # the append lock (from offset 0: the whole file)
                    if posix.fstat(fd).st_size == pos:
                        posix.ftruncate(fd, 0)
                        self._write_pos(0)
                        self.reserve()  # the disk has room again, if it was full
            finally:
                posix.close(fd)
        finally:
            posix.close(lock)
        return sent, skipped


SPOOL_KEY = b'"spool_bytes":'


def restamp(body: bytes, left: int) -> bytes:
    """An envelope's `spool_bytes` made `left`: the field says what the spool held, unsent, when
    the event was published, and a spooled event is published when it is flushed. The stored
    coverage and /metrics take the last to arrive, so a flushed spool reads 0 at once. (The
    first `"spool_bytes":` of a body is the envelope's own: a quote inside a string is escaped.)"""
    at = body.find(SPOOL_KEY)
    if at < 0:
        return body
    start = end = at + len(SPOOL_KEY)
    while end < len(body) and 48 <= body[end] <= 57:  # the digits of the old figure
        end += 1
    return body if end == start else b"%b%d%b" % (body[:start], left, body[end:])


def _write_all(fd: int, data: bytes, at: int = -1) -> None:
    """Write `data` to `fd` (at its position, or at offset `at`), however many calls it takes."""
    view = memoryview(data)
    while view:
        written = posix.write(fd, view) if at < 0 else posix.pwrite(fd, view, at)
        view = view[written:]
        at = at + written if at >= 0 else at


def _makedirs(path: str) -> None:
    """Only where a directory is missing (a data dir's first run): os is loaded then."""
    import os

    os.makedirs(path, mode=0o700, exist_ok=True)
