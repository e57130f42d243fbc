"""The store's writes of Claude Code's OpenTelemetry records (014_otel.sql): log records, metric
data points and spans, one insert per table and request, of the ids not stored yet.

Rows come in as dicts of column values (consumers/otlp_decode.py makes them), times as Unix
nanoseconds; they go to ClickHouse as JSONEachRow. A record's id is a hash of its content, so a
request posted again (an exporter retrying after a timeout) finds its ids stored and inserts
nothing: one primary-key lookup per table and request.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import orjson

from agentwatch.store.writes import INSERT_SETTINGS

if TYPE_CHECKING:
    from clickhouse_connect.driver.client import Client

TABLES = {"logs": "otel_logs", "metrics": "otel_metrics", "traces": "otel_spans"}
# Columns holding Unix nanoseconds in the rows handed here, written as DateTime64(9) text.
TIME_COLUMNS = ("timestamp", "start_time", "end_time", "time")
_LOOKUP_CHUNK = 2000


def nanos_text(nanos: int) -> str:
    """Unix nanoseconds as ClickHouse's DateTime64(9) text (UTC)."""
    seconds, fraction = divmod(max(0, int(nanos)), 1_000_000_000)
    when = dt.datetime.fromtimestamp(seconds, dt.UTC)
    return when.strftime("%Y-%m-%d %H:%M:%S.") + f"{fraction:09d}"


def _body(row: Mapping[str, Any]) -> bytes:
    out = dict(row)
    for column in TIME_COLUMNS:
        if column in out:
            out[column] = nanos_text(out[column])
    return orjson.dumps(out)


def stored_ids(client: Client, table: str, ids: Sequence[str]) -> set[str]:
    """Which of `ids` `table` holds (its primary key is the id)."""
    found: set[str] = set()
    for at in range(0, len(ids), _LOOKUP_CHUNK):
        chunk = list(ids[at : at + _LOOKUP_CHUNK])
        rows = client.query(
            f"SELECT id FROM {table} WHERE id IN {{ids:Array(String)}}",  # noqa: S608 - a name of TABLES
            parameters={"ids": chunk},
        ).result_rows
        found.update(str(r[0]) for r in rows)
    return found


def insert_otel(client: Client, signal: str, rows: Sequence[Mapping[str, Any]]) -> int:
    """Insert the rows of one signal (logs, metrics, traces) whose id is not stored yet, each id
    once; returns how many were inserted."""
    table = TABLES[signal]
    if not rows:
        return 0
    seen = stored_ids(client, table, sorted({str(r["id"]) for r in rows}))
    fresh: list[bytes] = []
    for row in rows:
        if row["id"] in seen:
            continue
        seen.add(row["id"])
        fresh.append(_body(row))
    if fresh:
        client.raw_insert(table, insert_block=b"\n".join(fresh), fmt="JSONEachRow", settings=INSERT_SETTINGS)
    return len(fresh)
