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

from agentwatch.bus.streams import STORE_DURABLE, STREAM_NAME, ensure_stream
from agentwatch.consumers.store import StoreWriter, store_router
from agentwatch.contract import encode_envelope, envelopes_from_stdin
from agentwatch.store.migrations import apply_migrations
from agentwatch.store.writes import insert_batch
from tests.conftest import CAPTURES, clean_env, free_port, load_fixture_file, run_cli, run_emit, tool
from tests.services import NatsServer

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
        await wait_until(lambda: writer.stats.received >= 2 * len(messages) and writer.backlog == 0)
        await wait_until(lambda: writer.stats.stored + writer.stats.messages >= len(messages))
        await asyncio.sleep(0.5)
    assert final_counts(ch) == (n_events, n_events, n_msgs, 0)
    assert (writer.stats.stored, writer.stats.messages) == (n_events, n_msgs), "each row counted once"
    tool_rows = ch.query("SELECT count(), uniqExact(session_id, tool_use_id) FROM tool_calls").result_rows[0]
    assert tool_rows[0] == tool_rows[1], "the tool_calls view never counts a redelivery twice"


async def test_poison_messages_in_the_middle_of_a_batch(nats_server: NatsServer, ch: Client) -> None:
    good = envelopes(1000)
    n_events, n_msgs = split_counts(good)
    poison: list[Message] = [
        ("genie.tool.x.call", "p1", b'{"hello": "not an envelope"}'),
        ("genie.tool.x.call", "p2", b"\xff\xfe not even JSON"),
        # Starts as the emitter writes an envelope, but is no JSON: found before the insert.
        (
            "genie.tool.x.call",
            "p3",
            b'{"v":1,"id":"01POISON","timestamp":"2026-11-22T03:00:00.000Z","data":{]}',
        ),
        # Valid JSON and a valid envelope to the contract, but ClickHouse refuses a field given
        # twice: found by bisecting.
        (
            "genie.tool.x.call",
            "p4",
            b'{"v":1,"id":"01POISON2","timestamp":"2026-11-22T03:00:00.000Z","event":"PreToolUse",'
            b'"kind":"tool_call","agent":"x","text":"a","text":"b"}',
        ),
    ]
    await publish(nats_server.url, good[:500] + poison + good[500:])
    async with running_store(nats_server.url, ch) as writer:
        await wait_until(
            lambda: writer.stats.stored + writer.stats.messages + writer.stats.dead_letters >= 1004
        )
    assert final_counts(ch) == (n_events, n_events, n_msgs, 4)
    assert (writer.stats.stored, writer.stats.messages) == (n_events, n_msgs)
    rows = ch.query("SELECT subject || ':' || toString(stream_seq), reason FROM dead_letters").result_rows
    reasons = {str(key): str(reason) for key, reason in rows}
    assert len(reasons) == 4
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


async def test_an_insert_retried_after_it_wrote_counts_its_rows_once(
    nats_server: NatsServer, ch: Client
) -> None:
    """The status line's stored count: an insert that wrote its rows and then failed (a reply
    lost after ClickHouse took them), retried, counts them once; so does a batch published
    twice."""
    messages = envelopes(1000)
    n_events, n_msgs = split_counts(messages)
    failed: list[int] = []

    def wrote_then_failed(client: Client, events: list[bytes], msgs: list[bytes]) -> None:
        insert_batch(client, events, msgs)
        if not failed:
            failed.append(len(events))
            raise ConnectionError("Code: 209. DB::NetException: Timeout exceeded while reading (injected)")

    await publish(nats_server.url, messages)
    await publish(nats_server.url, messages, msg_ids=False)
    async with running_store(nats_server.url, ch, insert=wrote_then_failed, retry_max_seconds=0.2) as writer:
        await wait_until(lambda: writer.stats.received >= 2 * len(messages) and writer.backlog == 0)
        await wait_until(lambda: writer.stats.stored + writer.stats.messages >= len(messages))
        await asyncio.sleep(0.5)
        assert writer.stats.insert_failures == 1 and failed
    assert final_counts(ch) == (n_events, n_events, n_msgs, 0)
    assert (writer.stats.stored, writer.stats.messages) == (n_events, n_msgs)


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
        # read-only: a write is refused before it reaches the engine, saying what readers run
        refused = run_cli("sql", "DROP TABLE events", env=env)
        assert refused.returncode == 1 and "refused: DROP is not a read" in refused.stderr
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

    from agentwatch.bus import fastpull

    store_router(StoreWriter(None))  # type: ignore[arg-type]  # installing needs no client
    assert JetStreamContext.PullSubscription.fetch is fastpull.fast_fetch
    await publish(nats_server.url, envelopes(50))
    nc = await nats.connect(nats_server.url)
    try:
        psub = await nc.jetstream().pull_subscribe("genie.>", durable="probe", stream=STREAM_NAME)
        assert fastpull._usable(psub), "nats-py internals changed: the fast path would fall back"
        got = await psub.fetch(100, timeout=1)
        assert len(got) == 50
        from agentwatch.bus.fastparse import FastParser, PulledMsg

        assert type(nc._ps) is FastParser, "nats-py internals changed: the fast parser is off"
        assert all(type(m) is PulledMsg for m in got)
        assert got[0].headers is not None and "Nats-Msg-Id" in got[0].headers
        assert got[-1].metadata.sequence.stream == 50
        with pytest.raises(nats.errors.TimeoutError):
            await psub.fetch(10, timeout=0.3)
    finally:
        await nc.close()


