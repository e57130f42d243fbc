"""The watchdog through the real bus and store: each rule fires once on agentwatch.alert.>, is in
the `alerts` table, and resolves when its condition clears; a restart neither loses nor repeats
a firing alert; a bad rules file keeps the rules in force."""

from __future__ import annotations

import asyncio
import itertools
import json
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import nats
import pytest
from clickhouse_connect.driver.client import Client
from faststream.nats import NatsBroker

from agentwatch.bus.streams import STORE_DURABLE, STREAM_NAME, ensure_stream, store_consumer_config
from agentwatch.consumers.alerts import FETCH_WINDOW_S, Watchdog, alerts_router
from agentwatch.consumers.store import StoreWriter, store_router
from agentwatch.contract import build_envelope, encode_envelope
from agentwatch.store.migrations import apply_migrations
from tests.services import NatsServer

FAST_RULES = """
[stuck_tool]
floor_s = 2
cooldown_s = 0
[silent_agent]
after_s = 2
[loop]
repeats = 4
[failure_burst]
failures = 4
window_s = 30
[waiting_for_user]
after_s = 2
[idle_with_open_tasks]
after_s = 2
[budget]
session_usd = 1
[hook_health]
spool_bytes = 5000
"""
_ids = itertools.count()


@pytest.fixture
def ch(chdb_database: Client) -> Client:
    apply_migrations(chdb_database)
    return chdb_database


def envelope(event: str, *, agent: str = "lead", session: str = "s1", **payload: Any) -> tuple[str, bytes]:
    body = {"hook_event_name": event, "session_id": session, **payload}
    subject, env = build_envelope(
        body, {"GENIE_AGENT_NAME": agent}, host="h1", event_id=f"e{next(_ids):08d}{time.time_ns()}"
    )
    spool = payload.pop("spool", 0)
    env["spool_bytes"] = spool
    return subject, encode_envelope(env)


class Bus:
    """A nats-py client of the test's own: publishes envelopes, collects alerts."""

    def __init__(self, nc: Any) -> None:
        self.nc = nc
        self.alerts: list[dict[str, Any]] = []

    async def send(self, *envelopes: tuple[str, bytes]) -> None:
        for subject, body in envelopes:
            await self.nc.publish(subject, body)
        await self.nc.flush()

    async def wait(
        self, check: Callable[[list[dict[str, Any]]], bool], timeout: float = 15.0
    ) -> list[dict[str, Any]]:
        deadline = time.monotonic() + timeout
        while not check(self.alerts):
            if time.monotonic() > deadline:
                raise AssertionError(f"alerts seen: {[(a['rule'], a['state']) for a in self.alerts]}")
            await asyncio.sleep(0.05)
        return self.alerts


@asynccontextmanager
async def watched(
    url: str, client: Client, rules: Path, *, default: bool = False, store: bool = True, beside: bool = False
) -> AsyncIterator[tuple[Bus, Watchdog]]:
    """The store and the watchdog in this process (`store=False`: the watchdog alone; `beside`: the
    watchdog reading the store's deliveries, as `up` wires them), and a subscriber on
    agentwatch.alert.>; the rules file has small thresholds unless `default` (then the service
    writes its own)."""
    if not rules.exists() and not default:
        rules.write_text(FAST_RULES)
    nc = await nats.connect(url)
    await ensure_stream(nc.jetstream(), {})
    watcher = Bus(nc)

    async def on_alert(msg: Any) -> None:
        watcher.alerts.append(json.loads(msg.data))

    await nc.subscribe("agentwatch.alert.>", cb=on_alert)
    writer = StoreWriter(client)
    settings = {"AGENTWATCH_ALERTS_FILE": str(rules), "AGENTWATCH_ALERTS_BUDGET_POLL_SECONDS": "1"}
    broker = NatsBroker(url, logger=None)
    if beside:
        watchdog = Watchdog(client, settings, durable=STORE_DURABLE)
        broker.include_router(store_router(writer, watch=watchdog.see, fetch_timeout=FETCH_WINDOW_S))
    else:
        watchdog = Watchdog(client, settings)
        if store:
            broker.include_router(store_router(writer))
        broker.include_router(alerts_router(watchdog))
    await broker.start()
    writer.start()
    await watchdog.start(broker)
    try:
        yield watcher, watchdog
    finally:
        await watchdog.stop()
        for sub in broker.subscribers:
            await sub.stop()
        await writer.stop()
        await broker.stop()
        await nc.close()


