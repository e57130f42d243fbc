"""The dashboard's agent detail and team view, the command palette and the themes, through a pilot."""

from __future__ import annotations

from typing import Any

import pytest
from clickhouse_connect.driver.client import Client
from rich.text import Text
from textual.command import CommandList, CommandPalette
from textual.widgets import DataTable, Static, TabbedContent

from agentwatch.contract import encode_envelope
from agentwatch.store import queries
from agentwatch.store.answer import decode
from agentwatch.store.migrations import apply_migrations
from agentwatch.store.queries import Query, run_query
from agentwatch.store.writes import insert_batch
from agentwatch.tui.app import AgentwatchApp, EventScreen
from agentwatch.tui.sources import answer_envelopes
from agentwatch.tui.table import Table
from agentwatch.tui.views import AgentScreen, TeamScreen
from tests.tui.test_tui_app import BASE, SESSION, FakeHistory, FakeLive, env_of, painted, team_traffic, until
from tests.unit.test_tui_model import TEAM_SESSION, team_envelopes

LEAD_KEY = ("", SESSION, "main-5e55105e")


def table_rows(screen: Any, selector: str) -> list[list[str]]:
    table = screen.query_one(selector, DataTable)
    return [[str(cell) for cell in table.get_row_at(i)] for i in range(table.row_count)]


def everything() -> list[dict[str, Any]]:
    """The lead, a subagent and a waiting teammate, then a second team with messages and tasks."""
    return team_traffic() + team_envelopes()


def make_app(live: list[dict[str, Any]], history: FakeHistory | None = None, **kw: Any) -> AgentwatchApp:
    return AgentwatchApp(FakeLive(live), history, clock=lambda: BASE + 10, **kw)


async def test_agent_detail_shows_calls_errors_conversation_and_subagents() -> None:
    app = make_app(team_traffic())
    async with app.run_test(size=(160, 40)) as pilot:
        await painted(pilot, app, 7)
        roster = app.query_one("#roster", Table)
        roster.focus()
        roster.move_cursor(0)
        await pilot.press("enter")
        await until(pilot, lambda: isinstance(app.screen, AgentScreen))
        screen = app.screen
        assert isinstance(screen, AgentScreen) and screen.agent_name == "main-5e55105e"
        head = str(screen.query_one("#agent-head", Static).render())
        assert "working Bash" in head and "1 call · 0 errors" in head
        assert [r[2] for r in table_rows(screen, "#agent-timeline")] == [
            "$ pytest -q",
            "Fix the flaky test",
        ], "newest first"
        calls = table_rows(screen, "#agent-calls")
        assert [(c[1], c[3]) for c in calls] == [("Bash", "running")]
        assert calls[0][2] == "1m09s", "a running call's time counts up to now"
        assert [r[1] for r in table_rows(screen, "#agent-conversation")] == ["prompt"]
        subs = table_rows(screen, "#agent-subagents")
        assert {r[0] for r in subs} == {"Explore-fd10a9f3", "reviewer"}
        # a subagent, from the subagents tab: its failed call and its error
        await pilot.press("5")
        assert screen.query_one("#agent-tabs", TabbedContent).active == "subagents"
        table = screen.query_one("#agent-subagents", DataTable)
        table.focus()
        table.move_cursor(row=[r[0] for r in subs].index("Explore-fd10a9f3"))
        await pilot.press("enter")
        await until(pilot, lambda: getattr(app.screen, "agent_name", "") == "Explore-fd10a9f3")
        sub = app.screen
        assert isinstance(sub, AgentScreen) and sub.agent_name == "Explore-fd10a9f3"
        calls = table_rows(sub, "#agent-calls")
        assert [(c[1], c[2], c[3]) for c in calls] == [("Grep", "3.0s", "failed")]
        assert "Exit code 2" in calls[0][4]
        assert len(table_rows(sub, "#agent-errors")) == 1
        # the timeline opens an event in full
        await pilot.press("1")
        timeline = sub.query_one("#agent-timeline", DataTable)
        timeline.focus()
        timeline.move_cursor(row=0)
        await pilot.press("enter")
        await until(pilot, lambda: isinstance(app.screen, EventScreen))
        await pilot.press("escape")
        await pilot.press("escape")
        await until(pilot, lambda: app.screen is app.screen_stack[0])
        assert app.screen is app.screen_stack[0], "escape goes back to the live view"


