"""The status line by priority: paused, open alerts and a bus or store that cannot be reached come
first and are never cut; the figures and the cost fill what is left, at 80, 120, 160 and 250
columns."""

from __future__ import annotations

from typing import Any

import pytest

from agentwatch.store import live_roster
from agentwatch.store.answer import Answer, HistoryUnreachable
from agentwatch.tui.app import AgentwatchApp
from agentwatch.tui.roster import Roster
from agentwatch.tui.status import Segment, fit, harness_mark
from tests.tui.test_tui_alerts import alert
from tests.tui.test_tui_app import (
    BASE,
    COST_COLUMNS,
    HOUR_COLUMNS,
    FakeHistory,
    FakeLive,
    answer,
    cost_row,
    painted,
    status_text,
    team_traffic,
    until,
)
from tests.unit.test_tui_model import team_envelopes

WIDTHS = (80, 120, 160, 250)


class CostlyStore(FakeHistory):
    """A store whose figures include what the last hour cost and a team's cost."""

    def query(self, sql: str, params: Any = None) -> Answer:
        if sql == live_roster.HOUR_SQL:
            return answer(HOUR_COLUMNS, [("2026-11-18 10:00:00", 9, 12.5, 0, 90_000)])
        if sql == live_roster.COSTS_SQL:
            lead = self._model().agents()[0]  # an agent of the roster: no agent of usage alone
            row = cost_row(lead.scope, lead.name, "", "session-5e55105e", 9.75, 80_000, host=lead.host)
            return answer(COST_COLUMNS, [row])
        return super().query(sql, params)


def paused_with_alerts() -> AgentwatchApp:
    traffic = team_traffic() + team_envelopes()
    lead = traffic[0]["agent"]
    live = [*traffic, alert("firing", lead), alert("firing", lead, "a2", "loop")]
    app = AgentwatchApp(FakeLive(live), CostlyStore(traffic), clock=lambda: BASE + 10)
    app.bell = lambda: None  # type: ignore[method-assign]
    return app


@pytest.mark.parametrize("width", WIDTHS)
async def test_paused_and_open_alerts_are_never_cut(width: int) -> None:
    app = paused_with_alerts()
    async with app.run_test(size=(width, 30)) as pilot:
        await painted(pilot, app, len(team_traffic()) + len(team_envelopes()))
        await pilot.press("p")
        await until(pilot, lambda: "PAUSED" in status_text(app))
        line = status_text(app)
        assert line.startswith("PAUSED (0 waiting)   2 open alerts (!)"), line
        assert len(line) <= width
        if width >= 160:
            assert "$12.5 since" in line, "the cost fills what is left where it fits"
        app.bus_status(False, "bus away at nats://fake:4222; reconnecting")
        await until(pilot, lambda: "bus away" in status_text(app))
        assert status_text(app).startswith("PAUSED (0 waiting)   2 open alerts (!)   ○ bus away")


async def test_a_store_that_cannot_be_reached_is_said_first() -> None:
    store = FakeHistory(error=HistoryUnreachable("no server answers at nats://fake:4222"))
    app = AgentwatchApp(FakeLive(team_traffic()), store, clock=lambda: BASE)
    async with app.run_test(size=(80, 24)) as pilot:
        await until(pilot, lambda: "no server answers" in status_text(app))
        assert status_text(app).startswith("store: no server answers at nats://fake:4222; retrying")


def test_fit_keeps_every_kept_segment_and_whole_others_in_order() -> None:
    segments = [Segment("KEEP", keep=True), Segment("x" * 10), Segment("y" * 30), Segment("z" * 3)]
    assert fit(segments, 24).plain == "KEEP   xxxxxxxxxx   zzz"
    assert fit(segments, 4).plain == "KEEP", "a kept segment even when nothing else fits"
    assert fit([Segment(""), Segment("a")], 10).plain == "a", "an empty segment takes no room"


@pytest.mark.parametrize("width", WIDTHS)
def test_status_line_snapshot(snap_compare: Any, width: int) -> None:
    async def pause(pilot: Any) -> None:
        await pilot.pause(0.5)
        await pilot.press("p")
        await pilot.pause(0.3)

    assert snap_compare(paused_with_alerts(), terminal_size=(width, 24), run_before=pause)


def test_an_agent_of_another_harness_is_marked_in_the_roster() -> None:
    """The roster's agent cell names Codex's and Gemini's agents' harness; Claude Code's, the
    default, carry no mark (and neither does an agent whose store row is all that is known)."""
    roster = Roster()
    for harness in ("codex", "gemini-cli", "claude-code"):
        at = "2026-11-23T23:44:52.968Z"
        roster.apply({"agent": f"main-{harness}", "event": "SessionStart", "kind": "session_start",
                      "session_id": harness, "harness": harness, "timestamp": at})  # fmt: skip
    marks = {agent.name: harness_mark(agent) for agent in roster.agents()}
    assert marks == {"main-codex": " ·codex", "main-gemini-cli": " ·gemini", "main-claude-code": ""}
    roster.seed([{"host": "", "scope": "codex", "agent": "main-codex", "state_event": "Stop"}])
    assert [harness_mark(a) for a in roster.agents()] == [" ·codex"], "kept across the store's answer"


class TeamsStore(CostlyStore):
    """The last hour's cost and three teams' costs (a long segment at 160 columns)."""

    def query(self, sql: str, params: Any = None) -> Answer:
        found = super().query(sql, params)
        if "'hour' AS what" in sql:
            teams = [("team", "", "", f"release-train-{n}", 3.0 - n, 3.0 - n, 9_000, 0) for n in range(3)]
            return answer(found.columns, [*found.rows, *teams])
        return found


async def test_the_cost_goes_before_the_start_up_note_which_goes_away() -> None:
    """At 160 columns the last hour's cost is shown, saying which hours; the store's "N recent
    events loaded" is said at start-up only, gone at the store's next answer."""
    traffic = team_traffic()
    app = AgentwatchApp(FakeLive(traffic), TeamsStore(traffic), clock=lambda: BASE + 10, refresh_seconds=0.3)
    async with app.run_test(size=(160, 30)) as pilot:
        await painted(pilot, app, len(traffic))
        await until(pilot, lambda: "(last hour and this)" in status_text(app))
        await until(pilot, lambda: "recent events loaded" not in status_text(app))
        assert "$12.5 since " in status_text(app) and " (last hour and this)" in status_text(app)
