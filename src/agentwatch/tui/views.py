"""The dashboard's second-level screens: one agent in detail, and the team.

Both read the app's model (kept current by the app's repaint timer whichever screen is shown) and
repaint themselves on a timer of their own; neither touches the bus.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ClassVar, Protocol

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical
from textual.screen import Screen
from textual.widgets import DataTable, Footer, Static, TabbedContent, TabPane

from agentwatch.agents import AgentKey
from agentwatch.format import age, clock, duration, one_line
from agentwatch.harnesses import short_id
from agentwatch.store import queries
from agentwatch.store.answer import HistoryError
from agentwatch.tui.common import FittedTable, Palette, refill
from agentwatch.tui.live import LiveState
from agentwatch.tui.model import TIMELINE_MAX, FeedLine, conversation, counted, errors, sparkline, tool_calls
from agentwatch.tui.roster import Agent, idle_teammates
from agentwatch.tui.sources import HistorySource, answer_envelopes
from agentwatch.tui.store_side import AgentStored

VIEW_REPAINT_SECONDS = 0.5
DETAIL_ROWS = 300


def gone(screen: Screen[Any]) -> bool:
    """The screen was closed before it got to mount or paint (a quick escape): nothing to do."""
    return screen not in screen.app.screen_stack


# A call's duration as the `tool_calls` view has it (docs/queries.md): the one Claude Code reported
# on its result, else the time between its hook events. Stored events come without payloads, so the
# agent view reads it there rather than time the events itself (which missed what was reported).
CALL_DURATIONS = (
    "SELECT session_id, tool_use_id, duration_ms FROM tool_calls "
    "WHERE session_id IN {sessions:Array(String)} AND tool_use_id IN {ids:Array(String)} "
    "AND duration_ms IS NOT NULL"
)
RESULTS = frozenset({"PostToolUse", "PostToolUseFailure", "PermissionDenied"})


def timed(envelopes: list[dict[str, Any]], history: HistorySource) -> None:
    """The stored results among `envelopes` carry their call's duration as `tool_calls` says."""
    results = [e for e in envelopes if e.get("event") in RESULTS and e.get("tool_use_id")]
    if not results:
        return
    sessions = sorted({str(e.get("session_id", "")) for e in results})
    ids = sorted({str(e["tool_use_id"]) for e in results})
    answer = history.query(CALL_DURATIONS, {"sessions": sessions, "ids": ids})
    took = {(str(row[0]), str(row[1])): int(row[2]) for row in answer.rows}
    for env in results:
        call = (str(env.get("session_id", "")), str(env["tool_use_id"]))
        if env.get("duration_ms") is None and call in took:
            env["duration_ms"] = took[call]


class TablesScreen(Screen[None]):
    """A screen of tables built with their columns in compose, and painted through references:
    a timer or a worker may paint before the tab panes are mounted, or after the screen closed."""

    def __init__(self, head_id: str) -> None:
        super().__init__()
        self._tables: dict[str, DataTable[Any]] = {}
        self._head = Static(id=head_id)
        self._head_text = Text()

    def _show_head(self, text: Text) -> None:
        # Static.update lays the whole screen out again: only when the text really changed.
        if text != self._head_text:
            self._head_text = text
            self._head.update(text)

    def _table(self, table_id: str, *columns: str) -> DataTable[Any]:
        table: DataTable[Any] = FittedTable(id=table_id, cursor_type="row")
        table.add_columns(*columns)
        self._tables[table_id] = table
        return table


class Dashboard(Protocol):
    """What the screens need from the app."""

    state: LiveState
    clock: Callable[[], float]
    history: HistorySource | None

    @property
    def palette(self) -> Palette: ...

    def open_envelope(self, envelope: dict[str, Any]) -> None: ...


