"""The wire contract: hook events, NATS subjects and the event envelope.

Everything that puts events on the bus or reads them back derives from this module: the emitter
builds envelopes with it, the store and the dashboard decode them with it, the stream and the
hook registration take their subjects and event names from it.

Standard library only, and light to import: it is on the hook's path, which must cost little more
than starting the interpreter.

Subjects keep genie's names (`genie.tool.{agent}.call`, `genie.msg.{recipient}`, ...) and extend
them to every hook event; see SUBJECTS below and docs/wire.md.
"""

from __future__ import annotations

import time

from agentwatch.envsecrets import redact_environment
from agentwatch.harnesses import CLAUDE_CODE, detect, model_of, normalise, short_id

# The ids and times of envelopes, re-exported here, where the rest of the contract is.
from agentwatch.ids import event_id_time as event_id_time  # noqa: PLC0414
from agentwatch.ids import iso_utc as iso_utc  # noqa: PLC0414
from agentwatch.ids import new_event_id as new_event_id  # noqa: PLC0414
from agentwatch.ids import sha1_digest as sha1_digest  # noqa: PLC0414
from agentwatch.ids import stable_event_id as stable_event_id  # noqa: PLC0414
from agentwatch.jsonfast import JSONError, dumpb, loads
from agentwatch.redact import redact_text
from agentwatch.summaries import message_parts, one_line, summarize

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Mapping, Sequence
    from typing import Any

    Json = dict[str, Any]
    # (payload, harness) -> (derived fields of its envelope, the events it implies): see
    # envelopes_from_stdin.
    Tracker = Callable[[Json, str], tuple[Mapping[str, str] | None, Sequence[tuple[Json, Mapping[str, str]]]]]

SCHEMA_VERSION = 1
SUBJECT_ROOT = "genie"
ALL_SUBJECTS = "genie.>"
MESSAGE_SUBJECTS = "genie.msg.>"
MESSAGE_SUBJECT_PREFIX = MESSAGE_SUBJECTS[:-1]  # what every message envelope's subject starts with
MSG_ID_HEADER = "Nats-Msg-Id"
ENVELOPE_PREFIX = b'{"v":1,"id":"'  # how `dumps` starts an envelope: readers find its id there
SOURCE = "hook"
# An event the hook worked out from one it received (a Gemini sub-agent's start and stop, which
# Gemini CLI does not send): `data.derived_from` names the envelope it came with.
DERIVED_SOURCE = "derived"

# NATS' default max_payload; the emitter uses the server's own figure (INFO) when it has one.
DEFAULT_MAX_PAYLOAD = 1024 * 1024
# Headroom under max_payload for the headers and the protocol line.
_HEADROOM = 512
TOKEN_MAX = 64
# Envelope string fields other than data (cwd, ids, ...) are cut to this when a body must shrink.
HEADLINE_MAX = 1024

# Every hook event of Claude Code 2.1.330, in the order the reference lists them.
HOOK_EVENTS: tuple[str, ...] = (
    "SessionStart", "Setup", "InstructionsLoaded", "UserPromptSubmit", "UserPromptExpansion",
    "MessageDisplay", "PreToolUse", "PermissionRequest", "PermissionDenied", "PostToolUse",
    "PostToolUseFailure", "PostToolBatch", "Notification", "SubagentStart", "SubagentStop",
    "TaskCreated", "TaskCompleted", "Stop", "StopFailure", "TeammateIdle", "ConfigChange",
    "CwdChanged", "DirectoryAdded", "FileChanged", "WorktreeCreate", "WorktreeRemove",
    "PreCompact", "PostCompact", "SessionEnd", "Elicitation", "ElicitationResult",
    "PreModelSwitch", "PostModelSwitch",
)  # fmt: skip

