"""A lost stream: GENIE deleted under traffic (by hand, or a JetStream whose storage was reset)
while `agentwatch store` runs. The store recreates the stream and its durable, says so in one line,
and stores every event the bus took after that. (What is published while no stream is there is
refused by the bus; keeping it is the hook's spool's work.)"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import nats
from nats.js.errors import NotFoundError

from agentwatch.bus.streams import STORE_DURABLE, STREAM_NAME
from tests.integration.test_store import Service, _store_env, envelopes, wait_rows
from tests.services import NatsServer


async def _traffic(url: str, seconds: float, delete_after: float) -> tuple[list[str], list[str], float]:
    """Publish one event every 20 ms for `seconds`, deleting GENIE after `delete_after`: (the ids
    the stream acknowledged before the deletion, those it acknowledged after, how long after the
    deletion the first was acknowledged)."""
    events = [e for e in envelopes(int(seconds / 0.02) + 10) if not e[0].startswith("genie.msg.")]
    nc = await nats.connect(url)
    js = nc.jetstream()
    before: list[str] = []
    after: list[str] = []
    deleted_at = 0.0
    gap = 0.0
    started = time.monotonic()
    try:
        for subject, msg_id, body in events:
            now = time.monotonic()
            if now - started > seconds:
                break
            if not deleted_at and now - started > delete_after:
                await js.delete_stream(STREAM_NAME)
                deleted_at = now
            try:
                await js.publish(subject, body, headers={"Nats-Msg-Id": msg_id}, timeout=0.5)
            except Exception:  # no stream: the bus refuses it (the hook would spool it)
                await asyncio.sleep(0.02)
                continue
            if deleted_at:
                gap = gap or time.monotonic() - deleted_at
                after.append(msg_id)
            else:
                before.append(msg_id)
            await asyncio.sleep(0.02)
        stream = await js.stream_info(STREAM_NAME)
        consumer = await js.consumer_info(STREAM_NAME, STORE_DURABLE)
        assert stream.config.subjects == ["genie.>"] and consumer.config.durable_name == STORE_DURABLE
    except NotFoundError as exc:
        raise AssertionError("the stream or the store's durable was not recreated") from exc
    finally:
        await nc.close()
    return before, after, gap


def test_a_deleted_stream_is_recreated_and_every_event_after_is_stored(tmp_path: Path) -> None:
    server = NatsServer(tmp_path / "nats").start()
    env = _store_env(tmp_path, server.url)
    store = Service(["store", "--no-watchdog"], env)
    try:
        store.wait_ready()
        before, after, gap = asyncio.run(_traffic(server.url, seconds=10.0, delete_after=2.0))
        assert len(before) > 50 and len(after) > 100, (len(before), len(after))
        ids = ",".join(f"'{i}'" for i in after)
        wait_rows(env, f"SELECT count() AS n FROM events FINAL WHERE id IN ({ids})", len(after), timeout=30)  # noqa: S608
        print(
            f"{len(after)} events acknowledged after the deletion, the first {gap:.1f} s after it: all stored"
        )
    finally:
        code, output = store.stop()
        server.stop()
    assert code == 0, output
    said = [line for line in output.splitlines() if "recreated" in line]
    assert len(said) == 1 and "GENIE stream" in said[0] and STORE_DURABLE in said[0], output
