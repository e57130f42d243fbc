"""`agentwatch export` and `agentwatch search` on the pipeline as a person runs it.

`agentwatch up` runs the store; the hook events Claude Code sent while it wrote the fixture
transcripts are published as the hook publishes them (tests/transcript_hooks.py), and
`agentwatch import` brings the transcripts' usage. A session exported in each format holds every
one of its events (the JSON lines and the Parquet rows, counted and by id, equal what
`agentwatch sql` counts), and its Markdown names every turn; search finds a prompt's words.
"""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path
from typing import Any

import pytest

from agentwatch.demo.simulator import encode_event
from tests.conftest import (
    HOOK_INBOX,
    PROJECTS,
    bus_login,
    clean_env,
    free_port,
    run_cli,
    transcript_sessions,
)
from tests.integration.test_store import Service
from tests.transcript_hooks import hook_events

pytestmark = pytest.mark.timeout(300)

BUSY = "27e556a2-de12-4c72-b5fd-a64ef0b73d15"  # twelve tool calls, six failed, a subagent
TWO_TURNS = "4ef48e0b-52f0-4e15-9561-7987cce78712"


def sql(env: dict[str, str], query: str) -> list[dict[str, Any]]:
    result = run_cli("sql", query, "--format", "json", env=env)
    assert result.returncode == 0, result.stderr
    rows: list[dict[str, Any]] = json.loads(result.stdout)
    return rows


def publish_hook_events(url: str) -> int:
    """Publish the fixture sessions' hook events; how many events the store will hold."""
    import nats

    messages = []
    for _, main, subagents, _ in transcript_sessions():
        for at, payload in hook_events(main, subagents):
            messages += encode_event(payload, {}, host="lab", now=at)

    async def publish() -> None:
        nc = await nats.connect(url, inbox_prefix=HOOK_INBOX)  # the hook's login takes acks there
        js = nc.jetstream()
        for subject, event_id, body in messages:
            await js.publish(subject, body, headers={"Nats-Msg-Id": event_id})
        await nc.close()

    asyncio.run(publish())
    return sum(
        1 for subject, _, _ in messages if not subject.startswith("genie.msg.")
    )  # events, not deliveries


@pytest.fixture(scope="module")
def pipeline(tmp_path_factory: pytest.TempPathFactory) -> Any:
    env = clean_env(
        AGENTWATCH_DATA_DIR=str(tmp_path_factory.mktemp("data")),
        AGENTWATCH_NATS_URL=f"nats://127.0.0.1:{free_port()}",
        AGENTWATCH_ALERT_BELL="0",
    )
    up = Service(["up"], env)
    try:
        up.wait_ready(60)
        sent = publish_hook_events(bus_login(env))
        imported = run_cli("import", str(PROJECTS), env=env, timeout=120)
        assert imported.returncode == 0, imported.stderr
        deadline = time.monotonic() + 60
        while sql(env, "SELECT count() AS n FROM events")[0]["n"] < sent:
            assert time.monotonic() < deadline, "hook events stored"
            time.sleep(0.5)
        while not sql(env, "SELECT count() AS n FROM usage")[0]["n"]:
            assert time.monotonic() < deadline, "usage stored"
            time.sleep(0.5)
        yield env
    finally:
        up.stop()


def stored_ids(env: dict[str, str], session: str) -> set[str]:
    rows = sql(env, f"SELECT DISTINCT id FROM events WHERE session_id = '{session}'")  # noqa: S608 (a constant)
    return {str(r["id"]) for r in rows}


def test_jsonl_and_parquet_hold_every_event_of_the_session(pipeline: dict[str, str], tmp_path: Path) -> None:
    want = stored_ids(pipeline, BUSY)
    assert len(want) > 20
    jsonl = tmp_path / "busy.jsonl"
    done = run_cli("export", "--session", BUSY, "--format", "jsonl", "-o", str(jsonl), env=pipeline)
    assert done.returncode == 0, done.stderr
    lines = [json.loads(line) for line in jsonl.read_text().splitlines()]
    assert len(lines) == len(want)
    assert {e["id"] for e in lines} == want
    assert all(e["session_id"] == BUSY for e in lines)
    assert isinstance(lines[1]["data"], dict), "the payload is an object again"
    assert [e["timestamp"] for e in lines] == sorted(e["timestamp"] for e in lines)

    import pyarrow.parquet as pq

    parquet = tmp_path / "busy.parquet"
    done = run_cli("export", "--session", BUSY, "--format", "parquet", "-o", str(parquet), env=pipeline)
    assert done.returncode == 0, done.stderr
    table = pq.read_table(parquet)
    assert table.num_rows == len(want)
    assert set(table.column("id").to_pylist()) == want
    assert str(table.schema.field("timestamp").type) == "timestamp[ms, tz=UTC]"


