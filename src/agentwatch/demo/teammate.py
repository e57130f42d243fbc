"""A teammate: claims a task, works on it, tells a peer and the lead, goes idle until mail comes."""

from __future__ import annotations

from collections.abc import Iterator

from agentwatch.demo import teamwork, tools
from agentwatch.demo.agent import Agent
from agentwatch.demo.scenario import GENERIC_REPORTS, PEER_NOTES, PEER_TARGETS, REPORTS, ROLE_TASKS
from agentwatch.demo.world import Event, Turn, World


def play_teammate(world: World, name: str, t: float) -> Iterator[Event]:
    """The teammate `name`, from its first turn at `t` on, without end."""
    rng = world.rng
    me = Agent(
        world,
        name,
        session_id=world.session_id,
        agent_id=world.teammate_ids[name],
        agent_type=name,
        role=name,
    )
    while True:
        turn = Turn()
        me.new_prompt()
        if not me.task:
            t = _claim_task(me, turn, t)
        for _ in range(rng.randint(2, 6)):
            t = me.step(turn, t, tools.work_calls(me))
        if me.task not in world.tasks:  # the lead closed it
            me.task = ""
        if me.task and rng.random() < 0.35:
            t = me.step(turn, t, [teamwork.task_update(me, me.task, "completed")])
            me.task = ""
        t, last = _report(me, turn, t)
        turn.add(t, me.subagent_stop(last))
        turn.add(t + 0.02, me.payload("TeammateIdle", teammate_name=name, team_name=world.team_name))
        yield from turn.drain()
        wake, mails = world.take_mail(name, t, rng.uniform(20.0, 120.0))
        t = wake + rng.uniform(0.5, 3.0) if mails else t + rng.uniform(20.0, 120.0)


def _claim_task(me: Agent, turn: Turn, t: float) -> float:
    """Take an unowned task, preferably one of the teammate's role; returns when it continues."""
    world = me.world
    rng = me.rng
    free = [tid for tid, task in world.tasks.items() if not task.owner]
    mine = [tid for tid in free if world.tasks[tid].subject.startswith(ROLE_TASKS.get(me.name, ("-",)))]
    if mine or (free and rng.random() < 0.3):
        me.task = rng.choice(mine or free)
        t = me.step(turn, t, [teamwork.task_update(me, me.task, "in_progress")])
    return t


def _report(me: Agent, turn: Turn, t: float) -> tuple[float, str]:
    """Maybe a note to a peer, likely a report to the lead: (when done, the turn's last message)."""
    rng = me.rng
    peers = [n for n in me.world.teammates if n != me.name]
    last = "Nothing new to report; waiting for messages."
    if peers and rng.random() < 0.35:
        summary, message = PEER_NOTES.get(me.name, GENERIC_REPORTS[0])
        target = PEER_TARGETS.get(me.name, "")
        to = target if target in peers else rng.choice(peers)
        t = me.step(turn, t, [teamwork.send(me, to, summary, message)])
        last = message
    if rng.random() < 0.7:
        summary, message = rng.choice(REPORTS.get(me.name, GENERIC_REPORTS))
        t = me.step(turn, t, [teamwork.send(me, "main", summary, message)])
        last = f"Reported to the lead: {message}"
    return t, last
