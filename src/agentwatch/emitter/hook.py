"""`agentwatch-emit`: the command Claude Code runs on every hook event.

Its contract with Claude Code: never a byte on stdout, exit status 0 whatever arrives and
whatever state the bus is in, one hard wall-clock deadline for the whole run, and no waiting on a
server that does not answer. What it could not send goes to the spool; what went wrong inside it
goes to a bounded crash log. AGENTWATCH_DISABLED=1 makes it an immediate no-op.

Configuration (environment): AGENTWATCH_NATS_URL (else GENIE_NATS_URL, else
nats://127.0.0.1:4222), AGENTWATCH_DEADLINE_MS (default 400), AGENTWATCH_DATA_DIR,
AGENTWATCH_SPOOL_MAX_BYTES, AGENTWATCH_NATS_CREDS / AGENTWATCH_NATS_NKEY (nats-py fallback).

Standard library only on the normal path; a test in a fresh interpreter holds it to that. The
`posix` functions rather than `os` (see config.py): Python started as `hooks install` registers
the hook (-I -S) has not loaded `os`, and the hook does not need it.
"""

from __future__ import annotations

import posix
import sys
import time

from agentwatch import config
from agentwatch.contract import DEFAULT_MAX_PAYLOAD, USAGE_EVENTS, encode_envelope, envelopes_from_stdin
from agentwatch.emitter.spool import DEFAULT_MAX_BYTES, Spool
from agentwatch.emitter.wire import bus_memory, remember_bus
from agentwatch.harnesses import GEMINI_CLI

# On the events that close a piece of work (contract.USAGE_EVENTS) the hook reads what is new in
# the agent's transcripts (agentwatch.emitter.usage, imported only then) within this share of its
# deadline; the rest of a long transcript is read next time.
READ_SHARE = 0.25

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Mapping, Sequence
    from types import FrameType
    from typing import Any

    from agentwatch.contract import Tracker

    Message = tuple[str, str, bytes]

# The C module behind `signal`: the `signal` module builds enums at import, which costs the hook
# more than the rest of its start-up together.
signal: Any = __import__("_signal")

# Claude Code sends SIGTERM to hooks still running when a session ends; a closed terminal sends
# SIGHUP. Each makes the hook spool what the bus has not confirmed and exit 0 at once.
STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)
# Share of the deadline after which the hook stops draining the spool and leaves the rest for later.
FLUSH_SHARE = 0.5


class Deadline(BaseException):
    """Raised by the SIGALRM handler when the run's wall-clock budget is spent."""


def _on_alarm(_signum: int, _frame: FrameType | None) -> None:
    raise Deadline


def in_data_dir(environ: Mapping[str, str], name: str) -> str:
    return f"{config.data_dir(environ).rstrip('/')}/{name}"


def crash_log_path(environ: Mapping[str, str]) -> str:
    return in_data_dir(environ, "crash.jsonl")


def log_problem(
    environ: Mapping[str, str], kind: str, message: str, exc: BaseException | None = None
) -> None:
    """Append one JSON line to the bounded crash log; never raises (emitter/mishaps.py)."""
    try:
        from agentwatch.emitter.mishaps import log_problem as log

        log(crash_log_path(environ), kind, message, exc)
    except Exception:  # noqa: S110 - the crash log is the last resort; nothing is left to tell
        pass


def spool_for(environ: Mapping[str, str]) -> Spool:
    max_bytes = config.number(environ, "AGENTWATCH_SPOOL_MAX_BYTES", DEFAULT_MAX_BYTES)
    spool = Spool(in_data_dir(environ, "spool"), max_bytes)
    spool.rebuild = lambda header, raw: _rebuild(header, raw, environ, spool)
    spool.environ = environ
    return spool


def _rebuild(header: bytes, raw: bytes, environ: Mapping[str, str], spool: Spool) -> list[Message]:
    from agentwatch.emitter.mishaps import rebuild

    return rebuild(header, raw, environ, spool, _outgoing)


