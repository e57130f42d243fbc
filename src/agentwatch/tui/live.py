"""The live view's model: the roster, the feed, the team, the alerts and the costs as the store
answered plus what arrived since, and the buffers that keep each event once. No Textual: the app
(tui/app.py) turns the live source's envelopes and its workers' answers into the verbs below, and
paints what they leave; tests drive the verbs alone.

One merge rule holds for every list the live view shows (`StoredFirst`): the stored events, then
the live ones, each event once, whatever the order they arrived in. The store's answer counts the
events it holds and the live ones it does not hold yet are counted on top (roster.Unconfirmed);
the recent history fills the feed and the timelines, and a live event it already holds is not
taken again; an agent's detail merges its stored events with its live timeline the same way.

Live events wait in a bounded buffer while paused and while the history loads, so that states
stay in time order; what waited is taken at the next `drain`.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import orjson

from agentwatch.agents import LOST_AFTER_S, AgentKey
from agentwatch.tui import truth
from agentwatch.tui.alerts import Alerts, is_alert
from agentwatch.tui.costs import Costs
from agentwatch.tui.model import TIMELINE_MAX, Feed, FeedFilter, FeedLine
from agentwatch.tui.roster import Roster, Unconfirmed
from agentwatch.tui.team import Team

PENDING_MAX = 20_000
LOADED = "recent events loaded"
SORTS = ("state", "recent", "name", "errors")


def event_id(item: FeedLine | Mapping[str, Any]) -> str:
    """The event's id, a feed line's or an envelope's ('' when it has none)."""
    envelope = item.envelope if isinstance(item, FeedLine) else item
    return str(envelope.get("id", ""))


class StoredFirst:
    """The live view's merge rule: the stored items, then the live ones the store does not hold,
    each event once, whichever came first. The store's copy of an event stands; `holds` says
    whether a live event still to come is one of the stored."""

    def __init__(self) -> None:
        self.ids: set[str] = set()

    def holds(self, item: FeedLine | Mapping[str, Any]) -> bool:
        return bool(self.ids) and event_id(item) in self.ids

    def merged(self, stored: Iterable[FeedLine], live: Iterable[FeedLine]) -> list[FeedLine]:
        """`stored`, then the items of `live` none of the stored ones (nor earlier ones) are."""
        kept = list(stored)
        self.ids.update(event_id(item) for item in kept)
        return kept + [item for item in live if not self.holds(item)]


def _nothing(*_: Any) -> None:
    return None


