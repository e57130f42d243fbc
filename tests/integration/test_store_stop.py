"""Stopping the store and reading the stream back: what was fetched is never left in flight, and
the watchdog's rebuild reads exactly the range of the stream it asks for."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import nats
import pytest
from clickhouse_connect.driver.client import Client
from faststream.nats import NatsBroker

from agentwatch.bus.streams import STORE_DURABLE, STREAM_NAME, read_range
from agentwatch.consumers.app import stop_consuming
from agentwatch.consumers.store import StoreWriter, store_router
from agentwatch.store.migrations import apply_migrations
from tests.integration.test_store import envelopes, final_counts, publish, split_counts, wait_until
from tests.services import NatsServer


@pytest.fixture
def ch(chdb_database: Client) -> Client:
    apply_migrations(chdb_database)
    return chdb_database


async def consumer(url: str) -> Any:
    nc = await nats.connect(url)
    try:
        return await nc.jetstream().consumer_info(STREAM_NAME, STORE_DURABLE)
    finally:
        await nc.close()


async def stop_as_up_does(broker: NatsBroker, writer: StoreWriter, seconds: float) -> bool:
    """The collector's shutdown (consumers/app.py), then the connection's."""
    done = await stop_consuming(broker, writer, seconds)
    await broker.stop()
    return done


async def test_stop_hands_back_what_clickhouse_did_not_take(nats_server: NatsServer, ch: Client) -> None:
    messages = envelopes(300)
    n_events, n_msgs = split_counts(messages)
    await publish(nats_server.url, messages)

    def away(*_: Any) -> None:
        raise ConnectionError("ClickHouse is away")

    writer = StoreWriter(ch, insert=away)
    broker = NatsBroker(nats_server.url, logger=None)
    broker.include_router(store_router(writer))
    await broker.start()
    writer.start()
    await wait_until(lambda: writer.stats.received == len(messages) and writer.stats.insert_failures > 0)
    assert not await stop_as_up_does(broker, writer, 1.0), "nothing could be written"
    # Handed back (a nak): JetStream counts them unacknowledged until it delivers them again, which
    # it does at once to the next store, without the ack wait (30 s) in between.
    info = await consumer(nats_server.url)
    assert info.num_ack_pending == len(messages) and info.num_pending == 0, info
    started = time.monotonic()
    writer = StoreWriter(ch)
    broker = NatsBroker(nats_server.url, logger=None)
    broker.include_router(store_router(writer))
    await broker.start()
    writer.start()
    await wait_until(lambda: writer.stats.stored + writer.stats.messages >= len(messages), timeout=20)
    assert time.monotonic() - started < 10
    assert await stop_as_up_does(broker, writer, 10.0)
    assert final_counts(ch) == (n_events, n_events, n_msgs, 0)


async def test_read_range_reads_the_sequences_asked_and_none_before_since(nats_server: NatsServer) -> None:
    await publish(nats_server.url, envelopes(20))
    await asyncio.sleep(1.1)
    since = time.time()
    await publish(nats_server.url, envelopes(20))
    nc = await nats.connect(nats_server.url)
    try:
        js = nc.jetstream()
        middle = await read_range(js, 5, 32)
        assert [m.metadata.sequence.stream for m in middle] == list(range(5, 33))
        recent = await read_range(js, 5, 32, since=since)
        assert [m.metadata.sequence.stream for m in recent] == list(range(21, 33))
        assert await read_range(js, 10, 9) == []
        assert [c.name for c in await js.consumers_info(STREAM_NAME)] == [], "its consumers are gone"
    finally:
        await nc.close()
