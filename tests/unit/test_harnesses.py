"""Each harness's events in the envelope's terms (agentwatch/harnesses.py), the hook's memory of a
Gemini CLI session (emitter/nesting.py), and the registration in Codex's and Gemini's files
(emitter/registration.py, emitter/codex_trust.py), on the captured payloads.

Expected values are written out from the reference (codex-and-gemini-hooks.md, section 3)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from agentwatch import harnesses
from agentwatch.emitter import codex_trust, nesting, registration
from agentwatch.emitter.settings import SettingsError
from tests.conftest import harness_payloads

Json = dict[str, Any]
CODEX = harness_payloads("codex")
GEMINI = harness_payloads("gemini")


def test_every_codex_event_keeps_its_name_but_a_failed_model_request() -> None:
    for rec in CODEX:
        event = harnesses.normalise(harnesses.CODEX, rec["event"], rec["payload"])
        failed = rec["event"] == "PostModelRequest" and rec["payload"]["status"] == "failed"
        assert event == ("StopFailure" if failed else rec["event"])
    assert sum(1 for rec in CODEX if rec["scenario"] == "ERR" and rec["event"] == "PostModelRequest") == 1


@pytest.mark.parametrize(
    ("own", "payload", "event"),
    [
        ("BeforeAgent", {}, "UserPromptSubmit"),
        ("AfterAgent", {}, "Stop"),
        ("BeforeTool", {}, "PreToolUse"),
        ("AfterTool", {"tool_response": {"llmContent": "Exit Code: 1"}}, "PostToolUse"),
        ("AfterTool", {"tool_response": {"error": {"message": "no such tool"}}}, "PostToolUseFailure"),
        ("BeforeModel", {}, "PreModelRequest"),
        ("AfterModel", {"llm_response": {"candidates": [{"index": 0}]}}, "ModelResponseChunk"),
        ("AfterModel", {"llm_response": {"candidates": [{"finishReason": "STOP"}]}}, "PostModelRequest"),
        ("PreCompress", {"trigger": "auto"}, "PreCompress"),
        ("PreCompress", {"trigger": "manual"}, "PreCompact"),
        ("Notification", {"notification_type": "ToolPermission"}, "PermissionRequest"),
        ("Notification", {"notification_type": "Other"}, "Notification"),
        ("BeforeToolSelection", {}, "BeforeToolSelection"),
        ("SomethingNew", {}, "SomethingNew"),
    ],
)
def test_gemini_events_map_onto_claude_codes(own: str, payload: Json, event: str) -> None:
    assert harnesses.normalise(harnesses.GEMINI_CLI, own, payload) == event


def test_the_gemini_captures_have_one_response_row_per_model_response() -> None:
    after = [r for r in GEMINI if r["event"] == "AfterModel"]
    final = [r for r in after if harnesses.is_final_chunk(r["payload"])]
    assert len(after) == 24 and len(final) == 12  # expected-usage.json: after_model_with_usage
    assert all("usageMetadata" in r["payload"]["llm_response"] for r in final)


def test_a_payload_says_its_harness_when_the_command_does_not() -> None:
    for rec in CODEX:
        assert harnesses.detect(rec["payload"], rec["env"]) == harnesses.CODEX, rec["event"]
    for rec in GEMINI:
        assert harnesses.detect(rec["payload"], rec["env"]) == harnesses.GEMINI_CLI, rec["event"]
        assert harnesses.detect(rec["payload"], {}) in (harnesses.GEMINI_CLI, harnesses.CLAUDE_CODE)
    claude = {"hook_event_name": "Stop", "session_id": "s", "transcript_path": "/x/.claude/p/s.jsonl"}
    assert harnesses.detect(claude, {"CLAUDE_PROJECT_DIR": "/x"}) == harnesses.CLAUDE_CODE


def test_ids_keep_the_part_that_differs() -> None:
    """Codex's ids are UUIDv7: their head is the time, shared by every id made within a minute."""
    assert harnesses.short_id("01a20acb-63f0-7591-8bc8-ff201e7aa875") == "1e7aa875"
    assert harnesses.short_id("f64cc15c-9bdb-4210-bc16-10f3e27e854e") == "f64cc15c"
    assert harnesses.short_id("a1b2c3d4e5f6", agent=True) == "1b2c3d4e"
    assert harnesses.short_id("a1b2c3d4-9bdb-4210-bc16-10f3e27e854e") == "a1b2c3d4"


