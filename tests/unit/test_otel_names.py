"""Every attribute `otel-export` sends, walked over every harness's real captures (Claude Code's
hook payloads and transcripts, Codex's and Gemini's hook payloads) and a demo team, as the SDK
spans the exporter hands to its OTLP exporter: each name is one the GenAI conventions (or the
general OpenTelemetry ones) define, or is under `agentwatch.`; without content no prompt, tool
input or tool output is in any attribute, with content they are there, redacted."""

from __future__ import annotations

import itertools
import json
from typing import Any

import orjson
import pytest

from agentwatch.consumers.otel_export import Exporter
from agentwatch.contract import encode_envelope, envelopes_from_stdin
from agentwatch.demo.simulator import TeamSimulator
from agentwatch.emitter.harness_logs import read_chat
from agentwatch.emitter.nesting import in_memory
from agentwatch.emitter.transcripts import read_transcript
from agentwatch.emitter.usage import Source, reading_envelopes, subagent_source
from tests.conftest import CAPTURES, GEMINI_LOGS, harness_payloads, load_fixture_file, transcript_sessions

Json = dict[str, Any]
# The attributes the exporter may send: the GenAI conventions' (open-telemetry/semantic-conventions
# v1.41 gen-ai, as docs/integrations.md pins them) and the general `error.type`.
CONVENTION = frozenset({
    "gen_ai.operation.name", "gen_ai.conversation.id", "gen_ai.agent.name", "gen_ai.agent.id",
    "gen_ai.provider.name", "gen_ai.request.model", "gen_ai.response.model", "gen_ai.response.id",
    "gen_ai.response.finish_reasons", "gen_ai.tool.name", "gen_ai.tool.call.id", "gen_ai.tool.type",
    "gen_ai.tool.call.arguments", "gen_ai.tool.call.result", "gen_ai.input.messages",
    "gen_ai.usage.input_tokens", "gen_ai.usage.output_tokens", "gen_ai.usage.cache_read.input_tokens",
    "gen_ai.usage.cache_write.input_tokens", "gen_ai.usage.reasoning.output_tokens", "error.type",
})  # fmt: skip
CONTENT_KEYS = ("prompt", "tool_input", "tool_response", "prompt_response", "last_assistant_message")


def played() -> list[tuple[str, bytes]]:
    """(subject, body) of every fixture session as the hook publishes it, and their usage."""
    steps: list[tuple[str, list[tuple[Json, Json]]]] = [
        ("", [(r["payload"], r.get("hook_env", {})) for r in load_fixture_file(CAPTURES)]),
        ("codex", [(r["payload"], r["env"]) for r in harness_payloads("codex")]),
        ("gemini-cli", [(r["payload"], r["env"]) for r in harness_payloads("gemini")]),
    ]
    demo = TeamSimulator(39, teammates=3)
    steps.append(("", [(p, demo.environ) for _, p in itertools.islice(demo.events(), 600)]))
    out: list[tuple[str, bytes]] = []
    at = 1_790_000_000.0
    for harness, payloads in steps:
        track = in_memory()
        for payload, environ in payloads:
            at += 0.01
            made = envelopes_from_stdin(
                json.dumps(payload).encode(), environ, host="h1", now=at, harness=harness, track=track
            )
            out += [(subject, encode_envelope(e)) for subject, e in made]
    for session, main, subagents, _ in transcript_sessions():
        who = {"agent": f"main-{session[:8]}", "team": "", "parent_agent": "", "agent_id": "",
               "agent_type": "", "session_id": session, "host": "h1", "cwd": "/proj"}  # fmt: skip
        context = {k: who[k] for k in ("team", "session_id", "host", "cwd")}
        for src in [Source(str(main), who)] + [subagent_source(str(p), context, {}) for p in subagents]:
            reading = read_transcript(src.path, subagent_id=src.subagent_id)
            out += [(s, encode_envelope(e)) for s, e in reading_envelopes(reading, src, int(at * 1000))]
    for chat in sorted(
        GEMINI_LOGS.glob("tmp/*/chats/session-*.jsonl")
    ):  # Gemini's usage, as its hook reads it
        session = json.loads(chat.read_text().splitlines()[0])["sessionId"]
        who = {"agent": f"main-{session[:8]}", "team": "", "parent_agent": "", "agent_id": "",
               "agent_type": "", "session_id": session, "host": "h1", "cwd": "/proj"}  # fmt: skip
        reading = read_chat(str(chat))
        out += [(s, encode_envelope(e)) for s, e in reading_envelopes(reading, Source(str(chat), who))]
    return out


