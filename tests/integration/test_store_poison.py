"""Bodies ClickHouse would refuse: found before the insert (or, for the few only ClickHouse sees,
by one read of the batch into a table that keeps nothing), dead-lettered once each with a reason,
without holding the good events back; their batch kept in progress while it takes long; fields out
of range corrected and stored, not lost.

Each test publishes to a real nats-server's GENIE stream and counts events in and rows out of
embedded ClickHouse."""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

import nats
import pytest
from clickhouse_connect.driver.client import Client

from agentwatch.bus.streams import ensure_stream
from agentwatch.store.migrations import apply_migrations
from agentwatch.store.writes import insert_batch, insert_dead_letters
from tests.integration.test_store import (
    Message,
    consumer_state,
    envelopes,
    final_counts,
    publish,
    running_store,
    split_counts,
    wait_until,
)
from tests.services import NatsServer


@pytest.fixture
def ch(chdb_database: Client) -> Client:
    apply_migrations(chdb_database)
    return chdb_database


_ENVELOPE = (
    b'{"v":1,"id":"%s","timestamp":"2026-11-22T03:00:00.000Z","event":"PreToolUse","kind":"tool_call",'
    b'"agent":"x","team":"t","text":"%s","seq":1,"redacted":0,"truncated":false,"data":{}}'
)


def poison(count: int) -> list[Message]:
    """`count` bodies that no insert could take, of every kind a probe found; a few of them start
    as the emitter writes an envelope, so no cheap prefix check tells them apart."""

    def env(i: int, text: bytes = b"") -> bytes:
        return _ENVELOPE % (f"01POISON{i:05d}".encode(), text)

    kinds = [
        lambda i: env(i).replace(b'"seq":1', b'"seq":NaN'),  # not JSON
        lambda i: env(i).replace(b'"seq":1', b'"seq":Infinity'),
        lambda i: env(i, b"\xff\xfe"),  # not UTF-8
        lambda i: env(i, b"\\ud800"),  # half a surrogate pair
        lambda i: env(i, b"\\q"),  # no such escape
        lambda i: env(i) + b" trailing",
        lambda i: env(i) + b'\n{"v":1,"id":"smuggled"}',  # a second row in one body
        lambda i: env(i)[:-9],  # cut short
        lambda i: env(i).replace(b'"v":1', b'"v":"1"'),  # not an envelope
        lambda i: env(i).replace(b'"v":1', b'"v":2'),
        lambda i: env(i).replace(b'"agent":"x"', b'"agent":7'),
        lambda i: env(i).replace(b'"agent":"x",', b""),
        lambda i: b"[" + env(i) + b"]",
        # ClickHouse alone refuses a field given twice before it has read every column.
        lambda i: env(i).replace(b'"team":"t"', b'"team":"t","text":"a"'),
    ]
    return [("genie.tool.x.call", f"poison-{i}", kinds[i % len(kinds)](i)) for i in range(count)]


