"""ClickHouse's share of the store's ingest: the CPU of `insert_new` for the hook's real envelopes.

The installed `agentwatch-emit` makes the envelopes of every captured payload (as in
benchmarks/store_bench.py, which this script borrows from), and a backlog of `--events` of them
(sessions of 50 to 5,000 events, fresh ids and timestamps) is inserted with `insert_new` into a
fresh embedded store (chDB, in the process) in batches of `--batch` (50,000: what the store gathers
under a backlog). Printed: the CPU of the process (user + system, every thread: the parse, every
table, view and index written, the merges meanwhile) per 100,000 events. With `--merge`, then
`OPTIMIZE TABLE events FINAL`, and its CPU apart: what a part costs over its insert and its merge.

With `--layers`, each run also inserts the same batches twice more, each in a fresh store of its
own: without the views that read `events` (the rollups and `event_ids`: `events` alone), and
without `events_in`'s view as well (the envelopes parsed into the Null table `events_in` and
dropped: ClickHouse's parsing alone; the messages still stored). What each layer costs is the
difference: the floor under the store's ingest that no change in Python can lower.

With `--before SRC` the same inserts run with the agentwatch of another checkout's src directory
(a commit before a change), each run in a fresh process, the two interleaved `--repeat` times;
medians and the ratio of this checkout's to the other's.

    python benchmarks/insert_bench.py [--events 100000] [--batch 50000] [--repeat 5] [--merge] [--layers]
        [--before SRC]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from store_bench import backlog, local_bus, prepare

ROOT = Path(__file__).resolve().parent.parent

# One run, in a process of its own whose agentwatch is the given src directory's.
CHILD = """
import json, resource, sys, tempfile
sys.path.insert(0, sys.argv[1])
from agentwatch.store.client import connect
from agentwatch.store.migrations import apply_migrations
from agentwatch.store.writes import insert_new

def cpu():
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime

# layer: the tables whose views are dropped first, comma-joined ("": none)
batch, merge, layer = int(sys.argv[3]), sys.argv[4] == "1", sys.argv[5]
with open(sys.argv[2], "rb") as f:
    envelopes = [line.split(b" ", 1) for line in f.read().split(b"\\n") if line]
with tempfile.TemporaryDirectory() as tmp:
    client = connect(f"chdb://{tmp}/db")
    apply_migrations(client)
    for source in [table for table in layer.split(",") if table]:
        sql = (
            "SELECT dependencies_table FROM system.tables"
            " WHERE database = currentDatabase() AND name = {t:String}"
        )
        for view in client.query(sql, parameters={"t": source}).result_rows[0][0]:
            client.command(f"DROP VIEW {view}")
    start = cpu()
    for at in range(0, len(envelopes), batch):
        part = envelopes[at : at + batch]
        insert_new(client, [b for s, b in part if s != b"msg"], [b for s, b in part if s == b"msg"])
    inserted = cpu()
    if merge:
        client.command("OPTIMIZE TABLE events FINAL")
    print(json.dumps({"insert": inserted - start, "merge": cpu() - inserted}))
"""


def write_backlog(path: Path, events: int, tmp: str) -> None:
    """The backlog's bodies, one a line, each after its kind (`msg` or `ev`) and a space."""
    with local_bus(tmp) as (url, _server):
        pool = asyncio.run(prepare(url, f"{tmp}/hook"))
    with path.open("wb") as out:
        for subject, _, body in backlog(events, 0, pool):
            out.write((b"msg " if subject.startswith("genie.msg.") else b"ev ") + body + b"\n")


# --layers: the tables whose views each extra run drops (the CHILD's last argument), and its name
# in the output.
LAYERS = {
    "events": "events alone (no views on it)",
    "events,events_in": "parsing alone (events_in, no views)",
}


def run(src: Path, data: Path, batch: int, merge: bool, layer: str = "") -> dict[str, float]:
    cmd = [sys.executable, "-c", CHILD, str(src), str(data), str(batch), "1" if merge else "0", layer]
    out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
    result: dict[str, float] = json.loads(out.strip().splitlines()[-1])
    return result


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--events", type=int, default=100_000)
    parser.add_argument("--batch", type=int, default=50_000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--merge", action="store_true", help="and OPTIMIZE TABLE events FINAL after")
    parser.add_argument("--layers", action="store_true", help="and the same without the views (see above)")
    parser.add_argument("--before", metavar="SRC", default="", help="another checkout's src directory")
    args = parser.parse_args()
    trees = {"this checkout": (ROOT / "src", "")}
    if args.before:
        trees["--before"] = (Path(args.before), "")
    if args.layers:
        trees |= {name: (ROOT / "src", layer) for layer, name in LAYERS.items()}
    runs: dict[str, list[dict[str, float]]] = {name: [] for name in trees}
    with tempfile.TemporaryDirectory() as tmp:
        data = Path(tmp) / "backlog"
        write_backlog(data, args.events, tmp)
        for i in range(args.repeat):
            for name, (src, layer) in trees.items():
                runs[name].append(r := run(src, data, args.batch, args.merge, layer))
                per = {k: v * 100_000 / args.events for k, v in r.items()}
                print(
                    f"run {i + 1}: {name}: insert {per['insert']:.2f} s, merge {per['merge']:.2f} s",
                    flush=True,
                )
    print(
        f"medians of {args.repeat} runs, CPU seconds per 100,000 events"
        f" ({args.events:,} in batches of {args.batch:,}):"
    )
    medians: dict[str, dict[str, float]] = {}
    for name, results in runs.items():
        medians[name] = {
            k: statistics.median(r[k] * 100_000 / args.events for r in results) for k in results[0]
        }
        total = statistics.median((r["insert"] + r["merge"]) * 100_000 / args.events for r in results)
        medians[name]["total"] = total
        m = medians[name]
        print(f"  {name:36s} insert {m['insert']:.2f} s, merge {m['merge']:.2f} s, both {m['total']:.2f} s")
    if args.before:
        mine, other = medians["this checkout"], medians["--before"]
        print(
            f"  ratio: insert {mine['insert'] / other['insert']:.2f}x,"
            f" both {mine['total'] / other['total']:.2f}x"
        )


if __name__ == "__main__":
    main()
