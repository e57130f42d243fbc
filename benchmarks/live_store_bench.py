"""The collector's CPU at a fleet's steady rate: the installed hook's envelopes published live.

store_bench.py drains a backlog; this measures what a collector costs while a fleet sends
`--rate` events a second (2,000 by default) for `--seconds`: the envelopes of store_bench.py's
sessions (the installed hook's own, fresh ULIDs and timestamps as they are published), sent at
that pace to a nats-server this script starts, to:

- `agentwatch store` (store, rollups and watchdog in one process, as `agentwatch up` runs them);
- with `--before SRC`, the `agentwatch` of another checkout's `src` directory, in the same runs;
- the naive reference, benchmarks/naive_store.py (FastStream batch subscriber, pydantic model per
  message, clickhouse-connect insert, no watchdog).

Each on an empty stream and a fresh ClickHouse, started and settled before the first event; its
CPU (user + system, all threads) and nats-server's are read from the first publish until every
message is stored and acknowledged. Printed per run and as medians: CPU seconds per 100,000
events, the share of one core that is, and the ratio to the naive reference of the same run.

    python benchmarks/live_store_bench.py [--rate 2000] [--seconds 30] [--repeat 3] [--before SRC]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import nats
from nats.js.errors import NotFoundError

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "src"))

from agentwatch.bus.streams import STREAM_NAME
from store_bench import (
    NAIVE,
    Envelope,
    Template,
    backlog,
    consumers,
    cpu_seconds,
    local_bus,
    per_100k,
    prepare,
    reset_consumers,
)

SETTLE_S = 3.0  # after the consumer's durables exist: its start-up's CPU is not counted


async def paced(url: str, messages: Iterator[Envelope], rate: float, count: int) -> float:
    """Publish `count` messages at `rate` a second; the seconds it took."""
    nc = await nats.connect(url)
    start = time.monotonic()
    try:
        for n, (subject, headers, body) in enumerate(messages):
            if n >= count:
                break
            wait = start + n / rate - time.monotonic()
            if wait > 0.001:
                await asyncio.sleep(wait)
            await nc.publish(subject, body, headers=headers)
        await nc.flush()
    finally:
        await nc.close()
    return time.monotonic() - start


async def ready(url: str, durables: list[str], proc: subprocess.Popen[bytes], timeout: float = 120) -> None:
    """Until every durable of the consumer exists (it made the store's at its start)."""
    nc = await nats.connect(url)
    js = nc.jetstream()
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                raise RuntimeError(f"{durables[0]} exited at start with code {proc.returncode}")
            try:
                for durable in durables:
                    await js.consumer_info(STREAM_NAME, durable)
                return
            except NotFoundError:
                await asyncio.sleep(0.1)
    finally:
        await nc.close()
    raise RuntimeError(f"{durables[0]} did not start within {timeout:.0f}s")


async def stored(url: str, durables: list[str], total: int, timeout: float = 600) -> None:
    """Until every durable has delivered `total` messages, with none pending or unacknowledged."""
    nc = await nats.connect(url)
    js = nc.jetstream()
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            infos = [await js.consumer_info(STREAM_NAME, d) for d in durables]
            if all(i.delivered.consumer_seq >= total and not i.num_pending and not i.num_ack_pending
                   for i in infos):  # fmt: skip
                return
            await asyncio.sleep(0.05)
    finally:
        await nc.close()
    raise RuntimeError(f"{durables[0]} did not store the {total:,} events within {timeout:.0f}s")


async def purge(url: str) -> None:
    nc = await nats.connect(url)
    try:
        await nc.jetstream().purge_stream(STREAM_NAME)
    finally:
        await nc.close()


def one_run(
    args: argparse.Namespace, url: str, server: int, pool: list[Template], tmp: str, i: int
) -> dict[str, float]:
    """CPU seconds per 100,000 events of each consumer in run `i`, and of nats-server beside it."""
    out: dict[str, float] = {}
    count = int(args.rate * args.seconds)
    for name, cmd, env, durables in consumers(args, url, tmp, i):
        asyncio.run(purge(url))
        asyncio.run(reset_consumers(url))
        proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        try:
            asyncio.run(ready(url, durables, proc))
            time.sleep(SETTLE_S)
            cpu0, server0 = cpu_seconds(proc.pid), cpu_seconds(server)
            messages = backlog(count, 0, pool, rate=args.rate, start=time.time())
            took = asyncio.run(paced(url, messages, args.rate, count))
            asyncio.run(stored(url, durables, count))
            cpu, server_cpu = cpu_seconds(proc.pid) - cpu0, cpu_seconds(server) - server0
        finally:
            proc.terminate()
            try:
                proc.communicate(timeout=60)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.communicate()
        out[name], out[f"{name} nats"] = per_100k(cpu, count), per_100k(server_cpu, count)
        print(f"run {i + 1}: {name}: {per_100k(cpu, count):.2f} s of CPU per 100,000 events, "
              f"{cpu / took:.0%} of a core ({count:,} events in {took:.1f} s)", flush=True)  # fmt: skip
    return out


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rate", type=float, default=2000.0, help="events a second")
    parser.add_argument("--seconds", type=float, default=30.0)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument(
        "--before", metavar="SRC", default="", help="also run another checkout's src, in the same runs"
    )
    args = parser.parse_args()
    runs: list[dict[str, float]] = []
    with tempfile.TemporaryDirectory() as tmp, local_bus(tmp) as (url, server):
        pool = asyncio.run(prepare(url, f"{tmp}/hook"))
        for i in range(args.repeat):
            runs.append(one_run(args, url, server.pid, pool, tmp, i))
    print(f"medians of {len(runs)} runs at {args.rate:,.0f} events/s for {args.seconds:.0f} s:")
    for name in [n for n in runs[0] if not n.endswith(" nats")]:
        cpu = statistics.median(r[name] for r in runs)
        ratio = statistics.median(r[name] / r[NAIVE] for r in runs)
        share = cpu / 100_000 * args.rate
        nats_cpu = statistics.median(r[name + " nats"] for r in runs)
        print(f"  {name:<28} CPU {cpu:.2f} s per 100,000 events ({share:.0%} of a core), {ratio:.2f}x the "
              f"naive reference's; nats-server {nats_cpu:.2f} s")  # fmt: skip


if __name__ == "__main__":
    main()
