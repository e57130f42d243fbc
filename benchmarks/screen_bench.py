"""Hook-to-screen latency: from the moment the installed `agentwatch-emit` is started with an event
of a new agent until the dashboard's roster holds that agent's row and the screen has been
composited after it.

Runs on loopback, in a temporary directory: the bundled nats-server with the GENIE stream, and the
real dashboard (AgentwatchApp with NatsLiveSource, headless, 160x48, as benchmarks/tui_bench.py
runs it, frames encoded as a terminal run would). Every --probe-interval seconds (on average: each
pause drawn between half and one and a half of it) a hook process is started for a fresh agent
(`GENIE_AGENT_NAME=probe-N`, a UserPromptSubmit on stdin); the latency includes the hook's own
start, publish and the stream's acknowledgement wait, the live feed and the dashboard's frame.
Two phases with the same probes: quiet (the reference), then the demo
team's traffic at 2,000 events/s (--rate), encoded before the phase and published paced by a
process of its own, as tui_bench publishes it: a fleet's hooks publish from their own processes
(their own hosts, mostly), never from the dashboard's event loop. Until this was so, the traffic
went out from the dashboard's own event loop (--traffic-in-process, kept to compare): between two
frames the loop caught up on the publisher's writes before it read the probe's event.

Besides the totals it prints where each probe's time went (the hook until the dashboard had its
event; waiting for the frame that took it in; that repaint; until the screen was composited after
it) and the frames of each phase: how many a second, their repaint, the composite after it, and
the gap to the next.

    .venv/bin/python benchmarks/screen_bench.py [--rate 2000] [--seconds 30]

Exit status: 0 every probe painted, 1 a probe not painted within 10 s, 2 the traffic could not
be published at the rate asked, 3 setup failed.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import itertools
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import nats
import orjson

sys.path.insert(0, str(Path(__file__).resolve().parent))
from agentwatch.bus.live import NatsLiveSource
from traffic import demo_messages, publish_paced
from tui_bench import RAMP_SECONDS, RATE_TOLERANCE, SIZE, MeasuredApp, _refreshed, bus, p95, start_traffic

UNPAINTED_SECONDS = 10.0


class ScreenApp(MeasuredApp):
    """MeasuredApp, and when the probe's envelope reached it, which frame took it in, and every
    frame's times (its start, the repaint's end, the composite after it)."""

    def __init__(self, live: NatsLiveSource) -> None:
        super().__init__(live, None)
        self.watched = b""  # the probe's agent, as it appears in its envelope's bytes
        self.arrived = self.frame_started = self.frame_ended = 0.0
        self.taken_in = asyncio.Event()  # set by the repaint that put the probe's row on the roster
        self.frames: list[tuple[float, float, float]] = []
        self._frame_marks = (0.0, 0.0)

    def deliver(self, env: dict[str, Any] | bytes) -> None:
        if self.watched and isinstance(env, bytes) and self.watched in env:
            self.arrived = time.perf_counter()
        super().deliver(env)

    def _frame(self) -> None:
        started = time.perf_counter()
        super()._frame()
        self._frame_marks = (started, time.perf_counter())

    def _framed(self, started: float) -> None:
        self.frames.append((*self._frame_marks, time.perf_counter()))
        super()._framed(started)

    def repaint(self) -> None:
        started = time.perf_counter()
        super().repaint()
        if self.watched and not self.taken_in.is_set() and self.painted():
            self.frame_started, self.frame_ended = started, time.perf_counter()
            self.taken_in.set()

    def painted(self) -> bool:
        agent = self.watched.decode()
        return any(a.name == agent for _, a in self._roster_rows)

    def expect(self, agent: str) -> None:
        self.watched = agent.encode()
        self.arrived = self.frame_started = self.frame_ended = 0.0
        self.taken_in.clear()


@dataclass
class Probe:
    """One probe's times, in seconds from the hook's start (inf: never painted)."""

    total: float
    arrived: float = 0.0  # the envelope reached the dashboard
    frame: float = 0.0  # the repaint that took it in began
    painted: float = 0.0  # that repaint ended (the composite follows)


def emit_command() -> str:
    found = shutil.which("agentwatch-emit", path=str(Path(sys.executable).parent)) or shutil.which(
        "agentwatch-emit"
    )
    if found is None:
        raise RuntimeError("agentwatch-emit is not installed next to this interpreter")
    return found


class Probes:
    def __init__(self, app: ScreenApp, url: str, workdir: Path) -> None:
        self.app, self.url, self.workdir = app, url, workdir
        self.emit = emit_command()
        self.n = 0
        # The pause before each probe varies: a fixed one, counted from the last probe's frame,
        # started every probe at the same point of the frames' rhythm (0.5 s is 7 frames of 71 ms),
        # so each waited for its frame the same (the whole gap, run after run); a hook is started
        # at any moment.
        self.spread = random.Random(7)  # noqa: S311 (when to probe, not a secret)

    async def probe(self) -> Probe:
        """From the hook's start to its agent's row on a composited screen."""
        self.n += 1
        agent = f"probe-{self.n}"
        self.app.expect(agent)
        # The installed hook, whatever PYTHONPATH this run has (an older dashboard's source, to compare).
        env = {
            k: v for k, v in os.environ.items() if not k.startswith(("AGENTWATCH_", "GENIE_", "PYTHONPATH"))
        }
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
        try:
            await asyncio.wait_for(self.app.taken_in.wait(), UNPAINTED_SECONDS)
        except TimeoutError:
            await hook
            return Probe(float("inf"))
        await _refreshed(self.app)
        app = self.app
        probe = Probe(
            time.perf_counter() - started,
            app.arrived - started,
            app.frame_started - started,
            app.frame_ended - started,
        )
        await hook
        return probe

    async def phase(self, seconds: float, interval: float) -> list[Probe]:
        out = []
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            out.append(await self.probe())
            await asyncio.sleep(interval * self.spread.uniform(0.5, 1.5))
        return out


def painted(samples: list[Probe]) -> list[Probe]:
    return [s for s in samples if s.total != float("inf")]


def summary(name: str, samples: list[Probe]) -> str:
    got = painted(samples)
    lost = len(samples) - len(got)
    if not got:
        return f"{name}: no probe painted"
    total = [s.total for s in got]
    return (
        f"{name}: {len(got)} probes, hook-to-screen median {ms(statistics.median(total))}, "
        f"p95 {ms(p95(total))}, max {ms(max(total))}" + (f", {lost} never painted" if lost else "")
    )


def breakdown(name: str, samples: list[Probe]) -> str:
    """Where each probe's time went: median / p95 of each step, in ms."""
    got = painted(samples)
    if not got:
        return ""
    steps = {
        "hook until the dashboard had it": [s.arrived for s in got],
        "waiting for its frame": [s.frame - s.arrived for s in got],
        "the repaint": [s.painted - s.frame for s in got],
        "the composite": [s.total - s.painted for s in got],
    }
    parts = [f"{what} {ms(statistics.median(v))} / {ms(p95(v))}" for what, v in steps.items()]
    return f"  {name}, median / p95: " + "; ".join(parts)


