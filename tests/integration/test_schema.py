"""The store's schema on embedded chDB: migrations, inserts of real envelopes, views, retention and
every query of docs/queries.md.

chDB hosts one engine path per process: the module shares one data directory, and each test gets
a database of its own on it (a client opened with `database=`: its handle runs USE, so every
unqualified name of the schema lands there).
"""

from __future__ import annotations

import base64
import json
import re
import time
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from clickhouse_connect.driver.client import Client

from agentwatch.contract import ENVELOPE_FIELDS, encode_envelope, envelopes_from_stdin
from agentwatch.store.migrations import SCHEMA_DIR, apply_migrations, migrations, split_statements, table_ttl
from agentwatch.store.writes import INSERT_SETTINGS, insert_alerts, insert_batch, insert_dead_letters
from tests.conftest import CAPTURES, ROOT, SHARED, load_fixture_file

QUERIES = ROOT / "docs" / "queries.md"
TABLES = {
    "events", "messages", "message_envelopes", "dead_letters", "schema_migrations", "usage", "cost_states",
}  # fmt: skip
VIEWS = {"message_envelopes_mv", "tool_calls", "sessions", "agents"}
COST_VIEWS = {"session_costs", "agent_costs", "cost_daily"}

Envelope = tuple[str, dict[str, Any], bytes]


# --- engine and databases ---------------------------------------------------------------------


@pytest.fixture
def fresh(chdb_database: Client) -> Client:
    """A client on an empty database of this test's own."""
    return chdb_database


@pytest.fixture
def store(fresh: Client) -> Client:
    apply_migrations(fresh)
    return fresh


# --- envelopes --------------------------------------------------------------------------------


def build(
    payload: Mapping[str, Any], environ: Mapping[str, str] | None = None, *, now: float | None = None
) -> list[Envelope]:
    """(subject, envelope, body) of everything one hook invocation publishes."""
    raw = json.dumps(payload).encode()
    return [
        (subject, env, encode_envelope(env))
        for subject, env in envelopes_from_stdin(raw, environ or {}, host="host-1", now=now)
    ]


def split(envelopes: list[Envelope]) -> tuple[list[bytes], list[bytes]]:
    """(event bodies, message bodies), as the store sorts them."""
    events = [body for _, env, body in envelopes if env["kind"] != "message"]
    messages = [body for _, env, body in envelopes if env["kind"] == "message"]
    return events, messages


def insert(client: Client, envelopes: list[Envelope]) -> None:
    events, messages = split(envelopes)
    insert_batch(client, events, messages)


def fixture_envelopes(base: float | None = None) -> list[Envelope]:
    """Every captured payload through the real contract, 10 ms apart, the last one second ago."""
    records = load_fixture_file(CAPTURES)
    start = (time.time() - 1 if base is None else base) - 0.01 * len(records)
    out: list[Envelope] = []
    for i, rec in enumerate(records):
        out += build(rec["payload"], rec.get("hook_env", {}), now=start + 0.01 * i)
    return out


def rows(client: Client, sql: str) -> list[dict[str, Any]]:
    return list(client.query(sql).named_results())


def pairs(client: Client, sql: str) -> dict[str, Any]:
    """{first column: second column} of a two-column query."""
    return {str(row[0]): row[1] for row in client.query(sql).result_rows}


def ms(iso: str) -> int:
    return round(datetime.fromisoformat(iso).timestamp() * 1000)


# --- migrations -------------------------------------------------------------------------------


def _schema_snapshot(client: Client) -> dict[str, str]:
    return {
        str(name): str(query)
        for name, query in client.query(
            "SELECT name, create_table_query FROM system.tables WHERE database = currentDatabase()"
        ).result_rows
    }


def test_schema_files_ship_with_the_package() -> None:
    names = sorted(entry.name for entry in SCHEMA_DIR.iterdir() if entry.name.endswith(".sql"))
    assert names[:4] == ["001_events.sql", "002_messages.sql", "003_dead_letters.sql", "004_views.sql"]
    found = migrations()
    assert [v for v, _, _ in found] == sorted(v for v, _, _ in found)
    assert [n for _, n, _ in found][:4] == ["001_events", "002_messages", "003_dead_letters", "004_views"]
    assert all(split_statements(sql) for _, _, sql in found)


def test_split_statements_only_at_a_line_ending_semicolon() -> None:
    sql = (
        "-- a comment; with a semicolon inside\n"
        "CREATE TABLE a (x String DEFAULT 'p;q') ENGINE = Memory;\n"
        "\n"
        "-- a comment line that ends with one;\n"
        "SELECT 1;  \n"
        "-- only a comment at the end\n"
    )
    assert split_statements(sql) == [
        "-- a comment; with a semicolon inside\nCREATE TABLE a (x String DEFAULT 'p;q') ENGINE = Memory",
        "-- a comment line that ends with one;\nSELECT 1",
    ]


