"""The hook's rarer paths, loaded only when a run takes one: the crash log, a run the deadline
caught before its messages were on disk, the messages of a run killed before it made them,
messages a full disk or a full spool did not take, and agent names that are not UTF-8.

Apart from emitter/hook.py so that a run that takes none of them (almost every run) does not load
their code: every hook run unmarshals the code of the modules it imports (emitter/bundle.py).
Standard library only (`posix`, not `os`: see config.py).
"""

from __future__ import annotations

import posix
import sys
import time

from agentwatch import config
from agentwatch.emitter.spoolformat import COMPLETE, READING

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Mapping
    from typing import Any

    from agentwatch.contract import Json
    from agentwatch.emitter.spool import Spool

    Message = tuple[str, str, bytes]

CRASH_LOG_MAX_BYTES = 256 * 1024


def log_problem(path: str, kind: str, message: str, exc: BaseException | None = None) -> None:
    """Append one JSON line to the bounded crash log at `path`; never raises."""
    try:
        from agentwatch.jsonfast import dumps

        record: dict[str, Any] = {
            "ts": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "pid": posix.getpid(),
            "kind": kind,
            "message": message[:2000],
        }
        if exc is not None:
            import traceback

            record["error"] = f"{type(exc).__name__}: {exc}"[:2000]
            record["where"] = (
                traceback.format_exception(exc)[-2:][0].strip()[:1000] if exc.__traceback__ else ""
            )
        config.ensure_dir(path.rpartition("/")[0])
        try:
            if posix.stat(path).st_size > CRASH_LOG_MAX_BYTES:
                posix.replace(path, path + ".1")
        except FileNotFoundError:
            pass
        fd = posix.open(path, posix.O_WRONLY | posix.O_APPEND | posix.O_CREAT, 0o600)
        try:
            size = posix.fstat(fd).st_size
            line = dumps(record).encode() + b"\n"
            try:
                if posix.write(fd, line) != len(line):
                    raise OSError(28, "No space left on device")
            except OSError:  # a full disk: no partial line for the next one to be glued to
                posix.ftruncate(fd, size)
                raise
        finally:
            posix.close(fd)
    except Exception:  # noqa: S110 - the crash log is the last resort; nothing is left to tell
        pass


def rebuild(
    header: bytes,
    raw: bytes,
    environ: Mapping[str, str],
    spool: Spool,
    outgoing: Callable[..., tuple[list[Message], Any]],
) -> list[Message]:
    """The messages of a run killed before it made them, from its capture, by `outgoing` (the
    hook's own maker of a run's messages: hook._outgoing)."""
    from agentwatch.jsonfast import loads

    stopped_reading = header.startswith(READING)
    made = loads(header.lstrip(READING + COMPLETE).decode("utf-8", "replace"))
    names = made.get("env") if isinstance(made.get("env"), dict) else {}
    env = {**{k: v for k, v in environ.items() if k not in ("GENIE_AGENT_NAME", "GENIE_TEAM")}, **names}
    at = float(made.get("at", time.time()))
    host = str(made.get("host", ""))
    harness = str(made.get("harness") or "")
    messages, _ = outgoing(
        raw, env, spool, host=host, now=at, stopped_reading=stopped_reading, harness=harness
    )
    return messages


def too_deep(outgoing: list[tuple[str, Json]], raw: bytes, environ: Mapping[str, str]) -> list[Message]:
    """The messages of a run whose payload the parser read but the encoder cannot write back (a
    few levels short of the parser's limit, with the envelope's own two on top): every envelope
    that cannot be written carries, in place of its data, why, the payload's size and a redacted
    preview of its head, as a payload too deep to read does."""
    from agentwatch.contract import DEFAULT_MAX_PAYLOAD, encode_envelope, unparsed_envelope

    messages = []
    for subject, env in outgoing:
        try:
            body = encode_envelope(env, DEFAULT_MAX_PAYLOAD)
        except RecursionError:
            text = raw.decode("utf-8", "replace")
            _, flat = unparsed_envelope(text, len(raw), "JSON nested too deep to write", environ)
            env["data"], env["truncated"] = flat["data"], True
            env["redacted"] = int(env.get("redacted") or 0) + int(flat.get("redacted") or 0)
            body = encode_envelope(env, DEFAULT_MAX_PAYLOAD)
        messages.append((subject, str(env["id"]), body))
    return messages


