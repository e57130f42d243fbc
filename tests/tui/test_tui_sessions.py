"""The sessions view, a session's page with its turns, and its replay, on the fixture transcripts'
usage (read by the hook's own reader, priced and stored by the store's own code) plus the hook
events Claude Code sent while it wrote them (tests/transcript_hooks.py), in embedded ClickHouse.

The dashboard reads the engine through the read side's own path (queries.run_query, then
answer.decode: what `agentwatch sql` runs on a ClickHouse server). Every turn's figures on
screen (tools, failures, durations, tokens, cost, wall time) equal those of plain SQL written
here over the raw events and usage of the same session.
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Mapping
from typing import Any

import pytest
from clickhouse_connect.driver.client import Client
from textual.widgets import DataTable

from agentwatch.contract import encode_envelope, envelopes_from_stdin
from agentwatch.format import duration, money, tool_counts
from agentwatch.store.answer import Answer, decode
from agentwatch.store.migrations import apply_migrations
from agentwatch.store.queries import run_query
from agentwatch.store.writes import insert_batch
from agentwatch.tui.app import AgentwatchApp
from agentwatch.tui.cost_view import CostScreen
from agentwatch.tui.replay import SPEEDS, ReplayScreen
from agentwatch.tui.search_view import SearchScreen
from agentwatch.tui.session_page import SessionScreen
from agentwatch.tui.sessions_view import SessionsScreen
from tests.conftest import transcript_sessions
from tests.integration.test_cost_store import session_bodies, store_bodies
from tests.transcript_hooks import hook_events
from tests.tui.test_tui_app import FakeLive

# Two prompts (the second a teammate's message), a subagent, a SendMessage.
SESSION = "4ef48e0b-52f0-4e15-9561-7987cce78712"
# One prompt, twelve tool calls, six of them failed, a subagent.
BUSY = "27e556a2-de12-4c72-b5fd-a64ef0b73d15"


class EngineHistory:
    """The HistorySource over an embedded engine, answered as the read side answers."""

    def __init__(self, client: Client) -> None:
        self.client = client
        self.lock = threading.Lock()

    def query(self, sql: str, params: Mapping[str, Any] | None = None) -> Answer:
        with self.lock:
            return decode(run_query(self.client, sql, params))


@pytest.fixture
def store(chdb_database: Client) -> Client:
    apply_migrations(chdb_database)
    events: list[bytes] = []
    usage: list[bytes] = []
    for session, main, subagents, _ in transcript_sessions():
        for at, payload in hook_events(main, subagents):
            raw = json.dumps(payload).encode()
            events += [encode_envelope(env) for _, env in envelopes_from_stdin(raw, {}, host="lab", now=at)]
        usage += [body for _, body in session_bodies(session, main, subagents)]
    insert_batch(chdb_database, events, [])
    store_bodies(chdb_database, usage)
    return chdb_database


def sql(client: Client, text: str, **params: Any) -> list[dict[str, Any]]:
    return decode(run_query(client, text, params)).dicts()


def expected_turns(client: Client, session: str) -> list[list[str]]:
    """Each turn's row as the page must show it, from plain SQL over the raw tables: the events of
    its prompt_id, and the API messages of the session from its first event to the next turn's."""
    turns = sql(
        client,
        "SELECT prompt_id, min(timestamp) AS started, "
        "dateDiff('millisecond', min(timestamp), max(timestamp)) AS wall_ms, "
        "anyIf(text, event = 'UserPromptSubmit') AS prompt, "
        "arrayMap(c -> c.2, arraySort(groupArrayIf((timestamp, tool_name), event = 'PreToolUse'))) AS tools, "
        "countIf(event = 'PreToolUse') AS calls, "
        "countIf(event IN ('PostToolUseFailure', 'PermissionDenied')) AS failed, "
        "sumIf(duration_ms, event IN ('PostToolUse', 'PostToolUseFailure')) AS tool_ms, "
        "countIf(event = 'SubagentStart') AS subs, "
        "countIf(event = 'PreToolUse' AND tool_name = 'SendMessage') AS msgs "
        "FROM events FINAL WHERE session_id = {s:String} AND prompt_id != '' "
        "GROUP BY prompt_id ORDER BY started",
        s=session,
    )
    messages = sql(
        client,
        "SELECT timestamp, input_tokens + output_tokens + cache_read_tokens + cache_write_tokens AS tokens, "
        "cost_usd FROM usage FINAL WHERE session_id = {s:String}",
        s=session,
    )
    rows = []
    for i, turn in enumerate(turns):
        ends = turns[i + 1]["started"] if i + 1 < len(turns) else None
        mine = [
            m
            for m in messages
            if m["timestamp"] >= turn["started"] and (ends is None or m["timestamp"] < ends)
        ]
        tokens = sum(int(m["tokens"]) for m in mine)
        cost = sum(float(m["cost_usd"]) for m in mine) if mine else None
        rows.append(
            [str(i + 1), f"{turn['started']:%H:%M:%S}", str(turn["calls"]), str(turn["failed"]),
             duration(turn["tool_ms"]), str(turn["subs"]), str(turn["msgs"]), f"{tokens:,}",
             money(cost, tokens), duration(turn["wall_ms"]), turn["prompt"], tool_counts(turn["tools"])]
        )  # fmt: skip
    return rows


