"""What a new user meets after the first minutes, on the real CLI: `agentwatch up` as a subprocess
(its own nats-server, embedded ClickHouse), the installed hook, and the commands a person types.

One pipeline serves the module: the hook spools two events while no bus answers, `up` starts on
that data dir and sends them; Codex-like sessions whose time-ordered ids share their head follow.
"""

from __future__ import annotations

import http.server
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from agentwatch.demo.simulator import DEMO_HOST
from tests.conftest import PROJECTS, clean_env, free_port, hook_settled, run_cli, run_emit, tool
from tests.integration.test_store import Service, sql_rows, wait_rows

pytestmark = pytest.mark.timeout(180)

# Time-ordered ids (UUIDv7, as Codex makes them): the same first 13 characters, told apart by the rest.
CODEX_SESSIONS = [f"01a20acb-78d6-7213-a0ef-464c84de{n:04x}" for n in (0x1937, 0x2A41, 0x3B52)]
SPOOLED = "spooled-before-up"
PRICED = "125e5f68-1714-4000-8a5c-8a4c1647b892"  # a fixture transcript with API messages
NAMELESS = "0b5e55ed-0000-4000-8000-00000000f00d"  # a session whose payload names no event
COST_ONLY = "c0570000-0000-4000-8000-000000000001"  # Claude Code's own total, no API message


def emit(env: dict[str, str], payload: dict[str, Any]) -> None:
    done = run_emit(json.dumps(payload).encode(), env)
    assert done.returncode == 0, done.stderr


def prompt(session: str, text: str) -> dict[str, Any]:
    return {"hook_event_name": "UserPromptSubmit", "session_id": session, "prompt": text, "cwd": "/srv/zoo"}


@pytest.fixture(scope="module")
def pipeline(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[dict[str, str], Service]]:
    env = clean_env(
        AGENTWATCH_DATA_DIR=str(tmp_path_factory.mktemp("data")),
        AGENTWATCH_NATS_URL=f"nats://127.0.0.1:{free_port()}",
        AGENTWATCH_ALERT_BELL="0",
        AGENTWATCH_METRICS_ADDR="off",
        AGENTWATCH_OTLP_ADDR=f"127.0.0.1:{free_port()}",
    )
    # No bus yet: the hook keeps both events in its spool.
    emit(env, prompt(SPOOLED, "kept while the bus was down"))
    emit(env, {"hook_event_name": "Stop", "session_id": SPOOLED, "cwd": "/srv/zoo"})
    assert hook_settled(env["AGENTWATCH_DATA_DIR"])
    up = Service(["up"], env)
    try:
        up.wait_ready(60)
        for n, session in enumerate(CODEX_SESSIONS):
            emit(env, prompt(session, f"feed the zebrawords, pen {n}"))
        assert hook_settled(env["AGENTWATCH_DATA_DIR"])
        ids = ", ".join(f"'{session}'" for session in CODEX_SESSIONS)
        wait_rows(env, f"SELECT count() AS n FROM events WHERE session_id IN ({ids})", len(CODEX_SESSIONS))  # noqa: S608
        yield env, up
    finally:
        up.stop()


def test_up_sends_what_the_hook_spooled_and_says_so(pipeline: tuple[dict[str, str], Service]) -> None:
    env, up = pipeline
    banner = "".join(up.lines)
    assert "spool:       sent 2 message(s) the hook spooled while the bus was down" in banner
    assert "register the hook" in banner  # an empty store: how to bring events
    wait_rows(env, f"SELECT count() AS n FROM events WHERE session_id = '{SPOOLED}'", 2, timeout=10)  # noqa: S608
    rows = sql_rows(env, f"SELECT event FROM events WHERE session_id = '{SPOOLED}' ORDER BY timestamp")  # noqa: S608 - a constant
    assert [r["event"] for r in rows] == ["UserPromptSubmit", "Stop"]
    status = run_cli("spool", env=env)  # bare: the status, not a usage error
    assert status.returncode == 0, status.stderr
    assert "pending:  0 event message(s)" in status.stdout


def test_search_tells_time_ordered_sessions_apart(pipeline: tuple[dict[str, str], Service]) -> None:
    env, _ = pipeline
    table = run_cli("search", "zebrawords", env=env)
    assert table.returncode == 0, table.stderr
    shown = {session[-8:] for session in CODEX_SESSIONS}
    lines = [line for line in table.stdout.splitlines() if "zebrawords" in line]
    assert len(lines) == 3
    assert {line.split()[2] for line in lines} == shown, table.stdout
    assert "…" not in "".join(line.split()[2] for line in lines)


