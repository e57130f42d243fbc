"""agentwatch.store.cluster: the cluster schema generated from the migrations, as text.

The store's own migrations, a hypothetical later migration (new tables, ALTER TABLE ... ADD
COLUMN, CREATE OR REPLACE VIEW) transformed statement by statement, and every construct the
generator has no rule for refused with the statement named. Applying the result to an engine is
tests/integration/test_deploy_files.py's part.
"""

from __future__ import annotations

import pytest

from agentwatch.store.cluster import (
    COMMAND,
    ON_CLUSTER,
    SHARDING_KEYS,
    ClusterSchemaError,
    cluster_schema,
    main,
)
from agentwatch.store.migrations import migrations, split_statements

# A migration that might come next: a column on a sharded table and on the Null table, a plain
# MergeTree table, a ReplacingMergeTree table (which needs a sharding key), a view replaced.
EXTRA = """-- 005: the model of each event.
ALTER TABLE events ADD COLUMN model LowCardinality(String) DEFAULT '' AFTER host, -- a, b
    ADD COLUMN IF NOT EXISTS cost Float64;

ALTER TABLE message_envelopes ADD COLUMN model String;

CREATE TABLE IF NOT EXISTS calls
(
    ts DateTime,
    tokens UInt64
)
ENGINE = MergeTree
ORDER BY ts;

CREATE TABLE IF NOT EXISTS costs
(
    id String,
    version UInt32,
    amount Float64
)
ENGINE = ReplacingMergeTree(version)
ORDER BY id;

CREATE OR REPLACE VIEW tool_calls AS
SELECT tool_use_id FROM events FINAL;
"""

EXPECTED = (
    "-- 099_model ".ljust(100, "-")
    + """
-- 005: the model of each event.
ALTER TABLE events_local ON CLUSTER '{cluster}' ADD COLUMN IF NOT EXISTS model LowCardinality(String) \
DEFAULT '' AFTER host, -- a, b
    ADD COLUMN IF NOT EXISTS cost Float64;

-- The same column on the Distributed events, whose columns are events_local's.
ALTER TABLE events ON CLUSTER '{cluster}' ADD COLUMN IF NOT EXISTS model LowCardinality(String) \
DEFAULT '' AFTER host, -- a, b
    ADD COLUMN IF NOT EXISTS cost Float64;

ALTER TABLE message_envelopes ON CLUSTER '{cluster}' ADD COLUMN IF NOT EXISTS model String;

CREATE TABLE IF NOT EXISTS calls_local ON CLUSTER '{cluster}'
(
    ts DateTime,
    tokens UInt64
)
ENGINE = ReplicatedMergeTree('/clickhouse/tables/{shard}/{database}/calls', '{replica}')
ORDER BY ts;

-- calls: Distributed over calls_local, under the single-node name.
-- By rand(): nothing to collapse, so any shard will do.
CREATE TABLE IF NOT EXISTS calls ON CLUSTER '{cluster}' AS calls_local
ENGINE = Distributed('{cluster}', 'agentwatch', 'calls_local', rand());

CREATE TABLE IF NOT EXISTS costs_local ON CLUSTER '{cluster}'
(
    id String,
    version UInt32,
    amount Float64
)
ENGINE = ReplicatedReplacingMergeTree('/clickhouse/tables/{shard}/{database}/costs', '{replica}', version)
ORDER BY id;

-- costs: Distributed over costs_local, under the single-node name.
-- By cityHash64(id): the rows a ReplacingMergeTree collapses meet on one shard.
CREATE TABLE IF NOT EXISTS costs ON CLUSTER '{cluster}' AS costs_local
ENGINE = Distributed('{cluster}', 'agentwatch', 'costs_local', cityHash64(id));

CREATE OR REPLACE VIEW tool_calls ON CLUSTER '{cluster}' AS
SELECT tool_use_id FROM events FINAL;
"""
)

KEYS = {**SHARDING_KEYS, "costs": "cityHash64(id)"}


def with_extra(sql: str, name: str = "099_model") -> list[tuple[int, str, str]]:
    return [*migrations(), (int(name[:3]), name, sql)]


def heads(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.startswith(("CREATE ", "ALTER ", "DROP "))]


# 005_coverage: each column on the local table and on the Distributed one.
COVERAGE_COLUMNS = (
    "seq UInt64 DEFAULT 0",
    "spool_bytes UInt64 DEFAULT 0",
    "prompt_id String DEFAULT JSONExtractString(data, 'prompt_id')",
    "duration_ms Nullable(Int64) DEFAULT JSONExtract(data, 'duration_ms', 'Nullable(Int64)')",
    "permission_mode LowCardinality(String) DEFAULT JSONExtractString(data, 'permission_mode')",
    "model LowCardinality(String) DEFAULT if(JSONHas(data, 'model'), JSONExtractString(data, 'model'), "
    "JSONExtractString(data, 'to_model'))",
)


