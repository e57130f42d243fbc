"""SQL over NATS request/reply: the request both `agentwatch sql` and the dashboard send, and the
reply the store's query service sends back.

Request (JSON): {"sql": "...", "params": {name: value}, "max_rows": N}; `params` fill the SQL's
`{name:Type}` placeholders, bound by ClickHouse. Reply (JSON): {"columns", "types", "rows",
"truncated", "elapsed_ms"} or {"error": ClickHouse's message}.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import os
import threading
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import orjson

if TYPE_CHECKING:
    from nats.aio.client import Client as NatsClient

QUERY_SUBJECT = "agentwatch.query"
QUERY_QUEUE = "agentwatch-query"
# A reply is one NATS message: it must stay under the server's max_payload (1 MiB by default).
REPLY_MAX_BYTES = 900_000


class QueryUnanswered(LookupError):
    """No query service answered on the bus (none running, or it took too long)."""


CLOSED_BEFORE_ANSWER = "the history was closed before the query service answered"


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
    """Ask the store's query service on a connection of its own (one question, then closed);
    raises BusUnreachable or QueryUnanswered. A long-lived asker uses QueryClient."""
    from agentwatch.bus.connect import connect

    nc = await connect(url, environ, name="agentwatch-sql")
    try:
        return await ask(nc, sql, params, max_rows=max_rows, timeout=timeout)
    finally:
        await nc.close()


async def ask(
    nc: NatsClient, sql: str, params: Mapping[str, Any] | None, *, max_rows: int, timeout: float
) -> dict[str, Any]:
    """One question on an open connection; the reply as the query service sent it."""
    from nats.errors import NoRespondersError
    from nats.errors import TimeoutError as NatsTimeout

    try:
        reply = await nc.request(QUERY_SUBJECT, encode_request(sql, params, max_rows), timeout=timeout)
    except NoRespondersError:
        raise QueryUnanswered(
            "no store answers queries on this bus: start one with `agentwatch up`"
        ) from None
    except NatsTimeout:
        raise QueryUnanswered(f"the query service did not answer within {timeout:.0f}s") from None
    result: dict[str, Any] = orjson.loads(reply.data)
    return result


class QueryClient:
    """Questions to the query service over one NATS connection kept for the client's life.

    A synchronous face (the dashboard's worker threads and the commands call `request`) over an
    event loop in a thread of its own, which holds the connection. The first question connects; a
    connection the bus closed (or a connect that failed) is made again by the next question, so a
    question never waits for reconnect attempts. `close` ends the connection and the thread; a
    question still out then ends with QueryUnanswered rather than waiting for a loop that is gone
    (a dashboard quitting while a worker asks would otherwise never exit).
    """

    def __init__(
        self, url: str, environ: Mapping[str, str] = os.environ, *, name: str = "agentwatch-read"
    ) -> None:
        self.url = url
        self.environ = environ
        self.name = name
        self.connections = 0  # opened over this client's life (tests count them)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._nc: NatsClient | None = None
        self._lock = threading.Lock()
        self._asked: set[concurrent.futures.Future[dict[str, Any]]] = set()  # questions out on the loop

    def _start(self) -> asyncio.AbstractEventLoop:
        """The loop (started if need be); called with the lock held."""
        if self._loop is None:
            loop = asyncio.new_event_loop()
            thread = threading.Thread(target=loop.run_forever, name=self.name, daemon=True)
            thread.start()
            self._loop, self._thread = loop, thread
        return self._loop

    async def _connection(self) -> NatsClient:
        if self._nc is None or self._nc.is_closed:
            from agentwatch.bus.connect import connect

            self._nc = await connect(self.url, self.environ, name=self.name)
            self.connections += 1
        return self._nc

    async def _ask(
        self, sql: str, params: Mapping[str, Any] | None, max_rows: int, timeout: float
    ) -> dict[str, Any]:
        nc = await self._connection()
        return await ask(nc, sql, params, max_rows=max_rows, timeout=timeout)

    def request(
        self, sql: str, params: Mapping[str, Any] | None = None, *, max_rows: int, timeout: float
    ) -> dict[str, Any]:
        """The reply to one question; raises BusUnreachable or QueryUnanswered."""
        with self._lock:  # a question goes to the loop `close` has not taken away yet
            loop = self._start()
            future = asyncio.run_coroutine_threadsafe(self._ask(sql, params, max_rows, timeout), loop)
            self._asked.add(future)
        try:
            return future.result()
        except concurrent.futures.CancelledError:
            raise QueryUnanswered(CLOSED_BEFORE_ANSWER) from None
        finally:
            with self._lock:
                self._asked.discard(future)

    def close(self) -> None:
        with self._lock:
            loop, thread, asked = self._loop, self._thread, self._asked
            self._loop = self._thread = None  # the next question starts a loop of its own
            self._asked = set()
        if loop is None or thread is None:
            return

        async def shut() -> None:
            out = asyncio.all_tasks() - {asyncio.current_task()}
            for task in out:
                task.cancel()  # the questions still out end (their callers get QueryUnanswered)
            if out:
                await asyncio.wait(out, timeout=2)
            if self._nc is not None and not self._nc.is_closed:
                with contextlib.suppress(Exception):
                    await self._nc.close()

        with contextlib.suppress(Exception):
            asyncio.run_coroutine_threadsafe(shut(), loop).result(5)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(5)
        if not thread.is_alive():
            loop.close()
        self._nc = None
        for future in asked:  # any the loop never ran
            with contextlib.suppress(concurrent.futures.InvalidStateError):
                future.set_exception(QueryUnanswered(CLOSED_BEFORE_ANSWER))