def fired(rule: str) -> Callable[[list[dict[str, Any]]], bool]:
    return lambda alerts: any(a["rule"] == rule and a["state"] == "firing" for a in alerts)


def resolved(rule: str) -> Callable[[list[dict[str, Any]]], bool]:
    return lambda alerts: any(a["rule"] == rule and a["state"] == "resolved" for a in alerts)


def table(client: Client, rule: str) -> list[tuple[str, str]]:
    rows = client.query(
        "SELECT id, state FROM alerts FINAL WHERE rule = {r:String} ORDER BY at", parameters={"r": rule}
    )
    return [(str(r[0]), str(r[1])) for r in rows.result_rows]


async def check_lifecycle(bus: Bus, client: Client, rule: str, clear: Callable[[], Any]) -> None:
    """Fires once, is in the table and open_alerts, resolves once cleared."""
    await bus.wait(fired(rule))
    await clear()
    await bus.wait(resolved(rule))
    mine = [a for a in bus.alerts if a["rule"] == rule]
    assert [a["state"] for a in mine] == ["firing", "resolved"], mine
    assert mine[0]["id"] == mine[1]["id"] and mine[0]["summary"]
    for _ in range(100):
        if len(table(client, rule)) == 2:
            break
        await asyncio.sleep(0.1)
    assert sorted(s for _, s in table(client, rule)) == ["firing", "resolved"]


async def test_stuck_tool(nats_server: NatsServer, ch: Client, tmp_path: Path) -> None:
    async with watched(nats_server.url, ch, tmp_path / "rules.toml") as (bus, _):
        await bus.send(
            envelope("PreToolUse", tool_name="Bash", tool_use_id="t1", tool_input={"command": "sleep"})
        )
        started = time.monotonic()
        await bus.wait(fired("stuck_tool"))
        assert time.monotonic() - started < 2 + 5
        await check_lifecycle(
            bus,
            ch,
            "stuck_tool",
            lambda: bus.send(
                envelope("PostToolUse", tool_name="Bash", tool_use_id="t1", tool_input={"command": "sleep"})
            ),
        )


async def test_loop_and_failure_burst(nats_server: NatsServer, ch: Client, tmp_path: Path) -> None:
    async with watched(nats_server.url, ch, tmp_path / "rules.toml") as (bus, _):
        for i in range(4):
            call: dict[str, Any] = {"tool_name": "Bash", "tool_use_id": f"x{i}"}
            call["tool_input"] = {"command": "make"}
            await bus.send(
                envelope("PreToolUse", **call), envelope("PostToolUseFailure", **call, error="exit 2")
            )
        await bus.wait(lambda a: fired("loop")(a) and fired("failure_burst")(a))
        loop = next(a for a in bus.alerts if a["rule"] == "loop")
        assert loop["details"]["failed"] is True and loop["agent"] == "lead"
        await check_lifecycle(
            bus,
            ch,
            "loop",
            lambda: bus.send(
                envelope("PreToolUse", tool_name="Read", tool_use_id="r1", tool_input={"file_path": "a"})
            ),
        )