def test_tokens_in_the_stores_terms() -> None:
    codex = {"input_tokens": 1037, "cached_input_tokens": 256, "output_tokens": 73}
    codex["reasoning_output_tokens"] = 16
    assert harnesses.codex_tokens(codex) == (781, 256, 73, 16)
    gemini = {"input": 1081, "output": 109, "cached": 256, "thoughts": 16, "tool": 0, "total": 1206}
    assert harnesses.gemini_tokens(gemini) == (825, 256, 125, 16)


# --- the hook's memory of a Gemini session -------------------------------------------------------


def test_gemini_calls_pair_by_order_and_nest_a_subagent() -> None:
    state: Json = {}
    seen = []
    for rec in GEMINI:
        if rec["scenario"] != "AGENT":
            continue
        derived, implied = nesting.step(state, rec["payload"])
        seen.append((rec["event"], rec["payload"].get("tool_name", ""), derived or {}, implied))
    tools = [(e, t, d) for e, t, d, _ in seen if e in ("BeforeTool", "AfterTool")]
    assert [(e, t) for e, t, _ in tools] == [
        ("BeforeTool", "invoke_agent"),
        ("BeforeTool", "run_shell_command"),
        ("AfterTool", "run_shell_command"),
        ("BeforeTool", "complete_task"),
        ("AfterTool", "complete_task"),
        ("AfterTool", "invoke_agent"),
    ]
    ids = [d["tool_use_id"] for _, _, d in tools]
    assert ids[0] == ids[5] and ids[1] == ids[2] and ids[3] == ids[4] and len(set(ids)) == 3
    inside = [d for _, t, d in tools if t != "invoke_agent"]
    assert {d["agent_type"] for d in inside} == {"generalist"} and len({d["agent_id"] for d in inside}) == 1
    assert all("agent_id" not in d for _, t, d in tools if t == "invoke_agent"), "the call is the lead's"
    implied = [i for *_, found in seen for i in found]
    assert [p["hook_event_name"] for p, _ in implied] == ["SubagentStart", "SubagentStop"]
    stop = implied[1][0]
    assert stop["last_assistant_message"] == "Sub-agent: the project has a few files."
    assert stop["gemini_agent_id"] == "e7034481-f63a-492e-9903-7aa9cf0fce68"
    assert state["open"] == []


def test_a_streamed_response_gathers_its_chunks_text() -> None:
    state: Json = {}
    got = []
    for rec in GEMINI:
        if rec["scenario"] == "HELLO":
            derived, _ = nesting.step(state, rec["payload"])
            got.append((derived or {}).get("response_text"))
    assert "Hello from the mock — résumé ✓" in got


def test_the_sessions_memory_is_a_file_under_its_lock(tmp_path: Path) -> None:
    before: Json = {"hook_event_name": "BeforeTool", "session_id": "s/1", "tool_name": "read_file"}
    before["tool_input"] = {"p": 1}
    after = dict(before, hook_event_name="AfterTool", tool_response={"llmContent": "x"})
    first, _ = nesting.tracked(str(tmp_path), before)
    second, _ = nesting.tracked(str(tmp_path), after)
    assert first and second and first["tool_use_id"] == second["tool_use_id"]
    path = nesting.state_path(str(tmp_path), "s/1")
    assert json.loads(Path(path).read_text())["open"] == []
    nesting.tracked(str(tmp_path), {"hook_event_name": "SessionEnd", "session_id": "s/1"})
    assert not os.path.exists(path)


# --- registration ---------------------------------------------------------------------------------


def test_each_harness_gets_its_events_and_timeouts() -> None:
    command = "/opt/venv/bin/agentwatch-emit"
    codex = registration.block(harnesses.CODEX, command, 5)["hooks"]
    assert list(codex) == list(harnesses.CODEX_EVENTS)
    timeouts = {event: groups[0]["hooks"][0]["timeout"] for event, groups in codex.items()}
    assert timeouts == {**dict.fromkeys(harnesses.CODEX_EVENTS, 5), "SessionEnd": 3, "Interrupt": 3}
    stop = {"type": "command", "command": f"{command} --harness codex", "timeout": 5}
    assert codex["Stop"][0]["hooks"][0] == stop
    gemini = registration.block(harnesses.GEMINI_CLI, command, 5)["hooks"]
    assert list(gemini) == list(harnesses.GEMINI_EVENTS)
    handler = {
        "name": "agentwatch",
        "type": "command",
        "command": f"{command} --harness gemini",
        "timeout": 5000,
    }
    assert gemini["AfterModel"] == [{"matcher": "*", "hooks": [handler]}]


