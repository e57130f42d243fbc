"""The "Tools and history" view: its queries (store/queries.py) against the real schema on
embedded ClickHouse, and the screen driven through Textual's pilot over a deterministic fake store."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
from clickhouse_connect.driver.client import Client
from textual.app import App
from textual.widgets import DataTable, Static

import agentwatch.tui
from agentwatch.contract import encode_envelope, envelopes_from_stdin
from agentwatch.store import queries
from agentwatch.store.answer import Answer, HistoryUnreachable, decode
from agentwatch.store.migrations import apply_migrations
from agentwatch.store.queries import SESSIONS_LIMIT, Query
from agentwatch.store.writes import insert_batch
from agentwatch.tui.tools_rows import (
    WINDOW_ORDER,
    sessions_query,
    tools_query,
    window_seconds,
)
from agentwatch.tui.tools_view import ToolsScreen

# The dashboard's own stylesheet: the view's styles are there, not in the screen.
STYLESHEET = Path(agentwatch.tui.__file__).with_name("agentwatch.tcss")

# --- data in the real schema ------------------------------------------------------------------

RUNNING = "5e55a000-0000-4000-8000-000000000001"  # Bash and Read calls, a turn still going
FAILED = "b0b0f000-0000-4000-8000-000000000002"  # 20 minutes ago, ended on a StopFailure
ENDED = "c0c0e000-0000-4000-8000-000000000003"  # 3 hours ago, a Grep call, then SessionEnd
IDLE = "d0d0d000-0000-4000-8000-000000000004"  # an Agent call from 2 hours ago that ended 10 min ago
OLD = "e0e0e000-0000-4000-8000-000000000005"  # 3 days ago, a denied WebFetch


def _call(session: str, event: str, tool: str, tool_use_id: str, **extra: Any) -> dict[str, Any]:
    return {
        "session_id": session,
        "cwd": "/srv/proj",
        "hook_event_name": event,
        "tool_name": tool,
        "tool_use_id": tool_use_id,
        "tool_input": {"command": f"run {tool_use_id}"},
        **extra,
    }


def scripted_steps() -> list[tuple[float, dict[str, Any]]]:
    """(seconds before now, payload) of every event. Durations come from the payloads (exact),
    except the Agent call's and the denied call's (ended - started)."""
    steps: list[tuple[float, dict[str, Any]]] = [
        (-2400, {"session_id": RUNNING, "hook_event_name": "SessionStart", "source": "startup"}),
        (-2399, {"session_id": RUNNING, "hook_event_name": "UserPromptSubmit", "prompt": "go"}),
        # two Read calls half an hour ago: in the last hour, not in the last 15 minutes
        (-1800, _call(RUNNING, "PreToolUse", "Read", "tu_read1")),
        (-1799, _call(RUNNING, "PostToolUse", "Read", "tu_read1", duration_ms=50, tool_response={})),
        (-1790, _call(RUNNING, "PreToolUse", "Read", "tu_read2")),
        (-1789, _call(RUNNING, "PostToolUse", "Read", "tu_read2", duration_ms=70, tool_response={})),
        # a Read result whose call was never seen, 5 minutes ago
        (-300, _call(RUNNING, "PostToolUse", "Read", "tu_read_orphan", duration_ms=30, tool_response={})),
        # and one Bash call still running
        (-60, _call(RUNNING, "PreToolUse", "Bash", "tu_bash_running")),
    ]
    # 21 Bash calls in the last 10 minutes taking 100, 200, ... 2100 ms: p50 1100, p95 2000, max
    # 2100 exactly. Two fail, one is interrupted.
    for i in range(21):
        at = -600 + 20 * i
        tu = f"tu_bash{i:02d}"
        steps.append((at, _call(RUNNING, "PreToolUse", "Bash", tu)))
        result: dict[str, Any] = {"duration_ms": (i + 1) * 100}
        if i in (2, 5):
            event, result = "PostToolUseFailure", {**result, "error": "Exit code 1"}
        elif i == 8:
            event, result = (
                "PostToolUseFailure",
                {**result, "error": "interrupted by user", "is_interrupt": True},
            )
        else:
            event, result = "PostToolUse", {**result, "tool_response": {}}
        steps.append((at + 1, _call(RUNNING, event, "Bash", tu, **result)))
    steps += [
        (-1200, {"session_id": FAILED, "hook_event_name": "SessionStart", "source": "startup"}),
        (-1199, {"session_id": FAILED, "hook_event_name": "UserPromptSubmit", "prompt": "hi"}),
        (-1140, {"session_id": FAILED, "hook_event_name": "StopFailure", "error": "rate_limit"}),
        (-7200, {"session_id": IDLE, "hook_event_name": "UserPromptSubmit", "prompt": "plan"}),
        (-7190, _call(IDLE, "PreToolUse", "Agent", "tu_agent")),
        (-600, _call(IDLE, "PostToolUse", "Agent", "tu_agent", tool_response={})),
        (-540, {"session_id": IDLE, "hook_event_name": "Stop", "last_assistant_message": "done"}),
        (-10800, {"session_id": ENDED, "hook_event_name": "SessionStart", "source": "startup"}),
        (-10790, _call(ENDED, "PreToolUse", "Grep", "tu_grep")),
        (-10789, _call(ENDED, "PostToolUse", "Grep", "tu_grep", duration_ms=10, tool_response={})),
        (-10700, {"session_id": ENDED, "hook_event_name": "Stop", "last_assistant_message": "done"}),
        (-10200, {"session_id": ENDED, "hook_event_name": "SessionEnd", "reason": "logout"}),
        (-259200, _call(OLD, "PreToolUse", "WebFetch", "tu_fetch")),
        (-259199, _call(OLD, "PermissionDenied", "WebFetch", "tu_fetch", reason="auto mode")),
    ]
    return steps


@pytest.fixture
def store(chdb_database: Client) -> Client:
    apply_migrations(chdb_database)
    now = float(round(time.time()))  # whole seconds: every offset lands on an exact millisecond
    bodies = []
    for offset, payload in scripted_steps():
        for _, env in envelopes_from_stdin(json.dumps(payload).encode(), {}, host="host-1", now=now + offset):
            bodies.append(encode_envelope(env))
    insert_batch(chdb_database, bodies, [])
    insert_batch(chdb_database, bodies[::4], [])  # some delivered twice: still counted once
    return chdb_database


def run(client: Client, query: Query) -> list[dict[str, Any]]:
    """The query as the store runs it: its values bound by ClickHouse."""
    return list(client.query(query.sql, parameters=query.params).named_results())


TOOL_KEYS = ("tool", "calls", "failures", "denied", "failure_pct", "p50_ms", "p95_ms", "max_ms", "unpaired")
# Over the whole history, from the tool_hourly rollup. Durations are the ones results report
# (the Agent call's result has none); unpaired is calls minus results (Read's orphan result
# pairs off its running call); the running Bash call is not finished: the rate is over 21.
BASH = ("Bash", 22, 3, 0, 14.3, 1100, 2000, 2100, 1)
EXPECTED_ALL = [
    BASH,
    ("Read", 2, 0, 0, 0.0, 50, 70, 70, 0),
    ("Agent", 1, 0, 0, 0.0, None, None, None, 0),
    ("Grep", 1, 0, 0, 0.0, 10, 10, 10, 0),
    ("WebFetch", 1, 0, 1, 0.0, None, None, None, 0),
]
# The same question asked of the raw table, for the hours of a window.
RAW_TOOLS = """\
SELECT
    tool_name AS tool, countIf(event = 'PreToolUse') AS calls,
    countIf(event = 'PostToolUseFailure') AS failures,
    countIf(event = 'PermissionDenied') AS denied, countIf(event != 'PreToolUse') AS finished,
    if(finished = 0, NULL, round(100 * failures / finished, 1)) AS failure_pct,
    countIf(event != 'PreToolUse' AND duration_ms IS NOT NULL) AS timed,
    quantilesTimingIf(0.5, 0.95)(
        assumeNotNull(duration_ms), event != 'PreToolUse' AND duration_ms IS NOT NULL
    ) AS q,
    if(timed = 0, NULL, toInt64(q[1])) AS p50_ms, if(timed = 0, NULL, toInt64(q[2])) AS p95_ms,
    maxIf(duration_ms, event != 'PreToolUse') AS max_ms,
    toUInt64(greatest(toInt64(calls) - toInt64(finished), 0)) AS unpaired
