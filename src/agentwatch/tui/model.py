"""What the dashboard shows, derived from envelopes: the roster of agents and the event feed.

Plain Python, no Textual: the live source and the history query feed envelopes in, widgets read
snapshots out. Every buffer is bounded, so a flood costs memory once, not per event.
"""

from __future__ import annotations

import contextlib
import time
from collections import deque
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, NamedTuple

import orjson

# Agent states, in the order a person scans for trouble first.
FAILED, WAITING, WORKING, THINKING, IDLE, STOPPED = (
    "failed",
    "waiting",
    "working",
    "thinking",
    "idle",
    "stopped",
)
STATE_ORDER = {FAILED: 0, WAITING: 1, WORKING: 2, THINKING: 3, IDLE: 4, STOPPED: 5}
SPARK_BUCKETS = 30
SPARK_SECONDS = 10.0
FEED_MAX = 5000
# Per agent, for its detail view: the newest events (tool calls, prompts and errors come from them),
# headlines only (the payload of an older event is fetched from the store when opened).
TIMELINE_MAX = 200
# Agents kept at most: a long run spawns subagent after subagent. The longest-finished go first.
ROSTER_MAX = 300
_HEADLINE_KEYS = ("id", "timestamp", "event", "kind", "agent", "team", "peer", "session_id", "tool_name",
                  "tool_use_id", "text", "redacted", "truncated", "duration_ms", "seq")  # fmt: skip
EDGES_MAX = 2000
TASKS_MAX = 2000
_ERROR_EVENTS = frozenset({"PostToolUseFailure", "StopFailure"})
ERROR_KINDS = frozenset({"tool_error", "failure", "permission_denied"})
CONVERSATION_KINDS = frozenset({"prompt", "response", "failure"})


def _headline(env: Mapping[str, Any]) -> dict[str, Any]:
    """The headline fields, as plain values (a dict of those is not tracked by the collector)."""
    out: dict[str, Any] = {}
    for key in _HEADLINE_KEYS:
        value = env.get(key)
        if value is not None:
            out[key] = value if isinstance(value, str | int | float | bool) else str(value)
    return out


def envelope_time(env: Mapping[str, Any]) -> float:
    """The envelope's timestamp as Unix seconds (now, when it has none or a bad one)."""
    stamp = env.get("timestamp")
    if isinstance(stamp, str) and stamp:
        try:
            return datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()
        except ValueError:
            pass
    return time.time()


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
            envelope=_headline(env) if raw is not None else env,
            raw=raw,
        )

    def headline(self) -> FeedLine:
        """The same line without the payload: what a long-lived per-agent buffer keeps."""
        slim = self.envelope if self.raw is not None else _headline(self.envelope)
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