def _capture_header(environ: Mapping[str, str], host: str) -> bytes:
    """What a later process needs to make this run's messages as this run would have."""
    from agentwatch.jsonfast import dumps

    names = {k: environ[k] for k in ("GENIE_AGENT_NAME", "GENIE_TEAM") if environ.get(k)}
    return dumps({"at": time.time(), "host": host, "env": names, "harness": _run["harness"]}).encode()


def _hostname(environ: Mapping[str, str] | None = None) -> str:
    """AGENTWATCH_HOST, else the machine's name (config.host_name)."""
    return config.host_name(environ)


def refit(max_payload: int) -> Callable[[bytes], bytes]:
    """A body rewriter for spooled messages that no longer fit the server's max_payload."""
    from agentwatch.contract import decode_envelope

    def fit(body: bytes) -> bytes:
        if len(body) + 512 <= max_payload:
            return body
        return encode_envelope(decode_envelope(body), max_payload)

    return fit


class Publisher:
    """Sends through the stdlib wire client, or nats-py when NKEY/creds auth is configured.

    `early`: only begin connecting; `greet()`, before the first publish, waits for the server.
    The hook begins before it makes its messages, so the server accepts and greets meanwhile."""

    def __init__(self, environ: Mapping[str, str], deadline: float, early: bool = False) -> None:
        self.environ = environ
        self.deadline = deadline
        self.max_payload = DEFAULT_MAX_PAYLOAD
        self._conn: Any = None
        self._url = config.nats_url(environ)
        self._nkey = bool(environ.get("AGENTWATCH_NATS_CREDS") or environ.get("AGENTWATCH_NATS_NKEY"))
        self.server = ""
        if not self._nkey:
            from agentwatch.emitter.wire import Connection

            # A plain local URL: the hook's login of the bus `agentwatch up` started, if any.
            self._urls = config.bus_servers(self._url, environ, config.HOOK)
            self._conn = Connection(self._urls[0], deadline, greet=False)
            self.server = f"{self._conn.url.host}:{self._conn.url.port}"
        self._learn()
        if not early:
            self.greet()

    def _learn(self) -> None:
        """What this host learned before about the server: does a stream capture genie.>, and
        did one ever? Where one did, "none does" is not trusted (JetStream is asked again, in the
        same write as the events), and no publish counts as sent without a stream's ack: a
        stream deleted (by hand, a JetStream reset) keeps the events in the spool until one
        captures genie.> again, instead of their going to nothing with the server's PONG."""
        self._known, self._seen = bus_memory(self.environ, self.server) if self.server else (None, False)
        self.seen = self._seen
        self.stream = None if self.seen and self._known is False else self._known

    def greet(self) -> None:
        """Wait until the server answered (the next ones of a cluster's list if it does not)."""
        if self._nkey:
            if self._conn is None:
                from agentwatch.emitter.fallback import FallbackConnection

                self._conn = FallbackConnection(self._url, self.environ, self.deadline)
        elif not self._conn.greeted:
            try:
                self._conn.greet()
            except Exception as exc:
                if len(self._urls) == 1:
                    raise
                from agentwatch.emitter.wire import BusError, connect

                try:
                    self._conn = connect(self._urls[1:], self.deadline)
                except BusError as rest:
                    raise BusError(f"{exc}; {rest}") from None
                self.server = f"{self._conn.url.host}:{self._conn.url.port}"
                self._learn()
        self.max_payload = self._conn.max_payload

    def renew(self, deadline: float) -> None:
        """A new deadline for what follows (a command that publishes batch after batch)."""
        self.deadline = self._conn.deadline = deadline

    def connecting(self) -> bool:
        """Whether the stdlib client began a connection the server has yet to answer (not one
        refused at once, as a loopback port where nothing listens is)."""
        return not self._nkey and self._conn is not None and self._conn.connecting()

    def publish(self, messages: list[Message]) -> None:
        self.greet()
        try:
            learned = self._conn.publish(messages, self.stream, self.seen)
        except BaseException as exc:
            if getattr(exc, "stream_missing", False):  # wire.StreamMissing: one did, none does now
                self.stream = False
            raise
        if learned is not None:
            self.stream = learned
            self.seen = self.seen or learned

    def remember(self) -> None:
        """Keep what this run learned about the bus, when it is news (once)."""
        if (
            self.server
            and self.stream is not None
            and (self.stream != self._known or self.seen != self._seen)
        ):
            remember_bus(self.environ, self.server, self.stream, self.seen)
            self._known, self._seen = self.stream, self.seen

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
        self.remember()


