"""The simulated world: its clock, the team's shared state, and the units agents work in.

Every agent is a generator of (simulated time, hook payload); `World.run` merges them in time
order. Agents meet only through the world: the task list and the mailboxes. One seeded
`random.Random` drives everything, so the order in which code draws from it is the stream.
"""

from __future__ import annotations

import heapq
import random
from collections.abc import Callable, Iterator
from typing import Any, NamedTuple

from agentwatch.demo.scenario import COLORS, PROJECTS, ROLES, TMP_ROOT

Json = dict[str, Any]
# (simulated seconds since the start, hook payload)
Event = tuple[float, Json]

_B62 = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"


def random_hex(rng: random.Random, n: int) -> str:
    return f"{rng.getrandbits(4 * n):0{n}x}"


def random_uuid(rng: random.Random) -> str:
    """A version-4 UUID, drawn from the simulation's generator so that a seed repeats it."""
    h = random_hex(rng, 32)
    return f"{h[:8]}-{h[8:12]}-4{h[13:16]}-{'89ab'[int(h[16], 16) % 4]}{h[17:20]}-{h[20:]}"


def random_b62(rng: random.Random, n: int) -> str:
    return "".join(rng.choice(_B62) for _ in range(n))


class ToolCall:
    """One tool call: what the model asked, what the tool answered, how long it ran."""

    def __init__(
        self,
        tool: str,
        tool_input: Json,
        response: Any = None,
        seconds: float = 0.05,
        *,
        ask: bool = False,
        model_text: str = "",
        pre_input: Json | None = None,
        suggestion: Json | None = None,
        inside: Callable[[Turn, float], float] | None = None,
        after: Callable[[float], None] | None = None,
    ) -> None:
        self.tool = tool
        self.tool_input = tool_input
        self.response = response
        self.seconds = seconds
        self.error = ""  # set: the call fails (PostToolUseFailure) with this text
        self.ask = ask  # the default permission mode prompts the user first
        self.model_text = model_text  # what the model sees of the result (PostToolBatch)
        # PreToolUse/PermissionRequest input, when it differs from PostToolUse's.
        self.pre_input = pre_input
        self.suggestion = suggestion
        # Events fired while the tool runs (TaskCreated, a subagent...): (turn, start) -> end time.
        self.inside = inside
        # What the call changes once it is done (a message delivered, a teammate spawned).
        self.after = after


class Turn:
    """Events of one stretch of an agent's work, sorted by simulated time when drained."""

    def __init__(self) -> None:
        self.items: list[tuple[float, int, Json]] = []

    def add(self, t: float, payload: Json) -> None:
        self.items.append((t, len(self.items), payload))

    def drain(self) -> Iterator[Event]:
        self.items.sort(key=lambda item: (item[0], item[1]))
        for t, _, payload in self.items:
            yield t, payload
        self.items = []


class Mail(NamedTuple):
    """A message waiting for its recipient's next turn."""

    time: float
    sender: str
    summary: str
    text: str
    kind: str  # "message" (SendMessage) or "task" (a background subagent's notification)


class Task(NamedTuple):
    """An entry of the team's task list; `owner` is empty until a teammate claims it."""

    subject: str
    description: str
    owner: str


class World:
    """Shared state of one simulation run: the clock-ordered merge of every agent's events."""

    def __init__(self, seed: int, teammates: int) -> None:
        self.rng = random.Random(seed)  # noqa: S311 - a simulation, reproducible by design
        rng = self.rng
        self.project = rng.choice(PROJECTS)
        self.cwd = f"/home/dev/{self.project}"
        self.session_id = random_uuid(rng)
        self.team_name = f"session-{self.session_id[:8]}"
        self.teammates = [ROLES[i] if i < len(ROLES) else f"worker{i + 1}" for i in range(teammates)]
        self.colors = {name: COLORS[i % len(COLORS)] for i, name in enumerate(self.teammates)}
        self.teammate_ids = {name: f"a{name}-{random_hex(rng, 16)}" for name in self.teammates}
        self.inbox: dict[str, list[Mail]] = {}
        self.tasks: dict[str, Task] = {}
        self.next_task = 1
        self._heap: list[tuple[float, int, Json, Iterator[Event]]] = []
        self._seq = 0
        self.now = 0.0

    def transcript(self, session_id: str) -> str:
        return f"/home/dev/.claude/projects/-home-dev-{self.project}/{session_id}.jsonl"

    def subagent_transcript(self, session_id: str, agent_id: str) -> str:
        return self.transcript(session_id).removesuffix(".jsonl") + f"/subagents/agent-{agent_id}.jsonl"

    def tasks_dir(self, session_id: str) -> str:
        return f"{TMP_ROOT}/-home-dev-{self.project}/{session_id}/tasks"

    def path(self, rel: str) -> str:
        return f"{self.cwd}/{rel}"

    def spawn(self, stream: Iterator[Event]) -> None:
        """Let a new agent act: its first event is drawn now, at most as early as the clock."""
        first = next(stream, None)
        if first is not None:
            self._seq += 1
            heapq.heappush(self._heap, (max(first[0], self.now), self._seq, first[1], stream))

    def deliver(self, to: str, mail: Mail) -> None:
        self.inbox.setdefault(to, []).append(mail)

    def take_mail(self, who: str, after: float, within: float) -> tuple[float, list[Mail]]:
        """(when `who` wakes, the messages it reads then): the earliest message arriving before
        `after + within` wakes it, and everything that arrived by then comes along; no message
        in time gives (-1, [])."""
        box = self.inbox.get(who)
        if not box:
            return -1.0, []
        box.sort(key=lambda m: m.time)
        if box[0].time > after + within:
            return -1.0, []
        wake = max(after, box[0].time)
        n = sum(1 for m in box if m.time <= wake)
        taken = box[:n]
        del box[:n]
        return wake, taken

    def run(self) -> Iterator[Event]:
        while self._heap:
            t, _, payload, stream = heapq.heappop(self._heap)
            self.now = t
            yield t, payload
            nxt = next(stream, None)
            if nxt is not None:
                self._seq += 1
                heapq.heappush(self._heap, (max(nxt[0], t), self._seq, nxt[1], stream))