def exported(bodies: list[tuple[str, bytes]], content: bool) -> list[dict[str, Any]]:
    """The attributes of every span the exporter would send for `bodies`, sessions left open ended."""
    environ = {"AGENTWATCH_OTLP_EXPORT_URL": "http://127.0.0.1:9", "AGENTWATCH_OTLP_EXPORT_METRICS_S": "0",
               "AGENTWATCH_OTLP_EXPORT_CONTENT": "1" if content else "0"}  # fmt: skip
    exporter = Exporter(environ)
    try:
        spans = exporter.translate(bodies) + exporter.tracer.close_all(2**62)
        return [dict(exporter.readable(s).attributes or {}) for s in spans]
    finally:
        exporter.shutdown()


@pytest.fixture(scope="module")
def bodies() -> list[tuple[str, bytes]]:
    return played()


def secrets(bodies: list[tuple[str, bytes]], keys: tuple[str, ...] = CONTENT_KEYS) -> set[str]:
    """The prompts, tool inputs and outputs (and answers) the fixtures carry: the first 40
    characters of each long one, as text or as compact JSON."""
    out = set()
    for _, body in bodies:
        data = orjson.loads(body).get("data")
        if not isinstance(data, dict):
            continue
        for key in keys:
            value = data.get(key)
            flat = value if isinstance(value, str) else orjson.dumps(value).decode()
            if value and len(flat) >= 24:
                out.add(flat[:40])
    return out


def values(spans: list[dict[str, Any]]) -> str:
    """Every attribute value as it is sent (text as it is, no escaping), one after another."""
    return "\x00".join(
        str(v) if not isinstance(v, tuple) else "\x00".join(v) for a in spans for v in a.values()
    )


@pytest.mark.parametrize("content", [False, True])
def test_every_attribute_name_is_the_conventions_or_agentwatchs(
    bodies: list[tuple[str, bytes]], content: bool
) -> None:
    spans = exported(bodies, content)
    operations = {a["gen_ai.operation.name"] for a in spans}
    harnesses = {a.get("agentwatch.harness") for a in spans} - {None}
    assert operations == {"invoke_agent", "execute_tool", "chat"}
    assert harnesses == {"claude-code", "codex", "gemini-cli"}
    names = {name for a in spans for name in a}
    assert {n for n in names if n not in CONVENTION and not n.startswith("agentwatch.")} == set()
    assert ("gen_ai.tool.call.result" in names) is content and ("gen_ai.input.messages" in names) is content
    chats = [a for a in spans if a["gen_ai.operation.name"] == "chat"]
    reasons = {
        (a["gen_ai.provider.name"], r) for a in chats for r in a.get("gen_ai.response.finish_reasons", ())
    }
    assert ("gcp.gemini", "STOP") in reasons, reasons  # (Gemini's, from its AfterModel hook)
    # Claude Code's, from its transcripts' messages: the turn's last says end_turn, the others tool_use
    assert {("anthropic", "end_turn"), ("anthropic", "tool_use")} <= reasons, reasons


def test_without_content_no_prompt_or_tool_io_is_in_any_attribute(bodies: list[tuple[str, bytes]]) -> None:
    hidden = secrets(bodies)
    assert len(hidden) > 50
    off = values(exported(bodies, content=False))
    assert [x for x in hidden if x in off] == []
    sent = secrets(bodies, ("prompt", "tool_input", "tool_response"))
    on = values(exported(bodies, content=True))
    assert len([x for x in sent if x in on]) > len(sent) // 2  # (the search would see them)