def test_migrations_apply_once_and_are_idempotent(fresh: Client) -> None:
    applied = apply_migrations(fresh)
    assert applied == [name for _, name, _ in migrations()]
    before = _schema_snapshot(fresh)
    assert set(before) >= TABLES | VIEWS | COST_VIEWS
    recorded = rows(fresh, "SELECT version, name FROM schema_migrations FINAL ORDER BY version")
    assert [(r["version"], r["name"]) for r in recorded] == [(v, n) for v, n, _ in migrations()]

    assert apply_migrations(fresh) == []
    assert _schema_snapshot(fresh) == before
    assert fresh.command("SELECT count() FROM schema_migrations FINAL") == len(migrations())


def test_only_unrecorded_files_are_applied(fresh: Client) -> None:
    """A store that knew versions 1 to 3 gets only the newer files."""
    apply_migrations(fresh)
    for view in ("agents", "sessions", "tool_calls"):
        fresh.command(f"DROP VIEW {view}")
    fresh.command("TRUNCATE TABLE schema_migrations")
    fresh.insert(
        "schema_migrations", [[v, n] for v, n, _ in migrations()[:3]], column_names=["version", "name"]
    )

    assert apply_migrations(fresh) == [n for _, n, _ in migrations()[3:]]
    assert set(_schema_snapshot(fresh)) >= VIEWS


def test_tables_have_the_documented_engines(store: Client) -> None:
    engines = pairs(store, "SELECT name, engine FROM system.tables WHERE database = currentDatabase()")
    assert engines["events"] == "ReplacingMergeTree"
    assert engines["messages"] == "ReplacingMergeTree"
    assert engines["message_envelopes"] == "Null"
    assert engines["dead_letters"] == "MergeTree"
    assert engines["usage"] == engines["cost_states"] == "ReplacingMergeTree"
    usage_keys = pairs(
        store,
        "SELECT name, sorting_key FROM system.tables WHERE database = currentDatabase()"
        " AND name IN ('usage', 'cost_states')",
    )
    # usage: by the hour of a message's first stored copy, then the message (018_time_windows).
    assert usage_keys == {"usage": "hour, session_id, message_id, request_id", "cost_states": "session_id"}
    sorting = pairs(
        store,
        "SELECT name, sorting_key FROM system.tables WHERE database = currentDatabase()"
        " AND name IN ('events', 'messages')",
    )
    assert sorting == {"events": "timestamp, id", "messages": "timestamp, id"}
    types = pairs(
        store, "SELECT name, type FROM system.columns WHERE database = currentDatabase() AND table = 'events'"
    )
    assert set(ENVELOPE_FIELDS) | {"stored_at"} == set(types)
    assert types["timestamp"] == "DateTime64(3, 'UTC')"
    assert types["truncated"] == "Bool"
    assert types["agent"] == "LowCardinality(String)"


def test_events_in_has_every_column_of_events(store: Client) -> None:
    """The store inserts into events_in (016), whose view fills `events`: a column of `events`
    missing there would be dropped from every envelope without an error (unknown fields are
    skipped), so each one is there, as plain String where `events` has LowCardinality(String),
    with the same default, and the view passes it on."""

    def columns(table: str) -> dict[str, tuple[str, str, str]]:
        result = store.query(
            "SELECT name, type, default_kind, default_expression FROM system.columns"
            " WHERE database = currentDatabase() AND table = {t:String}",
            parameters={"t": table},
        )
        return {name: (kind, expr, str(typ)) for name, typ, kind, expr in result.result_rows}

    events, landing = columns("events"), columns("events_in")
    del events["stored_at"]  # the time of the insert into `events`: its own default
    assert set(landing) == set(events)
    for name, (kind, expr, typ) in events.items():
        assert landing[name] == (kind, expr, typ.replace("LowCardinality(String)", "String")), name
    view = store.query(
        "SELECT as_select FROM system.tables WHERE database = currentDatabase() AND name = 'events_in_mv'"
    ).result_rows[0][0]
    passed = view.split("SELECT", 1)[1].split("FROM", 1)[0]
    assert {c.strip() for c in passed.split(",")} == set(events)


# --- inserts ----------------------------------------------------------------------------------


