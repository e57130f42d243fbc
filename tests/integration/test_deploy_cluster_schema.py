"""deploy/clickhouse/schema-cluster.sql: generated from the migrations, and equal to them on an engine.

- the committed file is what `python -m agentwatch.store.cluster` prints (a migration added without
  regenerating it fails here, naming the command);
- every statement runs ON CLUSTER, the local tables are replicated and the Distributed tables keep
  the sharding keys that make `FINAL` exact;
- applied to an embedded chDB with its engines rewritten to their single-node forms, its tables have
  exactly the columns of the single-node migrations, its views are the single-node views and answer
  alike; and so does the schema generated with a hypothetical later migration (ALTER TABLE ... ADD
  COLUMN, new tables, a replaced view), against those migrations applied on one node.
"""

from __future__ import annotations

import difflib
import json
import re
from collections.abc import Iterator
from typing import Any

import clickhouse_connect
import pytest
from clickhouse_connect.driver.client import Client

from agentwatch.contract import encode_envelope, envelopes_from_stdin
from agentwatch.store.cluster import COMMAND, SHARDING_KEYS, cluster_schema
from agentwatch.store.migrations import apply_migrations, migrations, split_statements
from agentwatch.store.writes import INSERT_SETTINGS
from tests.conftest import CAPTURES, ROOT, load_fixture_file

CLUSTER_SQL = ROOT / "deploy" / "clickhouse" / "schema-cluster.sql"

ENGINE_ARGS = re.compile(r"ENGINE = (Replicated\w*MergeTree)\('([^']*)', '([^']*)'(?:, ([^()]*))?\)")
DISTRIBUTED = re.compile(r"ENGINE = Distributed\(([^;]*)\)\s*$")
ON_CLUSTER = " ON CLUSTER '{cluster}'"


def test_the_committed_file_is_the_generated_one() -> None:
    committed = CLUSTER_SQL.read_text(encoding="utf-8")
    generated = cluster_schema()
    if committed != generated:
        diff = difflib.unified_diff(
            committed.splitlines(keepends=True),
            generated.splitlines(keepends=True),
            "committed",
            "generated",
            n=1,
        )
        pytest.fail(
            f"{CLUSTER_SQL.relative_to(ROOT)} is not what the migrations generate: from the "
            f"repository root, run `{COMMAND}` and commit the result.\n{''.join(diff)[:4000]}",
            pytrace=False,
        )


def cluster_statements(text: str | None = None) -> list[str]:
    return split_statements(CLUSTER_SQL.read_text(encoding="utf-8") if text is None else text)


def single_node(statement: str) -> str:
    """The statement as one node without a cluster runs it: no ON CLUSTER, Replicated* engines
    as their plain forms, a Distributed table as a Merge table over its local table (reads, FINAL
    included, go through it the same way), a drop without SYNC (which a replicated table needs on a
    cluster, and which the embedded engine of the tests never returns from: see chdb_database in
    tests/services.py)."""
    out = statement.replace(ON_CLUSTER, "").removesuffix(" SYNC")

    def plain(match: re.Match[str]) -> str:
        engine = match.group(1).removeprefix("Replicated")
        return f"ENGINE = {engine}({match.group(4)})" if match.group(4) else f"ENGINE = {engine}"

    def merge(match: re.Match[str]) -> str:
        local = match.group(1).split(",")[2].strip().strip("'")
        return f"ENGINE = Merge(currentDatabase(), '^{local}$')"

    return DISTRIBUTED.sub(merge, ENGINE_ARGS.sub(plain, out))


