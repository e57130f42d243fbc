"""The dashboard end to end: the installed hook, a real nats-server, the real store, the real app.

Events go in through `agentwatch-emit` (captured hook payloads on stdin, as Claude Code runs it),
onto a nats-server with the GENIE stream; `agentwatch store` (a subprocess) keeps them in embedded
ClickHouse; the dashboard runs under Textual's pilot with its production sources: NatsLiveSource on
the same bus and History, which asks the store's query service. Some events are stored before
the dashboard starts (they can only reach it as history); the rest are emitted while it runs (they
reach it live). Every wait polls with a deadline.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from textual.pilot import Pilot
from textual.worker import WorkerCancelled

from agentwatch.bus.live import NatsLiveSource
from agentwatch.cli.sources import History
from agentwatch.store.answer import HistoryError
from agentwatch.tui.app import AgentwatchApp
from agentwatch.tui.table import Table
from tests.conftest import CAPTURES, clean_env, load_fixture_file, run_emit
from tests.integration.test_store import Service
from tests.services import NatsServer

TEAM = "e2e-team"
HISTORY_SESSION = "2421d2e0"  # a main agent with tool calls (captures)
LIVE_SESSION = "96f21a61"  # a lead and its teammate "researcher", who sends it a message
SENT = "→ main: Findings ready"
Row = dict[str, str]


def capture(event: str, tool_name: str, session: str) -> dict[str, Any]:
    """The first captured hook record of this event, tool and session."""
    for rec in load_fixture_file(CAPTURES):
        payload = rec["payload"]
        if (
            payload["hook_event_name"] == event
            and payload.get("tool_name") == tool_name
            and str(payload.get("session_id", "")).startswith(session)
        ):
            return dict(rec)
    raise LookupError(f"no capture of {event} {tool_name} in session {session}")


@pytest.fixture
def store_env(nats_server: NatsServer, tmp_path: Path) -> Iterator[dict[str, str]]:
    """`agentwatch store` on the test bus, its embedded ClickHouse in tmp_path; yields its environment."""
    env = clean_env(AGENTWATCH_DATA_DIR=str(tmp_path / "store"), AGENTWATCH_NATS_URL=nats_server.url)
    store = Service(["store"], env)
    try:
        store.wait_ready()
        yield env
    finally:
        code, output = store.stop()
        assert code == 0, output


def emit(rec: dict[str, Any], store_env: dict[str, str], tmp_path: Path) -> None:
    """One hook run of the installed `agentwatch-emit`, as Claude Code runs it."""
    env = clean_env(**rec.get("hook_env", {}))
    env.update(
        AGENTWATCH_NATS_URL=store_env["AGENTWATCH_NATS_URL"],
        AGENTWATCH_DATA_DIR=str(tmp_path / "hook"),
        GENIE_TEAM=TEAM,
    )
    result = run_emit(json.dumps(rec["payload"]).encode(), env)
    assert result.returncode == 0 and result.stdout == b"", result.stderr


def stored_events(env: dict[str, str]) -> int:
    """Events the store holds, asked the way the dashboard asks; -1 while its query service is away."""
    source = History(env, timeout=10)
    try:
        return int(source.query("SELECT count() AS n FROM events").scalar())
    except HistoryError:
        return -1
    finally:
        source.close()


def table_rows(app: AgentwatchApp, selector: str) -> list[Row]:
    """The table's rows as {column label: cell text}."""
    table = app.query_one(selector, Table)
    labels = table.column_labels
    return [
        dict(zip(labels, (str(cell) for cell in table.get_row_at(i)), strict=True))
        for i in range(table.row_count)
    ]


def roster(app: AgentwatchApp) -> dict[str, Row]:
    return {row["agent"].strip(" └"): row for row in table_rows(app, "#roster")}


def status_line(app: AgentwatchApp) -> str:
    return str(app.query_one("#status").render())