def test_markdown_names_every_turn(pipeline: dict[str, str]) -> None:
    done = run_cli("export", "--session", TWO_TURNS, "--format", "md", env=pipeline)
    assert done.returncode == 0, done.stderr
    # A turn is a prompt_id: the second holds two messages from a teammate.
    query = (
        "SELECT prompt_id, argMinIf(text, timestamp, event = 'UserPromptSubmit') AS text FROM events "
        "WHERE session_id = 'SESSION' AND prompt_id != '' GROUP BY prompt_id ORDER BY min(timestamp)"
    )
    prompts = sql(pipeline, query.replace("SESSION", TWO_TURNS))
    assert len(prompts) == 2
    for number, row in enumerate(prompts, 1):
        assert f"## Turn {number}: {row['text']}" in done.stdout
    assert f"# Session {TWO_TURNS}" in done.stdout


def test_an_export_by_time_holds_every_session(pipeline: dict[str, str], tmp_path: Path) -> None:
    out = tmp_path / "all.jsonl"
    done = run_cli("export", "--since", "2026-01-01", "-o", str(out), env=pipeline)
    assert done.returncode == 0, done.stderr
    (total,) = sql(pipeline, "SELECT uniqExact(id) AS n FROM events WHERE timestamp >= '2026-01-01'")
    assert len(out.read_text().splitlines()) == total["n"]


def test_search_finds_a_prompt_and_a_payload(pipeline: dict[str, str]) -> None:
    found = run_cli("search", "scenario-a", "--format", "json", env=pipeline)
    assert found.returncode == 0, found.stderr
    rows = json.loads(found.stdout)
    assert [r["session_id"] for r in rows] == [BUSY]
    # A word of a payload only (the file a call wrote), narrowed to one session.
    found = run_cli("search", "notes.txt", "--session", BUSY, "--format", "json", env=pipeline)
    assert found.returncode == 0, found.stderr
    assert {r["tool_name"] for r in json.loads(found.stdout)} >= {"Write"}
    nothing = run_cli("search", "--", "--", env=pipeline)
    assert nothing.returncode == 2 and "give a word" in nothing.stderr
    table = run_cli("search", "scenario-a", env=pipeline)
    assert BUSY[:8] in table.stdout and "(1 event" in table.stdout


def test_export_says_what_to_give(pipeline: dict[str, str]) -> None:
    done = run_cli("export", env=pipeline)
    assert done.returncode == 2 and "--session ID" in done.stderr
    done = run_cli("export", "--session", "no-such-session", env=pipeline)
    assert done.returncode == 2 and "no events in session" in done.stderr


def test_search_and_export_narrowed_to_a_person_or_repository(
    pipeline: dict[str, str], tmp_path: Path
) -> None:
    """Three events of two repositories (as the hook attributes them): --repo and --person keep
    each one's own, in search and in export (whose envelopes carry the three fields)."""
    import nats

    from agentwatch.contract import build_envelope, encode_envelope

    owners = [("ann@example.com", "github.com/t/zoo"), ("bo@example.com", "github.com/t/zoo"),
              ("ann@example.com", "github.com/t/farm")]  # fmt: skip
    messages = []
    for n, (person, repo) in enumerate(owners):
        payload = {
            "hook_event_name": "UserPromptSubmit",
            "session_id": f"owner-{n}",
            "prompt": "feed the zebrawords",
        }
        subject, env = build_envelope(payload, {}, host="lab", now=time.time() + n)
        env.update(person=person, repo=repo, branch="main")
        messages.append((subject, env["id"], encode_envelope(env)))

    async def publish() -> None:
        nc = await nats.connect(bus_login(pipeline), inbox_prefix=HOOK_INBOX)  # up's hook login
        for subject, event_id, body in messages:
            await nc.jetstream().publish(subject, body, headers={"Nats-Msg-Id": event_id})
        await nc.close()

    asyncio.run(publish())
    deadline = time.monotonic() + 60
    while sql(pipeline, "SELECT count() AS n FROM events WHERE startsWith(session_id, 'owner-')")[0]["n"] < 3:
        assert time.monotonic() < deadline, "stored"
        time.sleep(0.3)

    def found(*narrow: str) -> set[str]:
        done = run_cli("search", "zebrawords", *narrow, "--format", "json", env=pipeline)
        assert done.returncode == 0, done.stderr
        return {r["session_id"] for r in json.loads(done.stdout)}

    assert found() == {"owner-0", "owner-1", "owner-2"}
    assert found("--repo", "github.com/t/zoo") == {"owner-0", "owner-1"}
    assert found("--person", "ann@example.com", "--repo", "github.com/t/zoo") == {"owner-0"}
    out = tmp_path / "zoo.jsonl"
    done = run_cli(
        "export", "--since", "2026-01-01", "--repo", "github.com/t/zoo", "-o", str(out), env=pipeline
    )
    assert done.returncode == 0, done.stderr
    exported = [json.loads(line) for line in out.read_text().splitlines()]
    assert sorted((e["session_id"], e["person"], e["repo"], e["branch"]) for e in exported) == [
        ("owner-0", "ann@example.com", "github.com/t/zoo", "main"),
        ("owner-1", "bo@example.com", "github.com/t/zoo", "main"),
    ]
