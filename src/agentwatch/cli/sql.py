"""`agentwatch sql`: read-only SQL over the whole history, as a table, CSV, JSON or JSON lines."""

from __future__ import annotations

import argparse
import csv
import io
import json
import math
import sys
from typing import TYPE_CHECKING, Any

from agentwatch.cli.errors import CliError, missing_extra, require
from agentwatch.format import truncate
from agentwatch.store.answer import Answer, HistoryError, QueryFailed, plain_rows
from agentwatch.store.queries import QUERY_MAX_ROWS

if TYPE_CHECKING:
    from agentwatch.cli.sources import History


def _tidy(value: Any) -> Any:
    """A float at 15 significant digits, what a Float64 holds for sure: a sum such as
    0.0023057800000000003 prints as 0.00230578 (in lists too); any other value as it is."""
    if isinstance(value, float) and math.isfinite(value):
        return float(f"{value:.15g}")
    if isinstance(value, list):
        return [_tidy(v) for v in value]
    return value


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


def render(answer: Answer, fmt: str, out: io.TextIOBase | Any = sys.stdout) -> None:
    """Write an answer in `fmt` (table, csv, json or jsonl)."""
    columns = list(answer.columns)
    rows = [[_tidy(v) for v in row] for row in plain_rows(answer)]
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
        if answer.note:
            note += f", {answer.note}"
        elif answer.truncated:
            note += f", cut at {len(rows)}: add a LIMIT or use --max-rows"
        out.write(note + f", {answer.elapsed_ms} ms)\n")


def history(timeout: float | None = None) -> History:
    """The read side's source for a command (CliError when its extra is missing)."""
    try:
        from agentwatch.cli.sources import History
    except ImportError as exc:
        raise missing_extra(exc, "sql", "tui") from None
    return History() if timeout is None else History(timeout=timeout)


def run_sql(
    sql: str,
    max_rows: int = QUERY_MAX_ROWS,
    timeout: float | None = None,
    params: dict[str, Any] | None = None,
) -> Answer:
    """The answer to `sql`, from wherever the history is; CliError when the query fails (exit
    status 1) or the history cannot be reached (2), with the read side's message."""
    source = history(timeout)
    try:
        return source.query(sql, params, max_rows=max_rows)
    except ImportError as exc:
        raise missing_extra(exc, "sql", "tui") from None
    except QueryFailed as exc:
        raise CliError(str(exc), 1) from None
    except HistoryError as exc:
        raise CliError(str(exc)) from None
    finally:
        source.close()


def cmd_sql(args: argparse.Namespace) -> int:
    """The answer on stdout. For csv, json and jsonl (read by programs) a cut result is said on
    stderr; one cut to fit the bus's message, not at --max-rows, also exits 1: it is not what
    was asked for, and a script must not take it for the whole."""
    require("sql", "tui", "nats", "orjson")
    sql = args.sql if args.sql != "-" else sys.stdin.read()
    answer = run_sql(sql, args.max_rows)
    render(answer, args.format)
    if args.format == "table" or not answer.truncated:
        return 0
    if answer.note:
        print(f"agentwatch sql: {answer.note}", file=sys.stderr)
        return 1
    print(f"agentwatch sql: cut at {len(answer)} rows: add a LIMIT or use --max-rows", file=sys.stderr)
    return 0


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    sql = sub.add_parser(
        "sql",
        help='read-only SQL over the event history: agentwatch sql "SELECT ..."',
        description="Read-only SQL over the whole event history (ClickHouse's dialect; the tables and "
        "views are in docs/queries.md). One SELECT, WITH, SHOW, DESCRIBE, EXISTS or EXPLAIN at a time; "
        "writes, DDL, INTO OUTFILE, KILL, FORMAT and SETTINGS are refused.",
    )
    sql.add_argument("sql", help="the query, or - to read it from stdin")
    sql.add_argument("--format", choices=("table", "csv", "json", "jsonl"), default="table")
    sql.add_argument("--max-rows", type=int, default=QUERY_MAX_ROWS, help="rows to return at most")
    sql.set_defaults(func=cmd_sql)
