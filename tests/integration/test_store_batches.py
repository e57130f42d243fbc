"""The store's batches follow the backlog: a fetch that found nothing more waiting in the stream is
written at once (a quiet bus is stored without waiting for a timer), and while the fetches say more
is waiting, they gather into one large insert (each insert costs ClickHouse a fixed part per table
and view, so a backlog drains with fewer, larger ones)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import nats
import pytest
from clickhouse_connect.driver.client import Client
from faststream.nats import NatsBroker

from agentwatch.bus.streams import (
    MAX_ACK_PENDING,
    STORE_DURABLE,
    STREAM_NAME,
    ensure_stream,
    prepare_stream,
    store_consumer_config,
)
from agentwatch.consumers.store import (
    BATCH_ROWS,
    FETCH_BATCH,
    INSERT_SPACING_S,
    MAX_HELD,
    StoreWriter,
    insert_spacing,
    store_router,
)
from agentwatch.store.migrations import apply_migrations
from tests.integration.test_store import consumer_state, envelopes, publish, split_counts, wait_until
from tests.services import NatsServer

# Far longer than any test here waits: a batch written before it was not held by the timer.
LONG_GATHER_S = 60.0


@pytest.fixture
def ch(chdb_database: Client) -> Client:
    apply_migrations(chdb_database)
    return chdb_database


@asynccontextmanager
async def store(url: str, client: Client, fetch_batch: int) -> AsyncIterator[StoreWriter]:
    writer = StoreWriter(client, flush_seconds=LONG_GATHER_S)
    broker = NatsBroker(url, logger=None)
    broker.include_router(store_router(writer, fetch_batch=fetch_batch))
    await broker.start()
    writer.start()
    try:
        yield writer
    finally:
        for sub in broker.subscribers:
            await sub.stop()
        await writer.stop()
        await broker.stop()


async def test_an_event_on_a_quiet_bus_is_stored_at_once(nats_server: NatsServer, ch: Client) -> None:
    first, second = envelopes(2)
    async with store(nats_server.url, ch, fetch_batch=5000) as writer:
        for n, message in enumerate((first, second), 1):
            sent = time.monotonic()
            await publish(nats_server.url, [message])
            while writer.stats.stored + writer.stats.messages < n:
                assert time.monotonic() - sent < 10.0, f"event {n} not stored 10s after it was sent"
                await asyncio.sleep(0.02)
        assert writer.stats.batches == 2
    assert await consumer_state(nats_server.url) == (0, 0, 0)


async def test_a_steady_flow_is_written_once_a_second(nats_server: NatsServer, ch: Client) -> None:
    """A fetch ends every 0.2 s while events trickle in, each with nothing more waiting: written one
    by one, that would be five inserts a second, each paying the fixed cost of every table and view."""
    flow = envelopes(60)
    async with store(nats_server.url, ch, fetch_batch=5000) as writer:
        started = time.monotonic()
        for n, message in enumerate(flow):  # 20 a second for 3 s
            await asyncio.sleep(max(0.0, started + n / 20 - time.monotonic()))
            await publish(nats_server.url, [message])
        await wait_until(lambda: writer.stats.stored + writer.stats.messages >= len(flow), timeout=10)
        took = time.monotonic() - started
    assert writer.stats.batches <= took / INSERT_SPACING_S + 1, (writer.stats.batches, took)
    assert took < 3.0 + 2 * INSERT_SPACING_S, f"the flow was stored {took - 3:.1f}s after its last event"


def test_the_spacing_of_inserts_is_a_setting() -> None:
    assert INSERT_SPACING_S == 1.0
    assert insert_spacing({}) == INSERT_SPACING_S
    assert insert_spacing({"AGENTWATCH_STORE_INSERT_MS": "250"}) == 0.25
    for unusable in ("0", "-5", "soon", ""):  # not a positive number of ms: the default
        assert insert_spacing({"AGENTWATCH_STORE_INSERT_MS": unusable}) == INSERT_SPACING_S


async def test_a_backlog_gathers_into_one_insert(nats_server: NatsServer, ch: Client) -> None:
    backlog = envelopes(3000)
    await publish(nats_server.url, backlog)
    started = time.monotonic()
    async with store(nats_server.url, ch, fetch_batch=500) as writer:
        await wait_until(lambda: writer.stats.stored + writer.stats.messages >= len(backlog), timeout=30)
        took = time.monotonic() - started
        # Six fetches of 500: the first five left more waiting, the last found the stream empty.
        assert writer.stats.batches == 1
        assert (writer.stats.stored, writer.stats.messages) == split_counts(backlog)
    assert took < LONG_GATHER_S / 2, f"the backlog waited {took:.0f}s for the gathering timer"
    assert await consumer_state(nats_server.url) == (0, 0, 0)


async def test_an_earlier_versions_durable_gets_room_for_two_batches(nats_server: NatsServer) -> None:
    """The durable is created only where it is missing, so its limit would stay the old one (40,000,
    below what the writer holds under a backlog): the collector's start raises it."""
    nc = await nats.connect(nats_server.url)
    try:
        js = nc.jetstream()
        await ensure_stream(js, {})
        old = store_consumer_config({})
        old.max_ack_pending = 40_000
        await js.add_consumer(STREAM_NAME, old)
        await prepare_stream(nats_server.url, {})
        info = await js.consumer_info(STREAM_NAME, STORE_DURABLE)
    finally:
        await nc.close()
    assert info.config.max_ack_pending == MAX_ACK_PENDING
    assert MAX_ACK_PENDING >= MAX_HELD + 2 * FETCH_BATCH >= 2 * BATCH_ROWS
