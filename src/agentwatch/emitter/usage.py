"""Token usage from the agent host: usage envelopes out of Claude Code's transcripts.

On the events that close a piece of work (USAGE_EVENTS) the hook reads the part of the agent's
transcripts it has not read yet and publishes, on `genie.agent.{agent}.usage`, one envelope per
new API message (kind `usage`) and one for the newest cost-state record read (kind
`cost_state`; each record is a running total that supersedes the ones before it). Which files:

- an event of a subagent or teammate (the payload has `agent_id`): its own transcript,
  `agent_transcript_path` (else `<session>/subagents/agent-<agent_id>.jsonl` beside the session's);
- an event of the main agent: the session's transcript (`transcript_path`), then each subagent
  transcript under `<session>/subagents/` that grew, each under its own subagent's name (so a
  subagent whose SubagentStop never ran is still counted).

Reading is bounded: a share of the hook's deadline (hook.READ_SHARE) and MAX_MESSAGES per run;
the rest is read next time. Where each file was read up to is kept in the data dir (OFFSETS_DIR,
one small file per transcript: see Offsets), written only once the envelopes are on disk (the
hook's in-flight file), so a killed hook reads the same part again rather than losing it. A file
that shrank, was replaced (another inode) or whose first bytes changed is read from the start:
what was read before is sent again with the same ids, and the store keeps one row per (session,
message id, request id).

`agentwatch import` builds its envelopes with the same functions (usage_envelope, cost_envelope).
Standard library only: this module is on the hook's path.
"""

from __future__ import annotations

import os
import time

from agentwatch import config
from agentwatch.contract import (
    COST_STATE_EVENT,
    COST_STATE_KIND,
    SCHEMA_VERSION,
    USAGE_EVENT,
    USAGE_EVENTS,
    USAGE_KIND,
    USAGE_SOURCE,
    identify,
    sha1_digest,
    stable_event_id,
    usage_subject,
)
from agentwatch.emitter.transcripts import (
    CostState,
    Reading,
    Usage,
    epoch_ms,
    iso_ms,
    read_head,
    read_transcript,
)
from agentwatch.harnesses import CLAUDE_CODE, CODEX, GEMINI_CLI

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Mapping
    from typing import Any

    Json = dict[str, Any]

# API messages per hook run at most: each is a message on the bus the hook waits for.
MAX_MESSAGES = 1000
OFFSETS_DIR = "transcripts"
HEAD_BYTES = 4096
PRUNE_AFTER_S = 30 * 86400
_SAFE = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-")


def _sha1_hex(data: bytes) -> str:
    return sha1_digest(data).hex()


# --- where each transcript was read up to ---------------------------------------------------------


class Resume:
    """Where to start reading one transcript, and what to remember once it was read."""

    __slots__ = ("head", "inode", "path", "start")

    def __init__(self, path: str, start: int, inode: int, head: bytes) -> None:
        self.path = path
        self.start = start
        self.inode = inode
        self.head = head  # the file's first HEAD_BYTES (fewer if it is shorter) when read


class Offsets:
    """One file per transcript in `<data dir>/transcripts/`, named `<file stem>-<12 hex of the
    SHA-1 of its path>`, holding one line: `v1 OFFSET INODE HEADLEN HEADSHA1 PATH`. OFFSET is the
    end of the last complete line read; HEADSHA1 the SHA-1 of the file's first HEADLEN bytes
    (at most 4096) then, which tells a rewritten file from a grown one. Written atomically
    (a temporary file, then rename); files untouched for 30 days are removed at a SessionEnd."""

    def __init__(self, data_dir: str) -> None:
        self.directory = os.path.join(data_dir, OFFSETS_DIR)

    def state_path(self, path: str) -> str:
        stem = os.path.basename(path)
        stem = stem[:-6] if stem.endswith(".jsonl") else stem
        stem = "".join(ch if ch in _SAFE else "_" for ch in stem[:64])
        return os.path.join(self.directory, f"{stem}-{_sha1_hex(path.encode('utf-8', 'replace'))[:12]}")

    def resume(self, path: str) -> Resume | None:
        """Where to start reading `path`; None when it is missing or has nothing new."""
        try:
            st = os.stat(path)
        except OSError:
            return None
        offset, inode, head_len, head_hash = self._saved(path)
        if inode == st.st_ino and offset == st.st_size:
            return None  # nothing new (the common case for a subagent that did not run)
        head = read_head(path, HEAD_BYTES)
        if inode != st.st_ino or offset > st.st_size or _sha1_hex(head[:head_len]) != head_hash:
            offset = 0  # new, replaced, shortened or rewritten: from the start
        return Resume(path, offset, st.st_ino, head)

    def _saved(self, path: str) -> tuple[int, int, int, str]:
        try:
            with open(self.state_path(path), "rb") as f:
                fields = f.read(8192).decode("utf-8", "replace").split(" ", 5)
            if fields[0] == "v1":
                return int(fields[1]), int(fields[2]), int(fields[3]), fields[4]
        except (OSError, ValueError, IndexError):
            pass
        return 0, -1, 0, ""

    def save(self, resume: Resume, offset: int) -> None:
        """Remember that `resume.path` was read up to `offset`; never raises."""
        head = resume.head[:offset]
        line = f"v1 {offset} {resume.inode} {len(head)} {_sha1_hex(head)} {resume.path}\n"
        target = self.state_path(resume.path)
        tmp = f"{target}.{os.getpid()}"
        try:
            try:
                fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            except FileNotFoundError:
                os.makedirs(self.directory, mode=0o700, exist_ok=True)
                fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            try:
                os.write(fd, line.encode("utf-8", "replace"))
            finally:
                os.close(fd)
            os.replace(tmp, target)
        except OSError:
            pass

    def prune(self, now: float | None = None) -> int:
        """Remove the files of transcripts untouched for PRUNE_AFTER_S; how many."""
        from agentwatch.emitter.sequence import remove_untouched

        return remove_untouched(self.directory, PRUNE_AFTER_S, now)


