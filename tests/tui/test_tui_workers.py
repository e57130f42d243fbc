"""A worker's unexpected failure (a bug, not a store that does not answer) goes to the app's one
handler of those: said on the status line, and the dashboard goes on."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from agentwatch.store.answer import Answer
from agentwatch.tui.app import AgentwatchApp
from tests.tui.test_tui_app import BASE, FakeLive, status_text, team_traffic, until


class BrokenHistory:
    """A HistorySource that breaks its promise: it raises what is no HistoryError."""

    def query(self, sql: str, params: Mapping[str, Any] | None = None) -> Answer:
        raise RuntimeError(f"a bug in the reader ({len(sql)} characters of SQL, {params or 'no'} parameters)")


async def test_an_unexpected_failure_of_a_worker_is_said_and_the_dashboard_goes_on() -> None:
    app = AgentwatchApp(FakeLive(team_traffic()), BrokenHistory(), clock=lambda: BASE)
    async with app.run_test(size=(200, 40)) as pilot:
        await until(pilot, lambda: "truth failed: RuntimeError: a bug in the reader" in status_text(app))
        assert app.is_running and not app.state.store_ok
        await until(pilot, lambda: app.state.feed.total == 7)  # live events shown meanwhile
