"""The roster: every agent by its key (host, scope, name), with the store's figures for it plus
the live events since, its state by agentwatch.agents' machine, and which ones fold away.

Plain Python, no Textual: the app seeds it from the store's answer (tui/truth.py) and applies
envelopes; widgets read rows out.
"""

from __future__ import annotations

import itertools
from collections import deque
from collections.abc import Callable, Iterable, Mapping, Set
from dataclasses import dataclass, field
from typing import Any

from agentwatch.agents import (
    DONE,
    ERROR_EVENTS,
    FAILED,
    IDLE,
    INITIAL,
    LOST,
    LOST_AFTER_S,
    STATE_ORDER,
    STOPPED,
    TOOL_STATES,
    AgentKey,
    is_invalid_input,
    key_of,
    note_of,
    parent_key,
    shown_state,
    state_after,
)
from agentwatch.format import utc_seconds
from agentwatch.store.answer import seconds
from agentwatch.tui.model import (
    SPARK_BUCKETS,
    SPARK_SECONDS,
    TIMELINE_MAX,
    FeedLine,
    envelope_time,
    headline_of,
    owned,
)

# Agents kept at most: a long run spawns subagent after subagent. Folded ones go first.
ROSTER_MAX = 300
# Seconds a stopped or lost agent stays in the roster's view before it folds (a key shows it).
FOLD_AFTER_S = 300.0
# Seconds a session sent nothing after which its agents sort below the live ones (not lost yet).
QUIET_AFTER_S = 120.0


@dataclass
class Agent:
    """One agent as the roster shows it: the store's figures for it, plus the live events since."""

    key: AgentKey
    team: str = ""
    parent: str = ""
    agent_type: str = ""
    session_id: str = ""
    # Who runs it (claude-code, codex, gemini-cli), from its events ('' until one was seen).
    harness: str = ""
    # Whose it is, where, on which branch: its session's (emitter/attribution.py), '' until known.
    person: str = ""
    repo: str = ""
    branch: str = ""
    # A teammate (not a one-off subagent): it went idle as one, or it sent a message.
    teammate: bool = False
    # The state machine's state (agentwatch.agents), from the latest state event: its (time in ms,
    # id), its event, its tool (while working or waiting) and its time.
    base: str = INITIAL
    mark: tuple[int, str] = (0, "")
    state_event: str = ""
    tool: str = ""
    state_at: float | None = None
    # What is shown: `base`, or `lost` once the agent's scope was silent too long (Roster.settle).
    state: str = INITIAL
    last_seen: float = 0.0
    events: int = 0
    tool_calls: int = 0
    errors: int = 0
    messages: int = 0
    activity: deque[int] = field(default_factory=lambda: deque([0] * SPARK_BUCKETS, maxlen=SPARK_BUCKETS))
    timeline: deque[FeedLine] = field(default_factory=lambda: deque(maxlen=TIMELINE_MAX))
    _bucket: int = 0

    @property
    def name(self) -> str:
        return self.key[2]

    @property
    def host(self) -> str:
        return self.key[0]

    @property
    def scope(self) -> str:
        return self.key[1]

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
        """Seconds inside the current tool (or waiting for it), None when in none."""
        if self.state_at is None or self.base not in TOOL_STATES or self.state in DONE:
            return None
        return max(0.0, now - self.state_at)

    def take_state(self, event: str, note: str, mark: tuple[int, str], tool: str, at: float) -> None:
        """The state `event` puts the agent in, if it is newer than the state it has."""
        state = state_after(event, note)
        if state is None or mark < self.mark:
            return
        self.base, self.mark, self.state_event, self.state_at = state, mark, event, at
        self.tool = tool if state in TOOL_STATES else ""
        if self.state not in DONE:
            self.state = state


def _mark(env: Mapping[str, Any], at: float) -> tuple[int, str]:
    return (round(at * 1000), str(env.get("id") or ""))


_DESCRIBED = (("team", "team"), ("parent", "parent_agent"), ("agent_type", "agent_type"),
              ("session_id", "session_id"), ("harness", "harness"), ("person", "person"),
              ("repo", "repo"), ("branch", "branch"))  # fmt: skip