FROM events FINAL
WHERE tool_name != '' AND event IN ('PreToolUse', 'PostToolUse', 'PostToolUseFailure', 'PermissionDenied')
  AND timestamp >= toStartOfHour(now() - toIntervalSecond({window_s:UInt32}))
GROUP BY tool ORDER BY calls DESC, tool"""


@pytest.mark.parametrize("window", WINDOW_ORDER)
def test_tool_stats_per_window(store: Client, window: str) -> None:
    got = [tuple(row[k] for k in TOOL_KEYS) for row in run(store, tools_query(window))]
    if window == "all":
        assert got == EXPECTED_ALL
        bash = run(store, tools_query(window))[0]
        assert bash["finished"] == 21, "the running call is not finished: the rate is over 21"
        assert bash["last_error"] == "interrupted by user", "the latest failure's text"
        return
    seconds = {"15m": 900, "1h": 3600, "1d": 86400}[window]
    raw = run(store, Query(RAW_TOOLS, {"window_s": seconds}))
    assert got == [tuple(row[k] for k in TOOL_KEYS) for row in raw]
    assert got, "every window holds the running session's Bash calls"


def test_tool_stats_sorts(store: Client) -> None:
    by_rate = [row["tool"] for row in run(store, tools_query("all", "failure rate"))]
    assert by_rate[0] == "Bash"
    by_p95 = [row["tool"] for row in run(store, tools_query("all", "p95"))]
    assert by_p95 == ["Bash", "Read", "Grep", "Agent", "WebFetch"]
    assert [row["tool"] for row in run(store, tools_query("all", "calls"))][:2] == ["Bash", "Read"]


SESSION_KEYS = (
    "session_id",
    "agent",
    "outcome",
    "events",
    "tool_calls",
    "errors",
    "duration_ms",
    "end_reason",
)
S_RUNNING = (RUNNING, "main-5e55a000", "running", 50, 24, 3, 2_340_000, "")
S_FAILED = (FAILED, "main-b0b0f000", "failed", 3, 0, 1, 60_000, "")
S_IDLE = (IDLE, "main-d0d0d000", "idle", 4, 1, 0, 6_660_000, "")
S_ENDED = (ENDED, "main-c0c0e000", "ended", 5, 1, 0, 600_000, "logout")
S_OLD = (OLD, "main-e0e0e000", "running", 2, 1, 0, 1000, "")
EXPECTED_SESSIONS = {
    "15m": [S_RUNNING, S_IDLE],
    "1h": [S_FAILED, S_RUNNING, S_IDLE],
    "1d": [S_FAILED, S_RUNNING, S_IDLE, S_ENDED],
    "all": [S_FAILED, S_RUNNING, S_IDLE, S_ENDED, S_OLD],
}


@pytest.mark.parametrize("window", WINDOW_ORDER)
def test_sessions_per_window(store: Client, window: str) -> None:
    ids = [row["session_id"] for row in run(store, sessions_query(window))]
    got = run(store, queries.session_details(ids)) if ids else []
    assert [tuple(row[k] for k in SESSION_KEYS) for row in got] == EXPECTED_SESSIONS[window]
    at_once = run(store, queries.active_sessions(window_seconds(window)))
    without_clock = [{k: v for k, v in row.items() if k != "seen_s"} for row in got]
    assert without_clock == [{k: v for k, v in row.items() if k != "seen_s"} for row in at_once]
    seen = {row["session_id"]: row["seen_s"] for row in got}
    assert 55 <= seen[RUNNING] <= 120, "seconds since the running session's latest event"
    assert sessions_query(window).params == {
        **({} if window == "all" else {"window_s": {"15m": 900, "1h": 3600, "1d": 86400}[window]}),
        "limit": SESSIONS_LIMIT,
    }


def test_the_view_offers_known_windows_and_sorts_only() -> None:
    for bad in ("2h", "1h; DROP TABLE events", ""):
        with pytest.raises(ValueError, match="unknown window"):
            tools_query(bad)
        with pytest.raises(ValueError, match="unknown window"):
            sessions_query(bad)
        with pytest.raises(ValueError, match="unknown window"):
            ToolsScreen(FakeStore(), window=bad)
    with pytest.raises(ValueError, match="unknown sort"):
        tools_query("1h", "tool; --")


def test_any_window_and_limit_are_bound_on_the_real_schema(store: Client) -> None:
    """Not only the windows the view offers: ClickHouse binds any number of seconds, and the limit."""
    two_hours = 2 * 3600 + 60  # the Agent call started 2 hours ago: in, unlike in the last hour
    tools = [(row["tool"], row["calls"]) for row in run(store, queries.tool_stats(two_hours))]
    raw = run(store, Query(RAW_TOOLS, {"window_s": two_hours}))
    assert tools == [(row["tool"], row["calls"]) for row in raw]
    assert ("Agent", 1) in tools
    assert [row["tool"] for row in run(store, queries.tool_stats(two_hours, limit=1))] == ["Bash"]
    three_hours = 3 * 3600 + 60  # the session that ended 2h50m ago: in
    sessions = [row["session_id"] for row in run(store, queries.active_sessions(three_hours))]
    assert sessions == [FAILED, RUNNING, IDLE, ENDED]
    assert [row["session_id"] for row in run(store, queries.active_sessions(three_hours, limit=2))] == [
        FAILED,
        RUNNING,
    ]


# --- the screen, over a fake store ------------------------------------------------------------

NOW = 1_795_310_400.0  # 2026-11-22 01:20:00 UTC: the clock the screen sees
TOOL_COLUMNS = ["tool", "calls", "failures", "denied", "finished", "failure_pct", "timed", "q", "p50_ms",
                "p95_ms", "max_ms", "unpaired", "last_error"]  # fmt: skip
TOOL_ROWS = [
    ["Bash", 22, 3, 0, 21, 14.3, 21, [1100.0, 2000.0], 1100, 2000, 2100, 1, "Exit code 1: tests failed"],
    ["mcp__github__create_pull_request", 4, 0, 1, 4, 0.0, 4, [3400.0, 9100.0], 3400, 9100, 125_000, 0, ""],
    ["Read", 3, 0, 0, 3, 0.0, 3, [50.0, 68.0], 50, 68, 70, 1, ""],
    ["Task", 1, 0, 0, 0, None, 0, [None, None], None, None, None, 1, ""],
]
SESSION_COLUMNS = ["session_id", "agent", "team", "host", "started", "ended", "end_reason", "last_seen",
                   "duration_ms", "seen_s", "events", "tool_calls", "errors", "prompts", "subagents",
                   "outcome", "coverage_pct", "cost_usd", "tokens"]  # fmt: skip
SESSION_ROWS: list[list[Any]] = [
    [FAILED, "main-b0b0f000", "session-b0b0f000", "host-1", "2026-11-22T01:00:00Z", None, "",
     "2026-11-22T01:01:00Z", 60_000, 1140, 3, 0, 1, 1, 0, "failed", 100.0, 0.4213, 12_000],
    [RUNNING, "main-5e55a000", "session-5e55a000", "host-1", "2026-11-22T00:40:00Z", None, "",
     "2026-11-22T01:19:00Z", 2_340_000, 60, 50, 24, 3, 1, 0, "running", 92.5, None, 5_000],
    [IDLE, "researcher-with-a-long-name", "alpha", "host-2", "2026-11-21T23:20:00Z", None, "",
     "2026-11-22T01:11:00Z", 6_660_000, 540, 4, 1, 0, 1, 2, "idle", None, None, 0],
    [ENDED, "main-c0c0e000", "session-c0c0e000", "host-1", "2026-11-21T22:20:00Z", "2026-11-21T22:30:00Z",
     "logout", "2026-11-21T22:30:00Z", 600_000, 10_200, 5, 1, 0, 1, 0, "ended", 99.8, 12.5, 900_000],
]  # fmt: skip


# The dashboard's second question: the rows of the sessions the first one named.
DETAILS = queries.session_details([row[0] for row in SESSION_ROWS])


class FakeStore:
    """Answers the two queries of the screen with fixed rows; can be made unreachable or failing."""

    def __init__(self) -> None:
        self.asked: list[Query] = []
        self.unreachable: Exception | None = None
        self.error: str | None = None

    def query(self, sql: str, params: Mapping[str, Any] | None = None) -> Answer:
        query = Query(sql, dict(params) if params is not None else None)
        self.asked.append(query)
        return decode(self.answer(query))

    def answer(self, query: Query) -> dict[str, Any]:
        sql = query.sql
        if self.unreachable is not None:
            raise self.unreachable
        if self.error is not None:
            return {"error": self.error}
        if "FROM tool_hourly" in sql or "FROM tool_daily" in sql:
            return {"columns": TOOL_COLUMNS, "rows": TOOL_ROWS}
        if "FROM sessions" not in sql:  # the first question: the newest ids
            assert "FROM session_rollup" in sql, sql
            return {"columns": ["session_id"], "rows": [[row[0]] for row in SESSION_ROWS]}
        return {"columns": SESSION_COLUMNS, "rows": SESSION_ROWS}


class Host(App[None]):
    """A bare app with one line of its own and the dashboard's stylesheet, that opens the view on start."""

    CSS_PATH = STYLESHEET

    def __init__(self, store: FakeStore, refresh_seconds: float = 5.0) -> None:
        super().__init__()
        self.store = store
        self.refresh_seconds = refresh_seconds

    def compose(self) -> Any:
        yield Static("host screen", id="host")

    def on_mount(self) -> None:
        self.push_screen(ToolsScreen(self.store, refresh_seconds=self.refresh_seconds, clock=lambda: NOW))


