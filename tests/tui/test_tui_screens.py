"""The live view's screens as a person uses them: pause, keys and the palette, over deterministic
fake sources (tests/tui/test_tui_app.py)."""

from __future__ import annotations

from typing import Any

import pytest
from textual.widgets import Input

from agentwatch.tui.app import AgentwatchApp
from agentwatch.tui.model import counted
from tests.tui.test_tui_app import (
    BASE,
    FakeHistory,
    FakeLive,
    env_of,
    feed_rows,
    painted,
    roster_rows,
    team_traffic,
    until,
)


def more_calls(at: float) -> list[dict[str, Any]]:
    """The lead's next three tool calls, as the store comes to hold them."""
    out: list[dict[str, Any]] = []
    session = team_traffic()[0]["session_id"]
    for i in range(3):
        call = {"tool_name": "Read", "tool_input": {"file_path": f"f{i}.py"}, "tool_use_id": f"toolu_m{i}"}
        out += env_of(
            {"session_id": session, "cwd": "/repo", "hook_event_name": "PreToolUse", **call}, at + i
        )
    return out


async def test_pause_holds_the_roster_still_and_it_catches_up_after() -> None:
    """p: the store's refreshes change nothing in the roster (calls, states, order) until p again."""
    traffic = team_traffic()
    store = FakeHistory(list(traffic))
    app = AgentwatchApp(FakeLive(traffic), store, clock=lambda: BASE + 10, refresh_seconds=0.2)
    async with app.run_test(size=(160, 40)) as pilot:
        await painted(pilot, app, len(traffic))
        await until(pilot, lambda: app.state.truth_in_once)
        before = roster_rows(app)
        await pilot.press("p")
        store.envelopes += more_calls(BASE + 5)
        asked = len(store.asked)
        await until(pilot, lambda: len(store.asked) > asked + 4)  # two refreshes answered at least
        await pilot.pause(0.3)
        assert roster_rows(app) == before, "paused: the roster holds still"
        await pilot.press("p")
        await until(pilot, lambda: roster_rows(app) != before)
        lead = next(r for r in roster_rows(app) if r[0].startswith("main"))
        was = next(r for r in before if r[0].startswith("main"))
        assert lead != was, "unpaused: the store's calls are shown"


KILLED = "dead0000-1111-4000-8000-000000000000"


def killed_session() -> list[dict[str, Any]]:
    """A session killed 8 minutes ago while its agent waited for permission (lost at 10)."""
    base = {"session_id": KILLED, "cwd": "/old"}
    steps: list[dict[str, Any]] = [
        {"hook_event_name": "UserPromptSubmit", "prompt": "Deploy"},
        {
            "hook_event_name": "PermissionRequest",
            "tool_name": "Bash",
            "tool_input": {"command": "make deploy"},
        },
    ]
    return [env for i, step in enumerate(steps) for env in env_of({**base, **step}, BASE - 480 + i)]


def with_a_killed_session() -> AgentwatchApp:
    return AgentwatchApp(FakeLive(killed_session() + team_traffic()), clock=lambda: BASE + 10)


async def test_a_quiet_session_sinks_below_the_live_ones() -> None:
    """Live first: a session silent for minutes (not lost yet) sorts below agents working now,
    whatever the sort key."""
    app = with_a_killed_session()
    async with app.run_test(size=(160, 40)) as pilot:
        await painted(pilot, app, len(killed_session()) + len(team_traffic()))
        for _ in range(4):  # every sort key
            rows = roster_rows(app)
            assert rows[-1][0].startswith("main-dead0000"), (app.state.sort, [r[0] for r in rows])
            await pilot.press("s")
            await pilot.pause(0.2)


@pytest.mark.parametrize("width", [80, 160, 250])
def test_quiet_session_order_snapshot(snap_compare: Any, width: int) -> None:
    async def settle(pilot: Any) -> None:
        await pilot.pause(0.5)

    assert snap_compare(with_a_killed_session(), terminal_size=(width, 30), run_before=settle)


async def test_escape_clears_an_applied_feed_filter() -> None:
    """/ text Enter: the filter is applied and the keys are the feed's; Escape clears it."""
    traffic = team_traffic()
    app = AgentwatchApp(FakeLive(traffic), clock=lambda: BASE + 10)
    async with app.run_test(size=(160, 40)) as pilot:
        await painted(pilot, app, len(traffic))
        await pilot.press("slash", *"tool:Grep", "enter")
        await until(pilot, lambda: len(feed_rows(app)) == 2)
        assert app.focused is app.query_one("#feed")
        await pilot.press("escape")
        await until(pilot, lambda: len(feed_rows(app)) == len(traffic))
        assert app.query_one("#filter", Input).value == ""


async def test_the_palette_offers_cost_sessions_and_search() -> None:
    app = AgentwatchApp(FakeLive([]), FakeHistory([]), clock=lambda: BASE)
    async with app.run_test(size=(160, 40)):
        titles = {command.title for command in app.get_system_commands(app.screen)}
        assert {"Cost", "Sessions", "Search"} <= titles, titles


async def test_ctrl_c_quits_without_a_toast() -> None:
    """Ctrl-C leaves the dashboard (and `up --dashboard` stops what it started), as in any terminal
    program; no "press ctrl+q" toast."""
    app = AgentwatchApp(FakeLive([]), clock=lambda: BASE)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("ctrl+c")
        await pilot.pause(0.2)
        assert not app.is_running and not app._notifications


def test_one_call_one_subagent() -> None:
    assert [counted(n, "call") for n in (0, 1, 2, 1200)] == ["0 calls", "1 call", "2 calls", "1,200 calls"]
    assert counted(1, "subagent") == "1 subagent"
