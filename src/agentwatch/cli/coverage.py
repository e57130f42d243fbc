"""`agentwatch coverage`: how complete the record is, per session and overall.

Each hook numbers its session's events; the store's `coverage` view compares what was numbered
with what arrived. Sessions below 100% come first: their missing events were emitted and never
stored (still in a spool, or lost), and `agentwatch spool flush` on that host may bring them in.
"""

from __future__ import annotations

import argparse
from typing import Any

from agentwatch.cli.errors import require
from agentwatch.format import human_bytes, truncate

COLUMNS = ("session", "host", "events", "stored", "missing", "coverage", "unpaired", "open subs", "ended",
           "spool")  # fmt: skip


def _row(r: dict[str, Any]) -> list[str]:
    pct = r["coverage_pct"]
    return [
        truncate(str(r["session_id"]), 36),
        truncate(str(r["host"]), 20),
        str(r["max_seq"]),
        str(r["stored"]),
        str(r["missing"]),
        "-" if pct is None else f"{float(pct):.1f}%",
        str(r["unpaired_calls"]),
        str(r["open_subagents"]),
        "yes" if r["ended"] else "no",
        human_bytes(float(r["spool_bytes"] or 0)),
    ]


def cmd_coverage(args: argparse.Namespace) -> int:
    require("coverage", "tui", "nats", "orjson")
    from agentwatch.cli.sql import run_sql
    from agentwatch.store import queries

    query = queries.coverage(args.limit, below_only=args.incomplete)
    rows = run_sql(query.sql, params=query.params).dicts()
    total = run_sql(queries.COVERAGE_TOTAL.sql)
    table = [list(COLUMNS), *(_row(r) for r in rows)]
    widths = [max(len(line[i]) for line in table) for i in range(len(COLUMNS))]
    for n, line in enumerate(table):
        print(
            "  ".join(
                cell.ljust(w) if i < 2 else cell.rjust(w)
                for i, (cell, w) in enumerate(zip(line, widths, strict=True))
            ).rstrip()
        )
        if n == 0:
            print("  ".join("-" * w for w in widths))
    sessions, emitted, stored, missing, pct = total.rows[0]
    overall = "-" if pct is None else f"{float(pct):.2f}%"
    print(f"overall: {stored:,} of {emitted:,} numbered events stored in {sessions:,} sessions, "
          f"{missing:,} missing: {overall}")  # fmt: skip
    if missing:
        print(
            "missing events may still be in a hook's spool: `agentwatch spool flush` on that host sends them"
        )
    return 0


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    coverage = sub.add_parser(
        "coverage",
        help="how complete the record is: events emitted and never stored, per session",
        description="How complete the record is, per session and overall: the hook numbers each "
        "session's events, the store compares what was numbered with what arrived. Sessions below "
        "100% first.",
    )
    coverage.add_argument("--limit", type=int, default=50, help="sessions to list (default 50)")
    coverage.add_argument(
        "--incomplete",
        action="store_true",
        help="only sessions below 100%%, or with unpaired calls or open subagents",
    )
    coverage.set_defaults(func=cmd_coverage)
