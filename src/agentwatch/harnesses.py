"""The coding agents agentwatch observes (Claude Code, Codex CLI, Gemini CLI) and how each one's hook
events map onto one envelope.

Every envelope says which harness sent it (`harness`) and keeps the harness's own event name
(`harness_event`) beside a normalised `event`: Claude Code's name where the event means the same
thing (Gemini's `BeforeTool` is a `PreToolUse`, its `AfterAgent` a `Stop`), so the subjects, the
state machine (agents.TRANSITIONS), the store's SQL and the rules treat a tool call as a tool call
whichever agent made it. An event with no counterpart keeps its own name and goes to the generic
subject `genie.agent.{agent}.event.{snake_case}`; one nobody has seen yet too.

Model requests have no Claude Code counterpart: both CLIs' are named as Codex names them,
`PreModelRequest` and `PostModelRequest` (one per model response, with its usage). Gemini's
`AfterModel` fires once per streamed chunk: only the chunk that ends a response (it carries the
finish reason and the usage) is the `PostModelRequest`; the others are `ModelResponseChunk`.

QUIET_EVENTS are kept out of a person's feed, never out of the record: the store holds every one.

Standard library only: this module is on the hook's path.
"""

from __future__ import annotations

from agentwatch.ids import sha1_digest

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Any

CLAUDE_CODE, CODEX, GEMINI_CLI = "claude-code", "codex", "gemini-cli"
HARNESSES: tuple[str, ...] = (CLAUDE_CODE, CODEX, GEMINI_CLI)
# What the command line and the hook's argument accept for each.
NAMES: dict[str, str] = {
    "claude": CLAUDE_CODE, "claude-code": CLAUDE_CODE, "codex": CODEX, "gemini": GEMINI_CLI,
    "gemini-cli": GEMINI_CLI,
}  # fmt: skip
# The short name of each, as `hooks install --harness` takes it.
SHORT: dict[str, str] = {CLAUDE_CODE: "claude", CODEX: "codex", GEMINI_CLI: "gemini"}
LABELS: dict[str, str] = {CLAUDE_CODE: "Claude Code", CODEX: "Codex CLI", GEMINI_CLI: "Gemini CLI"}

# Every hook event of Codex CLI 0.169.0, as its reference lists them.
CODEX_EVENTS: tuple[str, ...] = (
    "SessionStart", "UserPromptSubmit", "PreModelRequest", "PostModelRequest", "PreToolUse",
    "PermissionRequest", "PostToolUse", "SubagentStart", "SubagentStop", "PreCompact", "PostCompact",
    "Stop", "Interrupt", "SessionEnd",
)  # fmt: skip
# Every hook event of Gemini CLI 0.61.0.
GEMINI_EVENTS: tuple[str, ...] = (
    "SessionStart", "BeforeAgent", "PreCompress", "BeforeModel", "BeforeToolSelection", "AfterModel",
    "BeforeTool", "AfterTool", "AfterAgent", "Notification", "SessionEnd",
)  # fmt: skip

# Gemini's own name -> the normalised one, where the meaning is one and the same.
_GEMINI: dict[str, str] = {
    "BeforeAgent": "UserPromptSubmit",
    "AfterAgent": "Stop",
    "BeforeTool": "PreToolUse",
    "AfterTool": "PostToolUse",
    "BeforeModel": "PreModelRequest",
}
MODEL_CHUNK = "ModelResponseChunk"
# Seen by the store and SQL, not in a person's feed: the start of each model request (its response
# is the row to read), a Gemini chunk that is not the end of its response, Gemini's tool selection
# before each request, and Gemini's PreCompress that fires before nearly every request whether or
# not anything is compressed (one a person asked for, trigger `manual`, is a PreCompact).
QUIET_EVENTS: frozenset[str] = frozenset(
    {"PreModelRequest", MODEL_CHUNK, "BeforeToolSelection", "PreCompress"}
)


def _str(value: object) -> str:
    return value if isinstance(value, str) else ""


def harness_named(name: str) -> str:
    """The harness a command-line name stands for (`codex`, `gemini-cli`, ...); '' when none."""
    return NAMES.get(name.strip().lower(), "")


def detect(payload: Mapping[str, Any], environ: Mapping[str, str]) -> str:
    """The harness that sent `payload`, for a hook registered without naming it: Gemini CLI sets
    GEMINI_SESSION_ID for its hooks; Codex's events carry a `turn_id` or point at a `rollout-`
    file, and it alone has model-request events; anything else is Claude Code's."""
    if environ.get("GEMINI_SESSION_ID"):
        return GEMINI_CLI
    event = _str(payload.get("hook_event_name"))
    if event in _GEMINI or event in ("AfterModel", "BeforeToolSelection", "PreCompress"):
        return GEMINI_CLI
    transcript = _str(payload.get("transcript_path"))
    if (
        "turn_id" in payload
        or event in ("PreModelRequest", "PostModelRequest", "Interrupt")
        or transcript.rpartition("/")[2].startswith("rollout-")
    ):
        return CODEX
    return CLAUDE_CODE


