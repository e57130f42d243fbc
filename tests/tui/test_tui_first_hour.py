"""What a new user met in the first hour with the dashboard, each kept fixed: history that comes
once the store is up, a filter that gives the keys back, an empty dashboard that says what to do,
the roster's sort on screen."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest
from textual.widgets import Input

from agentwatch.store.answer import Answer, HistoryUnreachable
from agentwatch.tui import app as app_module
from agentwatch.tui import store_side
from agentwatch.tui.app import EMPTY_HINT
from agentwatch.tui.table import Table
from agentwatch.tui.tools_view import ToolsScreen
from tests.tui.test_tui_app import (
    BASE,
    FakeHistory,
    FakeLive,
    feed_rows,
    make_app,
    status_text,
    team_traffic,
    until,
)


class LateStore(FakeHistory):
    """A store that does not answer the first `failures` times (the pipeline is not up yet)."""

    def __init__(self, envelopes: list[dict[str, Any]], failures: int) -> None:
        super().__init__(envelopes)
        self.failures = failures
        self.failed = 0

    def query(self, sql: str, params: Mapping[str, Any] | None = None) -> Answer:
        if self.failed < self.failures:
            self.failed += 1
            raise HistoryUnreachable(
                "no server answers at nats://127.0.0.1:4222: start it with `agentwatch up`"
            )
        return super().query(sql, params)


async def test_history_loads_once_the_store_answers(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(store_side, "HISTORY_RETRY_SECONDS", 0.1)
    traffic = team_traffic()
    stored, live = traffic[:4], traffic[4:]
    store = LateStore(stored, failures=3)
    app = app_module.AgentwatchApp(FakeLive(live), store, clock=lambda: BASE)
    async with app.run_test(size=(160, 40)) as pilot:
        await until(pilot, lambda: "no server answers" in status_text(app) and "retrying" in status_text(app))
        await until(pilot, lambda: "store: 4 recent events loaded" in status_text(app))
        assert store.failed == 3
        await until(pilot, lambda: len(feed_rows(app)) == len(traffic))
        texts = [row[3] for row in feed_rows(app)]
        assert texts == [env["text"] for env in traffic], "history first, then what came live: time order"
        (reviewer,) = app.state.roster.named("reviewer")
        assert reviewer.state == "waiting"


async def test_enter_applies_the_filter_and_gives_the_keys_back() -> None:
    app = make_app(team_traffic(), FakeHistory([]))
    async with app.run_test(size=(160, 40)) as pilot:
        await until(pilot, lambda: len(feed_rows(app)) == len(team_traffic()))
        await pilot.press("slash")
        await pilot.press(*"tool:Grep")
        await pilot.press("enter")
        assert app.focused is app.query_one("#feed", Table), "Enter returns to the feed"
        await until(pilot, lambda: len(feed_rows(app)) == 2)
        await pilot.press("h")
        await until(pilot, lambda: isinstance(app.screen, ToolsScreen))
        assert app.query_one("#filter", Input).value == "tool:Grep", "h opened a view, it was not typed in"


async def test_escape_clears_the_filter_then_leaves_it() -> None:
    app = make_app(team_traffic(), FakeHistory([]))
    async with app.run_test(size=(160, 40)) as pilot:
        await until(pilot, lambda: len(feed_rows(app)) == len(team_traffic()))
        await pilot.press("slash", *"agent:reviewer")
        await until(pilot, lambda: len(feed_rows(app)) == 2)
        await pilot.press("escape")
        assert app.query_one("#filter", Input).value == "" and app.focused is app.query_one("#filter")
        await until(pilot, lambda: len(feed_rows(app)) == len(team_traffic()))
        await pilot.press("escape")
        assert app.focused is app.query_one("#feed", Table)


async def test_an_empty_dashboard_says_what_to_do() -> None:
    app = make_app([], FakeHistory([]))
    async with app.run_test(size=(160, 40)) as pilot:
        await until(pilot, lambda: app.state.store_text == "store: 0 recent events loaded")
        await until(pilot, lambda: EMPTY_HINT in status_text(app))
        assert "agentwatch hooks install" in EMPTY_HINT and "agentwatch demo" in EMPTY_HINT


async def test_the_status_line_says_how_the_roster_is_sorted() -> None:
    app = make_app(team_traffic(), FakeHistory([]))
    async with app.run_test(size=(160, 40)) as pilot:
        await until(pilot, lambda: "sorted by state" in status_text(app))
        await pilot.press("s")
        await until(pilot, lambda: "sorted by recent" in status_text(app))
        assert EMPTY_HINT not in status_text(app)
