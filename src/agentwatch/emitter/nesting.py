"""The hook's memory of a Gemini CLI session: what its events do not say, worked out from their order.

Gemini CLI's tool events carry no call id and its sub-agents' events carry nothing that marks them
(reference: codex-and-gemini-hooks.md, 2.4 and 2.5). Each hook run is its own process, so what one
run learned is kept for the next in a small file per session in the data dir (`calls/<session>`),
read and rewritten under an exclusive lock (lockf, as the sequence counters), as a JSON object:

- `open`: the tool calls begun (BeforeTool) and not ended yet, oldest first, each
  `[call id, tool, key of its input, owner agent id, owner type, sub-agent id, sub-agent name]`.
  A BeforeTool gets a new call id (a ULID); its AfterTool is the latest open call of the same tool
  and the same input (else of the same tool), which allows nesting and calls that end out of order.
- a sub-agent is the inside of an `invoke_agent` call: every event between its BeforeTool and its
  AfterTool is the sub-agent's (the innermost open one's), and the two imply the sub-agent's
  SubagentStart and SubagentStop, which Gemini CLI does not send. Best effort: two sub-agents run
  at once cannot be told apart (Gemini gives nothing to tell them by).
- `text`: what the chunks of the current model response said, so that the one row a person sees
  for the response (its last chunk, `PostModelRequest`) has its text as well as its usage.

A new turn (BeforeAgent) or session (SessionStart) starts with no open call; SessionEnd removes the
file. Any other harness's event costs nothing here: its payload says all of this itself.

Standard library only: this module is on the hook's path (`posix`, not `os`).
"""

from __future__ import annotations

import posix

from agentwatch.emitter.sequence import open_locked
from agentwatch.harnesses import GEMINI_CLI, gemini_subagent_id, is_final_chunk
from agentwatch.ids import new_event_id, sha1_digest
from agentwatch.jsonfast import JSONError, dumpb, loads

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Mapping
    from typing import Any

    Json = dict[str, Any]
    Implied = list[tuple[Json, dict[str, str]]]

STATE_DIR = "calls"
TEXT_MAX = 400
SUBAGENT_TOOL = "invoke_agent"
# Open calls kept at most: a session whose AfterTools never came must not grow its file forever.
OPEN_MAX = 64
_SAFE = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-")


def _str(value: object) -> str:
    return value if isinstance(value, str) else ""


def input_key(tool_input: object) -> str:
    """What tells one call's input from another's (the same on its BeforeTool and AfterTool)."""
    return sha1_digest(dumpb(tool_input)).hex()[:12]


def _owner(state: Json) -> tuple[str, str]:
    """(agent id, type) of the innermost open sub-agent; ('', '') for the session's own agent."""
    for call in reversed(state["open"]):
        if call[5]:
            return call[5], call[6]
    return "", ""


def _context(payload: Json) -> Json:
    return {k: payload[k] for k in ("session_id", "transcript_path", "cwd", "timestamp") if k in payload}


def step(state: Json, payload: Json) -> tuple[dict[str, str] | None, Implied]:
    """What a Gemini event's payload does not say (build_envelope's `derived`) and the sub-agent
    events it implies, given the session's `state`, which it updates."""
    state.setdefault("open", [])
    state.setdefault("text", "")
    event = _str(payload.get("hook_event_name"))
    derived: dict[str, str] = {}
    implied: Implied = []
    if event in ("SessionStart", "BeforeAgent"):
        state["open"], state["text"] = [], ""
    owner = _owner(state)
    if event == "BeforeTool":
        tool, tool_input = _str(payload.get("tool_name")), payload.get("tool_input")
        call = [new_event_id(), tool, input_key(tool_input), owner[0], owner[1], "", ""]
        if tool == SUBAGENT_TOOL and isinstance(tool_input, dict):
            name = _str(tool_input.get("agent_name")) or "subagent"
            prompt = _str(tool_input.get("prompt"))
            call[5] = gemini_subagent_id(_str(payload.get("session_id")), name, prompt)
            call[6] = name
            start = {**_context(payload), "hook_event_name": "SubagentStart", "agent_id": call[5],
                     "agent_type": name, "prompt": prompt}  # fmt: skip
            implied.append((start, {}))
        state["open"] = [*state["open"], call][-OPEN_MAX:]
        derived["tool_use_id"] = call[0]
    elif event == "AfterTool":
        closed = _close(state, _str(payload.get("tool_name")), input_key(payload.get("tool_input")))
        if closed is not None:
            derived["tool_use_id"] = closed[0]
            owner = (closed[3], closed[4])
            if closed[5]:
                response = payload.get("tool_response")
                stop = {**_context(payload), "hook_event_name": "SubagentStop", "agent_id": closed[5],
                        "agent_type": closed[6], "last_assistant_message": _result(response),
                        "gemini_agent_id": _gemini_agent_id(response)}  # fmt: skip
                implied.append((stop, {}))
    elif event == "BeforeModel":
        state["text"] = ""
    elif event == "AfterModel":
        response = payload.get("llm_response")
        text = state["text"] + (_str(response.get("text")) if isinstance(response, dict) else "")
        if is_final_chunk(payload):
            derived["response_text"], state["text"] = text, ""
        else:
            state["text"] = text[:TEXT_MAX]
    if owner[0]:
        derived.update(agent_id=owner[0], agent_type=owner[1])
    return derived or None, implied


