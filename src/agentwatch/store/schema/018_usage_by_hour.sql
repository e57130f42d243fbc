-- A time-bounded question on `usage` reads its window, not the history.
--
-- usage was ordered by (session_id, message_id, request_id), so that the copies of one API message
-- (read again, sent again, imported; each with the time of its own transcript line) meet and the
-- ReplacingMergeTree keeps the largest. `usage FINAL WHERE timestamp >= ...` then read every row:
-- a projection by time is not used under FINAL, and session ids are random, so no index on the
-- time could skip a granule. Now it is ordered by `hour` first:
--   hour   the UTC hour of the message's first stored copy. The store sets it: a new message gets
--          the hour of its time, a copy that replaces a stored one gets the stored one's hour
--          (store/usage.py, changed_usage), so the copies of a message still share one key, even
--          when their times fall in two hours.
-- The table's granules then hold an hour or so each: a minmax index on `timestamp` finds a
-- window's, under FINAL too (use_skip_indexes_if_final, on by default, with its exact mode, which
-- adds the granules of other parts that share their keys); a bloom filter on `session_id` finds a
-- session's (the session page, the store's lookup of the stored copies).
ALTER TABLE usage ADD COLUMN IF NOT EXISTS hour DateTime('UTC') DEFAULT toStartOfHour(timestamp);

ALTER TABLE usage_in ADD COLUMN IF NOT EXISTS hour DateTime('UTC') DEFAULT toStartOfHour(timestamp);

-- The view that stores usage_in's rows in usage passes the hour on.
ALTER TABLE usage_in_mv MODIFY QUERY
SELECT
    session_id, message_id, request_id, timestamp, agent, team, parent_agent, agent_id, agent_type,
    subagent_id, subagent_type, host, model, input_tokens, output_tokens, cache_read_tokens,
    cache_write_tokens, cache_write_5m_tokens, cache_write_1h_tokens, cost_usd, price_model, sidechain,
    envelope_id, version, harness, reasoning_tokens, hour
FROM usage_in
WHERE sign > 0;

-- The rebuild: the same columns in the new order, filled with the stored messages (one row each:
-- FINAL), then put in usage's place. The views and queries read `usage` by its name.
CREATE TABLE IF NOT EXISTS usage_by_hour
(
    session_id String,
    message_id String,
    request_id String,
    timestamp DateTime64(3, 'UTC'),
    agent LowCardinality(String),
    team LowCardinality(String),
    parent_agent LowCardinality(String),
    agent_id String,
    agent_type LowCardinality(String),
    subagent_id String,
    subagent_type LowCardinality(String),
    host LowCardinality(String),
    model LowCardinality(String),
    input_tokens UInt64,
    output_tokens UInt64,
    cache_read_tokens UInt64,
    cache_write_tokens UInt64,
    cache_write_5m_tokens UInt64,
    cache_write_1h_tokens UInt64,
    cost_usd Nullable(Float64),
    price_model LowCardinality(String),
    sidechain Bool,
    envelope_id String,
    version UInt64,
    stored_at DateTime64(3, 'UTC') DEFAULT now64(3),
    harness LowCardinality(String) DEFAULT 'claude-code',
    reasoning_tokens UInt64 DEFAULT 0,
    hour DateTime('UTC') DEFAULT toStartOfHour(timestamp),
    INDEX by_time timestamp TYPE minmax GRANULARITY 1,
    INDEX by_session session_id TYPE bloom_filter GRANULARITY 1
)
ENGINE = ReplacingMergeTree(version)
ORDER BY (hour, session_id, message_id, request_id);

INSERT INTO usage_by_hour
SELECT
    session_id, message_id, request_id, timestamp, agent, team, parent_agent, agent_id, agent_type,
    subagent_id, subagent_type, host, model, input_tokens, output_tokens, cache_read_tokens,
    cache_write_tokens, cache_write_5m_tokens, cache_write_1h_tokens, cost_usd, price_model, sidechain,
    envelope_id, version, stored_at, harness, reasoning_tokens, hour
FROM usage FINAL;

EXCHANGE TABLES usage AND usage_by_hour;

DROP TABLE IF EXISTS usage_by_hour;
