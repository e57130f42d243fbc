"""Token usage in Claude Code transcripts: the part of a transcript file not read yet.

A transcript is JSON lines. What counts here:

- an `assistant` line: `message.id`, `message.model`, `message.usage` (input, output, cache read,
  cache creation and its 5-minute / 1-hour split), `requestId` (older versions) or `requestRef`
  (2.1.330), `timestamp`. One API response is written as several lines, one per content block,
  with the same message id: it counts once, with the line of the largest usage (the first line
  may carry a streaming placeholder). `<synthetic>` lines (API-error placeholders) cost nothing
  and are skipped. In a subagent's own transcript, a line that is not its own (not a sidechain
  line, or another agent's id) is a copy of its parent's message and is skipped;
- a `cost-state` line: Claude Code's own running total for the session (subagents included),
  rewritten as the session goes on: the last one wins.

Only lines that name one of these types at their top level are parsed; the rest (tool results,
attachments, request blobs: most of a transcript's bytes) are stepped over with `bytes.find`.
Reading stops at the end of a complete line: a line still being written is read next time.

Standard library only: the hook reads transcripts on its own path (agentwatch.emitter.usage).
"""

from __future__ import annotations

import os
import time

from agentwatch.jsonfast import JSONError, loads


def read_head(path: str, size: int) -> bytes:
    """The first `size` bytes of `path`; b"" when it cannot be read."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return b""
    try:
        return os.pread(fd, size, 0)
    except OSError:
        return b""
    finally:
        os.close(fd)


TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

SYNTHETIC_MODEL = "<synthetic>"
CHUNK_BYTES = 1 << 20
# Claude Code writes compact JSON; the spaced forms are what other writers (and tests) produce.
_MARKERS = (
    b'"type":"assistant"',
    b'"type": "assistant"',
    b'"type":"cost-state"',
    b'"type": "cost-state"',
)
_NO_LIMIT = float("inf")


class Usage:
    """The usage of one API message (the largest of its lines read so far)."""

    __slots__ = (
        "agent_id", "cache_1h", "cache_5m", "cache_read", "cache_write", "cwd", "harness", "input",
        "message_id", "model", "output", "reasoning", "request_id", "service_tier", "session_id",
        "sidechain", "speed", "stop_reason", "timestamp",
    )  # fmt: skip

    def __init__(self, line: dict[str, Any], message: dict[str, Any], usage: dict[str, Any]) -> None:
        self.harness = "claude-code"
        self.reasoning = 0  # Claude Code's transcripts do not say which output tokens were thinking
        self.message_id = _str(message.get("id")) or _str(line.get("uuid"))
        self.request_id = _str(line.get("requestId")) or _str(line.get("requestRef"))
        self.model = _str(message.get("model"))
        self.timestamp = _str(line.get("timestamp"))
        self.session_id = _str(line.get("sessionId"))
        self.agent_id = _str(line.get("agentId"))
        self.cwd = _str(line.get("cwd"))
        self.sidechain = line.get("isSidechain") is True
        self.input = _int(usage.get("input_tokens"))
        self.output = _int(usage.get("output_tokens"))
        self.cache_read = _int(usage.get("cache_read_input_tokens"))
        self.cache_write = _int(usage.get("cache_creation_input_tokens"))
        split = usage.get("cache_creation")
        if isinstance(split, dict) and (
            "ephemeral_1h_input_tokens" in split or "ephemeral_5m_input_tokens" in split
        ):
            self.cache_1h = _int(split.get("ephemeral_1h_input_tokens"))
            self.cache_5m = _int(split.get("ephemeral_5m_input_tokens"))
        else:  # no split reported (older versions): 5-minute writes, the API's default
            self.cache_1h = 0
            self.cache_5m = self.cache_write
        self.speed = _str(usage.get("speed"))
        self.service_tier = _str(usage.get("service_tier"))
        self.stop_reason = _str(message.get("stop_reason"))  # end_turn, tool_use, max_tokens, ...

    @classmethod
    def of(cls, harness: str, message_id: str, request_id: str, model: str, timestamp: str,
           session_id: str, tokens: tuple[int, int, int, int], agent_id: str = "") -> Usage:  # fmt: skip
        """An API message of another harness's log: `tokens` = (input without the cached part,
        cached input, output with reasoning, reasoning), as harnesses.codex_tokens gives them."""
        rec = cls({}, {}, {})
        rec.harness, rec.message_id, rec.request_id, rec.model = harness, message_id, request_id, model
        rec.timestamp, rec.session_id, rec.agent_id = timestamp, session_id, agent_id
        rec.input, rec.cache_read, rec.output, rec.reasoning = tokens
        return rec

    @property
    def total(self) -> int:
        return self.input + self.output + self.cache_read + self.cache_write


class CostState:
    """One `cost-state` record: Claude Code's running total for its session."""

    __slots__ = ("model_usage", "session_id", "timestamp", "total_cost_usd")

    def __init__(self, line: dict[str, Any], timestamp: str) -> None:
        """`timestamp`: the time of the line before, for a record that does not say its own (its
        session's startTime plus its totalDuration)."""
        start, duration = line.get("startTime"), line.get("totalDuration")
        if type(start) is int and start > 0 and type(duration) is int and duration >= 0:
            timestamp = iso_ms(start + duration)
        self.session_id = _str(line.get("sessionId"))
        cost = line.get("totalCostUSD")
        self.total_cost_usd = float(cost) if isinstance(cost, (int, float)) and cost is not True else 0.0
        usage = line.get("modelUsage")
        self.model_usage: dict[str, Any] = usage if isinstance(usage, dict) else {}
        self.timestamp = timestamp

    def tokens(self) -> dict[str, int]:
        """Token counts summed over the models, by the names of the usage envelope's fields."""
        out = {"input": 0, "output": 0, "cache_read": 0, "cache_5m": 0, "cache_1h": 0}
        for usage in self.model_usage.values():
            if not isinstance(usage, dict):
                continue
            out["input"] += _int(usage.get("inputTokens"))
            out["output"] += _int(usage.get("outputTokens"))
            out["cache_read"] += _int(usage.get("cacheReadInputTokens"))
            out["cache_5m"] += _int(usage.get("cacheCreationEphemeral5mInputTokens"))
            out["cache_1h"] += _int(usage.get("cacheCreationEphemeral1hInputTokens"))
        return out