# --- whose transcript: the agent identity of each file ---------------------------------------------


class Source:
    """One transcript file and the agent whose usage it holds.

    `who`: agent, team, parent_agent, agent_id, agent_type, session_id, host and cwd, as the
    hook's events of that agent carry them. `subagent_id`/`subagent_type`: set for a subagent's
    (or teammate's) own transcript."""

    __slots__ = ("path", "subagent_id", "subagent_type", "who")

    def __init__(self, path: str, who: Json, subagent_id: str = "", subagent_type: str = "") -> None:
        self.path = path
        self.who = who
        self.subagent_id = subagent_id
        self.subagent_type = subagent_type


def subagents_dir(transcript: str) -> str:
    """`<session>/subagents` beside a session's `<session>.jsonl`; '' for another name."""
    return os.path.join(transcript[:-6], "subagents") if transcript.endswith(".jsonl") else ""


def subagent_source(path: str, context: Json, environ: Mapping[str, str]) -> Source:
    """The source of a subagent's `agent-<id>.jsonl`: its id from the name, its type from the
    `.meta.json` beside it, its name and parent as identify() gives them for its hook events."""
    agent_id = os.path.basename(path)[6:-6] if os.path.basename(path).startswith("agent-") else ""
    meta = _meta(path[:-6] + ".meta.json") if path.endswith(".jsonl") else {}
    agent_type = meta.get("agentType") if isinstance(meta.get("agentType"), str) else ""
    payload = {"session_id": context.get("session_id", ""), "agent_id": agent_id, "agent_type": agent_type}
    agent, _team, parent = identify(payload, environ)
    who = dict(context, agent=agent, parent_agent=parent, agent_id=agent_id, agent_type=agent_type)
    return Source(path, who, agent_id, str(agent_type))


def _meta(path: str) -> Json:
    from agentwatch.jsonfast import JSONError, loads

    try:
        with open(path, "rb") as f:
            meta = loads(f.read(65536).decode("utf-8", "replace"))
    except (OSError, JSONError):
        return {}
    return meta if isinstance(meta, dict) else {}


def who_of(event: Json) -> Json:
    """The identity fields of a hook event's envelope."""
    keys = ("agent", "team", "parent_agent", "agent_id", "agent_type", "session_id", "host", "cwd",
            "person", "repo", "branch")  # fmt: skip
    return {k: event.get(k) or "" for k in keys}


def event_sources(event: Json, environ: Mapping[str, str]) -> list[tuple[str, Callable[[], Source]]]:
    """The transcripts a hook event points at (see the module's doc), the agent's own first: each
    path, and how to make its Source (a subagent's reads its .meta.json: only for a file that grew)."""
    data = event.get("data")
    data = data if isinstance(data, dict) else {}
    main = data.get("transcript_path")
    main = main if isinstance(main, str) else ""
    who = who_of(event)
    if who["agent_id"]:
        own = data.get("agent_transcript_path")
        if not isinstance(own, str) or not own:
            base = subagents_dir(main)
            own = os.path.join(base, f"agent-{who['agent_id']}.jsonl") if base else ""
        source = Source(own, who, who["agent_id"], who["agent_type"])
        return [(own, lambda: source)] if own else []
    if not main:
        return []
    found: list[tuple[str, Callable[[], Source]]] = [(main, lambda: Source(main, who))]
    base = subagents_dir(main)
    try:
        names = sorted(os.listdir(base)) if base else []
    except OSError:
        names = []
    context = {k: who[k] for k in ("team", "session_id", "host", "cwd")}
    for name in names:
        if name.startswith("agent-") and name.endswith(".jsonl"):
            path = os.path.join(base, name)
            found.append((path, lambda path=path: subagent_source(path, context, environ)))  # type: ignore[misc]
    return found


