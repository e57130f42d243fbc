"""The read-only query service: SQL over NATS request/reply, answered by the process that owns
the store's ClickHouse (the embedded engine allows one process).

Request (JSON): {"sql": "...", "max_rows": N}. Reply (JSON): {"columns", "types", "rows",
"truncated", "elapsed_ms"} or {"error": ClickHouse's message}. Read-only is enforced by the engine
(readonly=1 on the client): writes, DDL, SYSTEM and settings changes fail there with its message.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import decimal
import ipaddress
import math
import time
import uuid
from typing import TYPE_CHECKING, Any

import orjson
from faststream.nats import NatsRouter
from faststream.nats.annotations import NatsMessage

from agentwatch.clickhouse import QUERY_MAX_ROWS
from agentwatch.consumers import bus

if TYPE_CHECKING:
    from clickhouse_connect.driver.client import Client


def _plain(value: Any) -> Any:
    """A JSON-friendly form of what ClickHouse returns."""
    if isinstance(value, dt.datetime):
        if value.tzinfo is None:
            return (
                value.isoformat(timespec="milliseconds") + "Z"
                if value.microsecond
                else value.isoformat() + "Z"
            )
        return value.isoformat()
    if isinstance(value, (dt.date, dt.time)):
        return value.isoformat()
    if isinstance(value, decimal.Decimal):
        return float(value)
    if isinstance(value, (uuid.UUID, ipaddress.IPv4Address, ipaddress.IPv6Address)):
        return str(value)
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, float) and math.isnan(value):  # NaN has no JSON form
        return None
    return value


def run_query(client: Client, sql: str, max_rows: int = QUERY_MAX_ROWS) -> dict[str, Any]:
    """Run one read-only query; never raises for a bad query (the reply carries the error)."""
    sql = sql.strip().rstrip(";").strip()
    if not sql:
        return {"error": "empty query"}
    started = time.perf_counter()
    try:
        result = client.query(sql)
    except Exception as exc:
        message = str(exc).strip().split("Stack trace", 1)[0].strip()
        return {"error": message[:4000]}
    rows = result.result_rows
    limit = max(1, min(max_rows, QUERY_MAX_ROWS))
    return {
        "columns": list(result.column_names),
        "types": [t.name for t in result.column_types],
        "rows": [[_plain(v) for v in row] for row in rows[:limit]],
        "truncated": len(rows) > limit,
        "elapsed_ms": round((time.perf_counter() - started) * 1000, 1),
    }


# A reply is one NATS message: it must stay under the server's max_payload (1 MiB by default).
REPLY_MAX_BYTES = 900_000


def fit_reply(reply: dict[str, Any], limit: int = REPLY_MAX_BYTES) -> bytes:
    """The reply as JSON, its rows cut (and marked) where the whole would not fit one message."""
    body = orjson.dumps(reply)
    rows = reply.get("rows")
    if len(body) <= limit or not isinstance(rows, list):
        return body
    low, high = 0, len(rows)
    while low < high:
        mid = (low + high + 1) // 2
        if len(orjson.dumps({**reply, "rows": rows[:mid]})) <= limit:
            low = mid
        else:
            high = mid - 1
    note = f"cut to {low} of {len(rows)} rows to fit one NATS message: add a LIMIT or select fewer columns"
    return orjson.dumps({**reply, "rows": rows[:low], "truncated": True, "note": note})


def query_router(client: Client) -> NatsRouter:
    router = NatsRouter()
    lock = asyncio.Lock()  # one query at a time on the shared read-only session

    @router.subscriber(
        bus.QUERY_SUBJECT,
        queue=bus.QUERY_QUEUE,
        title="query",
        description="Read-only SQL over the event history, request/reply.",
    )
    async def answer(msg: NatsMessage) -> bytes:
        try:
            request = orjson.loads(msg.body)
            sql = request["sql"] if isinstance(request, dict) else None
        except (orjson.JSONDecodeError, KeyError):
            sql = None
        if not isinstance(sql, str):
            return orjson.dumps({"error": 'request must be JSON {"sql": "..."}'})
        max_rows = request.get("max_rows", QUERY_MAX_ROWS)
        max_rows = max_rows if isinstance(max_rows, int) else QUERY_MAX_ROWS
        async with lock:
            reply = await asyncio.to_thread(run_query, client, sql, max_rows)
        return fit_reply(reply)

    return router