def _size(path: str) -> int:
    try:
        return posix.stat(path).st_size
    except OSError:
        return -1


def rescue(spool: Spool, header: Callable[[], bytes]) -> None:
    """The deadline came before the run's messages were on disk (a loaded machine, a slow writer):
    read what stdin holds now without waiting, keep it (after `header`, the line the hook writes
    first), and queue it. A stdin its writer has not finished becomes the event that says it was
    cut."""
    try:
        fd = sys.stdin.fileno() if sys.stdin is not None else 0
        posix.set_blocking(fd, False)
        if spool.head_only:  # the capture keeps the head of a large stdin; the rest was in memory
            pass
        elif _size(f"{spool.inflight}/{posix.getpid()}") > 0:  # its header is written: go on from there
            spool.resume_capture(fd)
        else:
            spool.capture_stdin(fd, header())
    except OSError:  # BlockingIOError included: what was read is in the capture, marked READING
        pass
    spool.queue_own_capture()


def not_spooled(path: str, spool: Spool, encoded: list[Message], held: str, full: OSError | None) -> str:
    """The spool did not take a run's messages `encoded`: the disk is full (`full`), or the spool
    is (None). Logged in the crash log at `path`; what happened."""
    if full is None:
        log_problem(path, "spool_full", f"spool full ({spool.max_bytes} bytes): dropped {encoded[0][1]}")
        return "dropped"
    if held:  # its in-flight file stays, and the next flush that has room queues it
        log_problem(path, "disk_full", f"the spool could not be written ({full}); kept in {held}")
        return "deferred"
    spool.note_lost(len(encoded))  # in place: costs the disk nothing
    log_problem(path, "disk_full", f"the disk is full ({full}): lost {len(encoded)} message(s)")
    return "lost"


def report_lost(path: str, spool: Spool, count: int, last: float) -> None:
    """Say in the crash log at `path` that a full disk kept `count` messages from the spool since
    the last report, the last at `last`, and mark every one counted as reported."""
    at = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(last))
    log_problem(path, "disk_full", f"{count} message(s) lost to a full disk, the last at {at}")
    spool.note_lost(reported=True)


def names_as_text(environ: Mapping[str, str]) -> Mapping[str, str]:
    """`environ` with GENIE_AGENT_NAME and GENIE_TEAM as text, where a lone surrogate shows one
    holds bytes that are not UTF-8 (emitter/hook.py: _names_as_text): those become U+FFFD."""
    fixed = {}
    for name in ("GENIE_AGENT_NAME", "GENIE_TEAM"):
        value = environ.get(name)
        if value and not value.isascii():
            try:
                text = value.encode("utf-8", "surrogateescape").decode("utf-8", "replace")
            except UnicodeEncodeError:  # a surrogate no decoding made: nothing of it is text
                text = value.encode("utf-8", "replace").decode("utf-8")
            if text != value:
                fixed[name] = text
    return {**environ, **fixed} if fixed else environ


def after_deadline(spool: Spool, read: bool, header: Callable[[], bytes]) -> None:
    """Keep what a run the deadline caught had: its stdin, rescued (`read` False: caught while it
    read it), or its capture queued (caught in emitter/hook.py's run before its own handler: the
    capture is whole)."""
    if not read:
        rescue(spool, header)
    else:
        spool.queue_own_capture()


def read_all(fd: int) -> bytes:
    """What `fd` holds until its end, in memory (a run whose capture could not be written)."""
    chunks = []
    try:
        while chunk := posix.read(fd, 1 << 20):
            chunks.append(chunk)
    except OSError:
        pass
    return b"".join(chunks)
