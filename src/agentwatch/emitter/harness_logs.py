"""Token usage in Codex CLI's rollout files and Gemini CLI's chat files: what is new in one of them.

Codex (`$CODEX_HOME/sessions/YYYY/MM/DD/rollout-*.jsonl`): one `token_usage_record` line per model
response, `payload.usage` in OpenAI's terms (input includes the cached tokens, output the
reasoning), keyed by `response_id`; the model is in the turn's `turn_context` line before it. A
sub-agent writes a rollout of its own (its `session_meta` names its parent); its records carry the
parent's session_id. The rollout has the requests the hooks miss (a compaction's).

Gemini (`~/.gemini/tmp/<project>/chats/session-*.jsonl`, a sub-agent's in `chats/<session>/<agent
id>.jsonl`): message lines `{id, type: "gemini", tokens, model, timestamp}`; a message that called
tools is written again under the same id with its tool calls (it counts once: the store keeps one
row per message), and a `{"$set": {"messages": [...]}}` line may hold messages too. Tokens in
Gemini's terms: input includes cached, output excludes thoughts (billed as output).

Both are read like Claude Code's transcripts (emitter/transcripts.py): from a byte offset to the
last complete line, within a time and a message budget, only lines that name a record of interest
parsed. Standard library only: the hook reads these on its own path.
"""

from __future__ import annotations

import datetime
import os
import time

from agentwatch.emitter.transcripts import Reading, Usage, read_head
from agentwatch.harnesses import CODEX, GEMINI_CLI, codex_tokens, gemini_subagent_id, gemini_tokens
from agentwatch.jsonfast import JSONError, loads

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

    Json = dict[str, Any]

CHUNK_BYTES = 1 << 20
_CODEX_MARKERS = (b'"token_usage_record"', b'"turn_context"')
_GEMINI_MARKERS = (b'"tokens"',)
_NO_LIMIT = float("inf")


def _str(value: object) -> str:
    return value if isinstance(value, str) else ""


def _lines(
    path: str, start: int, until: float, markers: tuple[bytes, ...], take: Callable[[Json], bool]
) -> Reading:
    """Read `path` from `start`: each complete line holding one of `markers`, parsed, to `take`,
    which returns False to stop before that line (the message budget). At least one chunk is read
    before `until` is looked at."""
    reading = Reading(start)
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return reading
    try:
        size = os.fstat(fd).st_size
        reading.end, pos = size, start
        carry = b""
        while pos < size:
            chunk = os.pread(fd, min(CHUNK_BYTES, size - pos), pos)
            if not chunk:
                break
            base = pos - len(carry)
            data, pos = carry + chunk, pos + len(chunk)
            cut = data.rfind(b"\n") + 1
            carry = data[cut:]
            at = 0
            while at < cut:
                end = data.find(b"\n", at, cut)
                line = data[at:end]
                if any(m in line for m in markers):
                    try:
                        parsed = loads(line.decode("utf-8", "replace"))
                    except JSONError:
                        parsed = None
                    if isinstance(parsed, dict):
                        reading.lines += 1
                        if not take(parsed):
                            reading.done = False
                            return reading
                at = end + 1
                reading.offset = base + at
            if time.monotonic() >= until:
                break
        reading.done = reading.offset >= size
    finally:
        os.close(fd)
    return reading


# --- Codex -------------------------------------------------------------------------------------


def read_rollout(
    path: str, start: int = 0, until: float = _NO_LIMIT, *, max_messages: int = 0, model: str = ""
) -> Reading:
    """The model responses of a Codex rollout file from byte `start`. `model`: the model of the
    records before the first `turn_context` read (the hook's event says which)."""
    state = {"model": model}
    found: dict[str, Usage] = {}

    def take(line: Json) -> bool:
        payload = line.get("payload")
        if not isinstance(payload, dict):
            return True
        if line.get("type") == "turn_context":
            state["model"] = _str(payload.get("model")) or state["model"]
            return True
        usage = payload.get("usage")
        response = _str(payload.get("response_id"))
        if line.get("type") != "token_usage_record" or not isinstance(usage, dict) or not response:
            return True
        if response not in found and max_messages and len(found) >= max_messages:
            return False
        found[response] = Usage.of(
            CODEX, response, _str(payload.get("turn_id")), state["model"], _str(line.get("timestamp")),
            _str(payload.get("session_id")), codex_tokens(usage), _str(payload.get("thread_id")),
        )  # fmt: skip
        return True

    reading = _lines(path, start, until, _CODEX_MARKERS, take)
    reading.usage = found
    return reading


def rollout_meta(path: str) -> Json:
    """The `session_meta` payload of a rollout (its first line): `id` (the thread), `session_id`,
    `parent_thread_id` for a sub-agent's; {} when it cannot be read."""
    try:
        with open(path, "rb") as f:
            first = f.readline(1 << 20)
        line = loads(first.decode("utf-8", "replace"))
    except (OSError, JSONError):
        return {}
    payload = line.get("payload") if isinstance(line, dict) and line.get("type") == "session_meta" else None
    return payload if isinstance(payload, dict) else {}


def rollout_agent(meta: Json) -> tuple[str, str] | None:
    """(agent id, agent type) of a sub-agent's rollout, from its `session_meta`: its thread, and
    its role (`agent_role`), else the kind of helper Codex started on its own (`source.subagent.other`:
    "guardian" for the approval reviewer), else "default", as Codex's SubagentStart names a spawned
    one without a role. None for a session's own rollout (no `parent_thread_id`)."""
    thread = _str(meta.get("id"))
    if not meta.get("parent_thread_id") or not thread:
        return None
    source = meta.get("source")
    sub = source.get("subagent") if isinstance(source, dict) else None
    other = _str(sub.get("other")) if isinstance(sub, dict) else ""
    return thread, _str(meta.get("agent_role")) or other or "default"