async def test_agent_detail_reads_older_events_from_the_store_once_each() -> None:
    traffic = team_traffic()
    lead_events = [e for e in traffic if e["agent"] == "main-5e55105e"]
    older = env_of(
        {"session_id": lead_events[0]["session_id"], "hook_event_name": "SessionStart"}, BASE - 3600
    )
    history = FakeHistory(older + lead_events)
    app = make_app(traffic, history)
    async with app.run_test(size=(160, 40)) as pilot:
        await painted(pilot, app, 7)
        app.show_agent(LEAD_KEY)
        await until(pilot, lambda: len(table_rows(app.screen, "#agent-timeline")) == 3)
        texts = [r[2] for r in table_rows(app.screen, "#agent-timeline")]
        assert texts == ["$ pytest -q", "Fix the flaky test", "session start (startup)"], texts


async def test_team_view_edges_tasks_and_idle_teammates() -> None:
    app = make_app(team_envelopes())
    async with app.run_test(size=(160, 40)) as pilot:
        await painted(pilot, app, len(team_envelopes()))
        await pilot.press("t")
        await until(pilot, lambda: len(table_rows(app.screen, "#team-edges")) == 2)
        screen = app.screen
        assert isinstance(screen, TeamScreen)
        edges = table_rows(screen, "#team-edges")
        assert edges[0][:4] == ["session-96f21a61", "researcher", "main-96f21a61", "2"]
        assert edges[0][5] == "Second pass done"
        assert edges[1][1:4] == ["main-96f21a61", "researcher", "1"] and edges[1][5] == "Kickoff"
        tasks = table_rows(screen, "#team-tasks")
        assert [tuple(t[:5]) for t in tasks] == [
            ("96f21a61", "2", "open", "Review the store", "main-96f21a61"),
            ("96f21a61", "1", "done", "Collect payloads", "researcher"),
        ]
        idle = table_rows(screen, "#team-idle")
        assert [(r[0], r[1]) for r in idle] == [("researcher", "4s")]
        head = str(screen.query_one("#team-head", Static).render())
        assert "3 messages on 2 edges" in head and "2 tasks (1 open)" in head and "1 idle" in head
        # live: a new message shows up without leaving the view
        kickoff = next(e for e in team_envelopes() if e["kind"] == "message")
        app.live.deliver(kickoff)  # type: ignore[attr-defined]
        await until(pilot, lambda: table_rows(screen, "#team-edges")[1][3] == "2")
        await pilot.press("escape")
        assert app.screen is app.screen_stack[0]


async def test_the_live_view_keeps_counting_while_another_view_is_shown() -> None:
    live = FakeLive(team_traffic()[:2])
    app = AgentwatchApp(live, None, clock=lambda: BASE)
    async with app.run_test(size=(160, 40)) as pilot:
        await painted(pilot, app, 2)
        await pilot.press("t")
        await until(pilot, lambda: isinstance(app.screen, TeamScreen))
        assert live.deliver is not None
        for env in team_traffic()[2:]:
            live.deliver(env)
        await until(pilot, lambda: app.state.feed.total == 7)
        assert app.query_one("#feed", Table).row_count == 2, "the hidden view is not painted"
        await pilot.press("escape")
        await painted(pilot, app, 7)


