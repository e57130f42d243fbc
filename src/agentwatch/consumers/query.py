"""The read-only query service: SQL over NATS request/reply (bus/query.py says the shape),
answered by the process that owns the store's ClickHouse (the embedded engine allows one process).

What may run is store/guard.py's (one read statement, no output clause, format or settings);
ClickHouse keeps each reader's client read-only (readonly=1) and bounds its time and memory.
Parameters are bound by ClickHouse, never formatted in. Readers run side by side, each on a
client of its own: a slow question never holds a quick one behind it, and a question that finds
every reader busy for a few seconds is told so instead of queueing without end.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, TypeVar

import orjson
from faststream.nats import NatsRouter
from faststream.nats.annotations import NatsMessage

from agentwatch import config
from agentwatch.bus.query import QUERY_QUEUE, QUERY_SUBJECT, decode_request, fit_reply
from agentwatch.store.queries import QUERY_MAX_ROWS, run_query

if TYPE_CHECKING:
    from clickhouse_connect.driver.client import Client

T = TypeVar("T")

# How long a question waits for a free reader before it is told the store is busy, and how many
# may wait at once for each reader (beyond that, busy at once).
READER_WAIT_S = 5.0
WAITING_PER_READER = 4
DEFAULT_READERS = 3


class Busy(Exception):
    """Every reader is taken and stays so: the question is not run."""


class Readers:
    """Up to `size` read-only clients, made when first needed (each a chDB handle of its own, or
    a server session), each used by one question at a time on a thread of the readers' own."""

    def __init__(self, connect: Callable[[], Client], size: int = DEFAULT_READERS) -> None:
        self._connect = connect
        self.size = max(1, size)
        self._free: list[Client] = [connect()]  # the first now: a store that cannot read fails at start
        self._made = list(self._free)
        self._slots: asyncio.Semaphore | None = None
        self._waiting = 0
        self._threads = concurrent.futures.ThreadPoolExecutor(self.size, thread_name_prefix="aw-reader")
        self.busy = 0  # questions told the store is busy (a test counts them)

    async def run(self, work: Callable[[Client], T], wait_s: float = READER_WAIT_S) -> T:
        """`work` on a free reader's client, in the readers' threads; Busy when none frees up."""
        if self._slots is None:
            self._slots = asyncio.Semaphore(self.size)
        if self._slots.locked() and self._waiting >= self.size * WAITING_PER_READER:
            self.busy += 1
            raise Busy(self._busy_text())
        self._waiting += 1
        try:
            await asyncio.wait_for(self._slots.acquire(), wait_s)
        except TimeoutError:
            self.busy += 1
            raise Busy(self._busy_text()) from None
        finally:
            self._waiting -= 1
        loop = asyncio.get_running_loop()
        try:
            client = self._free.pop() if self._free else await loop.run_in_executor(self._threads, self._new)
            try:
                return await loop.run_in_executor(self._threads, work, client)
            finally:
                self._free.append(client)
        finally:
            self._slots.release()

    @classmethod
    def of(cls, url: str, environ: Mapping[str, str]) -> Readers:
        """The readers of the store at `url`, as many as AGENTWATCH_QUERY_READERS says."""
        from agentwatch.store.client import connect_readonly

        size = config.number(environ, "AGENTWATCH_QUERY_READERS", DEFAULT_READERS)
        return cls(lambda: connect_readonly(url, environ), size)

    def _new(self) -> Client:
        client = self._connect()
        self._made.append(client)
        return client

    def _busy_text(self) -> str:
        return (
            f"the store is busy: its {self.size} readers are all answering other questions; try again "
            "in a moment (AGENTWATCH_QUERY_READERS sets how many run at once)"
        )

    def close(self) -> None:
        self._threads.shutdown(wait=False, cancel_futures=True)
        for client in self._made:
            client.close()
        self._made, self._free = [], []


def query_router(readers: Readers) -> NatsRouter:
    router = NatsRouter()

    @router.subscriber(
        QUERY_SUBJECT,
        queue=QUERY_QUEUE,
        # Questions are taken side by side: those running, those waiting for a reader, and room
        # for as many again to be told at once that the store is busy.
        max_workers=readers.size * (1 + WAITING_PER_READER) * 2,
        title="query",
        description="Read-only SQL over the event history, request/reply.",
    )
    async def answer(msg: NatsMessage) -> bytes:
        request = decode_request(msg.body, QUERY_MAX_ROWS)
        if isinstance(request, str):
            return orjson.dumps({"error": request})
        sql, params, max_rows = request
        try:
            reply = await readers.run(lambda client: run_query(client, sql, params, max_rows))
        except Busy as exc:
            return orjson.dumps({"error": str(exc), "refused": True, "busy": True})
        return fit_reply(reply)

    return router
