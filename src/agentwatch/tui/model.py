"""What the dashboard shows of events: the feed, its lines, and an agent's calls and conversation
(the roster is tui/roster.py's, the team tui/team.py's).

Plain Python, no Textual: the live source and the history query feed envelopes in, widgets read
snapshots out. Every buffer is bounded, so a flood costs memory once, not per event.
"""

from __future__ import annotations

import contextlib
import itertools
import time
from collections import deque
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, NamedTuple

import orjson

from agentwatch.agents import CALL_DENIED, CALL_ENDS, CALL_ERROR, CALL_OK, CALL_RUNNING, shown_outcome
from agentwatch.format import utc_seconds
from agentwatch.harnesses import CLAUDE_CODE, QUIET_EVENTS, harness_named

SPARK_BUCKETS = 30
SPARK_SECONDS = 10.0
FEED_MAX = 5000
# Per agent, for its detail view: the newest events (tool calls, prompts and errors come from them),
# headlines only (the payload of an older event is fetched from the store when opened).
TIMELINE_MAX = 200
_HEADLINE_KEYS = ("id", "timestamp", "event", "kind", "agent", "team", "peer", "session_id", "host",
                  "parent_agent", "agent_type", "tool_name", "tool_use_id", "text", "redacted",
                  "truncated", "duration_ms", "seq", "harness", "harness_event", "person", "repo",
                  "branch")  # fmt: skip
_PLAIN = frozenset({str, int, float, bool})
ERROR_KINDS = frozenset({"tool_error", "failure", "permission_denied"})
CONVERSATION_KINDS = frozenset({"prompt", "response", "failure"})


def headline_of(env: Mapping[str, Any]) -> dict[str, Any]:
    """The headline fields, as plain values (a dict of those is not tracked by the collector).
    Made for every live event: one comprehension, 4.5x faster than a loop of isinstance checks."""
    get = env.get
    return {
        key: value if type(value) in _PLAIN else str(value)
        for key in _HEADLINE_KEYS
        if (value := get(key)) is not None
    }


def envelope_time(env: Mapping[str, Any]) -> float:
    """The envelope's timestamp as Unix seconds (now, when it has none or a bad one)."""
    at = utc_seconds(env.get("timestamp"))
    return time.time() if at is None else at


class FeedLine(NamedTuple):
    """One event as the feed and the timelines show it (a tuple: cheap to make, small to hold)."""

    at: float
    agent: str
    event: str
    kind: str
    tool: str
    text: str
    envelope: Mapping[str, Any]
    # The envelope's JSON as it came off the bus: `envelope` is then only its headline.
    raw: bytes | None = None

    @classmethod
    def of(cls, env: Mapping[str, Any], raw: bytes | None = None) -> FeedLine:
        """A line for `env`; given the `raw` JSON it was decoded from, the line keeps the raw bytes
        and a headline of plain values instead of the decoded payload. Neither is tracked by the
        garbage collector, which otherwise walks every payload object the feed holds: at 2,000
        events/s its full collections were the dashboard's longest pauses."""
        return cls(
            at=envelope_time(env),
            agent=str(env.get("agent", "")),
            event=str(env.get("event", "")),
            kind=str(env.get("kind", "")),
            tool=str(env.get("tool_name", "")),
            text=str(env.get("text", "")),
            envelope=headline_of(env) if raw is not None else env,
            raw=raw,
        )

    def headline(self) -> FeedLine:
        """The same line without the payload: what a long-lived per-agent buffer keeps."""
        slim = self.envelope if self.raw is not None else headline_of(self.envelope)
        return FeedLine(self.at, self.agent, self.event, self.kind, self.tool, self.text, slim)

    def full(self) -> dict[str, Any]:
        """The whole envelope, payload included when this line has it."""
        if self.raw is not None:
            with contextlib.suppress(ValueError):
                env = orjson.loads(self.raw)
                if isinstance(env, dict):
                    return env
        return dict(self.envelope)

    @property
    def tool_use_id(self) -> str:
        return str(self.envelope.get("tool_use_id", "") or "")

    @property
    def duration_ms(self) -> int | None:
        """Claude Code's own time for a tool call (on its PostToolUse / PostToolUseFailure), the
        envelope's column or, from an older hook, the payload's; None when it did not say."""
        value = self.envelope.get("duration_ms")
        if value is None:
            data = self.envelope.get("data")
            value = data.get("duration_ms") if isinstance(data, Mapping) else None
        return value if type(value) is int else None


