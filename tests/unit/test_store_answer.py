"""The read side's typed answer of rows a ClickHouse client gave back in the store's process."""

from __future__ import annotations

import datetime as dt

from agentwatch.store import answer


def test_rows_from_a_client_get_aware_utc_times_and_keep_the_rest() -> None:
    naive = dt.datetime(2026, 11, 27, 10, 0, 0, 123000)  # as clickhouse-connect gives DateTime64(3, 'UTC')
    got = answer.from_rows(
        ("id", "timestamp", "cost_usd"),
        ("String", "DateTime64(3, 'UTC')", "Nullable(Float64)"),
        [("e1", naive, None), ("e2", None, 1.5)],
    )
    assert got.dicts() == [
        {"id": "e1", "timestamp": naive.replace(tzinfo=dt.UTC), "cost_usd": None},
        {"id": "e2", "timestamp": None, "cost_usd": 1.5},
    ]
    assert answer.seconds(got.rows[0][1]) == naive.replace(tzinfo=dt.UTC).timestamp()