def cells(screen: ToolsScreen, table_id: str) -> list[list[str]]:
    table = screen.query_one(table_id, DataTable)
    return [[str(c) for c in table.get_row_at(i)] for i in range(table.row_count)]


def labels(screen: ToolsScreen, table_id: str) -> list[str]:
    table = screen.query_one(table_id, DataTable)
    return [str(col.label) for col in table.columns.values()]


def text_of(screen: ToolsScreen, widget_id: str) -> str:
    return str(screen.query_one(widget_id, Static).render())


def shown(widget: Static) -> bool:
    return bool(widget.display)


async def settle(app: App[Any], pilot: Any) -> None:
    await app.workers.wait_for_complete()
    await pilot.pause()


async def test_tables_at_80x24() -> None:
    app = Host(FakeStore())
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(app, pilot)
        screen = app.screen
        assert isinstance(screen, ToolsScreen)
        assert labels(screen, "#tools-stats") == [
            "tool",
            "calls",
            "fail",
            "fail%",
            "p50",
            "p95",
            "max",
            "unpaired",
        ]
        assert cells(screen, "#tools-stats") == [
            ["Bash", "22", "3", "14.3%", "1.1s", "2.0s", "2.1s", "1"],
            ["mcp__github…pull_request", "4", "0", "0.0%", "3.4s", "9.1s", "2m05s", "0"],
            ["Read", "3", "0", "0.0%", "50ms", "68ms", "70ms", "1"],
            ["Task", "1", "0", "-", "-", "-", "-", "1"],
        ]
        assert labels(screen, "#tools-sessions") == [
            "session", "agent", "start UTC", "dur", "events", "calls", "err", "cov%", "outcome",
        ]  # fmt: skip
        assert cells(screen, "#tools-sessions") == [
            ["b0b0f000", "main…0f000", "01:00:00", "1m00s", "3", "0", "1", "100", "failed"],
            ["5e55a000", "main…5a000", "00:40:00", "39m00s", "50", "24", "3", "92", "running"],
            ["d0d0d000", "rese…-name", "11-21 23:20", "1h51m", "4", "1", "0", "-", "idle"],
            ["c0c0e000", "main…0e000", "11-21 22:20", "10m00s", "5", "1", "0", "99", "ended"],
        ]
        title = text_of(screen, "#tools-title")
        assert "last hour" in title and "sorted by calls" in title and "updated 01:20:00 UTC" in title
        for table_id in ("#tools-stats", "#tools-sessions"):
            table = screen.query_one(table_id, DataTable)
            assert table.virtual_size.width <= table.size.width, f"{table_id} fits without scrolling"