# Events that say how the work is kept, not what is done: folded out of the feed unless asked for
# (or named by `event:`).
BOOKKEEPING = frozenset(
    {"PostToolBatch", "InstructionsLoaded", "CwdChanged", "FileChanged", "ConfigChange", "Setup"}
)


@dataclass(frozen=True)
class FeedFilter:
    """What the feed shows: `agent:`, `event:` (an event or its kind, the normalised name or the
    harness's own), `tool:`, `harness:` (claude, codex, gemini), `person:`, `repo:`, `branch:` (a
    part of the session's person, repository or branch, case aside: `repo:api`), and words of the
    text. `agent:`, `person:`, `repo:` and `branch:` narrow the roster too. The quiet
    events (harnesses.QUIET_EVENTS: a model request's start, a streamed chunk, ...) only when
    `event:` names them: they are in the store, not in a person's way."""

    agent: str = ""
    event: str = ""
    tool: str = ""
    text: str = ""
    harness: str = ""
    person: str = ""
    repo: str = ""
    branch: str = ""
    bookkeeping: bool = False  # bookkeeping events shown

    @classmethod
    def parse(cls, value: str, bookkeeping: bool = False) -> FeedFilter:
        """`agent:NAME tool:NAME event:KIND harness:NAME person:P repo:R branch:B` and the other
        words as text."""
        parts: dict[str, str] = dict.fromkeys(
            ("agent", "tool", "event", "harness", "person", "repo", "branch"), ""
        )
        words = []
        for word in value.split():
            key, sep, found = word.partition(":")
            if sep and key in parts:
                parts[key] = found.lower() if key in OWNER_KEYS else found
            else:
                words.append(word)
        return cls(**parts, text=" ".join(words), bookkeeping=bookkeeping)

    def matches(self, line: FeedLine) -> bool:
        own = str(line.envelope.get("harness_event") or line.event)
        if line.event in QUIET_EVENTS and self.event not in (line.event, line.kind, own):
            return False
        return (
            (self.bookkeeping or line.event not in BOOKKEEPING or self.event in (line.event, own))
            and (not self.agent or line.agent == self.agent)
            and (not self.event or self.event in (line.event, line.kind, own))
            and (not self.tool or line.tool == self.tool)
            and (not self.harness or harness_of(line) == (harness_named(self.harness) or self.harness))
            and (not self.text or self.text.lower() in f"{line.agent} {line.event} {line.text}".lower())
            and (not (self.person or self.repo or self.branch) or owned(self.owner, line.envelope))
        )

    @property
    def owner(self) -> tuple[str, str, str]:
        """The parts of a person, repository and branch asked for (lower case; '' for any)."""
        return self.person, self.repo, self.branch


# The filter's words that look in whose an event is (emitter/attribution.py's fields).
OWNER_KEYS = ("person", "repo", "branch")


def owned(wanted: tuple[str, str, str], have: Mapping[str, Any]) -> bool:
    """Whether `have` (an envelope, or an agent's fields) has each asked part (lower case) in its
    person, repository and branch."""
    return all(
        not part or part in str(have.get(key) or "").lower()
        for part, key in zip(wanted, OWNER_KEYS, strict=True)
    )


def harness_of(line: FeedLine) -> str:
    """Who sent the line's event (an envelope from before harnesses were named: Claude Code)."""
    return str(line.envelope.get("harness") or CLAUDE_CODE)