def is_final_chunk(payload: Mapping[str, Any]) -> bool:
    """Whether a Gemini AfterModel is the last chunk of its response: it has the usage, or a
    finish reason."""
    response = payload.get("llm_response")
    if not isinstance(response, dict):
        return True  # nothing to tell it by: a response of its own
    if isinstance(response.get("usageMetadata"), dict):
        return True
    candidates = response.get("candidates")
    first = candidates[0] if isinstance(candidates, list) and candidates else None
    return isinstance(first, dict) and bool(_str(first.get("finishReason")))


def normalise(harness: str, event: str, payload: Mapping[str, Any]) -> str:
    """The normalised event of a hook event named `event` by `harness` (see the module's doc)."""
    if harness == CODEX:
        if event == "PostModelRequest" and payload.get("status") == "failed":
            return "StopFailure"  # Codex has none: a failed request ends the turn, no Stop follows
        return event
    if harness != GEMINI_CLI:
        return event
    mapped = _GEMINI.get(event)
    if mapped is not None:
        if mapped == "PostToolUse" and _tool_failed(payload.get("tool_response")):
            return "PostToolUseFailure"
        return mapped
    if event == "AfterModel":
        return "PostModelRequest" if is_final_chunk(payload) else MODEL_CHUNK
    if event == "PreCompress":
        return "PreCompact" if payload.get("trigger") == "manual" else event
    if event == "Notification" and payload.get("notification_type") == "ToolPermission":
        return "PermissionRequest"
    return event


def _tool_failed(response: object) -> bool:
    """A Gemini tool result that says the tool itself failed (a command exiting 1 is not one)."""
    return isinstance(response, dict) and bool(response.get("error"))


def model_of(payload: Mapping[str, Any]) -> str:
    """The model an event names: Claude Code's and Codex's `model`, Gemini's `llm_request.model`."""
    model = _str(payload.get("model")) or _str(payload.get("to_model"))
    if model:
        return model
    request = payload.get("llm_request")
    return _str(request.get("model")) if isinstance(request, dict) else ""


def short_id(value: str, agent: bool = False) -> str:
    """8 characters that tell one id from another: the head of a random id, the tail of a UUIDv7
    (Codex's: its head is the time, shared by every id made within a minute). `agent`: a Claude
    Code agent id, `a` and hex, whose `a` is dropped."""
    if len(value) == 36 and value[14] == "7" and value[8] == "-":
        return value[-8:]
    if agent and len(value) > 8 and value[0] == "a":
        return value[1:9]
    return value[:8]


# --- usage in each harness's own terms ---------------------------------------------------------


def codex_tokens(usage: Mapping[str, Any]) -> tuple[int, int, int, int]:
    """(input without the cached part, cached input, output with reasoning, reasoning) of a Codex
    `token_usage` (OpenAI's convention: input_tokens includes the cached ones)."""
    cached = _count(usage.get("cached_input_tokens"))
    return (
        max(_count(usage.get("input_tokens")) - cached, 0),
        cached,
        _count(usage.get("output_tokens")),
        _count(usage.get("reasoning_output_tokens")),
    )


def gemini_tokens(tokens: Mapping[str, Any]) -> tuple[int, int, int, int]:
    """The same of a Gemini chat message's `tokens` ({input, output, cached, thoughts, tool}):
    input includes cached; output excludes thoughts, which are billed as output."""
    cached = _count(tokens.get("cached"))
    thoughts = _count(tokens.get("thoughts"))
    return (
        max(_count(tokens.get("input")) + _count(tokens.get("tool")) - cached, 0),
        cached,
        _count(tokens.get("output")) + thoughts,
        thoughts,
    )


def _count(value: object) -> int:
    return value if type(value) is int and value > 0 else 0


def gemini_subagent_id(session_id: str, agent_name: str, prompt: str) -> str:
    """The id agentwatch gives a Gemini CLI sub-agent, which its hooks never name: a hash of its
    session, name and task (`invoke_agent`'s input), so its events and its chat file's usage, read
    apart, agree on it. Two runs of one agent with the same task in one session are one agent."""
    return sha1_digest(f"{session_id}|{agent_name}|{prompt}".encode("utf-8", "replace")).hex()[:16]
