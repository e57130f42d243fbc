"""The Agent tool: subagents in the foreground (the call lasts their whole life) or in the
background (the call returns at once; a task notification reaches the lead when they finish)."""

from __future__ import annotations

from agentwatch.demo import tools
from agentwatch.demo.agent import Agent
from agentwatch.demo.scenario import CLAUDE_VERSION_MODEL, SUBAGENT_FINDINGS
from agentwatch.demo.world import Mail, ToolCall, Turn, random_hex


def foreground(parent: Agent, agent_type: str, description: str, prompt: str) -> ToolCall:
    """An `agent_type` subagent that works while the call runs; its last message is the result."""
    rng = parent.rng
    sub = _new_subagent(parent, agent_type)
    call = ToolCall("Agent", {"description": description, "prompt": prompt, "subagent_type": agent_type})

    def inside(turn: Turn, start: float) -> float:
        end, last, used = _run(turn, start + rng.uniform(0.02, 0.2), sub)
        total_ms = int((end - start) * 1000)
        call.response = {
            "status": "completed",
            "prompt": prompt,
            "agentId": sub.agent_id,
            "agentType": agent_type,
            "content": [{"type": "text", "text": last}],
            "resolvedModel": CLAUDE_VERSION_MODEL,
            "totalDurationMs": total_ms,
            "totalTokens": rng.randint(3000, 60000),
            "totalToolUseCount": used,
            "usage": {
                "input_tokens": rng.randint(2000, 50000),
                "output_tokens": rng.randint(200, 3000),
            },
        }
        call.model_text = last
        return end + rng.uniform(0.01, 0.1)

    call.inside = inside
    return call


def background(parent: Agent, description: str, prompt: str) -> ToolCall:
    """A general-purpose subagent launched to run on its own: its events join the world once the
    call is done, and its result comes back to the lead as a task notification."""
    world = parent.world
    sub = _new_subagent(parent, "general-purpose")
    output = f"{world.tasks_dir(parent.session_id)}/{sub.agent_id}.output"
    response = {
        "isAsync": True,
        "status": "async_launched",
        "agentId": sub.agent_id,
        "description": description,
        "prompt": prompt,
        "outputFile": output,
        "canReadOutputFile": True,
        "canContinueAgent": True,
    }
    inp = {
        "description": description,
        "prompt": prompt,
        "subagent_type": "general-purpose",
        "run_in_background": True,
    }
    call = ToolCall(
        "Agent", inp, response, parent.rng.uniform(0.01, 0.05), model_text=f"Launched {sub.agent_id}"
    )

    def after(end: float) -> None:
        turn = Turn()
        stop, last, used = _run(turn, end + parent.rng.uniform(0.2, 1.0), sub)
        note = (
            f"<task-notification>\n<task-id>{sub.agent_id}</task-id>\n<output-file>{output}</output-file>\n"
            f'<status>completed</status>\n<summary>Agent "{description}" finished</summary>\n'
            f"<result>{last}</result>\n<usage><tool_uses>{used}</tool_uses>"
            f"<duration_ms>{int((stop - end) * 1000)}</duration_ms></usage>\n</task-notification>"
        )
        world.deliver("main", Mail(stop, sub.agent_id, description, note, "task"))
        world.spawn(turn.drain())

    call.after = after
    return call


def _new_subagent(parent: Agent, agent_type: str) -> Agent:
    """A subagent of `parent`'s session, answering the same prompt."""
    sub = Agent(
        parent.world,
        agent_type,
        session_id=parent.session_id,
        agent_id="a" + random_hex(parent.rng, 16),
        agent_type=agent_type,
        role=agent_type,
    )
    sub.prompt_id = parent.prompt_id
    return sub


def _run(turn: Turn, start: float, sub: Agent) -> tuple[float, str, int]:
    """A subagent's whole life into `turn`: SubagentStart, its steps, SubagentStop.
    Returns (end time, its last message, tool calls made)."""
    rng = sub.rng
    turn.add(start, sub.payload("SubagentStart", mode=False))
    t = start + rng.uniform(0.8, 3.0)
    used = 0
    for _ in range(rng.randint(1, 4)):
        calls = tools.work_calls(sub)
        used += len(calls)
        t = sub.step(turn, t, calls)
    last = rng.choice(SUBAGENT_FINDINGS)
    turn.add(t, sub.subagent_stop(last))
    return t, last, used
