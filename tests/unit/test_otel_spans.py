"""The translation of envelopes into GenAI spans (consumers/otel_spans.py): ids derived, spans
closed on a lost session (by event time, as the store judges lost) and an unfinished tool call, a
rebuild that sends nothing twice, content off unless asked for and then redacted, every attribute
name the conventions' or agentwatch's, over every harness's real captures."""

from __future__ import annotations

import json
from typing import Any

from agentwatch.consumers.otel_spans import FUTURE_S, Span, Tracer, epoch_ns, span_id_of, trace_id_of

Json = dict[str, Any]
TOOL_OUTPUT = "the build printed 42 lines of secret sauce"


def env(n: int, event: str, **fields: Any) -> Json:
    base: Json = {
        "id": f"e{n}", "timestamp": f"2026-11-27T10:00:{n:02d}+00:00", "event": event, "kind": event.lower(),
        "agent": "lead", "session_id": "s-1", "harness": "claude-code",
    }  # fmt: skip
    base.update(fields)
    return base


SESSION = [
    env(0, "SessionStart"),
    env(1, "UserPromptSubmit", data={"prompt": "write the report"}),
    env(2, "SubagentStart", agent="researcher", agent_id="a1"),
    env(3, "PreToolUse", agent="researcher", agent_id="a1", tool_name="Bash", tool_use_id="t1",
        data={"tool_input": {"command": f"make AWS_SECRET_ACCESS_KEY={'abcd' * 10}"}}),
    env(4, "PostToolUse", agent="researcher", agent_id="a1", tool_name="Bash", tool_use_id="t1",
        data={"tool_response": TOOL_OUTPUT}),
    env(5, "Usage", kind="usage", agent="researcher", subagent_id="a1", model="claude-sonnet-4-5",
        message_id="m1", request_id="r1", input_tokens=3, output_tokens=7, cache_read_input_tokens=11,
        cache_creation_input_tokens=13),
    env(6, "SubagentStop", agent="researcher", agent_id="a1"),
    env(7, "PreToolUse", tool_name="Read", tool_use_id="t2"),
]  # fmt: skip


def run(tracer: Tracer, envelopes: list[Json]) -> list[Span]:
    return [s for e in envelopes for s in tracer.take(e)]


def test_a_session_is_a_tree_with_derived_ids() -> None:
    tracer = Tracer(lost_after_s=60)
    spans = run(
        tracer, [*SESSION, env(8, "PostToolUse", tool_name="Read", tool_use_id="t2"), env(9, "SessionEnd")]
    )
    names = [s.name for s in spans]
    assert names == [
        "execute_tool Bash", "chat claude-sonnet-4-5", "invoke_agent researcher", "execute_tool Read",
        "invoke_agent lead",
    ]  # fmt: skip
    root, sub = spans[-1], spans[2]
    assert {s.trace_id for s in spans} == {trace_id_of("s-1")}
    assert root.parent_id == 0 and root.span_id == span_id_of("session", "s-1")
    assert sub.parent_id == root.span_id and sub.span_id == span_id_of("agent", "s-1", "a1")
    assert spans[0].parent_id == sub.span_id and spans[1].parent_id == sub.span_id
    assert spans[3].parent_id == root.span_id
    chat = spans[1].attributes
    assert chat["gen_ai.usage.input_tokens"] == 3 + 11 + 13
    assert chat["gen_ai.usage.cache_read.input_tokens"] == 11
    assert chat["gen_ai.usage.cache_write.input_tokens"] == 13
    assert spans[0].status == "ok" and spans[0].end_ns - spans[0].start_ns == 1_000_000_000
    again = run(Tracer(lost_after_s=60), [*SESSION, env(8, "PostToolUse", tool_name="Read", tool_use_id="t2"),
                                          env(9, "SessionEnd")])  # fmt: skip
    assert [(s.span_id, s.start_ns, s.end_ns) for s in again] == [
        (s.span_id, s.start_ns, s.end_ns) for s in spans
    ]
    points = {p.name for p in tracer.points}
    assert {"gen_ai.execute_tool.duration", "gen_ai.invoke_agent.duration",
            "gen_ai.client.inference.usage.input_tokens"} <= points  # fmt: skip


