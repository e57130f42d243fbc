"""The dashboard's model: roster states and nesting, feed filters, bounded buffers."""

from __future__ import annotations

import json
from typing import Any

from agentwatch.contract import envelopes_from_stdin
from agentwatch.tui.model import (
    FAILED,
    IDLE,
    STOPPED,
    THINKING,
    WAITING,
    WORKING,
    Feed,
    FeedFilter,
    Roster,
    sparkline,
)
from tests.conftest import CAPTURES, load_fixture_file

Env = dict[str, Any]
BASE = 1_795_000_000.0


def envs(payload: dict[str, Any], at: float, environ: dict[str, str] | None = None) -> list[Env]:
    return [env for _, env in envelopes_from_stdin(json.dumps(payload).encode(), environ or {}, now=at)]


def one(payload: dict[str, Any], at: float) -> Env:
    return envs(payload, at)[0]


def call(event: str, tool: str = "Bash", tool_use_id: str = "toolu_1", **extra: Any) -> dict[str, Any]:
    return {"hook_event_name": event, "session_id": "5e55105e-0000", "tool_name": tool,
            "tool_input": {"command": "pytest -q"}, "tool_use_id": tool_use_id, **extra}  # fmt: skip


def test_state_follows_the_agents_turn() -> None:
    roster = Roster()
    seen = []
    steps = [
        ({"hook_event_name": "UserPromptSubmit", "session_id": "5e55105e-0000", "prompt": "go"}, THINKING),
        (call("PreToolUse"), WORKING),
        (call("PermissionRequest"), WAITING),
        (call("PostToolUse", duration_ms=12), THINKING),
        (call("PreToolUse", tool_use_id="toolu_2"), WORKING),
        (call("PostToolUseFailure", tool_use_id="toolu_2", error="Exit code 1"), THINKING),
        ({"hook_event_name": "Stop", "session_id": "5e55105e-0000"}, IDLE),
        ({"hook_event_name": "StopFailure", "session_id": "5e55105e-0000", "error": "rate_limit"}, FAILED),
        ({"hook_event_name": "SessionEnd", "session_id": "5e55105e-0000", "reason": "other"}, STOPPED),
    ]
    for i, (payload, _) in enumerate(steps):
        agent = roster.apply(one(payload, BASE + i))
        assert agent is not None
        seen.append(agent.state)
    assert seen == [state for _, state in steps]
    agent = roster.get("main-5e55105e")
    assert agent is not None
    assert (agent.tool_calls, agent.errors, agent.events) == (2, 2, len(steps))


def test_waiting_for_permission_shows_the_tool_and_how_long() -> None:
    roster = Roster()
    roster.apply(one(call("PreToolUse", tool="WebFetch"), BASE))
    agent = roster.apply(one(call("PermissionRequest", tool="WebFetch"), BASE + 2))
    assert agent is not None and agent.state == WAITING and agent.tool == "WebFetch"
    assert agent.tool_running_for(BASE + 10) == 10.0


def test_subagents_and_teammates_nest_under_their_lead() -> None:
    roster = Roster()
    for i, rec in enumerate(load_fixture_file(CAPTURES)):
        for env in envs(rec["payload"], BASE + i, rec.get("hook_env", {})):
            roster.apply(env)
    rows = roster.ordered("name")
    names = [(depth, agent.name) for depth, agent in rows]
    lead = names.index((0, "main-2421d2e0"))
    assert names[lead + 1] == (1, "general-purpose-fd10a9f3")
    teammate = next(a for _, a in rows if a.name == "researcher")
    assert teammate.parent == "main-96f21a61" and teammate.state == IDLE
    assert (1, "researcher") in names
    assert teammate.messages == 1
    assert len(rows) == len(roster), "every agent appears exactly once"


def test_roster_filter_and_sort() -> None:
    roster = Roster()
    roster.apply(one({**call("PreToolUse"), "session_id": "aaaaaaaa-1"}, BASE))
    roster.apply(one({"hook_event_name": "StopFailure", "session_id": "bbbbbbbb-1"}, BASE + 1))
    roster.apply(one({"hook_event_name": "Stop", "session_id": "cccccccc-1"}, BASE + 2))
    assert [a.name for _, a in roster.ordered("state")] == ["main-bbbbbbbb", "main-aaaaaaaa", "main-cccccccc"]
    assert [a.name for _, a in roster.ordered("recent")] == [
        "main-cccccccc",
        "main-bbbbbbbb",
        "main-aaaaaaaa",
    ]
    assert [a.name for _, a in roster.ordered(text="bash")] == ["main-aaaaaaaa"]


def test_feed_is_bounded_and_filters() -> None:
    feed = Feed(maxlen=100)
    for i in range(250):
        tool = "Bash" if i % 2 else "Read"
        payload = call("PreToolUse", tool=tool, tool_use_id=f"toolu_{i}", session_id=f"{i % 3}aaaaaaa-x")
        payload["tool_input"] = {"command": f"echo {i}", "file_path": f"/p/f{i}.py"}
        feed.add(one(payload, BASE + i))
    assert len(feed) == 100 and feed.total == 250
    assert feed.lines()[0].text == "Read /p/f150.py"
    assert {line.tool for line in feed.lines(FeedFilter(tool="Bash"))} == {"Bash"}
    assert [line.text for line in feed.lines(FeedFilter(text="echo 249"))] == ["$ echo 249"]
    assert {line.agent for line in feed.lines(FeedFilter(agent="main-1aaaaaaa"))} == {"main-1aaaaaaa"}
    assert len(feed.lines(FeedFilter(event="tool_call"), last=5)) == 5


def test_activity_sparkline() -> None:
    roster = Roster()
    for i in range(40):
        roster.apply(one({"hook_event_name": "Notification", "session_id": "5e55105e-0000"}, BASE + i * 0.5))
    agent = roster.get("main-5e55105e")
    assert agent is not None
    line = sparkline(agent.activity)
    assert len(line) == 30 and line[-1] != " " and line[0] == " "
    assert sparkline([0, 0]) == "  " and sparkline([1, 8]) == "▁█"
