"""The team: who messaged whom (the store's edges plus the live messages since), and the tasks
created and completed (the store's tasks of the live window plus the live task events since).
Plain Python, no Textual.

A task is keyed as its agents are: host, scope (the session, else the team) and the task's id. The
lead creates a task and an in-process teammate of its session completes it; the teammate's payload
names the session's implicit team (`team_name`) while GENIE_TEAM may name the lead's otherwise, so
neither team name could be the key."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from agentwatch.agents import scope
from agentwatch.store.answer import seconds
from agentwatch.tui.model import envelope_time

EDGES_MAX = 2000
TASKS_MAX = 2000


@dataclass
class Edge:
    sender: str
    recipient: str
    team: str = ""
    count: int = 0
    summary: str = ""
    last_at: float = 0.0


@dataclass
class Task:
    task_id: str
    subject: str
    team: str
    scope: str = ""  # its session (else its team): which of the window's sessions it belongs to
    host: str = ""
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
    """SendMessage edges per team with counts and the latest summary (the store's answer plus the
    live messages after it), and the tasks created and completed."""

    def __init__(self, max_edges: int = EDGES_MAX, max_tasks: int = TASKS_MAX) -> None:
        self._edges: dict[tuple[str, str, str], Edge] = {}
        self._tasks: dict[tuple[str, str, str], Task] = {}
        self.max_edges, self.max_tasks = max_edges, max_tasks
        self.tasks_total = 0  # the window's tasks as the store counts them (the list holds max_tasks)

    def apply(self, env: Mapping[str, Any], *, count: bool = True) -> None:
        """One event: a message counts on its edge (`count`: the store's answer does not hold it);
        a task event is always taken (tasks are the events' own, not the store's answer)."""
        kind = env.get("kind")
        if kind == "message":
            if count:
                self._message(env)
        elif kind in ("task_created", "task_completed"):
            self._task(env, created=kind == "task_created")

    def seed(self, rows: Iterable[Mapping[str, Any]]) -> None:
        """The store's edges (queries.team_edges rows) in place of every count."""
        self._edges = {}
        for row in rows:
            sender, recipient = str(row.get("from_agent") or ""), str(row.get("to_agent") or "")
            team = str(row.get("team") or "")
            if sender and recipient:
                count, summary = int(row.get("messages") or 0), str(row.get("last_summary") or "")
                edge = Edge(sender, recipient, team, count, summary, seconds(row.get("last_at")))
                self._edges[(team, sender, recipient)] = edge

    def seed_tasks(self, rows: Iterable[Mapping[str, Any]]) -> None:
        """The store's tasks of the live window (queries.window_tasks rows) in place of every task."""
        self._tasks, self.tasks_total = {}, 0
        for row in rows:
            host, where, task_id = (
                str(row.get("host") or ""),
                str(row.get("scope") or ""),
                str(row.get("task_id") or ""),
            )
            task = Task(task_id, str(row.get("subject") or ""), str(row.get("team") or ""), where, host)
            if row.get("created"):
                task.created_at, task.created_by = seconds(row.get("created_at")), str(row.get("created_by"))
            if row.get("completed"):
                task.completed_at = seconds(row.get("completed_at"))
                task.completed_by = str(row.get("completed_by") or "")
            self._tasks[(host, where, task_id)] = task
            self.tasks_total = int(row.get("tasks_total") or 0)

    def _message(self, env: Mapping[str, Any]) -> None:
        sender, recipient = str(env.get("agent", "")), str(env.get("peer", ""))
        if not sender or not recipient:
            return
        team = str(env.get("team") or "")
        at = envelope_time(env)
        edge = self._edges.get((team, sender, recipient))
        if edge is None:
            if len(self._edges) >= self.max_edges:
                oldest = min(self._edges.values(), key=lambda e: e.last_at)
                del self._edges[(oldest.team, oldest.sender, oldest.recipient)]
            edge = self._edges[(team, sender, recipient)] = Edge(sender, recipient, team)
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
        team = str(env.get("team") or "")
        where = scope(team, str(env.get("session_id") or ""))
        host = str(env.get("host") or "")
        key = (host, where, task_id)
        task = self._tasks.get(key)
        if task is None:
            if len(self._tasks) >= self.max_tasks:
                del self._tasks[next(iter(self._tasks))]
            task = self._tasks[key] = Task(task_id, subject, team, where, host)
            self.tasks_total += 1
        task.subject = task.subject or subject
        at, agent = envelope_time(env), str(env.get("agent", ""))
        if created:
            task.created_at, task.created_by = at, agent
        else:
            task.completed_at, task.completed_by = at, agent

    def edges(self) -> list[Edge]:
        """Busiest first."""
        return sorted(
            self._edges.values(), key=lambda e: (-e.count, -e.last_at, e.team, e.sender, e.recipient)
        )

    def tasks(self) -> list[Task]:
        """Open tasks first, then by when they were created."""

        def order(t: Task) -> tuple[bool, float, str, str]:
            when = t.created_at if t.created_at is not None else (t.completed_at or 0.0)
            return (t.done, when, t.scope, t.task_id)

        return sorted(self._tasks.values(), key=order)