def test_a_lost_session_ends_its_unfinished_tool_unset_at_the_lost_time() -> None:
    tracer = Tracer(lost_after_s=60)
    run(tracer, SESSION)
    last = epoch_ns(SESSION[-1]["timestamp"])
    assert tracer.tick(last + 60 * 10**9) == []  # silent for exactly the lost time: not yet
    spans = tracer.tick(last + 60 * 10**9 + 1)
    assert [s.name for s in spans] == ["execute_tool Read", "invoke_agent lead"]
    tool, root = spans
    lost_at = root.end_ns
    assert lost_at - tool.start_ns == 60 * 10**9
    assert tool.end_ns == lost_at and tool.status == "unset"
    assert tool.attributes["agentwatch.tool.outcome"] == "unfinished"
    assert root.attributes["agentwatch.lost"] is True and tracer.sessions == {}


def test_lost_is_judged_on_event_time_so_any_pace_ends_the_same_sessions() -> None:
    """Another session's event more than the lost time after this one's last ends it (at its last
    event plus the lost time), however fast the envelopes come; its next event opens a new root."""
    other = [env(n, "PreToolUse", session_id="s-2", tool_name="Read", tool_use_id=f"o{n}") for n in (8, 40)]
    late = {**other[1], "timestamp": "2026-11-27T10:01:08.001+00:00", "id": "late"}
    resumed = env(9, "SessionEnd", timestamp="2026-11-27T10:01:09+00:00", id="again")
    tracer = Tracer(lost_after_s=60)
    spans = run(tracer, [*SESSION, *other])
    assert not any(s.attributes.get("agentwatch.lost") for s in spans), "none silent 60 s yet"
    spans = run(tracer, [late, resumed])
    lost = [s for s in spans if s.attributes.get("agentwatch.lost")]
    assert [s.name for s in lost] == ["invoke_agent lead"]
    assert lost[0].end_ns == epoch_ns(SESSION[-1]["timestamp"]) + 60 * 10**9
    assert spans[-1].name == "invoke_agent lead" and spans[-1].span_id != lost[0].span_id
    assert "agentwatch.lost" not in spans[-1].attributes
    again = Tracer(lost_after_s=60)  # the same envelopes, another pace: one at a time, ticks between
    replayed = []
    for e in [*SESSION, *other, late, resumed]:
        replayed += again.tick(epoch_ns(e["timestamp"]) - 1) + again.take(e)
    assert [(s.span_id, s.end_ns) for s in replayed] == [
        (s.span_id, s.end_ns) for s in run(Tracer(lost_after_s=60), [*SESSION, *other, late, resumed])
    ]


def test_an_event_stamped_far_ahead_ends_no_session() -> None:
    now = epoch_ns(SESSION[-1]["timestamp"])
    tracer = Tracer(lost_after_s=60, wall=lambda: now)
    run(tracer, SESSION)
    ahead = env(8, "PreToolUse", session_id="s-2", tool_name="Read", tool_use_id="x")
    ahead["timestamp"] = "2026-11-27T10:20:00+00:00"  # 20 minutes past this machine's clock
    assert FUTURE_S < 20 * 60 and run(tracer, [ahead]) == []
    assert "s-1" in tracer.sessions


def test_a_rebuild_sends_nothing_twice_and_closes_what_was_open() -> None:
    tracer = Tracer(lost_after_s=60)
    for e in SESSION:
        tracer.replay(e)
    assert tracer.points == []
    spans = run(tracer, [env(8, "PostToolUse", tool_name="Read", tool_use_id="t2"), env(9, "SessionEnd")])
    assert [s.name for s in spans] == ["execute_tool Read", "invoke_agent lead"]
    assert spans[0].start_ns < spans[0].end_ns  # its start came from the replay


