"""usage as 018_time_windows.sql orders it (by the hour of a message's first stored copy, then its
key): an older store migrates with every message kept, the copies of a message still meet when
their times fall in two hours, and a window of `usage FINAL` reads its granules only while it
answers what a scan of every row answers."""

from __future__ import annotations

import datetime as dt
import re
from typing import Any

from clickhouse_connect.driver.client import Client

from agentwatch.store.migrations import apply_migrations
from agentwatch.store.usage import USAGE_COLUMNS, UsageRows, insert_usage
from tests.integration.test_rollups import assert_costs_match_raw, bigger, store_before_rollups, usage_batch

# The columns of usage before 021_attribution added the session's person, repo and branch (the last three).
NAMES = [name for name, _ in USAGE_COLUMNS][:-3]
STORED = f"SELECT {', '.join(NAMES)} FROM usage FINAL ORDER BY session_id, message_id, request_id"  # noqa: S608


def rows(client: Client, sql: str) -> list[tuple[Any, ...]]:
    return [tuple(row) for row in client.query(sql).result_rows]


def granules(client: Client, sql: str, index: str) -> tuple[int, int]:
    """(read, of all) granules after the skip index `index`, from the plan of `sql`."""
    plan = "\n".join(r[0] for r in client.query(f"EXPLAIN indexes = 1 {sql}").result_rows)
    found = re.search(rf"Name: {index}\n(?:.*\n)*?\s*Granules: (\d+)/(\d+)", plan)
    assert found, plan
    return int(found.group(1)), int(found.group(2))


def test_an_older_store_migrates_and_the_copies_of_a_message_still_meet(chdb_database: Client) -> None:
    store_before_rollups(chdb_database, before=18)
    whole = usage_batch().usage
    first = [row[: len(NAMES)] for row in whole]
    # What the store before 018 inserted: each message, then larger copies of a third of them,
    # each with the stored copy taken back out of the cost rollups (sign -1).
    signed = [*NAMES, "sign"]
    chdb_database.insert("usage_in", [[*row, 1] for row in first], column_names=signed)
    replaced = [[*row, -1] for row in first[::3]] + [[*row, 1] for row in bigger(first[::3], 5)]
    chdb_database.insert("usage_in", replaced, column_names=signed)
    before = rows(chdb_database, STORED)
    assert len(before) == len(first)

    assert "018_time_windows" in apply_migrations(chdb_database)
    assert rows(chdb_database, STORED) == before
    key = "SELECT sorting_key FROM system.tables WHERE database = currentDatabase() AND name = 'usage'"
    assert chdb_database.command(key) == "hour, session_id, message_id, request_id"
    assert_costs_match_raw(chdb_database)

    # Live: larger copies again, read an hour later (another hour than the stored copies'): each
    # replaces its stored copy, in the table and in the rollups' sums.
    later = bigger(whole[::3], 9)
    for row in later:
        row[3] += dt.timedelta(hours=1)
    insert_usage(chdb_database, UsageRows(later, [], []))
    assert chdb_database.command("SELECT count() FROM usage FINAL") == len(first)
    tokens = "SELECT sum(output_tokens) FROM {table}"
    stored = chdb_database.command(tokens.format(table="usage FINAL"))
    assert stored == sum(r[14] for r in first) + 9 * len(later)
    assert chdb_database.command(tokens.format(table="cost_hourly")) == stored
    got = {(r[0], r[1], r[2]): r for r in rows(chdb_database, STORED)}
    for row in later:
        assert got[(row[0], row[1], row[2])][14] == row[14]  # output_tokens: the latest copy's
    # They share the stored copy's key (its hour): a merge keeps one row of each message.
    chdb_database.command("OPTIMIZE TABLE usage FINAL")
    assert chdb_database.command("SELECT count() FROM usage") == len(first)


def test_a_window_of_usage_final_reads_its_granules_and_answers_like_a_scan(chdb_database: Client) -> None:
    apply_migrations(chdb_database)
    # 300,000 API messages over 30 days, sessions with random ids, and a copy of every tenth
    # message of the last 2 days that was stored before the merge (an unmerged part).
    messages = (
        "INSERT INTO usage_in (session_id, message_id, request_id, timestamp, agent, model, output_tokens, "
        "cost_usd, version) SELECT toString(cityHash64(intDiv(number, 20))), concat('m', toString(number)), "
        "concat('r', toString(number)), "
        "now64(3) - toIntervalSecond(intDiv((300000 - number) * 2592000, 300000)), "
        "concat('agent-', toString(number % 7)), ['opus', 'sonnet'][1 + number % 2], 100, 0.01, {version} "
        "FROM numbers(300000) WHERE {where}"
    )
    chdb_database.command(messages.format(version=1, where="1"))
    chdb_database.command("OPTIMIZE TABLE usage FINAL")
    chdb_database.command(messages.format(version=2, where="number >= 280000 AND number % 10 = 0"))
    window = (
        "SELECT model, count() AS api_calls, sum(output_tokens) AS tokens, round(sum(cost_usd), 6) AS usd "
        "FROM usage FINAL WHERE timestamp >= now64(3) - INTERVAL {interval} GROUP BY model ORDER BY model"
    )
    for interval in ("1 HOUR", "1 DAY"):
        sql = window.format(interval=interval)
        answer = rows(chdb_database, sql)
        assert answer == rows(chdb_database, f"{sql} SETTINGS use_skip_indexes = 0")
        assert sum(r[1] for r in answer) > 100
    read, total = granules(chdb_database, window.format(interval="1 HOUR"), "by_time")
    assert total > 30 and read * 10 < total
    # A session's messages (the session page, the store's lookup) through the bloom filter.
    session = "SELECT count() FROM usage FINAL WHERE session_id = toString(cityHash64(42))"
    assert chdb_database.command(session) == 20
    read, total = granules(chdb_database, session, "by_session")
    assert read * 10 < total
