"""The watchdog under load: does it keep up with 2,000 events/s, and how long from the event that
makes a condition true until the alert is on the bus (rule-to-alert latency)?

Runs everything on loopback, in a temporary directory:

- the bundled nats-server (as `agentwatch up` runs it) with the GENIE stream;
- `agentwatch store` (store, query service and the watchdog, embedded ClickHouse) with a rules file
  whose `loop` rule fires at 4 identical calls in a row;
- probes: every --probe-interval seconds a fresh agent publishes 4 identical PreToolUse envelopes
  (the hook's own envelope code); the time from publishing the 4th until its `loop` alert arrives
  on agentwatch.alert.> is one latency sample;
- two phases with the same probes: quiet (the reference, nothing else published), then the demo
  team's traffic at 2,000 events/s (--rate) for --seconds. The demo's messages (the hook's own
  envelope code, `TeamSimulator.messages`) are encoded before the phase and published paced from
  this process: on a shared machine `agentwatch demo` cannot encode 2,000 events/s beside the
  store, and the rate is what is measured against.

Keep-up: the watchdog reads the store's deliveries, so the store's durable consumer on GENIE
(agentwatch-store) is sampled once a second: what the stream holds for it and it has not been
delivered yet (pending; what was delivered the watchdog has seen) must stay bounded and drain once
the demo stops.
It prints medians and p95s, and the loaded/quiet ratio measured in the same run.

    .venv/bin/python benchmarks/alert_bench.py [--rate 2000] [--seconds 30]

Exit status: 0 kept up, 1 it fell behind (backlog not drained within 10 s of the traffic's end or
a probe unanswered), 2 the traffic could not be published at the rate asked, 3 setup failed.
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
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import nats
import orjson

sys.path.insert(0, str(Path(__file__).resolve().parent))
from agentwatch.bus.streams import STORE_DURABLE, STREAM_NAME
from agentwatch.contract import build_envelope, encode_envelope
from traffic import demo_messages, publish_paced
from tui_bench import RATE_TOLERANCE, bus, command, p95

RULES = "[loop]\nrepeats = 4\n"
UNANSWERED_SECONDS = 10.0


@contextlib.contextmanager
def store_with_watchdog(url: str, workdir: Path, timeout: float = 60.0) -> Iterator[None]:
    rules = workdir / "alerts.toml"
    rules.write_text(RULES)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AGENTWATCH_", "GENIE_"))}
    env.update(AGENTWATCH_NATS_URL=url, AGENTWATCH_DATA_DIR=str(workdir / "store"))
    env.update(AGENTWATCH_ALERTS_FILE=str(rules))
    log_path = workdir / "store.log"
    with log_path.open("wb") as log:
        proc = subprocess.Popen([command("agentwatch"), "store"], env=env, stdout=log, stderr=log)
    try:
        deadline = time.monotonic() + timeout
        while "Ctrl-C stops" not in log_path.read_text(errors="replace"):
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("agentwatch store did not start:\n" + log_path.read_text(errors="replace"))
            time.sleep(0.1)
        yield
    finally:
        proc.terminate()
        proc.wait(60)


class Probes:
    """Fresh agents that loop, and the alerts that answer them."""

    def __init__(self, nc: Any) -> None:
        self.nc = nc
        self.sent: dict[str, float] = {}  # agent -> when its 4th call was published
        self.latency: dict[str, float] = {}
        self.n = 0

    async def on_alert(self, msg: Any) -> None:
        alert = orjson.loads(msg.data)
        agent = alert.get("agent", "")
        if alert.get("rule") == "loop" and alert.get("state") == "firing" and agent in self.sent:
            self.latency.setdefault(agent, time.perf_counter() - self.sent[agent])

    async def probe(self) -> None:
        self.n += 1
        agent = f"probe-{self.n}"
        for i in range(4):
            body = {
                "hook_event_name": "PreToolUse",
                "session_id": f"bench-{agent}",
                "tool_name": "Bash",
                "tool_use_id": f"{agent}-{i}",
                "tool_input": {"command": "make test"},
            }
            subject, env = build_envelope(body, {"GENIE_AGENT_NAME": agent}, host="bench")
            if i == 3:
                # Taken before the flush: the alert may come back before the flush's own answer
                # is handled (a probe answered that fast was counted as unanswered).
                self.sent[agent] = time.perf_counter()
            await self.nc.publish(subject, encode_envelope(env))
        await self.nc.flush()

    async def phase(self, seconds: float, interval: float) -> list[float]:
        first = self.n + 1
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            await self.probe()
            await asyncio.sleep(interval)
        agents = [f"probe-{i}" for i in range(first, self.n + 1)]
        wait_until = time.monotonic() + UNANSWERED_SECONDS
        while time.monotonic() < wait_until and any(a not in self.latency for a in agents):
            await asyncio.sleep(0.05)
        return [self.latency.get(a, float("inf")) for a in agents]


async def backlog(js: Any) -> int:
    info = await js.consumer_info(STREAM_NAME, STORE_DURABLE)
    return int(info.num_pending)


async def sample_backlog(js: Any, into: list[int], stop: asyncio.Event) -> None:
    while not stop.is_set():
        with contextlib.suppress(Exception):
            into.append(await backlog(js))
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), 1.0)


def summary(name: str, samples: list[float]) -> str:
    got = [s for s in samples if s != float("inf")]
    if not got:
        return f"{name}: no probe answered"
    lost = len(samples) - len(got)
    return (
        f"{name}: {len(got)} probes, rule-to-alert median {statistics.median(got) * 1000:.0f} ms, "
        f"p95 {p95(got) * 1000:.0f} ms, max {max(got) * 1000:.0f} ms"
        + (f", {lost} unanswered" if lost else "")
    )


async def run(args: argparse.Namespace, url: str) -> int:
    messages = demo_messages(int(args.rate * args.seconds))
    nc = await nats.connect(url)
    js = nc.jetstream()
    probes = Probes(nc)
    await nc.subscribe("agentwatch.alert.>", cb=probes.on_alert)
    warm = await probes.phase(0.1, 1.0)  # the watchdog's consumer is there once one is answered
    while warm[-1] == float("inf"):
        warm = await probes.phase(0.1, 1.0)
    quiet = await probes.phase(min(args.seconds, 10.0), args.probe_interval)
    print(summary("quiet (reference)", quiet), flush=True)

    traffic = asyncio.create_task(publish_paced(nc, messages, args.rate))
    await asyncio.sleep(2.0)  # ramp-up
    levels: list[int] = []
    stop = asyncio.Event()
    sampler = asyncio.create_task(sample_backlog(js, levels, stop))
    loaded = await probes.phase(max(1.0, args.seconds - 4.0), args.probe_interval)
    sent, took = await traffic
    stop.set()
    await sampler
    ended = time.perf_counter()
    drained = None
    while time.perf_counter() - ended < 10.0:
        if await backlog(js) == 0:
            drained = time.perf_counter() - ended
            break
        await asyncio.sleep(0.1)
    await nc.close()

    if sent / took < args.rate * RATE_TOLERANCE:
        print(f"the traffic went out at {sent / took:,.0f}/s, not {args.rate:g}: this run says nothing")
        return 2
    print(f"traffic: {sent:,} demo messages at {sent / took:,.0f}/s over {took:.1f}s", flush=True)
    print(summary(f"under {args.rate:g} events/s", loaded))
    ok_q, ok_l = [s for s in quiet if s != float("inf")], [s for s in loaded if s != float("inf")]
    if ok_q and ok_l:
        print(
            f"ratio loaded/quiet: median {statistics.median(ok_l) / statistics.median(ok_q):.2f}x, "
            f"p95 {p95(ok_l) / p95(ok_q):.2f}x"
        )
    print(
        f"watchdog backlog on GENIE, sampled each second under load: median "
        f"{statistics.median(levels) if levels else 0:,.0f}, max {max(levels, default=0):,} messages; "
        + (f"drained {drained:.1f}s after the traffic ended" if drained is not None else "NOT drained")
    )
    kept_up = drained is not None and len(ok_l) == len(loaded) and len(ok_q) == len(quiet)
    print("kept up" if kept_up else "fell behind")
    return 0 if kept_up else 1


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="alert_bench.py", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rate", type=float, default=2000.0, help="demo events/s (default %(default)g)")
    parser.add_argument("--seconds", type=float, default=30.0, help="the loaded phase (default %(default)g)")
    parser.add_argument(
        "--probe-interval", type=float, default=0.5, help="seconds between probes (default %(default)g)"
    )
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="alert-bench-") as tmp:
        workdir = Path(tmp)
        try:
            with bus(workdir) as url, store_with_watchdog(url, workdir):
                return asyncio.run(run(args, url))
        except RuntimeError as exc:
            print(f"setup failed: {exc}", file=sys.stderr)
            return 3


if __name__ == "__main__":
    raise SystemExit(main())
