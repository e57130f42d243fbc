"""What it costs, as a user runs it: `agentwatch up`, the installed hook on Stop, SubagentStop and
SessionEnd payloads that point at real Claude Code transcripts, `agentwatch import`, and
`agentwatch cost`. Each test works on its own copy of the fixture sessions, renamed (a session
id prefix of its own) so that the tests share one pipeline without sharing sessions."""

from __future__ import annotations

import json
import os
import shutil
import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import (
    PROJECTS,
    bus_login,
    clean_env,
    expected_tokens,
    free_port,
    run_cli,
    run_emit,
    transcript_sessions,
)
from tests.integration.test_store import Service, sql_rows, wait_rows

pytestmark = pytest.mark.slow

SESSIONS = transcript_sessions()
USAGE_ROWS = 45  # API messages in the fixture sessions, subagents' included
TOKENS = (
    "input_tokens",
    "output_tokens",
    "cache_read_tokens",
    "cache_write_5m_tokens",
    "cache_write_1h_tokens",
)
WITH_SUBAGENT = "27e556a2-de12-4c72-b5fd-a64ef0b73d15"


@pytest.fixture(scope="module")
def pipeline(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    """`agentwatch up` on a bus and store of its own; the environment to reach it."""
    root = tmp_path_factory.mktemp("cost")
    env = clean_env(
        AGENTWATCH_DATA_DIR=str(root / "up"), AGENTWATCH_NATS_URL=f"nats://127.0.0.1:{free_port()}"
    )
    up = Service(["up"], env)
    try:
        up.wait_ready(60)
        yield env
    finally:
        code, output = up.stop(signal.SIGINT)
        assert code == 0, output


def renamed(session: str, tag: str) -> str:
    return tag + session[len(tag) :]


def copy_sessions(dest: Path, tag: str, only: str = "") -> Path:
    """The fixture project, every session id starting with `tag` (in names and in the lines)."""
    project = dest / "projects" / "-home-dev-lab-proj"
    project.mkdir(parents=True)
    for session, main, subagents, _ in SESSIONS:
        if only and session != only:
            continue
        new = renamed(session, tag)
        for path in [main, *subagents, *(p.with_suffix(".meta.json") for p in subagents)]:
            target = project / str(path.relative_to(main.parent)).replace(session, new)
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(path.read_text().replace(session, new))
    return dest / "projects"


def session_costs(env: dict[str, str], tag: str) -> dict[str, dict[str, Any]]:
    rows = sql_rows(env, f"SELECT * FROM session_costs WHERE startsWith(session_id, '{tag}')")  # noqa: S608
    return {r["session_id"]: r for r in rows}


def wait_usage(env: dict[str, str], tag: str, rows: int, costs: int) -> None:
    where = f"WHERE startsWith(session_id, '{tag}')"
    wait_rows(env, f"SELECT count() AS n FROM usage FINAL {where}", rows)  # noqa: S608
    wait_rows(env, f"SELECT count() AS n FROM cost_states FINAL {where}", costs)  # noqa: S608


def assert_claude_codes_totals(env: dict[str, str], tag: str, only: str = "") -> None:
    got = session_costs(env, tag)
    sessions = [s for s in SESSIONS if not only or s[0] == only]
    assert set(got) == {renamed(s, tag) for s, *_ in sessions}
    for session, _main, _subs, expected in sessions:
        row = got[renamed(session, tag)]
        assert {k: int(row[k]) for k in TOKENS} == expected_tokens(expected), session
        assert row["claude_cost_usd"] == pytest.approx(expected["totalCostUSD"])
        assert row["cost_usd"] == pytest.approx(expected["totalCostUSD"], rel=0.01, abs=1e-9), session


def stored_rows(env: dict[str, str], tag: str) -> int:
    """Rows in `usage` before FINAL collapses copies: what reached the table."""
    rows = sql_rows(env, f"SELECT count() AS n FROM usage WHERE startsWith(session_id, '{tag}')")  # noqa: S608
    return int(rows[0]["n"])


# --- agentwatch import ---------------------------------------------------------------------------


def test_import_gives_claude_codes_totals_and_twice_changes_nothing(
    pipeline: dict[str, str], tmp_path: Path
) -> None:
    projects = copy_sessions(tmp_path, "a1")
    first = run_cli("import", str(projects), env=pipeline)
    assert first.returncode == 0, first.stderr
    assert "importing: 14/14 transcripts, 100.0%" in first.stdout
    assert "imported 45 API messages and 11 cost states from 14 transcripts" in first.stdout
    wait_usage(pipeline, "a1", USAGE_ROWS, len(SESSIONS))
    assert_claude_codes_totals(pipeline, "a1")
    before = session_costs(pipeline, "a1")
    again = run_cli("import", str(projects), env=pipeline)
    assert again.returncode == 0, again.stderr
    assert session_costs(pipeline, "a1") == before
    assert stored_rows(pipeline, "a1") == USAGE_ROWS, "the bus dropped the repeats by their ids"


def test_cost_prints_each_grouping_with_totals(pipeline: dict[str, str], tmp_path: Path) -> None:
    projects = copy_sessions(tmp_path, "b2", only=WITH_SUBAGENT)
    assert run_cli("import", str(projects), env=pipeline).returncode == 0
    wait_usage(pipeline, "b2", 13, 1)
    by_session = run_cli("cost", env=pipeline)
    assert by_session.returncode == 0, by_session.stderr
    line = next(ln for ln in by_session.stdout.splitlines() if ln.startswith(renamed(WITH_SUBAGENT, "b2")))
    assert "16,748" in line and line.count("$0.1585") == 2, line
    assert "Claude Code's own total for these sessions" in by_session.stdout
    by_agent = run_cli("cost", "--by", "agent", "--since", "2026-11-01", env=pipeline)
    assert by_agent.returncode == 0, by_agent.stderr
    lead = next(ln for ln in by_agent.stdout.splitlines() if ln.startswith("main-b2e556a2"))
    assert "session-b2e556a2" in lead and "14,383" in lead and "$0.1218" in lead, lead
    # An agent is its name (as in the `agents` view): the other tests' copies of this subagent add up.
    sub = next(ln for ln in by_agent.stdout.splitlines() if ln.startswith("general-purpose-1cd6f8df"))
    assert "main-" in sub, sub
    for by in ("team", "model", "day"):
        result = run_cli("cost", "--by", by, "--since", "30d", env=pipeline)
        assert result.returncode == 0 and "total since" in result.stdout, result.stderr
    wrong = run_cli("cost", "--since", "last tuesday", env=pipeline)
    assert wrong.returncode == 2 and "give a duration" in wrong.stderr


def test_import_without_a_bus_says_what_to_do(tmp_path: Path) -> None:
    env = clean_env(AGENTWATCH_DATA_DIR=str(tmp_path), AGENTWATCH_NATS_URL=f"nats://127.0.0.1:{free_port()}")
    result = run_cli("import", str(PROJECTS), env=env)
    assert result.returncode == 2
    assert "cannot reach the bus" in result.stderr and "agentwatch up" in result.stderr
    missing = run_cli("import", str(tmp_path / "nowhere"), env=env)
    assert missing.returncode == 2 and "does not exist" in missing.stderr


# --- the installed hook ------------------------------------------------------------------------


def hook_events(projects: Path, tag: str) -> list[dict[str, Any]]:
    """The payloads Claude Code gives the hook at the end of each session: each subagent's
    SubagentStop, then the main agent's Stop and SessionEnd."""
    events = []
    for session, main, subagents, _ in SESSIONS:
        new = renamed(session, tag)
        transcript = projects / main.parent.name / f"{new}.jsonl"
        if not transcript.exists():
            continue
        base = {"session_id": new, "transcript_path": str(transcript), "cwd": "/home/dev/lab/proj"}
        for sub in subagents:
            meta = json.loads(sub.with_suffix(".meta.json").read_text())
            agent_id = sub.stem[len("agent-") :]
            own = transcript.parent / new / "subagents" / sub.name
            events.append({**base, "hook_event_name": "SubagentStop", "agent_id": agent_id,
                           "agent_type": meta["agentType"], "agent_transcript_path": str(own)})  # fmt: skip
        events.append({**base, "hook_event_name": "Stop", "stop_hook_active": False})
        events.append({**base, "hook_event_name": "SessionEnd", "reason": "other"})
    return events


def run_hooks(events: list[dict[str, Any]], env: dict[str, str], data_dir: Path) -> None:
    hook_env = dict(env, AGENTWATCH_DATA_DIR=str(data_dir), AGENTWATCH_NATS_URL=bus_login(env))
    for payload in events:
        result = run_emit(json.dumps(payload).encode(), hook_env)
        assert result.returncode == 0 and result.stdout == b""
    assert not (data_dir / "spool" / "queue").exists(), "every hook run published"


def test_the_hook_gives_claude_codes_totals_and_replays_change_nothing(
    pipeline: dict[str, str], tmp_path: Path
) -> None:
    projects = copy_sessions(tmp_path, "c3")
    events = hook_events(projects, "c3")
    run_hooks(events, pipeline, tmp_path / "hook")
    wait_usage(pipeline, "c3", USAGE_ROWS, len(SESSIONS))
    assert_claude_codes_totals(pipeline, "c3")
    before = session_costs(pipeline, "c3")
    run_hooks(events, pipeline, tmp_path / "hook")  # the same host again: nothing new to read
    run_hooks(events, pipeline, tmp_path / "other-host")  # no offsets: everything read and sent again
    wait_rows(
        pipeline, "SELECT count() AS n FROM events FINAL WHERE startsWith(session_id, 'c3')", 3 * len(events)
    )
    assert session_costs(pipeline, "c3") == before
    parents = sql_rows(
        pipeline,
        "SELECT agent, any(parent_agent) AS parent FROM usage FINAL WHERE startsWith(session_id, 'c3') "
        "AND parent_agent != '' GROUP BY agent ORDER BY agent",
    )
    assert parents == [
        {"agent": "general-purpose-12879861", "parent": "main-c37fa33d"},
        {"agent": "general-purpose-1cd6f8df", "parent": "main-c3e556a2"},
        {"agent": "researcher", "parent": "main-c3f48e0b"},  # the teammate, as its hook events name it
    ]


def test_a_transcript_that_grows_between_two_stops_is_counted_once(
    pipeline: dict[str, str], tmp_path: Path
) -> None:
    projects = copy_sessions(tmp_path, "d4", only=WITH_SUBAGENT)
    (stop,) = [e for e in hook_events(projects, "d4") if e["hook_event_name"] == "Stop"]
    main = Path(stop["transcript_path"])
    whole = main.read_bytes()
    lines = whole.splitlines(keepends=True)
    # Cut between two lines of one API response (msg_01Mock000004 is written as three lines).
    cut = [i for i, ln in enumerate(lines) if b'"id":"msg_01Mock000004"' in ln][1] + 1
    main.write_bytes(b"".join(lines[:cut]))
    run_hooks([stop], pipeline, tmp_path / "hook")
    main.write_bytes(whole)  # the session went on
    run_hooks([stop], pipeline, tmp_path / "hook")
    wait_usage(pipeline, "d4", 13, 1)
    assert_claude_codes_totals(pipeline, "d4", only=WITH_SUBAGENT)


def test_a_transcript_rewritten_from_the_start_is_not_counted_twice(
    pipeline: dict[str, str], tmp_path: Path
) -> None:
    projects = copy_sessions(tmp_path, "e5", only=WITH_SUBAGENT)
    (stop,) = [e for e in hook_events(projects, "e5") if e["hook_event_name"] == "Stop"]
    main = Path(stop["transcript_path"])
    whole = main.read_bytes()
    run_hooks([stop], pipeline, tmp_path / "hook")
    # Rewritten in place, shorter: read again from the start.
    main.write_bytes(whole[: len(whole) // 2].rsplit(b"\n", 1)[0] + b"\n")
    run_hooks([stop], pipeline, tmp_path / "hook")
    # Replaced by a new file (another inode) with the whole content: from the start again.
    shutil.copy(main, tmp_path / "new.jsonl")
    (tmp_path / "new.jsonl").write_bytes(whole)
    os.replace(tmp_path / "new.jsonl", main)
    run_hooks([stop], pipeline, tmp_path / "hook")
    wait_usage(pipeline, "e5", 13, 1)
    assert_claude_codes_totals(pipeline, "e5", only=WITH_SUBAGENT)


# --- by person, repository and branch ----------------------------------------------------------


def git_repo(path: Path, remote: str, email: str, branch: str) -> None:
    import subprocess

    subprocess.run(["git", "init", "-q", "-b", branch, str(path)], check=True)
    for args in (["config", "user.email", email], ["remote", "add", "origin", remote]):
        subprocess.run(["git", "-C", str(path), *args], check=True)


def table_rows(text: str, keys: set[str]) -> dict[str, list[str]]:
    """The lines of a `cost` table whose first cell is one of `keys`, split in cells."""
    rows = {}
    for line in text.splitlines():
        cells = [c for c in line.split("  ") if c.strip()]
        if cells and cells[0].strip() in keys:
            rows[cells[0].strip()] = [c.strip() for c in cells]
    return rows


def test_cost_by_person_repository_and_branch_equals_sql_over_usage(
    pipeline: dict[str, str], tmp_path: Path
) -> None:
    """The fixture sessions imported with their cwd in one of two repositories made here (the
    transcripts' own cwd, rewritten): `cost --by person|repo|branch` and the --person/--repo
    filters give what SQL over `usage` gives, each session's messages under its repository."""
    tag = "p7"
    repos = {
        "alpha": ("https://ci:t0ken-x1@git.example.com/team/alpha-p7.git", "ann@example.com", "main"),
        "beta": ("git@git.example.com:team/beta-p7.git", "bo@example.com", "feat/p7"),
    }
    for name, (remote, email, branch) in repos.items():
        git_repo(tmp_path / name, remote, email, branch)
    projects = copy_sessions(tmp_path / "logs", tag)
    placed: dict[str, str] = {}
    for i, path in enumerate(sorted(projects.rglob("*.jsonl"))):
        session = path.stem if path.parent.name != "subagents" else path.parent.parent.name
        placed.setdefault(session, "alpha" if i % 2 == 0 else "beta")
        cwd = str(tmp_path / placed[session])
        path.write_text(path.read_text().replace('"cwd":"/home/dev/lab/proj', f'"cwd":"{cwd}'))
    assert run_cli("import", str(projects), env=pipeline).returncode == 0
    wait_usage(pipeline, tag, USAGE_ROWS, len(SESSIONS))
    where = f"WHERE startsWith(session_id, '{tag}')"
    per_session = sql_rows(
        pipeline,
        f"SELECT session_id, groupUniqArray(repo) AS repos FROM usage FINAL {where} GROUP BY session_id",  # noqa: S608
    )
    want_repo = {"alpha": "git.example.com/team/alpha-p7", "beta": "git.example.com/team/beta-p7"}
    assert len(per_session) >= 8, "the sessions with API messages"
    for row in per_session:
        assert row["repos"] == [want_repo[placed[row["session_id"]]]], row
    costs = sql_rows(pipeline, f"SELECT session_id, repo FROM session_costs {where} AND api_calls > 0")  # noqa: S608
    assert {r["session_id"]: r["repo"] for r in costs} == {
        r["session_id"]: r["repos"][0] for r in per_session
    }
    assert b"t0ken-x1" not in run_cli("sql", f"SELECT * FROM usage {where}", env=pipeline).stdout.encode()  # noqa: S608
    for by in ("person", "repo", "branch"):
        sql = sql_rows(
            pipeline,
            f"SELECT {by} AS key, count() AS calls, sum(cost_usd) AS usd FROM usage FINAL {where} "  # noqa: S608
            f"GROUP BY {by}",
        )
        want = {r["key"]: (f"{int(r['calls']):,}", f"${float(r['usd']):,.4f}") for r in sql}
        assert len(want) == 2, sql
        shown = run_cli("cost", "--by", by, env=pipeline)
        assert shown.returncode == 0, shown.stderr
        got = table_rows(shown.stdout, set(want))
        assert {k: (cells[2], cells[-1]) for k, cells in got.items()} == want, shown.stdout
    alpha = want_repo["alpha"]
    only = run_cli("cost", "--by", "branch", "--repo", alpha, env=pipeline)
    assert only.returncode == 0, only.stderr
    assert set(table_rows(only.stdout, {"main", "feat/p7"})) == {"main"}
    ann = run_cli("cost", "--by", "repo", "--person", "ann@example.com", env=pipeline)
    assert set(table_rows(ann.stdout, set(want_repo.values()))) == {alpha}
    wrong = run_cli("cost", "--by", "agent", "--repo", alpha, env=pipeline)
    assert wrong.returncode == 2 and "--by person|repo|branch" in wrong.stderr
