"""The dashboard's alerts: the open count on the status line, the bell, the roster mark, the alerts
view (key and palette) and Enter to the agent."""

from __future__ import annotations

from typing import Any

from agentwatch.tui.alerts_view import Alerts, AlertsScreen
from agentwatch.tui.table import Table
from agentwatch.tui.views import AgentScreen
from tests.tui.test_tui_app import SESSION, make_app, painted, roster_rows, status_text, team_traffic, until


def alert(state: str, agent: str, alert_id: str = "a1", rule: str = "stuck_tool") -> dict[str, Any]:
    return {
        "id": alert_id, "rule": rule, "severity": "warning", "state": state, "agent": agent, "team": "",
        "session_id": SESSION, "host": "", "summary": f"{agent} has been inside Bash for 30s", "details": {},
        "since": "2026-11-23T10:00:00.000Z", "at": "2026-11-23T10:00:30.000Z",
    }  # fmt: skip


async def test_an_alert_is_counted_marked_rung_and_resolved() -> None:
    traffic = team_traffic()
    lead = traffic[0]["agent"]
    app = make_app([*traffic, alert("firing", lead)])
    rings: list[int] = []
    app.bell = lambda: rings.append(1)  # type: ignore[method-assign]
    async with app.run_test(size=(160, 40)) as pilot:
        await painted(pilot, app, len(traffic))
        await until(pilot, lambda: "1 open alert" in status_text(app))
        assert rings == [1]
        assert any(row[0].startswith("! ") and lead in row[0] for row in roster_rows(app))
        assert app.state.feed.total == len(traffic)  # an alert is not an event of the feed
        live = app.live
        live.deliver(alert("firing", lead))  # type: ignore[attr-defined]
        live.deliver(alert("resolved", lead))  # type: ignore[attr-defined]
        await until(pilot, lambda: "open alert" not in status_text(app))
        assert rings == [1]  # the same alert again rings nothing
        assert not any(row[0].startswith("! ") for row in roster_rows(app))


async def test_the_alerts_view_and_enter_to_the_agent() -> None:
    traffic = team_traffic()
    lead = traffic[0]["agent"]
    app = make_app([*traffic, alert("firing", lead), alert("firing", "", "a2", "hook_health")])
    app.bell = lambda: None  # type: ignore[method-assign]
    async with app.run_test(size=(160, 40)) as pilot:
        await painted(pilot, app, len(traffic))
        await until(pilot, lambda: "2 open alerts" in status_text(app))
        await pilot.press("exclamation_mark")
        await until(pilot, lambda: isinstance(app.screen, AlertsScreen))
        table = app.screen.query_one("#alerts", Table)
        rows = [[str(c) for c in table.get_row_at(i)] for i in range(table.row_count)]
        assert {r[3] for r in rows[:2]} == {"stuck_tool", "hook_health"} and all(
            r[1] == "firing" for r in rows[:2]
        )
        screen = app.screen
        assert isinstance(screen, AlertsScreen)
        first = screen.shown.index(next(a for a in screen.shown if a["agent"] == lead))
        table.move_cursor(first)
        await pilot.press("enter")
        await until(pilot, lambda: isinstance(app.screen, AgentScreen))
        agent_screen = app.screen
        assert isinstance(agent_screen, AgentScreen) and agent_screen.agent_name == lead


def test_the_bell_can_be_turned_off() -> None:
    assert Alerts({}).bell and not Alerts({"AGENTWATCH_ALERT_BELL": "0"}).bell
    alerts = Alerts({})
    assert alerts.take(alert("firing", "x")) and not alerts.take(alert("firing", "x"))
    x = ("", SESSION, "x")
    assert alerts.status() == "1 open alert" and alerts.marked(x)
    assert not alerts.take(alert("resolved", "x")) and alerts.status() == "" and not alerts.marked(x)
    assert not alerts.take(alert("firing", "x")), (
        "resolved is its last state: a late firing copy changes nothing"
    )
    assert [a["state"] for a in alerts.rows()] == ["resolved"], "one row per alert"