async def test_wide_screen_shows_more() -> None:
    app = Host(FakeStore())
    async with app.run_test(size=(200, 60)) as pilot:
        await settle(app, pilot)
        screen = app.screen
        assert isinstance(screen, ToolsScreen)
        assert labels(screen, "#tools-stats")[-3:] == ["denied", "unpaired", "last error"]
        rows = cells(screen, "#tools-stats")
        assert rows[0][-1] == "Exit code 1: tests failed"
        assert rows[1][0] == "mcp__github__create_pull_request", "the whole name when there is room"
        sessions = cells(screen, "#tools-sessions")
        assert labels(screen, "#tools-sessions")[-1] == "end reason"
        assert sessions[1][:3] == [RUNNING, "main-5e55a000", "session-5e55a000"]
        assert sessions[3][-2:] == ["ended", "logout"]
        for table_id in ("#tools-stats", "#tools-sessions"):
            table = screen.query_one(table_id, DataTable)
            assert table.virtual_size.width <= table.size.width, f"{table_id} fits without scrolling"


@pytest.mark.parametrize("width", [80, 100, 139, 140, 179, 180, 240])
async def test_both_tables_fit_every_width(width: int) -> None:
    app = Host(FakeStore())
    async with app.run_test(size=(width, 24)) as pilot:
        await settle(app, pilot)
        screen = app.screen
        assert isinstance(screen, ToolsScreen)
        for table_id in ("#tools-stats", "#tools-sessions"):
            table = screen.query_one(table_id, DataTable)
            assert table.virtual_size.width <= table.size.width, f"{table_id} fits at {width} columns"
            assert table.row_count == 4
        app.theme = "textual-light" if app.theme != "textual-light" else "textual-dark"
        await pilot.resize_terminal(width + 60, 30)
        await pilot.pause()
        for table_id in ("#tools-stats", "#tools-sessions"):
            table = screen.query_one(table_id, DataTable)
            assert table.virtual_size.width <= table.size.width, f"{table_id} fits after a resize"
            assert table.row_count == 4, "repainted after the resize and the theme change"


