"""SQL over NATS request/reply: the request both `agentwatch sql` and the dashboard send, and the
reply the store's query service sends back.

Request (JSON): {"sql": "...", "params": {name: value}, "max_rows": N}; `params` fill the SQL's
`{name:Type}` placeholders, bound by ClickHouse. Reply (JSON): {"columns", "types", "rows",
"truncated", "elapsed_ms"} or {"error": ClickHouse's message}.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

import orjson

QUERY_SUBJECT = "agentwatch.query"
QUERY_QUEUE = "agentwatch-query"
# A reply is one NATS message: it must stay under the server's max_payload (1 MiB by default).
REPLY_MAX_BYTES = 900_000


class QueryUnanswered(LookupError):
    """No query service answered on the bus (none running, or it took too long)."""


def encode_request(sql: str, params: Mapping[str, Any] | None, max_rows: int) -> bytes:
    return orjson.dumps({"sql": sql, "params": dict(params or {}), "max_rows": max_rows})


def decode_request(body: bytes, default_rows: int) -> tuple[str, dict[str, Any], int] | str:
    """(sql, params, max_rows) of a request, or what is wrong with it."""
    try:
        request = orjson.loads(body)
    except orjson.JSONDecodeError:
        request = None
    sql = request.get("sql") if isinstance(request, dict) else None
    if not isinstance(request, dict) or not isinstance(sql, str):
        return 'request must be JSON {"sql": "...", "params": {...}, "max_rows": N}'
    params = request.get("params") or {}
    if not isinstance(params, dict):
        return "params must be a JSON object of {name: value}"
    max_rows = request.get("max_rows", default_rows)
    return sql, params, max_rows if isinstance(max_rows, int) else default_rows


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


async def request(
    url: str,
    sql: str,
    params: Mapping[str, Any] | None = None,
    *,
    max_rows: int,
    timeout: float,
    environ: Mapping[str, str] = os.environ,
) -> dict[str, Any]:
    """Ask the store's query service; raises BusUnreachable or QueryUnanswered."""
    from nats.errors import NoRespondersError
    from nats.errors import TimeoutError as NatsTimeout

    from agentwatch.bus.connect import connect

    nc = await connect(url, environ, name="agentwatch-sql")
    try:
        reply = await nc.request(QUERY_SUBJECT, encode_request(sql, params, max_rows), timeout=timeout)
    except NoRespondersError:
        raise QueryUnanswered(
            "no store answers queries on this bus: start one with `agentwatch up`"
        ) from None
    except NatsTimeout:
        raise QueryUnanswered(f"the query service did not answer within {timeout:.0f}s") from None
    finally:
        await nc.close()
    result: dict[str, Any] = orjson.loads(reply.data)
    return result
