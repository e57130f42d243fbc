"""The real Codex CLI 0.169.0 and Gemini CLI 0.61.0 (from npm), run offline with agentwatch's hooks
as `agentwatch hooks install --harness codex|gemini` registers them: the hooks fire.

Each CLI runs in a network namespace with loopback alone (`unshare -n`; `unshare -rn` when not root),
against a scripted stand-in for its model API (tests/e2e/real_cli_run.py): Codex tries a public
git remote at start otherwise, and nothing may leave the machine. Codex runs no user hook it was not
told to trust: install trusts them with the hashes the binary's own `codex app-server` reports, and
`codex exec` runs without --dangerously-bypass-hook-trust. With no bus in the namespace the hooks
spool their events; `agentwatch spool flush` then sends them to a real nats-server, where they
arrive as each CLI's, paired, with their usage, and without Gemini's API key.

The packages are installed with npm into AGENTWATCH_TEST_NPM_DIR (default
~/.cache/agentwatch-harness-npm) when absent: the only reason these tests skip is that npm cannot
fetch them. Bounded: each CLI run has two minutes.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import ROOT, clean_env, run_cli
from tests.services import Collector, NatsServer

pytestmark = pytest.mark.slow

PACKAGES = {"codex": "@openai/codex@0.169.0", "gemini": "@google/gemini-cli@0.61.0"}
SECRET = "stand-in-secret-key-0123456789"  # noqa: S105 - the GEMINI_API_KEY real_cli_run gives Gemini


def npm_dir() -> Path:
    default = Path.home() / ".cache" / "agentwatch-harness-npm"
    return Path(os.environ.get("AGENTWATCH_TEST_NPM_DIR") or default)


def cli_binary(cli: str) -> str:
    """The CLI's binary from npm, installed first if it is not there; skips when npm cannot."""
    binary = npm_dir() / "node_modules" / ".bin" / cli
    if binary.exists():
        return str(binary)
    if shutil.which("npm") is None:
        pytest.skip("npm is not installed: the CLI package cannot be fetched")
    try:
        done = subprocess.run(
            ["npm", "install", "--no-audit", "--no-fund", "--prefix", str(npm_dir()), PACKAGES[cli]],
            capture_output=True, text=True, timeout=600, check=False,
        )  # fmt: skip
    except subprocess.TimeoutExpired:
        pytest.skip(f"npm could not fetch {PACKAGES[cli]} within 10 minutes")
    if done.returncode != 0 or not binary.exists():
        pytest.skip(f"npm could not fetch {PACKAGES[cli]}: {done.stderr[-500:]}")
    return str(binary)