async def test_window_and_sort_keys_issue_the_matching_sql() -> None:
    store = FakeStore()
    app = Host(store)
    async with app.run_test(size=(100, 30)) as pilot:
        await settle(app, pilot)
        screen = app.screen
        assert isinstance(screen, ToolsScreen)
        assert store.asked[-3:] == [tools_query("1h"), sessions_query("1h"), DETAILS]
        for key, window, words in [
            ("1", "15m", "last 15 min"),
            ("3", "1d", "last day"),
            ("4", "all", "all time"),
        ]:
            await pilot.press(key)
            await settle(app, pilot)
            assert store.asked[-3:] == [tools_query(window), sessions_query(window), DETAILS]
            assert words in text_of(screen, "#tools-title")
        await pilot.press("w")  # all -> 15m
        await settle(app, pilot)
        assert store.asked[-3:] == [tools_query("15m"), sessions_query("15m"), DETAILS]
        await pilot.press("s")
        await settle(app, pilot)
        assert store.asked[-3] == tools_query("15m", "failure rate")
        assert "sorted by failure rate" in text_of(screen, "#tools-title")
        asked = len(store.asked)
        await pilot.press("r")
        await settle(app, pilot)
        assert len(store.asked) == asked + 3
        await pilot.press("escape")
        await pilot.pause()
        assert not isinstance(app.screen, ToolsScreen)
        assert str(app.screen.query_one("#host", Static).render()) == "host screen"