def _tricky_envelopes() -> list[Envelope]:
    """Payloads that stress the JSON path: escapes, non-ASCII, a lone surrogate, numbers of every
    kind, nulls, a secret (redacted), an oversized field (truncated), stdin that is not JSON."""
    session = {"session_id": "0c0ffee0-1111-4000-8000-000000000001", "cwd": "/home/dev/proj"}
    out = build(
        {
            **session,
            "hook_event_name": "PreToolUse",
            "tool_name": "Bash",
            "tool_use_id": "toolu_tricky",
            "tool_input": {
                "command": 'echo "quote" \\ back\nnew\tline é ✓ 🚀 \u0001',
                "n": [0, -1, 1.5, 1e300, 2**63, None, True, False, {}, []],
                "lone": "\ud800",
            },
        }
    )
    out += build(
        {
            **session,
            "hook_event_name": "UserPromptSubmit",
            "prompt": "use ANTHROPIC key sk-ant-api03-" + "A" * 40 + " please",
        }
    )
    out += build(
        {
            **session,
            "hook_event_name": "PostToolUse",
            "tool_name": "Read",
            "tool_use_id": "toolu_big",
            "tool_input": {"file_path": "/home/dev/proj/big.txt"},
            "tool_response": {"content": "x" * 1_500_000},
        }
    )
    raw = b"this is { not json"
    out += [(s, e, encode_envelope(e)) for s, e in envelopes_from_stdin(raw, {}, host="host-1")]
    return out


def test_every_envelope_field_round_trips(store: Client, monkeypatch: pytest.MonkeyPatch) -> None:
    # Byte for byte: the store's own trimming of long payload strings off (tests/integration/test_trim.py).
    monkeypatch.setenv("AGENTWATCH_STORE_FIELD_MAX_BYTES", "0")
    envelopes = fixture_envelopes() + _tricky_envelopes()
    assert any(env["redacted"] for _, env, _ in envelopes)
    assert any(json.loads(body)["truncated"] for _, _, body in envelopes)
    insert(store, envelopes)

    stored = {
        r["id"]: r
        for r in rows(
            store,
            "SELECT *, toUnixTimestamp64Milli(timestamp) AS ts_ms, stored_at > now64(3) - INTERVAL 1 HOUR"
            " AS fresh FROM events FINAL",
        )
    }
    events = [body for _, env, body in envelopes if env["kind"] != "message"]
    assert len(stored) == len(events)
    for body in events:
        sent = json.loads(body)  # what went on the wire (after truncation)
        row = stored[sent["id"]]
        for field in ENVELOPE_FIELDS:
            if field == "timestamp":
                assert row["ts_ms"] == ms(sent["timestamp"]), field
            elif field == "data":
                assert json.loads(row["data"]) == sent["data"], sent["event"]
            else:
                assert row[field] == sent[field], (field, sent["event"])
        assert row["fresh"]
    # The data of an untruncated envelope is the payload itself.
    lone = next(env for _, env, _ in envelopes if env["tool_use_id"] == "toolu_tricky")
    assert json.loads(stored[lone["id"]]["data"]) == lone["data"]


def test_bodies_with_leading_whitespace_insert_and_empty_batches_do_nothing(store: Client) -> None:
    events, _ = split(fixture_envelopes()[:6])
    insert_batch(store, [b" " + events[0], b"\t " + events[1], *events[2:]], [])
    ids = {json.loads(b)["id"] for b in events}
    assert {r[0] for r in store.query("SELECT id FROM events FINAL").result_rows} == ids
    insert_batch(store, [], [])  # nothing to do, no query


def test_unknown_fields_and_odd_data_do_not_fail_a_batch(store: Client) -> None:
    """A field from a later contract version is skipped; data that is an array or a string, or
    missing, still lands as text."""
    _, env, _ = fixture_envelopes()[0]
    bodies = [
        encode_envelope({**env, "id": "01FUTURE", "future": {"x": [1, 2]}, "data": {"a": 1}}),
        encode_envelope({**env, "id": "01ARRAY", "data": [1, {"b": "é"}]}),
        encode_envelope({**env, "id": "01STRING", "data": "plain"}),
        encode_envelope({k: v for k, v in env.items() if k != "data"} | {"id": "01NODATA"}),
    ]
    assert INSERT_SETTINGS["input_format_json_read_objects_as_strings"] == 1
    insert_batch(store, bodies, [])
    data = pairs(store, "SELECT id, data FROM events FINAL")
    assert json.loads(data["01FUTURE"]) == {"a": 1}
    assert json.loads(data["01ARRAY"]) == [1, {"b": "é"}]
    assert data["01STRING"] == "plain"
    assert data["01NODATA"] == ""


