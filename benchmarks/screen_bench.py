"""Hook-to-screen latency: from the moment the installed `agentwatch-emit` is started with an event
of a new agent until the dashboard's roster holds that agent's row and the screen has been
composited after it.

Runs on loopback, in a temporary directory: the bundled nats-server with the GENIE stream, and the
real dashboard (AgentwatchApp with NatsLiveSource, headless, 160x48, as benchmarks/tui_bench.py
runs it, frames encoded as a terminal run would). Every --probe-interval seconds a hook process
is started for a fresh agent (`GENIE_AGENT_NAME=probe-N`, a UserPromptSubmit on stdin); the
latency includes the hook's own start, publish and the stream's acknowledgement wait, the live
feed and the dashboard's frame. Two phases with the same probes: quiet (the reference), then the demo
team's traffic at 2,000 events/s (--rate, pre-encoded and paced as in benchmarks/alert_bench.py).

    .venv/bin/python benchmarks/screen_bench.py [--rate 2000] [--seconds 30]

Exit status: 0 every probe painted, 1 a probe not painted within 10 s, 2 the traffic could not
be published at the rate asked, 3 setup failed.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import nats
import orjson

sys.path.insert(0, str(Path(__file__).resolve().parent))
from agentwatch.bus.live import NatsLiveSource
from traffic import demo_messages, publish_paced
from tui_bench import RATE_TOLERANCE, SIZE, MeasuredApp, _refreshed, bus, p95

UNPAINTED_SECONDS = 10.0


def emit_command() -> str:
    found = shutil.which("agentwatch-emit", path=str(Path(sys.executable).parent)) or shutil.which(
        "agentwatch-emit"
    )
    if found is None:
        raise RuntimeError("agentwatch-emit is not installed next to this interpreter")
    return found


class Probes:
    def __init__(self, app: MeasuredApp, url: str, workdir: Path) -> None:
        self.app, self.url, self.workdir = app, url, workdir
        self.emit = emit_command()
        self.n = 0

    def painted(self, agent: str) -> bool:
        return any(a.name == agent for _, a in getattr(self.app, "_roster_rows", ()))

    async def probe(self) -> float:
        """Seconds from the hook's start to its agent's row on a composited screen (inf: never)."""
        self.n += 1
        agent = f"probe-{self.n}"
        env = {k: v for k, v in os.environ.items() if not k.startswith(("AGENTWATCH_", "GENIE_"))}
        env.update(
            AGENTWATCH_NATS_URL=self.url,
            AGENTWATCH_DATA_DIR=str(self.workdir / "hook"),
            GENIE_AGENT_NAME=agent,
        )
        body = {"hook_event_name": "UserPromptSubmit", "session_id": f"s-{agent}", "prompt": "go"}
        started = time.perf_counter()
        proc = await asyncio.create_subprocess_exec(
            self.emit, stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env
        )
        hook = asyncio.create_task(proc.communicate(orjson.dumps(body)))
        while not self.painted(agent):
            if time.perf_counter() - started > UNPAINTED_SECONDS:
                await hook
                return float("inf")
            await asyncio.sleep(0.002)
        await _refreshed(self.app)
        latency = time.perf_counter() - started
        await hook
        return latency

    async def phase(self, seconds: float, interval: float) -> list[float]:
        out = []
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            out.append(await self.probe())
            await asyncio.sleep(interval)
        return out


def summary(name: str, samples: list[float]) -> str:
    got = [s for s in samples if s != float("inf")]
    lost = len(samples) - len(got)
    if not got:
        return f"{name}: no probe painted"
    return (
        f"{name}: {len(got)} probes, hook-to-screen median {statistics.median(got) * 1000:.0f} ms, "
        f"p95 {p95(got) * 1000:.0f} ms, max {max(got) * 1000:.0f} ms"
        + (f", {lost} never painted" if lost else "")
    )


async def run(args: argparse.Namespace, url: str, workdir: Path) -> int:
    messages = demo_messages(int(args.rate * (args.seconds + 3)))
    app = MeasuredApp(NatsLiveSource(url), None)
    async with app.run_test(size=SIZE) as pilot:
        deadline = time.monotonic() + 30
        while not app.bus_ok:
            if time.monotonic() > deadline:
                print(f"the dashboard did not connect to {url}: {app.bus_text}")
                return 3
            await pilot.pause(0.1)
        probes = Probes(app, url, workdir)
        await probes.probe()  # warm: the first hook run compiles nothing, but fills the page cache
        quiet = await probes.phase(min(args.seconds, 10.0), args.probe_interval)
        nc = await nats.connect(url)
        traffic = asyncio.create_task(publish_paced(nc, messages, args.rate))
        await asyncio.sleep(2.0)
        loaded = await probes.phase(max(1.0, args.seconds - 2.0), args.probe_interval)
        sent, took = await traffic
        await nc.close()
        live_workers = [worker for worker in app.workers if worker.group == "live"]
    for worker in live_workers:
        with contextlib.suppress(Exception):
            await asyncio.wait_for(worker.wait(), 10)
    if sent / took < args.rate * RATE_TOLERANCE:
        print(f"the traffic went out at {sent / took:,.0f}/s, not {args.rate:g}: this run says nothing")
        return 2
    print(f"dashboard {SIZE[0]}x{SIZE[1]}; traffic: {sent:,} demo messages at {sent / took:,.0f}/s")
    print(summary("quiet (reference)", quiet))
    print(summary(f"under {args.rate:g} events/s", loaded))
    ok_q, ok_l = [s for s in quiet if s != float("inf")], [s for s in loaded if s != float("inf")]
    if ok_q and ok_l:
        print(
            f"ratio loaded/quiet: median {statistics.median(ok_l) / statistics.median(ok_q):.2f}x, "
            f"p95 {p95(ok_l) / p95(ok_q):.2f}x"
        )
    return 0 if len(ok_q) == len(quiet) and len(ok_l) == len(loaded) else 1


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="screen_bench.py", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rate", type=float, default=2000.0, help="demo events/s (default %(default)g)")
    parser.add_argument("--seconds", type=float, default=30.0, help="the loaded phase (default %(default)g)")
    parser.add_argument(
        "--probe-interval", type=float, default=0.5, help="seconds between probes (default %(default)g)"
    )
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="screen-bench-") as tmp:
        workdir = Path(tmp)
        try:
            with bus(workdir) as url:
                return asyncio.run(run(args, url, workdir))
        except RuntimeError as exc:
            print(f"setup failed: {exc}", file=sys.stderr)
            return 3


if __name__ == "__main__":
    raise SystemExit(main())
