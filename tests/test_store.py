"""The store: JetStream to ClickHouse, with fault tests that count events in and rows out.

In-process tests run the real FastStream store router on a real nats-server and embedded chDB
(one engine per process: a module-scoped engine, a database per test). Subprocess tests run the
installed `agentwatch up` / `agentwatch store` and query through `agentwatch sql`.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import signal
import subprocess
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager, suppress
from pathlib import Path
from typing import Any

import nats
import pytest
from clickhouse_connect.driver.client import Client
from faststream.nats import NatsBroker

from agentwatch.consumers.bus import STORE_DURABLE, STREAM_NAME, ensure_stream
from agentwatch.consumers.store import StoreWriter, store_router
from agentwatch.contract import encode_envelope, envelopes_from_stdin
from agentwatch.store.schema import apply_migrations, insert_batch
from tests.conftest import (
    CAPTURES,
    NatsServer,
    clean_env,
    free_port,
    load_fixture_file,
    run_cli,
    run_emit,
    tool,
)

Message = tuple[str, str, bytes]


# --- parts ------------------------------------------------------------------------------------


def envelopes(count: int, *, start: float | None = None) -> list[Message]:
    """`count` real envelopes (captured payloads through the contract), 1 ms apart."""
    payloads = [rec["payload"] for rec in load_fixture_file(CAPTURES)]
    base = (time.time() - 60) if start is None else start
    out: list[Message] = []
    for i in itertools.count():
        if len(out) >= count:
            break
        raw = json.dumps(payloads[i % len(payloads)]).encode()
        for subject, env in envelopes_from_stdin(raw, {}, host="test", now=base + i / 1000):
            out.append((subject, env["id"], encode_envelope(env)))
    return out[:count]


def split_counts(messages: list[Message]) -> tuple[int, int]:
    msgs = sum(1 for s, _, _ in messages if s.startswith("genie.msg."))
    return len(messages) - msgs, msgs


async def publish(url: str, messages: list[Message], *, msg_ids: bool = True) -> None:
    nc = await nats.connect(url)
    await ensure_stream(nc.jetstream(), {})
    for subject, msg_id, body in messages:
        await nc.publish(subject, body, headers={"Nats-Msg-Id": msg_id} if msg_ids else None)
    await nc.flush()
    await nc.close()


async def consumer_state(url: str) -> tuple[int, int, int]:
    """(pending, ack pending, redelivered) of the store's durable consumer."""
    nc = await nats.connect(url)
    try:
        info = await nc.jetstream().consumer_info(STREAM_NAME, STORE_DURABLE)
        return int(info.num_pending), int(info.num_ack_pending), int(info.num_redelivered)
    finally:
        await nc.close()


@pytest.fixture
def ch(chdb_database: Client) -> Client:
    """A test database with the schema applied."""
    apply_migrations(chdb_database)
    return chdb_database


@asynccontextmanager
async def running_store(url: str, client: Client, **writer_options: Any) -> AsyncIterator[StoreWriter]:
    writer = StoreWriter(client, **writer_options)
    broker = NatsBroker(url, logger=None)
    broker.include_router(store_router(writer))
    await broker.start()
    writer.start()
    try:
        yield writer
    finally:
        for sub in broker.subscribers:
            await sub.stop()
        await writer.stop()
        await broker.stop()