# hook event -> (subject family, subject suffix, kind, direction).
# Subject = genie.{family}.{agent}.{suffix}; events not listed get the generic form
# genie.agent.{agent}.event.{snake_case_name}.
SUBJECTS: dict[str, tuple[str, str, str, str]] = {
    "PreToolUse": ("tool", "call", "tool_call", "out"),
    "PostToolUse": ("tool", "result", "tool_result", "in"),
    "PostToolUseFailure": ("tool", "error", "tool_error", "in"),
    "PermissionRequest": ("tool", "permission", "permission", "out"),
    "PermissionDenied": ("tool", "denied", "permission_denied", "in"),
    "UserPromptSubmit": ("user", "prompt", "prompt", "in"),
    "Stop": ("agent", "response", "response", "out"),
    "StopFailure": ("agent", "failure", "failure", "out"),
    "SessionStart": ("agent", "session.start", "session_start", ""),
    "SessionEnd": ("agent", "session.end", "session_end", ""),
    "SubagentStart": ("agent", "subagent.start", "subagent_start", ""),
    "SubagentStop": ("agent", "subagent.stop", "subagent_stop", ""),
    "TeammateIdle": ("agent", "idle", "idle", ""),
    "TaskCreated": ("agent", "task.created", "task_created", ""),
    "TaskCompleted": ("agent", "task.completed", "task_completed", ""),
    "DirectoryAdded": ("agent", "directory.added", "directory_added", ""),
    "PreModelSwitch": ("agent", "model.switching", "model_switching", ""),
    "PostModelSwitch": ("agent", "model.switched", "model_switched", ""),
}
MESSAGE_KIND = "message"
INVALID_EVENT = "InvalidPayload"
# Token usage read from transcripts (not a hook event): one envelope per API message (kind
# "usage") and per Claude Code cost-state record (kind "cost_state"), on genie.agent.{agent}.usage.
USAGE_EVENT, USAGE_KIND = "Usage", "usage"
# The hook events after which the hook reads what is new in the agent's transcripts.
USAGE_EVENTS = frozenset({"Stop", "SubagentStop", "StopFailure", "PreCompact", "SessionEnd"})
COST_STATE_EVENT, COST_STATE_KIND = "CostState", "cost_state"
USAGE_SOURCE = "transcript"

# The envelope's fields in wire order; `data` last so a reader sees the headline first.
ENVELOPE_FIELDS: tuple[str, ...] = (
    "v", "id", "timestamp", "event", "kind", "agent", "team", "direction", "peer", "text",
    "source", "session_id", "agent_id", "agent_type", "parent_agent", "tool_name", "tool_use_id",
    "host", "cwd", "redacted", "truncated", "seq", "spool_bytes", "hook_ms", "prompt_id", "duration_ms",
    "permission_mode", "model", "harness", "harness_event", "person", "repo", "branch", "data",
)  # fmt: skip
_REQUIRED = ("v", "id", "timestamp", "event", "kind", "agent")

_TOKEN_OK = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-")


class EnvelopeError(ValueError):
    """A message body that is not a valid agentwatch envelope; the text says why."""


# --- subjects ---------------------------------------------------------------------------------


def subject_token(value: object, fallback: str = "unknown") -> str:
    """Make `value` one safe NATS subject token: [A-Za-z0-9_-], bounded, never empty.

    Anything else (dots, wildcards, spaces, control characters, non-ASCII) becomes `_`. A value
    with nothing usable left maps to a short stable hash, so distinct names stay distinct.
    """
    text = value if isinstance(value, str) else ("" if value is None else str(value))
    out = []
    prev_sep = True
    lossy = False  # a letter or digit was dropped: names that differ only there must not collide
    for ch in text:
        if ch in _TOKEN_OK:
            out.append(ch)
            prev_sep = False
        else:
            lossy = lossy or ch.isalnum()
            if not prev_sep:
                out.append("_")
                prev_sep = True
    token = "".join(out).strip("_")
    if not lossy and token and len(token) <= TOKEN_MAX:
        return token
    if not token and not text.strip():
        return fallback
    import zlib

    digest = f"{zlib.crc32(text.encode('utf-8', 'replace')):08x}"
    base = token[: TOKEN_MAX - 9].rstrip("_") or fallback
    return f"{base}-{digest}"


def snake_case(name: str) -> str:
    """`InstructionsLoaded` -> `instructions_loaded`, for the generic subject of any event."""
    out = []
    for i, ch in enumerate(name):
        if ch.isupper() and i and (name[i - 1].islower() or name[i - 1].isdigit()):
            out.append("_")
        out.append(ch.lower())
    return subject_token("".join(out), "event")


