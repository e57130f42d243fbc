"""A session's page: its turns, its events, its agents and its alerts, from the store.

A turn is one prompt's work (one `prompt_id`, store/session_queries.py): the prompt's line, its
tools in order with their number, the calls that failed, the time the tools reported, the
subagents it started and the messages it sent, its tokens and cost (its API messages, by time),
and its wall time. The turn under the cursor lists its events below. `r` replays the session
through the live views (tui/replay.py). Opened from a search, the Events tab shows the event found.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, ClassVar

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.widgets import DataTable, Footer, TabbedContent, TabPane

from agentwatch.format import duration, money, one_line, tool_counts
from agentwatch.harnesses import short_id
from agentwatch.store import queries, session_queries
from agentwatch.store.answer import HistoryError
from agentwatch.tui.common import EventScreen, refill
from agentwatch.tui.model import counted
from agentwatch.tui.sources import HistorySource, answer_envelopes
from agentwatch.tui.store_screen import StoreScreen, table

# Events one page holds at most (the replay plays these); a longer session says so.
EVENTS_MAX = 20_000
TURN_COLUMNS = ("#", "start", "calls", "failed", "tool time", "subs", "msgs", "tokens", "cost", "wall",
                "prompt", "tools")  # fmt: skip


@dataclass
class SessionAnswer:
    """What the store holds of one session."""

    details: dict[str, Any] = field(default_factory=dict)
    turns: list[dict[str, Any]] = field(default_factory=list)
    events: list[dict[str, Any]] = field(default_factory=list)
    agents: list[dict[str, Any]] = field(default_factory=list)
    alerts: list[dict[str, Any]] = field(default_factory=list)
    more: bool = False


def read_session(history: HistorySource, session_id: str) -> SessionAnswer:
    """Every question of the page, in turn; raises HistoryError."""
    from agentwatch.store.answer import params_of

    out = SessionAnswer()
    out.details = history.query(*queries.session_details([session_id])).first()
    out.turns = history.query(*session_queries.session_turns(session_id)).dicts()
    after = (queries.EPOCH, "")
    while len(out.events) < EVENTS_MAX:
        answer = history.query(*session_queries.session_events(session_id, after=after))
        if not answer.rows:
            break
        page = answer_envelopes(answer)
        out.events += page
        after = (str(params_of([page[-1]["timestamp"]])[0]), str(page[-1]["id"]))
    out.more = len(out.events) >= EVENTS_MAX
    out.agents = history.query(*session_queries.session_agents(session_id)).dicts()
    out.alerts = history.query(*session_queries.session_alerts(session_id)).dicts()
    return out


def turn_cells(number: int, turn: dict[str, Any]) -> tuple[Any, ...]:
    """One turn's row: the figures `agentwatch sql` gives of it (session_queries.session_turns)."""
    tokens = int(turn["tokens"] or 0)
    failed = int(turn["failed"] or 0)
    return (
        str(number),
        f"{turn['started']:%H:%M:%S}",
        str(turn["tool_calls"]),
        Text(str(failed), style="bold red" if failed else ""),
        duration(turn["tool_ms"]),
        str(turn["subagents"]),
        str(turn["messages"]),
        f"{tokens:,}",
        money(turn["cost_usd"], tokens),
        duration(turn["wall_ms"]),
        one_line(turn["prompt"], 60) or "(no prompt)",
        tool_counts(turn["tools"]),
    )


def event_cells(env: dict[str, Any]) -> tuple[Any, ...]:
    took = env.get("duration_ms")
    return (
        f"{env['timestamp']:%H:%M:%S}",
        str(env.get("agent") or ""),
        str(env.get("event") or ""),
        duration(took) if isinstance(took, int) else "",
        str(env.get("text") or ""),
    )