async def test_command_palette_offers_each_view_and_each_agent() -> None:
    app = make_app(team_traffic())
    async with app.run_test(size=(160, 40)) as pilot:
        await painted(pilot, app, 7)
        titles = [c.title for c in app.get_system_commands(app.screen)]
        for view in ("Live view", "Team view", "Tools and history", "Help"):
            assert view in titles
        team = "(session-5e55105e)"
        assert {
            f"Agent: main-5e55105e {team}",
            f"Agent: reviewer {team}",
            f"Agent: Explore-fd10a9f3 {team}",
        } <= set(titles), "each agent with where it lives"
        await pilot.press("ctrl+p")
        await until(pilot, lambda: isinstance(app.screen, CommandPalette))
        for ch in "Team view":
            await pilot.press(ch)
        palette = app.screen
        assert isinstance(palette, CommandPalette)
        await until(
            pilot, lambda: "Team view" in str(palette.query_one(CommandList).get_option_at_index(0).prompt)
        )
        await pilot.press("enter")
        await until(pilot, lambda: isinstance(app.screen, TeamScreen))
        command = next(
            c for c in app.get_system_commands(app.screen) if c.title == "Agent: reviewer (session-5e55105e)"
        )
        command.callback()
        await until(pilot, lambda: isinstance(app.screen, AgentScreen))
        assert isinstance(app.screen, AgentScreen) and app.screen.agent_name == "reviewer"
        assert len(app.screen_stack) == 2, "views replace each other, they do not pile up"


async def test_dark_and_light_themes_colour_states_from_the_theme() -> None:
    app = make_app(team_traffic(), theme="textual-light")
    async with app.run_test(size=(160, 40)) as pilot:
        await painted(pilot, app, 7)
        light = app.palette.state["waiting"]
        await pilot.press("d")
        await until(pilot, lambda: app.current_theme.dark)
        dark = app.palette.state["waiting"]
        assert light != dark, "the waiting colour follows the theme"
        table = app.query_one("#roster", Table)

        def waiting_style() -> object:
            cells = [table.get_row_at(i)[2] for i in range(table.row_count)]
            return next(c.style for c in cells if isinstance(c, Text) and c.plain == "waiting")

        await until(pilot, lambda: waiting_style() == dark)


async def test_tools_view_needs_the_store() -> None:
    app = make_app(team_traffic())
    async with app.run_test(size=(160, 40)) as pilot:
        await painted(pilot, app, 7)
        await pilot.press("h")
        await until(pilot, lambda: any("need the store" in str(n.message) for n in app._notifications))
        assert app.screen is app.screen_stack[0]


def test_headline_queries_run_on_the_real_schema(chdb_database: Client) -> None:
    apply_migrations(chdb_database)
    envelopes = team_envelopes()
    insert_batch(
        chdb_database,
        [encode_envelope(e) for e in envelopes if e["kind"] != "message"],
        [encode_envelope(e) for e in envelopes if e["kind"] == "message"],
    )

    def run(query: Query) -> list[dict[str, Any]]:
        return answer_envelopes(decode(run_query(chdb_database, *query)))

    recent = run(queries.recent_events(100))
    assert len(recent) == len(envelopes) and "data" not in recent[0]
    assert [e["id"] for e in recent] == [e["id"] for e in sorted(envelopes, key=lambda e: e["timestamp"])]
    tasks = [(e["task_id"], e["task_subject"]) for e in recent if e["kind"].startswith("task_")]
    assert tasks == [("1", "Collect payloads"), ("2", "Review the store"), ("1", "Collect payloads")]
    messages = [e for e in recent if e["kind"] == "message"]
    assert {m["peer"] for m in messages} == {"researcher", "main-96f21a61"}
    mine = run(queries.agent_events(("", TEAM_SESSION, "researcher"), 2))
    assert [e["agent"] for e in mine] == ["researcher", "researcher"]
    assert mine[-1]["event"] == "TeammateIdle", "the newest two, oldest first"


@pytest.mark.parametrize("name", ["x' OR 1=1 --", "a b", "", "é", "researcher' --"])
def test_agent_names_are_bound_by_clickhouse_never_formatted_in(chdb_database: Client, name: str) -> None:
    apply_migrations(chdb_database)
    insert_batch(chdb_database, [encode_envelope(e) for e in team_envelopes() if e["kind"] != "message"], [])
    query = queries.agent_events(("", TEAM_SESSION, name), 10)
    assert not name or name not in query.sql
    assert chdb_database.query(query.sql, parameters=query.params).result_rows == []