# The views 009_rollups.sql (re)defines, in its order.
LATER_VIEWS = (
    "OR REPLACE VIEW sessions", "OR REPLACE VIEW agents", "VIEW IF NOT EXISTS tool_stats",
    "VIEW IF NOT EXISTS team_edges", "OR REPLACE VIEW session_costs", "OR REPLACE VIEW agent_costs",
    "OR REPLACE VIEW cost_daily",
)  # fmt: skip
OTEL_TABLES = ("otel_logs", "otel_metrics", "otel_spans")
OTEL_VIEWS = ("hook_runs", "api_requests", "otel_metric_totals")
OWNER = ("person", "repo", "branch")
LOW = "LowCardinality(String)"
ROLLUPS = ("tool_hourly", "session_rollup", "session_seq_rollup", "agent_rollup", "edge_hourly")


# 018: call_rollup's time of the call, never NULL (its type and expression).
AT = (
    "SimpleAggregateFunction(min, DateTime64(3, 'UTC')) "
    "MATERIALIZED coalesce(started, hour + toIntervalMillisecond(3599999))"
)


def test_the_store_migrations_become_local_distributed_null_and_views() -> None:
    assert heads(cluster_schema()) == [
        f"CREATE TABLE IF NOT EXISTS events_local {ON_CLUSTER}",
        f"CREATE TABLE IF NOT EXISTS events {ON_CLUSTER} AS events_local",
        f"CREATE TABLE IF NOT EXISTS messages_local {ON_CLUSTER}",
        f"CREATE TABLE IF NOT EXISTS messages {ON_CLUSTER} AS messages_local",
        f"CREATE TABLE IF NOT EXISTS message_envelopes {ON_CLUSTER}",
        f"CREATE MATERIALIZED VIEW IF NOT EXISTS message_envelopes_mv {ON_CLUSTER} TO messages AS",
        f"CREATE TABLE IF NOT EXISTS dead_letters_local {ON_CLUSTER}",
        f"CREATE TABLE IF NOT EXISTS dead_letters {ON_CLUSTER} AS dead_letters_local",
        f"CREATE VIEW IF NOT EXISTS tool_calls {ON_CLUSTER} AS",
        f"CREATE VIEW IF NOT EXISTS sessions {ON_CLUSTER} AS",
        f"CREATE VIEW IF NOT EXISTS agents {ON_CLUSTER} AS",
        *(
            f"ALTER TABLE {table} {ON_CLUSTER} ADD COLUMN IF NOT EXISTS {column};"
            for column in COVERAGE_COLUMNS
            for table in ("events_local", "events")
        ),
        f"CREATE VIEW IF NOT EXISTS coverage {ON_CLUSTER} AS",
        # 006_usage: both tables sharded by session, so the copies of one API message meet.
        f"CREATE TABLE IF NOT EXISTS usage_local {ON_CLUSTER}",
        f"CREATE TABLE IF NOT EXISTS usage {ON_CLUSTER} AS usage_local",
        f"CREATE TABLE IF NOT EXISTS cost_states_local {ON_CLUSTER}",
        f"CREATE TABLE IF NOT EXISTS cost_states {ON_CLUSTER} AS cost_states_local",
        f"CREATE VIEW IF NOT EXISTS session_costs {ON_CLUSTER} AS",
        f"CREATE VIEW IF NOT EXISTS agent_costs {ON_CLUSTER} AS",
        f"CREATE VIEW IF NOT EXISTS cost_daily {ON_CLUSTER} AS",
        # 008_alerts: the rows of one alert (firing, resolved) meet on the shard of its id.
        f"CREATE TABLE IF NOT EXISTS alerts_local {ON_CLUSTER}",
        f"CREATE TABLE IF NOT EXISTS alerts {ON_CLUSTER} AS alerts_local",
        f"CREATE VIEW IF NOT EXISTS open_alerts {ON_CLUSTER} AS",
        # 009_rollups: each rollup sharded, its materialized view per shard over the local tables;
        # the backfill's INSERTs are left out.
        *(
            line
            for table in ("event_ids",)
            for line in (
                f"CREATE TABLE IF NOT EXISTS {table}_local {ON_CLUSTER}",
                f"CREATE TABLE IF NOT EXISTS {table} {ON_CLUSTER} AS {table}_local",
            )
        ),
        f"CREATE MATERIALIZED VIEW IF NOT EXISTS event_ids_events_mv {ON_CLUSTER} TO event_ids_local AS",
        f"CREATE MATERIALIZED VIEW IF NOT EXISTS event_ids_messages_mv {ON_CLUSTER} TO event_ids AS",
        *(
            line
            for table in ROLLUPS
            for line in (
                f"CREATE TABLE IF NOT EXISTS {table}_local {ON_CLUSTER}",
                f"CREATE TABLE IF NOT EXISTS {table} {ON_CLUSTER} AS {table}_local",
                f"CREATE MATERIALIZED VIEW IF NOT EXISTS {table}_mv {ON_CLUSTER} TO {table}_local AS",
            )
        ),
        # The cost rollups: filled from the Null usage_in on every node, through their
        # Distributed tables (sharded by their keys), like usage itself.
        f"CREATE TABLE IF NOT EXISTS usage_in {ON_CLUSTER}",
        f"CREATE MATERIALIZED VIEW IF NOT EXISTS usage_in_mv {ON_CLUSTER} TO usage AS",
        *(
            line
            for table in ("cost_hourly", "cost_by_agent", "cost_by_day", "session_cost")
            for line in (
                f"CREATE TABLE IF NOT EXISTS {table}_local {ON_CLUSTER}",
                f"CREATE TABLE IF NOT EXISTS {table} {ON_CLUSTER} AS {table}_local",
                f"CREATE MATERIALIZED VIEW IF NOT EXISTS {table}_mv {ON_CLUSTER} TO {table} AS",
            )
        ),
        *(f"CREATE {view} {ON_CLUSTER} AS" for view in LATER_VIEWS),
        # call_events: a narrow copy of the tool-call events, per shard like the rollups.
        f"CREATE TABLE IF NOT EXISTS call_events_local {ON_CLUSTER}",
        f"CREATE TABLE IF NOT EXISTS call_events {ON_CLUSTER} AS call_events_local",
        f"CREATE MATERIALIZED VIEW IF NOT EXISTS call_events_mv {ON_CLUSTER} TO call_events_local AS",
        f"CREATE VIEW IF NOT EXISTS tool_calls_since {ON_CLUSTER} AS",
        # 010: call_rollup replaces call_events; a dropped table goes with its local table.
        f"CREATE TABLE IF NOT EXISTS call_rollup_local {ON_CLUSTER}",
        f"CREATE TABLE IF NOT EXISTS call_rollup {ON_CLUSTER} AS call_rollup_local",
        f"CREATE MATERIALIZED VIEW IF NOT EXISTS call_rollup_mv {ON_CLUSTER} TO call_rollup_local AS",
        f"CREATE OR REPLACE VIEW tool_calls_since {ON_CLUSTER} AS",
        f"DROP VIEW IF EXISTS call_events_mv {ON_CLUSTER};",
        f"DROP TABLE IF EXISTS call_events {ON_CLUSTER} SYNC;",
        f"DROP TABLE IF EXISTS call_events_local {ON_CLUSTER} SYNC;",
        # 011: tool_hourly folded into days, by a view over tool_hourly's local table per shard.
        f"CREATE TABLE IF NOT EXISTS tool_daily_local {ON_CLUSTER}",
        f"CREATE TABLE IF NOT EXISTS tool_daily {ON_CLUSTER} AS tool_daily_local",
        f"CREATE MATERIALIZED VIEW IF NOT EXISTS tool_daily_mv {ON_CLUSTER} TO tool_daily_local AS",
        f"CREATE OR REPLACE VIEW tool_stats {ON_CLUSTER} AS",
        # 012: agents keyed by host, scope and name; the events' rollup per shard, the messages' and
        # the usage's through the Distributed tables; the name-keyed rollups go.
        f"CREATE TABLE IF NOT EXISTS agent_key_rollup_local {ON_CLUSTER}",
        f"CREATE TABLE IF NOT EXISTS agent_key_rollup {ON_CLUSTER} AS agent_key_rollup_local",
        f"CREATE MATERIALIZED VIEW IF NOT EXISTS agent_key_rollup_mv {ON_CLUSTER} "
        "TO agent_key_rollup_local AS",
        f"CREATE MATERIALIZED VIEW IF NOT EXISTS agent_key_messages_mv {ON_CLUSTER} TO agent_key_rollup AS",
        f"CREATE TABLE IF NOT EXISTS agent_cost_rollup_local {ON_CLUSTER}",
        f"CREATE TABLE IF NOT EXISTS agent_cost_rollup {ON_CLUSTER} AS agent_cost_rollup_local",
        f"CREATE MATERIALIZED VIEW IF NOT EXISTS agent_cost_rollup_mv {ON_CLUSTER} TO agent_cost_rollup AS",
        f"DROP VIEW IF EXISTS agent_rollup_mv {ON_CLUSTER};",
        f"DROP TABLE IF EXISTS agent_rollup {ON_CLUSTER} SYNC;",
        f"DROP TABLE IF EXISTS agent_rollup_local {ON_CLUSTER} SYNC;",
        f"DROP VIEW IF EXISTS cost_by_agent_mv {ON_CLUSTER};",
        f"DROP TABLE IF EXISTS cost_by_agent {ON_CLUSTER} SYNC;",
        f"DROP TABLE IF EXISTS cost_by_agent_local {ON_CLUSTER} SYNC;",
        f"CREATE OR REPLACE VIEW agents {ON_CLUSTER} AS",
        f"CREATE OR REPLACE VIEW agent_costs {ON_CLUSTER} AS",
        # 013: the harness on events and usage; usage_in's view passes it on; a cost rollup per
        # harness, filled from usage_in like the others.
        *(
            f"ALTER TABLE {table} {ON_CLUSTER} ADD COLUMN IF NOT EXISTS {column}"
            for column in (
                "harness LowCardinality(String) DEFAULT 'claude-code';",
                "harness_event LowCardinality(String) DEFAULT event;",
            )
            for table in ("events_local", "events")
        ),
        *(
            f"ALTER TABLE {table} {ON_CLUSTER} ADD COLUMN IF NOT EXISTS {column}"
            for tables in (("usage_local", "usage"), ("usage_in",))
            for column in (
                "harness LowCardinality(String) DEFAULT 'claude-code';",
                "reasoning_tokens UInt64 DEFAULT 0;",
            )
            for table in tables
        ),
        f"ALTER TABLE usage_in_mv {ON_CLUSTER} MODIFY QUERY",
        f"CREATE TABLE IF NOT EXISTS cost_by_harness_local {ON_CLUSTER}",
        f"CREATE TABLE IF NOT EXISTS cost_by_harness {ON_CLUSTER} AS cost_by_harness_local",
        f"CREATE MATERIALIZED VIEW IF NOT EXISTS cost_by_harness_mv {ON_CLUSTER} TO cost_by_harness AS",
        # 014: Claude Code's OpenTelemetry records, sharded by their ids, and the views over them.
        *(
            line
            for table in OTEL_TABLES
            for line in (
                f"CREATE TABLE IF NOT EXISTS {table}_local {ON_CLUSTER}",
                f"CREATE TABLE IF NOT EXISTS {table} {ON_CLUSTER} AS {table}_local",
            )
        ),
        *(f"CREATE VIEW IF NOT EXISTS {view} {ON_CLUSTER} AS" for view in OTEL_VIEWS),
        # 015: the search's text indexes, on the tables that hold the rows (not the Distributed);
        # building them for the rows stored before is left out, like a backfill.
        f"ALTER TABLE events_local {ON_CLUSTER} ADD INDEX IF NOT EXISTS idx_text_words text TYPE "
        "text(tokenizer = splitByNonAlpha, preprocessor = lower(text));",
        f"ALTER TABLE events_local {ON_CLUSTER} ADD INDEX IF NOT EXISTS idx_data_words data TYPE "
        "text(tokenizer = splitByNonAlpha, preprocessor = lower(data));",
        # 016: the store's inserts land in the Null events_in on the node it talks to; its view
        # writes them through the Distributed events.
        f"CREATE TABLE IF NOT EXISTS events_in {ON_CLUSTER}",
        f"CREATE MATERIALIZED VIEW IF NOT EXISTS events_in_mv {ON_CLUSTER} TO events AS",
        # 017: call_rollup's merge setting and projections on the local table (building them for
        # the rows stored before is left out, like a backfill); loose_calls sharded like
        # call_rollup and rolled up per shard; tool_calls replaced.
        f"ALTER TABLE call_rollup_local {ON_CLUSTER} MODIFY SETTING "
        "deduplicate_merge_projection_mode = 'rebuild';",
        f"ALTER TABLE call_rollup_local {ON_CLUSTER} ADD PROJECTION IF NOT EXISTS by_started "
        "(SELECT _part_offset ORDER BY started);",
        f"ALTER TABLE call_rollup_local {ON_CLUSTER} ADD PROJECTION IF NOT EXISTS by_wholeness "
        "(SELECT call, called, outcome ORDER BY called, outcome);",
        f"CREATE TABLE IF NOT EXISTS loose_calls_local {ON_CLUSTER}",
        f"CREATE TABLE IF NOT EXISTS loose_calls {ON_CLUSTER} AS loose_calls_local",
        f"CREATE MATERIALIZED VIEW IF NOT EXISTS loose_calls_mv {ON_CLUSTER} TO loose_calls_local AS",
        f"CREATE OR REPLACE VIEW tool_calls {ON_CLUSTER} AS",
        # 018: usage's new column on both tables, usage_in's and its view's; the copy of usage in
        # time order created and dropped (its backfill and the exchange are left out).
        f"ALTER TABLE usage_local {ON_CLUSTER} ADD COLUMN IF NOT EXISTS hour DateTime('UTC') "
        "DEFAULT toStartOfHour(timestamp);",
        f"ALTER TABLE usage {ON_CLUSTER} ADD COLUMN IF NOT EXISTS hour DateTime('UTC') "
        "DEFAULT toStartOfHour(timestamp);",
        f"ALTER TABLE usage_in {ON_CLUSTER} ADD COLUMN IF NOT EXISTS hour DateTime('UTC') "
        "DEFAULT toStartOfHour(timestamp);",
        f"ALTER TABLE usage_in_mv {ON_CLUSTER} MODIFY QUERY",
        f"CREATE TABLE IF NOT EXISTS usage_by_hour_local {ON_CLUSTER}",
        f"CREATE TABLE IF NOT EXISTS usage_by_hour {ON_CLUSTER} AS usage_by_hour_local",
        f"DROP TABLE IF EXISTS usage_by_hour {ON_CLUSTER} SYNC;",
        f"DROP TABLE IF EXISTS usage_by_hour_local {ON_CLUSTER} SYNC;",
        # and call_rollup's `at` on both tables, its index on the local one; tool_calls replaced.
        f"ALTER TABLE call_rollup_local {ON_CLUSTER} ADD COLUMN IF NOT EXISTS at {AT};",
        f"ALTER TABLE call_rollup {ON_CLUSTER} ADD COLUMN IF NOT EXISTS at {AT};",
        f"ALTER TABLE call_rollup_local {ON_CLUSTER} ADD INDEX IF NOT EXISTS by_at at TYPE minmax "
        "GRANULARITY 1;",
        f"CREATE OR REPLACE VIEW tool_calls {ON_CLUSTER} AS",
        # 019: session_totals sharded by session; fed by usage_in (Null: the same view on every
        # node, into the Distributed table) and by cost_states (per shard, into the local table).
        f"CREATE TABLE IF NOT EXISTS session_totals_local {ON_CLUSTER}",
        f"CREATE TABLE IF NOT EXISTS session_totals {ON_CLUSTER} AS session_totals_local",
        f"CREATE MATERIALIZED VIEW IF NOT EXISTS session_totals_usage_mv {ON_CLUSTER} TO session_totals AS",
        f"CREATE MATERIALIZED VIEW IF NOT EXISTS session_totals_states_mv {ON_CLUSTER} "
        "TO session_totals_local AS",
        f"CREATE OR REPLACE VIEW session_costs {ON_CLUSTER} AS",
        # 020: scope_hours sharded by scope; fed by events (per shard, into the local table) and by
        # message_envelopes and usage_in (Null: into the Distributed table); its backfill left out;
        # agents_since.
        f"CREATE TABLE IF NOT EXISTS scope_hours_local {ON_CLUSTER}",
        f"CREATE TABLE IF NOT EXISTS scope_hours {ON_CLUSTER} AS scope_hours_local",
        f"CREATE MATERIALIZED VIEW IF NOT EXISTS scope_hours_events_mv {ON_CLUSTER} TO scope_hours_local AS",
        f"CREATE MATERIALIZED VIEW IF NOT EXISTS scope_hours_messages_mv {ON_CLUSTER} TO scope_hours AS",
        f"CREATE MATERIALIZED VIEW IF NOT EXISTS scope_hours_usage_mv {ON_CLUSTER} TO scope_hours AS",
        f"CREATE OR REPLACE VIEW agents_since {ON_CLUSTER} AS",
        # 021: person, repo and branch on events, events_in, usage and usage_in; the two views
        # that fill events and usage pass them on; the two rollups by person, repo and branch.
        *(
            f"ALTER TABLE {t} {ON_CLUSTER} ADD COLUMN IF NOT EXISTS {c} LowCardinality(String) DEFAULT '';"
            for c in ("person", "repo", "branch")
            for t in ("events_local", "events")
        ),
        *(
            f"ALTER TABLE events_in {ON_CLUSTER} ADD COLUMN IF NOT EXISTS {c} String DEFAULT '';"
            for c in OWNER
        ),
        *(
            f"ALTER TABLE {t} {ON_CLUSTER} ADD COLUMN IF NOT EXISTS {c} LowCardinality(String) DEFAULT '';"
            for c in OWNER
            for t in ("usage_local", "usage")
        ),
        *(f"ALTER TABLE usage_in {ON_CLUSTER} ADD COLUMN IF NOT EXISTS {c} {LOW} DEFAULT '';" for c in OWNER),
        f"ALTER TABLE events_in_mv {ON_CLUSTER} MODIFY QUERY",
        f"ALTER TABLE usage_in_mv {ON_CLUSTER} MODIFY QUERY",
        f"CREATE TABLE IF NOT EXISTS cost_by_owner_local {ON_CLUSTER}",
        f"CREATE TABLE IF NOT EXISTS cost_by_owner {ON_CLUSTER} AS cost_by_owner_local",
        f"CREATE MATERIALIZED VIEW IF NOT EXISTS cost_by_owner_mv {ON_CLUSTER} TO cost_by_owner AS",
        f"CREATE TABLE IF NOT EXISTS activity_by_owner_local {ON_CLUSTER}",
        f"CREATE TABLE IF NOT EXISTS activity_by_owner {ON_CLUSTER} AS activity_by_owner_local",
        f"CREATE MATERIALIZED VIEW IF NOT EXISTS activity_by_owner_mv {ON_CLUSTER} "
        "TO activity_by_owner_local AS",
        # and the sessions' owner: session_owner, from events (per shard) and usage_in (through
        # the Distributed table), shown by session_costs and sessions.
        f"CREATE TABLE IF NOT EXISTS session_owner_local {ON_CLUSTER}",
        f"CREATE TABLE IF NOT EXISTS session_owner {ON_CLUSTER} AS session_owner_local",
        f"CREATE MATERIALIZED VIEW IF NOT EXISTS session_owner_mv {ON_CLUSTER} TO session_owner_local AS",
        f"CREATE MATERIALIZED VIEW IF NOT EXISTS session_owner_usage_mv {ON_CLUSTER} TO session_owner AS",
        f"CREATE OR REPLACE VIEW session_costs {ON_CLUSTER} AS",
        f"CREATE OR REPLACE VIEW sessions {ON_CLUSTER} AS",
        # 022: tool_calls and tool_calls_since, their outcome names generated from agents.py.
        f"CREATE OR REPLACE VIEW tool_calls {ON_CLUSTER} AS",
        f"CREATE OR REPLACE VIEW tool_calls_since {ON_CLUSTER} AS",
        # 023_invalid_input: the agent rollup's view again, without invalid hook input
        f"DROP VIEW IF EXISTS agent_key_rollup_mv {ON_CLUSTER};",
        f"CREATE MATERIALIZED VIEW IF NOT EXISTS agent_key_rollup_mv {ON_CLUSTER} "
        "TO agent_key_rollup_local AS",
        # 024_hook_time: hook_ms on events (local and Distributed) and events_in, its view's query
        *(
            f"ALTER TABLE {t} {ON_CLUSTER} ADD COLUMN IF NOT EXISTS hook_ms Float32 DEFAULT 0;"
            for t in ("events_local", "events", "events_in")
        ),
        f"ALTER TABLE events_in_mv {ON_CLUSTER} MODIFY QUERY",
        # 025_spool_by_arrival: coverage again, its spool_bytes the last stored
        f"CREATE OR REPLACE VIEW coverage {ON_CLUSTER} AS",
        # 026_flat_agents: both agents views in two layers
        f"CREATE OR REPLACE VIEW agents {ON_CLUSTER} AS",
        f"CREATE OR REPLACE VIEW agents_since {ON_CLUSTER} AS",
        # 027_session_owner_in_totals: session_totals' owner (local and Distributed), its view from
        # events, the usage view's query, session_costs without its join
        *(
            f"ALTER TABLE {t} {ON_CLUSTER} ADD COLUMN IF NOT EXISTS owner SimpleAggregateFunction(max, "
            "Tuple(DateTime64(3, 'UTC'), String, String, String));"
            for t in ("session_totals_local", "session_totals")
        ),
        f"CREATE MATERIALIZED VIEW IF NOT EXISTS session_totals_owner_mv {ON_CLUSTER} TO session_totals AS",
        f"ALTER TABLE session_totals_usage_mv {ON_CLUSTER} MODIFY QUERY",
        f"CREATE OR REPLACE VIEW session_costs {ON_CLUSTER} AS",
        # 028_agents_since_planned_less: agents_since, its scopes asked more simply
        f"CREATE OR REPLACE VIEW agents_since {ON_CLUSTER} AS",
    ]


