"""The `agentwatch` command: one entry point for every part a person runs by hand."""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from agentwatch import __version__, config
from agentwatch.contract import event_id_time
from agentwatch.emitter.wire import display_urls


def fail(message: str, code: int = 2) -> int:
    """Say what went wrong and what to do, on stderr; the exit code to return."""
    print(f"agentwatch: {message}", file=sys.stderr)
    return code


def _human_bytes(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} GiB"


def _when(event_id: str) -> str:
    if not event_id:
        return "-"
    ts = event_id_time(event_id)
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(ts)) + f" ({_ago(time.time() - ts)} ago)"


def _ago(seconds: float) -> str:
    if seconds < 90:
        return f"{seconds:.0f}s"
    if seconds < 5400:
        return f"{seconds / 60:.0f}m"
    if seconds < 172800:
        return f"{seconds / 3600:.1f}h"
    return f"{seconds / 86400:.1f}d"


# --- spool ------------------------------------------------------------------------------------


def cmd_spool_status(_args: argparse.Namespace) -> int:
    from agentwatch.emitter.hook import spool_for

    spool = spool_for(os.environ)
    st = spool.status()
    print(f"spool:    {st.path}")
    print(
        f"pending:  {st.count} event message(s), {_human_bytes(st.bytes)} "
        f"(cap {_human_bytes(spool.max_bytes)})"
    )
    if st.count:
        print(f"oldest:   {_when(st.oldest_id)}")
        print(f"newest:   {_when(st.newest_id)}")
    if st.malformed:
        print(f"damaged:  {st.malformed} line(s) that will be skipped")
    return 0


def cmd_spool_flush(args: argparse.Namespace) -> int:
    from agentwatch.emitter.hook import Publisher, refit, spool_for
    from agentwatch.emitter.wire import BusError

    spool = spool_for(os.environ)
    before = spool.status()
    if not before.count:
        print("spool is empty: nothing to send")
        return 0
    url = config.nats_url(os.environ)
    print(f"sending {before.count} spooled message(s) to {display_urls(url)} ...", flush=True)
    total = 0
    started = time.monotonic()
    while True:
        deadline = time.monotonic() + args.timeout
        try:
            publisher = Publisher(os.environ, deadline)
        except (BusError, ValueError) as exc:
            return fail(f"the bus does not answer ({exc}); {before.count - total} message(s) stay spooled")
        try:
            sent, skipped = spool.flush(
                publisher.publish, deadline, refit(publisher.max_payload), wait_for_lock=True
            )
        except BusError as exc:
            return fail(f"sending stopped: {exc}; the rest stays spooled, run this again")
        finally:
            publisher.close()
        total += sent
        if skipped:
            print(f"skipped {skipped} damaged line(s)")
        left = spool.status().count
        print(f"  sent {total}/{before.count}, {left} left", flush=True)
        if not left or not sent:
            break
    print(f"done: {total} message(s) sent in {time.monotonic() - started:.1f}s")
    return 0 if not spool.status().count else 1


# --- doctor -----------------------------------------------------------------------------------


def _emit_path() -> str | None:
    near = Path(sys.executable).parent / "agentwatch-emit"
    return str(near) if near.exists() else shutil.which("agentwatch-emit")