def test_cluster_statements_run_on_the_cluster() -> None:
    statements = cluster_statements()
    assert statements
    for statement in statements:
        head = _body(statement).split("\n")[0]
        assert head.startswith(("CREATE ", "ALTER TABLE ", "DROP TABLE IF EXISTS ", "DROP VIEW IF EXISTS "))
        assert ON_CLUSTER in head, head
        # MODIFY QUERY sets a view's query, MODIFY SETTING a table's setting: applied again, the same.
        idempotent = ("IF NOT EXISTS", "OR REPLACE", "IF EXISTS", "MODIFY QUERY", "MODIFY SETTING")
        assert any(words in head for words in idempotent), head
    replicated = [m for s in statements for m in ENGINE_ARGS.finditer(s)]
    # events, messages, dead letters, usage, cost states, alerts; the rollups; the three otel_* tables;
    # usage_by_hour, the copy of usage in time order (018), created and dropped
    assert len(replicated) == 6 + len(ROLLUP_TABLES) + 3 + 1
    for match in replicated:
        assert match.group(2).startswith("/clickhouse/tables/{shard}/{database}/")
        assert match.group(3) == "{replica}"
    keys = {}
    for statement in statements:
        found = DISTRIBUTED.search(statement)
        if found:
            args = [a.strip() for a in found.group(1).split(",", 3)]
            assert args[:2] == ["'{cluster}'", "'agentwatch'"]
            keys[args[2].strip("'")] = args[3]
    # One id, one shard: the ReplacingMergeTree collapses a redelivered event there.
    assert keys == {
        "events_local": "cityHash64(id)",
        "messages_local": "cityHash64(id)",
        "dead_letters_local": "rand()",
        # One session, one shard: the copies of an API message, and its cost-state records.
        "usage_local": "cityHash64(session_id)",
        "usage_by_hour_local": "cityHash64(session_id)",
        "cost_states_local": "cityHash64(session_id)",
        # One alert, one shard: its firing and resolved rows collapse there.
        "alerts_local": "cityHash64(id)",
        # Rollups: filled per shard by their views and read with -Merge over every shard.
        **{f"{table}_local": SHARDING_KEYS[table] for table in ROLLUP_TABLES},
        # Claude Code's OpenTelemetry records: a record posted twice has one id, one shard.
        **{f"otel_{table}_local": "cityHash64(id)" for table in ("logs", "metrics", "spans")},
    }


ROLLUP_TABLES = (
    "event_ids",
    "tool_hourly",
    "session_rollup",
    "session_seq_rollup",
    "agent_rollup",
    "edge_hourly",
    "cost_hourly",
    "cost_by_agent",
    "cost_by_day",
    "session_cost",
    "call_events",
    "call_rollup",
    "tool_daily",
    "agent_key_rollup",
    "agent_cost_rollup",
    "cost_by_harness",
    "loose_calls",
    "session_totals",
    "scope_hours",
    "cost_by_owner",
    "activity_by_owner",
    "session_owner",
)
# Created by one migration, dropped by a later one (010 drops call_events; 012 the name-keyed ones).
DROPPED = ("call_events", "agent_rollup", "cost_by_agent")


def test_cluster_views_are_the_single_node_views() -> None:
    views = {
        _name(statement): _body(statement)
        for _, _, sql in migrations()
        for statement in split_statements(sql)
        if _is_view(statement)
    }
    # The rollups' materialized views read and write the local tables of their shard.
    cluster = {
        _name(s): _body(s.replace(ON_CLUSTER, "")).replace("_local", "")
        for s in cluster_statements()
        if _is_view(s)
    }
    assert set(views) == {
        "message_envelopes_mv", "tool_calls", "sessions", "agents", "coverage",
        "session_costs", "agent_costs", "cost_daily", "open_alerts", "tool_stats", "team_edges",
        "event_ids_events_mv", "event_ids_messages_mv", "usage_in_mv", "tool_calls_since",
        "agent_key_messages_mv", "hook_runs", "api_requests", "otel_metric_totals", "events_in_mv",
        "session_totals_usage_mv", "session_totals_states_mv", "scope_hours_events_mv",
        "scope_hours_messages_mv", "scope_hours_usage_mv", "agents_since", "session_owner_usage_mv",
        "session_totals_owner_mv",
        *(f"{table}_mv" for table in ROLLUP_TABLES
          if table not in ("event_ids", "session_totals", "scope_hours")),
    }  # fmt: skip
    assert cluster == views


def _is_view(statement: str) -> bool:
    return _body(statement).startswith(("CREATE VIEW", "CREATE OR REPLACE VIEW", "CREATE MATERIALIZED VIEW"))


def _name(statement: str) -> str:
    head = next(line for line in statement.splitlines() if line.startswith("CREATE"))
    return head.replace("OR REPLACE VIEW", "VIEW IF NOT EXISTS").split("IF NOT EXISTS ")[1].split()[0]


def _body(statement: str) -> str:
    """The statement without its comment lines."""
    code = [line for line in statement.splitlines() if not line.lstrip().startswith("--")]
    return "\n".join(code).strip()