async def test_waiting_silent_idle_and_hook_health(
    nats_server: NatsServer, ch: Client, tmp_path: Path
) -> None:
    async with watched(nats_server.url, ch, tmp_path / "rules.toml") as (bus, _):
        await bus.send(envelope("PermissionRequest", tool_name="Bash", tool_input={"command": "rm"}))
        await check_lifecycle(
            bus,
            ch,
            "waiting_for_user",
            lambda: bus.send(
                envelope(
                    "PreToolUse",
                    agent="lead",
                    tool_name="Bash",
                    tool_use_id="p1",
                    tool_input={"command": "rm"},
                ),
                envelope(
                    "PostToolUse",
                    agent="lead",
                    tool_name="Bash",
                    tool_use_id="p1",
                    tool_input={"command": "rm"},
                ),
            ),
        )
        # the lead is working and now says nothing
        await check_lifecycle(bus, ch, "silent_agent", lambda: bus.send(envelope("Stop", agent="lead")))
        await bus.send(
            envelope("TaskCreated", agent="mate", task_id="7", team_name="t"),
            envelope("TeammateIdle", agent="mate", team_name="t"),
        )
        await check_lifecycle(
            bus,
            ch,
            "idle_with_open_tasks",
            lambda: bus.send(envelope("TaskCompleted", agent="mate", task_id="7", team_name="t")),
        )
        await bus.send(envelope("Notification", agent="other", spool=9000))
        await check_lifecycle(
            bus, ch, "hook_health", lambda: bus.send(envelope("Notification", agent="other", spool=0))
        )


async def test_bad_rules_file_keeps_the_rules(nats_server: NatsServer, ch: Client, tmp_path: Path) -> None:
    rules = tmp_path / "rules.toml"
    async with watched(nats_server.url, ch, rules) as (bus, watchdog):
        rules.write_text("[loop]\nrepeats = 4\n[failure_burst\nfailures = 2\n")
        for _ in range(100):
            if watchdog.rules_error:
                break
            await asyncio.sleep(0.05)
        assert "line 3" in watchdog.rules_error and str(rules) in watchdog.rules_error
        assert watchdog.engine.rules["loop"]["repeats"] == 4
        for i in range(4):
            await bus.send(
                envelope("PreToolUse", tool_name="Bash", tool_use_id=f"y{i}", tool_input={"command": "ls"})
            )
        await bus.wait(fired("loop"))


async def test_restart_neither_loses_nor_repeats(nats_server: NatsServer, ch: Client, tmp_path: Path) -> None:
    rules = tmp_path / "rules.toml"
    async with watched(nats_server.url, ch, rules) as (bus, _):
        await bus.send(
            envelope("PreToolUse", tool_name="Bash", tool_use_id="k1", tool_input={"command": "a"}),
            envelope("PreToolUse", tool_name="Bash", tool_use_id="k2", tool_input={"command": "b"}),
        )
        await bus.wait(fired("stuck_tool"))
        await asyncio.sleep(1.0)
        before = [a for a in bus.alerts if a["rule"] == "stuck_tool"]
        assert len(before) == 2
    # while it is down, one call finishes
    nc = await nats.connect(nats_server.url)
    subject, body = envelope("PostToolUse", tool_name="Bash", tool_use_id="k1", tool_input={"command": "a"})
    await nc.publish(subject, body)
    await nc.flush()
    await nc.close()
    await asyncio.sleep(1.0)
    async with watched(nats_server.url, ch, rules) as (bus, _):
        await bus.wait(resolved("stuck_tool"))
        await asyncio.sleep(1.5)
        after = [(a["details"]["tool_use_id"], a["state"]) for a in bus.alerts]
        assert after == [("k1", "resolved")], after
    rows = ch.query("SELECT id, state FROM alerts FINAL WHERE rule = 'stuck_tool'").result_rows
    assert len(rows) == 3
    still = ch.query("SELECT JSONExtractString(details, 'tool_use_id') FROM open_alerts").result_rows
    assert still == [("k2",)]