def cells(table: DataTable[Any]) -> list[list[str]]:
    return [[str(c) for c in table.get_row_at(i)] for i in range(table.row_count)]


async def until(pilot: Any, check: Any, what: str, timeout: float = 20) -> None:
    for _ in range(int(timeout / 0.1)):
        if check():
            return
        await pilot.pause(0.1)
    raise AssertionError(what)


async def open_cost_view(pilot: Any) -> CostScreen:
    """c, then w until the window is all time."""
    app = pilot.app
    await pilot.press("c")
    await until(pilot, lambda: isinstance(app.screen, CostScreen) and app.screen.loaded, "cost view")
    view = app.screen
    assert isinstance(view, CostScreen)
    while view.window != "all":
        view.loaded = False
        await pilot.press("w")
        await until(pilot, lambda: view.loaded, "cost view, next window")
    return view


def dashboard(store: Client) -> AgentwatchApp:
    return AgentwatchApp(FakeLive([]), EngineHistory(store), theme="textual-dark")


async def open_session(pilot: Any, session: str) -> SessionScreen:
    """e, the session's row, Enter: its page, read."""
    app = pilot.app
    await pilot.press("e")
    await until(pilot, lambda: isinstance(app.screen, SessionsScreen) and app.screen.loaded, "sessions view")
    sessions = app.screen
    row = [str(r["session_id"]) for r in sessions.shown].index(session)
    sessions.query_one("#sessions-table", DataTable).move_cursor(row=row)
    sessions.query_one("#sessions-table", DataTable).focus()
    await pilot.press("enter")
    await until(pilot, lambda: isinstance(app.screen, SessionScreen) and app.screen.loaded, "session page")
    assert isinstance(app.screen, SessionScreen)
    return app.screen


@pytest.mark.parametrize("session", [SESSION, BUSY])
async def test_the_turns_on_screen_are_the_sql_figures(store: Client, session: str) -> None:
    app = dashboard(store)
    async with app.run_test(size=(200, 50)) as pilot:
        await pilot.press("e")
        await until(pilot, lambda: isinstance(app.screen, SessionsScreen) and app.screen.loaded, "sessions")
        assert isinstance(app.screen, SessionsScreen)
        assert {str(r["session_id"]) for r in app.screen.rows} == {s for s, *_ in transcript_sessions()}
        await pilot.press("escape")
        page = await open_session(pilot, session)
        want = expected_turns(store, session)
        assert want and any(row[7] != "0" for row in want), "the fixture has tokens in its turns"
        assert cells(page.query_one("#session-turns", DataTable)) == want
        # The turn under the cursor lists its events: every one of its prompt_id.
        first = page.answer.turns[0]["prompt_id"]
        (n,) = sql(store, "SELECT count() AS n FROM events FINAL WHERE session_id = {s:String} "
                          "AND prompt_id = {p:String}", s=session, p=first)  # fmt: skip
        assert page.query_one("#turn-events", DataTable).row_count == n["n"]
        (total,) = sql(
            store, "SELECT count() AS n FROM events FINAL WHERE session_id = {s:String}", s=session
        )
        assert page.query_one("#session-events", DataTable).row_count == total["n"]