class Reading:
    """What one read of a transcript found, and where it stopped."""

    __slots__ = ("cost_state", "cost_states", "done", "end", "lines", "offset", "start", "usage")

    def __init__(self, start: int) -> None:
        self.start = start
        self.offset = start  # the end of the last complete line taken in
        self.end = start  # the file's size when read
        self.done = False  # everything up to the file's end was taken in
        self.usage: dict[str, Usage] = {}  # by message id, in the order first seen
        self.cost_state: CostState | None = None  # the last cost-state record read
        self.cost_states = 0
        self.lines = 0  # lines parsed (the others were stepped over)


def _str(value: object) -> str:
    return value if isinstance(value, str) else ""


def _int(value: object) -> int:
    return value if type(value) is int and value > 0 else 0


def read_transcript(
    path: str,
    start: int = 0,
    until: float = _NO_LIMIT,
    *,
    max_messages: int = 0,
    subagent_id: str = "",
    fallback_timestamp: str = "",
) -> Reading:
    """Read `path` from byte `start` to its last complete line, or until time.monotonic() passes
    `until` (checked after each chunk: at least one chunk is read), or until `max_messages` API
    messages (0: no cap) were found. `subagent_id`: the file is that subagent's own transcript.

    A file that cannot be opened reads as nothing (reading.end == start)."""
    reading = Reading(start)
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return reading
    try:
        size = os.fstat(fd).st_size
        reading.end = size
        pos = start
        carry = b""
        last_ts = [fallback_timestamp]
        while pos < size:
            chunk = os.pread(fd, min(CHUNK_BYTES, size - pos), pos)
            if not chunk:
                break
            pos += len(chunk)
            data = carry + chunk if carry else chunk
            cut = data.rfind(b"\n") + 1
            if cut == 0:  # one long line, not complete yet in what was read
                carry = data
                continue
            carry = data[cut:]
            taken = _scan(data, cut, reading, subagent_id, max_messages, last_ts)
            reading.offset = pos - len(data) + taken
            if taken < cut or time.monotonic() >= until:
                break
        reading.done = reading.offset >= size
    finally:
        os.close(fd)
    return reading


