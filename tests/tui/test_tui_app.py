"""The dashboard driven as a person would, through Textual's pilot, over deterministic fake sources."""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import itertools
import json
import time
from collections.abc import Callable, Mapping
from typing import Any

import orjson
import pytest
from textual.binding import Binding
from textual.widgets import Static

from agentwatch.contract import envelopes_from_stdin
from agentwatch.format import utc_datetime
from agentwatch.store import live_roster, queries
from agentwatch.store.answer import Answer, HistoryUnreachable
from agentwatch.tui import app as app_module
from agentwatch.tui import common, help, table, tools_view, views
from agentwatch.tui.app import AgentwatchApp, EventScreen, HelpScreen
from agentwatch.tui.layout import SIDE_BY_SIDE_WIDTH
from agentwatch.tui.roster import Roster
from agentwatch.tui.sources import Deliver, Status
from agentwatch.tui.table import Table
from agentwatch.tui.team import Team
from agentwatch.tui.tools_view import ToolsScreen
from agentwatch.tui.views import AgentScreen, TeamScreen

BASE = 1_795_000_000.0  # a fixed moment: the clock the app sees is fixed too
SESSION = "5e55105e-1111-4000-8000-000000000000"


def env_of(payload: dict[str, Any], at: float) -> list[dict[str, Any]]:
    return [env for _, env in envelopes_from_stdin(json.dumps(payload).encode(), {}, now=at)]


def team_traffic() -> list[dict[str, Any]]:
    """A lead running a tool, a subagent under it, a teammate waiting for permission."""
    out: list[dict[str, Any]] = []
    steps: list[dict[str, Any]] = [
        {"hook_event_name": "UserPromptSubmit", "prompt": "Fix the flaky test"},
        {"hook_event_name": "PreToolUse", "tool_name": "Bash", "tool_input": {"command": "pytest -q"},
         "tool_use_id": "toolu_lead1"},
        {"hook_event_name": "SubagentStart", "agent_id": "afd10a9f34e53e617", "agent_type": "Explore"},
        {"hook_event_name": "PreToolUse", "agent_id": "afd10a9f34e53e617", "agent_type": "Explore",
         "tool_name": "Grep", "tool_input": {"pattern": "flaky"}, "tool_use_id": "toolu_sub1"},
        {"hook_event_name": "PreToolUse", "agent_id": "areviewer-4f6960afa371e571", "agent_type": "reviewer",
         "tool_name": "WebFetch", "tool_input": {"url": "https://example.com/api-key=sk-ant-api03-"
         + "x" * 30}, "tool_use_id": "toolu_rev1"},
        {"hook_event_name": "PermissionRequest", "agent_id": "areviewer-4f6960afa371e571",
         "agent_type": "reviewer", "tool_name": "WebFetch", "tool_input": {"url": "https://example.com"}},
        {"hook_event_name": "PostToolUseFailure", "agent_id": "afd10a9f34e53e617", "agent_type": "Explore",
         "tool_name": "Grep", "tool_input": {"pattern": "flaky"}, "tool_use_id": "toolu_sub1",
         "error": "Exit code 2"},
    ]  # fmt: skip
    for i, step in enumerate(steps):
        out += env_of({"session_id": SESSION, "cwd": "/repo", **step}, BASE - 60 + i)
    return out


class FakeLive:
    """Delivers its envelopes, then waits; the test makes the bus go away and come back."""

    def __init__(self, envelopes: list[dict[str, Any]]) -> None:
        self.envelopes = envelopes
        self.status: Status | None = None
        self.deliver: Deliver | None = None

    async def run(self, deliver: Deliver, status: Status) -> None:
        self.deliver, self.status = deliver, status
        status(True, "bus nats://fake:4222")
        for env in self.envelopes:
            deliver(env)
        await asyncio.Event().wait()


