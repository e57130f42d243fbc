"""The bus and store passwords never appear in any output: every command and the dashboard's screen,
with `nats://user:S3cretPw@...` and `http://user:S3cretPw@...` URLs, on a bus that is down and on one
that is up and requires that password. Logs the commands write in the data dir are searched too.

And the secrets agents handle never reach the bus or the store: every sample of the redactor's
tests (tests/unit/test_redact.py) through the real hook, a real nats-server with the GENIE stream and
the real store: neither a message on the bus nor a stored row holds any of them."""

from __future__ import annotations

import asyncio
import contextlib
import json
import signal
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from textual.worker import WorkerCancelled

from agentwatch.cli.sources import dashboard_sources
from agentwatch.tui.app import AgentwatchApp
from tests.conftest import clean_env, free_port, hook_settled, run_cli, run_emit, tool
from tests.integration.test_store import Service, sql_rows, wait_rows
from tests.services import Collector, NatsServer, make_stream
from tests.unit.test_redact import SAMPLES, SESSION, SHAPES, bash

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
                    (app.state.bus_ok and "store: not asked" not in status)
                    if up
                    else "○ no server answers" in status
                )
                if said and found:
                    break
            # The status as it was when it said so: a down bus's line goes back to "connecting"
            # between retries.
            screen = app.export_screenshot()
            connected = app.state.bus_ok
    finally:
        for worker in [w for w in app.workers if w.group == "live"]:
            with contextlib.suppress(WorkerCancelled, asyncio.TimeoutError):
                await asyncio.wait_for(worker.wait(), 10)
    assert connected == up, status
    assert "agent:***@127.0.0.1" in screen or "agent:***@127.0.0.1" in status, status
    no_secret("the dashboard's screen", screen)


def test_no_secret_of_the_samples_reaches_the_bus_or_the_store(
    nats_server: NatsServer, collector_for: Callable[[str], Collector], tmp_path: Path
) -> None:
    payloads = [sample.payload for sample in SAMPLES.values()]
    payloads += [bash(command) for command, _ in SHAPES.values()]
    secrets = sorted(
        {s for sample in SAMPLES.values() for s in sample.secrets} | {s for _, s in SHAPES.values()}
    )
    for secret in secrets:
        assert any(secret in json.dumps(p) for p in payloads), secret
    watcher = collector_for(nats_server.url)
    env = clean_env(
        AGENTWATCH_DATA_DIR=str(tmp_path / "store"),
        AGENTWATCH_NATS_URL=nats_server.url,
        AGENTWATCH_METRICS_ADDR="off",
        AGENTWATCH_OTLP_ADDR="off",
    )
    hook_env = clean_env(AGENTWATCH_DATA_DIR=str(tmp_path / "hook"), AGENTWATCH_NATS_URL=nats_server.url)
    store = Service(["store"], env)
    try:
        store.wait_ready(60)
        for payload in payloads:
            done = run_emit(json.dumps(payload).encode(), hook_env)
            assert done.returncode == 0 and not done.stdout, done.stderr
        assert hook_settled(hook_env["AGENTWATCH_DATA_DIR"], 30)
        expected = len(payloads) + 0  # no SendMessage among them: one message each
        on_bus = watcher.wait_for(expected, 30)
        assert len(on_bus) == expected
        for msg in on_bus:
            body = msg.data.decode()
            assert json.loads(body)["redacted"] > 0, body[:300]
            leaked = [secret for secret in secrets if secret in body]
            assert leaked == [], (msg.subject, leaked)
        where = f"session_id = '{SESSION}'"
        wait_rows(env, f"SELECT count() AS n FROM events WHERE {where}", expected, timeout=60)  # noqa: S608
        # Every stored column of every row, searched by the store itself (an answer that lists the
        # rows could be cut to fit one message); the same search finds what is there.
        listed = ", ".join("'" + s.replace("\\", "\\\\").replace("'", "\\'") + "'" for s in secrets)
        columns = [c["name"] for c in sql_rows(env, "DESCRIBE TABLE events")]
        assert "data" in columns and "text" in columns, columns
        row = "arrayStringConcat([" + ", ".join(f"toString(`{c}`)" for c in columns) + "], ' ')"
        counts = f"countIf(multiSearchAny({row}, [{listed}])) AS leaked, count() AS n, "
        counts += f"countIf(position({row}, '[REDACTED:') > 0) AS marked, min(redacted) AS least"
        (found,) = sql_rows(env, f"SELECT {counts} FROM events WHERE {where}")  # noqa: S608
        assert found == {"leaked": 0, "n": expected, "marked": expected, "least": found["least"]}, found
        assert int(found["least"]) > 0
        (letters,) = sql_rows(env, "SELECT count() AS n FROM dead_letters")
        assert int(letters["n"]) == 0
    finally:
        code, out = store.stop()
    assert code == 0, out
    for secret in secrets:
        assert secret not in out