# --- envelopes ---------------------------------------------------------------------------------------


def _envelope(src: Source, session: str, timestamp: str, fallback_ms: int) -> Json:
    who = src.who
    if not epoch_ms(timestamp):  # a record without a time of its own: when it was read
        timestamp = iso_ms(fallback_ms or int(time.time() * 1000))
    return {
        "v": SCHEMA_VERSION,
        "id": "",
        "timestamp": timestamp,
        "event": USAGE_EVENT,
        "kind": USAGE_KIND,
        "agent": who["agent"] or "unknown",
        "team": who["team"],
        "direction": "",
        "peer": "",
        "text": "",
        "source": USAGE_SOURCE,
        "session_id": session or who["session_id"],
        "agent_id": who["agent_id"],
        "agent_type": who["agent_type"],
        "parent_agent": who["parent_agent"],
        "host": who["host"],
        "cwd": who["cwd"],
        "person": who.get("person", ""),
        "repo": who.get("repo", ""),
        "branch": who.get("branch", ""),
        "subagent_id": src.subagent_id,
        "subagent_type": src.subagent_type,
    }


def usage_envelope(rec: Usage, src: Source, fallback_ms: int = 0) -> tuple[str, Json]:
    """(subject, envelope) of one API message's usage. Its id depends only on what it says (the
    session, message, request and token counts), so a message read twice is sent with the same
    id and JetStream drops the repeat; a larger usage read later gets an id of its own."""
    env = _envelope(src, rec.session_id, rec.timestamp, fallback_ms)
    if not env["cwd"]:
        env["cwd"] = rec.cwd
    tokens = (rec.input, rec.output, rec.cache_read, rec.cache_write, rec.cache_5m, rec.cache_1h)
    key = f"usage|{env['session_id']}|{rec.message_id}|{rec.request_id}|{tokens}|{env['agent']}"
    env.update(
        id=stable_event_id(epoch_ms(env["timestamp"]), key),
        peer=rec.model,
        text=f"{rec.model}: {rec.input:,} in, {rec.output:,} out, {rec.cache_read:,} cache read, "
        f"{rec.cache_write:,} cache write",
        model=rec.model,
        message_id=rec.message_id,
        request_id=rec.request_id,
        input_tokens=rec.input,
        output_tokens=rec.output,
        cache_read_input_tokens=rec.cache_read,
        cache_creation_input_tokens=rec.cache_write,
        cache_creation_5m_input_tokens=rec.cache_5m,
        cache_creation_1h_input_tokens=rec.cache_1h,
        sidechain=rec.sidechain,
        speed=rec.speed,
        service_tier=rec.service_tier,
        stop_reason=rec.stop_reason,
        harness=rec.harness,
        reasoning_tokens=rec.reasoning,
        data={},
    )
    return usage_subject(env["agent"]), env


def cost_envelope(cost: CostState, src: Source, fallback_ms: int = 0) -> tuple[str, Json]:
    """(subject, envelope) of one cost-state record: Claude Code's own total for the session,
    `total_cost_usd`, and `data` = {totalCostUSD, modelUsage} as Claude Code wrote them."""
    env = _envelope(src, cost.session_id, cost.timestamp, fallback_ms)
    tokens = cost.tokens()
    key = f"cost|{env['session_id']}|{cost.total_cost_usd!r}|{sorted(tokens.items())}"
    env.update(
        id=stable_event_id(epoch_ms(env["timestamp"]), key),
        event=COST_STATE_EVENT,
        kind=COST_STATE_KIND,
        text=f"Claude Code's total for the session: ${cost.total_cost_usd:.4f}",
        total_cost_usd=cost.total_cost_usd,
        data={"totalCostUSD": cost.total_cost_usd, "modelUsage": cost.model_usage},
    )
    return usage_subject(env["agent"]), env


def reading_envelopes(reading: Reading, src: Source, fallback_ms: int = 0) -> list[tuple[str, Json]]:
    """The envelopes of what one read found: its API messages, then its last cost-state record
    (main transcripts only: a subagent's own cost is in its session's)."""
    out = [usage_envelope(rec, src, fallback_ms) for rec in reading.usage.values()]
    if reading.cost_state is not None and not src.subagent_id:
        out.append(cost_envelope(reading.cost_state, src, fallback_ms))
    return out


# --- the hook's part ---------------------------------------------------------------------------------


