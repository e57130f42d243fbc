"""The watchdog's rules: plain Python over event envelopes (dicts), no bus and no store.

The rules and their typed limits (what the rules file sets) are consumers/rulebook.py's `Rules`;
this module evaluates them. `Engine.observe(envelope)` updates bounded state per agent, session
and host; `Engine.take(envelope, now)` does the same and returns the alerts the event completes
(EVENT_RULES); `Engine.tick(now)` evaluates every condition and returns the alert changes (firing
or resolved) since the last tick. An alert is identified by its rule and what it is about (a tool
call, an agent, a host); its id also carries the time the condition began, so the same condition
seen again after a restart has the same id, and the table and the bus keep one copy.

Each rule: firing once its condition holds, resolved when it clears, and not firing again for the
same subject within `cooldown_s` of a resolution (a flapping condition does not flood).
"""

from __future__ import annotations

import hashlib
import json
import math
from collections import deque
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import orjson

from agentwatch import agents
from agentwatch.agents import AgentKey
from agentwatch.consumers.rulebook import DEFAULTS, Rule, Rules, RulesError, default_file_text, parse_rules
from agentwatch.format import utc_seconds

# The rules themselves (their typed limits, the rules file) are in consumers/rulebook.py; these
# names stay importable from here.
__all__ = ["DEFAULTS", "Engine", "Json", "Rule", "Rules", "RulesError", "default_file_text", "parse_rules"]

Json = dict[str, Any]

# What the agent state machine (agentwatch.agents) says of an agent, as the rules read it: in a
# turn (working on it, thinking, asking), or resting (its turn over, failed, stopped).
RESTING = frozenset({agents.IDLE, agents.FAILED, agents.STOPPED})
# Rules whose condition an event completes: they fire on that event (Engine.take), not on a tick.
EVENT_RULES = ("loop", "failure_burst")
# The events whose payload (`data`) a rule reads: a call's input (loop), a task's id, a
# Notification's type, what a wait is for. The rules read every other event by its envelope's
# own fields, so the watchdog need not decode their payloads (the largest part of most bodies).
DATA_EVENTS = frozenset(
    {"PreToolUse", "TaskCreated", "TaskCompleted", "Notification"}
    | {event for event, _, state in agents.TRANSITIONS if state == agents.WAITING}
)


def iso(t: float) -> str:
    """Unix seconds as the bus carries an alert's times (`2026-11-24T09:00:00.123Z`)."""
    return wire_time(datetime.fromtimestamp(t, UTC))


def wire_time(when: datetime) -> str:
    """An aware datetime as the bus carries an alert's times."""
    return when.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


def parse_time(value: object) -> float:
    """An envelope's time as Unix seconds; 0.0 when it has none (format.utc_seconds). A float is
    seconds already (the watchdog's rebuild converts each time once, to sort by it) and is kept."""
    if type(value) is float:
        return value
    return utc_seconds(value) or 0.0


def _p95(values: Iterable[float]) -> float:
    ordered = sorted(values)
    if not ordered:
        return 0.0
    return ordered[min(len(ordered) - 1, math.ceil(0.95 * len(ordered)) - 1)]


@dataclass
class Open:
    """A condition that holds (or may soon): what an alert would say."""

    rule: str
    key: str
    since: float
    agent: str = ""
    team: str = ""
    session_id: str = ""
    host: str = ""
    summary: str = ""
    details: Json = field(default_factory=dict)


@dataclass
class AgentState:
    agent: str
    team: str
    session_id: str
    host: str
    key: AgentKey = ("", "", "")
    last: float = 0.0
    state: str = agents.INITIAL  # the state machine's (agentwatch.agents)
    working: bool = False
    idle_since: float = 0.0
    call: str = ""  # the last call's tool and input, as one string
    call_failed: bool = False
    repeats: int = 0
    repeat_since: float = 0.0
    results: deque[tuple[float, bool]] = field(default_factory=lambda: deque(maxlen=512))  # (when, failed)
    failures: int = 0  # of `results`, the failed ones (kept as results come and go: no scan per tick)
    calls: set[str] = field(default_factory=set)  # its open tool calls (tool_use_id)
    waiting: Open | None = None


def _fingerprint(value: object) -> str:
    """A tool call's input as one canonical string (keys sorted), to tell the same call again."""
    try:
        return orjson.dumps(value, option=_CANONICAL, default=str)[:4000].decode("utf-8", "replace")
    except TypeError:  # a value orjson cannot take (an integer beyond 64 bits): slower, same idea
        return json.dumps(value, sort_keys=True, default=str)[:4000]


_CANONICAL = orjson.OPT_SORT_KEYS | orjson.OPT_NON_STR_KEYS


def _subject(key: AgentKey) -> str:
    """An agent as it appears in an alert's key: host, scope and name."""
    return "|".join(key)