async def wait_until(check: Callable[[], bool], timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError("condition not met in time")
        await asyncio.sleep(0.05)


def final_counts(client: Client) -> tuple[int, int, int, int]:
    """(events rows under FINAL, distinct event ids, message rows under FINAL, dead letters)."""
    row = client.query(
        "SELECT (SELECT count() FROM events FINAL), (SELECT uniqExact(id) FROM events), "
        "(SELECT count() FROM messages FINAL), (SELECT count() FROM dead_letters)"
    ).result_rows[0]
    return int(row[0]), int(row[1]), int(row[2]), int(row[3])


# --- in process -------------------------------------------------------------------------------


async def test_every_event_stored_once_and_acked(nats_server: NatsServer, ch: Client) -> None:
    messages = envelopes(3000)
    n_events, n_msgs = split_counts(messages)
    assert n_msgs > 0, "the captures include SendMessage deliveries"
    await publish(nats_server.url, messages)
    async with running_store(nats_server.url, ch) as writer:
        await wait_until(lambda: writer.stats.stored + writer.stats.messages >= len(messages))
        await wait_until(lambda: writer.backlog == 0)
    assert final_counts(ch) == (n_events, n_events, n_msgs, 0)
    pending, ack_pending, redelivered = await consumer_state(nats_server.url)
    assert (pending, ack_pending, redelivered) == (0, 0, 0)


async def test_same_message_delivered_twice_is_one_row(nats_server: NatsServer, ch: Client) -> None:
    messages = envelopes(500)
    n_events, n_msgs = split_counts(messages)
    # Without message ids JetStream keeps both copies: the store sees every envelope twice.
    await publish(nats_server.url, messages + messages, msg_ids=False)
    async with running_store(nats_server.url, ch) as writer:
        await wait_until(lambda: writer.stats.stored + writer.stats.messages >= 2 * len(messages))
    assert final_counts(ch) == (n_events, n_events, n_msgs, 0)
    tool_rows = ch.query("SELECT count(), uniqExact(session_id, tool_use_id) FROM tool_calls").result_rows[0]
    assert tool_rows[0] == tool_rows[1], "the tool_calls view never counts a redelivery twice"


async def test_poison_messages_in_the_middle_of_a_batch(nats_server: NatsServer, ch: Client) -> None:
    good = envelopes(1000)
    n_events, n_msgs = split_counts(good)
    poison: list[Message] = [
        ("genie.tool.x.call", "p1", b'{"hello": "not an envelope"}'),
        ("genie.tool.x.call", "p2", b"\xff\xfe not even JSON"),
        # Passes the cheap prefix check, but ClickHouse cannot parse it: found by bisecting.
        (
            "genie.tool.x.call",
            "p3",
            b'{"v":1,"id":"01POISON","timestamp":"2026-11-22T03:00:00.000Z","data":{]}',
        ),
    ]
    await publish(nats_server.url, good[:500] + poison + good[500:])
    async with running_store(nats_server.url, ch) as writer:
        await wait_until(
            lambda: writer.stats.stored + writer.stats.messages + writer.stats.dead_letters >= 1003
        )
    assert final_counts(ch) == (n_events, n_events, n_msgs, 3)
    rows = ch.query("SELECT subject || ':' || toString(stream_seq), reason FROM dead_letters").result_rows
    reasons = {str(key): str(reason) for key, reason in rows}
    assert len(reasons) == 3
    text = " ".join(reasons.values())
    assert "not an agentwatch envelope" in text and "rejected by ClickHouse" in text
    bodies = {r[0] for r in ch.query("SELECT body FROM dead_letters").result_rows}
    assert '{"hello": "not an envelope"}' in bodies, "the raw body is kept for inspection"
    assert (await consumer_state(nats_server.url))[:2] == (0, 0)


async def test_clickhouse_failing_for_a_while_then_recovering(nats_server: NatsServer, ch: Client) -> None:
    messages = envelopes(2000)
    n_events, n_msgs = split_counts(messages)
    failing_until = time.monotonic() + 2.0
    calls = {"failed": 0}

    def flaky_insert(client: Client, events: list[bytes], msgs: list[bytes]) -> None:
        if time.monotonic() < failing_until:
            calls["failed"] += 1
            raise ConnectionError("Code: 210. DB::NetException: Connection refused (injected)")
        insert_batch(client, events, msgs)

    await publish(nats_server.url, messages)
    async with running_store(nats_server.url, ch, insert=flaky_insert, retry_max_seconds=0.5) as writer:
        await wait_until(lambda: writer.stats.stored + writer.stats.messages >= len(messages))
        assert writer.stats.insert_failures >= 2
    assert calls["failed"] >= 2
    assert final_counts(ch) == (n_events, n_events, n_msgs, 0)
    _, ack_pending, redelivered = await consumer_state(nats_server.url)
    assert ack_pending == 0
    assert redelivered == 0, "held in progress while ClickHouse was down: nothing went back to the stream"


# --- as a user runs it ------------------------------------------------------------------------


class Service:
    """`agentwatch up` or `agentwatch store` as a subprocess."""

    def __init__(self, args: list[str], env: dict[str, str]) -> None:
        self.env = env
        self.proc = subprocess.Popen(
            [tool("agentwatch"), *args], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
        )
        self.lines: list[str] = []

    def wait_ready(self, timeout: float = 30.0) -> float:
        started = time.monotonic()
        assert self.proc.stdout is not None
        while time.monotonic() - started < timeout:
            line = self.proc.stdout.readline()
            if not line:
                raise AssertionError("exited before ready:\n" + "".join(self.lines))
            self.lines.append(line)
            if line.startswith("Ctrl-C stops"):
                return time.monotonic() - started
        raise AssertionError("not ready in time:\n" + "".join(self.lines))

    def kill(self) -> None:
        """SIGKILL: no flush, no acks for what was in flight."""
        self.proc.kill()
        self.proc.communicate(timeout=30)

    def stop(self, sig: int = signal.SIGTERM) -> tuple[int, str]:
        self.proc.send_signal(sig)
        out, _ = self.proc.communicate(timeout=60)
        return self.proc.returncode, "".join(self.lines) + (out or "")


def sql_rows(env: dict[str, str], query: str) -> list[dict[str, Any]]:
    result = run_cli("sql", query, "--format", "json", env=env)
    assert result.returncode == 0, result.stderr
    rows: list[dict[str, Any]] = json.loads(result.stdout)
    return rows


def wait_rows(env: dict[str, str], query: str, expected: int, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    count, error = -1, ""
    while time.monotonic() < deadline:
        result = run_cli("sql", query, "--format", "json", env=env)
        if result.returncode == 0:
            count = int(json.loads(result.stdout)[0]["n"])
            if count >= expected:
                return
        else:
            error = result.stderr  # the store may be reconnecting after a bus restart
        time.sleep(0.3)
    raise AssertionError(f"{query}: {count} rows, expected {expected}; last error: {error}")


def test_up_end_to_end_with_the_installed_hook(tmp_path: Path) -> None:
    env = clean_env(
        AGENTWATCH_DATA_DIR=str(tmp_path / "data"), AGENTWATCH_NATS_URL=f"nats://127.0.0.1:{free_port()}"
    )
    up = Service(["up"], env)
    try:
        ready = up.wait_ready()
        assert ready < 10, f"agentwatch up took {ready:.1f}s"
        records = load_fixture_file(CAPTURES)
        for rec in records:
            hook_env = dict(env, **rec.get("hook_env", {}))
            assert run_emit(json.dumps(rec["payload"]).encode(), hook_env).returncode == 0
        sends = [
            r
            for r in records
            if r["payload"].get("tool_name") == "SendMessage"
            and r["payload"]["hook_event_name"] == "PostToolUse"
        ]
        wait_rows(env, "SELECT count() AS n FROM events", len(records))
        wait_rows(env, "SELECT count() AS n FROM messages", len(sends))
        rows = sql_rows(
            env, "SELECT event, agent, tool_name, text, session_id, data FROM events FINAL ORDER BY timestamp"
        )
        assert len(rows) == len(records)
        assert {r["event"] for r in rows} == {r["payload"]["hook_event_name"] for r in records}
        assert any(r["text"] == "$ ls -la" and r["agent"] == "general-purpose-fd10a9f3" for r in rows)
        assert all(json.loads(r["data"])["hook_event_name"] == r["event"] for r in rows)
        # SendMessage: one event row (its PostToolUse) and one message row, never two of either.
        tool_use = sends[0]["payload"]["tool_use_id"]
        session = sends[0]["payload"]["session_id"]
        where = f"tool_use_id = '{tool_use}' AND session_id = '{session}' AND event = 'PostToolUse'"
        posts = sql_rows(env, "SELECT count() AS n FROM events FINAL WHERE " + where)  # noqa: S608 - fixture ids, not user input
        assert posts[0]["n"] == 1
        msgs = sql_rows(env, "SELECT from_agent, to_agent, summary FROM messages FINAL ORDER BY timestamp")
        assert {"from_agent": "main-3486086f", "to_agent": "researcher", "summary": "Kickoff note"} in msgs
        # tool_calls pairs PreToolUse with its result and times it.
        calls = sql_rows(
            env, "SELECT tool, status, duration_ms, text, error FROM tool_calls WHERE tool = 'Bash'"
        )
        ok = [c for c in calls if c["status"] == "ok"]
        assert ok and all(c["duration_ms"] is not None and c["duration_ms"] >= 0 for c in ok)
        # The captured failure has no PreToolUse in the fixtures: visible as unpaired, with its error.
        failed = [c for c in calls if c["error"].startswith("Exit code")]
        assert failed and failed[0]["status"] == "orphan"
        # read-only: the engine refuses writes with its own message
        refused = run_cli("sql", "DROP TABLE events", env=env)
        assert refused.returncode == 1 and "readonly" in refused.stderr.lower()
        assert "Traceback" not in refused.stderr
        bad = run_cli("sql", "SELEKT 1", env=env)
        assert bad.returncode == 1 and "Syntax error" in bad.stderr and "Traceback" not in bad.stderr
        status = run_cli("status", env=env)
        assert status.returncode == 0, status.stdout
        assert f"{len(records)} events" in status.stdout.replace(",", "")
    finally:
        code, output = up.stop()
    assert code == 0, output
    assert "stopped:" in output
    again = Service(["up"], env)
    try:
        again.wait_ready()
        wait_rows(env, "SELECT count() AS n FROM events", len(records), timeout=10)
    finally:
        again.stop()


def _store_env(tmp_path: Path, url: str) -> dict[str, str]:
    return clean_env(
        AGENTWATCH_DATA_DIR=str(tmp_path / "data"), AGENTWATCH_NATS_URL=url, AGENTWATCH_ACK_WAIT_SECONDS="3"
    )


def _wait_partial(url: str, total: int, timeout: float = 60) -> None:
    """Until the store has acknowledged some but not all of `total`."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            pending, ack_pending, _ = asyncio.run(consumer_state(url))
        except Exception:
            time.sleep(0.05)
            continue
        if 0 < pending + ack_pending < total * 0.9:
            return
        time.sleep(0.02)
    raise AssertionError("the store never got going")


def test_store_killed_mid_load_then_restarted(nats_server: NatsServer, tmp_path: Path) -> None:
    messages = envelopes(30_000)
    n_events, n_msgs = split_counts(messages)
    asyncio.run(publish(nats_server.url, messages))
    env = _store_env(tmp_path, nats_server.url)
    store = Service(["store"], env)
    store.wait_ready()
    _wait_partial(nats_server.url, len(messages))
    store.kill()
    restarted = Service(["store"], env)
    try:
        restarted.wait_ready()
        wait_rows(env, "SELECT count() AS n FROM events FINAL", n_events)
        wait_rows(env, "SELECT count() AS n FROM messages FINAL", n_msgs)
        row = sql_rows(env, "SELECT count() AS n, uniqExact(id) AS ids FROM events FINAL")[0]
        assert row == {"n": n_events, "ids": n_events}
        assert sql_rows(env, "SELECT count() AS n FROM messages FINAL")[0]["n"] == n_msgs
        assert sql_rows(env, "SELECT count() AS n FROM dead_letters")[0]["n"] == 0
    finally:
        restarted.stop()


def test_nats_restarted_mid_load(tmp_path: Path) -> None:
    server = NatsServer(tmp_path / "nats").start()
    messages = envelopes(30_000)
    n_events, n_msgs = split_counts(messages)
    asyncio.run(publish(server.url, messages))
    env = _store_env(tmp_path, server.url)
    store = Service(["store"], env)
    try:
        store.wait_ready()
        _wait_partial(server.url, len(messages))
        server.stop()
        time.sleep(1.0)
        server.start()  # same port, same JetStream directory
        wait_rows(env, "SELECT count() AS n FROM events FINAL", n_events, timeout=90)
        wait_rows(env, "SELECT count() AS n FROM messages FINAL", n_msgs, timeout=30)
        row = sql_rows(env, "SELECT count() AS n, uniqExact(id) AS ids FROM events FINAL")[0]
        assert row == {"n": n_events, "ids": n_events}
    finally:
        code, output = store.stop()
        server.stop()
    assert code == 0, output


async def test_fast_pull_fetch_is_active_on_this_nats_py(nats_server: NatsServer) -> None:
    """The store's throughput depends on it: nats-py internals it relies on must be there."""
    from nats.js.client import JetStreamContext

    from agentwatch.consumers import fastpull

    store_router(StoreWriter(None))  # type: ignore[arg-type]  # installing needs no client
    assert JetStreamContext.PullSubscription.fetch is fastpull.fast_fetch
    await publish(nats_server.url, envelopes(50))
    nc = await nats.connect(nats_server.url)
    try:
        psub = await nc.jetstream().pull_subscribe("genie.>", durable="probe", stream=STREAM_NAME)
        assert fastpull._usable(psub), "nats-py internals changed: the fast path would fall back"
        got = await psub.fetch(100, timeout=1)
        assert len(got) == 50
        with pytest.raises(nats.errors.TimeoutError):
            await psub.fetch(10, timeout=0.3)
    finally:
        await nc.close()


async def test_messages_jetstream_gives_up_on_are_dead_lettered(nats_server: NatsServer, ch: Client) -> None:
    from nats.js.api import AckPolicy as JsAckPolicy
    from nats.js.api import ConsumerConfig

    from agentwatch.consumers.store import advisory_router

    messages = envelopes(3)
    await publish(nats_server.url, messages)
    nc = await nats.connect(nats_server.url)
    js = nc.jetstream()
    await js.add_consumer(
        STREAM_NAME,
        ConsumerConfig(
            durable_name=STORE_DURABLE, ack_policy=JsAckPolicy.EXPLICIT, max_deliver=2, ack_wait=0.5
        ),
    )
    writer = StoreWriter(ch)
    broker = NatsBroker(nats_server.url, logger=None)
    broker.include_router(advisory_router(writer))
    await broker.start()
    writer.start()
    try:
        # A consumer that never acks (a store crashing on these messages, say) until JetStream gives up.
        rogue = await js.pull_subscribe_bind(STORE_DURABLE, stream=STREAM_NAME)
        for _ in range(4):
            with suppress(nats.errors.TimeoutError):
                await rogue.fetch(10, timeout=0.6)
            await asyncio.sleep(0.6)
        await wait_until(lambda: writer.stats.dead_letters >= 3, timeout=15)
    finally:
        await writer.stop()
        await broker.stop()
        await nc.close()
    rows = ch.query(
        "SELECT stream_seq, deliveries, reason, body FROM dead_letters ORDER BY stream_seq"
    ).result_rows
    assert [r[0] for r in rows] == [1, 2, 3]
    assert all(r[1] == 2 and "gave up after 2 deliveries" in r[2] for r in rows)
    assert [r[3] for r in rows] == [body.decode() for _, _, body in messages]


def test_sql_and_status_fail_fast_and_plainly_without_a_bus(tmp_path: Path) -> None:
    env = clean_env(
        AGENTWATCH_DATA_DIR=str(tmp_path), AGENTWATCH_NATS_URL=f"nats://u:hunter2@127.0.0.1:{free_port()}"
    )
    started = time.monotonic()
    result = run_cli("sql", "SELECT 1", env=env, timeout=20)
    assert time.monotonic() - started < 5
    assert result.returncode == 2
    assert "agentwatch up" in result.stderr and "Traceback" not in result.stderr
    assert "hunter2" not in result.stderr
    status = run_cli("status", env=env, timeout=20)
    assert status.returncode == 1 and "does NOT answer" in status.stdout