def _median_run(cmd: list[str], stdin: bytes, env: dict[str, str], runs: int) -> float:
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        subprocess.run(
            cmd, input=stdin, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False
        )
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def cmd_doctor(args: argparse.Namespace) -> int:
    from agentwatch.emitter.hook import crash_log_path, spool_for
    from agentwatch.emitter.wire import BusError, connect, parse_urls

    url = config.nats_url(os.environ)
    source = (
        "AGENTWATCH_NATS_URL"
        if os.environ.get("AGENTWATCH_NATS_URL")
        else "GENIE_NATS_URL"
        if os.environ.get("GENIE_NATS_URL")
        else "default"
    )
    print(f"agentwatch {__version__}")
    print(f"data dir:  {config.data_dir()}")
    print(f"bus:       {display_urls(url)}  (from {source})")
    healthy = True
    try:
        t0 = time.perf_counter()
        conn = connect(parse_urls(url), time.monotonic() + args.timeout)
        conn.publish([])
        rtt = (time.perf_counter() - t0) * 1000
        info = conn.info
        conn.close()
        js = "JetStream on" if info.get("jetstream") else "JetStream off"
        print(
            f"           answers: nats-server {info.get('version', '?')}, {js}, "
            f"max_payload {_human_bytes(conn.max_payload)}, connect+ping {rtt:.1f} ms"
        )
    except (BusError, ValueError) as exc:
        healthy = False
        print(f"           does NOT answer: {exc}")
        print("           the hook spools events until it does; start one with `agentwatch up`")
    if config.flag(os.environ, "AGENTWATCH_DISABLED"):
        print("hook:      DISABLED by AGENTWATCH_DISABLED (it exits at once and records nothing)")
    st = spool_for(os.environ).status()
    print(f"spool:     {st.count} message(s), {_human_bytes(st.bytes)} at {st.path}")
    if st.count:
        print(f"           oldest {_when(st.oldest_id)}; send with `agentwatch spool flush`")
    log = Path(crash_log_path(os.environ))
    lines = log.read_text(errors="replace").splitlines() if log.exists() else []
    print(f"crash log: {len(lines)} line(s) at {log}")
    for line in lines[-args.lines :]:
        print(f"           {line[:300]}")
    emit = _emit_path()
    if emit is None:
        print("hook time: agentwatch-emit is not on PATH: install agentwatch in this environment")
        return 1
    sample = (
        b'{"hook_event_name":"AgentwatchDoctor","session_id":"doctor","cwd":"'
        + os.getcwd().encode()
        + b'","note":"timing probe from agentwatch doctor"}'
    )
    import tempfile

    # The probe events are real (agent "agentwatch-doctor"), but a bus that is down must not fill
    # the user's spool with them: the timing runs get a data dir of their own.
    with tempfile.TemporaryDirectory() as scratch:
        env = dict(os.environ, GENIE_AGENT_NAME="agentwatch-doctor", AGENTWATCH_DATA_DIR=scratch)
        bare = _median_run([sys.executable, "-c", "pass"], b"", env, args.runs)
        hook = _median_run([emit], sample, env, args.runs)
    print(
        f"hook time: {hook * 1000:.1f} ms median over {args.runs} runs "
        f"({hook / bare:.2f}x a bare `python -c pass` at {bare * 1000:.1f} ms) - {emit}"
    )
    return 0 if healthy else 1


def cmd_tui(_args: argparse.Namespace) -> int:
    try:
        from agentwatch.tui.app import run
    except ImportError as exc:
        return fail(
            f"the dashboard needs the [tui] extra ({exc.name} is missing): pip install 'agentwatch[tui]'"
        )
    run()
    return 0


# --- entry point ------------------------------------------------------------------------------


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="agentwatch",
        description="Observability for teams of AI coding agents: Claude Code hooks on NATS, in ClickHouse.",
    )
    parser.add_argument("--version", action="version", version=f"agentwatch {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    spool = sub.add_parser("spool", help="show or send the events the hook kept while the bus was down")
    spool_sub = spool.add_subparsers(dest="spool_command", metavar="ACTION", required=True)
    spool_sub.add_parser("status", help="what is waiting in the spool").set_defaults(func=cmd_spool_status)
    flush = spool_sub.add_parser("flush", help="send everything spooled, oldest first")
    flush.add_argument("--timeout", type=float, default=10.0, help="seconds per round (default 10)")
    flush.set_defaults(func=cmd_spool_flush)

    from agentwatch import claude_settings, demo, up

    up.register(sub)
    demo.register(sub)
    claude_settings.register(sub)

    tui = sub.add_parser("tui", help="the live dashboard (also: agentwatch with no command)")
    tui.set_defaults(func=cmd_tui)

    doctor = sub.add_parser("doctor", help="check the hook's bus, spool, crash log and speed")
    doctor.add_argument("--timeout", type=float, default=2.0, help="seconds to wait for the bus (default 2)")
    doctor.add_argument("--runs", type=int, default=7, help="hook runs to time (default 7)")
    doctor.add_argument("--lines", type=int, default=5, help="crash log lines to show (default 5)")
    doctor.set_defaults(func=cmd_doctor)
    return parser


def main(argv: Sequence[str] | None = None) -> None:
    parser = build_parser()
    args = parser.parse_args(argv)
    if getattr(args, "func", None) is None:
        if args.command is None:
            raise SystemExit(cmd_tui(args))
        parser.print_help()
        raise SystemExit(0)
    try:
        code = args.func(args)
    except KeyboardInterrupt:
        code = 130
    raise SystemExit(code)
