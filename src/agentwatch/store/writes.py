"""The store's writes: one insert per table and batch, never per row.

Event and message envelopes go in one `raw_insert` each: the bodies exactly as published,
newline-joined, in JSONEachRow, with INSERT_SETTINGS. Nothing is parsed in Python.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Sequence

    from clickhouse_connect.driver.client import Client

EVENTS_TABLE = "events"
MESSAGE_ENVELOPES_TABLE = "message_envelopes"
DEAD_LETTERS_TABLE = "dead_letters"

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
}


def insert_batch(client: Client, events: Sequence[bytes], messages: Sequence[bytes]) -> None:
    """Insert event envelopes into `events` and message envelopes into `message_envelopes`
    (whose materialized view fills `messages`): one raw_insert per non-empty list.

    Bodies are the envelope bytes as published: one compact JSON object each, no newline
    inside. Nothing is added per row: on the store's hot path every byte of Python work per event
    shows in its throughput (the subject is not stored: the contract derives it from event and
    agent).
    """
    if events:
        block = b"\n".join(events)
        client.raw_insert(EVENTS_TABLE, insert_block=block, fmt="JSONEachRow", settings=INSERT_SETTINGS)
    if messages:
        client.raw_insert(
            MESSAGE_ENVELOPES_TABLE,
            insert_block=b"\n".join(messages),
            fmt="JSONEachRow",
            settings=INSERT_SETTINGS,
        )


DEAD_LETTER_COLUMNS: tuple[str, ...] = ("subject", "stream_seq", "deliveries", "reason", "body")
_DEAD_LETTER_TYPES: tuple[str, ...] = ("String", "UInt64", "UInt32", "String", "String")


def insert_dead_letters(client: Client, rows: Sequence[tuple[str, int, int, str, bytes]]) -> None:
    """Keep messages that can never be stored: (subject, stream_seq, deliveries, reason, body)."""
    if not rows:
        return
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


ALERTS_TABLE = "alerts"


def insert_alerts(client: Client, alerts: Sequence[bytes]) -> None:
    """Alert changes as published (JSON, `details` an object): one raw insert, keyed on (id, state)."""
    if alerts:
        client.raw_insert(
            ALERTS_TABLE, insert_block=b"\n".join(alerts), fmt="JSONEachRow", settings=INSERT_SETTINGS
        )
