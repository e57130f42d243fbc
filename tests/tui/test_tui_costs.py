"""Costs in the dashboard: per agent (its own, and with its subagents), per team, and the last
hour, as the store priced them; asked again soon after token usage arrives on the bus."""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from typing import Any

import pytest

from agentwatch.format import money
from agentwatch.store import live_roster
from agentwatch.store.answer import Answer
from agentwatch.tui import app as app_module
from agentwatch.tui.costs import Costs
from tests.tui.test_tui_app import (
    BASE,
    COST_COLUMNS,
    HOUR_COLUMNS,
    SESSION,
    FakeHistory,
    FakeLive,
    answer,
    cost_row,
    roster_rows,
    status_text,
    team_traffic,
    until,
)

LEAD, SUB, TEAM = "main-5e55105e", "Explore-fd10a9f3", "session-5e55105e"


class PricedStore(FakeHistory):
    """Answers the dashboard's cost query with what `lead_usd` says the lead cost so far."""

    def __init__(self, envelopes: list[dict[str, Any]]) -> None:
        super().__init__(envelopes)
        self.lead_usd = 1.2
        self.cost_asks = 0

    def query(self, sql: str, params: Mapping[str, Any] | None = None) -> Answer:
        if sql == live_roster.SCOPES_SQL:
            return answer(("host", "scope"), [("", SESSION), ("", "another-session")])
        if sql == live_roster.HOUR_SQL:
            return answer(HOUR_COLUMNS, [("2026-11-18 10:00:00", 4, 0.75, 0, 20_000)])
        if sql != live_roster.COSTS_SQL:
            return super().query(sql, params)
        self.cost_asks += 1
        rows = [
            cost_row(SESSION, LEAD, "", TEAM, self.lead_usd, 90_000),
            cost_row(SESSION, SUB, LEAD, TEAM, 1.3, 50_000),
            cost_row(SESSION, "reviewer", "", TEAM, 0.0, 4_000, unpriced=3),
            cost_row("another-session", "reviewer", "", "", 9.0, 4_000),
        ]
        return answer(COST_COLUMNS, rows)


def cost_cells(app: app_module.AgentwatchApp) -> dict[str, tuple[str, str]]:
    labels = list(app.query_one("#roster").column_labels)  # type: ignore[attr-defined]
    cost, subs = labels.index("cost"), labels.index("+subs")
    return {row[0].strip(" └"): (row[cost], row[subs]) for row in roster_rows(app)}


async def test_the_roster_and_status_line_show_what_agents_cost(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(app_module, "COST_AFTER_USAGE_SECONDS", 0.1)
    store = PricedStore([])
    live = FakeLive(team_traffic())
    # Only usage makes it ask again: the regular refresh is an hour away.
    app = app_module.AgentwatchApp(live, store, clock=lambda: BASE, refresh_seconds=3600.0)
    async with app.run_test(size=(200, 40)) as pilot:
        await until(pilot, lambda: cost_cells(app).get(LEAD) == ("$1.20", "$2.50"))
        assert cost_cells(app)[SUB] == ("$1.30", "")
        assert cost_cells(app)["reviewer"] == ("unpriced", ""), (
            "unknown price: never $0; not the other reviewer's"
        )
        # Since the start of the previous UTC hour (the store's cost rollup is hourly), in local time.
        since = dt.datetime(2026, 11, 18, 10, tzinfo=dt.UTC).astimezone()
        await until(pilot, lambda: f"$0.75 since {since:%H:%M}" in status_text(app))
        assert f"{TEAM} $2.50" in status_text(app)
        asked = store.cost_asks
        store.lead_usd = 2.0
        assert live.deliver is not None
        live.deliver({"v": 1, "id": "01USAGE", "timestamp": "2026-11-18T11:06:40.000Z", "event": "Usage",
                      "kind": "usage", "agent": LEAD, "session_id": "s", "input_tokens": 10})  # fmt: skip
        await until(pilot, lambda: cost_cells(app).get(LEAD) == ("$2.00", "$3.30"))
        assert store.cost_asks == asked + 1, "one usage envelope, one question"
        assert all("Usage" not in row for row in roster_rows(app)), "usage is no feed line"


def test_money_is_never_zero_for_an_unknown_price() -> None:
    assert (money(0.4213), money(12.34), money(1234.5), money(None, 10), money(None, 0)) == (
        "$0.42",
        "$12.3",
        "$1,234",
        "unpriced",
        "",
    )
    costs = Costs()
    costs.update([["agent", "h", "s", "a", 1.0, 1.0, 5, 0], ["agent", "h", "s", "b", 0.5, 2.25, 5, 0]])
    a, b, zz = ("h", "s", "a"), ("h", "s", "b"), ("h", "s", "zz")
    assert (costs.own(a), costs.with_subagents(a), costs.with_subagents(b), costs.own(zz)) == (
        "$1.00",
        "",
        "$2.25",
        "",
    )
