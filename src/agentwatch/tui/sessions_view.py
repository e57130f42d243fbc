"""The sessions view: every session in the store, newest first, filterable; Enter opens its page.

Read as the tools view reads its sessions (store/queries.py: the newest ids from the sessions
rollup, then their rows with coverage and cost), with each session's number of agents beside
(store/session_queries.py), and whose it is: the person, repository and branch the hook learnt from
git (emitter/attribution.py). The filter narrows the rows on screen: each word is looked for in
every column it names (session, agent, harness, team, person, repository, branch, host, outcome);
`person:`, `repo:`, `branch:` (or another column's name and a colon) look in that column alone.
"""

from __future__ import annotations

from typing import Any, ClassVar

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.widgets import DataTable, Footer, Input

from agentwatch.format import duration, money
from agentwatch.harnesses import CLAUDE_CODE, SHORT, short_id
from agentwatch.store import queries, session_queries
from agentwatch.tui.common import refill
from agentwatch.tui.sources import HistorySource
from agentwatch.tui.store_screen import StoreScreen, table

SESSIONS_MAX = 500
COLUMNS = ("started (UTC)", "session", "agent", "agents", "harness", "team", "person", "repository",
           "branch", "host", "took", "events", "calls", "err", "cost", "cover", "outcome")  # fmt: skip
# What the filter looks in: a word in every one of these, `name:word` in that one alone.
FILTERED = {"session": "session_id", "agent": "agent", "harness": "harnesses", "team": "team",
            "person": "person", "repo": "repo", "branch": "branch", "host": "host",
            "outcome": "outcome"}  # fmt: skip
FILTER_HINT = "filter: session, agent, harness, team, person, repo, branch, host, outcome (repo:NAME ...)"


def session_row(row: dict[str, Any]) -> tuple[Any, ...]:
    started = row.get("started")
    when = f"{started:%Y-%m-%d %H:%M}" if started is not None else ""
    cover = row.get("coverage_pct")
    return (
        when,
        short_id(str(row["session_id"])),
        str(row.get("agent") or ""),
        str(row.get("agents") or 1),
        "+".join(SHORT.get(h, h) for h in row.get("harnesses") or [CLAUDE_CODE]),
        str(row.get("team") or ""),
        str(row.get("person") or ""),
        str(row.get("repo") or ""),
        str(row.get("branch") or ""),
        str(row.get("host") or ""),
        duration(row.get("duration_ms")),
        str(row.get("events") or 0),
        str(row.get("tool_calls") or 0),
        str(row.get("errors") or 0),
        money(row.get("cost_usd"), int(row.get("tokens") or 0)),
        "" if cover is None else f"{cover:g}%",
        str(row.get("outcome") or ""),
    )


def matches(row: dict[str, Any], text: str) -> bool:
    """Whether the session's row has every word of the filter `text` (case aside): `name:word` in
    the column FILTERED names, another word in any of them."""
    for word in text.lower().split():
        name, sep, found = word.partition(":")
        keys = [FILTERED[name]] if sep and name in FILTERED else list(FILTERED.values())
        needle = found if sep and name in FILTERED else word
        if not any(needle in str(row.get(k) or "").lower() for k in keys):
            return False
    return True


class SessionsScreen(StoreScreen):
    """Every session, newest first; a filter; Enter: the session's page."""

    HELP: ClassVar[str] = "Sessions"  # its keys' title in the help

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape,q", "app.pop_screen", "Back"),
        Binding(
            "slash",
            "focus_filter",
            "Filter",
            tooltip="by session, agent, harness, team, person, repo, branch, host",
        ),
        Binding("r", "reload", "Refresh"),
    ]

    def __init__(self, history: HistorySource) -> None:
        super().__init__(history, "sessions-head")
        self.sub_title = "sessions"
        self.rows: list[dict[str, Any]] = []
        self.shown: list[dict[str, Any]] = []
        self.text = ""

    def compose(self) -> ComposeResult:
        yield self.head
        yield Input(placeholder=FILTER_HINT, id="sessions-filter")
        yield table("sessions-table", *COLUMNS)
        yield Footer()

    def fetch(self) -> list[dict[str, Any]]:
        ids = [
            str(i)
            for i in self.history.query(*queries.newest_sessions(None, SESSIONS_MAX)).column("session_id")
        ]
        if not ids:
            return []
        rows = self.history.query(*queries.session_details(ids)).dicts()
        counts = self.history.query(*session_queries.session_agent_counts(ids)).dicts()
        agents = {str(r["session_id"]): int(r["agents"]) for r in counts}
        starts = [r["started"] for r in rows if r.get("started") is not None]
        since = f"{min(starts):%Y-%m-%d %H:%M:%S}.000" if starts else queries.EPOCH
        harnesses = {
            str(r["session_id"]): list(r["harnesses"])
            for r in self.history.query(*session_queries.session_harnesses(ids, since)).dicts()
        }
        for row in rows:
            row["agents"] = agents.get(str(row["session_id"]), 1)
            row["harnesses"] = harnesses.get(str(row["session_id"]), [])
        return rows

    def show(self, answer: list[dict[str, Any]]) -> None:
        self.rows = answer
        self.paint()

    def paint(self) -> None:
        self.shown = [r for r in self.rows if matches(r, self.text)]
        refill(self.query_one("#sessions-table", DataTable), [session_row(r) for r in self.shown])
        head = Text(f"sessions  {len(self.rows)} in the store", style="bold")
        if len(self.shown) != len(self.rows):
            head.append(f" · {len(self.shown)} match the filter", style="dim")
        head.append("   Enter: the session's turns, events, agents and alerts", style="dim")
        self.say(head)

    @on(Input.Changed, "#sessions-filter")
    def filter_changed(self, event: Input.Changed) -> None:
        self.text = event.value
        self.paint()

    @on(Input.Submitted, "#sessions-filter")
    def filter_done(self) -> None:
        self.query_one("#sessions-table", DataTable).focus()

    @on(DataTable.RowSelected, "#sessions-table")
    def open_session(self, event: DataTable.RowSelected) -> None:
        if 0 <= event.cursor_row < len(self.shown):
            from agentwatch.tui.session_page import SessionScreen

            self.app.push_screen(SessionScreen(self.history, str(self.shown[event.cursor_row]["session_id"])))

    def action_focus_filter(self) -> None:
        self.query_one("#sessions-filter", Input).focus()

    def action_reload(self) -> None:
        self.load()