async def until(pilot: Pilot[None], what: str, check: Callable[[], bool], timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            app = pilot.app
            assert isinstance(app, AgentwatchApp)
            raise AssertionError(
                f"{what}: not seen within {timeout:g}s\nstatus: {status_line(app)}\n"
                f"roster: {table_rows(app, '#roster')}\nfeed: {table_rows(app, '#feed')}"
            )
        await pilot.pause(0.05)


async def test_hook_events_reach_the_dashboard_live_and_from_history(
    store_env: dict[str, str], tmp_path: Path
) -> None:
    async def hook(event: str, tool_name: str, session: str) -> None:
        await asyncio.to_thread(emit, capture(event, tool_name, session), store_env, tmp_path)

    # Before the dashboard runs: a main agent starts two tools, one of them finishes. Stored only.
    earlier = [("PreToolUse", "Read"), ("PreToolUse", "Bash"), ("PostToolUse", "Read")]
    for event, tool_name in earlier:
        await hook(event, tool_name, HISTORY_SESSION)
    deadline = time.monotonic() + 20
    while (stored := await asyncio.to_thread(stored_events, store_env)) < len(earlier):
        assert time.monotonic() < deadline, f"the store has {stored} of {len(earlier)} events"
        await asyncio.sleep(0.1)

    history = History(store_env, timeout=10)
    app = AgentwatchApp(NatsLiveSource(store_env["AGENTWATCH_NATS_URL"]), history)
    try:
        async with app.run_test(size=(160, 40)) as pilot:
            await check_dashboard(app, pilot, hook)
    finally:
        # Textual cancels workers at exit without waiting for them: let the live source close its
        # connection before this test's event loop ends.
        for worker in [worker for worker in app.workers if worker.group == "live"]:
            with contextlib.suppress(WorkerCancelled):
                await asyncio.wait_for(worker.wait(), 10)
        history.close()


async def check_dashboard(
    app: AgentwatchApp, pilot: Pilot[None], hook: Callable[[str, str, str], Awaitable[None]]
) -> None:
    # History: loaded from the store through its query service, before any live event.
    await until(pilot, "history loaded", lambda: "store: 3 recent events loaded" in status_line(app))
    await until(pilot, "bus connected", lambda: app.state.bus_ok)
    await until(pilot, "history in the roster", lambda: "main-2421d2e0" in roster(app))
    main = roster(app)["main-2421d2e0"]
    # Its latest state event is the Read's result (agents.TRANSITIONS): thinking, as SQL says too.
    assert (main["team"], main["state"], main["tool"], main["calls"]) == (
        f"{TEAM}·2421d2",
        "thinking",
        "",
        "2",
    )
    feed = table_rows(app, "#feed")
    assert [(r["agent"], r["event"], r["text"]) for r in feed] == [
        ("main-2421d2e0", "PreToolUse", "Read CLAUDE.md"),
        ("main-2421d2e0", "PreToolUse", "$ echo 'héllo ✓ 🚀' && printf 'line2\\n'"),
        ("main-2421d2e0", "PostToolUse", "Read CLAUDE.md (27 ms)"),
    ]

    # Live: a lead's tool result, then its teammate calls SendMessage ...
    await hook("PostToolUse", "Agent", LIVE_SESSION)
    await hook("PreToolUse", "SendMessage", LIVE_SESSION)
    await until(
        pilot,
        "researcher working on SendMessage",
        lambda: roster(app).get("researcher", {}).get("state") == "working",
    )
    researcher = roster(app)["researcher"]
    assert (researcher["team"], researcher["tool"], researcher["calls"]) == (
        f"{TEAM}·96f21a",
        "SendMessage",
        "1",
    )
    last = table_rows(app, "#feed")[-1]
    assert (last["agent"], last["event"], last["text"]) == ("researcher", "PreToolUse", SENT)

    # ... and the message is delivered: the tool result and the message envelope, both live.
    await hook("PostToolUse", "SendMessage", LIVE_SESSION)
    await until(pilot, "message counted", lambda: roster(app)["researcher"]["msg"] == "1")
    await until(pilot, "all events in the feed", lambda: len(table_rows(app, "#feed")) == 7)
    researcher = roster(app)["researcher"]
    assert (researcher["state"], researcher["tool"]) == ("thinking", "")
    lead = roster(app)["main-96f21a61"]
    assert (lead["team"], lead["state"], lead["calls"]) == (f"{TEAM}·96f21a", "thinking", "0")
    names = [row["agent"] for row in table_rows(app, "#roster")]
    assert names[names.index("main-96f21a61") + 1] == "  └ researcher", "nested under its lead"
    live = table_rows(app, "#feed")[3:]
    assert [(r["agent"], r["text"]) for r in live] == [
        ("main-96f21a61", "Agent researcher: Research teammate (229 ms)"),
        ("researcher", SENT),
        ("researcher", SENT),
        ("researcher", "→ main-96f21a61: Findings ready"),
    ]
    assert [r["event"] for r in live[:3]] == ["PostToolUse", "PreToolUse", "PostToolUse"]
    assert live[3]["event"] in ("PostToolUse", "message"), "the message envelope (SendMessage's companion)"
    assert "3 agents · 6 events" in status_line(app)
    assert app.state.feed.total == 7, "nothing shown twice (history and live de-duplicated)"