CONFIG = '# mine\nmodel = "gpt-5.5"  # kept\n\n[features]\nplugins = false\n'
TRUST = {"/h/hooks.json:stop:0:0": "sha256:aa", "/h/hooks.json:pre_tool_use:1:0": "sha256:bb"}


@pytest.mark.parametrize(
    "before",
    [CONFIG, "", CONFIG + "\n", "[hooks]\nfoo = 1\n", '[hooks.state."/o:stop:0:0"]\ntrusted_hash = "x"\n'],
)
def test_trust_is_written_and_taken_out_byte_for_byte(before: str) -> None:
    config = Path("/h/config.toml")
    trusted = codex_trust.trusted_text(before, config, TRUST, [])
    for key, value in TRUST.items():
        assert f'[hooks.state."{key}"]\ntrusted_hash = "{value}"\n' in trusted
    assert trusted.startswith(before) or not before
    assert codex_trust.trusted_text(trusted, config, TRUST, []) == trusted, "again: no change"
    changed = codex_trust.trusted_text(trusted, config, {**TRUST, "/h/hooks.json:stop:0:0": "sha256:cc"}, [])
    assert 'trusted_hash = "sha256:cc"' in changed and "sha256:aa" not in changed
    assert codex_trust.trusted_text(trusted, config, {}, TRUST) == before


def test_a_config_that_is_not_toml_is_left_alone() -> None:
    with pytest.raises(SettingsError, match="not valid TOML"):
        codex_trust.trusted_text("model = \n", Path("/h/config.toml"), TRUST, [])


def test_the_keys_of_agentwatchs_handlers_are_codexs() -> None:
    ours = {"type": "command", "command": "/v/agentwatch-emit --harness codex"}
    hooks = {
        "hooks": {
            "PreToolUse": [{"hooks": [{"type": "command", "command": "other"}]}, {"hooks": [ours]}],
            "SessionEnd": [{"hooks": [{"type": "command", "command": "/v/agentwatch-emit"}]}],
        }
    }
    assert codex_trust.our_keys(Path("/h/hooks.json"), hooks) == [
        "/h/hooks.json:pre_tool_use:1:0",
        "/h/hooks.json:session_end:0:0",
    ]