async def test_the_replay_plays_the_session_through_the_live_views(store: Client) -> None:
    app = dashboard(store)
    async with app.run_test(size=(200, 50)) as pilot:
        page = await open_session(pilot, BUSY)
        await pilot.press("r")
        await until(pilot, lambda: isinstance(app.screen, ReplayScreen) and app.screen.is_mounted, "replay")
        replay = app.screen
        assert isinstance(replay, ReplayScreen)
        await pilot.press("space")  # it plays from the start: now paused
        assert not replay.playing
        await pilot.press("0")
        for _ in range(3):
            await pilot.press("n")
        assert replay.replay.done == 3
        assert len(replay.replay.feed.lines()) == 3
        replay.speed_index = len(SPEEDS) - 1  # the fastest
        await pilot.press("space")
        await until(pilot, lambda: replay.replay.finished, "the replay ends", timeout=30)
        # As it was at the end: each agent's calls and errors are the session's.
        agents = sql(store, "SELECT agent, countIf(event = 'PreToolUse') AS calls FROM events FINAL "
                            "WHERE session_id = {s:String} GROUP BY agent", s=BUSY)  # fmt: skip
        played = {a.name: a.tool_calls for _, a in replay.replay.roster.ordered(show_folded=True)}
        assert played == {a["agent"]: a["calls"] for a in agents}
        assert len(replay.replay.feed.lines()) == len(page.answer.events)


async def test_search_opens_the_session_at_the_event(store: Client) -> None:
    app = dashboard(store)
    async with app.run_test(size=(200, 50)) as pilot:
        await pilot.press("g")
        await until(pilot, lambda: isinstance(app.screen, SearchScreen), "search")
        (found,) = sql(store, "SELECT id, session_id FROM events FINAL WHERE event = 'UserPromptSubmit' "
                              "AND text LIKE 'SCENARIO-A%'")  # fmt: skip
        await pilot.press(*"scenario-a", "enter")
        await until(pilot, lambda: app.screen.loaded, "search results")  # type: ignore[attr-defined]
        search = app.screen
        assert isinstance(search, SearchScreen)
        assert [r["id"] for r in search.rows] == [found["id"]]
        await pilot.press("enter")
        await until(
            pilot, lambda: isinstance(app.screen, SessionScreen) and app.screen.loaded, "session page"
        )
        page = app.screen
        assert isinstance(page, SessionScreen)
        assert page.session_id == found["session_id"]
        events = page.query_one("#session-events", DataTable)
        assert str(page.answer.events[events.cursor_row]["id"]) == found["id"]


@pytest.mark.parametrize("width", [80, 160, 250])
def test_session_page_snapshot(snap_compare: Any, store: Client, width: int) -> None:
    """The head (session, outcome) above the tabs at every size."""

    async def open_page(pilot: Any) -> None:
        page = await open_session(pilot, BUSY)
        # The selected turn's events come a moment after the page: the snapshot waits for them.
        await until(pilot, lambda: page.query_one("#turn-events", DataTable).row_count > 0, "turn events")
        await pilot.wait_for_scheduled_animations()
        await pilot.pause(1.0)  # the tables size their columns to what they hold, a refresh later

    assert snap_compare(dashboard(store), terminal_size=(width, 48), run_before=open_page)


@pytest.mark.parametrize("width", [80, 160, 250])
def test_cost_view_snapshot(snap_compare: Any, store: Client, width: int) -> None:
    """The burn rate and the window (w) above the tabs at every size."""

    async def all_time(pilot: Any) -> None:
        await open_cost_view(pilot)  # all time: what the fixtures cost, whatever the day
        await pilot.pause(0.3)

    assert snap_compare(dashboard(store), terminal_size=(width, 48), run_before=all_time)


def test_replay_snapshot(snap_compare: Any, store: Client) -> None:
    async def replay_six(pilot: Any) -> None:
        await open_session(pilot, BUSY)
        await pilot.press("r")
        await until(
            pilot,
            lambda: isinstance(pilot.app.screen, ReplayScreen) and pilot.app.screen.is_mounted,
            "replay",
        )
        await pilot.press("space", "0", *("n" * 6))
        await asyncio.sleep(0.2)

    assert snap_compare(dashboard(store), terminal_size=(160, 40), run_before=replay_six)


