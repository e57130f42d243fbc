"""A team's tasks as Claude Code 2.1.330 reports them (the shapes of the captured payloads): the
lead creates tasks in its session (no `team_name`), an in-process teammate of that session completes
some (`agent_id`, `agent_type`, `teammate_name` and the deprecated `team_name` of the session's
implicit team), then goes idle. Run with GENIE_TEAM set, the envelopes' team is that name while the
teammate's payload still says `session-<8>`: the case where a completion never met its creation."""

from __future__ import annotations

import json
from typing import Any

from agentwatch.contract import envelopes_from_stdin

LEAD_SESSION = "96f21a61-e7c0-4640-bc4e-b99cff541b11"
TEAMMATE = {
    "agent_id": "aresearcher-4f6960afa371e571",
    "agent_type": "researcher",
    "teammate_name": "researcher",
    "team_name": "session-96f21a61",
}
AT = 1_795_000_000.0


def payload(event: str, task: str, *, teammate: bool = False, session: str = LEAD_SESSION) -> dict[str, Any]:
    base = {
        "session_id": session,
        "transcript_path": f"/home/dev/.claude/projects/-home-dev-proj/{session}.jsonl",
        "cwd": "/home/dev/proj",
        "hook_event_name": event,
    }
    if event != "TeammateIdle":
        base |= {"task_id": task, "task_subject": f"Task {task}", "task_description": "do it"}
    return base | (TEAMMATE if teammate else {})


def team_envelopes(
    created: int, completed: int, *, environ: dict[str, str] | None = None, session: str = LEAD_SESSION
) -> list[dict[str, Any]]:
    """The lead creates tasks 1..created, the teammate completes 1..completed, then goes idle."""
    steps = [payload("TaskCreated", str(n), session=session) for n in range(1, created + 1)]
    steps += [
        payload("TaskCompleted", str(n), teammate=True, session=session) for n in range(1, completed + 1)
    ]
    steps.append(payload("TeammateIdle", "", teammate=True, session=session))
    out: list[dict[str, Any]] = []
    for i, step in enumerate(steps):
        raw = json.dumps(step).encode()
        out += [env for _, env in envelopes_from_stdin(raw, environ or {}, host="lab", now=AT + i)]
    return out
