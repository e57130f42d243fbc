"""The dashboard's side of the store: its answer for every figure, asked at open and every few
seconds (tui/truth.py says what and how), the recent history for the feed, the costs soon after
usage arrives, and what the status line says when the store does not answer.

A base of the app (AgentwatchApp), like tui/actions.py: the workers run on the app.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from textual import work

from agentwatch.store import queries
from agentwatch.store.answer import HistoryError
from agentwatch.tui import truth
from agentwatch.tui.alerts_view import Alerts
from agentwatch.tui.costs import Costs
from agentwatch.tui.model import Feed
from agentwatch.tui.roster import Roster, Unconfirmed
from agentwatch.tui.sources import HistorySource, answer_envelopes
from agentwatch.tui.team import Team

if TYPE_CHECKING:
    from textual.app import App

    _Base = App[None]
else:
    _Base = object

# How often the store is asked again while it does not answer (a dashboard opened before `up`).
HISTORY_RETRY_SECONDS = 3.0


class StoreSide(_Base):
    """Workers and handlers of the store's answers."""

    history: HistorySource | None
    history_rows: int
    roster: Roster
    team: Team
    feed: Feed
    unconfirmed: Unconfirmed
    alerts: Alerts
    costs: Costs
    events_total: int
    store_ok: bool
    store_text: str
    _truth_asked: bool
    _truth_in_once: bool
    _costs_due: bool
    _history_done: bool
    _history_ids: set[str]
    _dirty: bool

    def refresh_truth(self) -> None:
        """Ask the store for its answer again (unless the last question is still out)."""
        if self.history is None or self._truth_asked:
            return
        self._truth_asked = True
        self.load_truth(self.unconfirmed.ids(truth.STORED_CHECK_MAX))

    @work(thread=True, exclusive=True, group="truth")
    def load_truth(self, asked: list[str]) -> None:
        """The store's figures, and which of `asked` (live events counted on top) it holds."""
        assert self.history is not None
        try:
            answer = truth.read(self.history, asked, self.roster.max_agents)
        except HistoryError as exc:
            self.call_from_thread(self._truth_failed, str(exc))
            return
        self.call_from_thread(self._truth_in, answer)

    def _truth_in(self, answer: truth.Truth) -> None:
        """The store's answer in place of every figure, then the live events it does not hold."""
        self._truth_asked = False
        self.store_ok = True
        truth.take(answer, self.roster, self.team, self.unconfirmed)
        self.alerts.load(answer.alerts)
        self.costs.update(answer.costs)
        self.events_total = answer.events_total
        self._dirty = True
        if not self._truth_in_once:
            self._truth_in_once = True
            self.load_history()

    def _truth_failed(self, text: str) -> None:
        self._truth_asked = False
        self.store_ok = False
        self._store_status(f"store: {text}; retrying")  # live events are shown meanwhile
        if not self._truth_in_once:  # a dashboard opened before the store: soon, not at the next refresh
            self.set_timer(HISTORY_RETRY_SECONDS, self.refresh_truth)

    @work(thread=True, exclusive=True, group="history")
    def load_history(self) -> None:
        """The recent events for the feed and the agents' timelines (the figures are the truth's)."""
        assert self.history is not None
        try:
            answer = self.history.query(*queries.recent_events(self.history_rows))
        except HistoryError as exc:
            self.call_from_thread(self._history_failed, f"store: {exc}; showing live events only")
            return
        self.call_from_thread(self._apply_history, answer_envelopes(answer))

    def _history_failed(self, text: str) -> None:
        self.store_ok = False
        self._store_status(f"{text}; retrying")
        self.set_timer(HISTORY_RETRY_SECONDS, self.load_history)

    def _stop_waiting_for_history(self) -> None:
        if not self._history_done:
            self._store_status("store slow to answer: showing live events; history follows when it comes")

    def _store_status(self, text: str) -> None:
        self.store_text = text
        self._history_done = True
        self._dirty = True

    @work(thread=True, exclusive=True, group="costs")
    def load_costs(self) -> None:
        """The costs alone, soon after usage arrived (the rest waits for the next refresh)."""
        assert self.history is not None
        self._costs_due = False
        try:
            rows = list(self.history.query(*queries.DASHBOARD_COSTS).rows)
        except HistoryError:
            return  # the next refresh says why
        self.call_from_thread(self._costs_in, rows)

    def _costs_in(self, rows: list[tuple[Any, ...]]) -> None:
        self.costs.update(rows)
        self._dirty = True

    def _apply_history(self, envelopes: list[dict[str, Any]]) -> None:
        """The stored recent events into the feed and the timelines (they count nothing: the
        store's answer has them), then what came live before them: the feed stays in time order."""
        self.feed, stored = truth.take_history(envelopes, self.feed, self.roster, self.team)
        self._history_ids |= stored
        self.store_text = f"store: {len(envelopes)} recent events loaded"
        self._history_done = True
        self._dirty = True
