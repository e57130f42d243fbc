"""The store's writes: one insert per table and batch, never per row.

Event and message envelopes go in one `raw_insert` each: the bodies exactly as published,
newline-joined, in JSONEachRow, with INSERT_SETTINGS. Nothing is parsed in Python.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

import orjson

from agentwatch.contract import ENVELOPE_PREFIX
from agentwatch.store.trim import field_max_bytes, trim_bodies

if TYPE_CHECKING:
    from collections.abc import Sequence

    from clickhouse_connect.driver.client import Client

# The event envelopes go into the Null table events_in (016_events_in.sql), whose view writes
# them into `events`: its plain String columns parse at a fraction of the cost of `events`'
# LowCardinality ones.
EVENTS_TABLE = "events_in"
MESSAGE_ENVELOPES_TABLE = "message_envelopes"
DEAD_LETTERS_TABLE = "dead_letters"
_LOOKUP_CHUNK = 5000

# Settings for inserting envelope bodies with FORMAT JSONEachRow.
INSERT_SETTINGS: dict[str, object] = {
    # `data` (an object) lands in its String column as its JSON text, byte for byte.
    "input_format_json_read_objects_as_strings": 1,
    # ... and an array too (an envelope from a future or foreign writer).
    "input_format_json_read_arrays_as_strings": 1,
    # Fields a later contract version adds must not fail the batch.
    "input_format_skip_unknown_fields": 1,
    # Timestamps look like 2026-11-22T03:37:45.193Z.
    "date_time_input_format": "best_effort",
    # A missing field takes its column's DEFAULT (stored_at), a null its type's default.
    "input_format_defaults_for_omitted_fields": 1,
    "input_format_null_as_default": 1,
    # The store batches by itself and acknowledges the bus only once the insert returned: a
    # synchronous insert (not the server's async buffer, on by default in recent ClickHouse).
    "async_insert": 0,
    # The rollups' materialized views (009_rollups.sql) of one block run side by side, not one
    # after the other: the insert returns sooner.
    "parallel_view_processing": 1,
    # No merging of equal keys inside the block at insert time: `new_only` has dropped repeats
    # already, and the views' rows are grouped by their keys.
    "optimize_on_insert": 0,
    # One thread parses a block: splitting it among several cost more CPU in all (about 8% of an
    # insert), and the insert runs beside the event loop, which fetches the next batch meanwhile.
    "input_format_parallel_parsing": 0,
}


# The search indexes of `events` (015_search.sql) are built when its parts merge, not by the
# store's inserts: tokenizing every payload was about 15% of the CPU of an insert, on the ingest's
# hot path. A merge makes the indexes of its new part either way (from the merged rows when its
# sources have none, for a little more than merging theirs): over an insert and its merge it costs
# less in all (docs/benchmarks.md). Until its first merge a fresh part has no search index and a
# search reads it whole, with the same answer. A server older than the setting (ClickHouse 25.9)
# builds them at insert, as before.
DEFER_INDEXES_SETTING = "exclude_materialize_skip_indexes_on_insert"
SEARCH_INDEXES = "idx_text_words,idx_data_words"
_EVENT_INSERT_SETTINGS: dict[str, object] = {**INSERT_SETTINGS, DEFER_INDEXES_SETTING: SEARCH_INDEXES}


def event_insert_settings(client: Client) -> dict[str, object]:
    """INSERT_SETTINGS for the event envelopes: the search indexes left to the merges where the
    server can (DEFER_INDEXES_SETTING)."""
    if DEFER_INDEXES_SETTING in client.server_settings:
        return _EVENT_INSERT_SETTINGS
    return INSERT_SETTINGS


def envelope_id(body: bytes) -> str:
    """The envelope's id: read at its fixed place in a body as the emitter writes it (no parsing
    of the rest), else from the decoded JSON; '' when it has none."""
    if body.startswith(ENVELOPE_PREFIX):
        end = body.find(b'"', len(ENVELOPE_PREFIX))
        raw = body[len(ENVELOPE_PREFIX) : end]
        if end > 0 and b"\\" not in raw:  # an escape (\n, \") is read by the decoder below
            return raw.decode("utf-8", "replace")
    try:
        decoded = orjson.loads(body)
    except orjson.JSONDecodeError:
        return ""
    value = decoded.get("id") if isinstance(decoded, dict) else None
    return value if isinstance(value, str) else ""


def new_only(
    client: Client, events: Sequence[bytes], messages: Sequence[bytes]
) -> tuple[list[bytes], list[bytes]]:
    """The envelopes whose id is not stored yet (`event_ids`), each id once: the rollups'
    materialized views count what is inserted, so a redelivered event must never reach them.

    An id above the largest one stored is new: the emitter's ids are ULIDs, which sort by time,
    so a live batch is mostly above it and asks nothing more. The rest (a redelivery, a spool
    sent late, another host's clock behind) is looked up in event_ids by its primary key, one
    query per batch."""
    ids = [envelope_id(b) for b in events], [envelope_id(b) for b in messages]
    seen = stored_ids(client, [i for group in ids for i in group])
    kept: tuple[list[bytes], list[bytes]] = ([], [])
    for bodies, group_ids, out in ((events, ids[0], kept[0]), (messages, ids[1], kept[1])):
        for body, key in zip(bodies, group_ids, strict=True):
            if key and key in seen:
                continue
            if key:
                seen.add(key)
            out.append(body)
    return kept


def stored_ids(client: Client, ids: Sequence[str]) -> set[str]:
    """Which of `ids` are in `event_ids` already (see new_only): those above the largest stored
    are not, the rest are looked up by the primary key."""
    high = str(client.query("SELECT max(id) FROM event_ids").result_rows[0][0])
    wanted = sorted({i for i in ids if i and i <= high})
    seen = _stored(client, [i for i in wanted if _PLAIN_ID.fullmatch(i)], plain=True)
    seen |= _stored(client, [i for i in wanted if not _PLAIN_ID.fullmatch(i)], plain=False)
    return seen


# An id made of these characters only (every id the emitter makes: a ULID) goes into the query's
# text, comma-joined in one string literal that the engine splits: clickhouse-connect escapes a
# parameter string one character at a time in Python, which was three quarters of the lookup's
# cost (and an Array parameter is quoted and parsed id by id). Nothing in it needs escaping.
_PLAIN_ID = re.compile(r"[0-9A-Za-z_.:-]+")


def _stored(client: Client, ids: list[str], *, plain: bool) -> set[str]:
    """Which of `ids` are in event_ids: plain ones (_PLAIN_ID) asked in the query's text, the
    others (quotes, newlines: no emitter writes one) as an Array parameter. In chunks: over HTTP
    the parameters travel in the URL, which a ClickHouse server caps at 1 MiB."""
    found: set[str] = set()
    for at in range(0, len(ids), _LOOKUP_CHUNK):
        chunk = ids[at : at + _LOOKUP_CHUNK]
        if plain:
            among, params = f"(SELECT arrayJoin(splitByChar(',', '{','.join(chunk)}')))", None
        else:
            among, params = "{ids:Array(String)}", {"ids": chunk}
        sql = f"SELECT id FROM event_ids WHERE id IN {among}"  # noqa: S608 - plain ids only
        rows = client.query(sql, parameters=params).result_rows
        found.update(str(row[0]) for row in rows)
    return found


def insert_batch(client: Client, events: Sequence[bytes], messages: Sequence[bytes]) -> None:
    """insert_new, its counts dropped (the store's default insert)."""
    insert_new(client, events, messages)


def insert_new(client: Client, events: Sequence[bytes], messages: Sequence[bytes]) -> tuple[int, int]:
    """Insert event envelopes into `events_in` (whose materialized view fills `events`) and
    message envelopes into `message_envelopes` (whose view fills `messages`): one raw_insert per
    non-empty list, of the envelopes not stored yet (`new_only`).

    Bodies are the envelope bytes as published: one compact JSON object each, no newline
    inside. Nothing is added per row: on the store's hot path every byte of Python work per event
    shows in its throughput (the subject is not stored: the contract derives it from event and
    agent). Returns how many events and messages were new, and inserted.
    """
    events, messages = new_only(client, events, messages)
    events = trim_bodies(events, field_max_bytes())
    if events:
        block = b"\n".join(events)
        client.raw_insert(
            EVENTS_TABLE, insert_block=block, fmt="JSONEachRow", settings=event_insert_settings(client)
        )
    if messages:
        client.raw_insert(
            MESSAGE_ENVELOPES_TABLE,
            insert_block=b"\n".join(messages),
            fmt="JSONEachRow",
            settings=INSERT_SETTINGS,
        )
    return len(events), len(messages)


# ClickHouse's "(at row N)" in an error reading a block: the row it could not read.
_AT_ROW = re.compile(r"\(at row (\d+)\)")


def refused_rows(client: Client, table: str, bodies: Sequence[bytes]) -> list[tuple[int, str]]:
    """The rows of `bodies` ClickHouse cannot read into `table`'s columns, with its reasons:
    read into a table that keeps nothing (the `null` table function with `table`'s columns, so
    nothing is written and no view runs), resuming after each row it names: one read of the
    batch in all, however many it refuses. Raises what ClickHouse raised when an error names no
    row (the caller bisects instead)."""
    rows = client.query(
        "SELECT name, type FROM system.columns WHERE database = currentDatabase() AND table = {t:String} "
        "ORDER BY position",
        parameters={"t": table},
    ).result_rows
    structure = ", ".join(f"`{name}` {kind}" for name, kind in rows).replace("\\", "\\\\").replace("'", "\\'")
    target = f"FUNCTION null('{structure}')"
    found: list[tuple[int, str]] = []
    start = 0
    while start < len(bodies):
        try:
            client.raw_insert(
                target, insert_block=b"\n".join(bodies[start:]), fmt="JSONEachRow", settings=INSERT_SETTINGS
            )
        except Exception as exc:
            match = _AT_ROW.search(str(exc))
            at = start + int(match.group(1)) - 1 if match else -1
            if not start <= at < len(bodies):
                raise
            found.append((at, str(exc)))
            start = at + 1
            continue
        break
    return found


DEAD_LETTER_COLUMNS: tuple[str, ...] = ("subject", "stream_seq", "deliveries", "reason", "body")
_DEAD_LETTER_TYPES: tuple[str, ...] = ("String", "UInt64", "UInt32", "String", "String")


DeadLetter = tuple[str, int, int, str, bytes]


def insert_dead_letters(client: Client, rows: Sequence[DeadLetter]) -> list[DeadLetter]:
    """Keep messages that can never be stored: (subject, stream_seq, deliveries, reason, body).
    Each message once: a row whose message (its stream sequence, subject and body) is kept
    already, a redelivery of one dead-lettered before its acknowledgement was lost, is left out.
    Returns the rows written."""
    rows = _not_dead_yet(client, rows)
    if not rows:
        return []
    subjects, seqs, deliveries, reasons, bodies = zip(*rows, strict=True)
    client.insert(
        DEAD_LETTERS_TABLE,
        [
            list(subjects),
            list(seqs),
            list(deliveries),
            list(reasons),
            [b.decode("utf-8", "replace") for b in bodies],
        ],
        column_names=list(DEAD_LETTER_COLUMNS),
        column_type_names=list(_DEAD_LETTER_TYPES),
        column_oriented=True,
    )
    return rows


def _not_dead_yet(client: Client, rows: Sequence[DeadLetter]) -> list[DeadLetter]:
    """`rows` without the messages `dead_letters` has already, each message once. A message
    without a stream sequence (0: not from JetStream) is always new."""
    seqs = sorted({row[1] for row in rows if row[1] > 0})
    kept: set[tuple[int, str, str]] = set()
    sql = "SELECT stream_seq, subject, body FROM dead_letters WHERE stream_seq IN {seqs:Array(UInt64)}"
    for at in range(0, len(seqs), _LOOKUP_CHUNK):
        found = client.query(sql, parameters={"seqs": seqs[at : at + _LOOKUP_CHUNK]})
        kept.update((int(seq), str(subject), str(body)) for seq, subject, body in found.result_rows)
    out: list[DeadLetter] = []
    for row in rows:
        key = (row[1], row[0], row[4].decode("utf-8", "replace"))
        if row[1] > 0 and key in kept:
            continue
        kept.add(key)
        out.append(row)
    return out


ALERTS_TABLE = "alerts"


def insert_alerts(client: Client, alerts: Sequence[bytes]) -> None:
    """Alert changes as published (JSON, `details` an object): one raw insert, keyed on (id, state)."""
    if alerts:
        client.raw_insert(
            ALERTS_TABLE, insert_block=b"\n".join(alerts), fmt="JSONEachRow", settings=INSERT_SETTINGS
        )
