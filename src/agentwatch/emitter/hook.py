"""`agentwatch-emit`: the command Claude Code runs on every hook event.

Its contract with Claude Code: never a byte on stdout, exit status 0 whatever arrives and
whatever state the bus is in, one hard wall-clock deadline for the whole run, and no waiting on a
server that does not answer. What it could not send goes to the spool; what went wrong inside it
goes to a bounded crash log. AGENTWATCH_DISABLED=1 makes it an immediate no-op.

Configuration (environment): AGENTWATCH_NATS_URL (else GENIE_NATS_URL, else
nats://127.0.0.1:4222), AGENTWATCH_DEADLINE_MS (default 400), AGENTWATCH_DATA_DIR,
AGENTWATCH_SPOOL_MAX_BYTES, AGENTWATCH_NATS_CREDS / AGENTWATCH_NATS_NKEY (nats-py fallback).

Standard library only on the normal path; a test in a fresh interpreter holds it to that.
"""

from __future__ import annotations

import os
import sys
import time

from agentwatch import config
from agentwatch.contract import DEFAULT_MAX_PAYLOAD, encode_envelope, envelopes_from_stdin
from agentwatch.emitter.spool import DEFAULT_MAX_BYTES, Spool

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Mapping
    from types import FrameType
    from typing import Any

    Message = tuple[str, str, bytes]

# The C module behind `signal`: the `signal` module builds enums at import, which costs the hook
# more than the rest of its start-up together.
signal: Any = __import__("_signal")

CRASH_LOG_MAX_BYTES = 256 * 1024
# Share of the deadline after which the hook stops draining the spool and leaves the rest for later.
FLUSH_SHARE = 0.5


class Deadline(BaseException):
    """Raised by the SIGALRM handler when the run's wall-clock budget is spent."""


def _on_alarm(_signum: int, _frame: FrameType | None) -> None:
    raise Deadline


def crash_log_path(environ: Mapping[str, str]) -> str:
    return os.path.join(config.data_dir(environ), "crash.jsonl")


def log_problem(
    environ: Mapping[str, str], kind: str, message: str, exc: BaseException | None = None
) -> None:
    """Append one JSON line to the bounded crash log; never raises."""
    try:
        from agentwatch.jsonfast import dumps

        record: dict[str, Any] = {
            "ts": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "pid": os.getpid(),
            "kind": kind,
            "message": message[:2000],
        }
        if exc is not None:
            import traceback

            record["error"] = f"{type(exc).__name__}: {exc}"[:2000]
            record["where"] = (
                traceback.format_exception(exc)[-2:][0].strip()[:1000] if exc.__traceback__ else ""
            )
        path = crash_log_path(environ)
        config.ensure_dir(os.path.dirname(path))
        try:
            if os.stat(path).st_size > CRASH_LOG_MAX_BYTES:
                os.replace(path, path + ".1")
        except FileNotFoundError:
            pass
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        try:
            os.write(fd, dumps(record).encode() + b"\n")
        finally:
            os.close(fd)
    except Exception:  # noqa: S110 - the crash log is the last resort; nothing is left to tell
        pass


def spool_for(environ: Mapping[str, str]) -> Spool:
    max_bytes = config.number(environ, "AGENTWATCH_SPOOL_MAX_BYTES", DEFAULT_MAX_BYTES)
    return Spool(os.path.join(config.data_dir(environ), "spool"), max_bytes)


def refit(max_payload: int) -> Callable[[bytes], bytes]:
    """A body rewriter for spooled messages that no longer fit the server's max_payload."""
    from agentwatch.contract import decode_envelope

    def fit(body: bytes) -> bytes:
        if len(body) + 512 <= max_payload:
            return body
        return encode_envelope(decode_envelope(body), max_payload)

    return fit