class SessionScreen(StoreScreen):
    """One session from the store: turns (with the selected turn's events), events, agents, alerts."""

    HELP: ClassVar[str] = "A session"  # its keys' title in the help

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape,q", "app.pop_screen", "Back"),
        Binding("1", "tab('turns')", "Turns"),
        Binding("2", "tab('events')", "Events"),
        Binding("3", "tab('agents')", "Agents"),
        Binding("4", "tab('alerts')", "Alerts"),
        Binding("r", "replay", "Replay", tooltip="play the session again through the live views"),
    ]

    def __init__(self, history: HistorySource, session_id: str, at_event: str = "") -> None:
        super().__init__(history, "session-head")
        self.session_id = session_id
        self.at_event = at_event
        self.sub_title = f"session {short_id(session_id)}"
        self.answer = SessionAnswer()
        self.turn_events: list[dict[str, Any]] = []

    def compose(self) -> ComposeResult:
        yield self.head
        with TabbedContent(id="session-tabs"):
            with TabPane("Turns", id="turns"), Vertical():
                yield table("session-turns", *TURN_COLUMNS)
                yield table("turn-events", "time", "agent", "event", "took", "what")
            with TabPane("Events", id="events"):
                yield table("session-events", "time", "agent", "event", "took", "what")
            with TabPane("Agents", id="agents"):
                yield table(
                    "session-agents", "agent", "type", "lead", "state", "calls", "err", "msg", "events"
                )
            with TabPane("Alerts", id="alerts"):
                yield table("session-alerts", "at", "severity", "rule", "state", "agent", "summary")
        yield Footer()

    def fetch(self) -> SessionAnswer:
        return read_session(self.history, self.session_id)

    def show(self, answer: SessionAnswer) -> None:
        self.answer = answer
        self._paint_head()
        refill(self._t("session-turns"), [turn_cells(i, t) for i, t in enumerate(answer.turns, 1)])
        refill(self._t("session-events"), [event_cells(e) for e in answer.events])
        refill(
            self._t("session-agents"),
            [
                (a["agent"], a["agent_type"], a["parent_agent"], a["state"], str(a["tool_calls"]),
                 str(a["errors"]), str(a["messages_sent"]), str(a["events"]))
                for a in answer.agents
            ],
        )  # fmt: skip
        refill(
            self._t("session-alerts"),
            [(f"{a['at']:%H:%M:%S}", a["severity"], a["rule"], a["state"], a["agent"], a["summary"])
             for a in answer.alerts],
        )  # fmt: skip
        self._show_turn(0)
        if self.at_event:
            self._go_to_event(self.at_event)

    def _t(self, table_id: str) -> DataTable[Any]:
        return self.query_one(f"#{table_id}", DataTable)

    def _paint_head(self) -> None:
        d, turns = self.answer.details, self.answer.turns
        head = Text(f"session {short_id(self.session_id)}", style="bold")
        if d:
            tokens = int(d.get("tokens") or 0)
            facts = [
                f"{d.get('agent') or ''} on {d.get('host') or '?'}",
                f"{d['started']:%Y-%m-%d %H:%M:%S} UTC" if d.get("started") else "",
                f"took {duration(d.get('duration_ms'))}",
                f"{counted(len(turns), 'turn')} · {counted(int(d.get('events') or 0), 'event')} · "
                f"{counted(len(self.answer.agents), 'agent')}",
                f"{tokens:,} tokens {money(d.get('cost_usd'), tokens)}" if tokens else "no cost read",
                f"outcome {d.get('outcome') or '?'}",
            ]
            head.append("  " + " · ".join(f for f in facts if f), style="dim")
        if self.answer.more:
            head.append(f"   (the first {EVENTS_MAX:,} events)", style="dim")
        self.say(head)

    def _show_turn(self, index: int) -> None:
        turns = self.answer.turns
        if not 0 <= index < len(turns):
            refill(self._t("turn-events"), [])
            return
        prompt_id = turns[index]["prompt_id"]
        self.turn_events = [e for e in self.answer.events if e.get("prompt_id") == prompt_id]
        refill(self._t("turn-events"), [event_cells(e) for e in self.turn_events])

    def _go_to_event(self, event_id: str) -> None:
        for index, env in enumerate(self.answer.events):
            if str(env.get("id")) == event_id:
                self.query_one("#session-tabs", TabbedContent).active = "events"
                events = self._t("session-events")
                events.move_cursor(row=index, animate=False)
                events.focus()
                return

    @on(DataTable.RowHighlighted, "#session-turns")
    def turn_highlighted(self, event: DataTable.RowHighlighted) -> None:
        self._show_turn(event.cursor_row)

    @on(DataTable.RowSelected, "#session-events")
    def open_event(self, event: DataTable.RowSelected) -> None:
        if 0 <= event.cursor_row < len(self.answer.events):
            self.open_payload(dict(self.answer.events[event.cursor_row]))

    @on(DataTable.RowSelected, "#turn-events")
    def open_turn_event(self, event: DataTable.RowSelected) -> None:
        if 0 <= event.cursor_row < len(self.turn_events):
            self.open_payload(dict(self.turn_events[event.cursor_row]))

    @work(thread=True, group="payload")
    def open_payload(self, envelope: dict[str, Any]) -> None:
        """The event in full, its payload fetched from the store."""
        try:
            payload = self.history.query(*queries.event_payload(str(envelope.get("id", "")))).scalar()
            envelope["data"] = json.loads(payload) if payload is not None else "(payload not found)"
        except (HistoryError, ValueError) as exc:
            envelope["data"] = f"(payload not loaded: {exc})"
        envelope = {k: (str(v) if k == "timestamp" else v) for k, v in envelope.items()}
        self.app.call_from_thread(self.app.push_screen, EventScreen(envelope))

    def action_tab(self, tab: str) -> None:
        self.query_one("#session-tabs", TabbedContent).active = tab

    def action_replay(self) -> None:
        if not self.loaded:
            self.notify("the session is still being read", severity="warning")
            return
        from agentwatch.tui.replay import ReplayScreen

        self.app.push_screen(ReplayScreen(self.session_id, self.answer.events))
