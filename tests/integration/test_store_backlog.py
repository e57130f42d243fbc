"""The collector draining a backlog of the hook's own envelopes: every message acknowledged as soon
as its batch is stored, none left for JetStream to redeliver after the ack wait.

As the issue reproduced it: `agentwatch store` (the store and the watchdog, as `agentwatch up` runs
them) on a fresh bus while the installed hook sends every captured payload; the envelopes
collected from `genie.>`; the store stopped; copies published with fresh ids; the store started
again and the durable consumers' info read while it drains.

The stall it guards against came from the bus's limit on what it holds for one slow connection
(nats-server's `max_pending`, 64 MB by default): pull requests that asked again for what was
already on its way let the store's and the watchdog's deliveries pile up past it under a backlog,
the server cut the connection, and what it held waited for the ack wait. The backlog here is a
quarter of the issue's 200,000, so the server's limit is a quarter of its default too (16 MB):
the same pile-up, in a quarter of the time.
"""

from __future__ import annotations

import asyncio
import json
import re
import time
from datetime import datetime
from pathlib import Path
from typing import Any

import nats

from agentwatch.bus.streams import STORE_DURABLE, STREAM_NAME
from agentwatch.contract import new_event_id
from tests.conftest import CAPTURES, clean_env, hook_settled, load_fixture_file, run_emit
from tests.integration.test_store import Service, sql_rows
from tests.services import Collector, NatsServer

BACKLOG = 50_000
SERVER_LIMITS = "max_pending: 16MB\n"
# "2026-11-24 00:48:29,585 DEBUG agentwatch.store: stored 4999 events, 1 messages in 212 ms"
_STORED = re.compile(r"^(\S+ \S+) DEBUG agentwatch\.store: stored (\d+) events, (\d+) messages")

Envelope = tuple[str, dict[str, str], bytes]


def hook_envelopes(env: dict[str, str], url: str) -> list[Envelope]:
    """(subject, headers, body) of what the installed hook sends for every captured payload."""
    records = load_fixture_file(CAPTURES)
    seen = Collector(url)
    try:
        for rec in records:
            assert run_emit(json.dumps(rec["payload"]).encode(), dict(env, **rec["hook_env"])).returncode == 0
        assert hook_settled(env["AGENTWATCH_DATA_DIR"]), "the hook's children did not finish sending"
        msgs = seen.settle()
    finally:
        seen.close()
    assert len(msgs) >= len(records)
    return [(m.subject, dict(m.headers or {}), m.data) for m in msgs]


async def publish_copies(url: str, envelopes: list[Envelope], count: int) -> None:
    """`count` copies, each with a fresh id in its body and its Nats-Msg-Id, re-encoded compactly."""
    nc = await nats.connect(url)
    try:
        for i in range(count):
            subject, headers, body = envelopes[i % len(envelopes)]
            env = json.loads(body)
            env["id"] = new_event_id()
            data = json.dumps(env, separators=(",", ":"), ensure_ascii=False).encode()
            await nc.publish(subject, data, headers={**headers, "Nats-Msg-Id": env["id"]})
        await nc.flush()
    finally:
        await nc.close()


async def watch_drain(url: str, total: int, timeout: float) -> tuple[float, list[dict[str, Any]]]:
    """Read the store's durable's info every 0.1 s until the store's has delivered `total` messages and
    holds none unacknowledged: (wall-clock time of that reading, every reading)."""
    nc = await nats.connect(url)
    js = nc.jetstream()
    readings: list[dict[str, Any]] = []
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            store = await js.consumer_info(STREAM_NAME, STORE_DURABLE)
            now = time.time()
            readings.append({"at": now, "store": store})
            if store.delivered.stream_seq >= total and store.num_ack_pending == 0 and store.num_pending == 0:
                return now, readings
            await asyncio.sleep(0.1)
    finally:
        await nc.close()
    last = readings[-1]["store"] if readings else None
    raise AssertionError(f"the store did not drain in {timeout:.0f}s: {last}")


def last_insert(output: str) -> tuple[float, int]:
    """(wall-clock time of the store's last insert, rows it logged in all) from its -v log."""
    at, rows = 0.0, 0
    for line in output.splitlines():
        if match := _STORED.match(line):
            at = datetime.strptime(match[1], "%Y-%m-%d %H:%M:%S,%f").timestamp()
            rows += int(match[2]) + int(match[3])
    return at, rows


def test_a_backlog_of_hook_envelopes_drains_without_waiting_for_the_ack_wait(tmp_path: Path) -> None:
    server = NatsServer(tmp_path / "nats", config=SERVER_LIMITS).start()
    env = clean_env(AGENTWATCH_DATA_DIR=str(tmp_path / "data"), AGENTWATCH_NATS_URL=server.url)
    hook = clean_env(AGENTWATCH_DATA_DIR=str(tmp_path / "hook"), AGENTWATCH_NATS_URL=server.url)
    try:
        first = Service(["store"], env)  # creates the durable, as a running collector has it
        try:
            first.wait_ready()
            envelopes = hook_envelopes(hook, server.url)
        finally:
            code, output = first.stop()
        assert code == 0, output
        asyncio.run(publish_copies(server.url, envelopes, BACKLOG))
        total = len(envelopes) + BACKLOG
        store = Service(["store", "-v"], env)
        try:
            store.wait_ready()
            drained_at, readings = asyncio.run(watch_drain(server.url, total, timeout=90))
            query = "SELECT (SELECT count() FROM events FINAL) + (SELECT count() FROM messages FINAL) AS n"
            stored = int(sql_rows(env, query)[0]["n"])
        finally:
            code, output = store.stop()
        assert code == 0, output[-3000:]
    finally:
        server.stop()
    assert stored == total
    inserted_at, rows = last_insert(output)
    assert rows == BACKLOG, f"the restarted store logged {rows} rows inserted"
    limit = readings[0]["store"].config.max_ack_pending
    states = [(r["store"].num_redelivered, r["store"].num_ack_pending) for r in readings]
    bad = [(i, state) for i, state in enumerate(states) if state[0] or state[1] >= limit]
    assert not bad, f"(reading, (redelivered, ack pending)) at the limit or redelivered: {bad[:5]}"
    # Each message delivered once (a redelivery takes a sequence), to the store and the watchdog
    # beside it alike: the watchdog reads the store's deliveries.
    delivered = readings[-1]["store"].delivered
    assert delivered.consumer_seq == delivered.stream_seq, delivered
    late = drained_at - inserted_at
    assert late <= 1.0, f"the last acknowledgement came {late:.1f}s after the last insert"