class AgentScreen(TablesScreen):
    """One agent: its timeline, tool calls, prompts and responses, errors, and subagents.

    Newest first in every table: the detail is read from the top, while things happen.
    """

    HELP: ClassVar[str] = "Agent detail"  # its keys' title in the help

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape,q", "app.pop_screen", "Back"),
        Binding("1", "tab('timeline')", "Timeline"),
        Binding("2", "tab('calls')", "Tool calls"),
        Binding("3", "tab('conversation')", "Prompts"),
        Binding("4", "tab('errors')", "Errors"),
        Binding("5", "tab('subagents')", "Subagents"),
    ]

    def __init__(self, dash: Dashboard, key: AgentKey) -> None:
        super().__init__("agent-head")
        self.dash = dash
        self.key = key
        self.agent_name = key[2]
        self.sub_title = key[2]
        # Older events of this agent from the store: the live timeline holds only the newest.
        self._stored: list[FeedLine] = []
        self._lines: list[FeedLine] = []
        self._subagents: list[AgentKey] = []
        self.history_note = ""

    def compose(self) -> ComposeResult:
        yield self._head
        with TabbedContent(id="agent-tabs"):
            with TabPane("Timeline", id="timeline"):
                yield self._table("agent-timeline", "time", "event", "text")
            with TabPane("Tool calls", id="calls"):
                yield self._table("agent-calls", "start", "tool", "took", "status", "call")
            with TabPane("Prompts & responses", id="conversation"):
                yield self._table("agent-conversation", "time", "what", "text")
            with TabPane("Errors", id="errors"):
                yield self._table("agent-errors", "time", "event", "text")
            with TabPane("Subagents", id="subagents"):
                yield self._table(
                    "agent-subagents", "agent", "type", "state", "calls", "err", "seen", "activity"
                )
        yield Footer()

    def on_mount(self) -> None:
        if gone(self):
            return
        if self.dash.history is not None:
            self.load_stored()
        self.set_interval(VIEW_REPAINT_SECONDS, self.repaint)
        self.repaint()

    def action_tab(self, tab: str) -> None:
        if not gone(self):
            self.query_one("#agent-tabs", TabbedContent).active = tab

    @work(thread=True, exclusive=True, group="agent-history")
    def load_stored(self) -> None:
        assert self.dash.history is not None
        try:
            answer = self.dash.history.query(*queries.agent_events(self.key, TIMELINE_MAX))
        except HistoryError as exc:
            self.post_message(AgentStored(([], f"store: {one_line(exc, 160)}: live events only")))
            return
        envelopes = answer_envelopes(answer)
        try:
            timed(envelopes, self.dash.history)
        except HistoryError as exc:
            self.log.warning(f"call durations not read: {exc}")  # the hook events' times stand
        self.post_message(AgentStored(([FeedLine.of(env) for env in envelopes], "")))

    @on(AgentStored)
    def _stored_in(self, message: AgentStored) -> None:
        self._stored, self.history_note = message.value
        self.repaint()

    def repaint(self) -> None:
        if gone(self):
            return
        roster = self.dash.state.roster
        agent = roster.get(self.key)
        now = self.dash.clock()
        pal = self.dash.palette
        self._lines = lines = self.dash.state.lines_of(self.key, self._stored)
        self._paint_head(agent, now, pal)
        recent = lines[-DETAIL_ROWS:][::-1]
        refill(
            self._tables["agent-timeline"],
            [(clock(ln.at), Text(ln.event, style=pal.kind.get(ln.kind, "")), ln.text) for ln in recent],
        )
        calls = tool_calls(lines)[-DETAIL_ROWS:][::-1]
        refill(
            self._tables["agent-calls"],
            [
                (
                    clock(c.start),
                    c.tool,
                    duration(c.duration(now) * 1000),
                    Text(c.status, style=pal.status.get(c.status, "")),
                    c.error or c.text,
                )
                for c in calls
            ],
        )
        refill(
            self._tables["agent-conversation"],
            [
                (clock(ln.at), Text(ln.kind, style=pal.kind.get(ln.kind, "")), ln.text)
                for ln in conversation(lines)[-DETAIL_ROWS:][::-1]
            ],
        )
        refill(
            self._tables["agent-errors"],
            [
                (clock(ln.at), Text(ln.event, style=pal.kind.get(ln.kind, "")), ln.text)
                for ln in errors(lines)[-DETAIL_ROWS:][::-1]
            ],
        )
        children = roster.children(self.key)
        self._subagents = [c.key for c in children]
        refill(
            self._tables["agent-subagents"],
            [
                (
                    c.name,
                    c.agent_type,
                    Text(c.state, style=pal.state.get(c.state, "")),
                    str(c.tool_calls),
                    Text(str(c.errors), style=pal.error if c.errors else ""),
                    age(now - c.last_seen if c.last_seen else None, unknown=""),
                    sparkline(list(c.activity)[-12:]),
                )
                for c in children
            ],
        )

    def _paint_head(self, agent: Agent | None, now: float, pal: Palette) -> None:
        head = Text("agent  ", style="dim")
        if agent is None:
            head.append(f"{self.agent_name}: no events seen yet", style="bold")
        else:
            head.append(agent.name, style="bold")
            head.append("  ")
            head.append(agent.state, style=pal.state.get(agent.state, ""))
            running = agent.tool_running_for(now)
            if agent.tool:
                head.append(f" {agent.tool}" + (f" for {age(running)}" if running is not None else ""))
            counts = (agent.tool_calls, agent.errors, agent.messages)
            facts = [
                f"type {agent.agent_type}" if agent.agent_type else "",
                f"team {agent.team}" if agent.team else "",
                f"lead {agent.parent}" if agent.parent else "",
                f"session {short_id(agent.session_id)}" if agent.session_id else "",
                f"scope {agent.scope}" if agent.scope not in (agent.team, agent.session_id) else "",
                f"host {agent.host}" if agent.host else "",
                " · ".join(
                    counted(n, noun) for n, noun in zip(counts, ("call", "error", "message"), strict=True)
                ),
            ]
            head.append("   " + " · ".join(f for f in facts if f), style="dim")
        if self.history_note:
            head.append(f"   {self.history_note}", style=pal.error)
        self._show_head(head)

    @on(DataTable.RowSelected, "#agent-timeline")
    def open_line(self, event: DataTable.RowSelected) -> None:
        recent = self._lines[-DETAIL_ROWS:][::-1]
        if 0 <= event.cursor_row < len(recent):
            self.dash.open_envelope(recent[event.cursor_row].full())

    @on(DataTable.RowSelected, "#agent-subagents")
    def open_subagent(self, event: DataTable.RowSelected) -> None:
        if 0 <= event.cursor_row < len(self._subagents):
            self.app.switch_screen(AgentScreen(self.dash, self._subagents[event.cursor_row]))