class Publisher:
    """Sends through the stdlib wire client, or nats-py when NKEY/creds auth is configured."""

    def __init__(self, environ: Mapping[str, str], deadline: float) -> None:
        self.environ = environ
        self.deadline = deadline
        self.max_payload = DEFAULT_MAX_PAYLOAD
        self._conn: Any = None
        url = config.nats_url(environ)
        if environ.get("AGENTWATCH_NATS_CREDS") or environ.get("AGENTWATCH_NATS_NKEY"):
            from agentwatch.emitter.fallback import FallbackConnection

            self._conn = FallbackConnection(url, environ, deadline)
        else:
            from agentwatch.emitter.wire import connect

            self._conn = connect(config.parse_urls(url), deadline)
        self.max_payload = self._conn.max_payload

    def publish(self, messages: list[Message]) -> None:
        self._conn.publish(messages)

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()


def run(raw: bytes, environ: Mapping[str, str], started: float, deadline_s: float) -> str:
    """Publish one hook invocation; spool it if the bus is unreachable. Returns what happened."""
    deadline = started + deadline_s
    import _socket

    outgoing = envelopes_from_stdin(raw, environ, host=_socket.gethostname())
    spool = spool_for(environ)
    publisher = None
    encoded: list[Message] = []
    try:
        publisher = Publisher(environ, deadline)
        encoded = [(s, e["id"], encode_envelope(e, publisher.max_payload)) for s, e in outgoing]
        publisher.publish(encoded)
    except (Exception, Deadline) as exc:
        signal.setitimer(signal.ITIMER_REAL, 0)
        if not encoded or len(encoded) != len(outgoing):
            encoded = [(s, e["id"], encode_envelope(e, DEFAULT_MAX_PAYLOAD)) for s, e in outgoing]
        if not spool.append(encoded):
            log_problem(
                environ, "spool_full", f"spool full ({spool.max_bytes} bytes): dropped {encoded[0][1]}"
            )
            return "dropped"
        if isinstance(exc, Deadline):
            log_problem(environ, "deadline", "the bus did not confirm before the deadline; spooled")
        elif not _is_unreachable(exc):
            log_problem(environ, "bus_error", str(exc))
        if publisher is not None:
            publisher.close()
        return "spooled"
    # The bus answered: drain what earlier runs could not send, within a share of the budget.
    try:
        if not spool.is_empty():
            flush_until = min(deadline - 0.05, started + deadline_s * FLUSH_SHARE)
            if time.monotonic() < flush_until:
                _sent, skipped = spool.flush(publisher.publish, flush_until, refit(publisher.max_payload))
                if skipped:
                    log_problem(environ, "spool_malformed", f"skipped {skipped} malformed spool line(s)")
    finally:
        publisher.close()
    return "published"


def _is_unreachable(exc: BaseException) -> bool:
    """Connection refused or no server: the expected, quiet case of a bus that is down."""
    text = str(exc)
    return "cannot connect" in text or "Connection refused" in text or "cannot resolve" in text


def _read_stdin() -> bytes:
    chunks = []
    try:
        fd = sys.stdin.fileno() if sys.stdin is not None else 0
        while True:
            chunk = os.read(fd, 1 << 20)
            if not chunk:
                break
            chunks.append(chunk)
    except (OSError, ValueError):
        pass
    return b"".join(chunks)


def run_hook(environ: Mapping[str, str] | None = None) -> str:
    """The whole hook run, without the final exit: read stdin, publish or spool, log problems."""
    started = time.monotonic()
    env = os.environ if environ is None else environ
    if config.flag(env, "AGENTWATCH_DISABLED"):
        return "disabled"
    deadline_s = config.number(env, "AGENTWATCH_DEADLINE_MS", config.DEFAULT_DEADLINE_MS) / 1000.0
    previous = signal.signal(signal.SIGALRM, _on_alarm)
    signal.setitimer(signal.ITIMER_REAL, deadline_s)
    try:
        raw = _read_stdin()
        return run(raw, env, started, deadline_s)
    except Deadline:
        log_problem(env, "deadline", f"hook run exceeded its {deadline_s * 1000:.0f} ms deadline")
        return "deadline"
    except Exception as exc:
        signal.setitimer(signal.ITIMER_REAL, 0)
        log_problem(env, "crash", "unexpected error in the hook", exc)
        return "crash"
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def main() -> None:
    """Console entry point: run the hook, then leave at once with status 0, whatever happened."""
    try:
        run_hook()
    except BaseException:  # noqa: S110 - not even a logging failure may change the agent's run
        pass
    finally:
        os._exit(0)