class FakeHistory:
    """A store that holds `envelopes`: it answers the dashboard's questions as the real one would
    (its roster and edges made by playing them through the dashboard's own model, the recent events
    as rows, every id stored), or raises `error`."""

    def __init__(self, envelopes: list[dict[str, Any]] | None = None, error: Exception | None = None) -> None:
        self.envelopes = envelopes or []
        self.error = error
        self.asked: list[str] = []

    def query(self, sql: str, params: Mapping[str, Any] | None = None) -> Answer:
        self.asked.append(sql)
        if self.error is not None:
            raise self.error
        if sql == queries.STORE_MARK.sql:  # what it holds: its mark moves when that grows
            return answer(("events", "messages", "usage", "alerts"), [(len(self.envelopes), 0, 0, 0)])
        if sql == live_roster.SCOPES_SQL:
            return answer(("host", "scope"), sorted({(a.host, a.scope) for a in self._model().agents()}))
        if sql == live_roster.AGENTS_SQL:
            return self._agents()
        if "FROM edge_hourly" in sql:
            team = Team()
            for env in self.envelopes:
                team.apply(env)
            edges = [
                (e.sender, e.recipient, e.team, e.count, utc(e.last_at), e.summary) for e in team.edges()
            ]
            return answer(("from_agent", "to_agent", "team", "messages", "last_at", "last_summary"), edges)
        if sql in (queries.window_tasks().sql, live_roster.TASKS_SQL):
            return self._tasks()
        if "FROM event_ids" in sql:
            held = {str(e.get("id")) for e in self.envelopes}
            asked = (params or {}).get("ids") or []
            return answer(("id",), [(i,) for i in asked if i in held])
        if "FROM events" in sql:
            columns = ("id", "timestamp", "event", "kind", "agent", "team", "parent_agent", "agent_type",
                       "session_id", "host", "tool_name", "tool_use_id", "text", "data")  # fmt: skip
            rows: list[tuple[Any, ...]] = [tuple(cell(e, c) for c in columns) for e in self.envelopes]
            return answer(columns, rows)
        return answer(("what", "session_id"), [])  # alerts, costs, tools, sessions: none

    def _tasks(self) -> Answer:
        team = Team()
        for env in self.envelopes:
            team.apply(env)
        columns = ("host", "scope", "team", "task_id", "subject", "created_by", "created_at", "created",
                   "completed_by", "completed_at", "completed", "tasks_total", "open_total")  # fmt: skip
        tasks = team.tasks()
        rows = [
            (t.host, t.scope, t.team, t.task_id, t.subject, t.created_by, utc(t.created_at or 0),
             t.created_at is not None, t.completed_by, utc(t.completed_at or 0), t.done, len(tasks),
             sum(not x.done for x in tasks))
            for t in tasks
        ]  # fmt: skip
        return answer(columns, rows)

    def _model(self) -> Roster:
        roster = Roster()
        for env in self.envelopes:
            roster.apply(env)
        return roster

    def _agents(self) -> Answer:
        """store/live_roster.py's flat rows of the agent rollup, from the dashboard's own model."""
        roster = self._model()
        columns = ("host", "scope", "agent", "team", "parent_agent", "agent_type", "agent_id", "session_id",
                   "last_event", "state_event", "state_note", "tool", "state_since", "state_id",
                   "first_seen", "last_seen", "tool_calls", "errors", "events", "messages_sent")  # fmt: skip
        rows = [
            (a.host, a.scope, a.name, a.team, a.parent, a.agent_type, "", a.session_id, a.state_event,
             a.state_event, NOTES.get((a.state_event, a.base), ""), a.tool,
             utc(a.state_at) if a.state_at else None, a.mark[1], utc(a.last_seen), utc(a.last_seen),
             a.tool_calls, a.errors, a.events, a.messages)
            for a in roster.agents()
        ]  # fmt: skip
        return answer(columns, rows)


# The notification type behind a Notification's state (the model keeps the state, not the type).
NOTES = {("Notification", "waiting"): "permission_prompt", ("Notification", "idle"): "idle_prompt"}
# store/live_roster.py's flat rows of the cost rollup, and of the hour.
COST_COLUMNS = ("host", "scope", "agent", "parent_agent", "team", "l_team", "l_parent", "l_agent_id",
                "l_agent_type", "first_at", "last_at", "api_calls", "priced_usd", "unpriced_calls",
                "tokens")  # fmt: skip
HOUR_COLUMNS = ("since", "api_calls", "priced_usd", "unpriced_calls", "tokens")


def cost_row(
    scope: str, agent: str, parent: str, team: str, usd: float, tokens: int, unpriced: int = 0, host: str = ""
) -> tuple[Any, ...]:
    at = dt.datetime(2026, 11, 18, 10, 30, tzinfo=dt.UTC)
    calls = max(unpriced, 1)
    return (host, scope, agent, parent, team, team, parent, "", "", at, at, calls, usd, unpriced, tokens)