def test_session_options_take_a_unique_part(pipeline: tuple[dict[str, str], Service], tmp_path: Path) -> None:
    env, _ = pipeline
    wanted = CODEX_SESSIONS[1]
    for part in (wanted[-8:], wanted[:33]):  # the short id a screen shows; a unique prefix
        out = tmp_path / "one.jsonl"
        done = run_cli("export", "--session", part, "-o", str(out), env=env)
        assert done.returncode == 0, done.stderr
        assert {json.loads(line)["session_id"] for line in out.read_text().splitlines()} == {wanted}
        found = run_cli("search", "zebrawords", "--session", part, "--format", "json", env=env)
        assert found.returncode == 0, found.stderr
        assert [r["session_id"] for r in json.loads(found.stdout)] == [wanted]
    # The head every one of them shares: which sessions match, and a non-zero exit.
    for command in (["export", "--session", "01a20acb"], ["search", "zebrawords", "--session", "01a20acb"]):
        many = run_cli(*command, env=env)
        assert many.returncode == 2 and "matches 3 sessions" in many.stderr, many.stderr
        assert all(session in many.stderr for session in CODEX_SESSIONS)


def test_cost_lists_what_its_total_counts(pipeline: tuple[dict[str, str], Service], tmp_path: Path) -> None:
    """A session whose transcript holds Claude Code's own total and no API message is not a
    `0 calls` row under a total that does not count it; an empty window says what is stored."""
    env, _ = pipeline
    project = tmp_path / "projects" / "-srv-zoo"
    project.mkdir(parents=True)
    shutil.copy(PROJECTS / "-home-dev-lab-proj" / f"{PRICED}.jsonl", project)
    state = {"type": "cost-state", "sessionId": COST_ONLY, "totalCostUSD": 0.5, "startTime": 1795345281232,
             "totalDuration": 798, "modelUsage": {}}  # fmt: skip
    (project / f"{COST_ONLY}.jsonl").write_text(json.dumps(state) + "\n")
    imported = run_cli("import", str(tmp_path / "projects"), env=env, timeout=120)
    assert imported.returncode == 0, imported.stderr
    wait_rows(env, "SELECT count() AS n FROM cost_states FINAL", 2)
    wait_rows(env, "SELECT count() AS n FROM usage FINAL", 1)
    listed = run_cli("cost", env=env)
    assert listed.returncode == 0, listed.stderr
    table, _, foot = listed.stdout.partition("\n\n")
    rows = table.splitlines()[2:]  # under the header and its rule
    assert [row.split()[0] for row in rows] == [PRICED]
    assert f"in {len(rows)} sessions" in foot, listed.stdout
    empty = run_cli("cost", "--since", "30m", env=env)
    assert empty.returncode == 0, empty.stderr
    calls = sql_rows(env, "SELECT count() AS n FROM usage FINAL")[0]["n"]
    assert "no token usage stored yet" not in empty.stdout
    assert "no API calls stored since " in empty.stdout and f"{calls:,} stored in all" in empty.stdout


def test_invalid_hook_input_is_kept_with_its_reason_and_makes_no_agent(
    pipeline: tuple[dict[str, str], Service],
) -> None:
    env, _ = pipeline
    for raw in (b"not json", b"{}", f'{{"session_id": "{NAMELESS}"}}'.encode()):
        assert run_emit(raw, env).returncode == 0
    assert hook_settled(env["AGENTWATCH_DATA_DIR"])
    query = "SELECT count() AS n FROM events WHERE event IN ('InvalidPayload', 'Unknown')"
    wait_rows(env, query, 3)
    kept = sql_rows(env, "SELECT agent, text FROM events WHERE event IN ('InvalidPayload', 'Unknown')")
    assert sorted(r["text"] for r in kept) == [
        "invalid hook input: hook_event_name missing",
        "invalid hook input: hook_event_name missing",
        "invalid hook input: not JSON (expecting a value at char 0)",
    ]
    phantoms = {str(r["agent"]) for r in kept}
    assert phantoms == {"unknown", "main", f"main-{NAMELESS[:8]}"}
    agents = {str(r["agent"]) for r in sql_rows(env, "SELECT agent FROM agents")}
    assert {f"main-{s[-8:]}" for s in CODEX_SESSIONS} <= agents  # the sessions' own agents are there
    assert not phantoms & agents


def test_otel_install_checks_who_holds_the_receivers_address(
    pipeline: tuple[dict[str, str], Service], tmp_path: Path
) -> None:
    env, _ = pipeline
    home = dict(env, HOME=str(tmp_path / "home"))
    settings = tmp_path / "home" / ".claude" / "settings.json"
    ours = run_cli("hooks", "install", "--harness", "claude", "--otel", env=home)
    assert ours.returncode == 0, ours.stderr
    assert f"http://{env['AGENTWATCH_OTLP_ADDR']}" in settings.read_text()
    # Another program on the address: refused, settings untouched.
    foreign = http.server.ThreadingHTTPServer(("127.0.0.1", 0), http.server.SimpleHTTPRequestHandler)
    threading.Thread(target=foreign.serve_forever, daemon=True).start()
    try:
        before = settings.read_text()
        other = dict(home, AGENTWATCH_OTLP_ADDR=f"127.0.0.1:{foreign.server_address[1]}")
        refused = run_cli("hooks", "install", "--harness", "claude", "--otel", env=other)
    finally:
        foreign.shutdown()
        foreign.server_close()
    assert refused.returncode == 2
    assert (
        "held by another program (SimpleHTTP" in refused.stderr and "AGENTWATCH_OTLP_ADDR" in refused.stderr
    )
    assert settings.read_text() == before