def test_agent_screen_snapshot(snap_compare: Any) -> None:
    async def open_lead(pilot: Any) -> None:
        await pilot.pause(0.4)
        pilot.app.show_agent(LEAD_KEY)
        await pilot.pause(0.4)
        await pilot.press("2")
        await pilot.pause(0.2)

    assert snap_compare(make_app(team_traffic()), terminal_size=(120, 30), run_before=open_lead)


def test_team_screen_snapshot(snap_compare: Any) -> None:
    async def open_team(pilot: Any) -> None:
        await pilot.pause(0.4)
        await pilot.press("t")
        await pilot.pause(0.4)

    assert snap_compare(make_app(everything()), terminal_size=(120, 30), run_before=open_team)


def test_main_screen_light_theme_snapshot(snap_compare: Any) -> None:
    async def settle(pilot: Any) -> None:
        await pilot.pause(0.5)

    app = make_app(everything(), theme="textual-light")
    assert snap_compare(app, terminal_size=(120, 30), run_before=settle)


def test_main_screen_at_80x24_snapshot(snap_compare: Any) -> None:
    async def settle(pilot: Any) -> None:
        await pilot.pause(0.5)

    assert snap_compare(make_app(everything()), terminal_size=(80, 24), run_before=settle)


async def test_views_opened_and_closed_faster_than_they_mount() -> None:
    """A person flicking through views: no screen may fail for having been closed already."""
    app = make_app(team_traffic(), FakeHistory(team_traffic()))
    async with app.run_test(size=(160, 40)) as pilot:
        await painted(pilot, app, 7)
        for key in ("t", "escape", "a", "escape", "h", "escape", "t", "a", "h", "t", "escape"):
            await pilot.press(key)
        await until(pilot, lambda: app.screen is app.screen_stack[0] and len(app.screen_stack) == 1)
        await pilot.pause(0.5)
        assert app.is_running and app.return_code is None


async def test_text_that_looks_like_markup_is_shown_as_written_everywhere() -> None:
    """Agents write anything: a grep for "[/]" once stopped the dashboard with a MarkupError."""
    session = {"session_id": "5e55105e-1111-4000-8000-000000000000", "cwd": "/repo"}
    odd = "[/] [bold]x[/bold] [link=file:///etc]y"
    steps: list[dict[str, Any]] = [
        {"hook_event_name": "PreToolUse", "tool_name": "Bash", "tool_input": {"command": f"grep -n '{odd}'"},
         "tool_use_id": "toolu_m1"},
        {"hook_event_name": "PostToolUseFailure", "tool_name": "Bash", "tool_input": {"command": "x"},
         "tool_use_id": "toolu_m1", "error": odd},
        {"hook_event_name": "TaskCreated", "task_id": "1", "task_subject": odd},
        {"hook_event_name": "PostToolUse", "tool_name": "SendMessage", "tool_response": {"success": True},
         "tool_input": {"to": "researcher", "summary": odd, "message": odd}},
    ]  # fmt: skip
    envelopes = [e for i, step in enumerate(steps) for e in env_of({**session, **step}, BASE + i)]
    app = make_app(envelopes)
    async with app.run_test(size=(160, 40)) as pilot:
        await painted(pilot, app, len(envelopes))
        feed = app.query_one("#feed", Table)
        texts = [str(feed.get_row_at(i)[3]) for i in range(feed.row_count)]
        assert any(odd in t for t in texts)
        app.show_agent(LEAD_KEY)
        await until(pilot, lambda: len(table_rows(app.screen, "#agent-errors")) == 1)
        assert odd in table_rows(app.screen, "#agent-errors")[0][2]
        await pilot.press("t")
        await until(pilot, lambda: len(table_rows(app.screen, "#team-tasks")) == 1)
        assert table_rows(app.screen, "#team-tasks")[0][3] == odd
        assert table_rows(app.screen, "#team-edges")[0][5] == odd
        await pilot.pause(0.3)
        assert app.is_running