class LiveState:
    """The live view's model: what it shows, and what it holds until it can show it.

    `stored`: a store stands behind the live events (its answer is the truth; the live events are
    counted on top of it). `bell` is called for a new firing alert, `usage` when token usage
    arrives (the costs are asked again soon), `skipped` with what made an event unreadable."""

    def __init__(
        self,
        *,
        stored: bool,
        lost_after_s: float = LOST_AFTER_S,
        bell: Callable[[], None] = _nothing,
        usage: Callable[[], object] = _nothing,
        skipped: Callable[[Exception], None] = _nothing,
    ) -> None:
        self.stored = stored
        self.bell, self.usage, self.skipped = bell, usage, skipped
        self.roster = Roster(lost_after_s=lost_after_s)
        self.feed = Feed()
        self.team = Team()
        self.alerts = Alerts()
        self.costs = Costs()
        # Live events counted on top of the store's last answer, until it holds them; of them,
        # those asked about at the store's present mark that it did not hold then.
        self.unconfirmed = Unconfirmed()
        self.checked: set[str] = set()
        self.pending: deque[dict[str, Any] | bytes] = deque(maxlen=PENDING_MAX)
        # The history's ids (at most its rows): a live copy of one is not taken again, however late.
        self.history = StoredFirst()
        # Live events wait until the history is in: applied after it, states stay in time order.
        self.history_done = not stored
        self.events_total = 0  # the store's count of events (or, without a store, the live ones)
        self.dropped = 0  # live events the full buffer let go
        self.unreadable = 0  # live events the model could not take (skipped)
        self.fresh = 0  # events taken as they came since the last drain
        self.bus_ok, self.bus_text = False, "connecting to the bus ..."
        self.store_ok = not stored
        self.store_text = "store: not asked yet" if stored else "no store: live events only"
        self.truth_asked = self.truth_in_once = self.costs_due = False
        # The store's mark at its last whole answer, and when that came (time.monotonic()).
        self.mark: tuple[Any, ...] | None = None
        self.mark_at = 0.0
        # The store's last answer taken, and its last answer and costs while paused: taken when
        # the pause ends.
        self.last_truth: truth.Truth | None = None
        self.held_truth: truth.Truth | None = None
        self.held_costs: list[tuple[Any, ...]] | None = None
        # How the live view is shown: set by its keys, read by its paint.
        self.paused = self.show_folded = False
        self.paused_at = 0.0  # the clock when paused: the roster's order is taken at it
        self.follow, self.sort, self.filter = True, SORTS[0], FeedFilter()

    @property
    def waiting(self) -> int:
        """Live events held while paused or while the history loads."""
        return len(self.pending)

    # -- live events ---------------------------------------------------------------------------

    def deliver(self, item: dict[str, Any] | bytes) -> None:
        """One envelope from the live source: into the model at once, or into the buffer while
        paused, while the history loads, or behind what waits already."""
        if self.pending or self.paused or not self.history_done:
            if len(self.pending) == self.pending.maxlen:
                self.dropped += 1
            self.pending.append(item)
        else:
            self.fresh += self._take_or_skip(item)

    def drain(self) -> int:
        """Take what waited, when it may be; how many events are new since the last drain."""
        drained, self.fresh = self.fresh, 0
        while self.pending and not self.paused and self.history_done:
            drained += self._take_or_skip(self.pending.popleft())
        return drained

    def _take_or_skip(self, item: dict[str, Any] | bytes) -> int:
        """`_take`, and an event the model cannot take skipped and counted on the status line:
        one odd envelope never stops the dashboard."""
        try:
            return int(self._take(item))
        except Exception as exc:
            self.unreadable += 1
            self.skipped(exc)
            return 0

    def _take(self, item: dict[str, Any] | bytes) -> bool:
        """One delivered envelope into the model; False for what is none, or in from the history."""
        raw = item if isinstance(item, bytes) else None
        if isinstance(item, bytes):
            try:
                decoded = orjson.loads(item)
            except orjson.JSONDecodeError:
                return False  # not an envelope: the store dead-letters it, the dashboard skips it
            if not isinstance(decoded, dict):
                return False
            env: dict[str, Any] = decoded
        else:
            env = item
        if self.history.holds(env):
            return False
        self.apply(env, raw)
        return True

    def apply(self, env: dict[str, Any], raw: bytes | None = None) -> None:
        """One envelope into the model: feed, roster (and the agent's timeline), team. Token usage
        is no event a person reads: the costs are asked again, soon. An alert: see tui/alerts.py."""
        if is_alert(env):
            if self.alerts.take(env) and self.alerts.bell:
                self.bell()
            return
        if env.get("kind") in truth.NOT_EVENTS:
            if not self.costs_due and self.stored:
                self.costs_due = True
                self.usage()
            return
        line = self.feed.add(FeedLine.of(env, raw))
        self.roster.apply(env, line)
        self.team.apply(env)
        if self.stored:
            self.unconfirmed.add(env)
        elif env.get("kind") != "message":
            self.events_total += 1  # no store: the live events are all there is

    # -- the store's answers -------------------------------------------------------------------

    def ask_truth(self) -> tuple[list[str], tuple[Any, ...] | None, float | None] | None:
        """The live ids to ask the store about, the mark its answer may stop at (truth_since) and
        a time none of their events is older than (None when one has no time), or None while the
        last question is out. At an unchanged mark, an id asked at it before is not asked again:
        the store held no more since."""
        if not self.stored or self.truth_asked:
            return None
        self.truth_asked = True
        since = self.truth_since()
        skip = self.checked if since is not None else frozenset()
        ids = self.unconfirmed.ids(truth.STORED_CHECK_MAX, skip)
        earliest = self.unconfirmed.earliest(ids)
        margin = truth.STORED_CHECK_MARGIN_SECONDS
        return ids, since, None if earliest is None else earliest - margin

    def truth_since(self) -> tuple[Any, ...] | None:
        """The mark a refresh may stop at (its answer unchanged), or None: ask for everything."""
        if self.mark is None or time.monotonic() - self.mark_at >= truth.FULL_EVERY_SECONDS:
            return None
        return self.mark

    def truth_same(self, same: truth.Same) -> bool:
        """The store's mark did not move: nothing it holds changed, the last answer stands. The
        live ids it holds leave the live count (that answer counts them), and the answer is taken
        again with the live events it lacks on top; True when that changed anything."""
        self.truth_asked = False
        self.store_ok = True
        self._forget_start_up_note()
        if self.paused or self.last_truth is None:
            return False  # asked again after the pause, or with the first answer
        self.checked.update(set(same.asked) - same.stored)
        if not same.stored:
            return False
        self.unconfirmed.confirm(same.stored)
        truth.take(self.last_truth, self.roster, self.team, self.unconfirmed)
        return True

    def _forget_start_up_note(self) -> None:
        if self.truth_in_once and self.history_done and self.store_text.endswith(LOADED):
            self.store_text = ""  # a start-up fact: said until the store's next answer

    def take_truth(self, answer: truth.Truth) -> bool:
        """The store's answer in place of every figure, then the live events it does not hold
        counted on top; True for its first answer (the history is asked then). While paused the
        roster holds still: the answer waits, and is taken on `resume`."""
        self.truth_asked = False
        self.mark, self.mark_at = answer.mark, time.monotonic()
        self.store_ok = True
        if self.paused and self.truth_in_once:
            self.held_truth = answer
            return False
        self.held_truth, self.last_truth, self.checked = None, answer, set()
        self._forget_start_up_note()
        truth.take(answer, self.roster, self.team, self.unconfirmed)
        self.alerts.load(answer.alerts)
        self.costs.update(answer.costs)
        self.events_total = answer.events_total
        first, self.truth_in_once = not self.truth_in_once, True
        return first

    def truth_failed(self, text: str) -> bool:
        """The store did not answer (live events are shown meanwhile); True before its first
        answer: a dashboard opened before the store asks again soon, not at the next refresh."""
        self.truth_asked = False
        self.store_ok = False
        self.store_status(f"store: {text}; retrying")
        return not self.truth_in_once

    def take_history(self, envelopes: Sequence[dict[str, Any]]) -> None:
        """The stored recent events into the feed and the timelines (they count nothing: the
        store's answer has them), then what came live before them: the feed stays in time order."""
        stored: list[FeedLine] = []
        for env in envelopes:
            if "rule" in env or env.get("kind") in truth.NOT_EVENTS:
                continue
            line = FeedLine.of(env)
            self.roster.apply(env, line, count=False)
            self.team.apply(env, count=False)
            stored.append(line)
        live = self.feed.lines()
        if live:  # the history came late: the feed starts again from it
            self.feed = Feed(self.feed.maxlen)
        for line in self.history.merged(stored, live):
            self.feed.add(line)
        self.store_text = f"store: {len(envelopes)} {LOADED}"
        self.history_done = True

    def history_failed(self, text: str) -> None:
        self.store_ok = False
        self.store_status(f"{text}; retrying")

    def stop_waiting_for_history(self) -> None:
        if not self.history_done:
            self.store_status("store slow to answer: showing live events; history follows when it comes")

    def store_status(self, text: str) -> None:
        """What the status line says of the store; live events wait for the history no longer."""
        self.store_text = text
        self.history_done = True

    def ask_costs(self) -> None:
        """The costs are being asked: usage that arrives from now on asks again."""
        self.costs_due = False

    def take_costs(self, rows: Iterable[tuple[Any, ...]]) -> None:
        if self.paused:
            self.held_costs = list(rows)
            return
        self.costs.update(rows)

    def toggle_pause(self, now: float) -> None:
        """Pause holds the feed and the roster still (live events, the store's answers and the
        costs wait); resuming takes what waited: the store's last answer first, then the live
        events (`drain`)."""
        self.paused, self.paused_at = not self.paused, now
        if self.paused:
            return
        if self.held_truth is not None:
            self.take_truth(self.held_truth)
        if self.held_costs is not None:
            self.costs.update(self.held_costs)
            self.held_costs = None

    def bus_status(self, ok: bool, text: str) -> None:
        self.bus_ok, self.bus_text = ok, text

    # -- one agent -----------------------------------------------------------------------------

    def lines_of(self, key: AgentKey, stored: Sequence[FeedLine] = ()) -> list[FeedLine]:
        """One agent's events, oldest first: its `stored` ones (from the store, older than its live
        timeline reaches) then its live ones, each event once."""
        agent = self.roster.get(key)
        live = list(agent.timeline) if agent is not None else []
        if not stored:
            return live
        merged = StoredFirst().merged(stored, live)
        return sorted(merged, key=lambda line: line.at)[-2 * TIMELINE_MAX :]