EDGE_COLUMNS = ("from_agent", "to_agent", "team", "messages", "last_at", "last_summary")


def cell(env: dict[str, Any], column: str) -> Any:
    """A column of an event row as the store answers it."""
    if column == "timestamp":
        return utc_datetime(env[column])
    return json.dumps(env[column]) if column == "data" else env.get(column)


def utc(at: float) -> dt.datetime:
    return dt.datetime.fromtimestamp(at, dt.UTC)


def answer(columns: tuple[str, ...], rows: list[tuple[Any, ...]]) -> Answer:
    return Answer(columns=columns, types=("",) * len(columns), rows=rows)


def make_app(live: list[dict[str, Any]], history: FakeHistory | None = None) -> AgentwatchApp:
    return AgentwatchApp(FakeLive(live), history, clock=lambda: BASE)


async def until(pilot: Any, check: Callable[[], object], timeout: float = 15.0) -> None:
    """Let the app run until `check()` holds (the machine may be slow: no fixed sleeps)."""
    deadline = time.monotonic() + timeout
    while True:
        with contextlib.suppress(Exception):  # a widget not mounted yet
            if check():
                return
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for the app")
        await pilot.pause(0.05)


async def painted(pilot: Any, app: AgentwatchApp, events: int) -> None:
    """Until `events` envelopes are in the model and the live view shows them."""

    def done() -> bool:
        feed = app.query_one("#feed", Table)
        want = len(app.state.feed.lines(app.state.filter))
        return (
            app.state.feed.total >= events
            and feed.row_count == want
            and not app.state.pending
            and not app._dirty
        )

    await until(pilot, done)


def status_text(app: AgentwatchApp) -> str:
    return str(app.query_one("#status").render())


def roster_rows(app: AgentwatchApp) -> list[list[str]]:
    table = app.query_one("#roster", Table)
    return [[str(cell) for cell in table.get_row_at(i)] for i in range(table.row_count)]


def feed_rows(app: AgentwatchApp) -> list[list[str]]:
    table = app.query_one("#feed", Table)
    return [[str(cell) for cell in table.get_row_at(i)] for i in range(table.row_count)]


async def test_roster_states_nesting_and_permission_wait() -> None:
    app = make_app(team_traffic())
    async with app.run_test(size=(160, 40)) as pilot:
        await painted(pilot, app, 7)
        rows = roster_rows(app)
        by_name = {r[0].strip(" └"): r for r in rows}
        lead = by_name["main-5e55105e"]
        assert lead[2] == "working" and lead[3] == "Bash" and lead[4] == "59s"
        sub = by_name["Explore-fd10a9f3"]
        assert sub[2] == "thinking" and sub[7] == "1", "the failed call is counted"
        reviewer = by_name["reviewer"]
        assert reviewer[2] == "waiting" and reviewer[3] == "WebFetch"
        names = [r[0] for r in rows]
        assert names[0] == "main-5e55105e"
        assert all(n.startswith("  └ ") for n in names[1:]), "subagent and teammate nest under the lead"


async def test_feed_filter_and_event_drill_down() -> None:
    app = make_app(team_traffic())
    async with app.run_test(size=(160, 40)) as pilot:
        await painted(pilot, app, 7)
        assert len(feed_rows(app)) == 7
        await pilot.press("slash")
        for ch in "tool:Grep":
            await pilot.press(ch)
        await until(pilot, lambda: len(feed_rows(app)) == 2)
        rows = feed_rows(app)
        assert len(rows) == 2 and all(r[1] == "Explore-fd10a9f3" for r in rows)
        app.query_one("#filter").value = "reviewer"  # type: ignore[attr-defined]
        await until(pilot, lambda: len(feed_rows(app)) == 2 and feed_rows(app)[0][1] == "reviewer")
        rows = feed_rows(app)
        assert [r[2] for r in rows] == ["PreToolUse", "PermissionRequest"]
        feed = app.query_one("#feed", Table)
        feed.focus()
        feed.move_cursor(0)
        await pilot.press("enter")
        await until(pilot, lambda: isinstance(app.screen, EventScreen))
        shown = " ".join(str(s.render()) for s in app.screen.query(Static))
        assert "[REDACTED:anthropic_key]" in shown, "redaction markers stay visible in the detail"
        await pilot.press("escape")
        assert not isinstance(app.screen, EventScreen)