async def test_rebuild_takes_what_it_saw_and_the_store_had_not_written(
    nats_server: NatsServer, ch: Client, tmp_path: Path
) -> None:
    """The store behind (here: not running at all) when the watchdog stops: the events it had seen
    are not in the store yet, but the stream holds them; the loop they began still fires when
    the watchdog is back and the call is repeated once more."""
    rules = tmp_path / "rules.toml"
    nc = await nats.connect(nats_server.url)
    await ensure_stream(nc.jetstream(), {})
    await nc.jetstream().add_consumer(STREAM_NAME, store_consumer_config({}))  # a store, behind
    await nc.close()
    call: dict[str, Any] = {"tool_name": "Bash", "tool_input": {"command": "make"}}

    def repeat(i: int) -> list[tuple[str, bytes]]:
        return [envelope("PreToolUse", tool_use_id=f"m{i}", **call),
                envelope("PostToolUseFailure", tool_use_id=f"m{i}", error="exit 2", **call)]  # fmt: skip

    async with watched(nats_server.url, ch, rules, store=False) as (bus, watchdog):
        await bus.send(*[e for i in range(3) for e in repeat(i)])
        for _ in range(200):
            if watchdog.observed >= 6:
                break
            await asyncio.sleep(0.05)
        assert watchdog.observed == 6 and not bus.alerts
    assert ch.query("SELECT count() FROM events").result_rows == [(0,)]
    async with watched(nats_server.url, ch, rules, store=False) as (bus, _):
        await bus.send(*repeat(3))
        alerts = await bus.wait(fired("loop"))
    loop = next(a for a in alerts if a["rule"] == "loop")
    assert loop["details"]["failed"] is True


async def test_budget_skips_without_costs_then_fires(
    nats_server: NatsServer, ch: Client, tmp_path: Path
) -> None:
    rules = tmp_path / "rules.toml"

    async def raise_the_budget() -> None:
        rules.write_text(FAST_RULES.replace("session_usd = 1", "session_usd = 10"))

    async with watched(nats_server.url, ch, rules) as (bus, watchdog):
        await asyncio.sleep(1.5)  # a cost poll with no usage at all
        assert watchdog.engine.costs == [] and not fired("budget")(bus.alerts)
        ch.command(
            "INSERT INTO usage_in (session_id, message_id, request_id, timestamp, agent, team, model, "
            "input_tokens, output_tokens, cost_usd, version) "
            "VALUES ('s9', 'm1', 'r1', now64(3), 'lead', 'red', 'claude', 1000, 1000, 2.5, 1)"
        )
        await bus.wait(fired("budget"))
        alert = next(a for a in bus.alerts if a["rule"] == "budget")
        assert alert["session_id"] == "s9" and alert["severity"] == "critical"
        assert "$2.50" in alert["summary"]
        await check_lifecycle(bus, ch, "budget", raise_the_budget)


async def test_a_busy_demo_team_raises_nothing(nats_server: NatsServer, ch: Client, tmp_path: Path) -> None:
    """The demo's team at 400 events/s for 30 s, with the default rules: no alert."""
    from agentwatch.demo.publisher import run_demo

    rules = tmp_path / "rules.toml"
    async with watched(nats_server.url, ch, rules, default=True) as (bus, watchdog):
        written = rules.read_text()  # the commented default, written on first start
        assert "[loop]\n# enabled = true" in written and "# repeats = 8" in written
        sent = await run_demo(nats_server.url, rate=400, duration=30, seed=7)
        deadline = time.monotonic() + 30
        while watchdog.observed < sent and time.monotonic() < deadline:
            await asyncio.sleep(0.2)
        await asyncio.sleep(1)  # any alert of the last events on its way
        assert sent > 9000 and watchdog.observed >= sent
        assert bus.alerts == [], [(a["rule"], a["summary"]) for a in bus.alerts]