def _close(state: Json, tool: str, key: str) -> list[Any] | None:
    """Take the open call an AfterTool ends out of `state`: the latest of this tool and input, else
    the latest of this tool; None when there is none (its BeforeTool was not seen)."""
    calls = state["open"]
    for same_input in (True, False):
        for i in range(len(calls) - 1, -1, -1):
            if calls[i][1] == tool and (calls[i][2] == key or not same_input):
                return list(calls.pop(i))
    return None


def _result(response: object) -> str:
    """A sub-agent's answer, from the AfterTool of its invoke_agent."""
    if not isinstance(response, dict):
        return ""
    display = response.get("returnDisplay")
    if isinstance(display, dict) and _str(display.get("result")):
        result = _str(display.get("result"))
        try:  # the sub-agent's complete_task input, as JSON text: {"response": "..."}
            said = loads(result) if result.lstrip().startswith("{") else None
        except JSONError:
            said = None
        return _str(said.get("response")) or result if isinstance(said, dict) else result
    content = response.get("llmContent")
    if isinstance(content, list) and content and isinstance(content[0], dict):
        return _str(content[0].get("text"))
    return _str(content)


def _gemini_agent_id(response: object) -> str:
    """Gemini's own id of the sub-agent (its chat file's name), where the result names it."""
    display = response.get("returnDisplay") if isinstance(response, dict) else None
    activity = display.get("recentActivity") if isinstance(display, dict) else None
    if isinstance(activity, list) and activity and isinstance(activity[0], dict):
        return _str(activity[0].get("id")).partition("#")[0]
    return ""


# --- kept between hook runs ----------------------------------------------------------------------


def state_path(data_dir: str, session_id: str) -> str:
    name = "".join(ch if ch in _SAFE else "_" for ch in session_id[:128])
    return f"{data_dir.rstrip('/')}/{STATE_DIR}/{name}"


def tracked(data_dir: str, payload: Json) -> tuple[dict[str, str] | None, Implied]:
    """step() with the session's state read from and written back to its file, under its lock."""
    session = _str(payload.get("session_id"))
    if not session:
        return None, []
    path = state_path(data_dir, session)
    if payload.get("hook_event_name") == "SessionEnd":
        try:  # noqa: SIM105 - contextlib would cost the hook an import
            posix.unlink(path)
        except OSError:
            pass
        return None, []
    fd = open_locked(path)
    try:
        raw = posix.pread(fd, 1 << 20, 0)
        try:
            state = loads(raw.decode("utf-8", "replace")) if raw.strip() else {}
        except JSONError:
            state = {}
        state = state if isinstance(state, dict) and isinstance(state.get("open", []), list) else {}
        result = step(state, payload)
        data = dumpb(state)
        posix.pwrite(fd, data, 0)
        posix.ftruncate(fd, len(data))
        return result
    finally:
        posix.close(fd)


def in_memory() -> Callable[
    [Json, str], tuple[Mapping[str, str] | None, list[tuple[Json, Mapping[str, str]]]]
]:
    """A `track` that keeps its sessions' state in memory: for a whole capture played in one process
    (tests, benchmarks, the demo)."""
    sessions: dict[str, Json] = {}

    def track(
        payload: Json, harness: str
    ) -> tuple[Mapping[str, str] | None, list[tuple[Json, Mapping[str, str]]]]:
        if harness != GEMINI_CLI:
            return None, []
        derived, implied = step(sessions.setdefault(_str(payload.get("session_id")), {}), payload)
        return derived, list(implied)

    return track
