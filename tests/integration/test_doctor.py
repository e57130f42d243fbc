"""`agentwatch doctor`: the hook's health without touching stdout of the hook itself."""

from __future__ import annotations

import json
from pathlib import Path

from tests.conftest import clean_env, free_port, run_cli, run_emit
from tests.services import NatsServer


def test_doctor_with_bus_up(nats_server: NatsServer, tmp_path: Path) -> None:
    env = clean_env(AGENTWATCH_DATA_DIR=str(tmp_path / "data"), AGENTWATCH_NATS_URL=nats_server.url)
    result = run_cli("doctor", "--runs", "3", env=env)
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert f"127.0.0.1:{nats_server.port}  (from AGENTWATCH_NATS_URL)" in out
    assert "answers: nats-server 2." in out and "JetStream on" in out
    assert "no stream keeps genie.>" not in out  # the fixture's bus has the GENIE stream
    assert "spool:     0 message(s)" in out
    assert "crash log: 0 line(s)" in out
    assert "hook time:" in out and "x a bare `python -c pass`" in out
    queue = tmp_path / "data" / "spool" / "queue"
    assert not queue.exists(), "the timing probe never spools into the user's spool"


def test_doctor_with_bus_down_shows_spool_and_crash_log(tmp_path: Path) -> None:
    data = tmp_path / "data"
    env = clean_env(
        AGENTWATCH_DATA_DIR=str(data), AGENTWATCH_NATS_URL=f"nats://user:hunter2@127.0.0.1:{free_port()}"
    )
    assert run_emit(b'{"hook_event_name": "Stop", "session_id": "s"}', env).returncode == 0
    record = {"kind": "crash", "message": "boom from a test"}
    data.joinpath("crash.jsonl").write_text(json.dumps(record) + "\n")
    result = run_cli("doctor", "--runs", "2", "--timeout", "0.5", env=env)
    assert result.returncode == 1
    out = result.stdout
    # The line every command says for no server there, naming the setting to fix.
    assert "no server answers at nats://user:***@127.0.0.1" in out and "AGENTWATCH_NATS_URL" in out
    assert "hunter2" not in out, "the password in the URL is never printed"
    assert "user:***@" in out
    assert "spool:     1 message(s)" in out and "agentwatch spool flush" in out
    assert "boom from a test" in out


def test_doctor_warns_of_a_bus_where_no_stream_keeps_the_events(tmp_path: Path) -> None:
    """JetStream on, no stream (`agentwatch up` never ran there): the hook publishes and its events
    are gone; doctor says so and exits non-zero."""
    bare = NatsServer(tmp_path / "nats", stream=False).start()
    try:
        env = clean_env(AGENTWATCH_DATA_DIR=str(tmp_path / "data"), AGENTWATCH_NATS_URL=bare.url)
        result = run_cli("doctor", "--runs", "1", env=env)
    finally:
        bare.stop()
    assert result.returncode == 1, result.stderr
    assert "WARNING: no stream keeps genie.> on this bus" in result.stdout
    assert "run `agentwatch up` here" in result.stdout