async def test_store_errors_are_said_and_it_recovers() -> None:
    store = FakeStore()
    store.unreachable = HistoryUnreachable("no server answers at nats://fake:4222 (connection refused)")
    app = Host(store, refresh_seconds=0.2)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(app, pilot)
        screen = app.screen
        assert isinstance(screen, ToolsScreen)
        status = screen.query_one("#tools-status", Static)
        assert (
            text_of(screen, "#tools-status")
            == "store: no server answers at nats://fake:4222 (connection refused); retrying every 0.2s"
        )
        assert shown(status) and status.has_class("-error")
        assert cells(screen, "#tools-stats") == []
        asked = len(store.asked)
        await pilot.pause(0.5)
        await settle(app, pilot)
        assert len(store.asked) > asked, "it keeps asking"

        store.unreachable = None
        store.error = "Code: 60. DB::Exception: Unknown table expression identifier 'tool_calls'"
        await pilot.pause(0.4)
        await settle(app, pilot)
        assert text_of(screen, "#tools-status").startswith(
            "store: ClickHouse: Code: 60. DB::Exception: Unknown table"
        )

        store.error = None
        await pilot.pause(0.4)
        await settle(app, pilot)
        assert not shown(status), "the error line goes once the store answers"
        assert len(cells(screen, "#tools-stats")) == 4
        assert "updated 01:20:00 UTC" in text_of(screen, "#tools-title")

        store.unreachable = HistoryUnreachable("no store answers queries on this bus")
        await pilot.pause(0.4)
        await settle(app, pilot)
        assert "store: no store answers queries" in text_of(screen, "#tools-status")
        assert len(cells(screen, "#tools-stats")) == 4, "the last answer stays on screen"
        assert "data from 01:20:00 UTC" in text_of(screen, "#tools-title")
        await pilot.press("q")
        await pilot.pause()
        assert not isinstance(app.screen, ToolsScreen)