@pytest.fixture(scope="module")
def schemas(chdb_engine: tuple[str, Client]) -> Iterator[tuple[Client, Client]]:
    """(single node, cluster rewritten for one node): two databases on the module's engine."""
    dsn, root = chdb_engine
    root.command("CREATE DATABASE deploy_single")
    root.command("CREATE DATABASE deploy_cluster")
    single = clickhouse_connect.get_client(dsn=dsn, database="deploy_single")
    cluster = clickhouse_connect.get_client(dsn=dsn, database="deploy_cluster")
    apply_migrations(single)
    for statement in cluster_statements():
        cluster.command(single_node(statement))
    yield single, cluster
    single.close()
    cluster.close()
    root.command("DROP DATABASE deploy_single")  # not SYNC: see chdb_database in tests/services.py
    root.command("DROP DATABASE deploy_cluster")


COLUMN_SQL = (
    "SELECT name, type, position, default_kind, default_expression, compression_codec "
    "FROM system.columns WHERE database = currentDatabase() AND table = {t:String} ORDER BY position"
)


def columns(client: Client, table: str) -> list[tuple[Any, ...]]:
    rows = [tuple(r) for r in client.query(COLUMN_SQL, parameters={"t": table}).result_rows]
    assert rows, f"no table {table}"
    return rows


@pytest.mark.parametrize(
    ("local", "single"),
    [
        ("events_local", "events"),
        ("messages_local", "messages"),
        ("dead_letters_local", "dead_letters"),
        ("events", "events"),
        ("messages", "messages"),
        ("dead_letters", "dead_letters"),
        ("message_envelopes", "message_envelopes"),
        ("tool_calls", "tool_calls"),
        ("sessions", "sessions"),
        ("agents", "agents"),
    ],
)
def test_cluster_columns_are_the_single_node_columns(
    schemas: tuple[Client, Client], local: str, single: str
) -> None:
    single_client, cluster_client = schemas
    assert columns(cluster_client, local) == columns(single_client, single)


def test_cluster_local_tables_keep_the_keys_and_indexes(schemas: tuple[Client, Client]) -> None:
    single_client, cluster_client = schemas
    sql = (
        "SELECT partition_key, sorting_key, primary_key FROM system.tables "
        "WHERE database = currentDatabase() AND name = {t:String}"
    )
    for local, table in [("events_local", "events"), ("messages_local", "messages")]:
        assert (
            cluster_client.query(sql, parameters={"t": local}).result_rows
            == single_client.query(sql, parameters={"t": table}).result_rows
        )
    idx = (
        "SELECT name, type_full, expr FROM system.data_skipping_indices "
        "WHERE database = currentDatabase() AND table = {t:String} ORDER BY name"
    )
    assert (
        cluster_client.query(idx, parameters={"t": "events_local"}).result_rows
        == single_client.query(idx, parameters={"t": "events"}).result_rows
    )


def test_cluster_views_answer_like_the_single_node(schemas: tuple[Client, Client]) -> None:
    """The same events, inserted twice (a redelivery), give the same view rows on both schemas."""
    single_client, cluster_client = schemas
    bodies = []
    for rec in load_fixture_file(CAPTURES):
        for subject, env in envelopes_from_stdin(json.dumps(rec["payload"]).encode(), {}, host="deploy-test"):
            if not subject.startswith("genie.msg."):
                bodies.append(encode_envelope(env))
    assert len(bodies) > 20
    block = b"\n".join(bodies)
    for _ in range(2):
        single_client.raw_insert("events", insert_block=block, fmt="JSONEachRow", settings=INSERT_SETTINGS)
        cluster_client.raw_insert(
            "events_local", insert_block=block, fmt="JSONEachRow", settings=INSERT_SETTINGS
        )
    for view, order in [
        ("tool_calls", "session_id, tool_use_id"),
        ("sessions", "session_id"),
        # Every column but the one that counts from the moment of the query.
        ("agents EXCEPT (silent_s)", "host, scope, agent"),
    ]:
        what, table = ("* EXCEPT (silent_s)", "agents") if view.startswith("agents") else ("*", view)
        sql = f"SELECT {what} FROM {table} ORDER BY {order}"  # noqa: S608 (constants of this test)
        got = cluster_client.query(sql).result_rows
        assert got
        assert got == single_client.query(sql).result_rows, view
    calls = "SELECT * FROM tool_calls_since(since = '2000-01-01') ORDER BY session_id, tool_use_id"
    got = cluster_client.query(calls).result_rows
    assert got
    assert got == single_client.query(calls).result_rows
    count = "SELECT count() FROM events FINAL"
    assert cluster_client.command(count) == single_client.command(count) == len(bodies)


