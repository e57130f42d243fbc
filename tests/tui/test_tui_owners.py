"""Whose, where, which branch on the dashboard: the cost view's person, repository and branch tabs
show what `agentwatch cost --by person|repo|branch` prints and what SQL over `usage` joined by
session gives; the sessions view shows each session's person, repository and branch, and filters
by them. The store holds the fixture sessions with their cwd in one of two git repositories made
here by `git` (what `agentwatch import` and the hook do: emitter/attribution.py reads their files)."""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
from clickhouse_connect.driver.client import Client
from textual.widgets import DataTable, Input, TabbedContent

from agentwatch.cli import cost as cost_cli
from agentwatch.cli import sql as sql_cli
from agentwatch.contract import encode_envelope, envelopes_from_stdin
from agentwatch.emitter.attribution import learn
from agentwatch.emitter.transcripts import read_transcript
from agentwatch.emitter.usage import Source, reading_envelopes, subagent_source
from agentwatch.format import money
from agentwatch.store.migrations import apply_migrations
from agentwatch.store.writes import insert_batch
from agentwatch.tui.app import AgentwatchApp
from agentwatch.tui.search_view import SearchScreen
from agentwatch.tui.sessions_view import SessionsScreen
from tests.conftest import transcript_sessions
from tests.integration.test_cost_store import store_bodies
from tests.transcript_hooks import hook_events
from tests.tui.test_tui_app import FakeLive
from tests.tui.test_tui_sessions import EngineHistory, cells, open_cost_view, sql, until

REPOS = {
    # name: (origin, user.email, branch)
    "alpha": ("https://ci:t0ken-x1@git.example.com/team/alpha.git", "ann@example.com", "main"),
    "beta": ("git@git.example.com:team/beta.git", "bo@example.com", "feat/login"),
}
WANT = {
    "alpha": ("ann@example.com", "git.example.com/team/alpha", "main"),
    "beta": ("bo@example.com", "git.example.com/team/beta", "feat/login"),
}


def git_repo(path: Path, origin: str, email: str, branch: str) -> None:
    subprocess.run(["git", "init", "-q", "-b", branch, str(path)], check=True, capture_output=True)
    for args in (["config", "user.email", email], ["remote", "add", "origin", origin]):
        subprocess.run(["git", "-C", str(path), *args], check=True)


def owned_store(client: Client, root: Path) -> dict[str, str]:
    """The fixture sessions' events and usage in the store, each session in one of REPOS (in
    turn): which repository each session's cwd is."""
    home = root / "home"
    home.mkdir(parents=True)
    for name, (origin, email, branch) in REPOS.items():
        git_repo(root / name, origin, email, branch)
    environ = {"HOME": str(home), "USER": "nobody"}
    placed, events, usage = {}, [], []
    for i, (session, main, subagents, _) in enumerate(transcript_sessions()):
        placed[session] = name = list(REPOS)[i % len(REPOS)]
        cwd = str(root / name)
        person, repo, branch = learn(cwd, environ, str(root / "data"))[:3]
        owner = {"person": person, "repo": repo, "branch": branch}
        for at, payload in hook_events(main, subagents, cwd=cwd):
            for _, env in envelopes_from_stdin(json.dumps(payload).encode(), {}, host="lab", now=at):
                events.append(encode_envelope({**env, **owner}))
        who = {"agent": f"main-{session[:8]}", "team": f"session-{session[:8]}", "parent_agent": "",
               "agent_id": "", "agent_type": "", "session_id": session, "host": "lab",
               "cwd": cwd}  # fmt: skip
        context = {k: who[k] for k in ("team", "session_id", "host", "cwd")}
        for src in [Source(str(main), who)] + [subagent_source(str(p), context, {}) for p in subagents]:
            reading = read_transcript(src.path, subagent_id=src.subagent_id)
            found = reading_envelopes(reading, src, 1_700_000_000_000)
            usage += [encode_envelope({**env, **owner}) for _, env in found]
    apply_migrations(client)
    insert_batch(client, events, [])
    store_bodies(client, usage)
    return placed


@pytest.fixture
def store(chdb_database: Client, tmp_path: Path) -> tuple[Client, dict[str, str]]:
    return chdb_database, owned_store(chdb_database, tmp_path / "lab")