def _scan(
    data: bytes, cut: int, reading: Reading, subagent_id: str, max_messages: int, last_ts: list[str]
) -> int:
    """Take in the lines of data[:cut] that carry a marker; returns where it stopped (cut when it
    took everything, the start of a line when the message cap stopped it)."""
    nexts = [data.find(m, 0, cut) for m in _MARKERS]
    i = 0
    while True:
        found = [n for n in nexts if n >= 0]
        if not found:
            return cut
        at = min(found)
        begin = data.rfind(b"\n", 0, at) + 1
        end = data.find(b"\n", at, cut)
        end = cut - 1 if end < 0 else end
        try:
            line = loads(data[begin:end].decode("utf-8", "replace"))
        except JSONError:
            line = None
        if isinstance(line, dict):
            reading.lines += 1
            kind = line.get("type")
            if kind == "assistant":
                if not _take_assistant(line, reading, subagent_id, max_messages, last_ts):
                    return begin
            elif kind == "cost-state":
                reading.cost_state = CostState(line, last_ts[0])
                reading.cost_states += 1
        i = end + 1
        for k, n in enumerate(nexts):
            if 0 <= n < i:
                nexts[k] = data.find(_MARKERS[k], i, cut)


def _take_assistant(
    line: dict[str, Any], reading: Reading, subagent_id: str, max_messages: int, last_ts: list[str]
) -> bool:
    """Count one assistant line; False when it is a new message past the cap (not taken)."""
    message = line.get("message")
    if not isinstance(message, dict):
        return True
    usage = message.get("usage")
    if not isinstance(usage, dict) or message.get("model") == SYNTHETIC_MODEL:
        return True
    if subagent_id:
        agent_id = _str(line.get("agentId"))
        if line.get("isSidechain") is False or (agent_id and agent_id != subagent_id):
            return True  # the parent's message, copied into the subagent's transcript
    record = Usage(line, message, usage)
    if not record.message_id:
        return True
    if record.timestamp:
        last_ts[0] = record.timestamp
    seen = reading.usage.get(record.message_id)
    if seen is None:
        if max_messages and len(reading.usage) >= max_messages:
            return False
        reading.usage[record.message_id] = record
    elif record.total >= seen.total:
        record.stop_reason = record.stop_reason or seen.stop_reason  # (a streamed line may lack it)
        reading.usage[record.message_id] = record
    return True


def iso_ms(ms: int) -> str:
    """Unix milliseconds as ISO-8601 UTC, the way Claude Code writes times."""
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(ms // 1000)) + f".{ms % 1000:03d}Z"


def epoch_ms(timestamp: str) -> int:
    """Unix milliseconds of an ISO-8601 UTC time as Claude Code writes it
    (`2026-11-22T11:01:33.424Z`); 0 when it is not one. No datetime, no re: this is the hook's."""
    try:
        year, month, day = int(timestamp[0:4]), int(timestamp[5:7]), int(timestamp[8:10])
        hour, minute, second = int(timestamp[11:13]), int(timestamp[14:16]), int(timestamp[17:19])
        frac = timestamp[19:].lstrip(".").rstrip("Z")
        millis = int((frac[:3] if frac[:3].isdigit() else "0").ljust(3, "0"))
    except ValueError:
        return 0
    # Days from the civil date (Howard Hinnant's algorithm).
    y = year - (month <= 2)
    era = y // 400
    yoe = y - era * 400
    doy = (153 * (month + (-3 if month > 2 else 9)) + 2) // 5 + day - 1
    doe = yoe * 365 + yoe // 4 - yoe // 100 + doy
    days = era * 146097 + doe - 719468
    return ((days * 24 + hour) * 60 + minute) * 60_000 + second * 1000 + millis