# --- the fast protocol parser (consumers/fastparse.py) -------------------------------------------

FAST_SID, OTHER_SID = 7, 9


def _frame(subject: str, sid: int, reply: str, headers: bytes, body: bytes) -> bytes:
    """One MSG (no header block) or HMSG frame as nats-server writes it."""
    to = f" {reply}" if reply else ""
    if not headers:
        return f"MSG {subject} {sid}{to} {len(body)}\r\n".encode() + body + b"\r\n"
    line = f"HMSG {subject} {sid}{to} {len(headers)} {len(headers) + len(body)}\r\n".encode()
    return line + headers + body + b"\r\n"


def _ack_subject(seq: int) -> str:
    return f"$JS.ACK.GENIE.agentwatch-store.1.{seq}.{seq}.1768000000000000000.{100 - seq}"


def wire_stream() -> bytes:
    """What the store's connection reads: pulled deliveries, every status a pull request gets,
    other subscriptions' messages and the other protocol operations, in one byte stream."""
    frames = [b'INFO {"server_id":"probe","max_payload":1048576,"headers":true}\r\n', b"+OK\r\n"]
    for seq, (subject, msg_id, body) in enumerate(envelopes(5), 1):
        frames.append(
            _frame(
                subject,
                FAST_SID,
                _ack_subject(seq),
                f"NATS/1.0\r\nNats-Msg-Id: {msg_id}\r\n\r\n".encode(),
                body,
            )
        )
    inbox = "_INBOX.probe.1"
    frames += [
        b"PING\r\n",
        _frame(
            inbox,
            FAST_SID,
            "",
            b"NATS/1.0 100 Idle Heartbeat\r\nNats-Last-Consumer: 5\r\nNats-Last-Stream: 9\r\n\r\n",
            b"",
        ),
        _frame("genie.tool.a", FAST_SID, _ack_subject(6), b"", b'{"v":1,"id":"plain"}'),
        _frame("genie.tool.a", FAST_SID, "", b"", b"no reply subject"),
        _frame("genie.tool.b", FAST_SID, _ack_subject(7), b"", b""),
        _frame("genie.tool.c", FAST_SID, _ack_subject(8), b"NATS/1.0\r\n\r\n", b"empty header block"),
        _frame(
            "genie.msg.d",
            FAST_SID,
            _ack_subject(9),
            "NATS/1.0\r\nNats-Msg-Id: x9\r\nX-Note:  h\u00e9llo \r\nX-Tab:\tv\r\n".encode()
            + b"Bad Key: dropped\r\nno colon\r\n: no name\r\nX-Empty:\r\n\r\n",
            b'{"v":1,"id":"with \\r\\nMSG x 7 3\\r\\n inside","text":"\xc3\xa9"}',
        ),
        _frame(
            "genie.tool.e",
            FAST_SID,
            _ack_subject(10),
            b"NATS/1.0\r\nNats-Msg-Id: x10\r\n\r\n",
            b"MSG x 7 1\r\n!\r\n",
        ),
        _frame("agentwatch.query", OTHER_SID, "_INBOX.reply.1", b"", b"SELECT 1"),
        _frame("agentwatch.query", OTHER_SID, "_INBOX.reply.2", b"NATS/1.0\r\nA: b\r\n\r\n", b"SELECT 2"),
        _frame("genie.tool.f", 12345, _ack_subject(11), b"", b"no such subscription"),
        b"PONG\r\n",
        _frame(
            inbox,
            FAST_SID,
            "",
            b"NATS/1.0 408 Request Timeout\r\nNats-Pending-Messages: 3\r\nNats-Pending-Bytes: 0\r\n\r\n",
            b"",
        ),
        _frame(inbox, FAST_SID, "", b"NATS/1.0 404 No Messages\r\n\r\n", b""),
        _frame(inbox, FAST_SID, "", b"NATS/1.0 409 Exceeded MaxWaiting\r\n\r\n", b""),
        b"+OK\r\n",
        _frame("genie.tool.g", FAST_SID, _ack_subject(12), b"", b"last"),
    ]
    return b"".join(frames)


