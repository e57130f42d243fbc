"""The read-only query service: SQL over NATS request/reply (bus/query.py says the shape),
answered by the process that owns the store's ClickHouse (the embedded engine allows one process).

Read-only is enforced by the engine (readonly=1 on the client): writes, DDL, SYSTEM and settings
changes fail there with its message. Parameters are bound by ClickHouse, never formatted in.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

import orjson
from faststream.nats import NatsRouter
from faststream.nats.annotations import NatsMessage

from agentwatch.bus.query import QUERY_QUEUE, QUERY_SUBJECT, decode_request, fit_reply
from agentwatch.store.queries import QUERY_MAX_ROWS, run_query

if TYPE_CHECKING:
    from clickhouse_connect.driver.client import Client


def query_router(client: Client) -> NatsRouter:
    router = NatsRouter()
    lock = asyncio.Lock()  # one query at a time on the shared read-only session

    @router.subscriber(
        QUERY_SUBJECT,
        queue=QUERY_QUEUE,
        title="query",
        description="Read-only SQL over the event history, request/reply.",
    )
    async def answer(msg: NatsMessage) -> bytes:
        request = decode_request(msg.body, QUERY_MAX_ROWS)
        if isinstance(request, str):
            return orjson.dumps({"error": request})
        sql, params, max_rows = request
        async with lock:
            reply = await asyncio.to_thread(run_query, client, sql, params, max_rows)
        return fit_reply(reply)

    return router