def dashboard(client: Client) -> AgentwatchApp:
    return AgentwatchApp(FakeLive([]), EngineHistory(client), theme="textual-dark")


def cli_table(
    client: Client, by: str, monkeypatch: pytest.MonkeyPatch, person: str = "", repo: str = ""
) -> dict[str, list[str]]:
    """`agentwatch cost --by <by>` (--person, --repo), run on the same store: its rows' cells by
    their first."""
    history = EngineHistory(client)
    monkeypatch.setattr(sql_cli, "run_sql", lambda text, params=None, **_: history.query(text, params))
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        args = argparse.Namespace(by=by, since=None, person=person, repo=repo, limit=50)
        assert cost_cli.cmd_cost(args) == 0
    lines = out.getvalue().splitlines()
    if "" not in lines:  # nothing matched: one line says so
        assert len(lines) == 1 and lines[0].startswith("no API calls"), lines
        return {}
    rows = lines[2 : lines.index("")]  # after the header and its rule, up to the totals
    split = ([c.strip() for c in line.split("  ") if c.strip()] for line in rows)
    return {cells[0]: cells for cells in split}


async def test_the_cost_tabs_equal_the_cost_command_and_sql(
    store: tuple[Client, dict[str, str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    client, placed = store
    app = dashboard(client)
    async with app.run_test(size=(200, 50)) as pilot:
        view = await open_cost_view(pilot)
        tabs = view.query_one("#cost-tabs", TabbedContent)
        for by, column in (("person", 0), ("repo", 1), ("branch", 2)):
            # n: the next grouping's tab, as a person gets to it.
            while tabs.active != f"cost-{by}":
                await pilot.press("n")
            shown = {row[0]: tuple(row[1:]) for row in cells(view.query_one(f"#cost-by-{by}", DataTable))}
            # SQL over `usage`, each API message under its session's owner (the `sessions` view).
            want = sql(
                client,
                f"SELECT s.{by} AS key, uniqExact(u.session_id) AS sessions, count() AS calls, "  # noqa: S608
                "sum(u.input_tokens + u.output_tokens + u.cache_read_tokens + u.cache_write_tokens) "
                "AS tokens, "
                "sum(u.cost_usd) AS usd FROM usage AS u FINAL INNER JOIN sessions AS s ON s.session_id = "
                f"u.session_id GROUP BY s.{by}",
            )
            assert {r["key"] for r in want} == {WANT[name][column] for name in set(placed.values())}
            assert shown == {
                r["key"]: (str(r["sessions"]), f"{r['calls']:,}", f"{r['tokens']:,}", money(r["usd"]))
                for r in want
            }, by
            # The command's cells: key, sessions, calls, input, output, cache read, 5m, 1h, cost.
            printed = cli_table(client, by, monkeypatch)
            assert {k: (c[1], c[2], c[-1]) for k, c in printed.items()} == {
                r["key"]: (str(r["sessions"]), f"{r['calls']:,}", f"${r['usd']:,.4f}") for r in want
            }, printed
        await pilot.press("g")  # the search, from here as from everywhere
        await until(pilot, lambda: isinstance(app.screen, SearchScreen), "the search after g")
        # --person and --repo narrow the sessions too.
        ann = cli_table(client, "session", monkeypatch, person="ann@example.com")
        assert set(ann) == in_repo(placed, "alpha") & set(cli_table(client, "session", monkeypatch))
        beta = cli_table(client, "session", monkeypatch, repo=WANT["beta"][1])
        assert set(beta) == in_repo(placed, "beta") & set(cli_table(client, "session", monkeypatch))
        assert cli_table(client, "session", monkeypatch, person="ann@example.com", repo=WANT["beta"][1]) == {}
        assert b"t0ken" not in client.raw_query("SELECT * FROM usage FORMAT JSONEachRow")


def shown_ids(view: SessionsScreen) -> set[str]:
    return {str(r["session_id"]) for r in view.shown}


def in_repo(placed: dict[str, str], name: str) -> set[str]:
    return {s for s, where in placed.items() if where == name}


async def test_the_sessions_view_shows_and_filters_by_person_repository_and_branch(
    store: tuple[Client, dict[str, str]],
) -> None:
    client, placed = store
    app = dashboard(client)
    async with app.run_test(size=(250, 50)) as pilot:
        await pilot.press("e")
        await until(pilot, lambda: isinstance(app.screen, SessionsScreen) and app.screen.loaded, "sessions")
        view = app.screen
        assert isinstance(view, SessionsScreen)
        table = view.query_one("#sessions-table", DataTable)
        labels = [str(c.label) for c in table.columns.values()]
        at = [labels.index(name) for name in ("person", "repository", "branch")]
        rows = cells(table)
        assert len(rows) == len(placed)
        by_id = {str(r["session_id"])[:8]: r for r in view.shown}
        for row in rows:
            session = str(by_id[row[1]]["session_id"])
            assert tuple(row[i] for i in at) == WANT[placed[session]], session
        view.query_one("#sessions-filter", Input).value = "repo:beta"
        await pilot.pause(0.2)
        assert shown_ids(view) == in_repo(placed, "beta")
        view.query_one("#sessions-filter", Input).value = "branch:main person:ann"
        await pilot.pause(0.2)
        assert shown_ids(view) == in_repo(placed, "alpha")
        view.query_one("#sessions-filter", Input).value = "person:bo@ repo:alpha"
        await pilot.pause(0.2)
        assert view.shown == [] and len(view.rows) == len(placed)


def live_event(at: float) -> dict[str, Any]:
    """A tool call of a session the store does not hold, in a third repository."""
    payload = {"session_id": "9a9a9a9a-0000-4000-8000-000000000000", "hook_event_name": "PreToolUse",
               "cwd": "/srv/gamma", "tool_name": "Bash", "tool_input": {"command": "make"},
               "tool_use_id": "toolu_gamma"}  # fmt: skip
    (_, env), *_ = envelopes_from_stdin(json.dumps(payload).encode(), {}, host="lab", now=at)
    return {**env, "person": "Cy@Example.com", "repo": "git.example.com/team/gamma", "branch": "dev"}


def roster_sessions(app: AgentwatchApp) -> set[str]:
    return {agent.session_id for _, agent in app._roster_rows}


async def test_the_roster_and_feed_filter_by_person_repository_and_branch(
    store: tuple[Client, dict[str, str]],
) -> None:
    """`person:`, `repo:`, `branch:` in the filter narrow the roster (the store's agents by their
    session's owner, a live one by its events') and the feed, as `agent:` does."""
    client, placed = store
    live = live_event(time.time())
    app = AgentwatchApp(FakeLive([live]), EngineHistory(client), theme="textual-dark")
    async with app.run_test(size=(200, 50)) as pilot:
        await pilot.press("o")  # the fixture's agents stopped long ago: folded away unless shown
        everyone = set(placed) | {live["session_id"]}
        await until(pilot, lambda: roster_sessions(app) == everyone, "the store's agents and the live one")
        narrowed = {
            "repo:beta": in_repo(placed, "beta"),
            "branch:MAIN person:ann": in_repo(placed, "alpha"),
            "repo:team/": everyone,
            "person:cy@": {live["session_id"]},
            "repo:gamma branch:main": set(),
        }
        for text, sessions in narrowed.items():
            app.query_one("#filter", Input).value = text
            await until(pilot, lambda s=sessions: roster_sessions(app) == s, text)
            assert all(line.envelope.get("repo") == live["repo"] for line in app._feed_lines), text
            assert len(app._feed_lines) == (live["session_id"] in sessions), text
        app.query_one("#filter", Input).value = ""
        await until(pilot, lambda: roster_sessions(app) == everyone, "the filter emptied")


def test_cost_by_person_snapshot(snap_compare: Any, store: tuple[Client, dict[str, str]]) -> None:
    async def person_tab(pilot: Any) -> None:
        view = await open_cost_view(pilot)
        while view.query_one("#cost-tabs", TabbedContent).active != "cost-person":
            await pilot.press("n")
        await pilot.pause(0.2)

    assert snap_compare(dashboard(store[0]), terminal_size=(120, 24), run_before=person_tab)
