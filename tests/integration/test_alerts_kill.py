"""The watchdog inside `agentwatch store`, killed (SIGKILL) while alerts fire and restarted: every
firing alert is still open, none is published or stored twice, and what cleared while it was down
resolves."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import nats

from tests.conftest import clean_env
from tests.integration.test_alerts import FAST_RULES, envelope
from tests.integration.test_store import Service, sql_rows, wait_rows
from tests.services import Collector, NatsServer


async def _publish(url: str, *messages: tuple[str, bytes]) -> None:
    nc = await nats.connect(url)
    for subject, body in messages:
        await nc.publish(subject, body)
    await nc.flush()
    await nc.close()


def _alerts(collector: Collector) -> list[tuple[str, str]]:
    out = []
    for msg in collector.messages:
        alert = json.loads(msg.data)
        out.append((alert["details"]["tool_use_id"], alert["state"]))
    return out


def test_killed_watchdog_neither_loses_nor_repeats(nats_server: NatsServer, tmp_path: Path) -> None:
    rules = tmp_path / "alerts.toml"
    rules.write_text(FAST_RULES)
    env = clean_env(
        AGENTWATCH_DATA_DIR=str(tmp_path / "data"),
        AGENTWATCH_NATS_URL=nats_server.url,
        AGENTWATCH_ACK_WAIT_SECONDS="3",
        AGENTWATCH_ALERTS_FILE=str(rules),
    )
    collector = Collector(nats_server.url, "agentwatch.alert.>")
    service = Service(["store"], env)
    try:
        service.wait_ready()
        call: dict[str, Any] = {"tool_name": "Bash", "tool_input": {"command": "sleep"}}
        asyncio.run(
            _publish(
                nats_server.url,
                envelope("PreToolUse", tool_use_id="k1", **call),
                envelope("PreToolUse", tool_use_id="k2", **call),
            )
        )
        # The watchdog's consumer starts with the service: until it is there, nothing is watched.
        fired = collector.wait_for(2, timeout=30)
        assert sorted(_alerts(collector)) == [("k1", "firing"), ("k2", "firing")], fired
        wait_rows(env, "SELECT count() AS n FROM open_alerts", 2)
    finally:
        service.kill()
    asyncio.run(_publish(nats_server.url, envelope("PostToolUse", tool_use_id="k1", **call)))
    restarted = Service(["store"], env)
    try:
        restarted.wait_ready()
        collector.wait_for(3, timeout=30)
        seen = collector.settle(quiet=2.0)
        assert sorted(_alerts(collector)) == [("k1", "firing"), ("k1", "resolved"), ("k2", "firing")], seen
        wait_rows(env, "SELECT count() AS n FROM alerts FINAL", 3)
        still = sql_rows(env, "SELECT JSONExtractString(details, 'tool_use_id') AS use_id FROM open_alerts")
        assert still == [{"use_id": "k2"}]
    finally:
        restarted.stop()
        collector.close()


def test_a_fleets_store_without_a_watchdog_and_one_for_all(nats_server: NatsServer, tmp_path: Path) -> None:
    """`agentwatch store --no-watchdog` stores and watches nothing; `agentwatch alerts run` beside
    it (its own durable) raises the loop's alert, once (with the store's own watchdog too, twice).
    The calls never end, so their stuck_tool alerts come as well, once each."""
    rules = tmp_path / "alerts.toml"
    rules.write_text(FAST_RULES)
    common = {"AGENTWATCH_NATS_URL": nats_server.url, "AGENTWATCH_ALERTS_FILE": str(rules)}
    store_env = clean_env(AGENTWATCH_DATA_DIR=str(tmp_path / "store"), **common)
    watch_env = clean_env(AGENTWATCH_DATA_DIR=str(tmp_path / "watchdog"), **common)
    collector = Collector(nats_server.url, "agentwatch.alert.>")
    store = Service(["store", "--no-watchdog"], store_env)
    watchdog = Service(["alerts", "run"], watch_env)
    try:
        store.wait_ready()
        watchdog.wait_ready()
        assert any("no watchdog here" in line for line in store.lines), store.lines
        call: dict[str, Any] = {"tool_name": "Bash", "tool_input": {"command": "sleep"}}
        loop = [envelope("PreToolUse", agent="looper", tool_use_id=f"n{i}", **call) for i in range(4)]
        asyncio.run(_publish(nats_server.url, *loop))
        collector.wait_for(1, timeout=30)
        seen = collector.settle(quiet=2.0)
        wait_rows(store_env, "SELECT count() AS n FROM events FINAL", 4)
    finally:
        store.stop()
        watchdog.stop()
        collector.close()
    alerts = [json.loads(m.data) for m in seen]
    assert [a["state"] for a in alerts if a["rule"] == "loop"] == ["firing"], alerts
    assert len({(a["id"], a["state"]) for a in alerts}) == len(alerts), "each alert once"
