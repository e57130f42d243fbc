"""Draining a backlog of the installed hook's envelopes with the collector as `agentwatch up` runs it.

What users run, end to end:

1. The installed `agentwatch-emit` sends every captured Claude Code payload
   (tests/fixtures/claude-code-2.1.330-captures.jsonl, with the hook's environment of each) to a
   nats-server this script starts; its envelopes are collected from `genie.>` (subject, headers,
   body) as the hook made them.
2. From those, a backlog of sessions: each session is one host's (8 hosts) and goes through the
   hook's envelopes in their order, with its own session id (and the agent names and paths made
   from it), the hook's own numbering (`seq` 1, 2, ... per session; 0 where the hook gives none),
   a fresh time-ordered ULID as body id and Nats-Msg-Id, timestamps 0.5 ms apart (a fleet at
   2,000 events/s), tool_use_ids made unique per call. Session lengths are drawn (fixed seed) from
   50 to 5,000 events (median about 500); `--long-session N` adds one session of N events (the
   issue's 1,000,000) running beside the others. Sixteen sessions run at a time, interleaved.
3. The backlog is published while no collector runs; the store's and the watchdog's durables are
   there already (a collector was running before), so both have the whole backlog to catch up.
4. `agentwatch store` (store, rollups and watchdog in one process, as `agentwatch up` runs them)
   drains it; then the naive reference, benchmarks/naive_store.py (FastStream batch subscriber,
   pydantic model per message, clickhouse-connect insert, no watchdog). Each on a fresh ClickHouse,
   `--repeat` times, interleaved.

Each drain is timed from the first delivery until its durables (the store's and the watchdog's;
the naive one's) have nothing pending and nothing unacknowledged. Printed per run and as medians:
events/s, the ratio to the naive reference of the same run, CPU seconds (user + system, all
threads) per 100,000 events of the consumer process and of nats-server over the drain, peak
resident memory, and the store's redeliveries (deliveries beyond one per message).

    python benchmarks/store_bench.py [--events 200000] [--repeat 3] [--long-session 1000000]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path

import nats
from nats.aio.msg import Msg
from nats.js.api import DeliverPolicy
from nats.js.errors import NotFoundError

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))

from agentwatch.bus.streams import (  # noqa: E402
    ALERTS_DURABLE,
    STORE_DURABLE,
    STREAM_NAME,
    alerts_consumer_config,
    ensure_stream,
)
from agentwatch.contract import new_event_id  # noqa: E402

CAPTURES = ROOT / "tests" / "fixtures" / "claude-code-2.1.330-captures.jsonl"
BIN = Path(sys.executable).parent
HOSTS = [f"host-{i:02d}" for i in range(1, 9)]
CONCURRENT_SESSIONS = 16
FLEET_RATE = 2000.0  # events/s: how far apart the backlog's timestamps are
NAIVE_DURABLE = "naive-store"

Envelope = tuple[str, dict[str, str], bytes]


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def local_bus(tmp: str) -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    """The wheel's nats-server with JetStream on a free port, its store under `tmp`: (url, process),
    stopped on leaving."""
    port = free_port()
    server = subprocess.Popen(
        [str(BIN / "nats-server"), "-a", "127.0.0.1", "-p", str(port), "-js", "-sd", f"{tmp}/js"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        time.sleep(0.5)
        yield f"nats://127.0.0.1:{port}", server
    finally:
        server.terminate()
        server.wait()


# --- the hook's envelopes -----------------------------------------------------------------------


async def hook_envelopes(url: str, data_dir: str) -> list[Envelope]:
    """What the installed hook sends for every captured payload, collected from genie.>."""
    nc = await nats.connect(url)
    got: list[Envelope] = []

    async def keep(msg: Msg) -> None:
        got.append((msg.subject, dict(msg.headers or {}), msg.data))

    await nc.subscribe("genie.>", cb=keep)
    await nc.flush()
    base = {k: v for k, v in os.environ.items() if not k.startswith(("AGENTWATCH_", "GENIE_", "CLAUDE"))}
    records = [json.loads(line) for line in CAPTURES.read_text().splitlines() if line.strip()]
    for rec in records:
        env = dict(base, **rec["hook_env"], AGENTWATCH_NATS_URL=url, AGENTWATCH_DATA_DIR=data_dir)
        payload = json.dumps(rec["payload"]).encode()
        subprocess.run([str(BIN / "agentwatch-emit")], input=payload, env=env, check=True, timeout=30)
    deadline = time.monotonic() + 10
    while len(got) < len(records) and time.monotonic() < deadline:
        await asyncio.sleep(0.05)
    await asyncio.sleep(0.3)  # the SendMessage copies on genie.msg.*
    await nc.close()
    if len(got) < len(records):
        raise RuntimeError(f"the hook sent {len(got)} envelopes for {len(records)} payloads")
    return got


@dataclass
class Template:
    """One hook envelope, with what a new session and a new call change in it."""

    subject: str
    headers: dict[str, str]
    rest: str  # the body after its id and timestamp (the first two fields, as the hook writes them)
    session: str  # the session id it names ('' for none)
    tool_use_id: str
    host: str  # `"host":"..."` as the hook wrote it
    seq: str  # `"seq":N` as the hook wrote it ('' when the hook gave none)


def templates(envelopes: list[Envelope]) -> list[Template]:
    out = []
    for subject, headers, body in envelopes:
        env = json.loads(body)
        text = json.dumps(env, separators=(",", ":"), ensure_ascii=False)
        head = f'{{"v":1,"id":"{env["id"]}","timestamp":"{env["timestamp"]}"'
        if not text.startswith(head):
            raise RuntimeError(f"not an envelope as the hook writes them: {text[:80]}")
        sid = str(env.get("session_id", ""))
        host = f'"host":{json.dumps(env["host"])}'
        seq = f'"seq":{env["seq"]}' if env["seq"] > 0 else ""
        out.append(Template(subject, headers, text[len(head) :], sid if len(sid) >= 8 else "",
                            str(env.get("tool_use_id") or ""), host, seq))  # fmt: skip
    return out


def session_lengths(events: int, rng: random.Random) -> list[int]:
    """Lengths adding up to `events`: log-uniform from 50 to 5,000 (median 500)."""
    out: list[int] = []
    while sum(out) < events:
        out.append(round(10 ** rng.uniform(1.7, 3.7)))
    out[-1] -= sum(out) - events
    return [n for n in out if n > 0]


def session(
    length: int, host: str, pool: list[Template], rng: random.Random
) -> Iterator[tuple[str, dict[str, str], str]]:
    """One session of `length` envelopes: the hook's envelopes in their order, over and over, as
    one session on `host` (its id, the agent names and paths made from it, its numbering)."""
    new_id = str(uuid.UUID(int=rng.getrandbits(128), version=4))
    where = f'"host":"{host}"'
    seq = 0
    for i in range(length):
        t = pool[i % len(pool)]
        rest, subject = t.rest, t.subject
        if t.session:
            rest = rest.replace(t.session, new_id).replace(t.session[:8], new_id[:8])
            subject = subject.replace(t.session[:8], new_id[:8])
        if t.tool_use_id:
            rest = rest.replace(t.tool_use_id, f"{t.tool_use_id}_{i // len(pool)}")
        rest = rest.replace(t.host, where, 1)
        if t.seq:
            seq += 1
            rest = rest.replace(t.seq, f'"seq":{seq}', 1)
        yield subject, t.headers, rest


def backlog(events: int, long_session: int, pool: list[Template], seed: int = 27, *,
            rate: float = FLEET_RATE, start: float | None = None) -> Iterator[Envelope]:  # fmt: skip
    """The backlog's envelopes, sessions interleaved, ids and timestamps fresh and in order:
    `rate` a second, from `start` (by default, ending now)."""
    rng = random.Random(seed)  # noqa: S311 - a benchmark's repeatable draw, not a secret
    lengths = session_lengths(events, rng)
    if long_session:
        lengths.insert(0, long_session)
    waiting = [session(n, HOSTS[i % len(HOSTS)], pool, rng) for i, n in enumerate(lengths)]
    waiting.reverse()
    active = [waiting.pop() for _ in range(min(CONCURRENT_SESSIONS, len(waiting)))]
    clock = time.time() - (events + long_session) / rate if start is None else start
    n = 0
    while active:
        for gen in list(active):
            item = next(gen, None)
            if item is None:
                active.remove(gen)
                if waiting:
                    active.append(waiting.pop())
                continue
            subject, headers, rest = item
            now = clock + n / rate
            n += 1
            event_id = new_event_id(now)
            stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(now)) + f".{int(now * 1000) % 1000:03d}Z"
            body = f'{{"v":1,"id":"{event_id}","timestamp":"{stamp}"{rest}'
            yield subject, {**headers, "Nats-Msg-Id": event_id}, body.encode()


# --- the bus --------------------------------------------------------------------------------------


async def prepare(url: str, data_dir: str) -> list[Template]:
    """The stream, the hook's envelopes through it, then an empty stream again."""
    nc = await nats.connect(url)
    js = nc.jetstream()
    await ensure_stream(js, {})
    pool = templates(await hook_envelopes(url, data_dir))
    await js.purge_stream(STREAM_NAME)
    await nc.close()
    return pool


