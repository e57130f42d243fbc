"""The simulated team's token usage: one API message per step of the model, as the hook sends it.

Claude Code calls the model before each batch of tool calls and for each answer; the hook reads
those messages' usage from the transcript at the end of a piece of work and publishes one usage
envelope per message. The demo has no transcript: after each PostToolBatch and each Stop or
SubagentStop it makes the usage of the model step that ended there, and builds its envelope with
the hook's own code (emitter/usage.py, for the agent its hook event names), so the store prices
it like real usage and the cost shows from the first minute. Models and token counts are those of
a real session: the lead on Opus, teammates on Sonnet, subagents on Haiku; most of the input read
from the prompt cache. The counts come from the payload alone: a seed gives the same usage.
"""

from __future__ import annotations

import random
import zlib
from collections.abc import Mapping

from agentwatch.contract import DEFAULT_MAX_PAYLOAD, encode_envelope, envelopes_from_stdin
from agentwatch.demo.world import Json
from agentwatch.emitter.transcripts import Usage
from agentwatch.emitter.usage import Source, usage_envelope, who_of
from agentwatch.jsonfast import dumpb

# (subject, event id, body), as simulator.Message.
Message = tuple[str, str, bytes]

# The hook events that end a step of the model.
MODEL_STEPS = frozenset({"PostToolBatch", "Stop", "SubagentStop"})
LEAD_MODEL, TEAMMATE_MODEL, SUBAGENT_MODEL = "claude-opus-5-5", "claude-sonnet-5-5", "claude-haiku-5-5"


def model_of(envelope: Json) -> str:
    """The lead on Opus, a subagent (it has an agent_id) on Haiku, a teammate on Sonnet."""
    if envelope.get("agent_id"):
        return SUBAGENT_MODEL
    return TEAMMATE_MODEL if envelope.get("parent_agent") else LEAD_MODEL


def step_usage(payload: Json, envelope: Json) -> Usage:
    """The usage of the model step `payload` ends, from the payload's own bytes (deterministic)."""
    rng = random.Random(zlib.crc32(dumpb(payload)))  # noqa: S311 (a simulation, not a secret)
    ends_turn = payload.get("hook_event_name") != "PostToolBatch"
    line = {
        "uuid": f"{rng.getrandbits(128):032x}",
        "requestId": f"req_{rng.getrandbits(96):024x}",
        "timestamp": envelope["timestamp"],
        "sessionId": envelope.get("session_id", ""),
        "cwd": envelope.get("cwd", ""),
    }
    message = {"id": f"msg_{rng.getrandbits(96):024x}", "model": model_of(envelope)}
    usage = {
        "input_tokens": rng.randint(3, 60),
        "output_tokens": rng.randint(300, 1800) if ends_turn else rng.randint(60, 600),
        "cache_read_input_tokens": rng.randint(18_000, 90_000),
        "cache_creation_input_tokens": rng.randint(400, 6_000),
    }
    return Usage(line, message, usage)


def usage_messages(
    payload: Json,
    environ: Mapping[str, str],
    *,
    host: str,
    max_payload: int = DEFAULT_MAX_PAYLOAD,
    now: float | None = None,
) -> list[Message]:
    """The usage message of the model step `payload` ends ([] for any other event), for the agent
    its hook event names, stamped like that event."""
    if payload.get("hook_event_name") not in MODEL_STEPS:
        return []
    found = envelopes_from_stdin(dumpb(payload), environ, host=host, now=now)
    if not found:
        return []
    _, event = found[0]
    subject, env = usage_envelope(step_usage(payload, event), Source("", who_of(event)))
    return [(subject, env["id"], encode_envelope(env, max_payload))]