class ProbeConnection:
    """A nats-py client that is never connected: the parser's effects land in its subscriptions'
    queues and in `calls`."""

    def __init__(
        self,
        *,
        fast: bool,
        pending_msgs: int = 1000,
        pending_bytes: int = 10**8,
        unsubscribed: bool = False,
        reset_on_error: bool = False,
    ) -> None:
        from nats.aio.client import Client as NatsClient
        from nats.aio.subscription import Subscription

        self.calls: list[Any] = []
        self.nc = NatsClient()
        self.fast = Subscription(
            self.nc,
            FAST_SID,
            "_INBOX.probe.*",
            pending_msgs_limit=pending_msgs,
            pending_bytes_limit=pending_bytes,
        )
        self.other = Subscription(self.nc, OTHER_SID, "agentwatch.query")
        self.nc._subs = {FAST_SID: self.fast, OTHER_SID: self.other}
        nc: Any = self.nc

        async def ping() -> None:
            self.calls.append("ping")

        async def pong() -> None:
            self.calls.append("pong")

        async def info(info: dict[str, Any], initial_connection: bool = False) -> None:
            self.calls.append(("info", info))

        async def err(message: str) -> None:
            self.calls.append(("err", message))
            nc._ps.reset()  # what nats-py does on a stale connection: the rest is dropped

        async def error_cb(exc: Exception) -> None:
            self.calls.append(("error", type(exc).__name__))
            if reset_on_error:  # an error callback that closes the connection
                nc._ps.reset()

        nc._process_ping, nc._process_pong, nc._process_info = ping, pong, info
        nc._process_err, nc._error_cb = err, error_cb
        if fast:
            from agentwatch.bus import fastparse

            assert fastparse.enable(self.nc, self.fast)
        if unsubscribed:
            del self.nc._subs[FAST_SID]

    async def feed(self, *chunks: bytes) -> None:
        for chunk in chunks:
            await self.nc._ps.parse(chunk)

    def outcome(self) -> list[Any]:
        got: list[Any] = []
        for sub in (self.fast, self.other):
            while not sub._pending_queue.empty():
                m = sub._pending_queue.get_nowait()
                got.append(
                    (
                        m._sid,
                        m.subject,
                        m.reply,
                        m.data,
                        type(m.data),
                        m.headers,
                        m.metadata.sequence.stream if m.reply.startswith("$JS.ACK.") else None,
                    )
                )
            got.append((sub._received, sub._pending_size))
        stats: dict[str, int] = self.nc.stats
        return [got, self.calls, stats["in_msgs"], stats["in_bytes"], bytes(self.nc._ps.buf)]


async def test_fast_parser_reads_what_nats_py_reads_at_every_split() -> None:
    from agentwatch.bus.fastparse import FastParser, PulledMsg

    stream = wire_stream()
    stock = ProbeConnection(fast=False)
    await stock.feed(stream)
    expected = stock.outcome()
    assert len(expected[0]) == 20 and expected[1][:2] == [
        ("info", {"server_id": "probe", "max_payload": 1048576, "headers": True}),
        "ping",
    ]

    probe = ProbeConnection(fast=True)
    await probe.feed(*(stream[i : i + 1] for i in range(len(stream))))  # a byte at a time
    assert probe.outcome() == expected
    for cut in range(len(stream) + 1):
        probe = ProbeConnection(fast=True)
        pulled = []
        await probe.feed(stream[:cut], stream[cut:])
        while not probe.fast._pending_queue.empty():
            pulled.append(probe.fast._pending_queue.get_nowait())
        for m in pulled:
            probe.fast._pending_queue.put_nowait(m)
        assert probe.outcome() == expected, f"split at byte {cut}"
        # The fast path was taken for deliveries; statuses kept nats-py's own messages.
        kinds = [type(m) is PulledMsg for m in pulled]
        assert kinds == [True] * 5 + [False, True, True, True, True, True, True, False, False, False, True]
        # ... and a parser that switches to the fast one at any point carries on where it was.
        switched = ProbeConnection(fast=False)
        await switched.feed(stream[:cut])
        from agentwatch.bus import fastparse

        assert fastparse.enable(switched.nc, switched.fast)
        assert type(switched.nc._ps) is FastParser
        await switched.feed(stream[cut:])
        assert switched.outcome() == expected, f"switched at byte {cut}"