def test_install_then_uninstall_gives_each_file_back_byte_for_byte(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Codex's hooks.json and config.toml and Gemini's settings.json, each with the user's own
    content in its own style: install adds, uninstall takes out exactly that."""
    codex_home, gemini_home = tmp_path / "codex", tmp_path / "gemini"
    monkeypatch.setenv("CODEX_HOME", str(codex_home))
    monkeypatch.setenv("GEMINI_CLI_HOME", str(gemini_home))
    monkeypatch.setenv("PATH", str(tmp_path / "nothing"))
    files = {
        codex_home
        / "hooks.json": '{\n    "hooks": {\n        "Stop": [\n            {\n                "hooks": [\n'
        '                    {"type": "command", "command": "notify-send done", "timeout": 2}\n'
        "                ]\n            }\n        ]\n    }\n}\n",
        codex_home / "config.toml": CONFIG
        + '\n[hooks.state."/elsewhere:stop:0:0"]\ntrusted_hash = "sha256:ff"\n',
        gemini_home / ".gemini" / "settings.json": '{"theme": "Default", "general": {"vimMode": true}}',
    }
    for path, text in files.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    command = "/opt/venv/bin/agentwatch-emit"
    done = registration.install_codex(command, 5, dry_run=False)
    assert "NOT TRUSTED YET" in done.lines[1]
    registration.install_gemini(command, 5, dry_run=False)
    hooks = json.loads((codex_home / "hooks.json").read_text())["hooks"]
    assert len(hooks["Stop"]) == 2 and hooks["Stop"][0]["hooks"][0]["command"] == "notify-send done"
    keys = codex_trust.our_keys(codex_home / "hooks.json", {"hooks": hooks})
    config = codex_home / "config.toml"
    config.write_text(
        codex_trust.trusted_text(config.read_text(), config, dict.fromkeys(keys, "sha256:01"), [])
    )
    assert config.read_text().count("sha256:01") == 14
    assert (
        registration.uninstall_codex(dry_run=False).lines[1].startswith("Codex CLI: removed the trust of 14")
    )
    registration.uninstall_gemini(dry_run=False)
    for path, text in files.items():
        assert path.read_text() == text, path


def test_the_rollouts_no_hook_announces_are_the_sessions_own_helpers_up_to_today(tmp_path: Path) -> None:
    """A session's unannounced helper (the approval reviewer) is found beside its rollout and in
    the day folders after it, up to today; another session's, a spawned sub-agent's (its
    SubagentStop reads it) and a rollout that started before the session are not."""
    import datetime

    from agentwatch.emitter.harness_logs import rollout_agent, unannounced_rollouts

    session, other = "01a20000-0000-7000-8000-00000000aaaa", "01a20000-0000-7000-8000-00000000bbbb"

    def rollout(day: str, stamp: str, thread: str, of: str, source: object) -> Path:
        meta: Json = {"session_id": of, "id": thread, "source": source}
        if thread != of:
            meta["parent_thread_id"] = of
        path = tmp_path / "sessions" / day / f"rollout-{stamp}-{thread}.jsonl"
        path.parent.mkdir(parents=True, exist_ok=True)
        line = {"timestamp": "t", "type": "session_meta", "payload": meta}
        path.write_text(json.dumps(line, separators=(",", ":")) + "\n")
        return path

    guardian = {"subagent": {"other": "guardian"}}
    rollout("2026/11/27", "2026-11-27T23-00-00", "01a1ffff-0000-7000-8000-00000000cccc", session, guardian)
    main = rollout("2026/11/27", "2026-11-27T23-10-00", session, session, "exec")
    same_day = rollout(
        "2026/11/27", "2026-11-27T23-20-00", "01a20000-0000-7000-8000-0000000000d1", session, guardian
    )
    spawned = {"subagent": {"thread_spawn": {"parent_thread_id": session, "depth": 1}}}
    rollout("2026/11/27", "2026-11-27T23-30-00", "01a20000-0000-7000-8000-0000000000d2", session, spawned)
    rollout("2026/11/28", "2026-11-28T00-10-00", "01a20000-0000-7000-8000-0000000000d3", other, guardian)
    next_day = rollout(
        "2026/11/28", "2026-11-28T00-20-00", "01a20000-0000-7000-8000-0000000000d4", session, guardian
    )
    rollout("2026/11/30", "2026-11-30T00-20-00", "01a20000-0000-7000-8000-0000000000d5", session, guardian)

    found = unannounced_rollouts(str(main), session, today=datetime.date(2026, 11, 29))
    assert [path for path, _ in found] == [str(same_day), str(next_day)]
    assert [rollout_agent(meta) for _, meta in found] == [
        ("01a20000-0000-7000-8000-0000000000d1", "guardian"),
        ("01a20000-0000-7000-8000-0000000000d4", "guardian"),
    ]
    assert unannounced_rollouts(str(main), "", today=datetime.date(2026, 11, 29)) == []


def test_a_subagents_usage_is_attributed_as_its_sessions_events_are() -> None:
    """The usage of a sub-agent the hook finds by its log (a Gemini sub-agent's chat, Codex's
    approval reviewer) carries its session's person, repository and branch, as every envelope does."""
    from agentwatch.emitter.usage import other_sources
    from tests.conftest import GEMINI_LOGS

    chats = GEMINI_LOGS / "tmp" / "proj" / "chats"
    session = "5734d14e-4e54-4d26-b29d-8173ad4e945f"
    (main,) = chats.glob(f"session-*-{session[:8]}.jsonl")
    event: Json = {
        "harness": "gemini-cli", "event": "Stop", "agent": f"main-{session[-8:]}", "team": "t",
        "session_id": session, "host": "h", "cwd": "/w", "person": "ada", "repo": "github.com/a/b",
        "branch": "main", "data": {"transcript_path": str(main)},
    }  # fmt: skip
    sources = [make() for _, make in other_sources(event, {})]
    subagents = [s for s in sources if s is not None and s.subagent_id]
    assert subagents, "the fixture's sub-agent chat"
    for src in subagents:
        assert (src.who["person"], src.who["repo"], src.who["branch"]) == ("ada", "github.com/a/b", "main")