# --- one run -----------------------------------------------------------------------------------


class Interrupted(BaseException):
    """Raised by the SIGTERM/SIGINT/SIGHUP handler: spool what is not confirmed, and leave."""


# Where the run is, for the stop handler. Until the messages are on disk (stdin read, envelopes
# made, the in-flight file written: a few milliseconds) a stop is only noted, and acted on as
# soon as they are safe; while the bus is waited on, a stop ends the wait at once.
PREPARING, SENDING = "preparing", "sending"
# "detach": whether the run may leave the wait for the bus to a child (_detach): only the hook's
# own process (main), never a process that calls run_hook and goes on.
# began: when the run's script started (time.monotonic), for its event's `hook_ms`.
_run: dict[str, Any] = {"phase": PREPARING, "stop": False, "harness": "", "detach": False, "began": 0.0}


def _on_stop(_signum: int, _frame: FrameType | None) -> None:
    _run["stop"] = True
    if _run["phase"] == SENDING:
        _quiet()
        raise Interrupted


def _quiet() -> None:
    """No more alarms or stop signals: the run is ending and must finish its spooling."""
    signal.setitimer(signal.ITIMER_REAL, 0)
    for sig in STOP_SIGNALS:
        signal.signal(sig, signal.SIG_IGN)


def _no_offsets(keep: bool = True) -> None:
    """Nothing was read from a transcript: nothing to remember."""


def _tracker(environ: Mapping[str, str]) -> Tracker:
    """The hook's memory of a Gemini CLI session (emitter/nesting.py, loaded for Gemini's events
    only): every other harness's payload says who and which call itself."""

    def track(payload: dict[str, Any], harness: str) -> tuple[Mapping[str, str] | None, Sequence[Any]]:
        if harness != GEMINI_CLI:
            return None, ()
        from agentwatch.emitter.nesting import tracked

        return tracked(config.data_dir(environ), payload)

    return track


def _outgoing(
    raw: bytes,
    environ: Mapping[str, str],
    spool: Spool,
    read_until: float | None = None,
    *,
    host: str = "",
    now: float | None = None,
    stopped_reading: bool = False,
    own: bool = False,
    harness: str | None = None,
) -> tuple[list[Message], Callable[[bool], None]]:
    """The invocation's messages, encoded, numbered in their session, with the spool's backlog;
    and, for an event that closes a piece of work, the usage read from its transcripts until
    `read_until` (None: none read) with the function that remembers how far it read (or, given
    False, how far it had read before). `host` and `now` are the run's (a rebuilt run's own);
    `stopped_reading`: the run was stopped before it had read its stdin to the end. `own`: the
    run's own event, whose number is taken once per run (made again after a deadline, it keeps
    the number it took, so the session's numbers have no gap). `harness`: who ran the hook (None:
    this run's; '': told by the payload). A Gemini CLI session's events go through the hook's
    memory of it (emitter/nesting.py), but for a run made again from the spool: its place in the
    session's order is gone."""
    if harness is None:
        harness = _run["harness"]
    outgoing = envelopes_from_stdin(
        raw,
        environ,
        host=host or _hostname(environ),
        now=now,
        cut=stopped_reading,
        harness=harness,
        track=_tracker(environ) if own else None,
    )
    event = outgoing[0][1]
    if event.get("session_id"):
        from agentwatch.emitter import sequence

        taken = _run.get("seq") if own else None
        if isinstance(taken, tuple) and taken[0] == event["session_id"]:
            event["seq"] = taken[1]
        else:
            # The deadline and the stop signals wait while a number is taken and noted: a number
            # taken and not noted would be taken again, and the session's numbers would have a gap.
            was = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGALRM, *STOP_SIGNALS})
            try:
                event["seq"] = sequence.next_seq(config.data_dir(environ), event["session_id"])
                if own:
                    _run["seq"] = (event["session_id"], event["seq"])
            except OSError:  # a full disk: the event goes unnumbered rather than not at all
                pass
            finally:
                signal.pthread_sigmask(signal.SIG_SETMASK, was)
        if event.get("event") == "SessionEnd":  # a good moment to forget long-gone sessions' counters
            sequence.prune(config.data_dir(environ))
            sequence.remove_untouched(in_data_dir(environ, "who"), sequence.PRUNE_AFTER_S)
    event["spool_bytes"] = spool.pending_bytes()
    commit: Callable[[bool], None] = _no_offsets
    if read_until is not None and event.get("event") in USAGE_EVENTS:
        try:
            from agentwatch.emitter.usage import hook_usage

            usage, commit = hook_usage(event, environ, read_until)
            outgoing.extend(usage)
        except Exception as exc:  # a transcript it cannot read must not hold the event back
            log_problem(environ, "usage", "reading the transcripts failed; the event goes alone", exc)
    from agentwatch.emitter.attribution import mark

    mark(outgoing, environ, config.data_dir(environ), log_problem)
    if own and _run["began"]:
        # The run's time from its script's first line to its messages made (usage read and marked):
        # what the hook adds to the agent's wait before it sends (the interpreter's start not in it).
        event["hook_ms"] = round((time.monotonic() - _run["began"]) * 1000, 2)
    try:
        return [(s, e["id"], encode_envelope(e, DEFAULT_MAX_PAYLOAD)) for s, e in outgoing], commit
    except RecursionError:  # read, but nested too deep to write back: each such event says so
        from agentwatch.emitter.mishaps import too_deep

        return too_deep(outgoing, raw, environ), commit


