"""Shared test parts every layer may use: paths, the installed commands, the fixture payloads.

Standard library and pytest only, so `tests/unit` pays for no service client; the real services
(nats-server, embedded ClickHouse) are in tests/services.py, for the layers that use them.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent
CAPTURES = ROOT / "tests" / "fixtures" / "claude-code-2.1.330-captures.jsonl"
# Where the hook's user of `up`'s bus may receive replies: JetStream's acks (emitter/wire.py).
HOOK_INBOX = "_AW_ACK"
# The project's shared material (CI always has it); other people's data is read from there, never
# copied into the repo.
SHARED = ROOT.parent / "shared" / "fixtures"
PUBLIC = SHARED / "public-hook-payloads.jsonl"
# Transcripts the Claude Code 2.1.330 binary wrote (copied from shared/, as its README allows), laid
# out as under ~/.claude/projects, and Claude Code's own totals per session (its last cost-state).
TRANSCRIPTS = ROOT / "tests" / "fixtures" / "transcripts"
PROJECTS = TRANSCRIPTS / "projects"
# Codex CLI 0.169.0's and Gemini CLI 0.61.0's hook payloads, captured from the real binaries with the
# environment each hook saw, and the same sessions' own logs (laid out as ~/.codex and ~/.gemini)
# with expected-usage.json (copied from shared/, as its README allows). Their paths say
# /home/dev/lab/home/.codex and /home/dev/lab/home/.gemini: see harness_payloads.
HARNESS_FIXTURES = ROOT / "tests" / "fixtures" / "harnesses"
CODEX_CAPTURES = HARNESS_FIXTURES / "codex-0.169.0-captures.jsonl"
GEMINI_CAPTURES = HARNESS_FIXTURES / "gemini-cli-0.61.0-captures.jsonl"
CODEX_LOGS = HARNESS_FIXTURES / "codex-0.169.0-transcripts"
GEMINI_LOGS = HARNESS_FIXTURES / "gemini-cli-0.61.0-transcripts"
# One `codex exec --approve-for-me` run (tests/e2e/real_cli_run.py codex-review): its hook payloads
# (captures.jsonl), its rollouts and the approval reviewer's (sessions/), expected-usage.json.
CODEX_REVIEW = HARNESS_FIXTURES / "codex-0.169.0-review"
CAPTURED_HOMES = {"codex": "/home/dev/lab/home/.codex", "gemini": "/home/dev/lab/home/.gemini"}


# DESIGN.md's subject table, written out independently of the contract module that implements it.
DESIGN_SUBJECTS = {
    "PreToolUse": "genie.tool.{agent}.call",
    "PostToolUse": "genie.tool.{agent}.result",
    "PostToolUseFailure": "genie.tool.{agent}.error",
    "PermissionRequest": "genie.tool.{agent}.permission",
    "PermissionDenied": "genie.tool.{agent}.denied",
    "UserPromptSubmit": "genie.user.{agent}.prompt",
    "Stop": "genie.agent.{agent}.response",
    "StopFailure": "genie.agent.{agent}.failure",
    "SessionStart": "genie.agent.{agent}.session.start",
    "SessionEnd": "genie.agent.{agent}.session.end",
    "SubagentStart": "genie.agent.{agent}.subagent.start",
    "SubagentStop": "genie.agent.{agent}.subagent.stop",
    "TeammateIdle": "genie.agent.{agent}.idle",
    "TaskCreated": "genie.agent.{agent}.task.created",
    "TaskCompleted": "genie.agent.{agent}.task.completed",
    # New to Claude Code since the design's table was first written (issue: every field worth a column).
    "DirectoryAdded": "genie.agent.{agent}.directory.added",
    "PreModelSwitch": "genie.agent.{agent}.model.switching",
    "PostModelSwitch": "genie.agent.{agent}.model.switched",
}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def tool(name: str) -> str:
    """An executable installed next to this interpreter (the venv), else on PATH."""
    found = BIN / name
    if found.exists():
        return str(found)
    other = shutil.which(name)
    if other is None:
        raise RuntimeError(f"{name} is not installed: pip install -e '.[dev]'")
    return other


def wait_port(port: int, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return
        except OSError:
            time.sleep(0.02)
    raise RuntimeError(f"nothing listens on port {port} after {timeout}s")


def clean_env(**extra: str) -> dict[str, str]:
    """The machine's environment without any agentwatch or genie setting, plus `extra`."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AGENTWATCH_", "GENIE_"))}
    env.update(extra)
    return env