def test_content_is_off_unless_asked_and_then_redacted() -> None:
    off = run(Tracer(), SESSION[:5])
    assert TOOL_OUTPUT not in repr([s.attributes for s in off])
    assert "make" not in repr([s.attributes for s in off])
    (tool,) = run(Tracer(content=True), SESSION[:5])
    assert tool.attributes["gen_ai.tool.call.result"] == TOOL_OUTPUT
    assert "abcdabcdabcd" not in str(tool.attributes["gen_ai.tool.call.arguments"])
    assert "make" in str(tool.attributes["gen_ai.tool.call.arguments"])


def test_a_prompt_is_sent_redacted_with_content_and_not_at_all_without() -> None:
    key = "sk-ant-api03-" + "Q7x" * 30
    prompt = env(1, "UserPromptSubmit", data={"prompt": f"deploy the report with key {key}"})
    session = [SESSION[0], prompt, *SESSION[2:5], env(9, "SessionEnd")]
    root = run(Tracer(content=True), session)[-1]
    (message,) = json.loads(str(root.attributes["gen_ai.input.messages"]))
    assert message["role"] == "user" and message["parts"][0]["type"] == "text"
    text = message["parts"][0]["content"]
    assert text.startswith("deploy the report with key") and key not in text and "Q7xQ7x" not in text
    flat = repr([s.attributes for s in run(Tracer(), session)])
    assert "deploy the report" not in flat and TOOL_OUTPUT not in flat and "Q7xQ7x" not in flat


def test_the_same_usage_again_is_one_chat_span() -> None:
    tracer = Tracer()
    assert len(run(tracer, [SESSION[5], SESSION[5]])) == 1


def test_finish_reasons_where_the_harness_says_them() -> None:
    """Claude Code's in the usage envelope; Gemini's on the last AfterModel chunk (normalised to
    PostModelRequest), matched to the usage record with the same tokens; none otherwise."""
    claude = {**SESSION[5], "stop_reason": "end_turn"}
    (chat,) = run(Tracer(), [claude])
    assert chat.attributes["gen_ai.response.finish_reasons"] == ("end_turn",)
    gemini = {"harness": "gemini-cli", "session_id": "g-1", "agent": "main-g"}
    chunk = env(
        1,
        "PostModelRequest",
        **gemini,
        data={
            "llm_response": {
                "candidates": [{"finishReason": "STOP", "index": 0}],
                "usageMetadata": {
                    "promptTokenCount": 1037,
                    "candidatesTokenCount": 73,
                    "totalTokenCount": 1126,
                },
            }
        },
    )
    usage = {"kind": "usage", "model": "gemini-3-pro", "message_id": "gm1", "input_tokens": 1037 - 256,
             "cache_read_input_tokens": 256, "output_tokens": 73 + 16, "reasoning_tokens": 16}  # fmt: skip
    other = {**usage, "message_id": "gm2", "output_tokens": 50}
    tracer = Tracer()
    spans = run(tracer, [env(0, "SessionStart", **gemini), chunk, env(2, "Usage", **gemini, **usage),
                         env(3, "Usage", **gemini, **other)])  # fmt: skip
    assert [s.attributes.get("gen_ai.response.finish_reasons") for s in spans] == [("STOP",), None]
    assert tracer.reasons == {}


def test_each_hook_run_is_a_point_of_the_hooks_own_duration() -> None:
    """A hook run's own event (hook_ms > 0): agentwatch.hook.duration in seconds, per harness and
    hook event (the harness's own name); none for envelopes no hook run made (hook_ms 0)."""
    tracer = Tracer()
    run(tracer, [env(0, "SessionStart", hook_ms=12.5), env(1, "PreToolUse", hook_ms=0.0),
                 env(2, "PreToolUse", harness="codex", harness_event="PreToolUse", hook_ms=40)])  # fmt: skip
    points = [(p.name, p.value, p.attributes) for p in tracer.points if p.name == "agentwatch.hook.duration"]
    assert [(v, a["agentwatch.hook.event"]) for _, v, a in points] == [
        (0.0125, "SessionStart"),
        (0.04, "PreToolUse"),
    ]
    assert {a["agentwatch.harness"] for _, _, a in points} == {"claude-code"}  # (the session's harness)