def offline_run(scenario: str, work: Path) -> dict[str, Any]:
    """real_cli_run in a network namespace with loopback alone."""
    unshare = ["unshare", "-n"] if os.geteuid() == 0 else ["unshare", "-rn"]
    binary = cli_binary(scenario.partition("-")[0])
    done = subprocess.run(
        [*unshare, sys.executable, "-m", "tests.e2e.real_cli_run", scenario, binary, str(work)],
        cwd=ROOT, capture_output=True, text=True, timeout=400, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    result: dict[str, Any] = json.loads(done.stdout.splitlines()[-1])
    assert result["install_code"] == 0, result["install"]
    return result


def flushed(result: dict[str, Any], tmp_path: Path) -> list[dict[str, Any]]:
    """What the hooks spooled in the namespace, sent to a real bus with `agentwatch spool flush`."""
    server = NatsServer(tmp_path / "bus").start()
    collector = Collector(server.url)
    try:
        env = clean_env(
            AGENTWATCH_DATA_DIR=result["env"]["AGENTWATCH_DATA_DIR"], AGENTWATCH_NATS_URL=server.url
        )
        sent = run_cli("spool", "flush", env=env)
        assert sent.returncode == 0, sent.stderr
        messages = collector.settle(1.0)
    finally:
        collector.close()
        server.stop()
    assert b"" not in [m.data for m in messages]
    assert not [m.subject for m in messages if SECRET.encode() in m.data]
    return [json.loads(m.data) for m in messages]


def one(events: list[dict[str, Any]], match: Callable[[dict[str, Any]], bool]) -> dict[str, Any]:
    found = [e for e in events if match(e)]
    assert len(found) == 1, [e["text"] for e in found]
    return found[0]


def test_codex_exec_runs_the_trusted_hooks_without_the_bypass_flag(tmp_path: Path) -> None:
    result = offline_run("codex", tmp_path / "run")
    assert "Codex CLI: installed agentwatch hooks for 14 events" in result["install"]
    assert "Codex CLI: trusted 14 hooks" in result["install"], result["install"]
    assert result["code"] == 0, result["stderr"]
    assert "dangerously-bypass-hook-trust" not in result["stderr"]
    assert len(result["requests"]) == 2
    messages = flushed(result, tmp_path)
    events = [m for m in messages if m["kind"] != "usage"]
    assert {e["harness"] for e in messages} == {"codex"}
    names = [e["harness_event"] for e in events]
    for event in ("SessionStart", "UserPromptSubmit", "PreModelRequest", "PostModelRequest", "PreToolUse",
                  "PostToolUse", "Stop", "SessionEnd"):  # fmt: skip
        assert event in names, names
    call = one(events, lambda e: e["event"] == "PreToolUse")
    result_ = one(events, lambda e: e["event"] == "PostToolUse")
    assert call["tool_name"] == "Bash" and call["text"] == "$ echo hooked"
    assert call["tool_use_id"] == result_["tool_use_id"] != ""
    usage = [m for m in messages if m["kind"] == "usage"]
    assert {u["message_id"] for u in usage} == {"resp_1", "resp_2"}, "the rollout's two responses, once each"
    assert sum(u["cache_read_input_tokens"] for u in usage) == 512


def test_codex_counts_what_its_approval_reviewer_spent(tmp_path: Path) -> None:
    """`codex exec --approve-for-me`: the command that needs an approval is judged by Codex's
    automatic reviewer, a helper thread with a rollout of its own and no hook event; its model
    response is in the session's usage, once, beside the session's own, and the session's tokens
    are those of every rollout that names it."""
    result = offline_run("codex-review", tmp_path / "run")
    assert result["code"] == 0, result["stderr"]
    assert len(result["requests"]) == 3, "the task, the reviewer's verdict, the answer"
    assert (tmp_path / "run" / "outside.txt").read_text() == "reviewed\n", "the reviewer allowed it"
    rollouts: dict[str, list[dict[str, Any]]] = {}
    for path in sorted((tmp_path / "run" / "codex-home" / "sessions").rglob("rollout-*.jsonl")):
        lines = [json.loads(line) for line in path.read_text().splitlines()]
        rollouts[lines[0]["payload"]["id"]] = lines
    (session,) = {lines[0]["payload"]["session_id"] for lines in rollouts.values()}
    (reviewer,) = [
        t for t, lines in rollouts.items() if lines[0]["payload"].get("parent_thread_id") == session
    ]
    assert rollouts[reviewer][0]["payload"]["source"] == {"subagent": {"other": "guardian"}}
    records = [
        line["payload"]
        for lines in rollouts.values()
        for line in lines
        if line["type"] == "token_usage_record"
    ]
    usage = [m for m in flushed(result, tmp_path) if m["kind"] == "usage"]
    assert sorted(u["message_id"] for u in usage) == sorted(r["response_id"] for r in records)
    assert len(usage) == 3
    (review,) = [u for u in usage if u["agent_id"] == reviewer]
    assert (review["agent_type"], review["parent_agent"]) == ("guardian", f"main-{session[-8:]}")
    assert sum(u["input_tokens"] + u["cache_read_input_tokens"] for u in usage) == sum(
        r["usage"]["input_tokens"] for r in records
    )
    assert sum(u["output_tokens"] for u in usage) == sum(r["usage"]["output_tokens"] for r in records)


def test_gemini_runs_the_hooks_and_its_key_stays_home(tmp_path: Path) -> None:
    result = offline_run("gemini", tmp_path / "run")
    assert "Gemini CLI: installed agentwatch hooks for 11 events" in result["install"]
    assert result["code"] == 0, result["stderr"]
    assert "done, hooked" in result["stdout"]
    messages = flushed(result, tmp_path)
    events = [m for m in messages if m["kind"] != "usage"]
    assert {e["harness"] for e in messages} == {"gemini-cli"}
    call = one(events, lambda e: e["event"] == "PreToolUse")
    done = one(events, lambda e: e["event"] == "PostToolUse")
    assert call["tool_name"] == "run_shell_command" and call["tool_use_id"] == done["tool_use_id"] != ""
    responses = [e for e in events if e["event"] == "PostModelRequest"]
    assert [r["text"] for r in responses][-1] == "gemini-2.5-pro: done, hooked (900 in, 40 out)"
    assert any(e["event"] == "ModelResponseChunk" for e in events)
    for event in ("SessionStart", "BeforeAgent", "BeforeModel", "AfterModel", "AfterAgent", "SessionEnd"):
        assert event in [e["harness_event"] for e in events]
    assert any(m["kind"] == "usage" for m in messages), "the chat file's usage, read at AfterAgent"
