"""The translation of envelopes into GenAI spans (consumers/otel_spans.py): ids derived, spans
closed on a lost session and an unfinished tool call, a rebuild that sends nothing twice, content
off unless asked for and then redacted."""

from __future__ import annotations

from typing import Any

from agentwatch.consumers.otel_spans import Span, Tracer, span_id_of, trace_id_of

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
    clock = [0.0]
    tracer = Tracer(lost_after_s=60, clock=lambda: clock[0])
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
    clock = [0.0]
    tracer = Tracer(lost_after_s=60, clock=lambda: clock[0])
    run(tracer, SESSION)
    clock[0] = 59.0
    assert tracer.tick() == []
    clock[0] = 61.0
    spans = tracer.tick()
    assert [s.name for s in spans] == ["execute_tool Read", "invoke_agent lead"]
    tool, root = spans
    lost_at = root.end_ns
    assert lost_at - tool.start_ns == 60 * 10**9
    assert tool.end_ns == lost_at and tool.status == "unset"
    assert tool.attributes["agentwatch.tool.outcome"] == "unfinished"
    assert root.attributes["agentwatch.lost"] is True and tracer.sessions == {}


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


def test_the_same_usage_again_is_one_chat_span() -> None:
    tracer = Tracer()
    assert len(run(tracer, [SESSION[5], SESSION[5]])) == 1
