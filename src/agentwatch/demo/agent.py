"""One simulated agent: who it is, the hook payloads it fires, and how its tool calls play out.

`Agent.step` is where Claude Code's firing order lives: per tool call PreToolUse, maybe a
PermissionRequest (and a Notification while the user thinks), then PostToolUse or
PostToolUseFailure; and once every call of the batch is done, PostToolBatch.
"""

from __future__ import annotations

from typing import Any

from agentwatch.demo.scenario import DENIED
from agentwatch.demo.world import Json, ToolCall, Turn, World, random_b62, random_uuid


class Agent:
    """The lead (no agent id), a teammate or a subagent of one session."""

    def __init__(
        self,
        world: World,
        name: str,
        *,
        session_id: str,
        agent_id: str = "",
        agent_type: str = "",
        role: str = "",
    ) -> None:
        self.world = world
        self.rng = world.rng
        self.name = name
        self.session_id = session_id
        self.agent_id = agent_id
        self.agent_type = agent_type
        self.role = role or agent_type or "lead"
        self.prompt_id = ""
        self.task = ""  # id of the task this agent works on

    @property
    def is_teammate(self) -> bool:
        return bool(self.agent_id) and self.world.teammate_ids.get(self.name) == self.agent_id

    def payload(self, event: str, *, mode: bool = True, ctx: bool = True, **fields: Any) -> Json:
        """A hook payload of `event`: the common fields, then `fields`. `mode`: it carries the
        permission mode; `ctx`: it carries the agent's id and type (for subagents and teammates)."""
        p: Json = {
            "session_id": self.session_id,
            "transcript_path": self.world.transcript(self.session_id),
            "cwd": self.world.cwd,
        }
        if self.prompt_id:
            p["prompt_id"] = self.prompt_id
        if mode:
            p["permission_mode"] = "default"
        if ctx and self.agent_id:
            p["agent_id"] = self.agent_id
            p["agent_type"] = self.agent_type
        p["hook_event_name"] = event
        p.update(fields)
        return p

    def new_prompt(self) -> None:
        self.prompt_id = random_uuid(self.rng)

    def think(self) -> float:
        """How long the model takes before its next step."""
        return self.rng.uniform(0.8, 6.0)

    def subagent_stop(self, last_message: str, *, agent_id: str = "") -> Json:
        """SubagentStop of this agent's work; with `agent_id`, of a helper without a type of its
        own that this agent ran (the compaction's summarizer)."""
        helper: Json = {"agent_id": agent_id, "agent_type": ""} if agent_id else {}
        return self.payload(
            "SubagentStop",
            **helper,
            stop_hook_active=False,
            agent_transcript_path=self.world.subagent_transcript(self.session_id, agent_id or self.agent_id),
            last_assistant_message=last_message,
            background_tasks=[],
            session_crons=[],
        )

    def step(self, turn: Turn, t: float, calls: list[ToolCall]) -> float:
        """Issue `calls` in parallel at `t`; returns the time the model continues after the batch."""
        batch: list[Json] = []
        ends = [t]
        for i, call in enumerate(calls):
            tool_use_id = f"toolu_01{random_b62(self.rng, 22)}"
            end, seen = self._play(turn, t + 0.002 * i, call, tool_use_id)
            ends.append(end)
            batch.append(
                {
                    "tool_name": call.tool,
                    "tool_input": call.tool_input,
                    "tool_use_id": tool_use_id,
                    "tool_response": seen,
                }
            )
        done = max(ends) + self.rng.uniform(0.005, 0.03)
        turn.add(done, self.payload("PostToolBatch", tool_calls=batch))
        return done + self.think()

    def _play(self, turn: Turn, t: float, call: ToolCall, tool_use_id: str) -> tuple[float, str]:
        """One call's hooks from its PreToolUse at `t`: (when it is over, what the model sees of it)."""
        pre_input = call.pre_input or call.tool_input
        turn.add(
            t,
            self.payload("PreToolUse", tool_name=call.tool, tool_input=pre_input, tool_use_id=tool_use_id),
        )
        start = t + self.rng.uniform(0.005, 0.03)
        if call.ask:
            start, granted = self._ask_permission(turn, start, call, pre_input)
            if not granted:  # no PostToolUse: the model hears of it in the batch
                return start, DENIED
        end = call.inside(turn, start) if call.inside else start + call.seconds
        return end, self._finish(turn, start, end, call, tool_use_id)

    def _ask_permission(self, turn: Turn, t: float, call: ToolCall, pre_input: Json) -> tuple[float, bool]:
        """PermissionRequest at `t`, and a Notification if the user takes a while:
        (when the user answers, whether the call may run)."""
        turn.add(
            t,
            self.payload(
                "PermissionRequest",
                tool_name=call.tool,
                tool_input=pre_input,
                permission_suggestions=[call.suggestion] if call.suggestion else [],
            ),
        )
        wait = self.rng.uniform(3.0, 90.0)
        if wait > 6.0:
            turn.add(
                t + 6.0,
                self.payload(
                    "Notification",
                    mode=False,
                    ctx=False,
                    message=f"Claude needs your permission to use {call.tool}",
                    notification_type="permission_prompt",
                ),
            )
        return t + wait, self.rng.random() >= 0.25

    def _finish(self, turn: Turn, start: float, end: float, call: ToolCall, tool_use_id: str) -> str:
        """PostToolUse, or PostToolUseFailure, at `end`; returns what the model sees of the result."""
        duration_ms = max(1, int((end - start) * 1000))
        if call.error:
            turn.add(
                end,
                self.payload(
                    "PostToolUseFailure",
                    tool_name=call.tool,
                    tool_input=call.tool_input,
                    tool_use_id=tool_use_id,
                    error=call.error,
                    is_interrupt=False,
                    duration_ms=duration_ms,
                ),
            )
            return call.error
        turn.add(
            end,
            self.payload(
                "PostToolUse",
                tool_name=call.tool,
                tool_input=call.tool_input,
                tool_response=call.response,
                tool_use_id=tool_use_id,
                duration_ms=duration_ms,
            ),
        )
        seen = call.model_text or "(completed)"
        if call.after is not None:
            call.after(end)
        return seen