def event_subject(event: str, agent: str) -> tuple[str, str, str]:
    """(subject, kind, direction) of a hook event emitted by `agent`."""
    agent = subject_token(agent)
    spec = SUBJECTS.get(event)
    if spec is not None:
        family, suffix, kind, direction = spec
        return f"{SUBJECT_ROOT}.{family}.{agent}.{suffix}", kind, direction
    snake = snake_case(event)
    return f"{SUBJECT_ROOT}.agent.{agent}.event.{snake}", snake, ""


def message_subject(recipient: str) -> str:
    return f"{SUBJECT_ROOT}.msg.{subject_token(recipient)}"


def usage_subject(agent: str) -> str:
    """`genie.agent.{agent}.usage`: token usage and cost-state records of `agent`."""
    return f"{SUBJECT_ROOT}.agent.{subject_token(agent)}.usage"


def is_usage_subject(subject: str) -> bool:
    """Whether `subject` is a usage subject (and not, say, a hook event named Usage:
    `genie.agent.{agent}.event.usage`)."""
    parts = subject.split(".")
    return len(parts) == 4 and parts[0] == SUBJECT_ROOT and parts[1] == "agent" and parts[3] == "usage"


# --- agent identity ---------------------------------------------------------------------------


def _str(value: object) -> str:
    return value if isinstance(value, str) else ""


def main_agent_name(payload: Mapping[str, Any], environ: Mapping[str, str]) -> str:
    """The name of the session's own (main-thread) agent.

    GENIE_AGENT_NAME when set; else the `--agent` name Claude Code reports on the main thread
    (`agent_type` without `agent_id`); else `main-` and the first 8 characters of the session id.
    """
    name = environ.get("GENIE_AGENT_NAME", "").strip()
    if name:
        return subject_token(name)
    if not _str(payload.get("agent_id")) and _str(payload.get("agent_type")):
        return subject_token(payload["agent_type"])
    session = _str(payload.get("session_id"))
    return subject_token(f"main-{short_id(session)}" if session else "main")


def identify(payload: Mapping[str, Any], environ: Mapping[str, str]) -> tuple[str, str, str]:
    """(agent, team, parent_agent) of a hook payload; the rule is in docs/wire.md ("Agent identity").

    Inside a subagent or teammate (the payload has `agent_id`), the event is that agent's:
    a teammate by its name (`teammate_name`, or `agent_type` when `agent_id` is `a<name>-<hex>`),
    a subagent as `<agent_type>-<8 chars of agent_id>`; its parent is the session's main agent.
    Otherwise the event is the main agent's (see main_agent_name).
    """
    main = main_agent_name(payload, environ)
    team = environ.get("GENIE_TEAM", "").strip() or _str(payload.get("team_name"))
    if not team:
        session = _str(payload.get("session_id"))
        team = f"session-{short_id(session)}" if session else ""
    team = subject_token(team, "") if team else ""
    agent_id = _str(payload.get("agent_id"))
    if not agent_id:
        return main, team, ""
    agent_type = _str(payload.get("agent_type"))
    teammate = _str(payload.get("teammate_name"))
    if not teammate and agent_type and agent_id.startswith(f"a{agent_type}-"):
        teammate = agent_type
    if teammate:
        return subject_token(teammate), team, main
    return subject_token(f"{agent_type or 'subagent'}-{short_id(agent_id, agent=True)}"), team, main


# --- envelopes --------------------------------------------------------------------------------


