"""`agentwatch doctor`: is the hook set up well on this host: its bus, spool, crash log and speed.

The speed probe runs the installed hook against a closed local port and a throwaway data dir, so
it never touches the user's bus, spool or history.
"""

from __future__ import annotations

import argparse
import os
import shlex
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from agentwatch import __version__, config, reach
from agentwatch.cli.errors import usable_data_dir
from agentwatch.cli.spool import when
from agentwatch.format import human_bytes


def emit_path() -> str | None:
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


def _closed_port() -> int:
    """A local port nothing listens on (bound, read, released)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _check_bus(url: str, timeout: float) -> bool:
    from agentwatch.emitter.wire import BusError, connect

    try:
        t0 = time.perf_counter()
        conn = connect(config.bus_servers(url, os.environ, config.HOOK), time.monotonic() + timeout)
        # A PING alone: nothing to acknowledge, so no inbox for acks is subscribed (deploy's store and
        # dashboard users may not subscribe one: the server would log a violation for each probe).
        conn.publish([], stream=False)
        rtt = (time.perf_counter() - t0) * 1000
        info = conn.info
        conn.close()
    except (BusError, ValueError) as exc:
        # The line every command and the dashboard say for the same failure (reach.unreachable).
        print(f"           {reach.unreachable('bus', config.display_urls(url), reach.reason_chain(exc))}")
        print("           the hook spools its events meanwhile and sends them once the bus answers")
        return False
    js = "JetStream on" if info.get("jetstream") else "JetStream off"
    print(
        f"           answers: nats-server {info.get('version', '?')}, {js}, "
        f"max_payload {human_bytes(conn.max_payload)}, connect+ping {rtt:.1f} ms"
    )
    kept = _stream_keeps(url, timeout) if info.get("jetstream") else False
    if kept is False:
        print(f"           WARNING: {NO_STREAM}")
        print("           the hook's events are delivered to whoever listens and then gone, never spooled:")
        print("           run `agentwatch up` here (it makes the GENIE stream), or `agentwatch store`")
    elif kept is None:
        print("           could not ask JetStream which stream keeps genie.> (this login may not)")
    return kept is not False


NO_STREAM = "no stream keeps genie.> on this bus"


def _stream_keeps(url: str, timeout: float) -> bool | None:
    """Whether a JetStream stream captures the hook's subjects (JetStream's STREAM.NAMES, asked
    with the hook's login); None when it could not be asked."""
    try:
        import asyncio

        from agentwatch.bus.streams import stream_captures
    except ImportError:
        return None
    from agentwatch.emitter.wire import ACK_PREFIX

    opts = config.nats_options(url, os.environ, name="agentwatch-doctor", role=config.HOOK)
    try:
        return asyncio.run(stream_captures(opts, ACK_PREFIX, "genie.tool.doctor.call", timeout))
    except Exception:
        return None


def _time_hook(emit: str, runs: int) -> None:
    from agentwatch.emitter.settings import hook_command

    sample = b'{"hook_event_name":"Notification","session_id":"agentwatch-doctor","message":"timing probe"}'
    with tempfile.TemporaryDirectory() as scratch:
        env = dict(
            os.environ,
            AGENTWATCH_DATA_DIR=scratch,
            AGENTWATCH_NATS_URL=f"nats://127.0.0.1:{_closed_port()}",
            GENIE_NATS_URL="",
        )
        # Both as Claude Code starts a hook command: by a shell; the hook as `hooks install` registers it.
        bare = _median_run(["/bin/sh", "-c", f"exec {shlex.quote(sys.executable)} -c pass"], b"", env, runs)
        hook = _median_run(["/bin/sh", "-c", hook_command(os.path.abspath(emit))], sample, env, runs)
    print(
        f"hook time: {hook * 1000:.1f} ms median over {runs} runs "
        f"({hook / bare:.2f}x a bare `python -c pass` at {bare * 1000:.1f} ms) - {emit}"
    )
    print("           measured with the bus down (a closed local port) and a throwaway data dir:")
    print("           nothing reached your bus, spool or history")


def cmd_doctor(args: argparse.Namespace) -> int:
    from agentwatch.emitter.hook import crash_log_path, spool_for

    url = config.nats_url(os.environ)
    print(f"agentwatch {__version__}")
    print(f"data dir:  {usable_data_dir(os.environ)}")
    print(f"bus:       {config.display_urls(url)}  (from {config.nats_url_source()})")
    healthy = _check_bus(url, args.timeout)
    if config.flag(os.environ, "AGENTWATCH_DISABLED"):
        print("hook:      DISABLED by AGENTWATCH_DISABLED (it exits at once and records nothing)")
    st = spool_for(os.environ).status()
    print(f"spool:     {st.count} message(s), {human_bytes(st.bytes)} at {st.path}")
    if st.count:
        print(f"           oldest {when(st.oldest_id)}; send with `agentwatch spool flush`")
    if st.lost:
        print(f"           {st.lost} message(s) lost to a full disk (`agentwatch spool status`)")
    if st.unreadable:
        where = st.path.rpartition("/")[0]
        print(f"           {st.unreadable} unreadable hook input(s), kept redacted in {where}/inflight")
    log = Path(crash_log_path(os.environ))
    lines = log.read_text(errors="replace").splitlines() if log.exists() else []
    print(f"crash log: {len(lines)} line(s) at {log}")
    for line in lines[-args.lines :]:
        print(f"           {line[:300]}")
    emit = emit_path()
    if emit is None:
        print("hook time: agentwatch-emit is not on PATH: install agentwatch in this environment")
        return 1
    _time_hook(emit, args.runs)
    return 0 if healthy else 1


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    doctor = sub.add_parser(
        "doctor",
        help="check the hook's bus, spool, crash log and speed",
        description="Check this host's hook: which bus it uses and whether it answers, the spool, the "
        "crash log, and how long a hook run takes (measured without touching your bus).",
    )
    doctor.add_argument("--timeout", type=float, default=2.0, help="seconds to wait for the bus (default 2)")
    doctor.add_argument("--runs", type=int, default=7, help="hook runs to time (default 7)")
    doctor.add_argument("--lines", type=int, default=5, help="crash log lines to show (default 5)")
    doctor.set_defaults(func=cmd_doctor)