async def test_bus_goes_away_and_comes_back() -> None:
    live = FakeLive(team_traffic()[:2])
    app = AgentwatchApp(live, None, clock=lambda: BASE)
    async with app.run_test(size=(160, 40)) as pilot:
        await painted(pilot, app, 2)
        assert "bus nats://fake:4222" in status_text(app)
        assert live.status is not None and live.deliver is not None
        live.status(False, "bus away at nats://fake:4222; reconnecting")
        await until(pilot, lambda: "bus away" in status_text(app))
        live.status(True, "bus nats://fake:4222")
        live.deliver(team_traffic()[2])
        await painted(pilot, app, 3)
        assert "bus away" not in status_text(app)
        assert len(feed_rows(app)) == 3, "events flow again after the bus came back"


async def test_history_fills_the_roster_and_store_errors_are_said() -> None:
    history = team_traffic()
    app = make_app([], FakeHistory(history))
    async with app.run_test(size=(160, 40)) as pilot:
        await until(pilot, lambda: "recent events loaded" in status_text(app))
        await painted(pilot, app, 7)
        assert {r[0].strip(" └") for r in roster_rows(app)} == {
            "main-5e55105e",
            "Explore-fd10a9f3",
            "reviewer",
        }
        assert "7 recent events loaded" in str(app.query_one("#status").render())
    broken = make_app([], FakeHistory(error=HistoryUnreachable("no server answers at nats://fake:4222")))
    async with broken.run_test(size=(160, 40)) as pilot:
        await until(pilot, lambda: "no server answers at nats://fake:4222" in status_text(broken))


async def test_help_pause_and_sort_keys() -> None:
    app = make_app(team_traffic())
    async with app.run_test(size=(160, 40)) as pilot:
        await painted(pilot, app, 7)
        await pilot.press("question_mark")
        await pilot.pause(0.1)
        assert isinstance(app.screen, HelpScreen)
        await pilot.press("escape")
        await pilot.press("p")
        assert app.state.paused
        assert app.live.__class__ is FakeLive
        app.deliver(team_traffic()[0])
        await pilot.pause(0.4)
        assert len(feed_rows(app)) == 7, "paused: nothing new painted"
        await pilot.press("p")
        await painted(pilot, app, 8)
        assert len(feed_rows(app)) == 8
        await pilot.press("s")
        assert app.state.sort == "recent"


def test_main_screen_snapshot(snap_compare: Any) -> None:
    assert snap_compare(make_app(team_traffic()), terminal_size=(140, 30), run_before=_settle)


async def _settle(pilot: Any) -> None:
    await pilot.pause(0.5)


async def test_raw_bus_bytes_are_decoded_and_bad_ones_skipped() -> None:
    from agentwatch.contract import encode_envelope

    envelopes = team_traffic()
    live = FakeLive([])
    app = AgentwatchApp(live, None, clock=lambda: BASE)
    async with app.run_test(size=(160, 40)) as pilot:
        await until(pilot, lambda: live.deliver is not None)
        assert live.deliver is not None
        live.deliver(b"not json")
        live.deliver(b"[1, 2]")
        for env in envelopes:
            live.deliver(encode_envelope(env))
        await painted(pilot, app, 7)
        assert app.state.feed.total == 7, "the two bad messages were skipped"
        feed = app.query_one("#feed", Table)
        feed.focus()
        feed.move_cursor(4)
        await pilot.press("enter")
        await until(pilot, lambda: isinstance(app.screen, EventScreen))
        shown = " ".join(str(s.render()) for s in app.screen.query(Static))
        assert "[REDACTED:anthropic_key]" in shown and '"tool_input"' in shown, "the payload, from the bytes"


