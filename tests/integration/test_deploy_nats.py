"""deploy/nats/: the NATS configurations, run as written on real nats-server processes.

Every test copies deploy/nats/ into a temporary directory and rewrites only ports and paths (each
rewrite must match, so a config that drifts fails here); passwords reach the servers through the
`$AGENTWATCH_*_PASSWORD` environment variables exactly as in production.
"""

from __future__ import annotations

import asyncio
import json
import re
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import nats
import pytest
from nats.aio.client import Client
from nats.aio.msg import Msg
from nats.js.api import ConsumerConfig

from agentwatch.bus.streams import STORE_DURABLE, STREAM_NAME, ensure_stream, store_consumer_config
from agentwatch.config import parse_urls
from agentwatch.emitter.wire import BusError, Connection, connect
from tests.conftest import ROOT, clean_env, free_port, hook_settled, run_emit, tool, wait_port
from tests.integration.test_store import Message, Service, envelopes, split_counts, sql_rows, wait_rows

DEPLOY = ROOT / "deploy" / "nats"
PASSWORDS = {
    "AGENTWATCH_HOOK_PASSWORD": "hook-test-pw",
    "AGENTWATCH_STORE_PASSWORD": "store-test-pw",
    "AGENTWATCH_DASHBOARD_PASSWORD": "dashboard-test-pw",
    "AGENTWATCH_LEAF_PASSWORD": "leaf-test-pw",
}
NODES = ("a", "b", "c")
STOPPED = re.compile(r"stopped: (\d+) events and (\d+) messages stored, (\d+) dead letters")


# --- parts ------------------------------------------------------------------------------------


def rewrite(text: str, replacements: dict[str, str]) -> str:
    for old, new in replacements.items():
        assert old in text, f"{old!r} is no longer in the deploy config: update this test"
        text = text.replace(old, new)
    return text


def user_url(user: str, port: int) -> str:
    return f"nats://{user}:{PASSWORDS[f'AGENTWATCH_{user.upper()}_PASSWORD']}@127.0.0.1:{port}"


def server_env() -> dict[str, str]:
    return clean_env(**PASSWORDS)


class Node:
    """One nats-server started from a rewritten deploy config."""

    def __init__(self, conf: Path, port: int) -> None:
        self.conf = conf
        self.port = port
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> Node:
        log = self.conf.with_suffix(".log").open("ab")
        self.proc = subprocess.Popen(
            [tool("nats-server"), "-c", str(self.conf)], env=server_env(), stdout=log, stderr=log
        )
        log.close()
        wait_port(self.port)
        return self

    def kill(self) -> None:
        if self.proc is not None:
            self.proc.kill()
            self.proc.wait(10)
            self.proc = None

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
            self.proc = None


