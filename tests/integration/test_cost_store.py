"""The store's usage path on embedded chDB and a real nats-server: usage envelopes priced into
`usage` and `cost_states`, once per API message, and the cost views over them."""

from __future__ import annotations

import json
from typing import Any

import pytest
from clickhouse_connect.driver.client import Client

from agentwatch.contract import encode_envelope
from agentwatch.emitter.transcripts import read_transcript
from agentwatch.emitter.usage import Source, reading_envelopes, subagent_source
from agentwatch.store.migrations import apply_migrations
from agentwatch.store.usage import insert_usage, usage_rows
from tests.conftest import expected_tokens, transcript_sessions
from tests.integration.test_store import (
    consumer_state,
    envelopes,
    final_counts,
    publish,
    running_store,
    split_counts,
    wait_until,
)
from tests.services import NatsServer

SESSIONS = transcript_sessions()
TOKENS = (
    "input_tokens",
    "output_tokens",
    "cache_read_tokens",
    "cache_write_5m_tokens",
    "cache_write_1h_tokens",
)


def session_bodies(session: str, main: Any, subagents: list[Any]) -> list[tuple[str, bytes]]:
    """(subject, body) of every usage envelope of one fixture session, as the hook builds them."""
    who = {
        "agent": f"main-{session[:8]}", "team": f"session-{session[:8]}", "parent_agent": "", "agent_id": "",
        "agent_type": "", "session_id": session, "host": "host-1", "cwd": "/proj",
    }  # fmt: skip
    context = {k: who[k] for k in ("team", "session_id", "host", "cwd")}
    sources = [Source(str(main), who)] + [subagent_source(str(p), context, {}) for p in subagents]
    out = []
    for src in sources:
        reading = read_transcript(src.path, subagent_id=src.subagent_id)
        out += [(s, encode_envelope(e)) for s, e in reading_envelopes(reading, src, 1_700_000_000_000)]
    return out


def all_bodies() -> list[tuple[str, bytes]]:
    return [b for s, main, subs, _ in SESSIONS for b in session_bodies(s, main, subs)]


def rows(client: Client, sql: str) -> list[dict[str, Any]]:
    result = client.query(sql)
    return [dict(zip(result.column_names, r, strict=True)) for r in result.result_rows]


@pytest.fixture
def ch(chdb_database: Client) -> Client:
    apply_migrations(chdb_database)
    return chdb_database


def store_bodies(client: Client, bodies: list[bytes]) -> None:
    found = usage_rows(bodies)
    assert found.bad == []
    insert_usage(client, found)


def assert_fixture_totals(client: Client) -> None:
    got = {r["session_id"]: r for r in rows(client, "SELECT * FROM session_costs")}
    assert set(got) == {s for s, *_ in SESSIONS}
    for session, _main, _subs, expected in SESSIONS:
        row = got[session]
        assert {k: row[k] for k in TOKENS} == expected_tokens(expected), session
        assert row["claude_cost_usd"] == pytest.approx(expected["totalCostUSD"])
        assert row["cost_usd"] == pytest.approx(expected["totalCostUSD"], rel=0.01, abs=1e-9), session
        assert row["unpriced_calls"] == 0
        assert row["agent"] == f"main-{session[:8]}"


# --- the tables and views ----------------------------------------------------------------------


def test_fixture_sessions_priced_equal_claude_codes_totals_even_stored_twice(ch: Client) -> None:
    bodies = [b for _, b in all_bodies()]
    store_bodies(ch, bodies)
    store_bodies(ch, bodies[::-1])  # sent again (import after the hook, a redelivery)
    assert_fixture_totals(ch)
    assert ch.command("SELECT count() FROM usage FINAL") == 45
    assert ch.command("SELECT count() FROM cost_states FINAL") == len(SESSIONS)


def test_agent_costs_give_each_subagent_under_its_parent(ch: Client) -> None:
    store_bodies(ch, [b for _, b in all_bodies()])
    agents = {r["agent"]: r for r in rows(ch, "SELECT * FROM agent_costs")}
    sub = agents["general-purpose-1cd6f8df"]
    lead = agents["main-27e556a2"]
    assert (sub["parent_agent"], sub["agent_id"], sub["agent_type"]) == (
        "main-27e556a2", "a1cd6f8dfd629431a", "general-purpose",
    )  # fmt: skip
    assert lead["subagents_cost_usd"] == pytest.approx(sub["cost_usd"])
    assert lead["cost_with_subagents_usd"] == pytest.approx(0.158532)
    assert agents["researcher"]["parent_agent"] == "main-4ef48e0b", "a teammate under its lead"
    daily = rows(ch, "SELECT sum(api_calls) AS calls, sum(cost_usd) AS cost FROM cost_daily")[0]
    assert daily["calls"] == 45
    assert daily["cost"] == pytest.approx(sum(e["totalCostUSD"] for *_, e in SESSIONS))


def usage_env(**fields: Any) -> bytes:
    env: dict[str, Any] = {
        "v": 1, "id": "01M81ENF08SXA93A9W1HBXVDZT", "timestamp": "2026-11-22T11:01:07.720Z",
        "event": "Usage", "kind": "usage", "agent": "lead", "team": "t", "session_id": "s-1",
        "agent_id": "", "agent_type": "", "parent_agent": "", "host": "h", "model": "claude-opus-5-5",
        "message_id": "msg_1", "request_id": "req_1", "input_tokens": 1000, "output_tokens": 10,
        "cache_read_input_tokens": 0, "cache_creation_input_tokens": 0, "cache_creation_5m_input_tokens": 0,
        "cache_creation_1h_input_tokens": 0, "sidechain": False, "data": {},
    }  # fmt: skip
    env.update(fields)
    return json.dumps(env).encode()