async def test_poison_bodies_neither_hold_good_events_back_nor_dead_letter_twice(
    nats_server: NatsServer, ch: Client
) -> None:
    good = envelopes(400, start=time.time() - 5)
    n_events, n_msgs = split_counts(good)
    bad = poison(200)
    mixed: list[Message] = []
    for i, message in enumerate(good):  # one poison body after every second good one
        mixed.append(message)
        if i % 2:
            mixed.append(bad[i // 2])
    published: dict[str, float] = {}
    async with running_store(nats_server.url, ch) as writer:
        nc = await nats.connect(nats_server.url)
        await ensure_stream(nc.jetstream(), {})
        for subject, msg_id, body in mixed:
            published[msg_id] = time.time()
            await nc.publish(subject, body, headers={"Nats-Msg-Id": msg_id})
            await asyncio.sleep(0.005)  # a live flow (3 s), not a backlog
        await nc.flush()
        await nc.close()
        await wait_until(
            lambda: writer.stats.dead_letters + writer.stats.stored + writer.stats.messages >= 600
        )
        await asyncio.sleep(0.5)
    assert final_counts(ch) == (n_events, n_events, n_msgs, 200)
    stored_at = {
        str(r[0]): float(r[1])
        for r in ch.query(
            "SELECT id, toFloat64(stored_at) FROM events FINAL WHERE source = 'hook'"
        ).result_rows
    }
    delays = [
        float(stored_at[msg_id]) - published[msg_id]
        for s, msg_id, _ in good
        if not s.startswith("genie.msg.")
    ]
    assert len(delays) == n_events and max(delays) < 5.0, f"slowest good event: {max(delays):.1f} s"
    print(f"good events stored {min(delays):.2f} to {max(delays):.2f} s after their publish")
    rows = ch.query("SELECT stream_seq, reason, body FROM dead_letters").result_rows
    assert len({int(r[0]) for r in rows}) == 200, "each poison body dead-lettered once"
    assert all(
        str(r[1]).startswith(("not an agentwatch envelope: ", "rejected by ClickHouse: ")) for r in rows
    )
    doubled = sum(1 for i in range(200) if i % 14 == 13)
    assert sum("rejected by ClickHouse" in str(r[1]) for r in rows) == doubled, "the doubled fields"
    pending, ack_pending, redelivered = await consumer_state(nats_server.url)
    assert (pending, ack_pending, redelivered) == (0, 0, 0)
    assert (writer.stats.stored, writer.stats.messages, writer.stats.dead_letters) == (n_events, n_msgs, 200)


async def test_a_redelivered_poison_body_is_dead_lettered_once(ch: Client) -> None:
    rows = [("genie.tool.x.call", 7, 1, "not JSON", b"\xff"), ("genie.tool.x.call", 8, 1, "not JSON", b"{")]
    assert len(insert_dead_letters(ch, rows)) == 2
    again = [("genie.tool.x.call", 7, 2, "not JSON", b"\xff"), ("genie.tool.x.call", 9, 1, "not JSON", b"[")]
    assert [r[1] for r in insert_dead_letters(ch, again)] == [9]
    # Not from JetStream (no sequence): nothing to know it by, kept each time.
    assert len(insert_dead_letters(ch, [("s", 0, 0, "r", b"x"), ("s", 0, 0, "r", b"x")])) == 2
    assert final_counts(ch)[3] == 5


async def test_a_slow_batch_is_kept_in_progress(
    nats_server: NatsServer, ch: Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An insert that outlives the ack wait: its messages are not delivered again meanwhile."""
    monkeypatch.setenv("AGENTWATCH_ACK_WAIT_SECONDS", "2")
    messages = envelopes(300)
    slow = {"calls": 0}

    def slow_insert(client: Client, events: list[bytes], msgs: list[bytes]) -> None:
        slow["calls"] += 1
        if slow["calls"] == 1:
            time.sleep(5)  # two and a half ack waits
        insert_batch(client, events, msgs)

    await publish(nats_server.url, messages)
    async with running_store(nats_server.url, ch, insert=slow_insert) as writer:
        await wait_until(lambda: writer.stats.stored + writer.stats.messages >= len(messages))
        await asyncio.sleep(0.5)
        assert writer.stats.received == len(messages), "nothing was delivered twice"
    _, ack_pending, redelivered = await consumer_state(nats_server.url)
    assert (ack_pending, redelivered) == (0, 0)


async def test_fields_out_of_range_are_stored_corrected(nats_server: NatsServer, ch: Client) -> None:
    """What ClickHouse would refuse or wrap (a time out of range, numbers out of their columns,
    wrong types in typed fields) is stored with the arrival time and zeros, the values it came
    with kept in `data`; nothing is dead-lettered."""
    cases: dict[str, dict[str, Any]] = {
        "year9999": {"timestamp": "9999-12-31T00:00:00.000Z"},
        "year1900": {"timestamp": "1900-01-01T00:00:00.000Z"},
        "month13": {"timestamp": "2026-13-45T99:99:99.000Z"},
        "notime": {"timestamp": "yesterday"},
        "seq2e70": {"seq": 2**70},
        "seqneg": {"seq": -5},
        "seqstr": {"seq": "x"},
        "redacted": {"redacted": -1},
        "spool": {"spool_bytes": 1.5},
        "duration": {"duration_ms": "abc"},
        "truncated": {"truncated": "maybe"},
    }
    base = json.loads(_ENVELOPE % (b"X", b""))
    messages: list[Message] = []
    for name, fields in cases.items():
        env = {**base, "id": f"01FIX{name}", **fields}
        body = json.dumps(env, separators=(",", ":")).encode()
        messages.append(("genie.tool.x.call", env["id"], body))
    before = time.time()
    await publish(nats_server.url, messages)
    async with running_store(nats_server.url, ch) as writer:
        await wait_until(lambda: writer.stats.stored >= len(cases))
    after = time.time()
    assert final_counts(ch) == (len(cases), len(cases), 0, 0)
    rows = {
        str(r[0]): r[1:]
        for r in ch.query(
            "SELECT id, toFloat64(timestamp), seq, redacted, spool_bytes, duration_ms, truncated, "
            "JSONExtractRaw(data, 'agentwatch_corrected') FROM events FINAL"
        ).result_rows
    }
    for name, fields in cases.items():
        when, seq, redacted, spool, duration, truncated, note = rows[f"01FIX{name}"]
        corrected = json.loads(str(note))
        for field, value in fields.items():
            assert corrected[field] == (float(value) if field == "seq" and value == 2**70 else value), name
        if "timestamp" in fields:
            assert before - 1 <= float(when) <= after + 1, f"{name}: the arrival time"
        else:
            assert float(when) == pytest.approx(1795316400.0), f"{name}: its own time kept"
        assert (seq, redacted, spool, duration, truncated) == (
            0 if "seq" in fields else 1,
            0,
            0,
            None,
            False,
        ), name
