"""What one dashboard frame costs under a flood: the CPU of the event loop's thread for the repaint,
for the composite after it (Textual rendering the lines that changed, and the frame encoded as a
terminal run would), and for everything, applying the events included.

The real dashboard (AgentwatchApp, headless, 160x48, as benchmarks/tui_bench.py runs it) in a
process of its own, fed the demo team's envelopes (the hook's own encoding, as bytes off the bus)
by a fake live source: a warm-up of 6,000 events, then --frames rounds of --events events each,
every round waiting until its frame was composited. No bus and no other process: the figures are
the dashboard's own work, steady from run to run, where screen_bench's are the machine's too.

With --before SRC (a source tree of an older revision, e.g. a `git worktree` of main at its
`src`), the same rounds run on that code too, alternating with this one --repeat times, and the
ratios are printed: the reference measured in the same run.

    .venv/bin/python benchmarks/frame_bench.py [--frames 200] [--events 100] [--before SRC]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from traffic import demo_messages
from tui_bench import SIZE, MeasuredApp, p95

WARMUP_EVENTS = 6000


class Live:
    """A bus that is up and says nothing: the rounds deliver the envelopes."""

    async def run(self, deliver: Any, status: Any) -> None:
        self.deliver = deliver  # unused: the rounds call the app's own deliver
        status(True, "bus (in-process)")
        await asyncio.Event().wait()


class FrameApp(MeasuredApp):
    def __init__(self) -> None:
        super().__init__(Live(), None)
        self.frame_costs: list[tuple[float, float]] = []  # (repaint, composite) CPU seconds of each frame
        self._marks = (0.0, 0.0)

    def _frame(self) -> None:
        started = time.thread_time()
        super()._frame()
        self._marks = (started, time.thread_time())

    def _framed(self, started: float) -> None:
        begun, repainted = self._marks
        self.frame_costs.append((repainted - begun, time.thread_time() - repainted))
        super()._framed(started)


async def measure(frames: int, events: int) -> dict[str, Any]:
    bodies = [body for _, body in demo_messages(WARMUP_EVENTS + frames * events)]
    app = FrameApp()
    async with app.run_test(size=SIZE) as pilot:
        while not app.state.bus_ok:
            await pilot.pause(0.05)
        for body in bodies[:WARMUP_EVENTS]:
            app.deliver(body)
        await pilot.pause(1.0)
        app.frame_costs.clear()
        cpu = time.thread_time()
        for start in range(WARMUP_EVENTS, len(bodies), events):
            seen = len(app.frame_costs)
            for body in bodies[start : start + events]:
                app.deliver(body)
            while len(app.frame_costs) == seen:
                await asyncio.sleep(0.001)
            await asyncio.sleep(0.02)
        everything = time.thread_time() - cpu
    return {"costs": app.frame_costs, "everything": everything / frames}


def line(name: str, result: dict[str, Any]) -> str:
    repaint = [r for r, _ in result["costs"]]
    composite = [c for _, c in result["costs"]]
    frame = [r + c for r, c in result["costs"]]
    return (
        f"{name:<7} repaint {ms(statistics.median(repaint))}, composite {ms(statistics.median(composite))}, "
        f"frame {ms(statistics.median(frame))} (p95 {ms(p95(frame))}); "
        f"everything per round (the events applied too) {ms(result['everything'])}"
    )


def ms(seconds: float) -> str:
    return f"{seconds * 1000:.1f} ms"


def run_in(src: str | None, args: argparse.Namespace) -> dict[str, Any]:
    """One measurement in a fresh process, on this checkout's code or on `src`."""
    env = dict(os.environ)
    if src:
        env["PYTHONPATH"] = str(Path(src).resolve())
    out = subprocess.run(
        [sys.executable, __file__, "--frames", str(args.frames), "--events", str(args.events), "--one"],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    result: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def median_of(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """The run whose median frame is the median of the runs'."""
    ordered = sorted(runs, key=lambda r: statistics.median(a + b for a, b in r["costs"]))
    return ordered[len(ordered) // 2]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="frame_bench.py", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--frames", type=int, default=200, help="rounds of one frame (default %(default)s)")
    parser.add_argument("--events", type=int, default=100, help="events per round (default %(default)s)")
    parser.add_argument("--before", metavar="SRC", default="", help="an older source tree, run alternately")
    parser.add_argument("--repeat", type=int, default=3, help="runs of each (default %(default)s)")
    parser.add_argument("--one", action="store_true", help=argparse.SUPPRESS)  # a measuring process
    args = parser.parse_args(argv)
    if args.one:
        print(json.dumps(asyncio.run(measure(args.frames, args.events))))
        return 0
    now: list[dict[str, Any]] = []
    before: list[dict[str, Any]] = []
    for _ in range(args.repeat):
        if args.before:
            before.append(run_in(args.before, args))
        now.append(run_in(None, args))
    print(
        f"dashboard {SIZE[0]}x{SIZE[1]}, {args.frames} frames of {args.events} demo events after "
        f"{WARMUP_EVENTS:,}; CPU of the event loop's thread, the median of {args.repeat} runs:"
    )
    print(line("now", median_of(now)))
    if before:
        print(line("before", median_of(before)))
        ratios = []
        picks: dict[str, Callable[[dict[str, Any]], float]] = {
            "repaint": lambda r: statistics.median(a for a, _ in r["costs"]),
            "composite": lambda r: statistics.median(b for _, b in r["costs"]),
            "frame": lambda r: statistics.median(a + b for a, b in r["costs"]),
            "everything": lambda r: float(r["everything"]),
        }
        for what, pick in picks.items():
            ratio = statistics.median(pick(r) for r in now) / statistics.median(pick(r) for r in before)
            ratios.append(f"{what} {ratio:.2f}x")
        print("now/before: " + ", ".join(ratios))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