def run(
    raw: bytes,
    environ: Mapping[str, str],
    started: float,
    deadline_s: float,
    spool: Spool,
    held: str,
    host: str,
) -> str:
    """Publish one hook invocation; spool it if the bus does not confirm. Returns what happened.

    `held`: the in-flight file holding the run's stdin ('' when it could not be written). The
    messages replace it before anything is sent, so even SIGKILL loses nothing.
    """
    deadline = started + deadline_s
    publisher = None
    encoded: list[Message] = []
    remember: Callable[[bool], None] = _no_offsets
    try:
        try:  # noqa: SIM105 - contextlib would cost the hook an import
            publisher = Publisher(environ, deadline, early=True)  # the server greets meanwhile
        except ValueError:  # a URL it cannot read: raised again below, once the messages are safe
            pass
        encoded, remember = _outgoing(
            raw, environ, spool, started + deadline_s * READ_SHARE, host=host, own=True
        )
        try:  # noqa: SIM105 - contextlib would cost the hook an import
            held = spool.hold(encoded, held)
        except OSError:  # a full disk: sent from memory; its capture (if any) still holds stdin
            pass
        remember(True)  # the usage read is on disk: the next run reads on from here
        _run["phase"] = SENDING
        if _run["stop"]:  # asked to stop while the messages were made: they are safe now
            _quiet()
            raise Interrupted
        publisher = publisher or Publisher(environ, deadline)
        if publisher.connecting() and held:  # the agent does not wait for the server: a child does
            held = _detach(spool, held, deadline)
        publisher.greet()
        if publisher.max_payload < DEFAULT_MAX_PAYLOAD:
            encoded = [(s, i, refit(publisher.max_payload)(b)) for s, i, b in encoded]
        publisher.publish(encoded)
    except (Exception, Deadline, Interrupted) as exc:
        _quiet()
        if publisher is not None:
            publisher.close()
        return _spool(environ, spool, raw, encoded, held, exc, remember)
    publisher.remember()  # before the in-flight file goes: a run seen done has kept what it learned
    spool.release(held)
    # The bus answered: drain what earlier runs could not send, within a share of the budget.
    try:
        if not spool.is_empty():
            _report_lost(environ, spool)
            flush_until = min(deadline - 0.05, started + deadline_s * FLUSH_SHARE)
            if time.monotonic() < flush_until:
                _sent, skipped = spool.flush(publisher.publish, flush_until, refit(publisher.max_payload))
                if skipped:
                    log_problem(environ, "spool_malformed", f"skipped {skipped} malformed spool line(s)")
    finally:
        publisher.close()
    return "published"