class Feed:
    """The most recent events, newest last, at most `maxlen` of them.

    The lines matching the filter last asked for are kept, each with its number (the count of
    lines added before it): asked again with the same filter, only the lines added since are
    matched, and those that left the feed dropped. Under 2,000 events/s the dashboard asks at every
    repaint; matching the whole feed each time was the largest part of a repaint's own code."""

    def __init__(self, maxlen: int = FEED_MAX) -> None:
        self.maxlen = maxlen
        self._lines: deque[FeedLine] = deque(maxlen=maxlen)
        self.total = 0
        self._shown_filter: FeedFilter | None = None
        self._shown: deque[tuple[int, FeedLine]] = deque()
        self._shown_upto = 0  # lines added when the shown lines were last brought up to date

    def __len__(self) -> int:
        return len(self._lines)

    def add(self, env: Mapping[str, Any] | FeedLine) -> FeedLine:
        line = env if isinstance(env, FeedLine) else FeedLine.of(env)
        self._lines.append(line)
        self.total += 1
        return line

    def lines(self, flt: FeedFilter | None = None, last: int | None = None) -> list[FeedLine]:
        """The matching lines, oldest first; the newest `last` of them when given."""
        out = list(self._lines) if flt is None else [line for _, line in self._matching(flt)]
        return out[-last:] if last else out

    def _matching(self, flt: FeedFilter) -> deque[tuple[int, FeedLine]]:
        new = self.total - self._shown_upto
        if flt != self._shown_filter or new > len(self._lines):
            self._shown_filter, self._shown = flt, deque()
            new = len(self._lines)
        shown, first = self._shown, self.total - len(self._lines)
        if new:
            added = list(itertools.islice(reversed(self._lines), new))
            for number, line in enumerate(reversed(added), start=self.total - new):
                if flt.matches(line):
                    shown.append((number, line))
        self._shown_upto = self.total
        while shown and shown[0][0] < first:
            shown.popleft()
        return shown


SPARK_CHARS = " ▁▂▃▄▅▆▇█"


def sparkline(values: Iterable[int]) -> str:
    vals = list(values)
    top = max(vals) if vals else 0
    if top <= 0:
        return SPARK_CHARS[0] * len(vals)
    return "".join(SPARK_CHARS[min(8, (v * 8 + top - 1) // top)] for v in vals)


# --- an agent's detail: its tool calls, conversation and errors, from its timeline ------------

# A call's status as the agent's screen says it (agents.CALL_OUTCOMES, agents.shown_outcome).
RUNNING, OK, FAILED_CALL, DENIED = map(shown_outcome, (CALL_RUNNING, CALL_OK, CALL_ERROR, CALL_DENIED))


@dataclass
class ToolCall:
    tool: str
    text: str
    tool_use_id: str
    start: float
    end: float | None = None
    status: str = RUNNING
    error: str = ""
    # Claude Code's own duration of the call, when its result carried one: preferred to the time
    # between the hook events, which includes the hooks' own start-up.
    reported_ms: int | None = None

    def duration(self, now: float) -> float:
        if self.reported_ms is not None:
            return self.reported_ms / 1000.0
        return max(0.0, (self.end if self.end is not None else now) - self.start)


def tool_calls(lines: Iterable[FeedLine]) -> list[ToolCall]:
    """PreToolUse paired with its PostToolUse / PostToolUseFailure / PermissionDenied, oldest first.

    A call whose end is not in `lines` stays "running"; an end whose start is not there is left out.
    """
    calls: list[ToolCall] = []
    open_calls: dict[str, ToolCall] = {}
    for line in lines:
        if line.kind == "message":
            continue
        if line.event == "PreToolUse":
            call = ToolCall(tool=line.tool, text=line.text, tool_use_id=line.tool_use_id, start=line.at)
            calls.append(call)
            if call.tool_use_id:
                open_calls[call.tool_use_id] = call
        elif (outcome := CALL_ENDS.get(line.event)) is not None:
            started = open_calls.pop(line.tool_use_id, None) if line.tool_use_id else None
            if started is None:
                continue
            started.end = max(line.at, started.start)
            started.reported_ms = line.duration_ms
            started.status = shown_outcome(outcome)
            if outcome != CALL_OK:
                started.error = line.text
    return calls


def conversation(lines: Iterable[FeedLine]) -> list[FeedLine]:
    """Prompts, responses and failed turns, oldest first."""
    return [line for line in lines if line.kind in CONVERSATION_KINDS]


def errors(lines: Iterable[FeedLine]) -> list[FeedLine]:
    """Failed tool calls, failed turns and denied permissions, oldest first."""
    return [line for line in lines if line.kind in ERROR_KINDS]


def counted(n: int, noun: str) -> str:
    """'1 call', '2 calls': a count and its noun (given singular), as a person writes them."""
    return f"{n:,} {noun if n == 1 else noun + 's'}"
