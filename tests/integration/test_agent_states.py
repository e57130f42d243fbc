"""One state machine: the dashboard's Python and the store's SQL, both derived from
agentwatch/agents.py, give every agent the same state after every event, and the SQL file they are
generated into is current."""

from __future__ import annotations

import itertools
import json
import time
from pathlib import Path
from typing import Any

import pytest
from clickhouse_connect.driver.client import Client

from agentwatch import agents
from agentwatch.contract import encode_envelope, envelopes_from_stdin
from agentwatch.demo.simulator import TeamSimulator
from agentwatch.emitter.nesting import in_memory
from agentwatch.store import agents_sql
from agentwatch.store.migrations import SCHEMA_DIR, apply_migrations
from agentwatch.store.writes import insert_batch
from agentwatch.tui.roster import Roster
from tests.conftest import CAPTURES, SHARED, harness_payloads, load_fixture_file

OTEL_HOOKS = SHARED / "claude-code-2.1.330-otel" / "hook-payloads.jsonl"


def test_the_generated_sql_is_current() -> None:
    written = SCHEMA_DIR.joinpath(Path(agents_sql.OUTPUT).name).read_text(encoding="utf-8")
    assert written == agents_sql.render(), f"regenerate it: {agents_sql.COMMAND}"
    later = SCHEMA_DIR.joinpath(Path(agents_sql.INVALID_INPUT_OUTPUT).name).read_text(encoding="utf-8")
    assert later == agents_sql.render_invalid_input(), "regenerate it: see its first line"


def test_every_state_event_has_one_meaning() -> None:
    """The table is data the SQL is written from: each (event, notification type) is in one row."""
    seen: set[tuple[str, str]] = set()
    for event, notes, state in agents.TRANSITIONS:
        assert state in agents.STATES
        for note in notes or ("",):
            assert (event, note) not in seen, (event, note)
            seen.add((event, note))
    assert agents.state_after("Notification", "auth_success") is None, "other notifications change nothing"
    assert (
        agents.state_after("SessionStart") == agents.IDLE
        and agents.state_after("Elicitation") == agents.WAITING
    )


Steps = list[tuple[dict[str, Any], dict[str, str]]]


def sessions() -> list[tuple[str, Steps]]:
    """(name, hook payloads and environments) of every fixture session and of two demo runs."""
    played: list[tuple[str, list[tuple[dict[str, Any], dict[str, str]]]]] = [
        ("claude-code captures", [(r["payload"], r.get("hook_env", {})) for r in load_fixture_file(CAPTURES)])
    ]
    # Codex's and Gemini's captures, normalised by the hook (Gemini's through its memory of the session).
    for harness in ("codex", "gemini"):
        played.append((f"{harness} captures", [(r["payload"], r["env"]) for r in harness_payloads(harness)]))
    if OTEL_HOOKS.exists():
        played.append(
            ("claude-code otel sessions", [(r["payload"], r["env"]) for r in load_fixture_file(OTEL_HOOKS)])
        )
    for seed in (7, 8):
        demo = TeamSimulator(seed, teammates=3)
        payloads = [(p, demo.environ) for _, p in itertools.islice(demo.events(), 400)]
        played.append((f"demo seed {seed}", payloads))
    return played


def stamped(name: str, steps: Steps) -> list[dict[str, Any]]:
    """The session's envelopes through the hook's code, stamped a millisecond apart from a minute
    ago, when the test runs (recent: no agent is lost, however late in a long run it comes)."""
    envelopes: list[dict[str, Any]] = []
    start = time.time() - 60
    harness = {"codex captures": "codex", "gemini captures": "gemini-cli"}.get(name, "")
    track = in_memory()
    for payload, environ in steps:
        at = start + len(envelopes) / 1000
        raw = json.dumps(payload).encode()
        made = envelopes_from_stdin(raw, environ, host="h1", now=at, harness=harness, track=track)
        envelopes += [env for _, env in made]
    return envelopes