@pytest.fixture
def hook_env(tmp_path: Path) -> dict[str, str]:
    """Environment for the hook: its own data dir, a bus URL where nothing listens."""
    return clean_env(
        AGENTWATCH_DATA_DIR=str(tmp_path / "data"), AGENTWATCH_NATS_URL=f"nats://127.0.0.1:{free_port()}"
    )


def run_emit(payload: bytes, env: dict[str, str], timeout: float = 20) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [tool("agentwatch-emit")], input=payload, env=env, capture_output=True, timeout=timeout, check=False
    )


def hook_settled(data_dir: str | Path, timeout: float = 10.0) -> bool:
    """Whether the hook runs under `data_dir` are all done within `timeout`: the process the agent
    started leaves once its event is on disk, and a child sends it and waits for the stream's acks
    (emitter/hook.py's _detach), holding an in-flight file until then."""
    inflight = Path(data_dir) / "spool" / "inflight"
    deadline = time.monotonic() + timeout
    while inflight.is_dir() and any(not p.name.startswith(".") for p in inflight.iterdir()):
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.02)
    return True


def bus_login(env: dict[str, str], role: str = "hook") -> str:
    """The bus URL of `env` with the login `agentwatch up` made for `role` in its data dir (the URL
    as it is when there is none): what a process with a data dir of its own, or a test's own
    nats-py client, is given to use `up`'s bus. A nats-py client with the hook's login takes
    JetStream's acks on the hook's reply subjects (`inbox_prefix=HOOK_INBOX`)."""
    from agentwatch import config

    first = config.bus_servers(env["AGENTWATCH_NATS_URL"], env, role)[0]
    if not first.user:
        return env["AGENTWATCH_NATS_URL"]
    return f"nats://{first.user}:{first.password}@{first.host}:{first.port}"


def run_cli(*args: str, env: dict[str, str], timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [tool("agentwatch"), *args], env=env, capture_output=True, text=True, timeout=timeout, check=False
    )


def load_fixture_file(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def all_fixtures() -> list[tuple[str, dict[str, Any], dict[str, str]]]:
    """(id, payload, hook environment) of every fixture payload this checkout can see."""
    out = []
    for i, rec in enumerate(load_fixture_file(CAPTURES)):
        out.append((f"capture-{i}", rec["payload"], rec.get("hook_env", {})))
    if PUBLIC.exists():
        for i, rec in enumerate(load_fixture_file(PUBLIC)):
            out.append((f"public-{i}", rec["payload"], {}))
    return out


def harness_payloads(harness: str, home: Path | None = None) -> list[dict[str, Any]]:
    """The capture lines of `harness` (codex or gemini): {harness, version, scenario, event,
    payload, env, t_start, t_end}; with `home`, every path under the captured CLI's home directory
    pointing under `home` instead (where a test copied the logs)."""
    path = CODEX_CAPTURES if harness == "codex" else GEMINI_CAPTURES
    text = path.read_text(encoding="utf-8")
    if home is not None:
        text = text.replace(CAPTURED_HOMES[harness], str(home))
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def transcript_sessions() -> list[tuple[str, Path, list[Path], dict[str, Any]]]:
    """(session id, main transcript, its subagents' transcripts, Claude Code's expected totals) of
    every fixture session."""
    expected = json.loads((TRANSCRIPTS / "expected-cost-state.json").read_text())["sessions"]
    out = []
    for main in sorted(PROJECTS.glob("*/*.jsonl")):
        subagents = sorted((main.parent / main.stem / "subagents").glob("agent-*.jsonl"))
        out.append((main.stem, main, subagents, expected[main.stem]))
    return out


def expected_tokens(expected: dict[str, Any]) -> dict[str, int]:
    """Claude Code's token totals of one session, summed over its models, by the names of the
    session_costs columns."""
    names = {
        "input_tokens": "inputTokens",
        "output_tokens": "outputTokens",
        "cache_read_tokens": "cacheReadInputTokens",
        "cache_write_5m_tokens": "cacheCreationEphemeral5mInputTokens",
        "cache_write_1h_tokens": "cacheCreationEphemeral1hInputTokens",
    }
    return {col: sum(int(u[key]) for u in expected["modelUsage"].values()) for col, key in names.items()}
