"""The store's answer for the dashboard's figures: the one truth every count on screen starts from.

`read` asks the HistorySource, from a worker thread, for everything the live view counts: the
roster (the `agents` view: one row per host, scope and name, with totals), the team's message
edges and tasks, the open and recent alerts, the costs, and which of the live events the dashboard counted
on top of its previous answer the store now holds (its watermark). The app then shows this answer
plus the live events the store does not hold yet (model.Unconfirmed). Nothing here imports Textual.

The watermark is asked after the figures: an event stored in between is in neither for one
refresh (shown at the next). An event the store held before its mark was read but that reached
the dashboard after the question went out is in the answer and counted live on top: the next
refresh, even one that finds the mark unchanged, asks about it, and it then counts once.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from agentwatch.store import live_roster, queries, session_queries
from agentwatch.tui.roster import Roster, Unconfirmed
from agentwatch.tui.sources import HistorySource
from agentwatch.tui.team import TASKS_MAX, Team

# What is no event of the feed: alerts (their own view) and token usage (the costs').
NOT_EVENTS = frozenset({"usage", "cost_state"})

# How often the store is asked again while the dashboard runs, and how many live ids one
# watermark question carries at most (the oldest first: those the store most likely has).
REFRESH_SECONDS = 5.0
# While the store's mark (queries.STORE_MARK) stays the same, a refresh asks for it alone; the
# whole answer again at least this often (the previous hour's cost moves with the clock).
FULL_EVERY_SECONDS = 60.0
STORED_CHECK_MAX = 20_000
# How much earlier than its oldest live event the watermark looks: the store keeps an event's own
# time, so this is only a margin.
STORED_CHECK_MARGIN_SECONDS = 3600.0
EDGES_MAX = 2000
ALERTS_RECENT = 200


@dataclass
class Truth:
    """One answer of the store."""

    roster: list[dict[str, Any]] = field(default_factory=list)
    agents_total: int = 0
    events_total: int = 0
    messages_total: int = 0
    edges: list[dict[str, Any]] = field(default_factory=list)
    tasks: list[dict[str, Any]] = field(default_factory=list)
    alerts: list[dict[str, Any]] = field(default_factory=list)
    costs: list[tuple[Any, ...]] = field(default_factory=list)
    stored: set[str] = field(default_factory=set)
    mark: tuple[Any, ...] | None = None  # the store's mark asked before the figures


@dataclass
class Same:
    """The store's mark did not move since its last answer: that answer stands. Of the live ids
    `asked`, those `stored`: the store held them when that answer's mark was read (nothing was
    stored since), so that answer counts them already."""

    asked: list[str] = field(default_factory=list)
    stored: set[str] = field(default_factory=set)


def mark(history: HistorySource) -> tuple[Any, ...] | None:
    """The store's mark (None when it gives none: then every refresh reads everything)."""
    rows = history.query(*queries.STORE_MARK).rows
    return tuple(rows[0]) if rows else None


def read(
    history: HistorySource,
    asked: Sequence[str],
    roster_limit: int,
    lost_after_s: float,
    since: tuple[Any, ...] | None = None,
    asked_since: float | None = None,
) -> Truth | Same:
    """The store's answer for the live window (the scopes active within `lost_after_s` and the
    newest ones: store/live_roster.py), or Same when its mark is still `since` (nothing it holds
    changed: the last answer stands, and which of `asked` it holds: none of their events is older
    than `asked_since`, when given); raises HistoryError (the
    caller shows its message and asks again). The mark is asked first: what is stored after it
    moves it, and the next refresh reads."""
    now_mark = mark(history)
    if since is not None and now_mark == since:
        # A live event may reach the dashboard after the store held it and after the question
        # that would have confirmed it: the answer counts it, and so did the dashboard on top.
        # Asked now, it leaves the live count (the mark says the answer holds it).
        if not asked:
            return Same()
        return Same(list(asked), _stored(history, asked, asked_since))
    ask = lambda q: history.query(*q)  # noqa: E731 - one reader for every question below
    window = live_roster.read(ask, roster_limit, lost_after_s)
    owned(history, window.roster)
    truth = Truth(
        roster=window.roster,
        agents_total=window.agents_total,
        events_total=window.events_total,
        messages_total=window.messages_total,
        costs=window.costs,
        mark=now_mark,
    )
    truth.edges = history.query(*queries.window_edges(EDGES_MAX, roster_limit, lost_after_s)).dicts()
    truth.tasks = live_roster.tasks(ask, window, TASKS_MAX)
    truth.alerts = [
        *history.query(*queries.alerts(open_only=True, limit=10_000)).dicts(),
        *history.query(*queries.alerts(limit=ALERTS_RECENT)).dicts(),
    ]
    if asked:
        truth.stored = _stored(history, asked, asked_since)
    return truth


def _stored(history: HistorySource, asked: Sequence[str], since: float | None) -> set[str]:
    return {str(i) for i in history.query(*queries.stored_ids(asked, since)).column("id")}


def owned(history: HistorySource, roster: list[dict[str, Any]]) -> None:
    """Each roster row with its session's person, repo and branch (what the roster's `person:`,
    `repo:` and `branch:` filter looks in)."""
    ids = sorted({str(r["session_id"]) for r in roster if r.get("session_id")})
    if not ids:
        return
    owners = {str(r["session_id"]): r for r in history.query(*session_queries.session_owners(ids)).dicts()}
    for row in roster:
        found = owners.get(str(row.get("session_id") or ""))
        if found is not None:
            row.update(person=found["person"], repo=found["repo"], branch=found["branch"])


def take(answer: Truth, roster: Roster, team: Team, unconfirmed: Unconfirmed) -> None:
    """The store's answer in place of the roster's and the team's figures, then the live events it
    does not hold yet counted on top (each once: those it holds now leave `unconfirmed`)."""
    unconfirmed.confirm(answer.stored)
    roster.seed(answer.roster, answer.agents_total)
    team.seed(answer.edges)
    team.seed_tasks(answer.tasks)
    for env in unconfirmed.envelopes():
        roster.apply(env, note=False)
        team.apply(env)