def test_redelivery_leaves_one_row_per_id(store: Client) -> None:
    envelopes = fixture_envelopes()
    events, messages = split(envelopes)
    for _ in range(3):
        insert_batch(store, events, messages)
    insert_batch(store, events[5:9], messages[:1])  # a partial redelivery

    assert store.command("SELECT count() FROM events FINAL") == len(events)
    assert store.command("SELECT uniqExact(id) FROM events") == len(events)
    assert store.command("SELECT count() FROM messages FINAL") == len(messages)
    # The views read FINAL: nothing is counted twice.
    assert store.command("SELECT sum(events) FROM sessions") == store.command(
        "SELECT count() FROM events FINAL WHERE session_id != ''"
    )
    assert store.command("SELECT sum(messages_sent) FROM agents") == len(messages)
    # And a merge collapses the copies for good.
    store.command("OPTIMIZE TABLE events FINAL")
    assert store.command("SELECT count() FROM events") == len(events)


def test_send_message_is_one_event_row_and_one_message_row(store: Client) -> None:
    record = next(
        rec
        for rec in load_fixture_file(CAPTURES)
        if rec["payload"].get("tool_name") == "SendMessage"
        and rec["payload"]["hook_event_name"] == "PostToolUse"
        and rec["payload"].get("agent_type") == "researcher"
    )
    envelopes = build(record["payload"], record.get("hook_env", {}))
    assert [env["kind"] for _, env, _ in envelopes] == ["tool_result", "message"]
    insert(store, envelopes)
    insert(store, envelopes)  # redelivered

    event = rows(store, "SELECT id, event, tool_name, tool_use_id, agent FROM events FINAL")
    assert len(event) == 1
    assert event[0]["event"] == "PostToolUse"
    assert event[0]["tool_name"] == "SendMessage"
    message = rows(store, "SELECT * FROM messages FINAL")
    assert len(message) == 1
    msg, tool_event = message[0], envelopes[1][1]
    assert msg["id"] == tool_event["id"]
    assert msg["event_id"] == event[0]["id"]
    assert (msg["from_agent"], msg["to_agent"], msg["to_raw"]) == ("researcher", "main-96f21a61", "main")
    assert msg["summary"] == "Findings ready"
    assert msg["text"] == "Findings: 3 shapes ✓"
    assert msg["message_type"] == "message"
    assert msg["team"] == "session-96f21a61"
    assert msg["session_id"] == record["payload"]["session_id"]
    assert store.command("SELECT count() FROM message_envelopes") == 0  # Null: keeps nothing


def test_a_structured_message_is_stored_as_json(store: Client) -> None:
    message = {"type": "shutdown_request", "reason": "done; thanks", "request_id": "r-1"}
    payload = {
        "session_id": "0c0ffee0-2222-4000-8000-000000000002",
        "hook_event_name": "PostToolUse",
        "tool_name": "SendMessage",
        "tool_use_id": "toolu_msg",
        "tool_input": {"to": "researcher", "message": message},
        "tool_response": {"success": True},
    }
    insert(store, build(payload, {"GENIE_AGENT_NAME": "lead", "GENIE_TEAM": "alpha"}))
    (row,) = rows(store, "SELECT from_agent, to_agent, team, message_type, summary, text FROM messages FINAL")
    assert (row["from_agent"], row["to_agent"], row["team"]) == ("lead", "researcher", "alpha")
    assert row["message_type"] == "shutdown_request"
    assert row["summary"] == "shutdown_request: done; thanks"
    assert json.loads(row["text"]) == message


# --- views ------------------------------------------------------------------------------------

SESSION = "5e55e55e-0000-4000-8000-000000000001"
# Four more sessions, each of its own main agent (main-a0000000, ...).
RUNNING, FAILED, ENDED, IDLE = (f"{c}0000000-0000-4000-8000-000000000001" for c in "abcd")
SUBAGENT_ID = "a1b2c3d4e5f607182"
LEAD = {"GENIE_AGENT_NAME": "lead", "GENIE_TEAM": "alpha"}


def _call(event: str, tool: str, tool_use_id: str, session: str = SESSION, **extra: Any) -> dict[str, Any]:
    payload = {
        "session_id": session,
        "cwd": "/home/dev/proj",
        "hook_event_name": event,
        "tool_name": tool,
        "tool_use_id": tool_use_id,
        "tool_input": {"command": f"run {tool_use_id}", "file_path": "/home/dev/proj/x.py"},
    }
    payload.update(extra)
    return payload