def test_demo_tool_durations_agree_with_its_clock(pipeline: tuple[dict[str, str], Service]) -> None:
    """The demo sends at its own pace: a result's duration is how long after its call it was sent."""
    env, _ = pipeline
    done = run_cli("demo", "--count", "400", "--rate", "400", "--seed", "7", env=env, timeout=60)
    assert done.returncode == 0, done.stderr
    query = (
        "SELECT p.duration_ms AS duration, dateDiff('millisecond', c.timestamp, p.timestamp) AS gap "
        "FROM events AS p INNER JOIN events AS c "
        "ON c.tool_use_id = p.tool_use_id AND c.session_id = p.session_id "
        "WHERE c.event = 'PreToolUse' AND p.event IN ('PostToolUse', 'PostToolUseFailure') "
        "AND p.host = 'HOST'"
    ).replace("HOST", DEMO_HOST)
    deadline = time.monotonic() + 30
    while not (rows := sql_rows(env, query)):
        assert time.monotonic() < deadline, "the demo's calls stored"
        time.sleep(0.5)
    assert all(abs(int(r["duration"]) - int(r["gap"])) <= 5 for r in rows), rows


def test_up_knows_the_store_holds_events(pipeline: tuple[dict[str, str], Service]) -> None:
    """A second `up` on the same data dir (the first stopped) says what the store holds."""
    env, up = pipeline
    held = sql_rows(env, "SELECT count() AS n FROM events")[0]["n"]
    code, _ = up.stop()
    assert code == 0
    again = Service(["up"], env)
    try:
        again.wait_ready(60)
    finally:
        again.stop()
    banner = "".join(again.lines)
    # At least what SQL counted before the stop: the first `up` may store what was still in flight.
    said = re.search(r"events:\s+([\d,]+) stored already", banner)
    assert said is not None and int(said.group(1).replace(",", "")) >= held > 0, banner
    assert "register the hook" not in banner


@pytest.mark.parametrize("command", [["up"], ["doctor", "--runs", "1"], ["up", "--dashboard"]])
def test_an_unusable_data_dir_is_one_line(tmp_path: Path, command: list[str]) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    env = clean_env(
        AGENTWATCH_DATA_DIR=str(blocker / "data"), AGENTWATCH_NATS_URL=f"nats://127.0.0.1:{free_port()}"
    )
    started = time.monotonic()
    done = run_cli(*command, env=env)
    assert done.returncode != 0
    assert "Traceback" not in done.stderr
    errors = [line for line in done.stderr.splitlines() if line.strip()]
    assert len(errors) == 1, done.stderr
    assert "AGENTWATCH_DATA_DIR" in errors[0] and "Not a directory" in errors[0]
    assert time.monotonic() - started < 30


def test_up_with_the_dashboard_says_which_default_port_is_taken(tmp_path: Path) -> None:
    """Another program on 9464 and 4318: `up --dashboard` says so on the terminal, naming the
    settings, not only in up.log. (A port some other process holds already counts the same.)"""
    held = []
    for port in (9464, 4318):
        sock = socket.socket()
        try:
            sock.bind(("127.0.0.1", port))
            sock.listen()
            held.append(sock)
        except OSError:
            sock.close()  # taken already: the conflict this test is about
    env = clean_env(
        AGENTWATCH_DATA_DIR=str(tmp_path / "data"),
        AGENTWATCH_NATS_URL=f"nats://127.0.0.1:{free_port()}",
        AGENTWATCH_ALERT_BELL="0",
    )
    proc = subprocess.Popen(
        [tool("agentwatch"), "up", "--dashboard"], env=env, stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, start_new_session=True,
    )  # fmt: skip
    said: list[str] = []
    try:
        assert proc.stderr is not None
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline and len([s for s in said if "not served" in s]) < 2:
            line = proc.stderr.readline()
            if not line:
                break
            said.append(line)
    finally:
        os.killpg(proc.pid, signal.SIGINT)
        try:
            proc.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()
        for sock in held:
            sock.close()
    text = "".join(said)
    assert "agentwatch up: metrics:" in text and "127.0.0.1:9464 is in use" in text, text
    assert "set AGENTWATCH_METRICS_ADDR" in text
    assert (
        "agentwatch up: otlp:" in text
        and "127.0.0.1:4318 is in use" in text
        and "AGENTWATCH_OTLP_ADDR" in text
    )


@pytest.mark.parametrize("original", [b"", b"\n", b"  \n"])
def test_uninstall_gives_back_an_empty_settings_file_as_it_was(tmp_path: Path, original: bytes) -> None:
    settings = tmp_path / ".claude" / "settings.json"
    settings.parent.mkdir()
    settings.write_bytes(original)
    env = clean_env(HOME=str(tmp_path), AGENTWATCH_DATA_DIR=str(tmp_path / "data"))
    installed = run_cli("hooks", "install", "--harness", "claude", env=env)
    assert installed.returncode == 0, installed.stderr
    assert b"agentwatch-emit" in settings.read_bytes()
    removed = run_cli("hooks", "uninstall", "--harness", "claude", env=env)
    assert removed.returncode == 0, removed.stderr
    assert settings.read_bytes() == original
