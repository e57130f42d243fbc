"""An idle dashboard costs the store next to nothing: while the store's mark (queries.STORE_MARK)
does not move, a refresh asks for the mark alone; once it moves, for everything again."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from agentwatch.store import live_roster, queries
from agentwatch.store.answer import Answer
from agentwatch.tui import truth
from agentwatch.tui.app import AgentwatchApp
from tests.tui.test_tui_app import BASE, FakeHistory, FakeLive, answer, team_traffic, until


class MarkedStore(FakeHistory):
    """A store whose mark is `self.count` events."""

    def __init__(self, envelopes: list[dict[str, Any]]) -> None:
        super().__init__(envelopes)
        self.count = 7

    def query(self, sql: str, params: Mapping[str, Any] | None = None) -> Answer:
        if sql == queries.STORE_MARK.sql:
            self.asked.append(sql)
            return answer(("events", "messages", "usage", "alerts"), [(self.count, 0, 0, 0)])
        return super().query(sql, params)

    def whole(self) -> int:
        """How many whole answers were asked for (each starts with the window's scopes)."""
        return self.asked.count(live_roster.SCOPES_SQL)


async def test_a_refresh_asks_only_the_mark_until_it_moves() -> None:
    store = MarkedStore(team_traffic())
    app = AgentwatchApp(FakeLive([]), store, clock=lambda: BASE, refresh_seconds=0.05)
    async with app.run_test(size=(160, 40)) as pilot:
        await until(pilot, lambda: store.whole() == 1 and store.asked.count(queries.STORE_MARK.sql) >= 10)
        assert store.whole() == 1, "ten refreshes, one whole answer: the mark did not move"
        asked = len(store.asked)
        await until(pilot, lambda: store.asked.count(queries.STORE_MARK.sql) >= 20)
        assert set(store.asked[asked:]) == {queries.STORE_MARK.sql}, "nothing else while it stays"
        store.count += 1  # something was stored
        await until(pilot, lambda: store.whole() == 2)
        assert app.state.store_ok


async def test_the_whole_answer_is_asked_again_after_a_while_however_still(monkeypatch: Any) -> None:
    monkeypatch.setattr(truth, "FULL_EVERY_SECONDS", 0.3)
    store = MarkedStore(team_traffic())
    app = AgentwatchApp(FakeLive([]), store, clock=lambda: BASE, refresh_seconds=0.05)
    async with app.run_test(size=(160, 40)) as pilot:
        await until(pilot, lambda: store.whole() >= 3)