@dataclass
class Agent:
    """One agent as the roster shows it."""

    name: str
    team: str = ""
    parent: str = ""
    agent_type: str = ""
    session_id: str = ""
    host: str = ""
    # A teammate (not a one-off subagent): it went idle as one, or it sent a message.
    teammate: bool = False
    state: str = THINKING
    tool: str = ""
    tool_use_id: str = ""
    tool_since: float | None = None
    last_seen: float = 0.0
    events: int = 0
    tool_calls: int = 0
    errors: int = 0
    messages: int = 0
    activity: deque[int] = field(default_factory=lambda: deque([0] * SPARK_BUCKETS, maxlen=SPARK_BUCKETS))
    timeline: deque[FeedLine] = field(default_factory=lambda: deque(maxlen=TIMELINE_MAX))
    _bucket: int = 0

    def count_activity(self, at: float) -> None:
        bucket = int(at // SPARK_SECONDS)
        if self._bucket == 0:
            self._bucket = bucket
        if bucket > self._bucket:
            for _ in range(min(bucket - self._bucket, SPARK_BUCKETS)):
                self.activity.append(0)
            self._bucket = bucket
        if bucket == self._bucket:
            self.activity[-1] += 1

    def tool_running_for(self, now: float) -> float | None:
        return (
            None
            if self.tool_since is None or self.state not in (WORKING, WAITING)
            else max(0.0, now - self.tool_since)
        )


def _next_state(agent: Agent, env: Mapping[str, Any], at: float) -> None:
    event = env.get("event", "")
    raw = env.get("data")
    data: Mapping[str, Any] = raw if isinstance(raw, dict) else {}
    if event == "PreToolUse":
        agent.state, agent.tool = WORKING, str(env.get("tool_name", ""))
        agent.tool_use_id, agent.tool_since = str(env.get("tool_use_id", "")), at
        agent.tool_calls += 1
    elif event in ("PostToolUse", "PostToolUseFailure", "PermissionDenied"):
        if not agent.tool_use_id or env.get("tool_use_id") in ("", agent.tool_use_id):
            agent.state, agent.tool, agent.tool_use_id, agent.tool_since = THINKING, "", "", None
    elif event == "PermissionRequest" or (
        event == "Notification" and data.get("notification_type") == "permission_prompt"
    ):
        agent.state = WAITING
        if env.get("tool_name"):
            agent.tool = str(env["tool_name"])
            agent.tool_since = agent.tool_since or at
    elif event in ("Stop", "SubagentStop", "TeammateIdle"):
        agent.state, agent.tool, agent.tool_use_id, agent.tool_since = IDLE, "", "", None
    elif event == "StopFailure":
        agent.state, agent.tool, agent.tool_since = FAILED, "", None
    elif event == "SessionEnd":
        agent.state, agent.tool, agent.tool_since = STOPPED, "", None
    elif event in ("UserPromptSubmit", "SessionStart", "SubagentStart"):
        agent.state = THINKING


class Roster:
    """Every agent seen, kept current from envelopes (the history first, then live)."""

    def __init__(self, max_agents: int = ROSTER_MAX) -> None:
        self._agents: dict[str, Agent] = {}
        self.max_agents = max_agents
        self.evicted = 0

    def __len__(self) -> int:
        return len(self._agents)

    def _make_room(self) -> None:
        """Forget the agent that finished longest ago (or, if none has, the longest silent)."""
        done = [a for a in self._agents.values() if a.state in (IDLE, STOPPED, FAILED)]
        victim = min(done or self._agents.values(), key=lambda a: a.last_seen)
        del self._agents[victim.name]
        self.evicted += 1

    def get(self, name: str) -> Agent | None:
        return self._agents.get(name)

    def adopt(self, agent: Agent) -> None:
        """Add an agent known from elsewhere (the store's roster), making room if full."""
        if agent.name not in self._agents and len(self._agents) >= self.max_agents:
            self._make_room()
        self._agents[agent.name] = agent

    def apply(self, env: Mapping[str, Any], line: FeedLine | None = None) -> Agent | None:
        name = env.get("agent")
        if not isinstance(name, str) or not name:
            return None
        at = line.at if line is not None else envelope_time(env)
        agent = self._agents.get(name)
        if agent is None:
            if len(self._agents) >= self.max_agents:
                self._make_room()
            agent = self._agents[name] = Agent(name=name)
        for attr, key in (("team", "team"), ("parent", "parent_agent"), ("agent_type", "agent_type"),
                          ("session_id", "session_id"), ("host", "host")):  # fmt: skip
            value = env.get(key)
            if isinstance(value, str) and value:
                setattr(agent, attr, value)
        agent.events += 1
        agent.last_seen = max(agent.last_seen, at)
        agent.count_activity(at)
        agent.timeline.append((line if line is not None else FeedLine.of(env)).headline())
        if env.get("event") == "TeammateIdle":
            agent.teammate = True
        if env.get("kind") == "message":
            agent.messages += 1
            agent.teammate = True
            return agent
        if env.get("event") in _ERROR_EVENTS:
            agent.errors += 1
        _next_state(agent, env, at)
        return agent

    def apply_all(self, envelopes: Iterable[Mapping[str, Any]]) -> None:
        for env in envelopes:
            self.apply(env)

    def children(self, name: str) -> list[Agent]:
        """The subagents and teammates whose lead is `name`."""
        return sorted(
            (a for a in self._agents.values() if a.parent == name and a.name != name), key=lambda a: a.name
        )

    def agents(self) -> list[Agent]:
        return list(self._agents.values())

    def ordered(self, key: str = "state", text: str = "") -> list[tuple[int, Agent]]:
        """(depth, agent) rows: leads sorted by `key`, each followed by its subagents and teammates."""
        needle = text.lower()
        agents = [
            a for a in self._agents.values() if not needle or needle in f"{a.name} {a.team} {a.tool}".lower()
        ]
        sort_keys = {
            "state": lambda a: (STATE_ORDER.get(a.state, 9), -a.last_seen),
            "name": lambda a: (a.name,),
            "recent": lambda a: (-a.last_seen,),
            "errors": lambda a: (-a.errors, a.name),
        }
        sort = sort_keys.get(key, sort_keys["state"])
        names = {a.name for a in agents}
        children: dict[str, list[Agent]] = {}
        for a in agents:
            if a.parent and a.parent in names and a.parent != a.name:
                children.setdefault(a.parent, []).append(a)
        rows: list[tuple[int, Agent]] = []

        def visit(agent: Agent, depth: int, seen: set[str]) -> None:
            rows.append((depth, agent))
            seen.add(agent.name)
            for child in sorted(children.get(agent.name, []), key=sort):
                if child.name not in seen:
                    visit(child, depth + 1, seen)

        seen: set[str] = set()
        for top in sorted((a for a in agents if not (a.parent and a.parent in names)), key=sort):
            visit(top, 0, seen)
        for a in sorted(agents, key=sort):  # cycles: still shown once
            if a.name not in seen:
                visit(a, 0, seen)
        return rows


@dataclass(frozen=True)
class FeedFilter:
    agent: str = ""
    event: str = ""
    tool: str = ""
    text: str = ""

    def matches(self, line: FeedLine) -> bool:
        return (
            (not self.agent or line.agent == self.agent)
            and (not self.event or self.event in (line.event, line.kind))
            and (not self.tool or line.tool == self.tool)
            and (not self.text or self.text.lower() in f"{line.agent} {line.event} {line.text}".lower())
        )


class Feed:
    """The most recent events, newest last, at most `maxlen` of them."""

    def __init__(self, maxlen: int = FEED_MAX) -> None:
        self.maxlen = maxlen
        self._lines: deque[FeedLine] = deque(maxlen=maxlen)
        self.total = 0

    def __len__(self) -> int:
        return len(self._lines)

    def add(self, env: Mapping[str, Any] | FeedLine) -> FeedLine:
        line = env if isinstance(env, FeedLine) else FeedLine.of(env)
        self._lines.append(line)
        self.total += 1
        return line

    def lines(self, flt: FeedFilter | None = None, last: int | None = None) -> list[FeedLine]:
        """The matching lines, oldest first; the newest `last` of them when given."""
        selected: Iterator[FeedLine] | list[FeedLine] = iter(self._lines)
        if flt is not None:
            selected = [line for line in self._lines if flt.matches(line)]
        out = list(selected)
        return out[-last:] if last else out


SPARK_CHARS = " ▁▂▃▄▅▆▇█"


def sparkline(values: Iterable[int]) -> str:
    vals = list(values)
    top = max(vals) if vals else 0
    if top <= 0:
        return SPARK_CHARS[0] * len(vals)
    return "".join(SPARK_CHARS[min(8, (v * 8 + top - 1) // top)] for v in vals)


# --- an agent's detail: its tool calls, conversation and errors, from its timeline ------------

RUNNING, OK, FAILED_CALL, DENIED = "running", "ok", "failed", "denied"


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
        elif line.event in ("PostToolUse", "PostToolUseFailure", "PermissionDenied"):
            started = open_calls.pop(line.tool_use_id, None) if line.tool_use_id else None
            if started is None:
                continue
            started.end = max(line.at, started.start)
            started.reported_ms = line.duration_ms
            if line.event == "PostToolUse":
                started.status = OK
            else:
                started.status = FAILED_CALL if line.event == "PostToolUseFailure" else DENIED
                started.error = line.text
    return calls


def conversation(lines: Iterable[FeedLine]) -> list[FeedLine]:
    """Prompts, responses and failed turns, oldest first."""
    return [line for line in lines if line.kind in CONVERSATION_KINDS]


def errors(lines: Iterable[FeedLine]) -> list[FeedLine]:
    """Failed tool calls, failed turns and denied permissions, oldest first."""
    return [line for line in lines if line.kind in ERROR_KINDS]


# --- the team: who messaged whom, tasks, idle teammates --------------------------------------


@dataclass
class Edge:
    sender: str
    recipient: str
    count: int = 0
    summary: str = ""
    last_at: float = 0.0


@dataclass
class Task:
    task_id: str
    subject: str
    team: str
    created_by: str = ""
    created_at: float | None = None
    completed_by: str = ""
    completed_at: float | None = None

    @property
    def done(self) -> bool:
        return self.completed_at is not None


def _task_fields(env: Mapping[str, Any]) -> tuple[str, str]:
    """(task id, subject) from the payload, or from the columns a history row carries instead."""
    raw = env.get("data")
    data: Mapping[str, Any] = raw if isinstance(raw, dict) else {}
    task_id = data.get("task_id", env.get("task_id", ""))
    subject = data.get("task_subject", env.get("task_subject", ""))
    return str(task_id or ""), str(subject or "")


class Team:
    """SendMessage edges with counts and the latest summary, and the tasks created and completed."""

    def __init__(self, max_edges: int = EDGES_MAX, max_tasks: int = TASKS_MAX) -> None:
        self._edges: dict[tuple[str, str], Edge] = {}
        self._tasks: dict[tuple[str, str], Task] = {}
        self.max_edges, self.max_tasks = max_edges, max_tasks

    def apply(self, env: Mapping[str, Any]) -> None:
        kind = env.get("kind")
        if kind == "message":
            self._message(env)
        elif kind in ("task_created", "task_completed"):
            self._task(env, created=kind == "task_created")

    def _message(self, env: Mapping[str, Any]) -> None:
        sender, recipient = str(env.get("agent", "")), str(env.get("peer", ""))
        if not sender or not recipient:
            return
        at = envelope_time(env)
        edge = self._edges.get((sender, recipient))
        if edge is None:
            if len(self._edges) >= self.max_edges:
                oldest = min(self._edges.values(), key=lambda e: e.last_at)
                del self._edges[(oldest.sender, oldest.recipient)]
            edge = self._edges[(sender, recipient)] = Edge(sender, recipient)
        edge.count += 1
        if at >= edge.last_at:
            edge.last_at = at
            text = str(env.get("text", ""))
            prefix = f"→ {recipient}: "
            edge.summary = text[len(prefix) :] if text.startswith(prefix) else text

    def _task(self, env: Mapping[str, Any], *, created: bool) -> None:
        task_id, subject = _task_fields(env)
        if not task_id:
            return
        team = str(env.get("team", "") or env.get("session_id", ""))
        key = (team, task_id)
        task = self._tasks.get(key)
        if task is None:
            if len(self._tasks) >= self.max_tasks:
                del self._tasks[next(iter(self._tasks))]
            task = self._tasks[key] = Task(task_id=task_id, subject=subject, team=team)
        task.subject = task.subject or subject
        at, agent = envelope_time(env), str(env.get("agent", ""))
        if created:
            task.created_at, task.created_by = at, agent
        else:
            task.completed_at, task.completed_by = at, agent

    def edges(self) -> list[Edge]:
        """Busiest first."""
        return sorted(self._edges.values(), key=lambda e: (-e.count, -e.last_at, e.sender, e.recipient))

    def tasks(self) -> list[Task]:
        """Open tasks first, then by when they were created."""

        def order(t: Task) -> tuple[bool, float, str]:
            when = t.created_at if t.created_at is not None else (t.completed_at or 0.0)
            return (t.done, when, t.task_id)

        return sorted(self._tasks.values(), key=order)


def idle_teammates(roster: Roster) -> list[Agent]:
    """Teammates (not the lead, not one-off subagents) whose turn is over, idle longest first."""
    return sorted(
        (a for a in roster.agents() if a.state == IDLE and a.teammate and a.parent),
        key=lambda a: a.last_seen,
    )