def test_a_frame_waits_for_the_last_ones_cost() -> None:
    """At once when idle; one frame on its way at a time; the next one at least `min_gap` after
    the last, later when frames cost more than their share of the event loop."""
    pacer = common.Pacer(0.05, share=0.4, stale=1.0)
    assert pacer.ask(0.0) is None, "not laid out yet: the timer paints"
    pacer.ready = True
    assert pacer.ask(10.0) == 0.0, "idle: at once"
    assert pacer.ask(10.01) is None, "one frame on its way"
    pacer.painted(0.01, 10.02)
    assert pacer.ask(10.03) == pytest.approx(0.04), "cheap frames: min_gap apart"
    pacer.painted(0.1, 10.2)
    assert pacer.ask(10.2) == pytest.approx(0.15), "100 ms of CPU is 40% of 250 ms"
    assert pacer.ask(10.5) is None and pacer.ask(11.3) is not None, "a frame never reported stops counting"


async def test_live_events_are_painted_as_they_come_and_a_flood_is_coalesced(monkeypatch: Any) -> None:
    monkeypatch.setattr(app_module, "REPAINT_SECONDS", 3600.0)  # no timer: only the events paint
    calls = [
        {"session_id": SESSION, "hook_event_name": "PreToolUse", "tool_name": "Bash",
         "tool_input": {"command": f"echo {i}"}, "tool_use_id": f"toolu_{i}"}
        for i in range(601)
    ]  # fmt: skip
    flood = [env for i, call in enumerate(calls) for env in env_of(call, BASE + i / 100)]
    live = FakeLive([])
    app = AgentwatchApp(live, None, clock=lambda: BASE)
    frames: list[float] = []
    async with app.run_test(size=(160, 40)) as pilot:
        await until(pilot, lambda: live.deliver is not None and app._pacer.ready)
        assert live.deliver is not None
        live.deliver(flood[0])
        await painted(pilot, app, 1)
        repaint = app.repaint

        def counted() -> None:
            frames.append(time.monotonic())
            repaint()

        app.repaint = counted  # type: ignore[method-assign]
        for start in range(1, len(flood), 20):
            for env in flood[start : start + 20]:
                live.deliver(env)
            await asyncio.sleep(0)
        await painted(pilot, app, len(flood))
    assert 1 <= len(frames) <= 4, f"30 bursts in {len(frames)} frames"
    assert all(b - a >= 0.9 * app_module.MIN_REPAINT_GAP for a, b in itertools.pairwise(frames)), frames


async def test_a_live_event_is_in_the_model_when_it_arrives_and_a_frame_only_paints_it() -> None:
    """Applying a flood's events was half of each frame, the event loop held: each goes into the
    model when it is delivered. Paused, or behind others that wait, it waits too."""
    live = FakeLive([])
    app = AgentwatchApp(live, None, clock=lambda: BASE)
    async with app.run_test(size=(160, 40)) as pilot:
        await until(pilot, lambda: live.deliver is not None and app._pacer.ready)
        assert live.deliver is not None
        first, second, third = team_traffic()[:3]
        live.deliver(first)
        assert (app.state.feed.total, app.waiting, len(app.state.roster)) == (1, 0, 1), (
            "in the model, no frame yet"
        )
        assert feed_rows(app) == []
        await painted(pilot, app, 1)
        assert len(feed_rows(app)) == 1
        app.action_toggle_pause()
        live.deliver(second)
        live.deliver(third)
        assert (app.state.feed.total, app.waiting) == (1, 2), "paused: they wait"
        app.action_toggle_pause()
        await painted(pilot, app, 3)
        assert [row[2] for row in feed_rows(app)] == ["UserPromptSubmit", "PreToolUse", "SubagentStart"]


async def test_an_event_the_model_cannot_take_is_skipped_and_counted_and_the_rest_shown() -> None:
    """An envelope of the wrong shape (a kind that is a list) must not stop the dashboard:
    it is skipped, the status line counts it, and the events after it are shown."""
    live = FakeLive([])
    app = AgentwatchApp(live, None, clock=lambda: BASE)
    async with app.run_test(size=(160, 40)) as pilot:
        await until(pilot, lambda: live.deliver is not None and app._pacer.ready)
        assert live.deliver is not None
        first, second = team_traffic()[:2]
        odd = orjson.loads(orjson.dumps(first))
        odd["kind"], odd["id"] = ["not", "a", "kind"], "odd-1"
        live.deliver(orjson.dumps(odd))
        live.deliver(second)
        await painted(pilot, app, 1)
        await until(pilot, lambda: "1 events skipped (unreadable)" in status_text(app))
        assert [row[2] for row in feed_rows(app)] == ["PreToolUse"]
        assert app.is_running