async def test_fast_parser_headers_are_parsed_on_first_access() -> None:
    probe = ProbeConnection(fast=True)
    await probe.feed(wire_stream())
    pulled = [probe.fast._pending_queue.get_nowait() for _ in range(probe.fast._pending_queue.qsize())]
    first: Any = pulled[0]
    assert first._raw_headers is not None and first._parsed_headers is None  # nothing parsed yet
    assert first.headers == {"Nats-Msg-Id": first.headers["Nats-Msg-Id"]} and first._raw_headers is None
    first.headers = {"a": "b"}
    assert first.headers == {"a": "b"}
    odd = next(m for m in pulled if m.subject == "genie.msg.d")
    assert odd.headers == {
        "Nats-Msg-Id": "x9",
        "X-Note": "h\u00e9llo",
        "X-Tab": "v",
        "": "no name",
        "X-Empty": "",
    }
    assert next(m for m in pulled if m.subject == "genie.tool.c").headers is None  # an empty block


@pytest.mark.parametrize(
    ("limits", "stream"),
    [
        ({"pending_msgs": 3}, None),  # the queue fills: nats-py reports a slow consumer
        ({"pending_msgs": 3, "reset_on_error": True}, None),
        ({"pending_bytes": 3000}, None),
        ({"unsubscribed": True}, None),  # messages still in flight for a subscription since closed
        (
            {},
            b"PING\r\n"
            + _frame("s", FAST_SID, "r", b"", b"ok")
            + b"-ERR 'Stale Connection'\r\n"
            + _frame("s", FAST_SID, "r", b"", b"dropped"),
        ),
    ],
)
async def test_fast_parser_limits_and_resets_as_nats_py_does(
    limits: dict[str, Any], stream: bytes | None
) -> None:
    data = wire_stream() if stream is None else stream

    async def outcome(fast: bool, *chunks: bytes) -> list[Any]:
        probe = ProbeConnection(fast=fast, **limits)
        try:
            await probe.feed(*chunks)
        except Exception as exc:  # the same error, at the same point, with the same effects
            return [*probe.outcome()[:-1], type(exc).__name__]  # (nats-py then resets the buffer)
        return probe.outcome()

    whole = await outcome(False, data)
    if not limits.get("unsubscribed"):
        assert any(c[0] in ("error", "err") for c in whole[1] if isinstance(c, tuple))
    assert await outcome(True, data) == whole
    for cut in range(0, len(data) + 1, 7):
        chunks = (data[:cut], data[cut:])
        assert await outcome(True, *chunks) == await outcome(False, *chunks), f"split at byte {cut}"


@pytest.mark.parametrize(
    ("bad", "nats_py_too"),
    [
        (b"HMSG genie.x 7 r 10\r\n", True),
        (b"MSG genie.x seven 3\r\nabc\r\n", True),
        (b"NOPE\r\n", True),
        (b"HMSG genie.x 7 r 40 30\r\n" + b"x" * 30 + b"\r\n", False),  # a header block longer than the frame
        (b"MSG genie.x 7 r -3\r\nabc\r\n", True),
    ],
)
async def test_fast_parser_refuses_malformed_frames(bad: bytes, nats_py_too: bool) -> None:
    from nats.errors import ProtocolError

    for fast in (True, False) if nats_py_too else (True,):
        probe = ProbeConnection(fast=fast)
        with pytest.raises(ProtocolError):
            await probe.feed(_frame("genie.ok", FAST_SID, "r", b"", b"fine") + bad)
        assert probe.fast._pending_queue.get_nowait().data == b"fine"


async def test_fast_parser_leaves_other_nats_py_internals_alone() -> None:
    from nats.aio.client import Client as NatsClient
    from nats.aio.subscription import Subscription
    from nats.protocol.parser import Parser

    from agentwatch.bus import fastparse

    nc = NatsClient()

    async def handler(msg: Any) -> None:
        return None

    with_callback = Subscription(nc, 3, "x", cb=handler)
    assert not fastparse.enable(nc, with_callback)
    assert type(nc._ps) is Parser
    nc._ps = object()  # type: ignore[assignment]  # a parser this module does not know
    assert not fastparse.enable(nc, Subscription(nc, 4, "y"))
    probe = ProbeConnection(fast=True)
    parser: Any = probe.nc._ps
    del probe.nc._subs[FAST_SID]  # the pull subscription closed, another one made
    probe.nc._subs[FAST_SID + 1] = newer = Subscription(probe.nc, FAST_SID + 1, "_INBOX.probe.2.*")
    assert fastparse.enable(probe.nc, newer)
    assert parser.fast_sids == {FAST_SID + 1: newer}
    fastparse.disable(probe.nc)
    assert type(probe.nc._ps) is Parser


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
    assert status.returncode == 1 and "no server answers at nats://u:***@127.0.0.1" in status.stdout
