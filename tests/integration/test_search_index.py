"""The search indexes of `events` (015_search.sql) are built by the merges, not by the store's inserts
(store/writes.py, DEFER_INDEXES_SETTING): a search finds the same events before and after."""

from __future__ import annotations

import json
import time

from clickhouse_connect.driver.client import Client

from agentwatch.contract import encode_envelope, envelopes_from_stdin
from agentwatch.store.migrations import apply_migrations
from agentwatch.store.writes import insert_new
from tests.conftest import CAPTURES, load_fixture_file


def event_bodies() -> list[bytes]:
    """The event envelopes of every captured payload, through the real contract, 10 ms apart."""
    records = load_fixture_file(CAPTURES)
    start = time.time() - 0.01 * len(records) - 1
    bodies: list[bytes] = []
    for i, rec in enumerate(records):
        raw = json.dumps(rec["payload"]).encode()
        for _, env in envelopes_from_stdin(raw, rec.get("hook_env", {}), host="host-1", now=start + 0.01 * i):
            if env["kind"] != "message":
                bodies.append(encode_envelope(env))
    return bodies


def index_bytes(client: Client) -> dict[str, int]:
    """{index of `events`: compressed bytes in its active parts}."""
    sql = (
        "SELECT name, data_compressed_bytes FROM system.data_skipping_indices"
        " WHERE database = currentDatabase() AND table = 'events'"
    )
    return {str(name): int(size) for name, size in client.query(sql).result_rows}


def found(client: Client, word: str) -> list[str]:
    """The ids of the events whose payload or text holds `word`, as `agentwatch search` asks."""
    sql = (
        "SELECT id FROM events"
        " WHERE hasAllTokens(text, {w:String}) OR hasAllTokens(data, {w:String}) ORDER BY id"
    )
    return [str(row[0]) for row in client.query(sql, parameters={"w": word}).result_rows]


def test_the_merge_builds_the_search_indexes_and_a_search_answers_the_same(chdb_database: Client) -> None:
    apply_migrations(chdb_database)
    chdb_database.command("SYSTEM STOP MERGES events")
    bodies = event_bodies()
    half = len(bodies) // 2
    assert insert_new(chdb_database, bodies[:half], []) == (half, 0)
    assert insert_new(chdb_database, bodies[half:], []) == (len(bodies) - half, 0)
    ids = {json.loads(b)["id"]: json.loads(b) for b in bodies}
    tool_use_id = next(env["tool_use_id"] for env in ids.values() if env["tool_use_id"])
    expected = sorted(i for i, env in ids.items() if tool_use_id in json.dumps(env["data"]) + env["text"])
    assert len(expected) >= 2  # the call and its result

    # Two fresh parts: the bloom filters were built by the inserts, the search indexes were not.
    fresh = index_bytes(chdb_database)
    assert fresh["idx_session_id"] > 0 and fresh["idx_tool_use_id"] > 0
    assert fresh["idx_text_words"] == 0 and fresh["idx_data_words"] == 0
    assert found(chdb_database, tool_use_id) == expected

    chdb_database.command("SYSTEM START MERGES events")
    chdb_database.command("OPTIMIZE TABLE events FINAL")
    merged = index_bytes(chdb_database)
    assert merged["idx_text_words"] > 0 and merged["idx_data_words"] > 0
    assert found(chdb_database, tool_use_id) == expected
