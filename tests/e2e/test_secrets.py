"""The bus and store passwords never appear in any output: every command and the dashboard's screen,
with `nats://user:S3cretPw@...` and `http://user:S3cretPw@...` URLs, on a bus that is down and on one
that is up and requires that password. Logs the commands write in the data dir are searched too."""

from __future__ import annotations

import asyncio
import contextlib
import json
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from textual.worker import WorkerCancelled

from agentwatch.cli.sources import dashboard_sources
from agentwatch.tui.app import AgentwatchApp
from tests.conftest import clean_env, free_port, run_cli, run_emit, tool
from tests.services import NatsServer, make_stream

SECRET = "S3cretPw"  # noqa: S105 - the test bus's password, searched for in every output
AUTH = f"authorization {{ user: agent, password: {SECRET} }}"
# Commands that answer and exit, whatever the bus; each is run with both URLs.
COMMANDS: list[list[str]] = [
    ["doctor", "--runs", "1", "--timeout", "1"],
    ["spool", "status"],
    ["spool", "flush", "--timeout", "1"],
    ["status"],
    ["sql", "SELECT 1"],
    ["demo", "--count", "3", "--rate", "0"],
    ["hooks", "print"],
]


def no_secret(where: str, text: str) -> None:
    assert SECRET not in text, f"the password is in {where}:\n{text}"


def scan_files(root: Path) -> None:
    """Every readable file the commands left in the data dir (logs, crash log, spool)."""
    for path in root.rglob("*"):
        if path.is_file() and path.stat().st_size < 5_000_000:
            no_secret(str(path), path.read_bytes().decode("utf-8", "replace"))


@pytest.fixture(scope="module")
def auth_bus(tmp_path_factory: pytest.TempPathFactory) -> Iterator[NatsServer]:
    server = NatsServer(tmp_path_factory.mktemp("auth-bus"), config=AUTH, stream=False).start()
    make_stream(f"nats://agent:{SECRET}@127.0.0.1:{server.port}")
    yield server
    server.stop()


def env_for(tmp_path: Path, nats: str, clickhouse: str = "") -> dict[str, str]:
    env = clean_env(AGENTWATCH_DATA_DIR=str(tmp_path / "data"), AGENTWATCH_NATS_URL=nats)
    if clickhouse:
        env["AGENTWATCH_CLICKHOUSE_URL"] = clickhouse
    return env


@pytest.mark.parametrize("up", [False, True], ids=["bus-down", "bus-up"])
@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: "-".join(c[:2]))
def test_no_command_prints_the_bus_password(
    command: list[str], up: bool, auth_bus: NatsServer, tmp_path: Path
) -> None:
    port = auth_bus.port if up else free_port()
    env = env_for(tmp_path, f"nats://agent:{SECRET}@127.0.0.1:{port}")
    # An event in the spool, so that `spool flush` has something to send (or fail to send).
    run_emit(
        b'{"hook_event_name": "Stop", "session_id": "secret-test"}',
        env_for(tmp_path, env["AGENTWATCH_NATS_URL"].replace(str(port), str(free_port()))),
    )
    result = run_cli(*command, env=env, timeout=60)
    no_secret(f"`agentwatch {' '.join(command)}` stdout", result.stdout)
    no_secret(f"`agentwatch {' '.join(command)}` stderr", result.stderr)
    assert "Traceback" not in result.stderr, result.stderr
    scan_files(tmp_path / "data")


def test_up_refuses_a_remote_bus_that_is_down_without_the_password(tmp_path: Path) -> None:
    env = env_for(tmp_path, f"nats://agent:{SECRET}@127.0.0.1:{free_port()}")
    result = run_cli("up", env=env, timeout=60)
    assert result.returncode == 2 and "no server answers at nats://agent:***@127.0.0.1" in result.stderr
    no_secret("`agentwatch up`", result.stdout + result.stderr)
    scan_files(tmp_path / "data")


@pytest.mark.parametrize("command", [["status"], ["sql", "SELECT 1"]], ids=["status", "sql"])
def test_no_command_prints_the_clickhouse_password(command: list[str], tmp_path: Path) -> None:
    env = env_for(
        tmp_path,
        f"nats://agent:{SECRET}@127.0.0.1:{free_port()}",
        f"http://reader:{SECRET}@127.0.0.1:{free_port()}/agentwatch",
    )
    result = run_cli(*command, env=env, timeout=60)
    no_secret("stdout", result.stdout)
    no_secret("stderr", result.stderr)
    assert result.returncode != 0 and "Traceback" not in result.stderr, result.stderr


def test_the_collector_never_prints_the_password(auth_bus: NatsServer, tmp_path: Path) -> None:
    env = env_for(tmp_path, f"nats://agent:{SECRET}@127.0.0.1:{auth_bus.port}")
    proc = subprocess.Popen(
        [tool("agentwatch"), "store"], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    seen: list[str] = []
    assert proc.stdout is not None
    for line in proc.stdout:
        seen.append(line)
        if line.startswith("Ctrl-C stops"):
            break
    assert any("agentwatch store on nats://agent:***@127.0.0.1" in line for line in seen), seen
    sql = run_cli("sql", "SELECT count() AS n FROM events", "--format", "json", env=env)
    # Whatever the module's earlier commands left on the bus may be stored by now: the answer is a count.
    assert sql.returncode == 0 and isinstance(json.loads(sql.stdout)[0]["n"], int), sql.stderr
    proc.send_signal(signal.SIGINT)
    out, _ = proc.communicate(timeout=60)
    assert proc.returncode == 0, "".join(seen) + out
    no_secret("`agentwatch store` output", "".join(seen) + out + sql.stdout + sql.stderr)
    scan_files(tmp_path / "data")


@pytest.mark.parametrize("up", [False, True], ids=["bus-down", "bus-up"])
async def test_the_dashboard_never_shows_the_password(up: bool, auth_bus: NatsServer, tmp_path: Path) -> None:
    port = auth_bus.port if up else free_port()
    env = env_for(tmp_path, f"nats://agent:{SECRET}@127.0.0.1:{port}")
    live, history = dashboard_sources(env)
    app = AgentwatchApp(live, history)
    try:
        async with app.run_test(size=(160, 40)) as pilot:
            for _ in range(150):  # until the status line says what it found: connected, or unreachable
                await pilot.pause(0.1)
                status = str(app.query_one("#status").render())
                # The bus's own verdict on the status line (not the store's, which may come first,
                # nor bus_ok before the line is repainted).
                said = "connecting to the bus" not in status
                found = (
                    (app.bus_ok and "store: not asked" not in status)
                    if up
                    else "○ no server answers" in status
                )
                if said and found:
                    break
            # The status as it was when it said so: a down bus's line goes back to "connecting"
            # between retries.
            screen = app.export_screenshot()
            connected = app.bus_ok
    finally:
        for worker in [w for w in app.workers if w.group == "live"]:
            with contextlib.suppress(WorkerCancelled, asyncio.TimeoutError):
                await asyncio.wait_for(worker.wait(), 10)
    assert connected == up, status
    assert "agent:***@127.0.0.1" in screen or "agent:***@127.0.0.1" in status, status
    no_secret("the dashboard's screen", screen)
