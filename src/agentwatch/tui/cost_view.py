"""The dashboard's cost view: the burn rate now, and what a window cost by agent, team, model,
day, harness (Claude Code, Codex CLI, Gemini CLI), person, repository and branch, and its most
expensive turns with their share, all from the store.

Burn rate and turns: store/cost_queries.py; the groupings: store/queries.py's `cost` (the cost
rollups, which `agentwatch cost --by ...` reads too: a tab shows what the command prints). The
window (w) is whole UTC hours like the CLI's --since; n shows the next grouping's tab (g stays the search).
"""

from __future__ import annotations

import datetime as dt
import time
from dataclasses import dataclass, field
from typing import Any, ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.widgets import DataTable, Footer, TabbedContent, TabPane

from agentwatch.format import money, one_line
from agentwatch.harnesses import CLAUDE_CODE, short_id
from agentwatch.store import cost_queries, queries
from agentwatch.tui.common import refill
from agentwatch.tui.sources import HistorySource
from agentwatch.tui.store_screen import StoreScreen, table

WINDOWS = {"1h": 3600, "1d": 86_400, "7d": 7 * 86_400, "all": 0}
GROUPS = ("agent", "team", "model", "day", "harness", "person", "repo", "branch")
# The groupings whose rollup counts the sessions (as `agentwatch cost --by` shows them).
WITH_SESSIONS = frozenset({"person", "repo", "branch"})
# A tab's title, where it is not "By <grouping>".
TITLES = {"repo": "By repository"}
# What a grouping's key is called when it is empty: usage stored before the hook said whose it
# was, or a session whose cwd was in no repository.
EMPTY = {"team": "(none)", "model": "(unknown)", "person": "(unknown)", "repo": "(no repository)",
         "branch": "(no branch)"}  # fmt: skip
REFRESH_SECONDS = 10.0


@dataclass
class CostAnswer:
    burn: dict[str, Any] = field(default_factory=dict)
    groups: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    turns: list[dict[str, Any]] = field(default_factory=list)


def since_of(window: str, now: float) -> str:
    """The start of the UTC hour that holds `now` - window (the epoch for all)."""
    seconds = WINDOWS[window]
    if not seconds:
        return queries.EPOCH
    at = dt.datetime.fromtimestamp(now - seconds, dt.UTC)
    return at.strftime("%Y-%m-%d %H:00:00.000")


def columns(by: str) -> tuple[str, ...]:
    """A grouping's table columns: its key (and its sessions, where the rollup counts them), then
    what `agentwatch cost --by` sums."""
    key = {"repo": "repository"}.get(by, by)
    return (key, *(("sessions",) if by in WITH_SESSIONS else ()), "API calls", "tokens", "cost")


def group_cells(by: str, row: dict[str, Any]) -> tuple[Any, ...]:
    if by == "agent":
        key = f"{row.get('agent')}" + (f" ({row['team']})" if row.get("team") else "")
    elif by == "harness":
        key = str(row.get("harness") or CLAUDE_CODE)
    else:
        key = str(row.get(by) or EMPTY.get(by, ""))
    sessions = (f"{int(row.get('sessions') or 0):,}",) if by in WITH_SESSIONS else ()
    tokens = sum(int(row.get(k) or 0) for k in ("input_tokens", "output_tokens", "cache_read_tokens",
                                               "cache_write_5m_tokens", "cache_write_1h_tokens"))  # fmt: skip
    return (key, *sessions, f"{int(row['api_calls']):,}", f"{tokens:,}", money(row.get("cost_usd"), tokens))


class CostScreen(StoreScreen):
    """Burn rate now; cost by agent, team, model, day, harness, person, repository and branch; the
    most expensive turns."""

    HELP: ClassVar[str] = "Cost"  # its keys' title in the help

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape,q", "app.pop_screen", "Back"),
        Binding("w", "cycle_window", "Window", tooltip="1h, 1d, 7d, all, in turn"),
        Binding(
            "n",
            "cycle_group",
            "Grouping",
            tooltip="the next tab: agent, team, ... person, repository, branch",
        ),
        Binding("r", "reload", "Refresh"),
    ]

    def __init__(self, history: HistorySource, window: str = "1d") -> None:
        super().__init__(history, "cost-head")
        self.sub_title = "cost"
        self.window = window
        self.answer = CostAnswer()

    def compose(self) -> ComposeResult:
        yield self.head
        with TabbedContent(id="cost-tabs"):
            for by in GROUPS:
                with TabPane(TITLES.get(by, f"By {by}"), id=f"cost-{by}"):
                    yield table(f"cost-by-{by}", *columns(by))
            with TabPane("Top turns", id="cost-turns"):
                yield table(
                    "cost-top-turns", "share", "cost", "tokens", "calls", "session", "agent", "prompt"
                )
        yield Footer()

    def start(self) -> None:
        self.load()
        self.set_interval(REFRESH_SECONDS, self.load)

    def fetch(self) -> CostAnswer:
        since = since_of(self.window, time.time())
        out = CostAnswer(burn=self.history.query(*cost_queries.BURN_RATE).first())
        for by in GROUPS:
            out.groups[by] = self.history.query(*queries.cost(by, since, 200)).dicts()
        out.turns = self.history.query(*cost_queries.top_turns(since)).dicts()
        return out

    def show(self, answer: CostAnswer) -> None:
        self.answer = answer
        b = answer.burn
        head = Text("cost  ", style="bold")
        per_minute = float(b.get("last_5_minutes_usd") or 0) / 5
        head.append(
            f"burning {money(per_minute) or '$0.00'}/min · {money(float(b.get('last_hour_usd') or 0))}/h now"
        )
        head.append(f" · today {money(float(b.get('today_usd') or 0))}", style="dim")
        head.append(f"   window {self.window} (w)", style="dim")
        self.say(head)
        for by in GROUPS:
            refill(
                self.query_one(f"#cost-by-{by}", DataTable), [group_cells(by, r) for r in answer.groups[by]]
            )
        refill(
            self.query_one("#cost-top-turns", DataTable),
            [
                (f"{t['share_pct']:g}%" if t.get("share_pct") is not None else "", money(t["cost_usd"]),
                 f"{int(t['tokens']):,}", str(t["api_calls"]), short_id(str(t["session_id"])),
                 str(t.get("agent") or ""), one_line(t.get("prompt"), 80))
                for t in answer.turns
            ],
        )  # fmt: skip

    def action_cycle_window(self) -> None:
        names = list(WINDOWS)
        self.window = names[(names.index(self.window) + 1) % len(names)]
        self.load()

    def action_cycle_group(self) -> None:
        tabs = self.query_one("#cost-tabs", TabbedContent)
        panes = [f"cost-{by}" for by in GROUPS] + ["cost-turns"]
        at = panes.index(tabs.active) if tabs.active in panes else -1
        tabs.active = panes[(at + 1) % len(panes)]

    def action_reload(self) -> None:
        self.load()
