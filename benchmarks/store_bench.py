"""Sustained ingest, JetStream to ClickHouse rows, of envelope events published in advance.

Publishes N envelopes (real captured payloads through the contract code, default 200,000) into a
fresh GENIE stream on a nats-server this script starts, then drains them twice, one after the
other, each into its own embedded ClickHouse:

- agentwatch's store (`agentwatch store`, the production command, as a subprocess);
- a naive reference: a FastStream batch subscriber that decodes each message into a
  pydantic-validated model and inserts the batch with clickhouse-connect (benchmarks/naive_store.py).

Each is timed from its first delivered message to the moment its durable consumer has nothing
pending and nothing unacknowledged (the store acks only after the insert). The pair runs
`--repeat` times, interleaved, each run on a fresh consumer and a fresh ClickHouse; it prints every
run, then the medians of events/s, of the per-run ratio, of the store's peak resident memory and
of the store's CPU time (user + system, all threads) per 100,000 events while draining.

    python benchmarks/store_bench.py [--events 200000] [--repeat 3]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from contextlib import suppress
from pathlib import Path

import nats
from nats.js.errors import NotFoundError

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))

from agentwatch.contract import encode_envelope, envelopes_from_stdin  # noqa: E402

CAPTURES = ROOT / "tests" / "fixtures" / "claude-code-2.1.330-captures.jsonl"
BIN = Path(sys.executable).parent


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def build_messages(n: int) -> list[tuple[str, str, bytes]]:
    payloads = [json.loads(line)["payload"] for line in CAPTURES.read_text().splitlines() if line.strip()]
    out: list[tuple[str, str, bytes]] = []
    i = 0
    while len(out) < n:
        raw = json.dumps(payloads[i % len(payloads)]).encode()
        i += 1
        for subject, env in envelopes_from_stdin(raw, {}, host="bench"):
            out.append((subject, env["id"], encode_envelope(env)))
    return out[:n]


async def publish(url: str, messages: list[tuple[str, str, bytes]]) -> None:
    from agentwatch.bus.streams import ensure_stream

    nc = await nats.connect(url)
    js = nc.jetstream()
    await ensure_stream(js, {})
    for subject, msg_id, body in messages:
        await nc.publish(subject, body, headers={"Nats-Msg-Id": msg_id})
    await nc.flush()
    while (await js.stream_info("GENIE")).state.messages < len(messages):
        await asyncio.sleep(0.1)
    await nc.close()


def cpu_seconds(pid: int) -> float:
    """User plus system CPU seconds the process has used so far (all its threads)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def drain_time(
    url: str, durable: str, total: int, proc: subprocess.Popen[bytes], timeout: float
) -> tuple[float, float]:
    """Seconds from the first delivery to nothing pending and nothing unacked, and the consumer
    process's CPU seconds over the same span."""
    nc = await nats.connect(url)
    js = nc.jetstream()
    start: float | None = None
    cpu_start = 0.0
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                raise RuntimeError(f"{durable} exited early with code {proc.returncode}")
            try:
                info = await js.consumer_info("GENIE", durable)
            except NotFoundError:
                await asyncio.sleep(0.05)
                continue
            delivered = int(info.delivered.stream_seq or 0)
            if start is None and delivered > 0:
                start = time.monotonic()
                cpu_start = cpu_seconds(proc.pid)
            if (
                start is not None
                and info.num_pending == 0
                and info.num_ack_pending == 0
                and delivered >= total
            ):
                return time.monotonic() - start, cpu_seconds(proc.pid) - cpu_start
            await asyncio.sleep(0.05)
    finally:
        await nc.close()
    raise RuntimeError(f"{durable} did not drain within {timeout:.0f}s")


async def drop_consumers(url: str) -> None:
    """A fresh start for the next run: both durables begin again at the first message."""
    nc = await nats.connect(url)
    js = nc.jetstream()
    for durable in ("agentwatch-store", "naive-store"):
        with suppress(NotFoundError):
            await js.delete_consumer("GENIE", durable)
    await nc.close()


def peak_rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def run_consumer(
    cmd: list[str], env: dict[str, str], url: str, durable: str, total: int
) -> tuple[float, float, float]:
    """(drain seconds, peak RSS in MB, CPU seconds while draining) of one consumer process."""
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        seconds, cpu = asyncio.run(drain_time(url, durable, total, proc, timeout=600))
        rss = peak_rss_mb(proc.pid)
    finally:
        proc.terminate()
        try:
            _, err = proc.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            _, err = proc.communicate()
        if proc.returncode not in (0, -15) and err:
            sys.stderr.write(err.decode(errors="replace")[-2000:])
    return seconds, rss, cpu


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--events", type=int, default=200_000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    n = args.events
    print(f"building {n:,} envelopes from the captured payloads ...", flush=True)
    messages = build_messages(n)
    avg = sum(len(b) for _, _, b in messages) / n
    with tempfile.TemporaryDirectory() as tmp:
        port = free_port()
        url = f"nats://127.0.0.1:{port}"
        server = subprocess.Popen(
            [str(BIN / "nats-server"), "-a", "127.0.0.1", "-p", str(port), "-js", "-sd", f"{tmp}/js"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            time.sleep(0.5)
            t0 = time.monotonic()
            asyncio.run(publish(url, messages))
            print(
                f"published {n:,} envelopes (avg {avg:.0f} bytes) in {time.monotonic() - t0:.1f}s", flush=True
            )
            base = {k: v for k, v in os.environ.items() if not k.startswith(("AGENTWATCH_", "GENIE_"))}
            runs: list[tuple[float, float, float, float, float]] = []
            header = f"{'run':<5}{'agentwatch store':>22}{'naive reference':>22}{'ratio':>8}{'store RSS':>12}"
            print(f"{header}{'store CPU/100k':>16}")
            for i in range(args.repeat):
                asyncio.run(drop_consumers(url))
                ours_env = dict(base, AGENTWATCH_NATS_URL=url, AGENTWATCH_DATA_DIR=f"{tmp}/ours{i}")
                ours, ours_rss, ours_cpu = run_consumer(
                    [str(BIN / "agentwatch"), "store"], ours_env, url, "agentwatch-store", n
                )
                naive_env = dict(base, NAIVE_NATS_URL=url, NAIVE_CLICKHOUSE_DIR=f"{tmp}/naive{i}")
                naive_cmd = [sys.executable, str(ROOT / "benchmarks" / "naive_store.py")]
                naive, _, _ = run_consumer(naive_cmd, naive_env, url, "naive-store", n)
                per_100k = ours_cpu / n * 100_000
                runs.append((n / ours, n / naive, naive / ours, ours_rss, per_100k))
                line = f"{i + 1:<5}{n / ours:>15,.0f} ev/s{n / naive:>15,.0f} ev/s{naive / ours:>7.2f}x"
                print(f"{line}{ours_rss:>9.0f} MB{per_100k:>14.2f} s", flush=True)
        finally:
            server.terminate()
            server.wait()
    med = [statistics.median(r[k] for r in runs) for k in range(5)]
    print(
        f"median of {len(runs)}: agentwatch store {med[0]:,.0f} events/s, "
        f"naive reference {med[1]:,.0f} events/s, ratio {med[2]:.2f}x, store peak RSS {med[3]:.0f} MB, "
        f"store CPU {med[4]:.2f} s per 100,000 events"
    )
    print("targets: >= 50,000 events/s and >= 4x the naive reference")


if __name__ == "__main__":
    main()