def _scripted(t0: float) -> list[Envelope]:
    """Tool calls of every status, then a session with a subagent that messages its lead and
    waits for permission while the lead's Agent call runs, and three other sessions."""
    sub = {"agent_id": SUBAGENT_ID, "agent_type": "Explore"}
    steps: list[tuple[float, dict[str, Any]]] = [
        (0.0, {"session_id": SESSION, "hook_event_name": "SessionStart", "source": "startup"}),
        (0.1, {"session_id": SESSION, "hook_event_name": "UserPromptSubmit", "prompt": "go"}),
        # ok, with the payload's duration
        (1.0, _call("PreToolUse", "Bash", "tu_ok")),
        (2.5, _call("PostToolUse", "Bash", "tu_ok", duration_ms=1234, tool_response={"stdout": "ok"})),
        # ok, no duration in the payload: ended - started
        (3.0, _call("PreToolUse", "Read", "tu_nodur")),
        (5.0, _call("PostToolUse", "Read", "tu_nodur", tool_response={"content": "x"})),
        # error and interrupted
        (6.0, _call("PreToolUse", "Bash", "tu_err")),
        (6.5, _call("PostToolUseFailure", "Bash", "tu_err", error="Exit code 1\nboom", is_interrupt=False)),
        (7.0, _call("PreToolUse", "Bash", "tu_int")),
        (7.2, _call("PostToolUseFailure", "Bash", "tu_int", error="interrupted by user", is_interrupt=True)),
        # denied
        (8.0, _call("PreToolUse", "WebFetch", "tu_denied")),
        (8.1, _call("PermissionDenied", "WebFetch", "tu_denied", reason="auto mode")),
        # orphan: a result whose call was never seen
        (9.0, _call("PostToolUse", "Grep", "tu_orphan", duration_ms=55, tool_response={})),
        # the lead starts a subagent, which works, messages the lead and waits for permission
        (10.0, _call("PreToolUse", "Agent", "tu_agent", tool_input={"subagent_type": "Explore"})),
        (10.1, {"session_id": SESSION, "hook_event_name": "SubagentStart", **sub}),
        (10.2, _call("PreToolUse", "Grep", "tu_sub_grep", **sub)),
        (10.3, _call("PostToolUse", "Grep", "tu_sub_grep", duration_ms=40, tool_response={}, **sub)),
        (10.4, _call("PreToolUse", "SendMessage", "tu_sub_msg", **sub)),
        (
            10.5,
            _call(
                "PostToolUse",
                "SendMessage",
                "tu_sub_msg",
                tool_input={"to": "main", "summary": "found it", "message": "in x.py"},
                tool_response={"success": True},
                **sub,
            ),
        ),
        (10.6, _call("PreToolUse", "Bash", "tu_sub_bash", **sub)),
        (10.7, _call("PermissionRequest", "Bash", "", **sub)),
        (10.8, {"session_id": SESSION, "hook_event_name": "FileChanged", "file_path": "/x", **sub}),
        # still running: no result yet
        (11.0, _call("PreToolUse", "Bash", "tu_running", session=RUNNING)),
    ]
    steps += [
        (12.0, {"session_id": FAILED, "hook_event_name": "SessionStart", "source": "startup"}),
        (12.1, {"session_id": FAILED, "hook_event_name": "UserPromptSubmit", "prompt": "hi"}),
        (12.2, {"session_id": FAILED, "hook_event_name": "StopFailure", "error": "rate_limit"}),
        (12.3, {"session_id": FAILED, "hook_event_name": "Notification", "notification_type": "idle_prompt"}),
        (13.0, {"session_id": ENDED, "hook_event_name": "SessionStart", "source": "startup"}),
        (13.1, {"session_id": ENDED, "hook_event_name": "UserPromptSubmit", "prompt": "hi"}),
        (13.2, {"session_id": ENDED, "hook_event_name": "Stop", "last_assistant_message": "done"}),
        (13.3, {"session_id": ENDED, "hook_event_name": "SessionEnd", "reason": "logout"}),
        (14.0, {"session_id": IDLE, "hook_event_name": "UserPromptSubmit", "prompt": "hi"}),
        (14.1, {"session_id": IDLE, "hook_event_name": "Stop", "last_assistant_message": "done"}),
        (
            14.2,
            {"session_id": IDLE, "hook_event_name": "Notification", "notification_type": "permission_prompt"},
        ),
    ]
    out: list[Envelope] = []
    for offset, payload in steps:
        environ = LEAD if payload["session_id"] == SESSION else {}
        out += build(payload, environ, now=t0 + offset)
    return out


@pytest.fixture
def scripted(store: Client) -> Client:
    envelopes = _scripted(time.time() - 20)
    insert(store, envelopes)
    insert(store, envelopes[::3])  # some redelivered
    return store


