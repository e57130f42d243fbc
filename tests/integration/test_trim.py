"""Payload weight: the store keeps the head and tail of a payload string over the limit, notes
the cut with the original size, and leaves every other event's data as it came."""

from __future__ import annotations

import orjson
import pytest
from clickhouse_connect.driver.client import Client

from agentwatch.store.migrations import apply_migrations
from agentwatch.store.trim import DEFAULT_FIELD_MAX_BYTES, cut, field_max_bytes, trim_bodies
from agentwatch.store.writes import insert_batch
from tests.integration.test_schema import build, fixture_envelopes, split

# A Read of a binary file: 300 KB of base64 in its response, as Claude Code reports it.
BIG_READ = {
    "session_id": "5e55a000-0000-4000-8000-00000000000b",
    "hook_event_name": "PostToolUse",
    "tool_name": "Read",
    "tool_use_id": "tu_big",
    "tool_input": {"file_path": "/srv/proj/logo.png"},
    "tool_response": {"type": "image", "file": {"base64": "iVBORw0KGgo" * 27_000, "type": "image/png"}},
}


def history() -> list[bytes]:
    events, _ = split(fixture_envelopes() + build(BIG_READ))
    return events


def test_cut_keeps_head_and_tail_and_says_how_much() -> None:
    text = "A" * 1000 + "é" * 1000 + "Z" * 1000
    trimmed = cut(text, 200)
    assert trimmed.startswith("A" * 100) and trimmed.endswith("Z" * 100)
    assert "[agentwatch: 3800 of 4000 bytes cut]" in trimmed
    assert cut("short", 200) == "short"


def test_the_limit_comes_from_the_setting() -> None:
    assert field_max_bytes({}) == DEFAULT_FIELD_MAX_BYTES
    assert field_max_bytes({"AGENTWATCH_STORE_FIELD_MAX_BYTES": "0"}) == 0
    assert field_max_bytes({"AGENTWATCH_STORE_FIELD_MAX_BYTES": "junk"}) == DEFAULT_FIELD_MAX_BYTES
    bodies = [b'{"v":1,"id":"x","data":{"a":"' + b"x" * 5000 + b'"}}']
    assert trim_bodies(bodies, 0) == bodies


def test_large_payloads_are_bounded_and_the_rest_untouched(chdb_database: Client) -> None:
    apply_migrations(chdb_database)
    events = history()
    trimmed = trim_bodies(events, DEFAULT_FIELD_MAX_BYTES)
    changed = [(a, b) for a, b in zip(events, trimmed, strict=True) if a != b]
    assert changed, "the fixtures hold payloads over the limit"
    assert all(a == b for a, b in zip(events, trimmed, strict=True) if len(a) <= DEFAULT_FIELD_MAX_BYTES)
    for before, after in changed:
        env = orjson.loads(after)
        assert env["truncated"] is True and env["id"] == orjson.loads(before)["id"]
        assert b"bytes cut]" in after
    insert_batch(chdb_database, events, [])
    longest = chdb_database.query("SELECT max(length(data)) FROM events").result_rows[0][0]
    assert longest < 8 * DEFAULT_FIELD_MAX_BYTES
    assert max(len(b) for b in events) > 8 * DEFAULT_FIELD_MAX_BYTES


@pytest.mark.parametrize("limit", [1024, 4096])
def test_every_limit_bounds_each_string(limit: int) -> None:
    for body in trim_bodies(history(), limit):
        assert all(len(s.encode()) <= limit + 64 for s in strings_of(orjson.loads(body)["data"]))


def strings_of(value: object) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for item in value.values() for s in strings_of(item)]
    if isinstance(value, list):
        return [s for item in value for s in strings_of(item)]
    return []