class Roster:
    """The agents, by key (host, scope, name): the store's answer (seed) plus the live events
    that came after it (apply), and the history's events in their timelines (apply, counting
    nothing). Live agents first; stopped and lost ones fold after FOLD_AFTER_S."""

    def __init__(
        self,
        max_agents: int = ROSTER_MAX,
        lost_after_s: float = LOST_AFTER_S,
        fold_after_s: float = FOLD_AFTER_S,
    ) -> None:
        self._agents: dict[AgentKey, Agent] = {}
        self._scopes: dict[tuple[str, str], float] = {}  # (host, scope) -> its latest event
        self.max_agents = max_agents
        self.lost_after_s = lost_after_s
        self.fold_after_s = fold_after_s
        self.evicted = 0
        # The store's count of agents and of those lost or stopped, at its last answer.
        self.stored_total = 0
        self._stored_keys: frozenset[AgentKey] = frozenset()
        self._new = 0  # agents live events made that the store's last answer did not have

    def __len__(self) -> int:
        return len(self._agents)

    @property
    def total(self) -> int:
        """Agents known: the store's, plus the live ones it does not have yet."""
        return max(len(self._agents), self.stored_total + self._new)

    def _make_room(self) -> None:
        """Forget a folded agent (stopped or lost) first, then the one finished longest ago, then
        the longest silent."""
        done = [a for a in self._agents.values() if a.state in DONE] or [
            a for a in self._agents.values() if a.base in (IDLE, FAILED)
        ]
        victim = min(done or self._agents.values(), key=lambda a: a.last_seen)
        del self._agents[victim.key]
        self.evicted += 1
        if victim.key not in self._stored_keys:
            self._new -= 1

    def get(self, key: AgentKey) -> Agent | None:
        return self._agents.get(key)

    def named(self, name: str) -> list[Agent]:
        """The agents called `name`, newest first."""
        return sorted((a for a in self._agents.values() if a.name == name), key=lambda a: -a.last_seen)

    def scope_seen(self, agent: Agent) -> float:
        return self._scopes.get((agent.host, agent.scope), agent.last_seen)

    def _agent(self, key: AgentKey) -> Agent:
        agent = self._agents.get(key)
        if agent is None:
            if len(self._agents) >= self.max_agents:
                self._make_room()
            agent = self._agents[key] = Agent(key=key)
            if key not in self._stored_keys:
                self._new += 1
        return agent

    def _sender(self, key: AgentKey) -> AgentKey | None:
        """The key of the agent of `key`'s scope and name on whatever host (None: there is none)."""
        return next((k for k in self._agents if k[1] == key[1] and k[2] == key[2]), None)

    def apply(
        self, env: Mapping[str, Any], line: FeedLine | None = None, *, count: bool = True, note: bool = True
    ) -> Agent | None:
        """One event of the agent it names. `count`: a live event the store's answer does not hold
        (its counts, state and last time); otherwise a stored one, noted only for an agent the
        roster has; `note`: it goes into the agent's timeline and activity."""
        name = env.get("agent")
        if not isinstance(name, str) or not name or is_invalid_input(env):
            return None  # invalid hook input stays on the feed, with its reason: no agent
        key = key_of(env)
        if not count and key not in self._agents:
            # A stored event: the store's answer holds its agent, or the agent is beyond the
            # window (not shown). A stored message names no host: its sender by scope and name.
            found = self._sender(key) if not key[0] else None
            if found is None:
                return None
            key = found
        at = line.at if line is not None else envelope_time(env)
        agent = self._agent(key)
        for attr, field_name in _DESCRIBED:
            value = env.get(field_name)
            if isinstance(value, str) and value:
                setattr(agent, attr, value)
        if note:
            agent.count_activity(at)
            agent.timeline.append((line if line is not None else FeedLine.of(env)).headline())
        event = str(env.get("event", ""))
        if event == "TeammateIdle" or env.get("kind") == "message":
            agent.teammate = True
        if not count:
            return agent
        agent.last_seen = max(agent.last_seen, at)
        scope = (agent.host, agent.scope)
        self._scopes[scope] = max(self._scopes.get(scope, 0.0), at)
        if env.get("kind") == "message":
            agent.messages += 1
            return agent
        agent.events += 1
        if event == "PreToolUse":
            agent.tool_calls += 1
        elif event in ERROR_EVENTS:
            agent.errors += 1
        agent.take_state(
            event, note_of(event, env.get("data")), _mark(env, at), str(env.get("tool_name") or ""), at
        )
        return agent

    def apply_all(self, envelopes: Iterable[Mapping[str, Any]]) -> None:
        for env in envelopes:
            self.apply(env)

    def seed(self, rows: Iterable[Mapping[str, Any]], total: int | None = None) -> None:
        """The store's answer (queries.roster rows) in place of every count and state; timelines
        and activity carry over. Apply the live events it does not hold after this."""
        old = self._agents
        self._agents, self._scopes = {}, {}
        for row in rows:
            key = (str(row.get("host") or ""), str(row.get("scope") or ""), str(row.get("agent") or ""))
            if not key[2]:
                continue
            before = old.get(key)
            agent = Agent(
                key=key,
                team=str(row.get("team") or ""),
                parent=str(row.get("parent_agent") or ""),
                agent_type=str(row.get("agent_type") or ""),
                session_id=str(row.get("session_id") or ""),
                person=str(row.get("person") or ""),
                repo=str(row.get("repo") or ""),
                branch=str(row.get("branch") or ""),
                teammate=bool(row.get("messages_sent")) or (before is not None and before.teammate),
                last_seen=seconds(row.get("last_seen")),
                events=int(row.get("events") or 0),
                tool_calls=int(row.get("tool_calls") or 0),
                errors=int(row.get("errors") or 0),
                messages=int(row.get("messages_sent") or 0),
            )
            if before is not None:
                # Whose it is, as live events said, where the store does not say (yet).
                agent.person = agent.person or before.person
                agent.repo = agent.repo or before.repo
                agent.branch = agent.branch or before.branch
                agent.activity, agent.timeline, agent._bucket, agent.harness = (
                    before.activity,
                    before.timeline,
                    before._bucket,
                    before.harness,
                )
            event = str(row.get("state_event") or "")
            if event:
                at = seconds(row.get("state_since"))
                mark = (round(at * 1000), str(row.get("state_id") or ""))
                tool = str(row.get("current_tool") or "")
                agent.take_state(event, str(row.get("state_note") or ""), mark, tool, at)
            if agent.last_seen == 0.0 and before is not None:
                agent.last_seen = before.last_seen
            self._agents[key] = agent
            scope = (key[0], key[1])
            seen = seconds(row.get("scope_last_seen")) or agent.last_seen
            self._scopes[scope] = max(self._scopes.get(scope, 0.0), seen)
        self._stored_keys = frozenset(self._agents)
        self._new = 0
        self.stored_total = len(self._agents) if total is None else total

    def settle(self, now: float) -> None:
        """Each agent's shown state at `now`: lost once its scope was silent LOST_AFTER_S."""
        for agent in self._agents.values():
            agent.state = shown_state(agent.base, now - self.scope_seen(agent), self.lost_after_s)

    def quiet(self, agent: Agent, now: float) -> bool:
        """An agent whose scope (its session) has sent nothing for QUIET_AFTER_S: not lost yet."""
        return now - self.scope_seen(agent) > QUIET_AFTER_S

    def folded(self, agent: Agent, now: float) -> bool:
        """A stopped or lost agent, FOLD_AFTER_S after it became so: hidden unless asked for."""
        if agent.state == STOPPED:
            since = agent.state_at if agent.state_at is not None else agent.last_seen
        elif agent.state == LOST:
            since = self.scope_seen(agent) + self.lost_after_s
        else:
            return False
        return now - since > self.fold_after_s

    def folded_count(self, now: float) -> int:
        """Agents folded away: stopped or lost a while, and those beyond the cap the store has."""
        return sum(1 for a in self._agents.values() if self.folded(a, now)) + max(0, self.total - len(self))

    def children(self, key: AgentKey) -> list[Agent]:
        """The subagents and teammates whose lead is the agent `key` (same host and scope)."""
        return sorted(
            (
                a
                for a in self._agents.values()
                if a.parent == key[2] and a.key[:2] == key[:2] and a.key != key
            ),
            key=lambda a: a.name,
        )

    def agents(self) -> list[Agent]:
        return list(self._agents.values())

    def ordered(
        self,
        key: str = "state",
        text: str = "",
        now: float | None = None,
        show_folded: bool = False,
        owner: tuple[str, str, str] = ("", "", ""),
    ) -> list[tuple[int, Agent]]:
        """(depth, agent) rows: live agents before stopped and lost ones, leads sorted by `key`, each
        followed by its subagents and teammates; folded agents only with `show_folded`; with `owner`
        (parts of a person, repository and branch, lower case), only the agents whose are those."""
        needle = text.lower()
        agents = [
            a
            for a in self._agents.values()
            if (not needle or needle in f"{a.name} {a.team} {a.tool}".lower())
            and (show_folded or now is None or not self.folded(a, now))
            and (not any(owner) or owned(owner, {"person": a.person, "repo": a.repo, "branch": a.branch}))
        ]
        sort_keys: dict[str, Callable[[Agent], tuple[Any, ...]]] = {
            "state": lambda a: (STATE_ORDER.get(a.state, 9), -a.last_seen),
            "name": lambda a: (a.name, a.scope),
            "recent": lambda a: (-a.last_seen,),
            "errors": lambda a: (-a.errors, a.name),
        }
        within = sort_keys.get(key, sort_keys["state"])

        def sort(a: Agent) -> tuple[Any, ...]:
            # Whatever the key: live before quiet before stopped and lost (a quiet session sinks
            # before it is lost: "waiting, seen 8m ago" below the agents working now).
            return (a.state in DONE, now is not None and self.quiet(a, now), *within(a))

        present = {a.key for a in agents}
        children: dict[AgentKey, list[Agent]] = {}
        for a in agents:
            lead = parent_key(a.key, a.parent) if a.parent else None
            if lead is not None and lead in present and lead != a.key:
                children.setdefault(lead, []).append(a)
        rows: list[tuple[int, Agent]] = []

        def visit(agent: Agent, depth: int, seen: set[AgentKey]) -> None:
            rows.append((depth, agent))
            seen.add(agent.key)
            for child in sorted(children.get(agent.key, []), key=sort):
                if child.key not in seen:
                    visit(child, depth + 1, seen)

        seen: set[AgentKey] = set()
        tops = [a for a in agents if not (a.parent and parent_key(a.key, a.parent) in present)]
        for top in sorted(tops, key=sort):
            visit(top, 0, seen)
        for a in sorted(agents, key=sort):  # cycles: still shown once
            if a.key not in seen:
                visit(a, 0, seen)
        return rows


