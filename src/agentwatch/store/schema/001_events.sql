-- One row per hook invocation: every envelope field in a typed column (see the README's
-- "The wire contract"), the payload as JSON text in `data`.
--
-- ReplacingMergeTree on (timestamp, id): id is unique per event and timestamp comes from the
-- same envelope, so a redelivered event has the same key and collapses to one row under FINAL
-- (and at merge time). Both copies always land in the same monthly partition.
-- Retention is a TTL set by agentwatch.store.migrations.apply_migrations, not here.
--
-- Statements in these files end with a semicolon at the end of a line, and nowhere else.
CREATE TABLE IF NOT EXISTS events
(
    id String,
    timestamp DateTime64(3, 'UTC'),
    v UInt8,
    event LowCardinality(String),
    kind LowCardinality(String),
    agent LowCardinality(String),
    team LowCardinality(String),
    direction LowCardinality(String),
    peer String,
    text String,
    source LowCardinality(String),
    session_id String,
    agent_id String,
    agent_type LowCardinality(String),
    parent_agent LowCardinality(String),
    tool_name LowCardinality(String),
    tool_use_id String,
    host LowCardinality(String),
    cwd String,
    redacted UInt32,
    truncated Bool,
    data String CODEC(ZSTD(3)),
    stored_at DateTime64(3, 'UTC') DEFAULT now64(3),
    INDEX idx_session_id session_id TYPE bloom_filter(0.01) GRANULARITY 4,
    INDEX idx_tool_use_id tool_use_id TYPE bloom_filter(0.01) GRANULARITY 4
)
ENGINE = ReplacingMergeTree
PARTITION BY toYYYYMM(timestamp)
ORDER BY (timestamp, id);
