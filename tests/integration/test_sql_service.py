"""`agentwatch sql`, `status`, `doctor` and the help pages as a person meets them, on a running pipeline."""

from __future__ import annotations

import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import bus_login, clean_env, free_port, run_cli, tool
from tests.integration.test_store import Service
from tests.services import Collector


@pytest.fixture(scope="module")
def pipeline(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    root = tmp_path_factory.mktemp("pipeline")
    env = clean_env(
        AGENTWATCH_DATA_DIR=str(root / "up"), AGENTWATCH_NATS_URL=f"nats://127.0.0.1:{free_port()}"
    )
    up = Service(["up"], env)
    try:
        up.wait_ready(60)
        yield env
    finally:
        code, output = up.stop()
        assert code == 0, output
        assert "Traceback" not in output and "IndexError" not in output, output


@pytest.mark.parametrize("sql", ["SELECT 1; DROP TABLE events", "SELECT 1; SELECT 2"])
def test_a_multi_statement_query_is_refused_and_the_next_one_answers(
    pipeline: dict[str, str], sql: str
) -> None:
    refused = run_cli("sql", sql, env=pipeline)
    assert refused.returncode == 1 and "one statement at a time" in refused.stderr, refused.stderr
    assert refused.stdout == ""
    started = time.monotonic()
    plain = run_cli("sql", "SELECT count() AS n FROM events", "--format", "csv", env=pipeline)
    assert plain.returncode == 0 and plain.stdout.splitlines()[0] == "n", plain.stderr
    assert time.monotonic() - started < 10, "the service stayed healthy"
    exists = "SELECT count() AS n FROM system.tables WHERE database = currentDatabase() AND name = 'events'"
    tables = run_cli("sql", exists, "--format", "jsonl", env=pipeline)
    assert (tables.returncode, tables.stdout) == (0, '{"n":1}\n'), "the table is still there"


def test_a_syntax_error_quotes_only_what_the_user_typed(pipeline: dict[str, str]) -> None:
    result = run_cli("sql", "SELEC 1", env=pipeline)
    assert result.returncode == 1 and "Syntax error" in result.stderr
    assert "FORMAT" not in result.stderr, result.stderr


def test_status_into_a_closed_pipe_prints_no_traceback(pipeline: dict[str, str]) -> None:
    shell = f"{tool('agentwatch')} status | head -1"
    result = subprocess.run(
        ["sh", "-c", shell], env=pipeline, capture_output=True, text=True, timeout=60, check=False
    )
    assert result.stdout.startswith("bus:"), result.stdout
    assert "Traceback" not in result.stderr and "BrokenPipeError" not in result.stderr, result.stderr


def test_doctor_never_publishes_to_the_users_bus(pipeline: dict[str, str], tmp_path: Path) -> None:
    watcher = Collector(bus_login(pipeline, "dashboard"))
    try:
        env = dict(
            pipeline, AGENTWATCH_DATA_DIR=str(tmp_path / "hook"), AGENTWATCH_NATS_URL=bus_login(pipeline)
        )
        result = run_cli("doctor", "--runs", "3", env=env)
        assert result.returncode == 0, result.stdout + result.stderr
        assert "measured with the bus down" in result.stdout and "nothing reached your bus" in result.stdout
        assert watcher.settle(0.5) == [], "doctor published events onto the bus"
    finally:
        watcher.close()
    stored = run_cli("sql", "SELECT count() AS n FROM events", "--format", "jsonl", env=pipeline)
    assert (stored.returncode, stored.stdout) == (0, '{"n":0}\n'), stored.stderr


@pytest.mark.parametrize(
    "command", ["up", "sql", "status", "tui", "doctor", "store", "demo", "hooks", "spool"]
)
def test_every_command_help_says_what_it_does(command: str) -> None:
    result = run_cli(command, "--help", env=clean_env())
    assert result.returncode == 0
    lines = result.stdout.splitlines()
    description = next((line for line in lines[1:] if line.strip() and not line.startswith(" ")), "")
    assert description and not description.startswith(("positional", "options")), result.stdout


def test_a_second_up_says_one_is_running_here(pipeline: dict[str, str]) -> None:
    for command in ("up", "store"):
        second = run_cli(command, env=pipeline, timeout=60)
        assert second.returncode == 2, second.stdout + second.stderr
        assert "agentwatch up is already running here (pid " in second.stderr, second.stderr
        assert "Traceback" not in second.stderr and "chdb" not in second.stderr.lower(), second.stderr
    still = run_cli("sql", "SELECT 1 AS one", "--format", "jsonl", env=pipeline)
    assert (still.returncode, still.stdout) == (0, '{"one":1}\n'), "the first one still answers"
