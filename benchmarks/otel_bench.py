"""The OpenTelemetry exporter under load: does `agentwatch otel-export` keep up with 2,000 events/s,
and what does it cost per event next to the store, in the same run?

Runs everything on loopback, in a temporary directory:

- the bundled nats-server with the GENIE stream;
- `agentwatch store --no-watchdog` (the store alone, embedded ClickHouse) and `agentwatch otel-export`
  (its own durable), each a process of its own, so each one's CPU is read from /proc apart;
- an OTLP/HTTP sink in this process that answers every POST with 200 (what a backend does with
  the spans is not the exporter's cost);
- the demo team's messages, encoded before the run and published at --rate for --seconds
  (benchmarks/traffic.py, as the other live benchmarks).

Keep-up: both durables' backlogs (pending, not yet delivered) are sampled once a second and must
drain within 10 s of the traffic's end. Cost: each process's CPU seconds (user + system, every
thread) over the traffic phase, per event, and the exporter's as a share of the store's.

    .venv/bin/python benchmarks/otel_bench.py [--rate 2000] [--seconds 30]

Exit status: 0 kept up within a third of the store's CPU, 1 fell behind or cost more, 2 the traffic
could not be published at the rate asked, 3 setup failed.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import nats

sys.path.insert(0, str(Path(__file__).resolve().parent))
from agentwatch.bus.streams import STORE_DURABLE, STREAM_NAME
from agentwatch.consumers.otel_export import DURABLE
from traffic import demo_messages, publish_paced
from tui_bench import RATE_TOLERANCE, bus, command, free_port

CPU_SHARE = 1 / 3
DRAIN_S = 10.0


class Sink(BaseHTTPRequestHandler):
    """An OTLP/HTTP endpoint that takes everything."""

    requests = 0

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        Sink.requests += 1
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *_args: Any) -> None:
        pass


@contextlib.contextmanager
def sink() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", free_port()), Sink)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


@contextlib.contextmanager
def service(name: str, args: list[str], env: dict[str, str], workdir: Path) -> Iterator[int]:
    """`agentwatch {args}` until it says it is ready; its pid."""
    log_path = workdir / f"{name}.log"
    with log_path.open("wb") as log:
        proc = subprocess.Popen([command("agentwatch"), *args], env=env, stdout=log, stderr=log)
    try:
        deadline = time.monotonic() + 90
        while "Ctrl-C stops" not in log_path.read_text(errors="replace"):
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"{name} did not start:\n" + log_path.read_text(errors="replace"))
            time.sleep(0.1)
        yield proc.pid
    finally:
        proc.terminate()
        proc.wait(60)


def cpu_seconds(pid: int) -> float:
    """User and system CPU of every thread of `pid` so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def backlogs(js: Any) -> tuple[int, int]:
    store = await js.consumer_info(STREAM_NAME, STORE_DURABLE)
    otel = await js.consumer_info(STREAM_NAME, DURABLE)
    return int(store.num_pending), int(otel.num_pending) + int(otel.num_ack_pending)


async def sample(js: Any, into: list[tuple[int, int]], stop: asyncio.Event) -> None:
    while not stop.is_set():
        with contextlib.suppress(Exception):
            into.append(await backlogs(js))
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), 1.0)


async def drain(js: Any) -> float | None:
    ended = time.perf_counter()
    while time.perf_counter() - ended < DRAIN_S:
        with contextlib.suppress(Exception):
            if await backlogs(js) == (0, 0):
                return time.perf_counter() - ended
        await asyncio.sleep(0.1)
    return None


async def run(args: argparse.Namespace, url: str, pids: dict[str, int]) -> int:
    messages = demo_messages(int(args.rate * args.seconds))
    nc = await nats.connect(url)
    js = nc.jetstream()
    before = {name: cpu_seconds(pid) for name, pid in pids.items()}
    levels: list[tuple[int, int]] = []
    stop = asyncio.Event()
    sampler = asyncio.create_task(sample(js, levels, stop))
    sent, took = await publish_paced(nc, messages, args.rate)
    stop.set()
    await sampler
    drained = await drain(js)
    used = {name: cpu_seconds(pid) - before[name] for name, pid in pids.items()}
    await nc.close()
    if sent / took < args.rate * RATE_TOLERANCE:
        print(f"the traffic went out at {sent / took:,.0f}/s, not {args.rate:g}: this run says nothing")
        return 2
    print(f"traffic: {sent:,} demo messages at {sent / took:,.0f}/s over {took:.1f}s")
    for i, name in enumerate(("store", "otel-export")):
        got = [level[i] for level in levels]
        print(
            f"{name} backlog, sampled each second: median {statistics.median(got) if got else 0:,.0f}, "
            f"max {max(got, default=0):,} messages"
        )
    per = {name: used[name] / sent * 1e6 for name in used}
    print(
        f"CPU over the traffic: store {used['store']:.1f}s ({per['store']:.0f} µs/event), otel-export "
        f"{used['otel-export']:.1f}s ({per['otel-export']:.0f} µs/event); OTLP requests {Sink.requests:,}"
    )
    ratio = used["otel-export"] / max(used["store"], 1e-9)
    print(f"ratio otel-export/store CPU per event: {ratio:.2f} (at most {CPU_SHARE:.2f} asked)")
    print(f"drained {drained:.1f}s after the traffic ended" if drained is not None else "NOT drained")
    ok = drained is not None and ratio <= CPU_SHARE
    print("kept up" if ok else "fell behind or cost too much")
    return 0 if ok else 1


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="otel_bench.py", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rate", type=float, default=2000.0, help="demo events/s (default %(default)g)")
    parser.add_argument("--seconds", type=float, default=30.0, help="the traffic phase (default %(default)g)")
    parser.add_argument("--no-metrics", action="store_true", help="spans only: what the metrics cost")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="otel-bench-") as tmp:
        workdir = Path(tmp)
        try:
            with bus(workdir) as url, sink() as endpoint:
                env = {k: v for k, v in os.environ.items() if not k.startswith(("AGENTWATCH_", "GENIE_"))}
                env.update(AGENTWATCH_NATS_URL=url, AGENTWATCH_DATA_DIR=str(workdir / "store"))
                otel_env = {**env, "AGENTWATCH_OTLP_EXPORT_URL": endpoint}
                if args.no_metrics:
                    otel_env["AGENTWATCH_OTLP_EXPORT_METRICS_S"] = "0"
                with (
                    service("store", ["store", "--no-watchdog"], env, workdir) as store_pid,
                    service("otel-export", ["otel-export"], otel_env, workdir) as otel_pid,
                ):
                    return asyncio.run(run(args, url, {"store": store_pid, "otel-export": otel_pid}))
        except RuntimeError as exc:
            print(f"setup failed: {exc}", file=sys.stderr)
            return 3


if __name__ == "__main__":
    raise SystemExit(main())
