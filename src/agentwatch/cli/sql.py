"""`agentwatch sql`: read-only SQL over the whole history, as a table, CSV, JSON or JSON lines."""

from __future__ import annotations

import argparse
import csv
import io
import json
import sys
from typing import Any

from agentwatch.cli.errors import CliError, missing_extra, require
from agentwatch.format import truncate
from agentwatch.store.queries import QUERY_MAX_ROWS


def _cell(value: Any) -> str:
    if value is None:
        return "NULL"
    if isinstance(value, (dict, list)):
        return json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    return str(value)


def _table(columns: list[str], rows: list[list[Any]], out: io.TextIOBase | Any) -> None:
    cells = [[_cell(v).replace("\n", "⏎") for v in r] for r in rows]
    widths = [min(60, max([len(c), *(len(r[i]) for r in cells)])) for i, c in enumerate(columns)]

    def line(values: list[str]) -> str:
        return " | ".join(truncate(v, w).ljust(w) for v, w in zip(values, widths, strict=True)).rstrip()

    out.write(line(columns) + "\n")
    out.write("-+-".join("-" * w for w in widths) + "\n")
    for r in cells:
        out.write(line(r) + "\n")


def render(result: dict[str, Any], fmt: str, out: io.TextIOBase | Any = sys.stdout) -> None:
    """Write a query's reply in `fmt` (table, csv, json or jsonl)."""
    columns: list[str] = result["columns"]
    rows: list[list[Any]] = result["rows"]
    if fmt == "json":
        records = [dict(zip(columns, r, strict=True)) for r in rows]
        out.write(json.dumps(records, ensure_ascii=False, indent=2) + "\n")
    elif fmt == "jsonl":
        for r in rows:
            out.write(
                json.dumps(dict(zip(columns, r, strict=True)), ensure_ascii=False, separators=(",", ":"))
                + "\n"
            )
    elif fmt == "csv":
        writer = csv.writer(out)
        writer.writerow(columns)
        writer.writerows([[_cell(v) for v in r] for r in rows])
    else:
        _table(columns, rows, out)
        note = f"({len(rows)} row{'s' if len(rows) != 1 else ''}"
        if result.get("note"):
            note += f", {result['note']}"
        elif result.get("truncated"):
            note += f", cut at {len(rows)}: add a LIMIT or use --max-rows"
        out.write(note + f", {result.get('elapsed_ms', 0)} ms)\n")


def run_sql(
    sql: str,
    max_rows: int = QUERY_MAX_ROWS,
    timeout: float | None = None,
    params: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The reply to `sql`, from wherever the history is; CliError when it cannot be reached."""
    try:
        from agentwatch.bus.connect import BusUnreachable
        from agentwatch.cli.sources import History
    except ImportError as exc:
        raise missing_extra(exc, "sql", "tui") from None
    history = History() if timeout is None else History(timeout=timeout)
    try:
        return history.query(sql, params, max_rows=max_rows)
    except ImportError as exc:
        raise missing_extra(exc, "sql", "tui") from None
    except (BusUnreachable, ValueError) as exc:
        raise CliError(f"cannot reach the bus: {exc}; start it with `agentwatch up`") from None
    except LookupError as exc:
        raise CliError(str(exc)) from None
    except OSError as exc:
        raise CliError(f"cannot reach {history.where}: {exc}") from None


def cmd_sql(args: argparse.Namespace) -> int:
    require("sql", "tui", "nats", "orjson")
    sql = args.sql if args.sql != "-" else sys.stdin.read()
    result = run_sql(sql, args.max_rows)
    if "error" in result:
        raise CliError(f"ClickHouse: {result['error']}", 1)
    render(result, args.format)
    return 0


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    sql = sub.add_parser(
        "sql",
        help='read-only SQL over the event history: agentwatch sql "SELECT ..."',
        description="Read-only SQL over the whole event history (ClickHouse's dialect; the tables and "
        "views are in docs/queries.md). Writes, DDL and settings changes are refused by ClickHouse.",
    )
    sql.add_argument("sql", help="the query, or - to read it from stdin")
    sql.add_argument("--format", choices=("table", "csv", "json", "jsonl"), default="table")
    sql.add_argument("--max-rows", type=int, default=QUERY_MAX_ROWS, help="rows to return at most")
    sql.set_defaults(func=cmd_sql)