# The state of each event's agent right after it, by the SQL the `agents` view is generated from
# (agents_sql.is_state_sql and state_case_sql), over the events stored: its latest state event by
# (time, id) up to and including this one, as the view's argMax takes it over the whole history.
AFTER_EACH_EVENT = f"""
SELECT id, {agents_sql.state_case_sql("s.1", "s.2")} AS state
FROM
(
    SELECT id, argMaxIf((toString(event), note), (timestamp, id), is_state) OVER (
        PARTITION BY host, scope, agent ORDER BY timestamp, id
        ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW
    ) AS s
    FROM
    (
        SELECT id, timestamp, host, agent, event, note, {agents_sql.scope_sql()} AS scope,
            {agents_sql.is_state_sql()} AS is_state
        FROM
        (
            SELECT *, if(event = 'Notification', JSONExtractString(data, 'notification_type'), '') AS note
            FROM events FINAL
        )
    )
)"""  # noqa: S608 (the project's own generated SQL)
VIEW = (
    "SELECT host, scope, agent, state, current_tool, tool_calls, errors, events, messages_sent FROM agents "
    "ORDER BY host, scope, agent"
)


def roster_as_view(roster: Roster) -> list[tuple[Any, ...]]:
    return sorted(
        (a.host, a.scope, a.name, a.state, a.tool if a.state in agents.TOOL_STATES else "", a.tool_calls,
         a.errors, a.events, a.messages)
        for a in roster.agents()
    )  # fmt: skip


@pytest.mark.parametrize(("name", "steps"), sessions(), ids=lambda v: v if isinstance(v, str) else "")
def test_python_and_sql_agree_after_every_event(chdb_database: Client, name: str, steps: Steps) -> None:
    """Python after each event against the generated SQL after each event; and the `agents` view
    itself against the roster at five points of the session, the store filled batch by batch."""
    envelopes = stamped(name, steps)
    apply_migrations(chdb_database)
    roster = Roster(max_agents=10_000)
    python: dict[str, str] = {}
    batch: list[dict[str, Any]] = []
    checkpoints = {len(envelopes) * k // 5 for k in range(1, 6)}
    for n, env in enumerate(envelopes, 1):
        agent = roster.apply(env)
        assert agent is not None
        if env["kind"] != "message":
            python[env["id"]] = agent.state
        batch.append(env)
        if n in checkpoints:
            insert_batch(
                chdb_database,
                [encode_envelope(e) for e in batch if e["kind"] != "message"],
                [encode_envelope(e) for e in batch if e["kind"] == "message"],
            )
            batch = []
            roster.settle(time.time())
            assert chdb_database.query(VIEW).result_rows == roster_as_view(roster), (
                f"{name}: after {n} events"
            )
    sql = {str(i): str(state) for i, state in chdb_database.query(AFTER_EACH_EVENT).result_rows}
    assert sql == python, f"{name}: the state after each event"
    assert len(python) > 20


def test_a_silent_session_is_lost_in_both(chdb_database: Client) -> None:
    """No event in its session for LOST_AFTER_S, not stopped: lost, in the view and in the roster."""
    apply_migrations(chdb_database)
    long_ago = time.time() - agents.LOST_AFTER_S - 60
    payloads = [
        {"hook_event_name": "UserPromptSubmit", "session_id": "5111e000-0000", "prompt": "go"},
        {"hook_event_name": "PreToolUse", "session_id": "5111e000-0000", "tool_name": "WebFetch",
         "tool_input": {"url": "https://example.com"}, "tool_use_id": "toolu_1"},
        {"hook_event_name": "SessionEnd", "session_id": "e0ded000-0000", "reason": "other"},
    ]  # fmt: skip
    roster = Roster()
    for i, payload in enumerate(payloads):
        for _, env in envelopes_from_stdin(json.dumps(payload).encode(), {}, host="h1", now=long_ago + i):
            insert_batch(chdb_database, [encode_envelope(env)], [])
            roster.apply(env)
    roster.settle(time.time())
    stored = {
        str(a): str(state) for a, state in chdb_database.query("SELECT agent, state FROM agents").result_rows
    }
    assert stored == {"main-5111e000": agents.LOST, "main-e0ded000": agents.STOPPED}
    assert {a.name: a.state for a in roster.agents()} == stored
