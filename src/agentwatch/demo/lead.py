"""The lead (the main session): builds the team, then answers the user and its teammates' mail.

Now and then it compacts its context, and the user opens a second, short session beside it.
"""

from __future__ import annotations

from collections.abc import Iterator

from agentwatch.demo import subagents, teamwork, tools
from agentwatch.demo.agent import Agent
from agentwatch.demo.scenario import (
    CLAUDE_VERSION_MODEL,
    GOAL,
    LEAD_NOTES,
    LEAD_REPLIES,
    SIDE_PROMPTS,
    USER_PROMPTS,
)
from agentwatch.demo.teammate import play_teammate
from agentwatch.demo.world import (
    Event,
    Json,
    Mail,
    ToolCall,
    Turn,
    World,
    random_b62,
    random_hex,
    random_uuid,
)

# After this long without a prompt Claude Code tells the user it is waiting.
IDLE_AFTER = 60.0


def play_lead(world: World) -> Iterator[Event]:
    """The lead of the world's session, from SessionStart on, without end."""
    lead = Agent(world, "main", session_id=world.session_id)
    turn = Turn()
    t = _build_team(lead, turn)
    yield from turn.drain()
    turns = 1
    while True:
        turn = Turn()
        t = _lead_turn(lead, turn, t, turns)
        turns += 1
        yield from turn.drain()


def _build_team(lead: Agent, turn: Turn) -> float:
    """The first turn: the user states the goal; the lead explores, plans and spawns the team."""
    world = lead.world
    rng = lead.rng
    turn.add(0.0, lead.payload("SessionStart", mode=False, source="startup", model=CLAUDE_VERSION_MODEL))
    turn.add(
        rng.uniform(0.01, 0.1),
        lead.payload(
            "InstructionsLoaded", mode=False, file_path=world.path("CLAUDE.md"), memory_type="Project",
            load_reason="session_start",
        ),
    )  # fmt: skip
    t = rng.uniform(2.0, 6.0)
    lead.new_prompt()
    turn.add(t, lead.payload("UserPromptSubmit", prompt=GOAL))
    t += lead.think()
    explore = subagents.foreground(
        lead,
        "Explore",
        "Map the payments code",
        "Find where the payments client sends requests and maps errors.",
    )
    t = lead.step(turn, t, [explore, tools.read(lead)])
    creates = [c for c in (teamwork.task_create(lead) for _ in range(4)) if c is not None]
    t = lead.step(turn, t, creates)
    if world.teammates:
        t = lead.step(turn, t, [_spawn_teammate(lead, name) for name in world.teammates])
    turn.add(t, _stop(lead, "The team is up: " + ", ".join(world.teammates or ["(no teammates)"]) + "."))
    return t


def _lead_turn(lead: Agent, turn: Turn, t: float, turns: int) -> float:
    """A turn after the first: woken by mail or by the user, a few steps, Stop; returns its end."""
    rng = lead.rng
    start, mails = _wake(lead, turn, t, turns)
    lead.new_prompt()
    turn.add(start, lead.payload("UserPromptSubmit", prompt=_prompt(lead, mails)))
    t = start + lead.think()
    mail = mails[0] if mails else None
    for _ in range(rng.randint(1, 3)):
        t = lead.step(turn, t, _lead_calls(lead, mail))
    turn.add(t, _end_of_turn(lead, mail))
    return t


def _wake(lead: Agent, turn: Turn, t: float, turns: int) -> tuple[float, list[Mail]]:
    """When the lead's next turn starts and the mail it reads then. While it waits: the idle
    notification, sometimes a compaction, and now and then a side session starting."""
    world = lead.world
    rng = lead.rng
    wake, mails = world.take_mail("main", t, rng.uniform(20.0, 90.0))
    if mails:
        start = max(t + rng.uniform(0.3, 2.0), wake + rng.uniform(0.2, 1.5))
    else:
        start = t + rng.uniform(15.0, 90.0)
    if start - t > IDLE_AFTER:
        idle = lead.payload(
            "Notification",
            mode=False,
            message="Claude is waiting for your input",
            notification_type="idle_prompt",
        )
        turn.add(t + IDLE_AFTER, idle)
    if rng.random() < 0.03 and turns > 3:
        start = _compact(lead, turn, start)
    if turns % 9 == 4 and rng.random() < 0.7:
        world.spawn(play_side_session(world, start + rng.uniform(1.0, 20.0)))
    return start, mails


def _prompt(lead: Agent, mails: list[Mail]) -> str:
    """What the turn starts with: the user's prompt, or the mail, all of it as one prompt."""
    if not mails:
        return lead.rng.choice(USER_PROMPTS)
    return "\n".join(
        m.text if m.kind == "task" else f'<agent-message from="{m.sender}">\n{m.text}\n</agent-message>'
        for m in mails
    )