def test_tool_calls_pairs_calls_with_their_results(scripted: Client) -> None:
    calls = {r["tool_use_id"]: r for r in rows(scripted, "SELECT * FROM tool_calls")}
    assert set(calls) == {
        "tu_ok", "tu_nodur", "tu_err", "tu_int", "tu_denied", "tu_orphan", "tu_agent",
        "tu_sub_grep", "tu_sub_msg", "tu_sub_bash", "tu_running",
    }  # fmt: skip
    ok = calls["tu_ok"]
    assert (ok["status"], ok["duration_ms"], ok["error"], ok["tool"]) == ("ok", 1234, "", "Bash")
    assert (ok["agent"], ok["team"], ok["session_id"]) == ("lead", "alpha", SESSION)
    assert ok["text"] == "$ run tu_ok"  # the call's summary, not the result's
    assert ok["started"] is not None and ok["ended"] is not None
    assert (calls["tu_nodur"]["status"], calls["tu_nodur"]["duration_ms"]) == ("ok", 2000)
    err = calls["tu_err"]
    assert (err["status"], err["error"], err["duration_ms"]) == ("error", "Exit code 1\nboom", 500)
    assert (calls["tu_int"]["status"], calls["tu_int"]["error"]) == ("interrupted", "interrupted by user")
    assert calls["tu_denied"]["status"] == "denied"
    orphan = calls["tu_orphan"]
    assert (orphan["status"], orphan["started"], orphan["duration_ms"]) == ("orphan", None, 55)
    assert orphan["ended"] is not None
    for running in ("tu_running", "tu_agent", "tu_sub_bash"):
        row = calls[running]
        assert (row["status"], row["ended"], row["duration_ms"]) == ("running", None, None), running
        assert row["started"] is not None
    assert calls["tu_sub_grep"]["agent"] == "Explore-1b2c3d4e"
    assert calls["tu_sub_grep"]["agent_id"] == SUBAGENT_ID


def test_sessions_summarize_each_session(scripted: Client) -> None:
    sessions = {r["session_id"]: r for r in rows(scripted, "SELECT * FROM sessions")}
    main = sessions[SESSION]
    assert (main["agent"], main["team"], main["host"], main["cwd"]) == (
        "lead",
        "alpha",
        "host-1",
        "/home/dev/proj",
    )
    assert main["ended"] is None and main["end_reason"] == ""
    assert main["outcome"] == "running"
    assert main["prompts"] == 1
    assert main["subagents"] == 1
    # PreToolUse: ok, nodur, err, int, denied, agent, sub grep, sub msg, sub bash
    assert main["tool_calls"] == 9
    assert main["errors"] == 2
    own = {"s": SESSION}
    started = (
        "SELECT started = (SELECT min(timestamp) FROM events WHERE event = 'SessionStart'"
        " AND session_id = {s:String}) FROM sessions WHERE session_id = {s:String}"
    )
    assert scripted.command(started, parameters=own) == 1
    count = "SELECT count() FROM events FINAL WHERE session_id = {s:String}"
    assert main["events"] == scripted.command(count, parameters=own)

    outcomes = {sid: (r["outcome"], r["end_reason"], r["ended"] is not None) for sid, r in sessions.items()}
    assert outcomes[RUNNING] == ("running", "", False)
    assert outcomes[FAILED] == ("failed", "", False)
    assert outcomes[ENDED] == ("ended", "logout", True)
    assert outcomes[IDLE] == ("idle", "", False)
    assert sessions[FAILED]["errors"] == 1
    assert sessions[RUNNING]["agent"] == "main-a0000000"


def test_agents_give_state_parent_and_counts(scripted: Client) -> None:
    agents = {r["agent"]: r for r in rows(scripted, "SELECT * FROM agents")}
    lead = agents["lead"]
    assert (lead["state"], lead["current_tool"], lead["parent_agent"], lead["team"]) == (
        "working",
        "Agent",
        "",
        "alpha",
    )
    assert lead["tool_calls"] == 6
    assert lead["errors"] == 2
    assert lead["messages_sent"] == 0
    sub = agents["Explore-1b2c3d4e"]
    # The FileChanged after its PermissionRequest says nothing about its state; waiting, it names
    # the tool it asks for.
    assert (sub["state"], sub["current_tool"], sub["last_event"]) == ("waiting", "Bash", "FileChanged")
    assert (sub["parent_agent"], sub["agent_type"], sub["agent_id"]) == ("lead", "Explore", SUBAGENT_ID)
    assert (sub["tool_calls"], sub["messages_sent"], sub["errors"]) == (3, 1, 0)
    assert sub["first_seen"] <= sub["last_seen"]

    states = {name: r["state"] for name, r in agents.items() if name.startswith("main-")}
    assert states == {
        "main-a0000000": "working",
        "main-b0000000": "idle",  # failed, then the idle prompt
        "main-c0000000": "stopped",
        "main-d0000000": "waiting",  # a permission_prompt notification
    }
    assert agents["main-a0000000"]["current_tool"] == "Bash"
    # The lead received the subagent's message.
    (msg,) = rows(scripted, "SELECT from_agent, to_agent, summary FROM messages FINAL")
    assert msg == {"from_agent": "Explore-1b2c3d4e", "to_agent": "lead", "summary": "found it"}


