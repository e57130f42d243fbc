"""One truth on every screen: the dashboard, opened at any moment, shows the figures
`agentwatch sql` gives over the same rows.

`agentwatch up` runs the pipeline; `agentwatch import` brings the shared transcripts' usage; two
`agentwatch demo` runs follow one another (the same team, the same teammate names); a session is
killed without SessionEnd (its events published eleven minutes back, a failing call repeated and a
permission left unanswered, so alerts fire); a third demo run is live while the dashboard is open.
The dashboard runs under Textual's pilot on its production sources (the bus and the query service)
at three moments, and once in tmux as a person would see it. Every roster row (state, calls,
errors, messages, cost), the team's message edges, the open alerts and the hour's cost on screen
equal the SQL answers.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
from textual.pilot import Pilot
from textual.worker import WorkerCancelled

from agentwatch.bus.live import NatsLiveSource
from agentwatch.cli.sources import History
from agentwatch.demo.simulator import encode_event
from agentwatch.format import money
from agentwatch.tui.app import AgentwatchApp
from agentwatch.tui.table import Table
from agentwatch.tui.views import TeamScreen
from tests.conftest import HOOK_INBOX, PROJECTS, bus_login, clean_env, free_port, run_cli, tool
from tests.integration.test_store import Service

pytestmark = pytest.mark.timeout(600)

KILLED = "dead0000-1111-4000-8000-000000000000"
KILLED_AGENT = "main-dead0000"
Key = tuple[str, str, str]


def sql(env: dict[str, str], query: str) -> list[dict[str, Any]]:
    """`agentwatch sql` itself, as a person runs it."""
    result = run_cli("sql", query, "--format", "json", env=env)
    assert result.returncode == 0, result.stderr
    rows: list[dict[str, Any]] = json.loads(result.stdout)
    return rows


def wait_sql(env: dict[str, str], query: str, check: Any, what: str, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while True:
        rows = sql(env, query)
        if check(rows):
            return
        assert time.monotonic() < deadline, f"{what}: {rows}"
        time.sleep(0.5)


def killed_session(url: str) -> int:
    """A session whose terminal was killed eleven minutes ago: the same failing command eight
    times, then a WebFetch waiting for permission, and no SessionEnd. Published as the hook does."""
    import nats

    base = {"session_id": KILLED, "cwd": "/repo"}
    payloads: list[dict[str, Any]] = [
        {**base, "hook_event_name": "UserPromptSubmit", "prompt": "fix the build"}
    ]
    for i in range(8):
        call = {
            **base,
            "tool_name": "Bash",
            "tool_input": {"command": "make test"},
            "tool_use_id": f"toolu_k{i}",
        }
        payloads += [
            {**call, "hook_event_name": "PreToolUse"},
            {**call, "hook_event_name": "PostToolUseFailure", "error": "Exit code 2"},
        ]
    fetch = {
        **base,
        "tool_name": "WebFetch",
        "tool_input": {"url": "https://example.com"},
        "tool_use_id": "toolu_kw",
    }
    payloads += [
        {**fetch, "hook_event_name": "PreToolUse"},
        {**fetch, "hook_event_name": "PermissionRequest"},
    ]
    start = time.time() - 660
    messages = [m for i, p in enumerate(payloads) for m in encode_event(p, {}, host="laptop", now=start + i)]

    async def publish() -> None:
        nc = await nats.connect(url, inbox_prefix=HOOK_INBOX)  # the hook's login takes acks there
        js = nc.jetstream()
        for subject, event_id, body in messages:
            await js.publish(subject, body, headers={"Nats-Msg-Id": event_id})
        await nc.close()

    asyncio.run(publish())
    return len(messages)


def expected(env: dict[str, str]) -> dict[str, Any]:
    """What `agentwatch sql` says of every figure the live view shows."""
    agents = sql(env, "SELECT host, scope, agent, team, state, tool_calls, errors, messages_sent FROM agents")
    costs = sql(
        env, "SELECT host, scope, agent, cost_usd, cost_with_subagents_usd, input_tokens FROM agent_costs"
    )
    cost = {(r["host"], r["scope"], r["agent"]): r for r in costs}
    roster: dict[Key, tuple[str, ...]] = {}
    for r in agents:
        key = (r["host"], r["scope"], r["agent"])
        own = cost.get(key)
        roster[key] = (
            r["state"], str(r["tool_calls"]), str(r["errors"]), str(r["messages_sent"]),
            money(own["cost_usd"], 1) if own else "",
        )  # fmt: skip
    edges = sql(env, "SELECT team, from_agent, to_agent, messages FROM team_edges")
    (alerts,) = sql(env, "SELECT count() AS n FROM open_alerts")
    (totals,) = sql(env, "SELECT count() AS agents, sum(events) AS events FROM agents")
    return {
        "roster": roster,
        "edges": sorted((e["team"], e["from_agent"], e["to_agent"], str(e["messages"])) for e in edges),
        "open_alerts": int(alerts["n"]),
        "agents": int(totals["agents"]),
        "events": int(totals["events"] or 0),
    }


def on_screen(app: AgentwatchApp) -> dict[str, Any]:
    """The same figures, read off the live view (the roster with folded agents shown)."""
    table = app.query_one("#roster", Table)
    labels = table.column_labels
    roster: dict[Key, tuple[str, ...]] = {}
    for i, (_, agent) in enumerate(app._roster_rows):
        cells = dict(zip(labels, (str(c) for c in table.get_row_at(i)), strict=True))
        roster[agent.key] = (cells["state"], cells["calls"], cells["err"], cells["msg"], cells["cost"])
    status = str(app.query_one("#status").render())
    alerts = len(app.state.alerts.open)
    if alerts:
        assert f"{alerts} open alert" in status, status
    assert f"{app.state.roster.total} agents" in status, status
    return {
        "roster": roster,
        "edges": sorted((e.team, e.sender, e.recipient, str(e.count)) for e in app.state.team.edges()),
        "open_alerts": alerts,
        "agents": app.state.roster.total,
        "events": app.state.events_total + app.state.unconfirmed.events,
    }


async def agrees(
    pilot: Pilot[None], app: AgentwatchApp, env: dict[str, str], timeout: float = 30
) -> dict[str, Any]:
    """Until the screen shows what SQL says (one refresh after the traffic settled); the figures."""
    deadline = time.monotonic() + timeout
    while True:
        want = await asyncio.to_thread(expected, env)
        got = on_screen(app)
        if got == want:
            return got
        if time.monotonic() > deadline:
            assert got == want
        await pilot.pause(0.5)


async def open_dashboard(env: dict[str, str], check: Any) -> Any:
    history = History(env, timeout=10)
    app = AgentwatchApp(NatsLiveSource(env["AGENTWATCH_NATS_URL"], env), history, refresh_seconds=1.0)
    app.state.show_folded = True
    try:
        async with app.run_test(size=(250, 60)) as pilot:
            return await check(app, pilot)
    finally:
        for worker in [w for w in app.workers if w.group == "live"]:
            with contextlib.suppress(WorkerCancelled):
                await asyncio.wait_for(worker.wait(), 10)
        history.close()


def test_every_figure_on_screen_is_the_stores(tmp_path: Path) -> None:
    env = clean_env(
        AGENTWATCH_DATA_DIR=str(tmp_path / "data"),
        AGENTWATCH_NATS_URL=f"nats://127.0.0.1:{free_port()}",
        AGENTWATCH_ALERT_BELL="0",
    )
    up = Service(["up"], env)
    try:
        up.wait_ready(60)
        imported = run_cli("import", str(PROJECTS), env=env, timeout=120)
        assert imported.returncode == 0, imported.stderr
        wait_sql(env, "SELECT count() AS n FROM agent_costs", lambda r: r[0]["n"] > 0, "usage stored")

        async def first(app: AgentwatchApp, pilot: Pilot[None]) -> None:
            figures = await agrees(pilot, app, env)
            researchers = [k for k in figures["roster"] if k[2] == "researcher"]
            assert len(researchers) == 1 and figures["roster"][researchers[0]][4].startswith("$")

        asyncio.run(open_dashboard(env, first))

        for seed in ("11", "12"):  # one after the other: the same team, the same names
            demo = run_cli("demo", "--rate", "0", "--count", "300", "--seed", seed, "--agents", "3", env=env)
            assert demo.returncode == 0, demo.stderr
        sent = killed_session(bus_login(env))
        stored = "SELECT count() AS n FROM events WHERE session_id = '" + KILLED + "'"  # noqa: S608 (a constant)
        wait_sql(env, stored, lambda r: r[0]["n"] >= sent - 1, "the killed session stored")
        wait_sql(env, "SELECT count() AS n FROM open_alerts", lambda r: r[0]["n"] >= 2, "alerts fired")

        async def second(app: AgentwatchApp, pilot: Pilot[None]) -> None:
            figures = await agrees(pilot, app, env)
            roster = figures["roster"]
            researchers = [k for k in roster if k[2] == "researcher"]
            assert len(researchers) == 3, "the imported session's and each demo run's: three rows"
            assert len({roster[k][4] for k in researchers}) > 1, "each with its own cost"
            killed = next(k for k in roster if k[2] == KILLED_AGENT)
            assert roster[killed][0] == "lost"
            order = [agent.key for _, agent in app._roster_rows]
            live = [k for k in roster if roster[k][0] not in ("lost", "stopped")]
            assert live and max(order.index(k) for k in live) < order.index(killed), (
                "lost below the live team"
            )
            await pilot.press("t")
            await pilot.pause(0.5)
            assert isinstance(app.screen, TeamScreen)
            head = str(app.screen.query_one("#team-head").render())
            messages = sum(int(e[3]) for e in figures["edges"])
            assert f"{messages} messages on {len(figures['edges'])} edges" in head
            await pilot.press("escape")
            await pilot.press("exclamation_mark")
            await pilot.pause(0.5)
            shown = app.screen.query_one("#alerts", Table)
            ids = [a["id"] for a in app.screen.shown]  # type: ignore[attr-defined]
            assert shown.row_count == len(ids) == len(set(ids)), "each alert is one row"

        asyncio.run(open_dashboard(env, second))

        # The third moment: a demo run live while the dashboard is open.
        live_demo = subprocess.Popen(
            [tool("agentwatch"), "demo", "--rate", "100", "--duration", "6", "--seed", "13", "--agents", "2"],
            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
        )  # fmt: skip

        async def third(app: AgentwatchApp, pilot: Pilot[None]) -> None:
            await pilot.pause(2)
            _, errors = live_demo.communicate(timeout=60)
            assert live_demo.returncode == 0, errors
            await agrees(pilot, app, env)

        asyncio.run(open_dashboard(env, third))
        assert shutil.which("tmux"), "tmux is missing: scripts/browser.sh installs it"
        in_tmux(env)
    finally:
        code, output = up.stop()
        assert code == 0, output


def in_tmux(env: dict[str, str]) -> None:
    """The dashboard as a person sees it: two researchers side by side in the roster, the killed
    session lost, the open alerts on the status line."""
    name = f"truth-{free_port()}"
    # The test's own terminal size (COLUMNS, LINES) must not reach the dashboard: tmux's is its size.
    settings = " ".join(f"{k}='{v}'" for k, v in env.items() if k.startswith("AGENTWATCH_"))
    command = f"env -u COLUMNS -u LINES {settings} {tool('agentwatch')}"
    tmux = ["tmux", "-L", name, "-f", "/dev/null"]  # a server of its own, no user settings
    subprocess.run([*tmux, "new-session", "-d", "-s", name, "-x", "200", "-y", "60", command], check=True)
    try:
        deadline = time.monotonic() + 30
        screen, unfolded = "", False
        while time.monotonic() < deadline:
            time.sleep(1)
            if "folded (o)" in screen and not unfolded:  # the imported sessions are old: folded away
                subprocess.run([*tmux, "send-keys", "-t", name, "o"], check=True)
                unfolded = True
            screen = subprocess.run(
                [*tmux, "capture-pane", "-p", "-t", name], capture_output=True, text=True, check=True
            ).stdout
            if screen.count("researcher") >= 3 and "lost" in screen and "open alert" in screen:
                return
        raise AssertionError(screen)
    finally:
        subprocess.run([*tmux, "kill-server"], check=False)