class Deployed:
    """A copy of deploy/nats/ with loopback ports and temporary paths; owns the servers it starts."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.nodes: list[Node] = []
        self.client: dict[str, int] = {name: free_port() for name in (*NODES, "single", "leaf")}
        route = {n: free_port() for n in NODES}
        self.leaf = free_port()  # the single node's leafnode port
        for src in DEPLOY.rglob("*"):
            if src.is_file():
                dst = root / src.relative_to(DEPLOY)
                dst.parent.mkdir(parents=True, exist_ok=True)
                dst.write_text(src.read_text())
        self._rewrite(
            "single.conf",
            {
                "127.0.0.1:4222": f"127.0.0.1:{self.client['single']}",
                "127.0.0.1:8222": f"127.0.0.1:{free_port()}",
                "127.0.0.1:7422": f"127.0.0.1:{self.leaf}",
                "/var/lib/agentwatch/nats": str(root / "js-single"),
            },
        )
        for n in NODES:
            self._rewrite(
                f"cluster/node-{n}.conf",
                {
                    "0.0.0.0:4222": f"127.0.0.1:{self.client[n]}",
                    "0.0.0.0:6222": f"127.0.0.1:{route[n]}",
                    "0.0.0.0:7422": f"127.0.0.1:{free_port()}",
                    "127.0.0.1:8222": f"127.0.0.1:{free_port()}",
                    f"/var/lib/agentwatch/nats-{n}": str(root / f"js-{n}"),
                    **{f"nats-{m}:6222": f"127.0.0.1:{route[m]}" for m in NODES},
                },
            )
        leaf = PASSWORDS["AGENTWATCH_LEAF_PASSWORD"]
        self._rewrite(
            "leaf.conf",
            {
                "127.0.0.1:4222": f"127.0.0.1:{self.client['leaf']}",
                "leaf:CHANGE_ME@nats-a:7422": f"leaf:{leaf}@127.0.0.1:{self.leaf}",
                # nothing listens on these two: the leaf keeps to the URL that answers
                "leaf:CHANGE_ME@nats-b:7422": f"leaf:{leaf}@127.0.0.1:{free_port()}",
                "leaf:CHANGE_ME@nats-c:7422": f"leaf:{leaf}@127.0.0.1:{free_port()}",
            },
        )

    def _rewrite(self, name: str, replacements: dict[str, str]) -> None:
        path = self.root / name
        path.write_text(rewrite(path.read_text(), replacements))

    def configs(self) -> list[Path]:
        return sorted(self.root.rglob("*.conf"))

    def start(self, name: str) -> Node:
        conf = self.root / (f"cluster/node-{name}.conf" if name in NODES else f"{name}.conf")
        node = Node(conf, self.client[name]).start()
        self.nodes.append(node)
        return node

    def stop_all(self) -> None:
        for node in self.nodes:
            node.stop()


@pytest.fixture
def deployed(tmp_path: Path) -> Iterator[Deployed]:
    d = Deployed(tmp_path / "nats")
    try:
        yield d
    finally:
        d.stop_all()


class Errors:
    """nats-py's error callback: permission violations arrive here, not as exceptions."""

    def __init__(self) -> None:
        self.seen: list[str] = []

    async def cb(self, exc: Exception) -> None:
        self.seen.append(str(exc))

    def violations(self, subject: str) -> list[str]:
        return [e for e in self.seen if "permissions violation" in e.lower() and f'"{subject}"' in e]


async def connect_as(user: str, port: int, errors: Errors | None = None) -> Client:
    async def ignore(_exc: Exception) -> None:
        return None

    return await nats.connect(
        user_url(user, port), error_cb=errors.cb if errors is not None else ignore, max_reconnect_attempts=0
    )


async def settle(nc: Client) -> None:
    """Flush, then a moment for the server's -ERR lines to reach the error callback."""
    await nc.flush()
    await asyncio.sleep(0.2)
    await nc.flush()


async def stream_messages(url: str | list[str]) -> int:
    nc = await nats.connect(url, max_reconnect_attempts=0)
    try:
        info = await nc.jetstream().stream_info(STREAM_NAME)
        return int(info.state.messages)
    finally:
        await nc.close()


async def consumer_state(url: str) -> tuple[int, int]:
    nc = await nats.connect(url, max_reconnect_attempts=0)
    try:
        info = await nc.jetstream().consumer_info(STREAM_NAME, STORE_DURABLE)
        return int(info.num_pending or 0), int(info.num_ack_pending or 0)
    finally:
        await nc.close()


def hook_publish(urls: str, messages: list[Message]) -> None:
    """The hook's own wire client: publish and wait for the stream's acknowledgements."""
    conn = connect(parse_urls(urls), time.monotonic() + 5)
    try:
        conn.publish(messages)
    finally:
        conn.close()


# --- a. every config is accepted --------------------------------------------------------------