def test_the_largest_usage_of_a_message_is_kept(ch: Client) -> None:
    store_bodies(ch, [usage_env(output_tokens=500)])
    store_bodies(ch, [usage_env(output_tokens=3)])  # a streaming placeholder arriving late
    store_bodies(ch, [usage_env(output_tokens=3, request_id="req_2")])  # another request: its own row
    got = rows(ch, "SELECT request_id, output_tokens FROM usage FINAL ORDER BY request_id")
    assert got == [{"request_id": "req_1", "output_tokens": 500}, {"request_id": "req_2", "output_tokens": 3}]


def test_an_unknown_model_keeps_its_tokens_and_no_cost(ch: Client) -> None:
    store_bodies(ch, [usage_env(model="acme-frontier-9", session_id="s-unknown")])
    store_bodies(ch, [usage_env(model="acme-frontier-9", session_id="s-mixed", message_id="m1"),
                      usage_env(session_id="s-mixed", message_id="m2")])  # fmt: skip
    got = {r["session_id"]: r for r in rows(ch, "SELECT * FROM session_costs")}
    assert got["s-unknown"]["input_tokens"] == 1000
    assert got["s-unknown"]["cost_usd"] is None, "unpriced, never $0"
    assert got["s-unknown"]["unpriced_calls"] == 1
    assert got["s-mixed"]["cost_usd"] == pytest.approx(1000 * 4e-6 + 10 * 20e-6)
    assert got["s-mixed"]["unpriced_calls"] == 1
    assert rows(ch, "SELECT cost_usd, price_model FROM usage FINAL WHERE model = 'acme-frontier-9'")[0] == {
        "cost_usd": None, "price_model": "",
    }  # fmt: skip


def test_one_hour_cache_writes_at_twice_the_input_price_without_a_rate_of_their_own(ch: Client) -> None:
    """claude-2 has no 1-hour cache rate in the price table: $8/M input, so $16/M for those."""
    one_hour = {"cache_creation_input_tokens": 1000, "cache_creation_1h_input_tokens": 1000}
    store_bodies(ch, [usage_env(model="claude-2", output_tokens=0, **one_hour)])
    (row,) = rows(ch, "SELECT cost_usd FROM usage FINAL")
    assert row["cost_usd"] == pytest.approx(1000 * 8e-6 + 1000 * 16e-6)


def test_a_price_table_that_refuses_the_figures_leaves_the_message_unpriced(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from agentwatch.store import usage

    def refuse(*_args: Any) -> None:
        raise ValueError("Invalid usage data")

    monkeypatch.setattr(usage, "price", refuse)
    found = usage_rows([usage_env()])
    assert found.bad == [] and found.usage[0][19:21] == [None, ""]


def test_bodies_that_are_not_usage_envelopes_are_refused_with_the_reason() -> None:
    found = usage_rows([usage_env(kind="tool_call"), usage_env(input_tokens=-1), b"{", usage_env()])
    assert [i for i, _ in found.bad] == [0, 1, 2]
    assert "kind 'tool_call'" in found.bad[0][1] and "input_tokens" in found.bad[1][1]
    assert len(found.usage) == 1


# --- through the store's consumer ----------------------------------------------------------------


async def test_the_store_routes_usage_to_its_tables_and_events_to_theirs(
    nats_server: NatsServer, ch: Client
) -> None:
    events = envelopes(200)
    usage = [(s, f"u{i}", b) for i, (s, b) in enumerate(all_bodies())]
    bad = [("genie.agent.lead.usage", "bad-1", usage_env(kind="tool_call"))]
    await publish(nats_server.url, events + usage + bad)
    n_events, n_msgs = split_counts(events)
    async with running_store(nats_server.url, ch) as writer:
        await wait_until(lambda: writer.stats.stored + writer.stats.messages + writer.stats.usage >= 256)
        await wait_until(lambda: writer.stats.dead_letters >= 1)
    assert final_counts(ch) == (n_events, n_events, n_msgs, 1)
    assert writer.stats.usage == len(usage)
    assert_fixture_totals(ch)
    (dead,) = rows(ch, "SELECT reason FROM dead_letters")
    assert "kind 'tool_call'" in dead["reason"]
    assert (await consumer_state(nats_server.url))[:2] == (0, 0)


async def test_usage_waits_for_clickhouse_and_nothing_is_redelivered(
    nats_server: NatsServer, ch: Client
) -> None:
    import time

    from agentwatch.store.usage import UsageRows

    failing_until = time.monotonic() + 1.5
    calls = {"failed": 0}

    def flaky(client: Client, rows: UsageRows) -> None:
        if time.monotonic() < failing_until:
            calls["failed"] += 1
            raise ConnectionError("Code: 210. DB::NetException: Connection refused (injected)")
        insert_usage(client, rows)

    usage = [(s, f"u{i}", b) for i, (s, b) in enumerate(all_bodies())]
    await publish(nats_server.url, envelopes(50) + usage)
    async with running_store(nats_server.url, ch, insert_usage_rows=flaky, retry_max_seconds=0.5) as writer:
        await wait_until(lambda: writer.stats.usage >= len(usage))
    assert calls["failed"] >= 2 and writer.stats.insert_failures >= 2
    assert_fixture_totals(ch)
    _, ack_pending, redelivered = await consumer_state(nats_server.url)
    assert (ack_pending, redelivered) == (0, 0)