async def test_full_garbage_collections_run_on_the_apps_timer() -> None:
    import gc

    app = make_app(team_traffic())
    app.full_collection_seconds = 0.1
    before = gc.get_stats()[2]["collections"]
    threshold = gc.get_threshold()
    async with app.run_test(size=(120, 30)) as pilot:
        await until(pilot, lambda: gc.get_stats()[2]["collections"] >= before + 3)
        assert gc.get_threshold()[2] > threshold[2], "Python's own full collections are held off"
        assert app.is_running
    assert gc.get_threshold() == threshold and gc.get_freeze_count() == 0, "restored on exit"


async def test_an_agent_filter_narrows_the_roster_too() -> None:
    app = make_app(team_traffic())
    async with app.run_test(size=(160, 40)) as pilot:
        await painted(pilot, app, 7)
        app.query_one("#filter").value = "agent:reviewer"  # type: ignore[attr-defined]
        await until(pilot, lambda: [r[0].strip(" └") for r in roster_rows(app)] == ["reviewer"])
        assert {r[1] for r in feed_rows(app)} == {"reviewer"}
        app.query_one("#filter").value = ""  # type: ignore[attr-defined]
        await until(pilot, lambda: len(roster_rows(app)) == 3)


async def help_text(app: AgentwatchApp, pilot: Any) -> str:
    await pilot.press("question_mark")
    await until(pilot, lambda: isinstance(app.screen, HelpScreen))
    return str(app.screen.query_one("#help-text", Static).render())


async def test_the_help_lists_every_binding_of_the_live_view_and_the_other_screens() -> None:
    app = make_app(team_traffic())
    async with app.run_test(size=(200, 60)) as pilot:
        await painted(pilot, app, 7)
        text = await help_text(app, pilot)
        # The live view: a line a key, "keys  description  tooltip" (keys of one description as a/b).
        lines = [line.split(maxsplit=1) for line in text.splitlines() if line.startswith("  ")]
        for binding in Binding.make_bindings([*AgentwatchApp.BINDINGS, *Table.BINDINGS]):
            key = app.get_key_display(binding)
            assert any(
                key in (keys, *keys.split("/"))
                and rest.startswith(binding.description)
                and binding.tooltip in rest
                for keys, rest in lines
            ), f"{binding.key} ({binding.description}) is not in the help"
        # The other screens: "keys description · keys description ..." under their titles.
        items = [item.split(" ", 1) for line in text.splitlines() for item in line.strip().split(" · ")]
        shown = {(key, words[0]) for keys, *words in items if words for key in (keys, *keys.split("/"))}
        for screen in (AgentScreen, TeamScreen, ToolsScreen):
            for binding in Binding.make_bindings(screen.BINDINGS):
                key = app.get_key_display(binding)
                assert (key, binding.description) in shown, (
                    f"{screen.__name__}: {binding.key} is not in the help"
                )


def test_help_screen_snapshot(snap_compare: Any) -> None:
    assert snap_compare(
        make_app(team_traffic()), terminal_size=(100, 50), press=["question_mark"], run_before=_settle
    )


async def test_the_help_says_where_the_roster_is_at_every_width() -> None:
    app = make_app([])
    async with app.run_test(size=(120, 60)) as pilot:
        text = " ".join((await help_text(app, pilot)).split())
        assert "(left)" not in text and "(right)" not in text
        assert f"beside the feed on terminals of {SIDE_BY_SIDE_WIDTH} columns or more, above it" in text
        await pilot.press("escape")
        await until(pilot, lambda: not isinstance(app.screen, HelpScreen))


@pytest.mark.parametrize(
    "module", [app_module, common, help, table, tools_view, views], ids=lambda m: m.__name__
)
def test_every_key_binding_says_what_it_does(module: Any) -> None:
    """The footer, the key bar and the help show the descriptions: none may be empty."""
    classes = [c for c in vars(module).values() if isinstance(c, type) and c.__module__ == module.__name__]
    bound = [c for c in classes if "BINDINGS" in vars(c)]
    assert bound, f"{module.__name__} binds no key: the list of modules is out of date"
    for cls in bound:
        for binding in Binding.make_bindings(vars(cls)["BINDINGS"]):
            assert binding.description.strip(), f"{cls.__name__}: {binding.key} has no description"