@pytest.mark.parametrize(
    ("steps", "state"),
    [
        ([("PreToolUse", {})], "working"),
        ([("PreToolUse", {}), ("PostToolUse", {})], "thinking"),
        ([("PermissionRequest", {})], "waiting"),
        ([("Notification", {"notification_type": "permission_prompt"})], "waiting"),
        ([("Stop", {}), ("Notification", {"notification_type": "idle_prompt"})], "idle"),
        ([("Stop", {}), ("InstructionsLoaded", {"file_path": "/x/CLAUDE.md"})], "idle"),
        ([("TeammateIdle", {"teammate_name": "t"})], "idle"),
        ([("SessionEnd", {"reason": "other"})], "stopped"),
        ([("StopFailure", {"error": "server_error"})], "failed"),
        ([("UserPromptSubmit", {"prompt": "x"})], "thinking"),
    ],
)
def test_agent_state_follows_the_latest_event(
    store: Client, steps: list[tuple[str, dict[str, Any]]], state: str
) -> None:
    t0 = time.time() - 10
    envelopes: list[Envelope] = []
    for i, (event, extra) in enumerate(steps):
        payload = _call(event, "Bash", "tu_1") if "Tool" in event else {"session_id": SESSION}
        payload.update(extra, hook_event_name=event)
        envelopes += build(payload, {"GENIE_AGENT_NAME": "solo"}, now=t0 + i)
    insert(store, envelopes)
    (row,) = rows(store, "SELECT state, current_tool FROM agents")
    assert row == {"state": state, "current_tool": "Bash" if state == "working" else ""}


# --- retention and dead letters -----------------------------------------------------------------


def test_retention_ttl_is_set_changed_and_removed(store: Client) -> None:
    month_ago = time.time() - 30 * 86400
    call = {"session_id": SESSION, "hook_event_name": "PreToolUse", "tool_name": "Bash", "tool_use_id": "t-0"}
    stop = {"session_id": SESSION, "hook_event_name": "Stop"}
    old = build(stop, now=month_ago) + build(call, now=month_ago)
    new = build({"session_id": SESSION, "hook_event_name": "Stop"}, now=time.time() - 1)
    insert(store, old + new)
    assert table_ttl(store, "events") == ""
    assert store.command("SELECT count() FROM call_rollup WHERE tool_use_id = 't-0'") == 1

    apply_migrations(store, retention_days=7)
    for table in ("events", "messages"):
        assert table_ttl(store, table).replace(" ", "") == "toDateTime(timestamp)+toIntervalDay(7)"
    # One row per tool call: it expires with the events (its hour is the call's).
    assert table_ttl(store, "call_rollup").replace(" ", "") == "toDateTime(hour)+toIntervalDay(7)"
    store.command("OPTIMIZE TABLE events FINAL")
    store.command("OPTIMIZE TABLE call_rollup FINAL")
    assert store.command("SELECT count() FROM events") == 1  # the month-old events expired
    assert store.command("SELECT count() FROM call_rollup WHERE tool_use_id = 't-0'") == 0

    mutations = store.command("SELECT count() FROM system.mutations WHERE database = currentDatabase()")
    apply_migrations(store, retention_days=7)  # unchanged: no ALTER
    assert (
        store.command("SELECT count() FROM system.mutations WHERE database = currentDatabase()") == mutations
    )

    apply_migrations(store, retention_days=90)
    assert "toIntervalDay(90)" in table_ttl(store, "events")
    apply_migrations(store, retention_days=0)
    assert table_ttl(store, "events") == table_ttl(store, "messages") == table_ttl(store, "call_rollup") == ""
    apply_migrations(store, retention_days=0)  # no TTL to remove: no error
    with pytest.raises(ValueError, match="retention"):
        apply_migrations(store, retention_days=-1)