def idle_teammates(roster: Roster) -> list[Agent]:
    """Teammates (not the lead, not one-off subagents) whose turn is over, idle longest first."""
    return sorted(
        (a for a in roster.agents() if a.state == IDLE and a.teammate and a.parent),
        key=lambda a: a.last_seen,
    )


# --- the live events the store's answer does not hold yet ------------------------------------

UNCONFIRMED_MAX = 200_000


class Unconfirmed:
    """Live events (and messages) since the store's last answer that it may not hold yet, oldest
    first: the dashboard's watermark. Each is counted on screen on top of the store's answer until
    the store says it holds it (queries.stored_ids); then the store's next answer counts it."""

    def __init__(self, max_items: int = UNCONFIRMED_MAX) -> None:
        self._items: dict[str, Mapping[str, Any]] = {}
        self.max_items = max_items
        self.dropped = 0
        self.events = 0  # of them, events (not messages): what the status line adds to the store's

    def __len__(self) -> int:
        return len(self._items)

    def _drop(self, event_id: str) -> None:
        item = self._items.pop(event_id, None)
        if item is not None and item.get("kind") != "message":
            self.events -= 1

    def add(self, env: Mapping[str, Any]) -> None:
        """A live event just counted (an envelope without an id cannot be confirmed: not kept)."""
        event_id = env.get("id")
        if not isinstance(event_id, str) or not event_id:
            return
        if event_id in self._items:
            return
        if len(self._items) >= self.max_items:
            self._drop(next(iter(self._items)))
            self.dropped += 1
        slim = headline_of(env)
        event = str(env.get("event", ""))
        note = note_of(event, env.get("data"))
        if note:
            slim["data"] = {"notification_type": note}
        self._items[event_id] = slim
        if env.get("kind") != "message":
            self.events += 1

    def ids(self, limit: int, skip: Set[str] = frozenset()) -> list[str]:
        """The oldest `limit` ids (those most likely stored by now), none of `skip`."""
        return list(itertools.islice((i for i in self._items if i not in skip), limit))

    def earliest(self, ids: Iterable[str]) -> float | None:
        """The earliest time (Unix seconds) of these ids' events, or None when one has none."""
        times = [utc_seconds(self._items[i].get("timestamp")) for i in ids if i in self._items]
        return None if not times or None in times else min(t for t in times if t is not None)

    def confirm(self, stored: Iterable[str]) -> None:
        """The store holds these now: its next answer counts them."""
        for event_id in stored:
            self._drop(event_id)

    def envelopes(self) -> list[Mapping[str, Any]]:
        return list(self._items.values())
