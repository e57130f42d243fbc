"""Reading token usage out of Claude Code transcripts, and where the hook keeps its place (no bus,
no store): the fixture sessions' totals, one count per API message, and incremental reads."""

from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path
from typing import Any

import pytest

from agentwatch.emitter import transcripts
from agentwatch.emitter.transcripts import epoch_ms, read_transcript
from agentwatch.emitter.usage import (
    Offsets,
    Source,
    cost_envelope,
    event_sources,
    hook_usage,
    reading_envelopes,
    subagent_source,
    usage_envelope,
)
from tests.conftest import PROJECTS, expected_tokens, transcript_sessions

SESSIONS = transcript_sessions()
FIELDS = ("input", "output", "cache_read", "cache_5m", "cache_1h")
COLUMNS = (
    "input_tokens",
    "output_tokens",
    "cache_read_tokens",
    "cache_write_5m_tokens",
    "cache_write_1h_tokens",
)


def totals(*readings: transcripts.Reading) -> dict[str, int]:
    out = dict.fromkeys(COLUMNS, 0)
    for reading in readings:
        for rec in reading.usage.values():
            for field, column in zip(FIELDS, COLUMNS, strict=True):
                out[column] += getattr(rec, field)
    return out


def assistant(
    message_id: str,
    output: int,
    *,
    model: str = "claude-opus-5-5",
    sidechain: bool = False,
    agent_id: str = "",
    ts: str = "2026-11-22T11:01:33.424Z",
    padding: int = 0,
) -> dict[str, Any]:
    line: dict[str, Any] = {
        "parentUuid": None,
        "isSidechain": sidechain,
        "message": {
            "id": message_id,
            "type": "message",
            "role": "assistant",
            "model": model,
            "content": [{"type": "text", "text": "x" * padding}],
            "usage": {
                "input_tokens": 100,
                "cache_creation_input_tokens": 30,
                "cache_read_input_tokens": 50,
                "output_tokens": output,
                "cache_creation": {"ephemeral_1h_input_tokens": 10, "ephemeral_5m_input_tokens": 20},
            },
        },
        "requestRef": f"req-{message_id}",
        "type": "assistant",
        "uuid": f"uuid-{message_id}-{output}",
        "timestamp": ts,
        "sessionId": "s-1",
    }
    if agent_id:
        line["agentId"] = agent_id
    return line


def write_lines(path: Path, lines: list[dict[str, Any]], mode: str = "w") -> None:
    with path.open(mode) as f:
        for line in lines:
            f.write(json.dumps(line, separators=(",", ":")) + "\n")


# --- the fixture sessions -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("session", "main", "subagents", "expected"), SESSIONS, ids=[s[0][:8] for s in SESSIONS]
)
def test_fixture_session_tokens_equal_claude_codes_own_totals(
    session: str, main: Path, subagents: list[Path], expected: dict[str, Any]
) -> None:
    readings = [read_transcript(str(main))]
    readings += [read_transcript(str(p), subagent_id=p.stem[len("agent-") :]) for p in subagents]
    assert all(r.done and r.offset == r.end for r in readings)
    assert totals(*readings) == expected_tokens(expected)
    cost = readings[0].cost_state
    assert cost is not None and cost.session_id == session
    assert cost.total_cost_usd == expected["totalCostUSD"]
    assert cost.model_usage == expected["modelUsage"]
    assert all(r.cost_state is None for r in readings[1:]), "cost-state lines are in main transcripts only"


def test_one_response_written_as_three_lines_counts_once() -> None:
    main = PROJECTS / "-home-dev-lab-proj" / "27e556a2-de12-4c72-b5fd-a64ef0b73d15.jsonl"
    reading = read_transcript(str(main))
    lines = main.read_text().count('"id":"msg_01Mock000004"')
    assert lines == 3
    assert reading.usage["msg_01Mock000004"].input == 1348


def test_api_error_placeholders_cost_nothing() -> None:
    main = PROJECTS / "-home-dev-lab-proj" / "2f1e9689-522b-4db6-806f-660ee5ba0093.jsonl"
    reading = read_transcript(str(main))
    assert reading.usage == {}
    assert reading.cost_state is not None and reading.cost_state.total_cost_usd == 0


# --- lines of one message, copies, partial lines --------------------------------------------------