def test_the_header_says_generated_and_how_to_regenerate() -> None:
    lines = cluster_schema().splitlines()
    assert lines[0].startswith("-- GENERATED from src/agentwatch/store/schema/*.sql")
    assert f"--   {COMMAND}" in lines[:4]
    assert COMMAND == "python -m agentwatch.store.cluster > deploy/clickhouse/schema-cluster.sql"


def test_the_output_splits_like_a_migration() -> None:
    """One statement per generated CREATE/ALTER, every one ending with `;` at the end of a line."""
    text = cluster_schema(with_extra(EXTRA), sharding_keys=KEYS)
    statements = split_statements(text)
    assert (
        len(statements)
        == len(heads(text))
        == 11
        + 2 * len(COVERAGE_COLUMNS)
        + 1
        + 7
        + 3
        + 4
        + 3 * len(ROLLUPS)
        + 2
        + 12
        + 7
        + 4
        + 8
        + 4
        + 3
        + 4
        + 15
        + 14
        + 2 * len(OTEL_TABLES)
        + len(OTEL_VIEWS)
        + 2  # 016_events_in: the Null table and its view
        + 2  # 015_search: two indexes, on events_local
        + 7  # 017_history_windows: a setting, two projections, loose_calls (two tables, a view), tool_calls
        + 8  # 018_time_windows: three columns, a view's query, the copy of usage created and dropped
        + 4  # and call_rollup's column (on two tables), its index, tool_calls
        + 5  # 019_session_totals: session_totals (local and Distributed), its two views, session_costs
        + 6  # 020_live_window: scope_hours (local and Distributed), its three views, agents_since
        + 26  # 021_attribution: 18 columns, two views' queries, two rollups (two tables and a view each)
        + 6  # and the sessions' owner: session_owner (two tables, two views), sessions, session_costs
        + 2  # 022_call_outcomes: tool_calls, tool_calls_since
        + 2  # 023_invalid_input: the agent rollup's view dropped and made again
        + 4  # 024_hook_time: three columns, a view's query
        + 1  # 025_spool_by_arrival: coverage
        + 2  # 026_flat_agents: agents, agents_since
        + 5  # 027_session_owner_in_totals: a column on two tables, a view, a view's query, session_costs
        + 1  # 028_agents_since_planned_less: agents_since
    )
    assert all(ON_CLUSTER in s for s in statements)