def test_every_deploy_config_passes_nats_server_test_mode(deployed: Deployed) -> None:
    configs = deployed.configs()
    names = {str(p.relative_to(deployed.root)) for p in configs}
    assert {"single.conf", "leaf.conf", "accounts.conf"} <= names
    assert {f"cluster/node-{n}.conf" for n in NODES} <= names
    for conf in configs:
        result = subprocess.run(
            [tool("nats-server"), "-t", "-c", str(conf)],
            env=server_env(),
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        )
        assert result.returncode == 0, f"{conf.name}: {result.stdout}{result.stderr}"
    # A password variable left unset is a startup error, never an empty password.
    unset = subprocess.run(
        [tool("nats-server"), "-t", "-c", str(deployed.root / "single.conf")],
        env=clean_env(),
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert unset.returncode != 0
    assert "AGENTWATCH_" in unset.stdout + unset.stderr


# --- b. least privilege -----------------------------------------------------------------------


async def test_each_user_can_do_its_job_and_nothing_else(deployed: Deployed) -> None:
    port = deployed.start("single").port

    # store: creates the stream and its durable consumer.
    store_errors = Errors()
    store = await connect_as("store", port, store_errors)
    js = store.jetstream()
    assert await ensure_stream(js, {}) == "created"
    assert await ensure_stream(js, {}) == "updated"

    # hook: publishes events, with nats-py and with its own wire client.
    hook_errors = Errors()
    hook = await connect_as("hook", port, hook_errors)
    await hook.publish("genie.tool.x.call", b'{"n": 1}')
    await settle(hook)
    hook_publish(user_url("hook", port), [("genie.tool.x.call", "wire-1", b'{"n": 2}')])
    assert hook_errors.seen == []
    assert await stream_messages(user_url("store", port)) == 2

    # ... and nothing else: no reading events, no queries.
    await hook.subscribe("genie.>")
    await settle(hook)
    assert hook_errors.violations("genie.>"), hook_errors.seen
    with pytest.raises(Exception):  # noqa: B017, PT011 - no reply: a timeout or no responders
        await hook.request("agentwatch.query", b'{"sql": "SELECT 1"}', timeout=1)
    await settle(hook)
    assert hook_errors.violations("agentwatch.query"), hook_errors.seen
    await hook.close()

    # dashboard: watches genie.>, may ask agentwatch.query, may not publish events.
    dash_errors = Errors()
    dash = await connect_as("dashboard", port, dash_errors)
    seen: list[Msg] = []
    got = asyncio.Event()

    async def on_event(msg: Msg) -> None:
        seen.append(msg)
        got.set()

    await dash.subscribe("genie.>", cb=on_event)
    await settle(dash)
    hook_publish(user_url("hook", port), [("genie.tool.x.call", "wire-2", b'{"n": 3}')])
    await asyncio.wait_for(got.wait(), 5)
    assert seen[0].subject == "genie.tool.x.call"
    with pytest.raises(nats.errors.NoRespondersError):  # allowed, but no store answers here
        await dash.request("agentwatch.query", b'{"sql": "SELECT 1"}', timeout=2)
    assert dash_errors.seen == []
    await dash.publish("genie.tool.x.call", b'{"forged": true}')
    await settle(dash)
    assert dash_errors.violations("genie.tool.x.call"), dash_errors.seen
    await dash.close()
    assert await stream_messages(user_url("store", port)) == 3, "the forged event never reached the stream"

    # store: consumes the stream through its durable (a pull fetch and acks).
    sub = await js.pull_subscribe(
        "genie.>", durable=STORE_DURABLE, stream=STREAM_NAME, config=store_consumer_config({})
    )
    fetched = await sub.fetch(3, timeout=5)
    assert [m.data for m in fetched] == [b'{"n": 1}', b'{"n": 2}', b'{"n": 3}']
    for m in fetched:
        await m.ack_sync()
    assert await consumer_state(user_url("store", port)) == (0, 0)
    # ... but not someone else's consumer or stream.
    with pytest.raises(Exception):  # noqa: B017, PT011 - a denied API request gets no reply
        await js.add_consumer(STREAM_NAME, ConsumerConfig(durable_name="intruder"), timeout=1)
    await settle(store)
    assert store_errors.violations(f"$JS.API.CONSUMER.CREATE.{STREAM_NAME}.intruder") or any(
        "intruder" in e for e in store_errors.seen
    ), store_errors.seen
    await store.close()


# --- b2. the store, its watchdog and `alerts run` need nothing the store user lacks --------------


async def _store_durable_with_unacked(port: int, environ: dict[str, str], count: int) -> list[int]:
    """As the store user: GENIE and the store's durable as `agentwatch store` makes them (with
    `environ`'s max deliveries and ack wait), then `count` messages fetched and never acknowledged,
    as a store killed between a fetch and its acks leaves them. Their stream sequences."""
    nc = await connect_as("store", port)
    try:
        js = nc.jetstream()
        await ensure_stream(js, {})
        await js.add_consumer(STREAM_NAME, store_consumer_config(environ))
        sub = await js.pull_subscribe_bind(consumer=STORE_DURABLE, stream=STREAM_NAME)
        return [m.metadata.sequence.stream for m in await sub.fetch(count, timeout=5)]
    finally:
        await nc.close()


async def _ephemeral_only(port: int) -> str:
    """What JetStream answers the store user asking for a durable on the subject it may create the
    watchdog's read-back consumer with."""
    nc = await connect_as("store", port)
    try:
        request = {"stream_name": STREAM_NAME, "config": {"durable_name": "intruder", "ack_policy": "none"}}
        reply = await nc.request(f"$JS.API.CONSUMER.CREATE.{STREAM_NAME}", json.dumps(request).encode(), 5)
        return str(json.loads(reply.data).get("error", {}).get("description", ""))
    finally:
        await nc.close()


def test_the_store_and_its_watchdog_run_on_the_store_user_without_a_violation(
    deployed: Deployed, tmp_path: Path
) -> None:
    node = deployed.start("single")
    port = node.port
    env = clean_env(
        AGENTWATCH_DATA_DIR=str(tmp_path / "store"),
        AGENTWATCH_NATS_URL=user_url("store", port),
        AGENTWATCH_METRICS_ADDR="off",
        AGENTWATCH_OTLP_ADDR="off",
        # JetStream gives up on a message after one delivery left unacknowledged for 20 s: the
        # store must be subscribed to the advisory by then (it is core NATS, kept nowhere).
        AGENTWATCH_MAX_DELIVER="1",
        AGENTWATCH_ACK_WAIT_SECONDS="20",
    )
    sql_env = clean_env(
        AGENTWATCH_DATA_DIR=str(tmp_path / "sql"), AGENTWATCH_NATS_URL=user_url("dashboard", port)
    )
    hook_env = clean_env(
        AGENTWATCH_DATA_DIR=str(tmp_path / "hook"), AGENTWATCH_NATS_URL=user_url("hook", port)
    )
    asyncio.run(_ensure_single(port))
    messages = envelopes(50)
    hook_publish(user_url("hook", port), messages)
    # Five delivered and never acknowledged: the watchdog beside the store reads them back when it
    # starts (a message get, an ephemeral consumer), and JetStream gives up on them 20 s after their
    # delivery: the store reads each back by its sequence and dead-letters it with its body.
    lost = asyncio.run(_store_durable_with_unacked(port, env, 5))
    assert lost == [1, 2, 3, 4, 5]
    taken = time.monotonic()
    store = Service(["store"], env)
    try:
        store.wait_ready(60)
        assert time.monotonic() - taken < 15, "the store started too late to hear JetStream give up"
        for event in ("SessionStart", "UserPromptSubmit", "Stop"):  # the real hook, as the hook user
            payload = {"hook_event_name": event, "session_id": "deploy-perms", "cwd": "/repo", "prompt": "go"}
            assert run_emit(json.dumps(payload).encode(), hook_env).returncode == 0
        assert hook_settled(hook_env["AGENTWATCH_DATA_DIR"], 20)
        stored = "SELECT (SELECT count() FROM events FINAL) + (SELECT count() FROM messages FINAL) AS n"
        wait_rows(sql_env, stored, len(messages) - len(lost) + 3, timeout=60)
        wait_rows(sql_env, "SELECT count() AS n FROM dead_letters", len(lost), timeout=90)
        letters = sql_rows(sql_env, "SELECT subject, stream_seq, body FROM dead_letters ORDER BY stream_seq")
        assert [(r["stream_seq"], r["subject"], r["body"]) for r in letters] == [
            (seq, subject, body.decode()) for seq, (subject, _, body) in zip(lost, messages, strict=False)
        ]
        (hooked,) = sql_rows(sql_env, "SELECT count() AS n FROM events WHERE session_id = 'deploy-perms'")
        assert int(hooked["n"]) == 3
    finally:
        code, out = store.stop()
    assert code == 0, out
    assert "could not read back" not in out, out
    # `alerts run` alone: its own durable, its rebuild, its alerts stream.
    alone = Service(["alerts", "run"], env)
    try:
        alone.wait_ready(60)
        time.sleep(3)  # its durable, its rebuild from the store and the stream, after the banner
    finally:
        code, out = alone.stop()
    assert code == 0, out
    # The subject the watchdog's read-back consumer is created on makes no durable.
    assert "ephemeral" in asyncio.run(_ephemeral_only(port))
    node.stop()
    log = node.conf.with_suffix(".log").read_text()
    assert "Violation" not in log, [line for line in log.splitlines() if "Violation" in line]


# --- c. three nodes, R3, a node killed and restarted under load -------------------------------


async def ensure_r3(urls: list[str], timeout: float = 30.0) -> str:
    """ensure_stream at R3 as the store; returns the stream leader's server name once elected."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            nc = await nats.connect(urls, max_reconnect_attempts=0, connect_timeout=2)
            try:
                await ensure_stream(nc.jetstream(), {"AGENTWATCH_STREAM_REPLICAS": "3"})
                info = await nc.jetstream().stream_info(STREAM_NAME)
                assert info.config.num_replicas == 3
                if info.cluster is not None and info.cluster.leader:
                    return str(info.cluster.leader)
            finally:
                await nc.close()
        except Exception:
            if time.monotonic() > deadline:
                raise
        await asyncio.sleep(0.5)


async def wait_healthy(urls: list[str], expected: int | None = None, timeout: float = 45.0) -> int:
    """Once every node answers JetStream API requests and GENIE's replicas are current (holding
    `expected` messages when given) and the stream can be updated (a meta leader is elected), the
    number of messages: a restarted node needs a few seconds to rejoin and catch up."""
    deadline = time.monotonic() + timeout
    last = ""
    while time.monotonic() < deadline:
        try:
            counts = set()
            for url in urls:
                nc = await nats.connect(url, max_reconnect_attempts=0, connect_timeout=2)
                try:
                    js = nc.jetstream(timeout=2)
                    info = await js.stream_info(STREAM_NAME)
                    # What the store does first; it needs the meta leader, which stream_info
                    # (answered by the stream leader) does not.
                    await ensure_stream(js, {"AGENTWATCH_STREAM_REPLICAS": "3"})
                finally:
                    await nc.close()
                peers = (info.cluster.replicas or []) if info.cluster is not None else []
                last = f"{url}: {info.state.messages} messages, peers " + str(
                    [(p.name, p.current, p.lag) for p in peers]
                )
                assert expected is None or info.state.messages == expected, last
                assert len(peers) == 2 and all(p.current and not p.lag for p in peers), last
                counts.add(int(info.state.messages))
            assert len(counts) == 1, counts
            return counts.pop()
        except Exception as exc:
            last = str(exc) or repr(exc)
            await asyncio.sleep(0.5)
    raise AssertionError(f"the cluster did not settle: {last}")


def test_cluster_r3_one_copy_of_each_event_when_a_node_dies_under_load(
    deployed: Deployed, tmp_path: Path
) -> None:
    nodes = {n: deployed.start(n) for n in NODES}
    store_urls = [user_url("store", deployed.client[n]) for n in NODES]
    leader = asyncio.run(ensure_r3(store_urls))

    messages = envelopes(20_000)
    n_events, n_msgs = split_counts(messages)
    by_port = {node.port: name for name, node in nodes.items()}
    # The publisher starts on a node that does not lead GENIE, and that node is the one killed.
    order = sorted(NODES, key=lambda n: f"agentwatch-{n}" == leader)
    hook_urls = ",".join(user_url("hook", deployed.client[n]) for n in order)
    urls = parse_urls(hook_urls)
    victim: str | None = None
    conn: Connection | None = None
    current, sent, resent, started = 0, 0, 0, time.monotonic()
    try:
        while sent < len(messages):
            assert time.monotonic() - started < 60, f"publishing stalled at {sent}"
            if victim is None and sent >= 5_000:
                # SIGKILL the node the publisher is on: the next chunk has to fail over.
                assert conn is not None
                victim = by_port[conn.url.port]
                assert f"agentwatch-{victim}" != leader
                nodes[victim].kill()
            if victim is not None and sent >= 15_000 and nodes[victim].proc is None:
                nodes[victim].start()
            if conn is None:
                try:
                    conn = connect(urls[current:] + urls[:current], time.monotonic() + 5)
                except BusError:
                    time.sleep(0.1)
                    continue
            chunk = messages[sent : sent + 200]
            conn.deadline = time.monotonic() + 5
            try:
                conn.publish(chunk)
            except BusError:
                # Unconfirmed: send the whole chunk again elsewhere; Nats-Msg-Id drops repeats.
                conn.close()
                conn = None
                current = (current + 1) % len(urls)
                resent += len(chunk)
                continue
            sent += len(chunk)
    finally:
        if conn is not None:
            conn.close()
    assert victim is not None and nodes[victim].proc is not None
    assert resent > 0, "the kill never interrupted a chunk: the failover path was not exercised"
    # The wire client counts a message as sent once the stream acknowledged it: everything
    # is in GENIE after one pass, exactly once (Nats-Msg-Id drops the re-sent chunks).
    stored = asyncio.run(wait_healthy(store_urls, len(messages)))
    assert stored == len(messages)

    env = clean_env(
        AGENTWATCH_DATA_DIR=str(tmp_path / "store"),
        AGENTWATCH_NATS_URL=",".join(store_urls),
        AGENTWATCH_STREAM_REPLICAS="3",
    )
    sql_env = clean_env(
        AGENTWATCH_DATA_DIR=str(tmp_path / "sql"),
        AGENTWATCH_NATS_URL=",".join(user_url("dashboard", deployed.client[n]) for n in NODES),
    )
    store = Service(["store"], env)
    try:
        store.wait_ready()
        wait_rows(sql_env, "SELECT count() AS n FROM events FINAL", n_events, timeout=60)
        wait_rows(sql_env, "SELECT count() AS n FROM messages FINAL", n_msgs, timeout=30)
        row = sql_rows(
            sql_env,
            "SELECT (SELECT count() FROM events FINAL) AS events, (SELECT uniqExact(id) FROM events) AS ids, "
            "(SELECT count() FROM messages FINAL) AS messages",
        )[0]
        assert (int(row["events"]), int(row["ids"]), int(row["messages"])) == (n_events, n_events, n_msgs)
    finally:
        code, out = store.stop()
    assert code == 0, out


# --- d. two stores on one durable share the work ----------------------------------------------


def test_two_stores_on_one_durable_split_the_work_exactly(deployed: Deployed, tmp_path: Path) -> None:
    port = deployed.start("single").port
    messages = envelopes(20_000)
    n_events, n_msgs = split_counts(messages)
    services: list[Service] = []
    try:
        for i in range(2):
            env = clean_env(
                AGENTWATCH_DATA_DIR=str(tmp_path / f"store{i}"), AGENTWATCH_NATS_URL=user_url("store", port)
            )
            services.append(Service(["store"], env))
        for s in services:
            s.wait_ready()
        for start in range(0, len(messages), 2_000):
            hook_publish(user_url("hook", port), messages[start : start + 2_000])
        deadline = time.monotonic() + 60
        while asyncio.run(consumer_state(user_url("store", port))) != (0, 0):
            assert time.monotonic() < deadline, "the stores did not drain the consumer"
            time.sleep(0.2)
    finally:
        outputs = [s.stop() for s in services]
    counts = []
    for code, out in outputs:
        assert code == 0, out
        found = STOPPED.findall(out)
        assert found, out
        counts.append(tuple(int(x) for x in found[-1]))
    (e1, m1, d1), (e2, m2, d2) = counts
    assert e1 > 0 and e2 > 0, f"one store took all the work: {counts}"
    assert (e1 + e2, m1 + m2, d1 + d2) == (n_events, n_msgs, 0)


# --- e. a leaf node forwards the hooks' events to the hub -------------------------------------


def test_leaf_node_forwards_hook_events_to_the_hub(deployed: Deployed) -> None:
    hub = deployed.start("single")
    asyncio.run(_ensure_single(hub.port))
    leaf = deployed.start("leaf")
    messages = envelopes(500)
    deadline = time.monotonic() + 15
    while True:  # until the leaf connection is up: the hub's interest reaches the leaf
        hook_publish(user_url("hook", leaf.port), messages)
        if asyncio.run(stream_messages(user_url("store", hub.port))) == len(messages):
            break
        assert time.monotonic() < deadline, "the leaf never forwarded to the hub"
        time.sleep(0.3)
    # The leaf's local users are as narrow as the hub's.
    assert_denied_subscribe(user_url("hook", leaf.port))


async def _ensure_single(port: int) -> None:
    nc = await connect_as("store", port)
    try:
        await ensure_stream(nc.jetstream(), {})
    finally:
        await nc.close()


def assert_denied_subscribe(url: str) -> None:
    async def run() -> list[str]:
        errors = Errors()
        nc = await nats.connect(url, error_cb=errors.cb, max_reconnect_attempts=0)
        await nc.subscribe("genie.>")
        await settle(nc)
        await nc.close()
        return errors.violations("genie.>")

    assert asyncio.run(run())