async def test_bookkeeping_is_folded_out_of_the_feed_until_asked_for() -> None:
    """PostToolBatch (and the other bookkeeping events) are not in the default feed; b shows them."""
    base = {"session_id": BUSY, "cwd": "/repo"}
    payloads = [
        {**base, "hook_event_name": "PreToolUse", "tool_name": "Bash", "tool_input": {"command": "ls"},
         "tool_use_id": "toolu_1"},
        {**base, "hook_event_name": "PostToolBatch",
         "tool_calls": [{"tool_name": "Bash", "tool_use_id": "toolu_1"}]},
        {**base, "hook_event_name": "CwdChanged", "old_cwd": "/repo", "new_cwd": "/repo/sub"},
    ]  # fmt: skip
    envelopes = [
        env for p in payloads for _, env in envelopes_from_stdin(json.dumps(p).encode(), {}, host="h")
    ]
    app = AgentwatchApp(FakeLive(envelopes))
    async with app.run_test(size=(160, 40)) as pilot:
        await until(pilot, lambda: len(app.state.feed) == 3, "events in")
        await pilot.pause(0.3)
        assert [line.event for line in app._feed_lines] == ["PreToolUse"]
        await pilot.press("b")
        await pilot.pause(0.5)
        assert [line.event for line in app._feed_lines] == ["PreToolUse", "PostToolBatch", "CwdChanged"]
        assert [line.text for line in app._feed_lines][1:] == ["1 tool call done: Bash", "cd /repo/sub"]


async def test_the_cost_view_is_the_stores(store: Client) -> None:
    """c: by model and by harness over all time equal SQL over `usage`; the costliest turn first,
    with its share of everything spent."""
    app = dashboard(store)
    async with app.run_test(size=(200, 50)) as pilot:
        view = await open_cost_view(pilot)
        by_model = sql(store, "SELECT model, sum(cost_usd) AS usd FROM usage FINAL GROUP BY model")
        shown = {row[0]: row[3] for row in cells(view.query_one("#cost-by-model", DataTable))}
        assert shown == {r["model"]: money(r["usd"]) for r in by_model}
        by_harness = sql(store, "SELECT harness, sum(cost_usd) AS usd FROM usage FINAL GROUP BY harness")
        shown = {row[0]: row[3] for row in cells(view.query_one("#cost-by-harness", DataTable))}
        assert shown == {r["harness"]: money(r["usd"]) for r in by_harness}
        turns = [float(t["cost_usd"]) for t in view.answer.turns]
        assert turns == sorted(turns, reverse=True) and len(turns) >= 5
        (total,) = sql(store, "SELECT sum(cost_usd) AS usd FROM usage FINAL")
        first = view.answer.turns[0]
        assert first["share_pct"] == round(100 * float(first["cost_usd"]) / float(total["usd"]), 1)
        # The costliest turn is the one plain SQL finds (tests above: a turn's usage is by time).
        best = max(
            ((s, row) for s, *_ in transcript_sessions() for row in expected_turns(store, s)),
            key=lambda found: float(found[1][8].lstrip("$") or 0),
        )
        assert (first["session_id"], money(first["cost_usd"])) == (best[0], best[1][8])


async def test_the_agent_views_durations_are_the_tool_calls_views(chdb_database: Client) -> None:
    """A stored call whose result reports 929 ms, 107 ms after its PreToolUse: the agent view says
    what `tool_calls` says (the reported time), not the time between the hook events."""
    from agentwatch.tui.views import AgentScreen

    apply_migrations(chdb_database)
    base = {"session_id": BUSY, "cwd": "/repo", "tool_name": "Agent", "tool_use_id": "toolu_took"}
    at = 1_795_000_000.0
    steps: list[tuple[dict[str, Any], float]] = [
        ({"hook_event_name": "PreToolUse", "tool_input": {"prompt": "look"}}, at),
        ({"hook_event_name": "PostToolUse", "duration_ms": 929, "tool_response": {}}, at + 0.107),
    ]
    events = [
        encode_envelope(env)
        for step, at in steps
        for _, env in envelopes_from_stdin(json.dumps({**base, **step}).encode(), {}, host="lab", now=at)
    ]
    insert_batch(chdb_database, events, [])
    app = dashboard(chdb_database)
    async with app.run_test(size=(200, 50)) as pilot:
        await until(pilot, lambda: len(app.state.roster) == 1, "roster")
        app.show_agent(app.state.roster.agents()[0].key)
        await until(pilot, lambda: isinstance(app.screen, AgentScreen) and app.screen._stored, "stored")
        await pilot.pause(0.3)
        shown = [(row[1], row[2]) for row in cells(app.screen.query_one("#agent-calls", DataTable))]
    rows = sql(chdb_database, "SELECT tool, duration_ms FROM tool_calls")
    assert shown == [(r["tool"], duration(r["duration_ms"])) for r in rows] == [("Agent", "929ms")]
