"""Envelopes as OpenTelemetry GenAI spans and metric points: the translation `otel-export` sends.

Plain data, no OpenTelemetry import: consumers/otel_export.py turns what this returns into the
SDK's spans and instruments. The names follow the GenAI semantic conventions as
docs/integrations.md pins them:

- a session is an `invoke_agent` span (the root of its trace), each sub-agent or teammate (an
  `agent_id` inside the session) a child `invoke_agent` span;
- each tool call an `execute_tool` span from its PreToolUse to its result (PostToolUse,
  PostToolUseFailure, PermissionDenied), under the agent that made it;
- each API message the transcripts report (a usage envelope: model and tokens) a `chat` span.

Ids are derived, never random: the trace id from the session id, a span id from what it stands
for (the session, the agent id, the tool call id, the usage record), so a replay, a redelivery or
a second exporter sends the same spans. A span is returned when it ends: at its closing event, at
SessionEnd, or when its session has been quiet for `lost_after` seconds (ended then, status unset,
`agentwatch.lost` true). `replay` rebuilds what is open without returning spans already sent.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import orjson

from agentwatch.agents import LOST_AFTER_S
from agentwatch.redact import redact_text

Attrs = dict[str, str | int | float | bool | tuple[str, ...]]

PROVIDERS = {"claude-code": "anthropic", "codex": "openai", "gemini-cli": "gcp.gemini"}
TOOL_ENDS = {"PostToolUse": "", "PostToolUseFailure": "tool_error", "PermissionDenied": "permission_denied"}
_TOKENS = ("input_tokens", "output_tokens", "cache_read_input_tokens", "cache_creation_input_tokens",
           "reasoning_tokens")  # fmt: skip
ENDED_KEPT = 10_000
MESSAGE_KIND = "message"
# Attribute values are cut to this many characters (content, when it is exported at all).
CONTENT_MAX = 8192
# An event stamped further than this ahead of the local clock does not move event time on.
FUTURE_S = 300
# Gemini's finish reasons waiting for their usage record, at most (oldest dropped first).
REASONS_KEPT = 4096
GEMINI = "gemini-cli"


def trace_id_of(session_id: str) -> int:
    return _digest("trace", session_id, size=16)


def span_id_of(*parts: str) -> int:
    return _digest(*parts, size=8)


def _digest(*parts: str, size: int) -> int:
    raw = hashlib.blake2b("\x1f".join(parts).encode("utf-8", "replace"), digest_size=size).digest()
    return int.from_bytes(raw, "big") or 1  # zero is the invalid id


@dataclass(slots=True)
class Span:
    """One finished span, as the exporter builds it (times in nanoseconds since the epoch)."""

    trace_id: int
    span_id: int
    parent_id: int  # 0: the root
    name: str
    start_ns: int
    end_ns: int
    attributes: Attrs
    status: str = "unset"  # unset, ok or error
    description: str = ""
    root: bool = False


@dataclass(slots=True)
class Point:
    """One metric observation: instrument name, value, attributes."""

    name: str
    value: float
    attributes: Attrs


@dataclass(slots=True)
class _Open:
    span_id: int
    parent_id: int
    name: str
    start_ns: int
    attributes: Attrs


@dataclass(slots=True)
class _Session:
    session_id: str
    start_ns: int
    last_ns: int
    harness: str
    agent: str = ""
    team: str = ""
    host: str = ""
    root_id: int = 0  # its invoke_agent span
    agents: dict[str, _Open] = field(default_factory=dict)  # agent_id -> its invoke_agent span
    ended: dict[str, int] = field(default_factory=dict)  # agent_id -> the span of its last run
    tools: dict[str, _Open] = field(default_factory=dict)  # tool call id -> its execute_tool span
    usage: dict[str, int] = field(default_factory=dict)  # usage key -> tokens sent
    prompts: list[str] = field(default_factory=list)  # its user prompts (with content only)


def epoch_ns(text: object) -> int:
    try:
        return int(datetime.fromisoformat(str(text)).timestamp() * 1e9)
    except ValueError:
        return 0


class Tracer:
    """The open sessions, agents and tool calls; `take` an envelope, get the spans it finished."""

    def __init__(
        self,
        *,
        lost_after_s: float = LOST_AFTER_S,
        content: bool = False,
        wall: Callable[[], int] = time.time_ns,
    ) -> None:
        self.lost_after_s = lost_after_s
        self.lost_after_ns = int(lost_after_s * 1e9)
        self.wall = wall  # only to refuse a time far in the future
        self.content = content
        self.newest_ns = 0  # the newest event time seen: lost is judged on it
        self._due_ns = 0  # no session is lost before event time passes this (0: none open)
        self._future_ns = 0  # event times past this are not believed (the clock, plus FUTURE_S)
        self.sessions: dict[str, _Session] = {}
        # Sessions ended here (session id -> harness, root span id), newest last: their usage,
        # read from the transcripts at SessionEnd and so sent after it, goes under their root.
        self.ended: dict[str, tuple[str, int]] = {}
        self.points: list[Point] = []  # metric observations not yet handed over
        # Gemini's finish reasons by (session, input tokens with cached, output tokens without
        # thoughts): its AfterModel hook says them, its chat log (the usage records) does not.
        self.reasons: dict[tuple[str, int, int], str] = {}

    # -- intake --------------------------------------------------------------------------------

    def take(self, env: Mapping[str, Any]) -> list[Span]:
        """The spans `env` finished (none for most events)."""
        session_id = env.get("session_id")
        at = epoch_ns(env.get("timestamp"))
        kind = env.get("kind")
        if not isinstance(session_id, str) or not session_id or not at or kind == MESSAGE_KIND:
            return []  # (a message envelope repeats its SendMessage's PostToolUse)
        lost = self.tick(at) if at > self.newest_ns else []
        spans = self._event(session_id, kind, env, at)
        return [*lost, *spans] if lost else spans

    def _event(self, session_id: str, kind: object, env: Mapping[str, Any], at: int) -> list[Span]:
        if kind == "usage" and session_id not in self.sessions and session_id in self.ended:
            harness, root = self.ended[session_id]
            return self._chat(_Session(session_id, at, at, harness, root_id=root), env, at)
        s = self._session(session_id, env, at)
        event = env.get("event")
        if kind == "usage":
            return self._chat(s, env, at)
        hook_ms = env.get("hook_ms")
        if isinstance(hook_ms, int | float) and hook_ms > 0:  # (the hook's own run time)
            attrs = {**self._metric_attrs(s), "agentwatch.hook.event": str(env.get("harness_event") or event)}
            self.points.append(Point("agentwatch.hook.duration", hook_ms / 1000, attrs))
        agent_id = env.get("agent_id")
        if event == "UserPromptSubmit" and self.content:
            self._prompt(s, _data(env).get("prompt"))
        elif event == "PostModelRequest" and s.harness == GEMINI:
            self._gemini_reason(session_id, env)
        if event == "SubagentStop" and agent_id not in s.agents:
            return []  # a stop again: nothing open to end
        parent = self._agent(s, agent_id, env, at) if isinstance(agent_id, str) and agent_id else 0
        if event == "PreToolUse":
            self._tool_start(s, env, at, parent or self.session_span(s))
        elif event in TOOL_ENDS:
            return self._tool_end(s, env, at, parent or self.session_span(s))
        elif event == "SubagentStop" and isinstance(agent_id, str) and agent_id:
            return self._agent_end(s, agent_id, at, lost=False)
        elif event == "SessionEnd":
            return self._session_end(s, at, lost=False)
        return []

    def replay(self, env: Mapping[str, Any]) -> None:
        """Rebuild what `env` opens or closes, the spans it finished having been sent already."""
        self.take(env)
        self.points.clear()

    def tick(self, at_ns: int) -> list[Span]:
        """Event time moved on to `at_ns` (unless it is FUTURE_S ahead of this machine's clock):
        end every session whose last event is more than `lost_after` before it, at that last
        event's time plus `lost_after`, with what it held."""
        if at_ns <= self.newest_ns:
            return []
        if at_ns > self._future_ns:  # (the clock is read only when an event passes the last bound)
            self._future_ns = self.wall() + FUTURE_S * 10**9
            if at_ns > self._future_ns:
                return []
        self.newest_ns = at_ns
        if not self._due_ns or at_ns <= self._due_ns:
            return []  # (the usual case: one comparison per event)
        out: list[Span] = []
        due = 0
        for s in list(self.sessions.values()):
            end = s.last_ns + self.lost_after_ns
            if end < at_ns:
                out.extend(self._session_end(s, end, lost=True))
            elif not due or end < due:
                due = end
        self._due_ns = due
        return out

    def close_all(self, at_ns: int) -> list[Span]:
        """End every open session as lost at `at_ns` at the latest (a backfill's end)."""
        out: list[Span] = []
        for s in list(self.sessions.values()):
            out.extend(self._session_end(s, min(at_ns, s.last_ns + self.lost_after_ns), lost=True))
        return out

    # -- sessions and agents -------------------------------------------------------------------

    def _session(self, session_id: str, env: Mapping[str, Any], at: int) -> _Session:
        s = self.sessions.get(session_id)
        if s is None:
            s = _Session(session_id, at, at, str(env.get("harness") or "claude-code"))
            # a session resumed after it ended here is a root of its own, from its first event
            again = (str(env.get("id", "")),) if session_id in self.ended else ()
            s.root_id = span_id_of("session", session_id, *again)
            self.sessions[session_id] = s
        s.start_ns = min(s.start_ns, at)
        s.last_ns = max(s.last_ns, at)
        if not self._due_ns or s.last_ns + self.lost_after_ns < self._due_ns:
            self._due_ns = s.last_ns + self.lost_after_ns
        if not env.get("agent_id") and env.get("kind") != "usage" and not s.agent:
            s.agent = str(env.get("agent") or "")
        s.team = s.team or str(env.get("team") or "")
        s.host = s.host or str(env.get("host") or "")
        return s

    def session_span(self, s: _Session) -> int:
        return s.root_id or span_id_of("session", s.session_id)

    def _common(self, s: _Session, operation: str) -> Attrs:
        """What every span has (the harness: the root's, and the metrics')."""
        return {"gen_ai.operation.name": operation, "gen_ai.conversation.id": s.session_id}

    def _agent(self, s: _Session, agent_id: str, env: Mapping[str, Any], at: int) -> int:
        """The span id of the sub-agent or teammate `agent_id`, opened at its first event. Its
        usage after it stopped (read from its transcript at SubagentStop) goes under the run that
        stopped; its next hook event opens another run (a teammate's next task), whose id is
        derived from that event's."""
        a = s.agents.get(agent_id)
        if a is None and env.get("kind") == "usage" and agent_id in s.ended:
            return s.ended[agent_id]
        if a is None:
            again = (str(env.get("id", "")),) if agent_id in s.ended else ()
            name = str(env.get("agent") or agent_id)
            attrs = self._common(s, "invoke_agent")
            attrs.update({"gen_ai.agent.name": name, "agentwatch.agent.id": agent_id})
            if env.get("agent_type"):
                attrs["agentwatch.agent.type"] = str(env["agent_type"])
            span_id = span_id_of("agent", s.session_id, agent_id, *again)
            a = _Open(span_id, self.session_span(s), name, at, attrs)
            s.agents[agent_id] = a
        a.start_ns = min(a.start_ns, at)
        return a.span_id

    def _agent_end(self, s: _Session, agent_id: str, at: int, *, lost: bool) -> list[Span]:
        a = s.agents.pop(agent_id, None)
        if a is None:
            return []
        s.ended[agent_id] = a.span_id
        inside = [call_id for call_id, t in s.tools.items() if t.parent_id == a.span_id]
        out = [self._tool_span(s, s.tools.pop(call_id), at, None) for call_id in inside]
        if lost:
            a.attributes["agentwatch.lost"] = True
        span = self._finish(s, a, at, "unset")
        self.points.append(Point("gen_ai.invoke_agent.duration", _seconds(span), self._metric_attrs(s)))
        return [*out, span]

    def _session_end(self, s: _Session, at: int, *, lost: bool) -> list[Span]:
        out: list[Span] = []
        for agent_id in list(s.agents):
            out.extend(self._agent_end(s, agent_id, at, lost=lost))
        out.extend(self._tool_span(s, t, at, None) for t in s.tools.values())
        s.tools.clear()
        attrs = self._common(s, "invoke_agent")
        attrs.update(
            {"gen_ai.agent.name": s.agent or f"main-{s.session_id[:8]}", "agentwatch.harness": s.harness}
        )
        attrs["gen_ai.provider.name"] = PROVIDERS.get(s.harness, s.harness)
        for key, value in (("agentwatch.team", s.team), ("agentwatch.host", s.host)):
            if value:
                attrs[key] = value
        if lost:
            attrs["agentwatch.lost"] = True
        if s.prompts:
            messages = [{"role": "user", "parts": [{"type": "text", "content": p}]} for p in s.prompts]
            attrs["gen_ai.input.messages"] = orjson.dumps(messages).decode()
        root = _Open(self.session_span(s), 0, str(attrs["gen_ai.agent.name"]), s.start_ns, attrs)
        span = self._finish(s, root, max(at, s.start_ns), "unset")
        span.root = True
        self.points.append(Point("gen_ai.invoke_agent.duration", _seconds(span), self._metric_attrs(s)))
        del self.sessions[s.session_id]
        self.ended[s.session_id] = (s.harness, root.span_id)
        while len(self.ended) > ENDED_KEPT:
            del self.ended[next(iter(self.ended))]
        return [*out, span]

    def _finish(self, s: _Session, o: _Open, at: int, status: str) -> Span:
        name = f"{o.attributes['gen_ai.operation.name']} {o.name}"
        return Span(trace_id_of(s.session_id), o.span_id, o.parent_id, name, o.start_ns, max(at, o.start_ns),
                    o.attributes, status)  # fmt: skip

    def _metric_attrs(self, s: _Session, model: str = "") -> Attrs:
        attrs: Attrs = {
            "gen_ai.provider.name": PROVIDERS.get(s.harness, s.harness),
            "agentwatch.harness": s.harness,
        }
        if model:
            attrs["gen_ai.request.model"] = model
        return attrs

    # -- tools ---------------------------------------------------------------------------------

    def _tool_start(self, s: _Session, env: Mapping[str, Any], at: int, parent: int) -> None:
        call_id = str(env.get("tool_use_id") or "")
        if not call_id or call_id in s.tools:
            return
        name = str(env.get("tool_name") or "tool")
        attrs = self._common(s, "execute_tool")
        attrs.update(
            {"gen_ai.tool.name": name, "gen_ai.tool.call.id": call_id, "gen_ai.tool.type": "function"}
        )
        attrs["gen_ai.agent.name"] = str(env.get("agent") or "")
        if self.content:
            self._content(attrs, "gen_ai.tool.call.arguments", _data(env).get("tool_input"))
        s.tools[call_id] = _Open(span_id_of("tool", s.session_id, call_id), parent, name, at, attrs)

    def _tool_end(self, s: _Session, env: Mapping[str, Any], at: int, parent: int) -> list[Span]:
        call_id = str(env.get("tool_use_id") or "")
        if not call_id:
            return []
        t = s.tools.get(call_id)
        if t is None:  # its start was not seen (before a backfill's window): from its own duration
            self._tool_start(s, env, at - _duration_ns(env), parent)
            t = s.tools.get(call_id)
            if t is None:
                return []
        if self.content:
            self._content(t.attributes, "gen_ai.tool.call.result", _data(env).get("tool_response"))
        del s.tools[call_id]
        return [self._tool_span(s, t, at, TOOL_ENDS[str(env.get("event"))])]

    def _tool_span(self, s: _Session, t: _Open, at: int, error: str | None) -> Span:
        """`error`: "" for a success, the error type of a failure, None when no result came."""
        if error:
            t.attributes["error.type"] = error
        t.attributes["agentwatch.tool.outcome"] = "unfinished" if error is None else (error or "ok")
        span = self._finish(s, t, at, "unset" if error is None else ("error" if error else "ok"))
        attrs = self._metric_attrs(s)
        attrs["gen_ai.tool.name"] = t.name
        if error:
            attrs["error.type"] = error
        self.points.append(Point("gen_ai.execute_tool.duration", _seconds(span), attrs))
        return span

    def _gemini_reason(self, session_id: str, env: Mapping[str, Any]) -> None:
        """The finish reason of a Gemini response's last chunk, kept for its usage record (the
        same tokens: the prompt's, tool prompts' included, and the candidates')."""
        response = _data(env).get("llm_response")
        if not isinstance(response, dict):
            return
        usage, candidates = response.get("usageMetadata"), response.get("candidates")
        if not (isinstance(usage, dict) and isinstance(candidates, list) and candidates):
            return
        reason = candidates[0].get("finishReason") if isinstance(candidates[0], dict) else None
        if isinstance(reason, str) and reason:
            prompt = _count(usage.get("promptTokenCount")) + _count(usage.get("toolUsePromptTokenCount"))
            self.reasons[(session_id, prompt, _count(usage.get("candidatesTokenCount")))] = reason
            while len(self.reasons) > REASONS_KEPT:
                del self.reasons[next(iter(self.reasons))]

    def _prompt(self, s: _Session, value: object) -> None:
        """A user prompt of `s`, redacted, kept while its prompts come to CONTENT_MAX characters
        (the first ones: what the session was asked)."""
        room = CONTENT_MAX - sum(len(p) for p in s.prompts)
        if isinstance(value, str) and value and room > 0:
            s.prompts.append(redact_text(value)[0][:room])

    def _content(self, attrs: Attrs, key: str, value: object) -> None:
        if value is None:
            return
        text = value if isinstance(value, str) else orjson.dumps(value, default=str).decode()
        attrs[key] = redact_text(text)[0][:CONTENT_MAX]

    # -- model requests ------------------------------------------------------------------------

    def _chat(self, s: _Session, env: Mapping[str, Any], at: int) -> list[Span]:
        counts = {k: _count(env.get(k)) for k in _TOKENS}
        key = f"{env.get('message_id', '')}|{env.get('request_id', '')}"
        total = sum(counts.values())
        if key != "|" and s.usage.get(key, -1) >= total:
            return []  # the same message again (the store keeps its largest copy: so does this)
        s.usage[key] = total
        model = str(env.get("model") or "")
        agent_id = str(env.get("subagent_id") or env.get("agent_id") or "")
        parent = self._agent(s, agent_id, env, at) if agent_id else self.session_span(s)
        attrs = self._common(s, "chat")
        read, write = counts["cache_read_input_tokens"], counts["cache_creation_input_tokens"]
        attrs.update({
            "gen_ai.provider.name": PROVIDERS.get(s.harness, s.harness),
            "gen_ai.request.model": model,
            "gen_ai.response.model": model,
            "gen_ai.agent.name": str(env.get("agent") or ""),
            # The conventions count cached input in the input tokens; agentwatch's store does not.
            "gen_ai.usage.input_tokens": counts["input_tokens"] + read + write,
            "gen_ai.usage.output_tokens": counts["output_tokens"],
            "gen_ai.usage.cache_read.input_tokens": read,
            "gen_ai.usage.cache_write.input_tokens": write,
        })  # fmt: skip
        if counts["reasoning_tokens"]:
            attrs["gen_ai.usage.reasoning.output_tokens"] = counts["reasoning_tokens"]
        if env.get("message_id"):
            attrs["gen_ai.response.id"] = str(env["message_id"])
        reason = env.get("stop_reason")  # Claude Code's transcripts say it per message
        if not (isinstance(reason, str) and reason) and self.reasons:
            output = counts["output_tokens"] - counts["reasoning_tokens"]
            reason = self.reasons.pop((s.session_id, counts["input_tokens"] + read, output), "")
        if isinstance(reason, str) and reason:
            attrs["gen_ai.response.finish_reasons"] = (reason,)
        span_id = span_id_of("chat", s.session_id, key if key != "|" else str(env.get("id", "")))
        o = _Open(span_id, parent, model or "model", at - _duration_ns(env), attrs)
        margs = self._metric_attrs(s, model)
        for name, value in (
            ("input_tokens", counts["input_tokens"]), ("output_tokens", counts["output_tokens"]),
            ("cache_read.input_tokens", read), ("cache_write.input_tokens", write),
            ("reasoning.output_tokens", counts["reasoning_tokens"]),
        ):  # fmt: skip
            if value:
                self.points.append(Point(f"gen_ai.client.inference.usage.{name}", value, margs))
        return [self._finish(s, o, at, "unset")]


def _data(env: Mapping[str, Any]) -> Mapping[str, Any]:
    data = env.get("data")
    if isinstance(data, str):
        try:
            data = orjson.loads(data)
        except orjson.JSONDecodeError:
            return {}
    return data if isinstance(data, dict) else {}


def _count(value: object) -> int:
    return value if type(value) is int and value > 0 else 0


def _duration_ns(env: Mapping[str, Any]) -> int:
    ms = env.get("duration_ms")
    return int(ms * 1_000_000) if isinstance(ms, int | float) and ms > 0 else 0


def _seconds(span: Span) -> float:
    return (span.end_ns - span.start_ns) / 1e9
