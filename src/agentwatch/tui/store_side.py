"""The dashboard's side of the store: the workers that ask it, from a thread each, for its answer
for every figure (tui/truth.py says what and how), the recent history for the feed, and the costs
soon after usage arrives, and the typed messages every worker that reads the store posts with what
came back (an event's payload and an agent's stored events too: tui/views.py).

A base of the app (AgentwatchApp), like tui/actions.py: the workers run on the app, whose handlers
turn each message into a verb of the live view's model (tui/live.py). A worker's unexpected
failure goes to the app's one handler of those.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Generic, TypeVar

from textual import work
from textual.message import Message

from agentwatch.store import live_roster
from agentwatch.store.answer import HistoryError
from agentwatch.tui import truth
from agentwatch.tui.model import FeedLine
from agentwatch.tui.sources import HistorySource, answer_envelopes

if TYPE_CHECKING:
    from textual.app import App

    _Base = App[None]
else:
    _Base = object

# How often the store is asked again while it does not answer (a dashboard opened before `up`).
HISTORY_RETRY_SECONDS = 3.0

T = TypeVar("T")


class Answer(Message, Generic[T]):
    """What a store worker brings back."""

    def __init__(self, value: T) -> None:
        super().__init__()
        self.value = value


class TruthIn(Answer[truth.Truth]):
    """The store's answer for every figure."""


class TruthSame(Answer[truth.Same]):
    """The store's mark did not move: its last answer stands (and which live ids it holds)."""


class TruthFailed(Answer[str]):
    """The store did not answer the figures' question: why."""


class HistoryIn(Answer[list[dict[str, Any]]]):
    """The recent events, oldest first."""


class HistoryFailed(Answer[str]):
    """The recent events could not be read: what the status line says."""


class CostsIn(Answer[list[tuple[Any, ...]]]):
    """Rows of queries.dashboard_costs (store/live_roster.py folds them)."""


class PayloadIn(Answer[dict[str, Any]]):
    """An event from the history, its payload fetched (or why not, in its place)."""


class AgentStored(Answer[tuple[list[FeedLine], str]]):
    """One agent's stored events, and what its detail says when the store gave none."""


class StoreSide(_Base):
    """The workers that ask the store; each posts what it got as an Answer."""

    history: HistorySource | None

    @work(thread=True, exclusive=True, group="truth", exit_on_error=False)
    def load_truth(
        self,
        asked: list[str],
        roster_limit: int,
        lost_after_s: float,
        since: tuple[Any, ...] | None,
        asked_since: float | None = None,
    ) -> None:
        """The store's figures, and which of `asked` (live events counted on top) it holds; only
        its mark when that is still `since`."""
        assert self.history is not None
        try:
            answer = truth.read(self.history, asked, roster_limit, lost_after_s, since, asked_since)
        except HistoryError as exc:
            self.post_message(TruthFailed(str(exc)))
            return
        self.post_message(TruthSame(answer) if isinstance(answer, truth.Same) else TruthIn(answer))

    @work(thread=True, exclusive=True, group="history", exit_on_error=False)
    def load_history(self, rows: int) -> None:
        """The recent events for the feed and the agents' timelines (the figures are the truth's)."""
        assert self.history is not None
        try:
            history = self.history
            answer = live_roster.newest_events(lambda q: history.query(*q), rows)
        except HistoryError as exc:
            self.post_message(HistoryFailed(f"store: {exc}; showing live events only"))
            return
        self.post_message(HistoryIn(answer_envelopes(answer)))

    @work(thread=True, exclusive=True, group="costs", exit_on_error=False)
    def load_costs(self, roster_limit: int, lost_after_s: float) -> None:
        """The costs alone, soon after usage arrived (the rest waits for the next refresh)."""
        assert self.history is not None
        try:
            history = self.history
            rows = live_roster.costs(lambda q: history.query(*q), roster_limit, lost_after_s)
        except HistoryError:
            return  # the next refresh says why
        self.post_message(CostsIn(rows))
