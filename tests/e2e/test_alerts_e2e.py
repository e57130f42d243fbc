"""The watchdog end to end: `agentwatch store` (which runs it) on a real bus, the installed hook,
the dashboard on its production live source, and `agentwatch alerts`."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from textual.worker import WorkerCancelled

from agentwatch.bus.live import NatsLiveSource
from agentwatch.tui.app import AgentwatchApp
from tests.conftest import clean_env, run_cli
from tests.e2e.test_tui_e2e import capture, emit, roster, status_line, until
from tests.integration.test_store import Service
from tests.services import NatsServer

RULES = "[stuck_tool]\nfloor_s = 1\n"


@pytest.fixture
def store_env(nats_server: NatsServer, tmp_path: Path) -> Iterator[dict[str, str]]:
    rules = tmp_path / "alerts.toml"
    rules.write_text(RULES)
    env = clean_env(
        AGENTWATCH_DATA_DIR=str(tmp_path / "store"),
        AGENTWATCH_NATS_URL=nats_server.url,
        AGENTWATCH_ALERTS_FILE=str(rules),
    )
    store = Service(["store"], env)
    try:
        store.wait_ready()
        yield env
    finally:
        code, output = store.stop()
        assert code == 0, output


async def test_a_stuck_tool_reaches_the_dashboard_and_the_command(
    store_env: dict[str, str], tmp_path: Path
) -> None:
    app = AgentwatchApp(NatsLiveSource(store_env["AGENTWATCH_NATS_URL"]), None)
    app.bell = lambda: None  # type: ignore[method-assign]
    try:
        async with app.run_test(size=(160, 40)) as pilot:
            await until(pilot, "bus connected", lambda: app.state.bus_ok)
            await asyncio.to_thread(emit, capture("PreToolUse", "Bash", "2421d2e0"), store_env, tmp_path)
            started = time.monotonic()
            await until(pilot, "the alert on the status line", lambda: "1 open alert" in status_line(app), 20)
            assert time.monotonic() - started < 1 + 10
            await until(pilot, "the row marked", lambda: any(k.startswith("! ") for k in roster(app)))
    finally:
        for worker in [worker for worker in app.workers if worker.group == "live"]:
            with contextlib.suppress(WorkerCancelled):
                await asyncio.wait_for(worker.wait(), 10)
    deadline = time.monotonic() + 20
    while True:
        result = await asyncio.to_thread(lambda: run_cli("alerts", "--open", env=store_env))
        if "stuck_tool" in result.stdout or time.monotonic() > deadline:
            break
        await asyncio.sleep(0.5)
    assert result.returncode == 0, result.stderr
    assert "firing" in result.stdout and "stuck_tool" in result.stdout and "Bash" in result.stdout