async def publish(url: str, messages: Iterator[Envelope]) -> tuple[int, float]:
    """Publish everything; (messages, average body bytes) once the stream holds them all."""
    nc = await nats.connect(url)
    js = nc.jetstream()
    count = size = 0
    for subject, headers, body in messages:
        await nc.publish(subject, body, headers=headers)
        count += 1
        size += len(body)
        if count % 50_000 == 0:
            await nc.flush()
    await nc.flush()
    while (await js.stream_info(STREAM_NAME)).state.messages < count:
        await asyncio.sleep(0.1)
    await nc.close()
    return count, size / max(count, 1)


async def reset_consumers(url: str) -> None:
    """A fresh start for the next run: the store's and the naive durables begin at the first
    message when their consumer creates them; the watchdog's own (which a checkout from before
    the watchdog read the store's deliveries uses) is made now, at the first message, as a
    watchdog that ran before the backlog built up has it."""
    nc = await nats.connect(url)
    js = nc.jetstream()
    for durable in (STORE_DURABLE, ALERTS_DURABLE, NAIVE_DURABLE):
        with suppress(NotFoundError):
            await js.delete_consumer(STREAM_NAME, durable)
    config = alerts_consumer_config({})
    config.deliver_policy = DeliverPolicy.ALL
    await js.add_consumer(STREAM_NAME, config)
    await nc.close()