def frames_line(name: str, frames: list[tuple[float, float, float]]) -> str:
    """How often frames came and what each took, median / p95 in ms."""
    if len(frames) < 2:
        return ""
    seconds = frames[-1][2] - frames[0][0]
    steps = {
        "repaint": [end - start for start, end, _ in frames],
        "repaint to composited": [done - end for _, end, done in frames],
        "composited to the next frame": [b[0] - a[2] for a, b in itertools.pairwise(frames)],
    }
    parts = [f"{what} {ms(statistics.median(v))} / {ms(p95(v))}" for what, v in steps.items()]
    return f"  {name} frames: {len(frames) / seconds:.1f}/s; " + "; ".join(parts)


def ms(seconds: float) -> str:
    return f"{seconds * 1000:.0f} ms"


async def traffic_in_process(url: str, rate: float, seconds: float) -> tuple[int, float]:
    """The older way, for comparison: published from the dashboard's own event loop."""
    messages = demo_messages(int(rate * seconds))
    nc = await nats.connect(url)
    try:
        return await publish_paced(nc, messages, rate)
    finally:
        await nc.close()


async def run(args: argparse.Namespace, url: str, workdir: Path) -> int:
    traffic_seconds = args.seconds + 1.0
    app = ScreenApp(NatsLiveSource(url))
    async with app.run_test(size=SIZE) as pilot:
        deadline = time.monotonic() + 30
        while not app.state.bus_ok:
            if time.monotonic() > deadline:
                print(f"the dashboard did not connect to {url}: {app.state.bus_text}")
                return 3
            await pilot.pause(0.1)
        probes = Probes(app, url, workdir)
        await probes.probe()  # warm: the first hook run compiles nothing, but fills the page cache
        app.frames.clear()
        quiet = await probes.phase(min(args.seconds, 10.0), args.probe_interval)
        quiet_frames = list(app.frames)
        if args.traffic_in_process:
            inline = asyncio.create_task(traffic_in_process(url, args.rate, traffic_seconds))
        else:
            publisher = await start_traffic(url, args.rate, traffic_seconds)
        await asyncio.sleep(RAMP_SECONDS)
        app.frames.clear()
        loaded = await probes.phase(max(1.0, args.seconds - RAMP_SECONDS), args.probe_interval)
        loaded_frames = list(app.frames)
        if args.traffic_in_process:
            sent, took = await inline
        else:
            code, published = await publisher.finish(60), publisher.result()
            if code != 0 or published is None:
                print("the publisher failed:\n" + "\n".join(publisher.lines))
                return 2
            sent, _, took, _ = published
        live_workers = [worker for worker in app.workers if worker.group == "live"]
    for worker in live_workers:
        with contextlib.suppress(Exception):
            await asyncio.wait_for(worker.wait(), 10)
    if sent / took < args.rate * RATE_TOLERANCE:
        print(f"the traffic went out at {sent / took:,.0f}/s, not {args.rate:g}: this run says nothing")
        return 2
    where = "this process's event loop" if args.traffic_in_process else "a process of its own"
    print(
        f"dashboard {SIZE[0]}x{SIZE[1]}; traffic: {sent:,} demo messages at {sent / took:,.0f}/s from {where}"
    )
    print(summary("quiet (reference)", quiet))
    print(summary(f"under {args.rate:g} events/s", loaded))
    print(breakdown("quiet", quiet))
    print(breakdown("loaded", loaded))
    print(frames_line("quiet", quiet_frames))
    print(frames_line("loaded", loaded_frames))
    ok_q, ok_l = [s.total for s in painted(quiet)], [s.total for s in painted(loaded)]
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
    parser.add_argument(
        "--traffic-in-process",
        action="store_true",
        help="publish the traffic from the dashboard's own event loop, as this benchmark did before",
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