def alert_id(rule: str, key: str, since: float) -> str:
    return hashlib.sha1(f"{rule}|{key}|{since:.3f}".encode()).hexdigest()[:24]  # noqa: S324 - an id


class Engine:
    """Bounded state and the open alerts; the caller publishes what observe/tick return."""

    MAX_AGENTS = 10_000
    MAX_CALLS = 50_000
    SEEN = 200_000

    def __init__(self, rules: Rules = DEFAULTS) -> None:
        self.rules = rules
        self.agents: dict[AgentKey, AgentState] = {}
        self.calls: dict[str, tuple[float, str, AgentKey]] = {}  # tool_use_id -> (start, tool, agent key)
        self.durations: dict[str, deque[float]] = {}
        # (host, scope) -> open task ids: the agents' own key without the name. A lead's TaskCreated
        # and a teammate's TaskCompleted share their session whatever `team_name` each carries.
        self.tasks: dict[tuple[str, str], set[str]] = {}
        self.spool: dict[str, int] = {}  # host -> the spool backlog it reported last
        self.costs: list[tuple[str, str, float]] = []  # (scope, name, usd)
        self.firing: dict[str, Json] = {}  # alert key -> the alert as published
        self.resolved_at: dict[str, float] = {}  # alert key -> when it last resolved
        self._seen: set[str] = set()
        self._seen_order: deque[str] = deque()

    # -- input ---------------------------------------------------------------------------------

    def set_rules(self, rules: Rules) -> None:
        self.rules = rules

    def restore(self, alerts: Iterable[Mapping[str, Any]]) -> None:
        """Alerts that were firing when the service stopped (from the store): they are not fired
        again; the next tick resolves the ones whose condition is gone. A time the store gave as
        a datetime is written once as the bus carries it, so an alert resolves as it fired."""
        for alert in alerts:
            key = str(alert.get("key") or alert.get("details", {}).get("key", ""))
            if key:
                times = {f: wire_time(t) for f in ("since", "at") if isinstance(t := alert.get(f), datetime)}
                self.firing[key] = {**alert, **times}

    def observe(self, env: Mapping[str, Any], now: float = 0.0) -> None:
        """Take one event envelope (`tick` then says what changed)."""
        self._observe(env, now)

    def _observe(self, env: Mapping[str, Any], now: float) -> AgentState | None:
        """`observe`, returning the state of the agent the event is about (None: an event seen
        before, or one about no agent)."""
        event_id = str(env.get("id", ""))
        if event_id:
            if event_id in self._seen:
                return None
            self._seen.add(event_id)
            self._seen_order.append(event_id)
            if len(self._seen_order) > self.SEEN:
                self._seen.discard(self._seen_order.popleft())
        t = parse_time(env.get("timestamp")) or now
        event = str(env.get("event", ""))
        host = str(env.get("host", ""))
        if host:
            self.spool[host] = int(env.get("spool_bytes") or 0)
        if event in ("Usage", "CostState") or agents.is_invalid_input(env):
            return None  # no agent's doing: invalid hook input is no agent (agents.INVALID_INPUT_EVENTS)
        state = self._agent(env, t)
        data = env.get("data")
        if not isinstance(data, dict):
            data = {}
        if event in ("TaskCreated", "TaskCompleted"):
            self._tasks(event, state, data)
        self._calls(event, state, env, data, t)
        state.last = max(state.last, t)
        new = agents.state_after(event, agents.note_of(event, data))
        if new is None:
            return state
        state.state = new
        if new != agents.WAITING:
            state.waiting = None
        elif state.waiting is None:
            what = str(env.get("tool_name") or data.get("mcp_server_name") or "input")
            state.waiting = Open("waiting_for_user", "", t, summary=f"{event} for {what}")
        if new in RESTING:
            state.working = False
            state.idle_since = t if event == "TeammateIdle" else 0.0
            self._forget_calls(state)
        else:
            state.working, state.idle_since = True, 0.0
        return state

    def observe_costs(self, rows: Iterable[tuple[str, str, float | None]]) -> None:
        """(scope session|agent|team, name, cost in USD or None while unknown)."""
        self.costs = [(s, n, float(c)) for s, n, c in rows if c is not None]

    def _agent(self, env: Mapping[str, Any], t: float) -> AgentState:
        """The state of the agent an envelope is about, by its key (host, scope, name)."""
        key = agents.key_of(env)
        state = self.agents.get(key)
        if state is None:
            if len(self.agents) >= self.MAX_AGENTS:  # forget the longest quiet
                oldest = min(self.agents, key=lambda k: self.agents[k].last)
                del self.agents[oldest]
            state = AgentState(
                key[2], str(env.get("team", "")), str(env.get("session_id", "")), key[0], key=key, last=t
            )
            self.agents[key] = state
        return state

    def _tasks(self, event: str, state: AgentState, data: Mapping[str, Any]) -> None:
        task = str(data.get("task_id", ""))
        if not task:
            return
        where = state.key[:2]
        if event == "TaskCreated":
            self.tasks.setdefault(where, set()).add(task)
        elif event == "TaskCompleted":
            self.tasks.get(where, set()).discard(task)

    def _calls(
        self, event: str, state: AgentState, env: Mapping[str, Any], data: Mapping[str, Any], t: float
    ) -> None:
        tool, use_id = str(env.get("tool_name", "")), str(env.get("tool_use_id", ""))
        key = state.key
        if event == "PreToolUse" and tool:
            if use_id and len(self.calls) < self.MAX_CALLS:
                self.calls[use_id] = (t, tool, key)
                state.calls.add(use_id)
            call = tool + " " + _fingerprint(data.get("tool_input"))
            if call == state.call:
                state.repeats += 1
            else:
                state.call, state.repeats, state.repeat_since, state.call_failed = call, 1, t, False
        elif event in ("PostToolUse", "PostToolUseFailure"):
            started = self.calls.pop(use_id, None)
            state.calls.discard(use_id)
            if started is not None and event == "PostToolUse":
                history = self.durations.setdefault(
                    started[1], deque(maxlen=self.rules.stuck_tool.limits.history)
                )
                history.append(max(0.0, t - started[0]))
            if len(state.results) == state.results.maxlen and state.results[0][1]:
                state.failures -= 1
            state.results.append((t, event == "PostToolUseFailure"))
            state.failures += event == "PostToolUseFailure"
            if event == "PostToolUseFailure":
                state.call_failed = True

    def _forget_calls(self, state: AgentState) -> None:
        for use_id in state.calls:
            self.calls.pop(use_id, None)
        state.calls.clear()

    # -- evaluation ----------------------------------------------------------------------------

    def conditions(self, now: float) -> list[Open]:
        """Every condition that holds at `now`, by every enabled rule."""
        found: list[Open] = []
        on = self.rules.enabled()
        if "stuck_tool" in on:
            found += self._stuck(now)
        for state in self.agents.values():
            found += [o for o in self._agent_conditions(state, now) if o.rule in on]
        if "budget" in on:
            found += self._budget()
        if "hook_health" in on:
            limit = self.rules.hook_health.limits.spool_bytes
            for host, backlog in self.spool.items():
                if backlog >= limit:
                    summary = f"hook spool on {host} holds {backlog:,} bytes unsent"
                    found.append(
                        Open(
                            "hook_health",
                            f"hook_health|{host}",
                            now,
                            host=host,
                            summary=summary,
                            details={"spool_bytes": backlog},
                        )
                    )
        return found

    def _stuck(self, now: float) -> list[Open]:
        rule = self.rules.stuck_tool.limits
        found = []
        for use_id, (start, tool, key) in self.calls.items():
            p95 = _p95(self.durations.get(tool, ()))
            limit = max(rule.floor_s, rule.p95_factor * p95)
            # Once firing, it holds until the call ends, even if the tool's p95 has risen since.
            if now - start > limit or f"stuck_tool|{_subject(key)}|{use_id}" in self.firing:
                state = self.agents.get(key)
                summary = f"{key[2]} has been inside {tool} for {now - start:.0f}s (limit {limit:.0f}s)"
                found.append(
                    self._open(
                        state,
                        "stuck_tool",
                        use_id,
                        start,
                        summary,
                        {"tool": tool, "tool_use_id": use_id, "limit_s": limit, "p95_s": p95},
                    )
                )
        return found

    def _open(
        self, state: AgentState | None, rule: str, what: str, since: float, summary: str, details: Json
    ) -> Open:
        if state is None:
            return Open(rule, f"{rule}|{what}", since, summary=summary, details=details)
        return Open(
            rule,
            f"{rule}|{_subject(state.key)}|{what}",
            since,
            state.agent,
            state.team,
            state.session_id,
            state.host,
            summary,
            details,
        )

    def _agent_conditions(self, s: AgentState, now: float) -> list[Open]:
        r = self.rules
        found = []
        busy = bool(s.calls)
        if s.working and not busy and s.waiting is None and now - s.last > r.silent_agent.limits.after_s:
            found.append(
                self._open(
                    s,
                    "silent_agent",
                    "",
                    s.last,
                    f"{s.agent} is working but silent for {now - s.last:.0f}s",
                    {},
                )
            )
        if (loop := self._loop(s)) is not None:
            found.append(loop)
        if (burst := self._burst(s, now)) is not None:
            found.append(burst)
        if s.waiting is not None and now - s.waiting.since > r.waiting_for_user.limits.after_s:
            w = s.waiting
            found.append(
                self._open(
                    s,
                    "waiting_for_user",
                    "",
                    w.since,
                    f"{s.agent}: {w.summary} unanswered for {now - w.since:.0f}s",
                    {},
                )
            )
        open_tasks = len(self.tasks.get(s.key[:2], ()))
        if s.idle_since and open_tasks and now - s.idle_since > r.idle_with_open_tasks.limits.after_s:
            found.append(
                self._open(
                    s,
                    "idle_with_open_tasks",
                    "",
                    s.idle_since,
                    f"{s.agent} idle for {now - s.idle_since:.0f}s with {open_tasks} open "
                    + ("task" if open_tasks == 1 else "tasks"),
                    {"open_tasks": open_tasks},
                )
            )
        return found

    def _loop(self, s: AgentState) -> Open | None:
        if s.repeats < self.rules.loop.limits.repeats:
            return None
        how = "failing call" if s.call_failed else "call"
        summary = f"{s.agent} repeated the same {how} {s.repeats} times in a row"
        details = {"repeats": s.repeats, "call": s.call[:200], "failed": s.call_failed}
        return self._open(s, "loop", "", s.repeat_since, summary, details)

    def _burst(self, s: AgentState, now: float) -> Open | None:
        rule = self.rules.failure_burst.limits
        window = rule.window_s
        # A burst is many failures that are also most of what the agent tried: a busy agent whose
        # calls mostly work is not in trouble because it made many of them.
        while s.results and now - s.results[0][0] > window:  # older than any window asks: gone
            s.failures -= s.results.popleft()[1]
        inside, recent = s.results, s.failures
        if recent < rule.failures or recent < rule.min_share * len(inside):
            return None
        first = next(t for t, failed in inside if failed)
        summary = f"{s.agent} had {recent} tool failures of {len(inside)} results in {window:.0f}s"
        return self._open(s, "failure_burst", "", first, summary, {"failures": recent})

    def _budget(self) -> list[Open]:
        rule = self.rules.budget.limits
        found = []
        for scope, name, usd in self.costs:
            limit = rule.limit(scope)
            if limit is not None and usd > limit:
                o = Open(
                    "budget",
                    f"budget|{scope}|{name}",
                    0.0,
                    summary=f"{scope} {name} cost ${usd:,.2f}, over ${limit:,.2f}",
                    details={"scope": scope, "cost_usd": usd, "limit_usd": limit},
                )
                if scope == "session":
                    o.session_id = name
                elif scope == "agent":
                    o.agent = name
                else:
                    o.team = name
                found.append(o)
        return found

    def take(self, env: Mapping[str, Any], now: float) -> list[Json]:
        """One event envelope, and the alerts it completes at once: a rule whose condition an event
        completes (EVENT_RULES: a loop, a failure burst) fires on that event, not at the next tick.
        The time-based rules wait for `tick`, which also resolves."""
        state = self._observe(env, now)
        if state is None or state.last < now - 60:  # a replayed or late event: the tick decides
            return []
        # Only the event that can complete a condition looks at it: a loop grows with a call, a
        # burst with a failure (a result that worked only lowers the share of failures).
        event = env.get("event")
        if event == "PreToolUse" and self.rules.loop.enabled:
            found = self._loop(state)
        elif event == "PostToolUseFailure" and self.rules.failure_burst.enabled:
            found = self._burst(state, now)
        else:
            return []
        alert = None if found is None else self._fire(found, now)
        return [] if alert is None else [alert]

    def _fire(self, o: Open, now: float) -> Json | None:
        """The firing alert of a condition that holds, unless it fires already or cools down."""
        key = o.key
        if key in self.firing:
            return None
        rule = self.rules[o.rule]
        if now - self.resolved_at.get(key, -math.inf) < rule.cooldown_s:
            return None
        since = o.since or now
        alert = {
            "id": alert_id(o.rule, key, since),
            "rule": o.rule,
            "severity": rule.severity,
            "state": "firing",
            "agent": o.agent,
            "team": o.team,
            "session_id": o.session_id,
            "host": o.host,
            "summary": o.summary,
            "details": {**o.details, "key": key},
            "since": iso(since),
            "at": iso(now),
        }
        self.firing[key] = alert
        return alert

    def tick(self, now: float) -> list[Json]:
        """Fire what newly holds, resolve what no longer does."""
        holding = {o.key: o for o in self.conditions(now)}
        changes: list[Json] = []
        for key, alert in list(self.firing.items()):
            if key not in holding:
                del self.firing[key]
                self.resolved_at[key] = now
                changes.append({**alert, "state": "resolved", "at": iso(now)})
        for o in holding.values():
            if (fired := self._fire(o, now)) is not None:
                changes.append(fired)
        if len(self.resolved_at) > self.MAX_CALLS:
            for key in sorted(self.resolved_at, key=self.resolved_at.__getitem__)[
                : len(self.resolved_at) // 2
            ]:
                del self.resolved_at[key]
        return changes
