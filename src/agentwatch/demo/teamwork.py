"""Tool calls that coordinate the team: TaskCreate, TaskUpdate and SendMessage.

Unlike the code-base tools these change the world: the shared task list while the call runs
(with TaskCreated/TaskCompleted in between), a recipient's mailbox once the call is done.
"""

from __future__ import annotations

from agentwatch.demo.agent import Agent
from agentwatch.demo.scenario import TASKS
from agentwatch.demo.world import Json, Mail, Task, ToolCall, Turn, random_hex

# The lead keeps at most this many open tasks.
MAX_OPEN_TASKS = 5


def task_create(agent: Agent) -> ToolCall | None:
    """The next task of the plan, numbered as Claude Code does; None when enough are open."""
    world = agent.world
    if len(world.tasks) >= MAX_OPEN_TASKS:
        return None
    subject, description = TASKS[(world.next_task - 1) % len(TASKS)]
    rounds = (world.next_task - 1) // len(TASKS)
    if rounds:
        subject = f"{subject} (follow-up {rounds})"
    task_id = str(world.next_task)
    world.next_task += 1
    seconds = agent.rng.uniform(0.08, 0.3)

    def inside(turn: Turn, start: float) -> float:
        world.tasks[task_id] = Task(subject, description, "")
        turn.add(start + seconds / 2, _task_event(agent, "TaskCreated", task_id, subject, description))
        return start + seconds

    return ToolCall(
        "TaskCreate",
        {"subject": subject, "description": description, "activeForm": f"Working on: {subject.lower()}"},
        {"task": {"id": task_id, "subject": subject, "description": description}},
        seconds,
        model_text=f"Task #{task_id} created successfully: {subject}",
        inside=inside,
    )


def task_update(agent: Agent, task_id: str, status: str) -> ToolCall:
    """Move a task to `status`: a teammate claims it with "in_progress"; "completed" closes it."""
    world = agent.world
    subject, description, owner = world.tasks.get(task_id, Task("", "", ""))
    before = "in_progress" if status == "completed" else "pending"
    seconds = agent.rng.uniform(0.05, 0.25)
    inp: Json = {"taskId": task_id, "status": status}
    fields = ["status"]
    if status == "in_progress" and agent.is_teammate:
        inp["owner"] = agent.name
        fields.append("owner")

    def inside(turn: Turn, start: float) -> float:
        if status == "completed":
            world.tasks.pop(task_id, None)
            turn.add(start + seconds / 2, _task_event(agent, "TaskCompleted", task_id, subject, description))
        else:
            world.tasks[task_id] = Task(subject, description, agent.name if agent.is_teammate else owner)
        return start + seconds

    response = {
        "success": True,
        "taskId": task_id,
        "updatedFields": fields,
        "statusChange": {"from": before, "to": status},
    }
    return ToolCall(
        "TaskUpdate",
        inp,
        response,
        seconds,
        model_text=f"Updated task #{task_id} {status}",
        inside=inside,
    )


def _task_event(agent: Agent, event: str, task_id: str, subject: str, description: str) -> Json:
    """TaskCreated or TaskCompleted; a teammate's names its team."""
    extra: Json = {}
    if agent.is_teammate:
        extra = {"teammate_name": agent.name, "team_name": agent.world.team_name}
    return agent.payload(
        event, mode=False, task_id=task_id, task_subject=subject, task_description=description, **extra
    )


def send(agent: Agent, to: str, summary: str, message: str) -> ToolCall:
    """SendMessage to a teammate, to "main" (the lead) or to "*" (everyone)."""
    world = agent.world
    response, kind = _send_response(agent, to, summary, message)
    post_input = {"to": to, "summary": summary, "message": message}
    # PreToolUse and PermissionRequest carry the legacy alias keys too (captures of 2.1.330).
    pre_input = dict(post_input, type="message", recipient=to, recipient_kind=kind, content=message)
    sender = agent.name if agent.agent_id else "main"

    def after(end: float) -> None:
        mail = Mail(end, sender, summary, message, "message")
        if to == "*":
            for name in world.teammates:
                if name != agent.name:
                    world.deliver(name, mail)
        else:
            world.deliver(to, mail)

    return ToolCall(
        "SendMessage",
        post_input,
        response,
        agent.rng.uniform(0.003, 0.02),
        model_text=str(response["message"]),
        pre_input=pre_input,
        after=after,
    )


def _send_response(agent: Agent, to: str, summary: str, message: str) -> tuple[Json, str]:
    """(SendMessage's tool response, the recipient's kind) for a message to `to`."""
    world = agent.world
    if to == "main":
        return {"success": True, "message": "Message queued for the main conversation's next turn."}, "main"
    if to == "*":
        return {
            "success": True,
            "message": f"Message broadcast to {len(world.teammates)} teammates",
        }, "broadcast"
    response = {
        "success": True,
        "message": f"Message sent to {to}'s inbox",
        "msg_id": random_hex(agent.rng, 12),
        "routing": {
            "sender": agent.name if agent.agent_id else "team-lead",
            "senderColor": world.colors.get(agent.name, "white"),
            "target": f"@{to}",
            "targetColor": world.colors.get(to, "white"),
            "summary": summary,
            "content": message,
        },
    }
    return response, "name"