def test_dead_letters_insert_and_read_back(store: Client) -> None:
    insert_dead_letters(
        store,
        [
            ("genie.tool.a.call", 17, 5, "not JSON: Expecting value", b"\xff\xfe not utf-8 {"),
            ("genie.msg.b", 2**40, 1, "unsupported schema version 9", b'{"v":9}'),
        ],
    )
    insert_dead_letters(store, [])
    got = rows(
        store,
        "SELECT subject, stream_seq, deliveries, reason, body,"
        " received_at > now64(3) - INTERVAL 1 HOUR AS fresh FROM dead_letters ORDER BY stream_seq",
    )
    assert got == [
        {
            "subject": "genie.tool.a.call",
            "stream_seq": 17,
            "deliveries": 5,
            "reason": "not JSON: Expecting value",
            "body": "\ufffd\ufffd not utf-8 {",
            "fresh": True,
        },
        {
            "subject": "genie.msg.b",
            "stream_seq": 2**40,
            "deliveries": 1,
            "reason": "unsupported schema version 9",
            "body": '{"v":9}',
            "fresh": True,
        },
    ]


# --- docs/queries.md --------------------------------------------------------------------------


def documented_queries(path: Path = QUERIES) -> list[tuple[str, str]]:
    """(title, sql) of every ```sql block, titled by the heading above it."""
    out: list[tuple[str, str]] = []
    title = ""
    for match in re.finditer(r"^## ([^\n]+)$|^```sql\n(.*?)^```", path.read_text(), re.M | re.S):
        if match.group(1):
            title = match.group(1).strip()
        else:
            out.append((title, match.group(2)))
    return out


def test_docs_hold_ten_queries() -> None:
    queries = documented_queries()
    titles = {title for title, _ in queries}
    assert len([t for t in titles if re.match(r"\d+\. ", t)]) == 10
    assert all(";" not in sql.strip().rstrip(";") for _, sql in queries)


def documented_alerts() -> list[bytes]:
    """A loop that fired and resolved, and a stuck tool still firing, as the watchdog writes them."""
    now = datetime.now(UTC).strftime("%Y-%m-%d %H:%M:%S.000")
    base = {"severity": "warning", "team": "t", "session_id": "s1", "host": "h", "since": now, "at": now}
    changes = [
        {**base, "id": "a1", "rule": "loop", "state": "firing", "agent": "lead", "summary": "looping"},
        {**base, "id": "a1", "rule": "loop", "state": "resolved", "agent": "lead", "summary": "looping"},
        {**base, "id": "a2", "rule": "stuck_tool", "state": "firing", "agent": "mate", "summary": "stuck"},
    ]
    return [json.dumps({**c, "details": "{}"}).encode() for c in changes]


def insert_otel_fixtures(client: Client) -> None:
    """Claude Code's own OTLP exports (the shared fixtures), as the collector's receiver stores them."""
    from agentwatch.consumers.otlp_decode import decode
    from agentwatch.store.otel import insert_otel

    for line in (SHARED / "claude-code-2.1.330-otel" / "otlp-requests.jsonl").read_text().splitlines():
        request = json.loads(line)
        signal, protobuf = request["path"].rsplit("/", 1)[1], request["protocol"] == "protobuf"
        raw = request.get("body_b64", "")
        body = base64.b64decode(raw) if protobuf else json.dumps(request["body_json"]).encode()
        insert_otel(client, signal, decode(signal, body, protobuf))


def test_every_documented_query_runs_and_finds_rows(scripted: Client) -> None:
    from agentwatch.store.usage import USAGE_COLUMNS, insert_usage, usage_rows
    from tests.integration.test_cost_store import all_bodies

    insert(scripted, fixture_envelopes())
    # The transcripts' API messages moved to end a minute ago, as the captures are stamped now:
    # the documented questions ask of the last day or week.
    usage = usage_rows([body for _, body in all_bodies()])
    at = [name for name, _ in USAGE_COLUMNS].index("timestamp")
    shift = datetime.now(UTC) - timedelta(minutes=1) - max(row[at] for row in usage.usage)
    for row in usage.usage:
        row[at] += shift
    insert_usage(scripted, usage)
    insert_alerts(scripted, documented_alerts())
    insert_otel_fixtures(scripted)
    results: dict[str, list[int]] = {}
    for title, sql in documented_queries():
        result = scripted.query(sql)
        assert result.column_names, title
        results.setdefault(title, []).append(len(result.result_rows))
    # The data holds something for every question.
    empty = {title: counts for title, counts in results.items() if 0 in counts}
    assert empty == {}
    running = rows(scripted, next(sql for title, sql in documented_queries() if title.startswith("5.")))
    assert {r["tool"] for r in running} >= {"Agent", "Bash", "WebFetch"}