# --- A later migration: generated, then applied like the single-node one -------------------------

LATER = """-- A hypothetical 099: a column on the events and on the message envelopes, two new tables.
ALTER TABLE events ADD COLUMN region LowCardinality(String) DEFAULT '' AFTER host,
    ADD COLUMN IF NOT EXISTS cost Float64 CODEC(ZSTD(3));

ALTER TABLE message_envelopes ADD COLUMN region String;

CREATE TABLE IF NOT EXISTS calls
(
    ts DateTime64(3, 'UTC'),
    agent LowCardinality(String),
    tokens UInt64
)
ENGINE = MergeTree
PARTITION BY toYYYYMM(ts)
ORDER BY (agent, ts);

CREATE TABLE IF NOT EXISTS costs
(
    id String,
    version UInt32,
    amount Float64 DEFAULT 0
)
ENGINE = ReplacingMergeTree(version)
ORDER BY id;

CREATE OR REPLACE VIEW sessions AS
SELECT session_id, any(region) AS region, sum(cost) AS cost FROM events FINAL GROUP BY session_id;
"""
LATER_KEYS = {**SHARDING_KEYS, "costs": "cityHash64(id)"}


@pytest.fixture
def later_schemas(chdb_engine: tuple[str, Client]) -> Iterator[tuple[Client, Client]]:
    """(the migrations and LATER applied on one node, their generated cluster schema made plain)."""
    dsn, root = chdb_engine
    root.command("CREATE DATABASE later_single")
    root.command("CREATE DATABASE later_cluster")
    single = clickhouse_connect.get_client(dsn=dsn, database="later_single")
    cluster = clickhouse_connect.get_client(dsn=dsn, database="later_cluster")
    source = [*migrations(), (99, "099_later", LATER)]
    for _, _, sql in source:
        for statement in split_statements(sql):
            single.command(statement)
    for statement in cluster_statements(cluster_schema(source, sharding_keys=LATER_KEYS)):
        cluster.command(single_node(statement))
    yield single, cluster
    single.close()
    cluster.close()
    root.command("DROP DATABASE later_single")  # not SYNC: see chdb_database in tests/services.py
    root.command("DROP DATABASE later_cluster")


def test_a_later_migration_generates_the_same_columns(later_schemas: tuple[Client, Client]) -> None:
    single_client, cluster_client = later_schemas
    tables = "SELECT name FROM system.tables WHERE database = currentDatabase() ORDER BY name"
    names = [row[0] for row in single_client.query(tables).result_rows]
    assert {"calls", "costs", "sessions"} <= set(names)
    sharded = (
        "events",
        "messages",
        "dead_letters",
        "usage",
        "cost_states",
        "alerts",
        "calls",
        "costs",
        "otel_logs",
        "otel_metrics",
        "otel_spans",
        *(table for table in ROLLUP_TABLES if table not in DROPPED),
    )
    local = {name + "_local" for name in sharded}
    cluster_names = {row[0] for row in cluster_client.query(tables).result_rows}
    assert cluster_names == set(names) | local
    for name in names:
        if name in ("tool_calls_since", "agents_since"):  # a parameterized view has no columns until called
            continue
        expected = columns(single_client, name)
        assert columns(cluster_client, name) == expected, name
        if name + "_local" in local:
            assert columns(cluster_client, name + "_local") == expected, name
    assert ("region", "LowCardinality(String)", 19) in [r[:3] for r in columns(cluster_client, "events")]
    engines = (
        "SELECT name, engine_full FROM system.tables WHERE database = currentDatabase() "
        "AND name IN ('costs_local', 'calls_local') ORDER BY name"
    )
    got = [(name, engine.split(" ")[0]) for name, engine in cluster_client.query(engines).result_rows]
    assert got == [("calls_local", "MergeTree"), ("costs_local", "ReplacingMergeTree(version)")]