class SlowStore(FakeStore):
    """Holds the hour's tool query until released; answers the 15 minutes with Bash only."""

    def __init__(self) -> None:
        super().__init__()
        self.release = threading.Event()
        self.held_answered = threading.Event()

    def answer(self, query: Query) -> dict[str, Any]:
        result = super().answer(query)
        if query == tools_query("1h"):
            self.release.wait(10)
            self.held_answered.set()
        if query == tools_query("15m"):
            result = {**result, "rows": result["rows"][:1]}
        return result


async def test_a_late_answer_for_the_previous_window_is_dropped() -> None:
    store = SlowStore()
    app = Host(store)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        screen = app.screen
        assert isinstance(screen, ToolsScreen)
        assert store.asked == [tools_query("1h")], "the hour's answer is held back"
        await pilot.press("1")
        await pilot.pause(0.3)
        assert [r[0] for r in cells(screen, "#tools-stats")] == ["Bash"]
        store.release.set()
        while not store.held_answered.is_set():
            await pilot.pause(0.05)
        await pilot.pause(0.3)
        await settle(app, pilot)
        assert [r[0] for r in cells(screen, "#tools-stats")] == ["Bash"], "its rows are not shown"
        assert sessions_query("1h") not in store.asked, "nor is the rest of a dropped question asked"
        assert "last 15 min" in text_of(screen, "#tools-title")


def test_tools_screen_snapshot(snap_compare: Any) -> None:
    assert snap_compare(Host(FakeStore()), terminal_size=(80, 24), run_before=_settle_for_snapshot)


async def _settle_for_snapshot(pilot: Any) -> None:
    await pilot.app.workers.wait_for_complete()
    await pilot.pause(0.2)