def read_log(harness: str, src: Source, start: int, until: float, budget: int, event: Json) -> Reading:
    """What is new in `src`'s file from `start`, read as its harness writes it."""
    if harness == CODEX:
        from agentwatch.emitter.harness_logs import read_rollout

        return read_rollout(src.path, start, until, max_messages=budget, model=str(event.get("model") or ""))
    if harness == GEMINI_CLI:
        from agentwatch.emitter.harness_logs import read_chat

        return read_chat(src.path, start, until, max_messages=budget)
    return read_transcript(
        src.path,
        start,
        until,
        max_messages=budget,
        subagent_id=src.subagent_id,
        fallback_timestamp=str(event.get("timestamp", "")),
    )


def other_sources(event: Json, environ: Mapping[str, str]) -> list[tuple[str, Callable[[], Source | None]]]:
    """The logs a Codex or Gemini CLI event points at, the agent's own first. Codex: a sub-agent's
    event (SubagentStop) its own rollout (`agent_transcript_path`), the main agent's the session's,
    then the rollouts of the helpers Codex starts without a hook event (the approval reviewer:
    harness_logs.unannounced_rollouts). Gemini: the session's chat, then each sub-agent's chat
    beside it (chats/<session>/), named as the hook's events name that sub-agent
    (harness_logs.chat_subagent; not read before the main chat says which it is)."""
    data = event.get("data")
    data = data if isinstance(data, dict) else {}
    who = who_of(event)
    main = data.get("transcript_path")
    main = main if isinstance(main, str) else ""
    context = {k: who[k] for k in ("team", "session_id", "host", "cwd", "person", "repo", "branch")}

    def helper(path: str, named: tuple[str, str]) -> Source:
        payload = {"session_id": who["session_id"], "agent_id": named[0], "agent_type": named[1]}
        agent, _team, parent = identify(payload, environ)
        sub = dict(context, agent=agent, parent_agent=parent, agent_id=named[0], agent_type=named[1])
        return Source(path, sub, named[0], named[1])

    if event.get("harness") == CODEX:
        own = data.get("agent_transcript_path") if who["agent_id"] else main
        own = own if isinstance(own, str) else ""
        source = Source(own, who, who["agent_id"], who["agent_type"])
        codex: list[tuple[str, Callable[[], Source | None]]] = [(own, lambda: source)] if own else []
        if own and not who["agent_id"]:
            from agentwatch.emitter.harness_logs import rollout_agent, unannounced_rollouts

            for path, meta in unannounced_rollouts(own, who["session_id"]):
                named = rollout_agent(meta)
                if named is not None:
                    codex.append((path, lambda path=path, named=named: helper(path, named)))  # type: ignore[misc]
        return codex
    if who["agent_id"] or not main:
        return []
    from agentwatch.emitter.harness_logs import chat_subagent, chat_subagents

    found: list[tuple[str, Callable[[], Source | None]]] = [(main, lambda: Source(main, who))]

    def subagent(path: str) -> Source | None:
        named = chat_subagent(main, path, who["session_id"])
        return None if named is None else helper(path, named)

    for path in chat_subagents(main, who["session_id"]):
        found.append((path, lambda path=path: subagent(path)))  # type: ignore[misc]
    return found


def _nothing(keep: bool = True) -> None:
    """No offsets to remember."""


def hook_usage(
    event: Json, environ: Mapping[str, str], until: float
) -> tuple[list[tuple[str, Json]], Callable[[bool], None]]:
    """The usage envelopes a hook event brings (none unless it is one of USAGE_EVENTS), and the
    function that remembers how far each transcript was read: call it once they are on disk
    (True), or with False to rewind to where this run started (they were dropped)."""
    if event.get("event") not in USAGE_EVENTS or not config.usage_enabled(environ):
        return [], _nothing
    offsets = Offsets(config.data_dir(environ))
    out: list[tuple[str, Json]] = []
    done: list[tuple[Resume, int]] = []
    budget = MAX_MESSAGES
    fallback_ms = epoch_ms(str(event.get("timestamp", "")))
    harness = str(event.get("harness") or CLAUDE_CODE)
    sources = event_sources(event, environ) if harness == CLAUDE_CODE else other_sources(event, environ)
    for n, (path, make_source) in enumerate(sources):
        if n and (budget <= 0 or time.monotonic() >= until):
            break  # the rest next time
        resume = offsets.resume(path)
        if resume is None:
            continue
        src = make_source()
        if src is None:
            continue  # not to be read yet: what it is about is not known yet
        reading = read_log(harness, src, resume.start, until, budget, event)
        budget -= len(reading.usage)
        out.extend(reading_envelopes(reading, src, fallback_ms))
        done.append((resume, reading.offset))
    if event.get("event") == "SessionEnd":
        offsets.prune()

    def commit(keep: bool = True) -> None:
        for resume, offset in done:
            offsets.save(resume, offset if keep else resume.start)

    return out, commit