def _detach(spool: Spool, held: str, deadline: float) -> str:
    """The messages are on disk (`held`), the server has yet to answer: the agent waits for this
    process, not for the bus. A child takes the run over (its in-flight file, the server's
    greeting, the send, the stream's acks, the spool if they do not come, the deadline) and this
    process leaves with status 0 at once. Where fork fails the run goes on as before. The
    in-flight file the child holds now."""
    if not _run["detach"]:
        return held
    _run["phase"] = PREPARING  # a stop is noted, not acted on, meanwhile
    # No deadline in this process from the fork to its exit: it would spool what the child sends.
    was = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGALRM})
    child, held = spool.fork_over(held)
    if child > 0:
        posix._exit(0)
    signal.pthread_sigmask(signal.SIG_SETMASK, was)
    if child == 0:
        quiet = posix.open("/dev/null", posix.O_RDWR)  # the agent reads the hook's stdout to its end
        for fd in (0, 1, 2):
            posix.dup2(quiet, fd)
        posix.close(quiet)
        signal.setitimer(signal.ITIMER_REAL, max(deadline - time.monotonic(), 0.001))  # not inherited
    _run["phase"] = SENDING
    if _run["stop"]:
        _quiet()
        raise Interrupted
    return held


def _spool(
    environ: Mapping[str, str],
    spool: Spool,
    raw: bytes,
    encoded: list[Message],
    held: str,
    exc: BaseException,
    remember: Callable[[bool], None] = _no_offsets,
) -> str:
    """Keep what the bus did not confirm for a later run; what happened."""
    if not encoded:  # stopped before the messages were made: make them now, signals are off
        encoded, _ = _outgoing(raw, environ, spool, own=True)  # the transcripts wait for the next run
    full: OSError | None = None
    try:
        kept = spool.settle(held, encoded)
    except OSError as refused:  # the disk has no room for them
        kept, full = False, refused
    if not kept:  # the disk or the spool is full (emitter/mishaps.py)
        remember(False)  # the usage read may not be in what stays: read it again next time
        from agentwatch.emitter.mishaps import not_spooled

        return not_spooled(crash_log_path(environ), spool, encoded, held, full)
    _report_lost(environ, spool)
    if isinstance(exc, Deadline):
        log_problem(environ, "deadline", "the bus did not confirm before the deadline; spooled")
    elif isinstance(exc, Interrupted):
        return "interrupted"
    elif not _is_unreachable(exc):
        log_problem(environ, "bus_error", str(exc))
    return "spooled"


def _report_lost(environ: Mapping[str, str], spool: Spool) -> None:
    """Say in the crash log how many messages a full disk kept from the spool since the last
    report (counted in place meanwhile: Spool.note_lost), now that the disk has room."""
    count, reported, last = spool.lost()
    if count > reported:
        from agentwatch.emitter.mishaps import report_lost

        report_lost(crash_log_path(environ), spool, count - reported, last)


def _is_unreachable(exc: BaseException) -> bool:
    """Connection refused or no server: the expected, quiet case of a bus that is down."""
    text = str(exc)
    return "cannot connect" in text or "Connection refused" in text or "cannot resolve" in text


def _read_stdin(environ: Mapping[str, str], spool: Spool, host: str) -> tuple[bytes, str]:
    """Stdin, read straight into the run's in-flight file (see Spool.capture_stdin), and that file;
    read into memory alone when the file cannot be written (the run then spools as it can)."""
    try:
        fd = sys.stdin.fileno() if sys.stdin is not None else 0
    except (OSError, ValueError):
        fd = 0
    try:
        return spool.capture_stdin(fd, _capture_header(environ, host))
    except OSError:  # the spool cannot be written: the run finds out again, and logs it, when it spools
        from agentwatch.emitter.mishaps import read_all

        return read_all(fd), ""


