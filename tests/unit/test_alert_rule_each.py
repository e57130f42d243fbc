"""Every alert rule on its own, without a bus: when it stays quiet, when it fires, and when it
resolves (the engine's `tick` says each change once). One case per rule in CASES."""

from __future__ import annotations

from typing import Any

import pytest

from agentwatch.consumers.rules import DEFAULTS, Engine, iso, parse_rules

T = 1_000.0  # a time well after the epoch: 0 reads as "no time"

# (seconds after T, event, envelope fields); the event "costs" hands the engine cost rows instead.
Step = tuple[float, str, dict[str, Any]]


def call(t: float, use: str, event: str = "PreToolUse", **data: Any) -> Step:
    return (t, event, {"tool_name": "Bash", "tool_use_id": use, "data": data})


def costs(t: float, usd: float) -> Step:
    return (t, "costs", {"rows": [("session", "s", usd), ("agent", "a", None)]})


def task(t: float, event: str) -> Step:
    return (t, event, {"data": {"task_id": "t1", "team_name": "crew"}})


def spool(t: float, size: int) -> Step:
    return (t, "Stop", {"spool_bytes": size})


# rule -> (its limits, the steps before the quiet tick, its time, the steps before the tick that
# fires, its time, the steps before the tick that resolves, its time).
CASES: dict[str, tuple[str, list[Step], float, list[Step], float, list[Step], float]] = {
    "stuck_tool": ("floor_s = 10", [call(0, "u1")], 5, [], 20, [call(21, "u1", "PostToolUse")], 22),
    "silent_agent": ("after_s = 30", [(0, "UserPromptSubmit", {})], 10, [], 40, [(41, "Stop", {})], 42),
    "loop": (
        "repeats = 3",
        [call(0, "u0", tool_input={"c": 1}), call(1, "u1", tool_input={"c": 1})], 2,
        [call(3, "u3", tool_input={"c": 1})], 4,
        [call(5, "u5", tool_input={"c": 2})], 6,
    ),
    "failure_burst": (
        "failures = 3\nwindow_s = 60",
        [call(0, "u0", "PostToolUseFailure"), call(1, "u1", "PostToolUseFailure")], 2,
        [call(3, "u3", "PostToolUseFailure")], 4,
        [], 100,  # the failures left the window
    ),
    "waiting_for_user": (
        "after_s = 30",
        [call(0, "u1", "PermissionRequest")], 10,
        [], 40,
        [call(41, "u1", "PermissionDenied")], 42,
    ),
    "idle_with_open_tasks": (
        "after_s = 30",
        [task(0, "TaskCreated"), (10, "TeammateIdle", {})], 20,
        [], 50,
        [task(51, "TaskCompleted")], 52,
    ),
    "budget": ("session_usd = 10", [costs(0, 5.0)], 1, [costs(2, 12.0)], 3, [costs(4, 8.0)], 5),
    "hook_health": ("spool_bytes = 1000", [spool(0, 10)], 1, [spool(2, 5000)], 3, [spool(4, 0)], 5),
}  # fmt: skip


def test_every_rule_has_a_case() -> None:
    assert set(CASES) == set(DEFAULTS)


@pytest.mark.parametrize("rule", CASES)
def test_the_rule_stays_quiet_fires_and_resolves(rule: str) -> None:
    limits, before, quiet_at, firing, fire_at, resolving, resolve_at = CASES[rule]
    eng = Engine(parse_rules(f"[{rule}]\n{limits}\n"))

    def play(steps: list[Step], at: float) -> list[tuple[str, str]]:
        for t, event, fields in steps:
            if event == "costs":
                eng.observe_costs(fields["rows"])
                continue
            base = {"id": f"{event}{t}", "timestamp": iso(T + t), "event": event}
            eng.observe({**base, "agent": "a", "team": "crew", "session_id": "s", "host": "h", **fields})
        return [(alert["rule"], alert["state"]) for alert in eng.tick(T + at)]

    assert play(before, quiet_at) == []
    assert play(firing, fire_at) == [(rule, "firing")]
    assert play(resolving, resolve_at) == [(rule, "resolved")]


@pytest.mark.parametrize("environ", [{}, {"GENIE_TEAM": "demo"}])
def test_a_teammates_completion_meets_its_leads_creation(environ: dict[str, str]) -> None:
    """The lead creates three tasks, its teammate completes two and goes idle: one is open, however
    the team is named (GENIE_TEAM, or the session's implicit team the teammate's payload names)."""
    from tests.team_tasks import AT, team_envelopes

    eng = Engine(parse_rules("[idle_with_open_tasks]\nafter_s = 30\n"))
    for env in team_envelopes(3, 2, environ=environ):
        eng.observe(env)
    fired = [a for a in eng.tick(AT + 100) if a["rule"] == "idle_with_open_tasks"]
    assert [(a["agent"], a["details"]["open_tasks"]) for a in fired] == [("researcher", 1)], fired
    assert fired[0]["summary"].endswith("with 1 open task")
