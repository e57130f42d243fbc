-- events_in: where the store inserts the event envelopes (JSONEachRow), on their way to `events`.
-- A Null table (keeps nothing) with the columns of `events`, each of its LowCardinality(String)
-- columns read as a plain String: ClickHouse reads a LowCardinality column from JSON text one
-- value at a time into its dictionary (a temporary column per value), which was more than half
-- of the cost of parsing an envelope; the view below converts each block's whole columns at once
-- (about a quarter less CPU per stored event, rollups included). The defaults are those of
-- `events`, so an envelope without a field gets what `events` would have given it; `stored_at`
-- is left to `events`. A column added to `events` is added here too, and to the view
-- (tests/integration/test_schema.py compares them).
CREATE TABLE IF NOT EXISTS events_in
(
    id String,
    timestamp DateTime64(3, 'UTC'),
    v UInt8,
    event String,
    kind String,
    agent String,
    team String,
    direction String,
    peer String,
    text String,
    source String,
    session_id String,
    agent_id String,
    agent_type String,
    parent_agent String,
    tool_name String,
    tool_use_id String,
    host String,
    cwd String,
    redacted UInt32,
    truncated Bool,
    data String,
    seq UInt64 DEFAULT 0,
    spool_bytes UInt64 DEFAULT 0,
    prompt_id String DEFAULT JSONExtractString(data, 'prompt_id'),
    duration_ms Nullable(Int64) DEFAULT JSONExtract(data, 'duration_ms', 'Nullable(Int64)'),
    permission_mode String DEFAULT JSONExtractString(data, 'permission_mode'),
    model String DEFAULT if(JSONHas(data, 'model'), JSONExtractString(data, 'model'), JSONExtractString(data, 'to_model')),
    harness String DEFAULT 'claude-code',
    harness_event String DEFAULT event
)
ENGINE = Null;

-- Every block inserted into events_in, into `events`, whose own views (the rollups, event_ids)
-- then see it as they saw the store's inserts before.
CREATE MATERIALIZED VIEW IF NOT EXISTS events_in_mv TO events AS
SELECT
    id, timestamp, v, event, kind, agent, team, direction, peer, text, source, session_id, agent_id,
    agent_type, parent_agent, tool_name, tool_use_id, host, cwd, redacted, truncated, data, seq,
    spool_bytes, prompt_id, duration_ms, permission_mode, model, harness, harness_event
FROM events_in;