# --- measuring ----------------------------------------------------------------------------------


def cpu_seconds(pid: int) -> float:
    """User plus system CPU seconds the process has used so far (all its threads)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def peak_rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


@dataclass
class Drain:
    seconds: float
    cpu: float  # the consumer process, over the drain
    server_cpu: float  # nats-server, over the drain
    rss_mb: float
    redelivered: int  # deliveries of the first durable beyond one per message


async def drain(url: str, durables: list[str], total: int, proc: subprocess.Popen[bytes],
                server: int, timeout: float) -> Drain:  # fmt: skip
    """From the first delivery to every durable having delivered `total` messages and holding
    nothing pending or unacknowledged (a durable's consumer sequence counts every delivery)."""
    nc = await nats.connect(url)
    js = nc.jetstream()
    start: float | None = None
    cpu0 = server0 = 0.0
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                raise RuntimeError(f"{durables[0]} exited early with code {proc.returncode}")
            try:
                infos = [await js.consumer_info(STREAM_NAME, d) for d in durables]
            except NotFoundError:
                await asyncio.sleep(0.05)
                continue
            if start is None and infos[0].delivered.stream_seq:
                start, cpu0, server0 = time.monotonic(), cpu_seconds(proc.pid), cpu_seconds(server)
            done = all(
                i.delivered.consumer_seq >= total and i.num_pending == 0 and i.num_ack_pending == 0
                for i in infos
            )
            if start is not None and done:
                first = infos[0].delivered
                return Drain(time.monotonic() - start, cpu_seconds(proc.pid) - cpu0,
                             cpu_seconds(server) - server0, peak_rss_mb(proc.pid),
                             int(first.consumer_seq) - total)  # fmt: skip
            await asyncio.sleep(0.05)
    finally:
        await nc.close()
    raise RuntimeError(f"{durables[0]} did not drain within {timeout:.0f}s")


def run_consumer(cmd: list[str], env: dict[str, str], url: str, durables: list[str], total: int,
                 server: int) -> Drain:  # fmt: skip
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        return asyncio.run(drain(url, durables, total, proc, server, timeout=3600))
    finally:
        proc.terminate()
        try:
            _, err = proc.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            _, err = proc.communicate()
        if proc.returncode not in (0, -15) and err:
            sys.stderr.write(err.decode(errors="replace")[-2000:])


def per_100k(seconds: float, events: int) -> float:
    return seconds / events * 100_000


NAIVE = "naive reference"


def report(runs: list[dict[str, Drain]], total: int) -> None:
    """Every run, then the medians per consumer; ratios against the naive reference of the run."""
    names = list(runs[0])
    print(f"{'run':<5}{'consumer':<28}{'events/s':>10}{'x naive':>9}{'CPU/100k':>10}{'nats CPU/100k':>15}"
          f"{'peak RSS':>10}{'redelivered':>13}")  # fmt: skip
    table: dict[str, list[tuple[float, ...]]] = {name: [] for name in names}
    for i, run in enumerate(runs, 1):
        for name in names:
            d = run[name]
            row = (total / d.seconds, run[NAIVE].seconds / d.seconds, per_100k(d.cpu, total),
                   per_100k(d.server_cpu, total), d.rss_mb, float(d.redelivered))  # fmt: skip
            table[name].append(row)
            print(f"{i:<5}{name:<28}{row[0]:>10,.0f}{row[1]:>8.2f}x{row[2]:>8.2f} s{row[3]:>13.2f} s"
                  f"{row[4]:>7.0f} MB{row[5]:>13,.0f}")  # fmt: skip
    print(f"medians of {len(runs)} runs:")
    for name in names:
        med = [statistics.median(r[k] for r in table[name]) for k in range(6)]
        print(f"  {name:<28}{med[0]:>10,.0f} events/s {med[1]:>6.2f}x naive, CPU {med[2]:.2f} s per "
              f"100,000 events (nats-server {med[3]:.2f} s), peak RSS {med[4]:.0f} MB, "
              f"redelivered {max(r[5] for r in table[name]):,.0f} at most")  # fmt: skip


def consumers(
    args: argparse.Namespace, url: str, tmp: str, i: int
) -> list[tuple[str, list[str], dict[str, str], list[str]]]:
    """(name, command, environment, durables) of what drains the backlog in run `i`."""
    base = {k: v for k, v in os.environ.items() if not k.startswith(("AGENTWATCH_", "GENIE_"))}
    # The watchdog beside the store reads the store's deliveries; a checkout from before that
    # (--before) reads its own durable, and its drain waits for both.
    ours = dict(base, AGENTWATCH_NATS_URL=url, AGENTWATCH_DATA_DIR=f"{tmp}/ours{i}")
    out = [("agentwatch store", [str(BIN / "agentwatch"), "store"], ours, [STORE_DURABLE])]
    if args.before:
        alerts = Path(args.before, "agentwatch", "consumers", "alerts.py").read_text()
        collector = [STORE_DURABLE] if "def see(" in alerts else [STORE_DURABLE, ALERTS_DURABLE]
        env = dict(base, AGENTWATCH_NATS_URL=url, AGENTWATCH_DATA_DIR=f"{tmp}/before{i}",
                   PYTHONPATH=str(Path(args.before).resolve()))  # fmt: skip
        out.append(
            ("agentwatch store (--before)", [sys.executable, "-m", "agentwatch", "store"], env, collector)
        )
    naive = dict(base, NAIVE_NATS_URL=url, NAIVE_CLICKHOUSE_DIR=f"{tmp}/naive{i}")
    out.append((NAIVE, [sys.executable, str(ROOT / "benchmarks" / "naive_store.py")], naive, [NAIVE_DURABLE]))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--events", type=int, default=200_000, help="events in sessions of 50 to 5,000")
    parser.add_argument(
        "--long-session", type=int, default=0, metavar="N", help="add one session of N events"
    )
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--before", metavar="SRC", default="",
                        help="also drain with the agentwatch of another checkout's src directory (a commit "
                        "before a change), in the same runs")  # fmt: skip
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp, local_bus(tmp) as (url, server):
        pool = asyncio.run(prepare(url, f"{tmp}/hook"))
        print(f"the installed hook made {len(pool)} envelopes of the captured payloads", flush=True)
        t0 = time.monotonic()
        total, avg = asyncio.run(publish(url, backlog(args.events, args.long_session, pool)))
        long = f", one of {args.long_session:,}" if args.long_session else ""
        print(f"published {total:,} envelopes (avg {avg:.0f} bytes; sessions of 50 to 5,000 "
              f"events{long}) in {time.monotonic() - t0:.1f}s", flush=True)  # fmt: skip
        runs: list[dict[str, Drain]] = []
        for i in range(args.repeat):
            runs.append({})
            for name, cmd, env, durables in consumers(args, url, tmp, i):
                asyncio.run(reset_consumers(url))
                runs[-1][name] = d = run_consumer(cmd, env, url, durables, total, server.pid)
                print(f"run {i + 1}: {name}: {total / d.seconds:,.0f} events/s", flush=True)
    report(runs, total)
    print("targets: >= 50,000 events/s, >= 5x the naive reference, <= 2 s of CPU per 100,000 events")


if __name__ == "__main__":
    main()