_HEAD = 512  # enough of a rollout's first line to hold its session_id
_MAX_DAYS = 7  # day folders after the session's own looked into


def unannounced_rollouts(
    main: str, session_id: str, today: datetime.date | None = None
) -> list[tuple[str, Json]]:
    """The rollouts of the session `session_id` (whose own rollout is `main`) that no hook event
    points at, each with its `session_meta`: the helpers Codex starts on its own, such as the
    approval reviewer (`source: {"subagent": {"other": "guardian"}}`), which fire no SubagentStart
    or SubagentStop. A sub-agent the model spawned (`thread_spawn`) is left to its SubagentStop,
    which reads its rollout as the hook names it.

    A rollout is named by the time its thread started, in the day folder of that time: looked for
    after `main` in its folder, then in each day folder up to today (at most 7), by the head of its
    first line; only a head that names the session is parsed."""
    folder, name = os.path.split(main)
    if not session_id or not name.startswith("rollout-"):
        return []
    folders = [(folder, name)] + [(f, "") for f in _later_days(folder, today or datetime.date.today())]
    needle = f'"session_id":"{session_id}"'.encode()
    found: list[tuple[str, Json]] = []
    for where, after in folders:
        try:
            names = sorted(n for n in os.listdir(where) if n.startswith("rollout-") and n > after)
        except OSError:
            continue
        for other in names:
            path = os.path.join(where, other)
            if needle not in read_head(path, _HEAD):
                continue
            meta = rollout_meta(path)
            source = meta.get("source")
            spawned = isinstance(source, dict) and "thread_spawn" in (source.get("subagent") or {})
            if meta.get("session_id") == session_id and rollout_agent(meta) and not spawned:
                found.append((path, meta))
    return found


def _later_days(folder: str, today: datetime.date) -> list[str]:
    """The day folders (`sessions/YYYY/MM/DD`) after `folder`'s, up to `today`; none when `folder`
    is not one."""
    base, y, m, d = folder.rsplit(os.sep, 3) if folder.count(os.sep) >= 3 else ("", "", "", "")
    try:
        day = datetime.date(int(y), int(m), int(d))
    except ValueError:
        return []
    out: list[str] = []
    while day < today and len(out) < _MAX_DAYS:
        day += datetime.timedelta(days=1)
        out.append(os.path.join(base, f"{day.year:04d}", f"{day.month:02d}", f"{day.day:02d}"))
    return out


# --- Gemini ------------------------------------------------------------------------------------


def read_chat(path: str, start: int = 0, until: float = _NO_LIMIT, *, max_messages: int = 0) -> Reading:
    """The model messages of a Gemini chat file from byte `start`, each once (its last copy)."""
    found: dict[str, Usage] = {}

    def message(item: object) -> bool:
        if (
            not isinstance(item, dict)
            or item.get("type") != "gemini"
            or not isinstance(item.get("tokens"), dict)
        ):
            return True
        key = _str(item.get("id"))
        if not key:
            return True
        if key not in found and max_messages and len(found) >= max_messages:
            return False
        tokens = gemini_tokens(item["tokens"])
        found[key] = Usage.of(
            GEMINI_CLI, key, "", _str(item.get("model")), _str(item.get("timestamp")), "", tokens
        )
        return True

    def take(line: Json) -> bool:
        update = line.get("$set")
        if isinstance(update, dict) and isinstance(update.get("messages"), list):
            return all(message(item) for item in update["messages"])
        return message(line)

    reading = _lines(path, start, until, _GEMINI_MARKERS, take)
    reading.usage = found
    return reading


def chat_subagents(main_chat: str, session_id: str) -> list[str]:
    """The sub-agents' chat files of the session whose chat is `main_chat`: `<chats>/<session>/`."""
    folder = os.path.join(os.path.dirname(main_chat), session_id) if session_id else ""
    try:
        names = sorted(os.listdir(folder)) if folder else []
    except OSError:
        return []
    return [os.path.join(folder, name) for name in names if name.endswith(".jsonl")]


def chat_subagent(main_chat: str, agent_file: str, session_id: str) -> tuple[str, str] | None:
    """(agentwatch's agent id, agent name) of the sub-agent whose chat is `agent_file`, from the
    `invoke_agent` call in the main chat that names its id (harnesses.gemini_subagent_id of the
    call's input, as the hook's events give it); None while the main chat does not name it yet."""
    gemini_id = os.path.basename(agent_file)[:-6]
    needle = f'"agentId":"{gemini_id}"'.encode()
    try:
        with open(main_chat, "rb") as f:
            data = f.read()
    except OSError:
        return None
    at = data.rfind(needle)
    if at < 0:
        return None
    begin, end = data.rfind(b"\n", 0, at) + 1, data.find(b"\n", at)
    try:
        line = loads(data[begin : end if end >= 0 else len(data)].decode("utf-8", "replace"))
    except JSONError:
        return None
    calls = line.get("toolCalls") if isinstance(line, dict) else None
    for call in calls if isinstance(calls, list) else []:
        args = call.get("args") if isinstance(call, dict) else None
        if isinstance(args, dict) and call.get("agentId") == gemini_id:
            name = _str(args.get("agent_name")) or "subagent"
            return gemini_subagent_id(session_id, name, _str(args.get("prompt"))), name
    return None
