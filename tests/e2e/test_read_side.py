"""One read side: a history source keeps one connection for its life, however often it is asked.

The bus's own list of connections (nats-server's monitoring endpoint, every connection it had,
by name) says how many the history opened: the tools view refreshing every 0.3 s and the
dashboard asking the store for its figures as often open one between them, not one a question.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from textual.app import App
from textual.worker import WorkerCancelled

from agentwatch.bus.live import NatsLiveSource
from agentwatch.cli.sources import History
from agentwatch.store.answer import HistoryUnreachable, QueryFailed
from agentwatch.tui.app import AgentwatchApp
from agentwatch.tui.tools_view import ToolsScreen
from tests.conftest import clean_env, free_port
from tests.integration.test_store import Service
from tests.services import NatsServer


@pytest.fixture
def monitored(tmp_path: Path) -> Iterator[tuple[NatsServer, int]]:
    """A nats-server with its monitoring endpoint on a port of its own."""
    port = free_port()
    server = NatsServer(tmp_path / "nats", config=f"http: 127.0.0.1:{port}\n").start()
    yield server, port
    server.stop()


def total_connections(port: int) -> int:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/varz", timeout=5) as reply:
        varz: dict[str, Any] = json.loads(reply.read())
    return int(varz["total_connections"])


def connections(port: int) -> list[str]:
    """The names of the connections the bus had (open and closed): what a failure shows."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/connz?state=all", timeout=5) as reply:
        connz: dict[str, Any] = json.loads(reply.read())
    return [str(c.get("name", "")) for c in connz.get("connections", [])]


class ToolsHost(App[None]):
    def __init__(self, history: History) -> None:
        super().__init__()
        self.history = history

    def on_mount(self) -> None:
        self.push_screen(ToolsScreen(self.history, refresh_seconds=0.3))


def test_the_tools_view_and_the_dashboard_keep_one_connection(
    monitored: tuple[NatsServer, int], tmp_path: Path
) -> None:
    server, port = monitored
    env = clean_env(AGENTWATCH_DATA_DIR=str(tmp_path / "store"), AGENTWATCH_NATS_URL=server.url)
    store = Service(["store"], env)
    try:
        store.wait_ready()
        history = History(env, timeout=10)
        before = total_connections(port)

        async def tools() -> int:
            app = ToolsHost(history)
            async with app.run_test(size=(120, 30)) as pilot:
                screen = app.screen
                assert isinstance(screen, ToolsScreen)
                deadline = time.monotonic() + 20
                asked = 0
                while asked < 8:  # eight refreshes, three questions each
                    assert time.monotonic() < deadline, screen.status_text
                    await pilot.pause(0.1)
                    if screen.updated_at is not None:
                        asked += 1
                        screen.updated_at = None
                assert not screen.status_is_error, screen.status_text
                return asked

        assert asyncio.run(tools()) == 8
        assert connections(port).count("agentwatch-read") == 1 == history.connections, connections(port)

        async def dashboard() -> None:
            app = AgentwatchApp(NatsLiveSource(server.url, env), history, refresh_seconds=0.2)
            try:
                async with app.run_test(size=(160, 40)) as pilot:
                    await pilot.pause(3)  # about fifteen refreshes of the store's figures
                    assert app.state.store_ok, app.state.store_text
            finally:
                for worker in [w for w in app.workers if w.group == "live"]:
                    with contextlib.suppress(WorkerCancelled):
                        await asyncio.wait_for(worker.wait(), 10)

        asyncio.run(dashboard())
        # The live feed's subscription is a connection of its own; the history's is still the one.
        assert connections(port).count("agentwatch-read") == 1 == history.connections, connections(port)
        assert total_connections(port) > before
        with pytest.raises(QueryFailed, match="ClickHouse"):
            history.query("SELECT nothing FROM nowhere")
        assert history.query("SELECT 1 AS one").first() == {"one": 1}, "a failed query keeps the connection"
        assert history.connections == 1
        history.close()
    finally:
        code, output = store.stop()
        assert code == 0, output


def test_no_store_on_the_bus_is_one_clear_error(monitored: tuple[NatsServer, int], tmp_path: Path) -> None:
    server, _ = monitored
    env = clean_env(AGENTWATCH_DATA_DIR=str(tmp_path / "nobody"), AGENTWATCH_NATS_URL=server.url)
    history = History(env, timeout=2)
    with pytest.raises(HistoryUnreachable, match="no store answers queries on this bus"):
        history.query("SELECT 1")
    history.close()