def _names_as_text(environ: Mapping[str, str]) -> Mapping[str, str]:
    """`environ` with GENIE_AGENT_NAME and GENIE_TEAM as text: bytes of theirs that are not UTF-8
    (which the environment holds as lone surrogates, as os.environ decodes them) become U+FFFD
    (emitter/mishaps.py). Kept as they came, they could not be written as UTF-8, and the run lost
    its event."""
    for name in ("GENIE_AGENT_NAME", "GENIE_TEAM"):
        try:
            environ.get(name, "").encode("utf-8")
        except UnicodeEncodeError:  # a lone surrogate: bytes that are not UTF-8
            from agentwatch.emitter.mishaps import names_as_text

            return names_as_text(environ)
    return environ


def harness_argument(argv: Sequence[str]) -> str:
    """The harness the registered command names (`agentwatch-emit --harness codex`); '' when it
    names none or one this version does not know (the payload tells then)."""
    from agentwatch.harnesses import harness_named

    if len(argv) >= 3 and argv[1] == "--harness":
        return harness_named(argv[2])
    if len(argv) >= 2 and argv[1].startswith("--harness="):
        return harness_named(argv[1].partition("=")[2])
    return ""


def run_hook(
    environ: Mapping[str, str] | None = None,
    stopped: Sequence[int] = (),
    argv: Sequence[str] = (),
    began: float = 0.0,
) -> str:
    """The whole hook run, without the final exit: read stdin, publish or spool, log problems.
    `began`: when its script started (time.monotonic; 0: now)."""
    started = time.monotonic()
    _run["began"] = began or started
    _run["harness"] = harness_argument(argv)
    env = _names_as_text(config.environ_now() if environ is None else environ)
    if config.flag(env, "AGENTWATCH_DISABLED"):
        return "disabled"
    deadline_s = config.number(env, "AGENTWATCH_DEADLINE_MS", config.DEFAULT_DEADLINE_MS) / 1000.0
    previous = signal.signal(signal.SIGALRM, _on_alarm)
    for sig in STOP_SIGNALS:
        signal.signal(sig, _on_stop)
    _run.update(phase=PREPARING, stop=bool(stopped), seq=None)  # stopped: before this module was loaded
    spool, read = None, False
    try:
        signal.setitimer(signal.ITIMER_REAL, deadline_s)
        spool, host = spool_for(env), _hostname(env)
        raw, held = _read_stdin(env, spool, host)
        read = True  # from here on, run() spools what it cannot send, deadline or not
        return run(raw, env, started, deadline_s, spool, held, host)
    except Interrupted:
        return "interrupted"  # while draining the spool: what was not confirmed stays spooled
    except Deadline:
        _quiet()
        log_problem(env, "deadline", f"hook run exceeded its {deadline_s * 1000:.0f} ms deadline")
        from agentwatch.emitter.mishaps import after_deadline

        after_deadline(spool or spool_for(env), read, lambda: _capture_header(env, _hostname(env)))
        return "deadline"
    except Exception as exc:
        signal.setitimer(signal.ITIMER_REAL, 0)
        log_problem(env, "crash", "unexpected error in the hook", exc)
        return "crash"
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def main(stopped: Sequence[int] = (), stale: str = "", began: float = 0.0) -> None:
    """Console entry point: run the hook, then leave at once with status 0, whatever happened.

    `stopped`: stop signals the script received before it could load this module. `stale`: the
    directory of the package whose bundle of modules the script found missing or out of date
    (emitter/bundle.py), written anew once the run is done. `began`: when the script started."""
    # A run that is to write the file of the hook's modules waits for its acks itself, and writes
    # it before it leaves: the next run, started once this one left, then finds it.
    _run["detach"] = not stale
    try:
        run_hook(stopped=stopped, argv=sys.argv, began=began)
    except BaseException:  # noqa: S110 - not even a logging failure may change the agent's run
        pass
    finally:
        if stale:
            _refresh_bundle(stale)
        posix._exit(0)


def _refresh_bundle(home: str) -> None:
    """Write the bundle of the hook's modules for the package in `home`; never raises. The run's
    event is published or spooled by now: no deadline and no stop signal interrupts the write."""
    try:
        _quiet()
        from agentwatch.emitter.bundle import refresh

        refresh(home)
    except BaseException:  # noqa: S110 - without the file the next run imports as before
        pass