def build_envelope(
    payload: Json,
    environ: Mapping[str, str],
    *,
    now: float | None = None,
    host: str = "",
    redacted: int = 0,
    event_id: str | None = None,
    harness: str = CLAUDE_CODE,
    derived: Mapping[str, str] | None = None,
) -> tuple[str, Json]:
    """(subject, envelope) of one hook payload of `harness` that was already redacted.

    `payload` is kept whole as `data`; size limits are applied at encoding (encode_envelope).
    `derived`: what the hook worked out that the payload does not say (a Gemini tool call's id,
    the sub-agent a Gemini event belongs to, a streamed model response's text): agent_id,
    agent_type, tool_use_id, response_text.
    """
    now = time.time() if now is None else now
    own = _str(payload.get("hook_event_name")) or "Unknown"
    event = normalise(harness, own, payload)
    view: Mapping[str, Any] = {**payload, **derived} if derived else payload
    agent, team, parent = identify(view, environ)
    subject, kind, direction = event_subject(event, agent)
    tool = _str(payload.get("tool_name"))
    peer = ""
    if tool:
        peer = tool
    elif event == "UserPromptSubmit":
        peer = "user"
    elif parent:
        peer = parent
    env: Json = {
        "v": SCHEMA_VERSION,
        "id": event_id or new_event_id(now),
        "timestamp": iso_utc(now),
        "event": event,
        "kind": kind,
        "agent": agent,
        "team": team,
        "direction": direction,
        "peer": peer,
        "text": one_line(summarize(event, view)),
        "source": SOURCE,
        "session_id": _str(payload.get("session_id")),
        "agent_id": _str(view.get("agent_id")),
        "agent_type": _str(view.get("agent_type")),
        "parent_agent": parent,
        "tool_name": tool,
        "tool_use_id": _str(view.get("tool_use_id")),
        "host": host,
        "cwd": _str(payload.get("cwd")),
        "redacted": redacted,
        "truncated": False,
        # Set by the hook: seq (0: none), its spool's bytes, its run's time so far (0: not a hook
        # run's own event), person/repo/branch (emitter/attribution.py).
        "seq": 0,
        "spool_bytes": 0,
        "hook_ms": 0.0,
        # Payload fields worth a typed column, lifted out of `data` (which keeps them too).
        "prompt_id": _str(payload.get("prompt_id")) or _str(payload.get("turn_id")),
        "duration_ms": ms if type(ms := payload.get("duration_ms")) is int else None,
        "permission_mode": _str(payload.get("permission_mode")),
        "model": model_of(payload),
        "harness": harness,
        "harness_event": own,
        "person": "",
        "repo": "",
        "branch": "",
        "data": payload,
    }
    return subject, env


def message_envelope(
    event_env: Json, environ: Mapping[str, str], now: float | None = None
) -> tuple[str, Json] | None:
    """The `genie.msg.{recipient}` companion of a SendMessage PostToolUse, or None.

    It has its own id and kind "message", and points at the tool event through data.event_id:
    the store keeps the tool event as one event row and this as one message row, never two of
    either. A send the tool reported as failed is not a delivery and gets no companion.
    """
    payload = event_env.get("data")
    if (
        event_env.get("event") != "PostToolUse"
        or event_env.get("tool_name") != "SendMessage"
        or not isinstance(payload, dict)
    ):
        return None
    tool_input = payload.get("tool_input")
    if not isinstance(tool_input, dict):
        return None
    response = payload.get("tool_response")
    if isinstance(response, dict) and response.get("success") is False:
        return None
    recipient, mtype, summary, message = message_parts(tool_input)
    if not recipient or recipient == "main":
        # The lead: the main agent of the sender's session.
        recipient = main_agent_name(payload, environ)
    recipient = subject_token(recipient)
    env = dict(event_env)
    env.update(
        id=new_event_id(now),
        kind=MESSAGE_KIND,
        direction="out",
        peer=recipient,
        text=one_line(f"→ {recipient}: {one_line(summary or message)}"),
        data={
            "event_id": event_env["id"],
            "from": event_env["agent"],
            "to": recipient,
            "to_raw": _str(tool_input.get("to")) or _str(tool_input.get("recipient")),
            # A background agent addressed by name: the response pins the agent id it reached.
            "to_agent_id": _str(response.get("pin", {}).get("id"))
            if isinstance(response, dict) and isinstance(response.get("pin"), dict)
            else "",
            "message_type": mtype,
            "summary": summary,
            "message": message,
        },
    )
    return message_subject(recipient), env


dumps = dumpb