def test_a_later_migration_is_transformed_statement_by_statement() -> None:
    text = cluster_schema(with_extra(EXTRA), sharding_keys=KEYS)
    assert text[text.index("-- 099_model ") :] == EXPECTED
    assert "--   costs                     Distributed over costs_local, sharded by cityHash64(id)" in text
    assert "(001_events to 099_model)" in text


def test_the_database_names_the_distributed_tables_and_the_command() -> None:
    text = cluster_schema(database="observability")
    assert "ENGINE = Distributed('{cluster}', 'observability', 'events_local', cityHash64(id))" in text
    assert "--database observability > deploy/clickhouse/schema-cluster.sql" in text
    assert "'agentwatch'" not in text


def test_main_prints_the_schema(capsys: pytest.CaptureFixture[str]) -> None:
    assert main([]) == 0
    assert capsys.readouterr().out == cluster_schema()


def test_main_reports_a_refusal_on_stderr(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--database", "a-b"]) == 1
    captured = capsys.readouterr()
    assert captured.out == ""
    assert "database name 'a-b'" in captured.err


@pytest.mark.parametrize(
    ("sql", "reason"),
    [
        ("DROP TABLE events;", "a drop the generator knows is `DROP TABLE|VIEW IF EXISTS name`"),
        ("DROP TABLE IF EXISTS nothing;", "nothing is not a table created by an earlier statement"),
        ("DROP VIEW IF EXISTS events;", "events is not a view created by an earlier statement"),
        ("DELETE FROM events WHERE id = 'x';", "no rule for this kind of statement"),
        ("CREATE TABLE IF NOT EXISTS k (a UInt8) ENGINE = Memory;", "no rule for ENGINE = Memory"),
        ("CREATE TABLE k (a UInt8) ENGINE = MergeTree ORDER BY a;", "CREATE TABLE IF NOT EXISTS name"),
        ("CREATE TABLE IF NOT EXISTS k AS events;", "CREATE TABLE IF NOT EXISTS name (columns)"),
        (
            "CREATE TABLE IF NOT EXISTS k (a UInt8) ENGINE = ReplacingMergeTree(f(a)) ORDER BY a;",
            "ENGINE = engine[(args)]",
        ),
        (
            "CREATE TABLE IF NOT EXISTS k (a UInt8) ENGINE = MergeTree ORDER BY a AS SELECT 1 AS a;",
            "filled from a SELECT",
        ),
        ("CREATE TABLE IF NOT EXISTS k (a UInt8) ENGINE = Null ORDER BY a;", "Null table takes no"),
        ("CREATE TABLE IF NOT EXISTS k (a UInt8) ENGINE = MergeTree LIMIT 1;", "only PARTITION BY"),
        (
            "CREATE TABLE IF NOT EXISTS k (id String) ENGINE = ReplacingMergeTree ORDER BY id;",
            "give its sharding key in SHARDING_KEYS",
        ),
        ("CREATE TABLE IF NOT EXISTS events (a UInt8) ENGINE = Null;", "events already exists"),
        ("CREATE TABLE IF NOT EXISTS events_local (a UInt8) ENGINE = Null;", "events_local already"),
        ("CREATE VIEW v AS SELECT 1;", "CREATE VIEW IF NOT EXISTS name AS"),
        ("CREATE VIEW IF NOT EXISTS agents AS SELECT 1;", "agents already exists"),
        ("CREATE OR REPLACE VIEW events AS SELECT 1;", "events exists and is not a plain view"),
        ("CREATE MATERIALIZED VIEW IF NOT EXISTS m ENGINE = Null AS SELECT 1;", "TO table AS SELECT"),
        (
            "CREATE MATERIALIZED VIEW IF NOT EXISTS m TO messages AS SELECT * FROM events "
            "JOIN message_envelopes;",
            "must read only tables on every node (Null), which the store inserts into on the node "
            "it talks to; it reads events",
        ),
        (
            "CREATE MATERIALIZED VIEW IF NOT EXISTS m TO nowhere AS SELECT * FROM message_envelopes;",
            "its target nowhere is not a table",
        ),
        ("ALTER TABLE events DROP COLUMN text;", "only ADD COLUMN has a rule in an ALTER TABLE"),
        ("ALTER TABLE events ADD COLUMN a UInt8, MODIFY TTL now();", "not `MODIFY TTL now()`"),
        ("ALTER TABLE events_local ADD COLUMN a UInt8;", "events_local is not a table created"),
        ("ALTER TABLE agents ADD COLUMN a UInt8;", "agents is not a table created"),
        ("create table if not exists k (a UInt8) engine = Null;", "no rule for this kind"),
    ],
)
def test_an_unknown_construct_is_refused_with_the_statement_named(sql: str, reason: str) -> None:
    source = with_extra(f"CREATE VIEW IF NOT EXISTS fine AS SELECT 1;\n\n-- why\n{sql}\n", "009_bad")
    with pytest.raises(ClusterSchemaError) as refused:
        cluster_schema(source)
    message = str(refused.value)
    head = sql.rstrip(";").split("\n")[0]
    assert message.startswith(f"009_bad.sql, statement 2 (`{head}`): ")
    assert reason in message


def test_a_dropped_table_leaves_the_inventory_and_keeps_its_sharding_key() -> None:
    text = cluster_schema()
    inventory = text[: text.index("-- 001_events ")]
    assert "call_rollup_local " in inventory
    assert "call_events" not in inventory
    assert "call_events_mv" not in inventory
    # Created by 009, dropped by 010: its key still names a table a migration shards.
    assert "call_events" in SHARDING_KEYS
    # A name dropped is free again for a later migration.
    again = "CREATE TABLE IF NOT EXISTS call_events (id String) ENGINE = MergeTree ORDER BY id;\n"
    assert "CREATE TABLE IF NOT EXISTS call_events_local" in cluster_schema(with_extra(again))


def test_a_sharding_key_for_no_table_is_refused() -> None:
    with pytest.raises(ClusterSchemaError, match="SHARDING_KEYS names evnets, which no migration shards"):
        cluster_schema(sharding_keys={**SHARDING_KEYS, "evnets": "x"})


def test_add_column_keeps_commas_in_strings_brackets_and_comments() -> None:
    sql = (
        "ALTER TABLE events\n"
        "    ADD COLUMN a Map(String, UInt8) DEFAULT map('x,y', 1), -- p, q\n"
        "    ADD COLUMN b UInt8;\n"
    )
    text = cluster_schema(with_extra(sql))
    assert (
        "ALTER TABLE events_local ON CLUSTER '{cluster}'\n"
        "    ADD COLUMN IF NOT EXISTS a Map(String, UInt8) DEFAULT map('x,y', 1), -- p, q\n"
        "    ADD COLUMN IF NOT EXISTS b UInt8;"
    ) in text