def _lead_calls(lead: Agent, mail: Mail | None) -> list[ToolCall]:
    """One step of the lead: coordinate (a message, a task, a subagent), look around, or both."""
    world = lead.world
    rng = lead.rng
    calls: list[ToolCall] = []
    r = rng.random()
    if r < 0.3 and world.teammates:
        to = (
            mail.sender
            if mail and mail.sender in world.teammate_ids and rng.random() < 0.5
            else rng.choice(world.teammates)
        )
        summary, message = rng.choice(LEAD_NOTES)
        calls.append(teamwork.send(lead, to, summary, message))
    elif r < 0.36 and world.teammates:
        calls.append(
            teamwork.send(lead, "*", "Heads up", "Rebasing feature/payment-retries on main in 5 minutes.")
        )
    elif r < 0.48:
        owned = [tid for tid, task in world.tasks.items() if task.owner]
        created = teamwork.task_create(lead) if len(world.tasks) < 3 or not owned else None
        if created is not None:
            calls.append(created)
        elif owned:
            calls.append(teamwork.task_update(lead, rng.choice(owned), "completed"))
    elif r < 0.58:
        calls.append(
            subagents.foreground(
                lead, "Explore", "Find refund call sites", "List every place that creates a refund."
            )
        )
    elif r < 0.63:
        calls.append(
            subagents.background(
                lead, "Audit error mapping", "Check every gateway error maps to a PaymentError subclass."
            )
        )
    elif r < 0.68:
        calls.append(tools.web_fetch(lead))
    if not calls or rng.random() < 0.4:
        calls.extend(tools.work_call(lead) for _ in range(rng.choice((1, 1, 2))))
    return calls


def _end_of_turn(lead: Agent, mail: Mail | None) -> Json:
    """Stop, answering the first message of the turn; rarely StopFailure on a rate limit."""
    rng = lead.rng
    if rng.random() < 0.02:
        return lead.payload(
            "StopFailure", error="rate_limit", error_details="429 rate_limit_error",
            last_assistant_message="API Error: Rate limit reached",
        )  # fmt: skip
    handled = f"{mail.sender}: {mail.summary}. " if mail is not None and mail.kind == "message" else ""
    return _stop(lead, handled + rng.choice(LEAD_REPLIES))


def _stop(agent: Agent, message: str, *, team: bool = True) -> Json:
    """The lead's Stop; its background tasks are the running teammates."""
    tasks = [
        {
            "id": f"t{random_b62(agent.rng, 8).lower()}",
            "type": "teammate",
            "status": "running",
            "description": f"{n} teammate",
        }
        for n in (agent.world.teammates if team else ())
    ]
    return agent.payload(
        "Stop",
        stop_hook_active=False,
        last_assistant_message=message,
        background_tasks=tasks,
        session_crons=[],
    )


def _compact(lead: Agent, turn: Turn, t: float) -> float:
    """Auto-compaction: PreCompact, the internal summarizer's SubagentStop, SessionStart, PostCompact."""
    rng = lead.rng
    turn.add(t, lead.payload("PreCompact", mode=False, trigger="auto", custom_instructions=""))
    t += rng.uniform(8.0, 25.0)
    summarizer = "a" + random_hex(rng, 16)
    turn.add(t, lead.subagent_stop("Summary of the conversation so far.", agent_id=summarizer))
    turn.add(t + 0.05, lead.payload("SessionStart", mode=False, source="compact", model=CLAUDE_VERSION_MODEL))
    summary = "Team is adding retries and idempotent refunds; tests in progress."
    turn.add(t + 0.1, lead.payload("PostCompact", mode=False, trigger="auto", compact_summary=summary))
    return t + rng.uniform(0.5, 2.0)


def _spawn_teammate(lead: Agent, name: str) -> ToolCall:
    """The Agent call that starts teammate `name`; it begins to work shortly after the call."""
    world = lead.world
    agent_id = world.teammate_ids[name]
    prompt = f"You are the {name} on this team. {GOAL} Coordinate with the others through SendMessage."
    response = {
        "status": "teammate_spawned",
        "prompt": prompt,
        "agentId": agent_id,
        "resolvedModel": CLAUDE_VERSION_MODEL,
        "teammate_id": f"{name}@{world.team_name}",
        "agent_id": agent_id,
        "agent_type": "general-purpose",
        "model": CLAUDE_VERSION_MODEL,
        "name": name,
        "color": world.colors[name],
        "tmux_session_name": "in-process",
        "tmux_window_name": "in-process",
        "tmux_pane_id": "in-process",
        "team_name": world.team_name,
        "is_splitpane": False,
        "plan_mode_required": False,
        "outputFile": f"{world.tasks_dir(lead.session_id)}/{agent_id}.output",
    }
    inp = {
        "description": f"{name.capitalize()} teammate",
        "prompt": prompt,
        "subagent_type": "general-purpose",
        "name": name,
    }

    def after(end: float) -> None:
        world.spawn(play_teammate(world, name, end + lead.rng.uniform(0.5, 2.5)))

    return ToolCall(
        "Agent",
        inp,
        response,
        lead.rng.uniform(0.1, 0.4),
        model_text=f"Spawned teammate {name}",
        after=after,
    )


def play_side_session(world: World, t: float) -> Iterator[Event]:
    """A short session in another terminal on the same host: start, one prompt, end."""
    rng = world.rng
    me = Agent(world, "main", session_id=random_uuid(rng))
    turn = Turn()
    turn.add(t, me.payload("SessionStart", mode=False, source="startup", model=CLAUDE_VERSION_MODEL))
    me.new_prompt()
    t += rng.uniform(3.0, 15.0)
    turn.add(t, me.payload("UserPromptSubmit", prompt=rng.choice(SIDE_PROMPTS)))
    t += me.think()
    for _ in range(rng.randint(1, 3)):
        t = me.step(turn, t, [tools.read(me) if rng.random() < 0.6 else tools.grep(me)])
    turn.add(
        t,
        _stop(me, "It retries nothing yet; the team is adding that on feature/payment-retries.", team=False),
    )
    turn.add(t + rng.uniform(5.0, 40.0), me.payload("SessionEnd", mode=False, reason="prompt_input_exit"))
    yield from turn.drain()