async def test_the_watchdog_alone_reads_with_the_fast_pull(
    nats_server: NatsServer, ch: Client, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`agentwatch alerts run` (no store in the process) fetches and parses as the store does:
    with nats-py's own fetch and parser the watchdog took four times the CPU per event."""
    from nats.js.client import JetStreamContext

    from agentwatch.bus import fastparse, fastpull

    monkeypatch.setattr(JetStreamContext.PullSubscription, "fetch", fastpull._ORIGINAL)
    async with watched(nats_server.url, ch, tmp_path / "rules.toml", store=False) as (bus, watchdog):
        call: dict[str, Any] = {"tool_name": "Bash", "tool_input": {"command": "make"}}
        await bus.send(*(envelope("PreToolUse", tool_use_id=f"f{i}", **call) for i in range(4)))
        await bus.wait(fired("loop"))
        assert JetStreamContext.PullSubscription.fetch is fastpull.fast_fetch
        assert watchdog._broker is not None
        pulls = [getattr(sub, "subscription", None) for sub in watchdog._broker.subscribers]
        connections = {p._nc for p in pulls if isinstance(p, JetStreamContext.PullSubscription)}
        assert [type(nc._ps) for nc in connections] == [fastparse.FastParser]


async def test_beside_the_store_the_watchdog_reads_the_stores_deliveries(
    nats_server: NatsServer, ch: Client, tmp_path: Path
) -> None:
    """Wired as `up` wires them (consumers/app.py): one durable, the store's; a loop and a failure
    burst fire once each, and every event is stored."""
    async with watched(nats_server.url, ch, tmp_path / "alerts.toml", beside=True) as (watcher, _):
        calls = [
            envelope("PreToolUse", agent="looper", tool_use_id=f"l{i}", tool_name="Bash", tool_input={"c": 1})
            for i in range(4)
        ]
        failures = [
            envelope("PostToolUseFailure", agent="breaker", tool_use_id=f"f{i}", tool_name="Bash", error="x")
            for i in range(4)
        ]
        await watcher.send(*calls, *failures)
        await watcher.wait(lambda alerts: fired("loop")(alerts) and fired("failure_burst")(alerts))
        names = [c.config.durable_name for c in await watcher.nc.jsm().consumers_info(STREAM_NAME)]
    assert sorted((a["rule"], a["state"]) for a in watcher.alerts) == [
        ("failure_burst", "firing"),
        ("loop", "firing"),
    ]
    assert names == [STORE_DURABLE]
    assert ch.query("SELECT count() FROM events FINAL").result_rows[0][0] == 8


async def test_the_rebuild_reads_back_what_an_earlier_store_was_delivered_and_no_more(
    nats_server: NatsServer, ch: Client, tmp_path: Path
) -> None:
    """Beside the store, the rebuild reads back from the stream what the store's durable was
    delivered and had not acknowledged (a store killed after fetching), and not what this process
    was handed already while the rebuild ran (`see` takes those after it)."""
    nc = await nats.connect(nats_server.url)
    js = nc.jetstream()
    await ensure_stream(js, {})
    await js.add_consumer(STREAM_NAME, store_consumer_config({}))
    sent = [envelope("PreToolUse", agent="a", tool_use_id=f"u{i}", tool_name="Read") for i in range(15)]
    psub = await js.pull_subscribe_bind(STORE_DURABLE, STREAM_NAME)
    bus = Bus(nc)
    await bus.send(*sent[:10])
    earlier = await psub.fetch(10, timeout=5)  # the killed store's: delivered, never acknowledged
    await bus.send(*sent[10:])
    handed = await psub.fetch(5, timeout=5)  # this process's, while its rebuild runs
    watchdog = Watchdog(ch, {"AGENTWATCH_ALERTS_FILE": str(tmp_path / "alerts.toml")}, durable=STORE_DURABLE)
    watchdog.see(handed)
    broker = NatsBroker(nats_server.url, logger=None)
    await broker.connect()
    watchdog._broker = broker
    try:
        back = await watchdog._seen_not_stored(time.time() - 3600)
    finally:
        await broker.stop()
        await nc.close()
    assert [env["id"] for env in back] == [json.loads(m.data)["id"] for m in earlier]
    assert len(earlier) == 10 and len(handed) == 5