def test_the_line_with_the_largest_usage_wins_not_the_first(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    write_lines(path, [assistant("m1", 1), assistant("m1", 250), assistant("m1", 7), assistant("m2", 5)])
    reading = read_transcript(str(path))
    assert list(reading.usage) == ["m1", "m2"]
    assert reading.usage["m1"].output == 250
    assert reading.usage["m1"].request_id == "req-m1"
    assert (reading.usage["m1"].cache_5m, reading.usage["m1"].cache_1h) == (20, 10)


WHO = {"agent": "main-s", "team": "", "parent_agent": "", "agent_id": "", "agent_type": "",
       "session_id": "s", "host": "h", "cwd": "/proj"}  # fmt: skip


def test_each_message_keeps_its_stop_reason_even_when_its_largest_line_lacks_it(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    lines = [assistant("m1", 1), assistant("m1", 250), assistant("m2", 5)]
    lines[0]["message"]["stop_reason"] = "tool_use"
    lines[2]["message"]["stop_reason"] = "end_turn"
    write_lines(path, lines)
    reading = read_transcript(str(path))
    assert {m: u.stop_reason for m, u in reading.usage.items()} == {"m1": "tool_use", "m2": "end_turn"}
    envelopes = [e for _, e in reading_envelopes(reading, Source(str(path), WHO))]
    assert [e["stop_reason"] for e in envelopes if e.get("message_id")] == ["tool_use", "end_turn"]


def test_spaced_json_and_nested_assistant_objects(tmp_path: Path) -> None:
    """Another writer's spacing still reads; an assistant object nested in another line type (a
    progress line) is not a message of this transcript."""
    path = tmp_path / "t.jsonl"
    nested = {"type": "progress", "data": {"message": assistant("inner", 9)}}
    path.write_text(json.dumps(assistant("m1", 3)) + "\n" + json.dumps(nested) + "\n")
    reading = read_transcript(str(path))
    assert list(reading.usage) == ["m1"]


def test_synthetic_lines_and_lines_without_usage_are_skipped(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    no_usage = assistant("m3", 1)
    del no_usage["message"]["usage"]
    write_lines(path, [assistant("m1", 2, model="<synthetic>"), no_usage, assistant("m2", 4)])
    assert list(read_transcript(str(path)).usage) == ["m2"]


def test_a_subagents_copies_of_its_parents_messages_are_skipped(tmp_path: Path) -> None:
    path = tmp_path / "agent-a1234567890abcdef.jsonl"
    lines = [
        assistant("parent-1", 5, sidechain=False),  # copied from the parent's transcript
        assistant("other-agent", 5, sidechain=True, agent_id="a999"),
        assistant("own", 5, sidechain=True, agent_id="a1234567890abcdef"),
    ]
    write_lines(path, lines)
    assert list(read_transcript(str(path), subagent_id="a1234567890abcdef").usage) == ["own"]
    assert len(read_transcript(str(path)).usage) == 3, "in a main transcript they all count"


def test_a_line_still_being_written_is_read_next_time(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    write_lines(path, [assistant("m1", 2)])
    whole = path.read_bytes()
    partial = json.dumps(assistant("m2", 3), separators=(",", ":"))
    path.write_bytes(whole + partial[:40].encode())
    first = read_transcript(str(path))
    assert list(first.usage) == ["m1"]
    assert first.offset == len(whole) and not first.done
    path.write_bytes(whole + partial.encode() + b"\n")
    second = read_transcript(str(path), first.offset)
    assert list(second.usage) == ["m2"] and second.done


def test_the_message_cap_stops_at_a_line_and_the_rest_follows(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    write_lines(path, [assistant(f"m{i}", i + 1) for i in range(10)] + [assistant("m9", 1)])
    first = read_transcript(str(path), max_messages=4)
    assert list(first.usage) == ["m0", "m1", "m2", "m3"] and not first.done
    rest = read_transcript(str(path), first.offset)
    assert list(rest.usage) == [f"m{i}" for i in range(4, 10)] and rest.done
    assert rest.usage["m9"].output == 10


def test_the_time_budget_reads_a_chunk_then_stops(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(transcripts, "CHUNK_BYTES", 4096)
    path = tmp_path / "t.jsonl"
    write_lines(path, [assistant(f"m{i}", 1, padding=1500) for i in range(20)])
    reading = read_transcript(str(path), until=time.monotonic() - 1)
    assert 0 < len(reading.usage) < 20 and not reading.done
    seen = set(reading.usage)
    offset = reading.offset
    for _ in range(20):
        more = read_transcript(str(path), offset, until=time.monotonic() - 1)
        assert not seen & set(more.usage)
        seen |= set(more.usage)
        offset = more.offset
        if more.done:
            break
    assert len(seen) == 20


def test_a_missing_file_reads_as_nothing(tmp_path: Path) -> None:
    reading = read_transcript(str(tmp_path / "nope.jsonl"), 5)
    assert reading.usage == {} and reading.offset == 5 and reading.end == 5


def test_epoch_ms() -> None:
    assert epoch_ms("2026-11-22T11:01:33.424Z") == 1795345293424
    assert epoch_ms("1970-01-01T00:00:00.000Z") == 0
    assert epoch_ms("2024-02-29T23:59:59.5Z") == 1709251199500
    assert epoch_ms("2024-02-29T23:59:59Z") == 1709251199000
    assert epoch_ms("not a time") == 0
    assert epoch_ms("") == 0


# --- where the hook keeps its place ------------------------------------------------------------


def test_offsets_resume_after_growth_and_restart_after_a_rewrite(tmp_path: Path) -> None:
    offsets = Offsets(str(tmp_path / "data"))
    path = tmp_path / "t.jsonl"
    write_lines(path, [assistant("m1", 1, padding=5000)])
    resume = offsets.resume(str(path))
    assert resume is not None and resume.start == 0
    reading = read_transcript(str(path), resume.start)
    offsets.save(resume, reading.offset)
    assert offsets.resume(str(path)) is None, "nothing new"
    write_lines(path, [assistant("m2", 1)], mode="a")
    grown = offsets.resume(str(path))
    assert grown is not None and grown.start == reading.offset
    # rewritten from the start with other first bytes, longer than before: from the start
    write_lines(path, [assistant("m0", 1, padding=10), assistant("m1", 1, padding=5000), assistant("m2", 1)])
    rewritten = offsets.resume(str(path))
    assert rewritten is not None and rewritten.start == 0
    # shortened: from the start
    offsets.save(rewritten, path.stat().st_size)
    write_lines(path, [assistant("m0", 1)])
    shortened = offsets.resume(str(path))
    assert shortened is not None and shortened.start == 0
    # replaced by another file (another inode) of the same content: from the start
    offsets.save(shortened, path.stat().st_size)
    shutil.copy(path, tmp_path / "copy")
    os.replace(tmp_path / "copy", path)
    replaced = offsets.resume(str(path))
    assert replaced is not None and replaced.start == 0


def test_offset_files_are_one_line_per_transcript_and_pruned_when_old(tmp_path: Path) -> None:
    offsets = Offsets(str(tmp_path / "data"))
    path = tmp_path / "abc.jsonl"
    write_lines(path, [assistant("m1", 1)])
    resume = offsets.resume(str(path))
    assert resume is not None
    offsets.save(resume, 10)
    state = Path(offsets.state_path(str(path)))
    assert state.parent == tmp_path / "data" / "transcripts" and state.name.startswith("abc-")
    version, offset, inode, head_len, _sha, where = state.read_text().rstrip("\n").split(" ", 5)
    assert (version, int(offset), int(inode), int(head_len), where) == (
        "v1",
        10,
        path.stat().st_ino,
        10,
        str(path),
    )
    assert offsets.prune() == 0
    old = time.time() - 40 * 86400
    os.utime(state, (old, old))
    assert offsets.prune() == 1 and not state.exists()


# --- envelopes and the hook's part --------------------------------------------------------------------


def stop_event(transcript: Path, event: str = "Stop", **extra: str) -> dict[str, Any]:
    session = transcript.stem
    data = {"session_id": session, "transcript_path": str(transcript), "hook_event_name": event, **extra}
    agent_id = extra.get("agent_id", "")
    return {
        "event": event,
        "timestamp": "2026-11-23T10:00:00.000Z",
        "agent": f"sub-{agent_id}" if agent_id else f"main-{session[:8]}",
        "team": f"session-{session[:8]}",
        "parent_agent": f"main-{session[:8]}" if agent_id else "",
        "agent_id": agent_id,
        "agent_type": extra.get("agent_type", ""),
        "session_id": session,
        "host": "host-1",
        "cwd": "/proj",
        "data": data,
    }


@pytest.fixture
def session_copy(tmp_path: Path) -> Path:
    """A copy of the fixture session with a subagent (27e556a2), writable."""
    source = PROJECTS / "-home-dev-lab-proj" / "27e556a2-de12-4c72-b5fd-a64ef0b73d15"
    target = tmp_path / "projects"
    shutil.copytree(source, target / source.name)
    return Path(shutil.copy(source.with_suffix(".jsonl"), target))


def test_a_main_stop_reads_the_session_and_its_subagents_once(session_copy: Path, tmp_path: Path) -> None:
    environ = {"AGENTWATCH_DATA_DIR": str(tmp_path / "data")}
    event = stop_event(session_copy)
    out, commit = hook_usage(event, environ, time.monotonic() + 5)
    kinds = [env["kind"] for _, env in out]
    assert kinds.count("usage") == 13 and kinds.count("cost_state") == 1
    subjects = {subject for subject, _ in out}
    assert subjects == {"genie.agent.main-27e556a2.usage", "genie.agent.general-purpose-1cd6f8df.usage"}
    sub = next(env for _, env in out if env["agent"] == "general-purpose-1cd6f8df")
    assert (sub["subagent_id"], sub["subagent_type"], sub["parent_agent"]) == (
        "a1cd6f8dfd629431a", "general-purpose", "main-27e556a2",
    )  # fmt: skip
    assert len({env["id"] for _, env in out}) == len(out)
    again, _ = hook_usage(event, environ, time.monotonic() + 5)
    assert [env["id"] for _, env in again] == [env["id"] for _, env in out], "not committed: read again"
    commit(True)
    after, _ = hook_usage(event, environ, time.monotonic() + 5)
    assert after == []


def test_a_subagent_stop_reads_its_own_transcript_only(session_copy: Path, tmp_path: Path) -> None:
    environ = {"AGENTWATCH_DATA_DIR": str(tmp_path / "data")}
    own = session_copy.parent / session_copy.stem / "subagents" / "agent-a1cd6f8dfd629431a.jsonl"
    event = stop_event(
        session_copy, "SubagentStop", agent_id="a1cd6f8dfd629431a", agent_type="general-purpose"
    )
    assert [path for path, _ in event_sources(event, environ)] == [str(own)], "found beside the session's"
    event["data"]["agent_transcript_path"] = str(own)
    out, _ = hook_usage(event, environ, time.monotonic() + 5)
    assert [env["message_id"] for _, env in out] == ["msg_01Mock000022", "msg_01Mock000023"]
    assert {env["agent"] for _, env in out} == {"sub-a1cd6f8dfd629431a"}, "the event's own identity"


def test_other_events_and_the_setting_read_nothing(session_copy: Path, tmp_path: Path) -> None:
    environ = {"AGENTWATCH_DATA_DIR": str(tmp_path / "data")}
    assert hook_usage(stop_event(session_copy, "PreToolUse"), environ, time.monotonic() + 5)[0] == []
    off = dict(environ, AGENTWATCH_USAGE="0")
    assert hook_usage(stop_event(session_copy), off, time.monotonic() + 5)[0] == []


def test_rewinding_forgets_what_this_run_read(session_copy: Path, tmp_path: Path) -> None:
    environ = {"AGENTWATCH_DATA_DIR": str(tmp_path / "data")}
    event = stop_event(session_copy)
    out, commit = hook_usage(event, environ, time.monotonic() + 5)
    commit(True)
    commit(False)  # the messages were dropped after all
    again, _ = hook_usage(event, environ, time.monotonic() + 5)
    assert len(again) == len(out)


def test_envelope_ids_depend_on_what_they_say(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    write_lines(path, [assistant("m1", 5), {"type": "cost-state", "sessionId": "s-1", "totalCostUSD": 0.5,
                                            "modelUsage": {}}])  # fmt: skip
    teammate = tmp_path / "agent-aresearcher-0123456789abcdef.jsonl"
    (tmp_path / "agent-aresearcher-0123456789abcdef.meta.json").write_text('{"agentType": "researcher"}')
    src = subagent_source(str(teammate), {"session_id": "s-1", "team": "t", "host": "h", "cwd": ""}, {})
    assert (src.who["agent"], src.who["parent_agent"], src.subagent_type) == (
        "researcher",
        "main-s-1",
        "researcher",
    )
    reading = read_transcript(str(path))
    first = reading_envelopes(reading, src)
    assert [env["kind"] for _, env in first] == ["usage"], "a subagent's transcript has no cost of its own"
    rec = reading.usage["m1"]
    assert usage_envelope(rec, src)[1]["id"] == usage_envelope(rec, src)[1]["id"]
    rec.output += 1
    assert usage_envelope(rec, src)[1]["id"] != first[0][1]["id"], "a larger usage is a new message"
    assert reading.cost_state is not None
    _, cost = cost_envelope(reading.cost_state, src, fallback_ms=1_000)
    assert cost["timestamp"] == "2026-11-22T11:01:33.424Z", "the time of the line before it"
    timed = {"type": "cost-state", "sessionId": "s-1", "totalCostUSD": 0.5, "modelUsage": {},
             "startTime": 1795345292782, "totalDuration": 749}  # fmt: skip
    write_lines(path, [timed])
    stated = read_transcript(str(path)).cost_state
    assert stated is not None and stated.timestamp == "2026-11-22T11:01:33.531Z", "its own time"
    assert cost["total_cost_usd"] == 0.5 and cost["data"] == {"totalCostUSD": 0.5, "modelUsage": {}}
