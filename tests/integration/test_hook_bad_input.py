"""Input the hook cannot take as it is still ends as an event, and what it keeps of it is redacted:
JSON nested deeper than the parser goes, a non-UTF-8 agent name, a capture nothing can be made of."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from agentwatch.emitter.spoolformat import COMPLETE, RAW_DIGITS, RAW_MARK, UNREADABLE_KEEP
from tests.conftest import clean_env, hook_settled, run_cli, run_emit, tool
from tests.services import Collector, NatsServer

SESSION = "dee9dee9-0000-4000-8000-000000000000"
SECRET = "sk-ant-api03-" + "Q" * 90
NO_PID = 4_194_305  # above any pid_max: no process has it


def _deep(depth: int) -> bytes:
    inner = "{" + f'"key":"{SECRET}"' + "}"
    nested = '{"a":' * depth + inner + "}" * depth
    head = f'{{"session_id":"{SESSION}","hook_event_name":"PreToolUse","tool_name":"Bash","tool_input":'
    return (head + nested + "}").encode()


@pytest.mark.parametrize("depth", [10, 985, 989, 1_000, 100_000])
def test_json_nested_deeper_than_the_parser_goes_is_still_an_event(
    depth: int, nats_server: NatsServer, collector_for: Any, tmp_path: Path
) -> None:
    """Nested ~1,000 deep, the payload used to crash the hook's reader: the event was lost, its raw
    stdin left unredacted in spool/inflight. Now it is the event, with what its text says (the
    session, the tool) and a redacted preview, or, where it is read whole, the payload itself."""
    collector: Collector = collector_for(nats_server.url)
    data = tmp_path / "data"
    env = clean_env(AGENTWATCH_DATA_DIR=str(data), AGENTWATCH_NATS_URL=nats_server.url)
    payload = _deep(depth)
    result = run_emit(payload, env)
    assert result.returncode == 0 and result.stdout == b""
    assert hook_settled(data)
    messages = collector.wait_for(1)
    assert len(collector.settle()) == 1
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(10_000)  # the test reads back what the hook wrote, as deep as it is
    try:
        env_ = json.loads(messages[0].data)
    finally:
        sys.setrecursionlimit(limit)
    assert env_["session_id"] == SESSION and env_["event"] == "PreToolUse" and env_["tool_name"] == "Bash"
    assert SECRET not in messages[0].data.decode(), "redacted, as any event"
    if depth > 985:
        cut = env_["data"]["agentwatch_truncated"]
        assert cut["original_bytes"] == len(payload) and "nested too deep" in cut["reason"]
        assert env_["truncated"] is True and env_["data"]["preview"].startswith('{"session_id"')
    else:
        assert env_["data"]["tool_input"]["a"]["a"]
    assert not (data / "crash.jsonl").exists()
    assert not list((data / "spool" / "inflight").iterdir()), "nothing left in flight"


def _capture(inflight: Path, pid: int, header: bytes, stdin: bytes) -> Path:
    inflight.mkdir(parents=True, exist_ok=True)
    path = inflight / str(pid)
    path.write_bytes(RAW_MARK + COMPLETE + b"%0*d" % (RAW_DIGITS, len(stdin)) + header + b"\n" + stdin)
    return path


def test_a_killed_runs_deep_payload_is_made_again_not_kept_unreadable(tmp_path: Path) -> None:
    """The capture of a run killed before it made its messages, its stdin nested too deep: the next
    flush makes its event, as for any other."""
    data = tmp_path / "data"
    env = clean_env(AGENTWATCH_DATA_DIR=str(data), AGENTWATCH_NATS_URL="nats://127.0.0.1:1")
    header = json.dumps({"at": time.time(), "host": "h", "env": {}, "harness": ""}).encode()
    _capture(data / "spool" / "inflight", NO_PID, header, _deep(5_000))
    status = run_cli("spool", "status", env=env).stdout
    assert "pending:  1 event message(s)" in status and "unreadable" not in status
    assert not list((data / "spool" / "inflight").iterdir())


def test_unreadable_captures_are_redacted_counted_and_pruned(tmp_path: Path) -> None:
    """A capture nothing can be made of (its header damaged) is kept for a person to see, but
    redacted; `spool status` and `doctor` count such files; only the newest are kept, and none
    older than a month."""
    data = tmp_path / "data"
    env = clean_env(
        AGENTWATCH_DATA_DIR=str(data),
        AGENTWATCH_NATS_URL="nats://127.0.0.1:1",
        OPENAI_API_KEY="sk-env-" + "z" * 30,
    )
    inflight = data / "spool" / "inflight"
    stdin = json.dumps({"session_id": SESSION, "api_key": SECRET, "x": os.environ.get("HOME", "")}).encode()
    stdin += b" sk-env-" + b"z" * 30
    _capture(inflight, NO_PID, b"{damaged header", stdin)
    status = run_cli("spool", "status", env=env).stdout
    assert "unreadable: 1 " in status, status
    kept = [p for p in inflight.iterdir() if p.name.endswith(".unreadable")]
    assert len(kept) == 1
    text = kept[0].read_text()
    assert text.startswith("# unreadable: ") and SESSION in text
    assert SECRET not in text and "sk-env-zzz" not in text, "its secrets taken out"
    doctor = run_cli("doctor", "--runs", "1", "--timeout", "0.2", env=env).stdout
    assert "1 unreadable hook input(s)" in doctor

    old = kept[0]
    month = time.time() - 31 * 86400
    os.utime(old, (month, month))
    for i in range(UNREADABLE_KEEP + 5):
        _capture(inflight, NO_PID + 1 + i, b"{damaged header", stdin)
    status = run_cli("spool", "status", env=env).stdout
    assert f"unreadable: {UNREADABLE_KEEP} " in status, status
    names = [p.name for p in inflight.iterdir()]
    assert len(names) == UNREADABLE_KEEP and old.name not in names, "the newest kept, the month-old one gone"


def test_a_non_utf8_agent_name_still_publishes(
    nats_server: NatsServer, collector_for: Any, tmp_path: Path
) -> None:
    """GENIE_AGENT_NAME (and GENIE_TEAM) with bytes that are not UTF-8 used to drop every event: the
    name could not be written. It is decoded with replacement, and stays one subject token."""
    collector: Collector = collector_for(nats_server.url)
    data = tmp_path / "data"
    env = {k.encode(): v.encode() for k, v in clean_env(AGENTWATCH_DATA_DIR=str(data)).items()}
    env[b"AGENTWATCH_NATS_URL"] = nats_server.url.encode()
    env[b"GENIE_AGENT_NAME"] = b"rev\xff\xfeiewer"
    env[b"GENIE_TEAM"] = b"t\xe9am"
    payload = json.dumps(
        {"session_id": SESSION, "hook_event_name": "PreToolUse", "tool_name": "Bash"}
    ).encode()
    for _ in range(2):
        result = subprocess.run(
            [tool("agentwatch-emit")], input=payload, env=env, capture_output=True, timeout=20, check=False
        )
        assert result.returncode == 0 and result.stdout == b""
    assert hook_settled(data)
    messages = collector.wait_for(2)
    assert len(collector.settle()) == 2
    for msg in messages:
        envelope = json.loads(msg.data)
        agent = envelope["agent"]
        assert msg.subject == f"genie.tool.{agent}.call" and agent.startswith("rev")
        assert all(ch.isascii() and (ch.isalnum() or ch in "_-") for ch in agent)
    assert not (data / "crash.jsonl").exists()
    assert (
        "pending:  0 event message(s)"
        in run_cli("spool", "status", env=clean_env(AGENTWATCH_DATA_DIR=str(data))).stdout
    )
