"""What an open dashboard costs the collector on a quiet bus: the CPU of the `agentwatch up` process
tree (nats-server left out) over a quiet window with no dashboard, then with one dashboard open
(the real app, headless, over the bus's query service, refreshing every 5 s), then the same
dashboard asking its whole answer at every refresh (what it did before the store's mark): the
reference, in the same run.

    python benchmarks/idle_bench.py [--seconds 30] [--count 3000]

The store first gets a demo team's `--count` events, so that every answer has something to say.
Prints each window's CPU as a percentage of one core, and the dashboard's share over the quiet
collector's. The target: an open, idle dashboard adds at most 2% of a core.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "src"))

from agentwatch.tui import truth

BIN = Path(sys.executable).parent


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def collector_cpu(up: psutil.Process) -> float:
    """CPU seconds of `up` and its children but nats-server, so far."""
    total = 0.0
    for proc in [up, *up.children(recursive=True)]:
        with contextlib.suppress(psutil.NoSuchProcess):
            if "nats-server" in proc.name():
                continue
            times = proc.cpu_times()
            total += times.user + times.system
    return total


def window(up: psutil.Process, seconds: float) -> float:
    """Percent of one core the collector used over `seconds` of wall time."""
    before, started = collector_cpu(up), time.monotonic()
    time.sleep(seconds)
    return (collector_cpu(up) - before) / (time.monotonic() - started) * 100


async def dashboard_for(env: dict[str, str], up: psutil.Process, seconds: float) -> float:
    """Open the dashboard, let it settle, then measure the collector over `seconds`."""
    from agentwatch.cli.sources import dashboard_sources
    from agentwatch.tui.app import AgentwatchApp

    live, history = dashboard_sources(env)
    app = AgentwatchApp(live, history)
    try:
        async with app.run_test(size=(160, 48)) as pilot:
            while not (app.state.truth_in_once and app.state.history_done):
                await pilot.pause(0.1)
            await pilot.pause(6)  # a refresh after the first answer
            return await asyncio.to_thread(window, up, seconds)
    finally:
        history.close()


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--seconds", type=float, default=30.0)
    parser.add_argument("--count", type=int, default=3000)
    args = parser.parse_args()
    data = Path(tempfile.mkdtemp(prefix="idle-bench-"))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AGENTWATCH_", "GENIE_"))}
    env.update(AGENTWATCH_DATA_DIR=str(data), AGENTWATCH_NATS_URL=f"nats://127.0.0.1:{free_port()}")
    os.environ.update(env)
    proc = subprocess.Popen([BIN / "agentwatch", "up"], env=env, stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        for line in proc.stdout:
            if line.startswith("Ctrl-C stops"):
                break
        subprocess.run(
            [BIN / "agentwatch", "demo", "--rate", "0", "--count", str(args.count)],
            env=env, check=True, capture_output=True,
        )  # fmt: skip
        up = psutil.Process(proc.pid)
        time.sleep(5)  # the demo's last batch stored
        quiet = window(up, args.seconds)
        marked = asyncio.run(dashboard_for(env, up, args.seconds))
        truth.FULL_EVERY_SECONDS = 0.0  # every refresh asks for everything: the reference
        whole = asyncio.run(dashboard_for(env, up, args.seconds))
    finally:
        proc.terminate()
        proc.wait(30)
        shutil.rmtree(data, ignore_errors=True)
    print(f"collector CPU over {args.seconds:.0f} s on a quiet bus, % of one core:")
    print(f"  no dashboard:                          {quiet:5.2f}")
    print(f"  one dashboard (mark, then whole):      {marked:5.2f}  (+{marked - quiet:.2f}; target <= +2)")
    print(f"  one dashboard (whole every refresh):   {whole:5.2f}  (+{whole - quiet:.2f}; the reference)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