class TeamScreen(TablesScreen):
    """Who messaged whom, tasks created and completed, and teammates sitting idle."""

    HELP: ClassVar[str] = "Team view"  # its keys' title in the help

    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape,q", "app.pop_screen", "Back")]

    def __init__(self, dash: Dashboard) -> None:
        super().__init__("team-head")
        self.dash = dash
        self.sub_title = "team"
        self._idle: list[AgentKey] = []

    def compose(self) -> ComposeResult:
        yield self._head
        with Vertical(id="team-main"):
            with Vertical(id="edges-pane", classes="pane") as edges:
                edges.border_title = "messages: who → whom"
                yield self._table("team-edges", "team", "from", "to", "n", "last", "latest summary")
            with Horizontal(id="team-lower"):
                with Vertical(id="tasks-pane", classes="pane") as tasks:
                    tasks.border_title = "tasks"
                    yield self._table("team-tasks", "session", "#", "status", "subject", "by")
                with Vertical(id="idle-pane", classes="pane") as idle:
                    idle.border_title = "idle teammates"
                    yield self._table("team-idle", "agent", "idle", "calls", "lead")
        yield Footer()

    def on_mount(self) -> None:
        if gone(self):
            return
        self.set_interval(VIEW_REPAINT_SECONDS, self.repaint)
        self.repaint()

    def repaint(self) -> None:
        if gone(self):
            return
        now = self.dash.clock()
        pal = self.dash.palette
        roster, team = self.dash.state.roster, self.dash.state.team
        edges = team.edges()
        tasks = team.tasks()
        idle = idle_teammates(roster)
        open_tasks = sum(1 for t in tasks if not t.done)
        # The store's count of the window's tasks when the list holds fewer (the newest ones).
        of = f" of {team.tasks_total:,}" if team.tasks_total > len(tasks) else ""
        self._show_head(
            Text(
                f"team  {roster.total} agents · {sum(e.count for e in edges)} messages on "
                f"{len(edges)} edges · {counted(len(tasks), 'task')}{of} ({open_tasks} open) · "
                f"{len(idle)} idle",
                style="bold",
            )
        )
        refill(
            self._tables["team-edges"],
            [(e.team, e.sender, e.recipient, str(e.count), age(now - e.last_at), e.summary) for e in edges],
        )
        refill(
            self._tables["team-tasks"],
            [
                (
                    t.scope[:8],
                    t.task_id,
                    Text("done", style=pal.good) if t.done else Text("open", style=pal.status["running"]),
                    t.subject,
                    t.completed_by if t.done else t.created_by,
                )
                for t in tasks
            ],
        )
        self._idle = [a.key for a in idle]
        refill(
            self._tables["team-idle"],
            [(a.name, age(now - a.last_seen), str(a.tool_calls), a.parent) for a in idle],
        )

    @on(DataTable.RowSelected, "#team-idle")
    def open_idle(self, event: DataTable.RowSelected) -> None:
        if 0 <= event.cursor_row < len(self._idle):
            self.app.push_screen(AgentScreen(self.dash, self._idle[event.cursor_row]))
