"""What a rollup's materialized views cost the store's insert of API messages: CPU of
`insert_usage` (store/usage.py: the lookup of the stored copies, then one insert into `usage_in`
and one into `cost_states`) on a fresh embedded store, with every view the migrations create, and
the same with the views named by --without dropped (the reference, measured in the same run).

The messages: --messages API messages (default 100,000) of sessions of 200 messages (random ids),
a quarter of them a subagent's, two models, one second apart, inserted in batches of 2,000, each
batch with a cost-state of each of its sessions. Each measurement runs in its own process (the
embedded engine is one per process), the two kinds in turn, --repeat times; printed: each run's
CPU seconds (user + system) and wall time, the medians, and the ratio.

    python benchmarks/usage_insert_bench.py [--messages 100000] [--repeat 3]
        [--without session_totals_usage_mv,session_totals_states_mv]
"""

from __future__ import annotations

import argparse
import datetime as dt
import random
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))

from agentwatch.store.client import connect  # noqa: E402
from agentwatch.store.migrations import apply_migrations  # noqa: E402
from agentwatch.store.usage import COST_STATE_COLUMNS, USAGE_COLUMNS, UsageRows, insert_usage  # noqa: E402

BATCH = 2_000
SESSION = 200
START = dt.datetime(2026, 11, 1, tzinfo=dt.UTC)


def messages(count: int) -> list[list[Any]]:
    """`count` rows of USAGE_COLUMNS."""
    rnd = random.Random(7)  # noqa: S311 - reproducible session ids, not a secret
    ids = [f"{rnd.getrandbits(64):016x}" for _ in range(count // SESSION + 1)]
    rows = []
    for i in range(count):
        s = i // SESSION
        row = {
            "session_id": ids[s], "message_id": f"msg_{i}", "request_id": f"req_{i}",
            "timestamp": START + dt.timedelta(seconds=i), "agent": f"agent-{s % 50}", "team": f"team-{s % 5}",
            "agent_id": "" if i % 4 else f"sub-{s}", "host": "host-1", "model": ["opus", "sonnet"][i % 2],
            "input_tokens": 100, "output_tokens": 50 + i % 7, "cache_read_tokens": 1000, "cost_usd": 0.01,
            "envelope_id": f"env_{i}", "version": 1, "harness": "claude-code",
        }  # fmt: skip
        rows.append([row[name] if name in row else _EMPTY[kind] for name, kind in USAGE_COLUMNS])
    return rows


# The value of each column type the rows above leave out.
_EMPTY: dict[str, Any] = {
    "String": "", "LowCardinality(String)": "", "UInt64": 0, "Bool": False, "Nullable(Float64)": None,
}  # fmt: skip


def cost_states(batch: list[list[Any]]) -> list[list[Any]]:
    """A cost-state of each session of `batch` (COST_STATE_COLUMNS), at its last message."""
    last = {row[0]: row[3] for row in batch}
    values = {
        "agent": "agent-0",
        "team": "team-0",
        "host": "host-1",
        "total_cost_usd": 1.0,
        "model_usage": "{}",
    }
    out = []
    for n, (session, at) in enumerate(last.items()):
        row = {
            **values,
            "session_id": session,
            "timestamp": at,
            "envelope_id": f"{session}-{at}",
            "version": n,
        }
        out.append([row[name] if name in row else _EMPTY.get(kind, 0) for name, kind in COST_STATE_COLUMNS])
    return out


def measure(count: int, without: list[str]) -> tuple[float, float]:
    """(CPU seconds, wall seconds) of inserting `count` messages into a fresh store."""
    rows = messages(count)
    with tempfile.TemporaryDirectory() as tmp:
        client = connect(f"chdb://{tmp}/db")
        apply_migrations(client)
        for view in without:
            client.command(f"DROP VIEW IF EXISTS {view}")
        usage = resource.getrusage(resource.RUSAGE_SELF)
        cpu, wall = usage.ru_utime + usage.ru_stime, time.perf_counter()
        for at in range(0, len(rows), BATCH):
            batch = rows[at : at + BATCH]
            insert_usage(client, UsageRows(batch, cost_states(batch), []))
        usage = resource.getrusage(resource.RUSAGE_SELF)
        return usage.ru_utime + usage.ru_stime - cpu, time.perf_counter() - wall


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--messages", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--without", default="session_totals_usage_mv,session_totals_states_mv")
    parser.add_argument("--child", choices=("with", "without"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    dropped = [v for v in args.without.split(",") if v]
    if args.child:
        cpu, wall = measure(args.messages, dropped if args.child == "without" else [])
        print(f"{cpu:.3f} {wall:.3f}")
        return 0
    taken: dict[str, list[tuple[float, float]]] = {"with": [], "without": []}
    for run in range(args.repeat):
        for kind in ("without", "with"):
            command = [sys.executable, __file__, "--child", kind, "--messages", str(args.messages)]
            out = subprocess.run(
                [*command, "--without", args.without], check=True, capture_output=True, text=True
            )
            cpu, wall = (float(v) for v in out.stdout.split())
            taken[kind].append((cpu, wall))
            print(f"run {run + 1}, {kind} {args.without}: CPU {cpu:.2f} s, wall {wall:.2f} s", flush=True)
    medians = {kind: statistics.median(c for c, _ in runs) for kind, runs in taken.items()}
    per = 100_000 / args.messages
    print(
        f"median CPU per 100,000 API messages: with every view {medians['with'] * per:.2f} s, without "
        f"{args.without} {medians['without'] * per:.2f} s: {medians['with'] / medians['without']:.2f}x"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
