"""The web server's tabs, in process: a tab whose browser has stopped answering (a laptop lid, a
network gone without a word: no close, no reset) loses its dashboard after the heartbeat.

The server is the real one (agentwatch.web.server) with a one-second heartbeat instead of fifteen;
the dashboard is the real `python -m agentwatch tui`, on a bus that does not answer.
"""

from __future__ import annotations

import asyncio
import shlex
import sys
import time
from pathlib import Path

import aiohttp
import pytest
from aiohttp import WSMsgType, web

from agentwatch.web.auth import cookie_value
from agentwatch.web.server import DashboardServer
from tests.conftest import free_port

TOKEN = "a-test-token-of-some-length"  # noqa: S105 - this test's own server's


def running(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


async def dashboard_of(server: DashboardServer, tab: aiohttp.ClientWebSocketResponse, known: set[int]) -> int:
    """The process of the tab just opened, once it draws (its alternate screen)."""
    drawn = b""
    while b"\x1b[?1049h" not in drawn:
        message = await asyncio.wait_for(tab.receive(), 60)
        assert message.type in (WSMsgType.BINARY, WSMsgType.PING), message
        drawn += message.data if message.type == WSMsgType.BINARY else b""
    (pid,) = {dashboard.pid for dashboard in server.dashboards} - known
    assert pid is not None and running(pid)
    return pid


async def read_on(tab: aiohttp.ClientWebSocketResponse) -> None:
    """Read what the tab gets, as a browser does (aiohttp answers pings as it reads)."""
    async for _message in tab:
        pass


async def test_a_tab_that_answers_no_ping_loses_its_dashboard(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name, value in {"AGENTWATCH_DATA_DIR": str(tmp_path / "data"),
                        "AGENTWATCH_CONFIG_DIR": str(tmp_path / "config"),
                        "AGENTWATCH_NATS_URL": f"nats://127.0.0.1:{free_port()}"}.items():  # fmt: skip
        monkeypatch.setenv(name, value)  # the dashboard's environment is the server's
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    command = shlex.join([sys.executable, "-m", "agentwatch", "tui"])
    server = DashboardServer(command, host="127.0.0.1", port=port, url=url, token=TOKEN, max_sessions=2)
    server.heartbeat = 1.0
    runner = web.AppRunner(await server._make_app())
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", port).start()
    signed_in = {"Cookie": f"{server.cookie}={cookie_value(TOKEN)}"}
    try:
        async with aiohttp.ClientSession(headers=signed_in) as client:
            # One tab answers the pings (aiohttp does, while the tab is read); the other, with
            # autoping off, sees them and says nothing, as from a machine gone to sleep.
            answering = await client.ws_connect(f"{url}/ws?width=120&height=40")
            kept = await dashboard_of(server, answering, set())
            reading = asyncio.ensure_future(read_on(answering))
            silent = await client.ws_connect(f"{url}/ws?width=120&height=40", autoping=False)
            lost = await dashboard_of(server, silent, {kept})
            start = time.monotonic()
            while running(lost) or len(server.dashboards) > 1:
                assert time.monotonic() - start < 10, "the dashboard outlived its silent tab"
                await asyncio.sleep(0.05)
            print(
                f"\ndashboard gone {time.monotonic() - start:.2f}s after its tab fell silent (heartbeat 1s)"
            )
            await asyncio.sleep(max(0.0, 3 - (time.monotonic() - start)))
            assert running(kept), "the tab that answers keeps its dashboard through the pings"
            await answering.close()
            await silent.close()
            await asyncio.wait_for(reading, 10)  # ends with its tab
    finally:
        await runner.cleanup()