def _cut(value: object, cap: int) -> object:
    """`value` with strings longer than `cap` characters and containers longer than cap/16 items cut,
    each cut marked."""
    if isinstance(value, str):
        if len(value) <= cap:
            return value
        return value[:cap] + f"…[agentwatch: truncated, kept {cap} of {len(value)} chars]"
    items = max(4, cap // 16)
    if isinstance(value, dict):
        out: Json = {}
        for i, (k, v) in enumerate(value.items()):
            if i >= items:
                out["agentwatch_truncated_keys"] = len(value) - items
                break
            out[k[:cap] if len(k) > cap else k] = _cut(v, cap)
        return out
    if isinstance(value, list):
        kept = [_cut(v, cap) for v in value[:items]]
        if len(value) > items:
            kept.append(f"…[agentwatch: truncated, kept {items} of {len(value)} items]")
        return kept
    return value


def encode_envelope(env: Json, max_payload: int = DEFAULT_MAX_PAYLOAD) -> bytes:
    """The envelope as JSON bytes that fit `max_payload` with room for headers.

    Oversized fields are cut, largest first in effect (every string above a cap shrinking until
    the whole fits), the structure stays valid JSON, each cut carries a marker and the envelope
    says `truncated: true`.
    """
    limit = max(max_payload - _HEADROOM, 4096)
    body = dumps(env)
    if len(body) <= limit:
        return body
    data = env.get("data")
    out = dict(env, truncated=True)
    for key, value in env.items():
        if key != "data" and isinstance(value, str) and len(value) > HEADLINE_MAX:
            out[key] = _cut(value, HEADLINE_MAX)
    out["text"] = one_line(env.get("text"))

    def fitted(cap: int) -> bytes | None:
        out["data"] = _cut(data, cap)
        candidate = dumps(out)
        return candidate if len(candidate) <= limit else None

    # The largest per-field cap that fits: cut as little as possible, largest fields first.
    low, high = 32, max(64, len(body))
    best = fitted(low)
    if best is not None:
        while high - low > max(16, low // 64):
            mid = (low + high) // 2
            candidate = fitted(mid)
            if candidate is None:
                high = mid
            else:
                low, best = mid, candidate
        return best
    out["data"] = {"agentwatch_truncated": {"original_bytes": len(dumps(data)), "reason": "too large"}}
    return dumps(out)


def decode_envelope(body: bytes | str) -> Json:
    """Parse and check one envelope; raise EnvelopeError with the reason when it is not one."""
    try:
        env = loads(body.decode("utf-8") if isinstance(body, bytes) else body)
    except (ValueError, UnicodeDecodeError) as exc:
        raise EnvelopeError(f"not JSON: {exc}") from None
    check_shape(env)
    return env  # type: ignore[no-any-return]  # (a dict: check_shape says so)


def check_shape(env: object) -> None:
    """Raise EnvelopeError unless `env` is an object with the required fields of an envelope."""
    if type(env) is not dict:
        raise EnvelopeError(f"not a JSON object but {type(env).__name__}")
    missing = [f for f in _REQUIRED if f not in env]
    if missing:
        raise EnvelopeError(f"missing field(s): {', '.join(missing)}")
    if type(env["v"]) is not int or not 1 <= env["v"] <= SCHEMA_VERSION:
        raise EnvelopeError(f"unsupported schema version {env['v']!r} (this reader knows {SCHEMA_VERSION})")
    for f in ("id", "event", "kind", "agent", "timestamp"):
        if not isinstance(env[f], str) or not env[f]:
            raise EnvelopeError(f"field {f!r} must be a non-empty string")


# --- from hook stdin to outgoing messages -----------------------------------------------------

# Above this, the payload is not parsed whole (that would break the hook's deadline): its
# headline fields are read from its head and tail and the rest is marked as cut.
MAX_PARSE_BYTES = 8 * 1024 * 1024
# Why a payload nested deeper than the JSON parser goes (about 1,000 levels) is not read.
TOO_DEEP = "JSON nested too deep to read"


def unparsed_envelope(
    text: str,
    size: int,
    reason: str,
    environ: Mapping[str, str],
    host: str = "",
    now: float | None = None,
    harness: str = "",
) -> tuple[str, Json]:
    """The event of a payload that is not parsed (too large, nested too deep): what its text
    says (unparsed.py), and why, with its size."""
    from agentwatch.unparsed import unparsed_payload

    partial, redacted = unparsed_payload(text, size, reason, environ)
    harness = harness or detect(partial, environ)
    subject, env = build_envelope(partial, environ, host=host, now=now, redacted=redacted, harness=harness)
    env["truncated"] = True
    return subject, env


def invalid_envelope(
    raw_text: str,
    reason: str,
    environ: Mapping[str, str],
    *,
    host: str = "",
    redacted: int = 0,
    harness: str = CLAUDE_CODE,
) -> tuple[str, Json]:
    """An envelope for stdin that is not a hook payload: kept, not dropped, with the reason.

    Its agent is the session's main agent where the text still names a session (or
    GENIE_AGENT_NAME names the agent), else `unknown`: never a made-up `main`."""
    from agentwatch.unparsed import headline_fields

    found = headline_fields(raw_text) if isinstance(raw_text, str) else {}
    payload: Json = {"hook_event_name": INVALID_EVENT, "error": reason, "raw": raw_text}
    for key in ("session_id", "cwd", "agent_id", "agent_type", "transcript_path"):
        if isinstance(found.get(key), str):
            payload[key] = found[key]
    subject, env = build_envelope(payload, environ, host=host, redacted=redacted, harness=harness)
    if not env["session_id"] and not environ.get("GENIE_AGENT_NAME", "").strip() and not env["agent_id"]:
        env["agent"] = "unknown"
        subject = event_subject(INVALID_EVENT, "unknown")[0]
    env["text"] = one_line(f"invalid hook input: {reason}")
    return subject, env


def envelopes_from_stdin(
    raw: bytes,
    environ: Mapping[str, str],
    *,
    host: str = "",
    now: float | None = None,
    cut: bool = False,
    harness: str = "",
    track: Tracker | None = None,
) -> list[tuple[str, Json]]:
    """Every (subject, envelope) one hook invocation publishes: the event, a message for a
    SendMessage delivery, and what `track` derives. Never raises for bad input: that becomes an
    InvalidPayload envelope. `cut`: the hook run was stopped before it read its stdin to the end
    (what it read is `raw`). `harness`: who ran the hook ('': told by the payload, see
    harnesses.detect). `track`: the hook's memory of the session (see emitter/nesting.py): given
    the payload and the harness, what the payload does not say (build_envelope's `derived`) and
    the events it implies (payloads of their own, each with its `derived`)."""
    text = raw.decode("utf-8", "replace")
    if len(raw) > MAX_PARSE_BYTES:
        return [unparsed_envelope(text, len(raw), "input too large to parse", environ, host, now, harness)]
    whole = text
    text, redactions = redact_environment(*redact_text(text), environ)
    try:
        payload: object = loads(text)
    except RecursionError:  # deeper than the parser goes: the event with what its text says
        return [unparsed_envelope(whole, len(raw), TOO_DEEP, environ, host, now, harness)]
    except JSONError as exc:
        reason = "empty input" if not raw.strip() else f"not JSON ({exc})"
        if cut:
            reason = f"the hook run was stopped after reading {len(raw)} bytes of its input; {reason}"
        if raw and b"\xef\xbf\xbd" not in raw and "\ufffd" in text:
            reason = "not UTF-8; " + reason
        return [
            invalid_envelope(
                text, reason, environ, host=host, redacted=redactions, harness=harness or CLAUDE_CODE
            )
        ]
    if not isinstance(payload, dict):
        reason = f"a JSON {type(payload).__name__}, not an object"
        return [
            invalid_envelope(
                text, reason, environ, host=host, redacted=redactions, harness=harness or CLAUDE_CODE
            )
        ]
    if not isinstance(payload.get("hook_event_name"), str) or not payload["hook_event_name"]:
        payload.setdefault("agentwatch_note", "hook_event_name missing")
    harness = harness or detect(payload, environ)
    derived, implied = track(payload, harness) if track is not None else (None, ())
    out = [
        build_envelope(
            payload, environ, host=host, now=now, redacted=redactions, harness=harness, derived=derived
        )
    ]
    first = out[0][1]
    if first["event"] == "Unknown" and payload.get("agentwatch_note") == "hook_event_name missing":
        first["text"] = "invalid hook input: hook_event_name missing"
    companion = message_envelope(first, environ, now)
    if companion is not None:
        out.append(companion)
    for extra, extra_derived in implied:
        subject, env = build_envelope(
            extra, environ, host=host, now=now, harness=harness, derived=extra_derived
        )
        env.update(source=DERIVED_SOURCE, harness_event=first["harness_event"])
        extra["derived_from"] = first["id"]
        out.append((subject, env))
    return out
