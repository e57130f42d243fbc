-- A time-bounded question on `usage` or `tool_calls` reads its window, not the history
-- (docs/benchmarks.md, "The documented views for a window").

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

-- call_rollup gains `at`: the time of the call's PreToolUse in a row that has one (`started`),
-- else the end of the row's hour. Not Nullable, so a minmax index over it holds each granule's
-- hour (a NULL would count as the largest time, and the granules of rows without their call would
-- match every window); a whole row's `at` is its `started`. MATERIALIZED: computed from the row
-- at every insert (the view's, which does not name it) and for the rows stored before, left out
-- of `SELECT *` and of an INSERT without a column list; merges keep the smallest, the call's.
ALTER TABLE call_rollup ADD COLUMN IF NOT EXISTS at SimpleAggregateFunction(min, DateTime64(3, 'UTC')) MATERIALIZED coalesce(started, hour + toIntervalMillisecond(3599999));

ALTER TABLE call_rollup ADD INDEX IF NOT EXISTS by_at at TYPE minmax GRANULARITY 1;

ALTER TABLE call_rollup MATERIALIZE INDEX by_at;

-- tool_calls: the same columns and rows (004_views.sql says what each means), from
--   whole    call_rollup FINAL's whole rows (a call and its results of one hour, merged at read
--            when their parts are not yet), but for the calls left in loose_calls FINAL; a
--            window's are found by the index on `at` (FINAL uses it: use_skip_indexes_if_final,
--            with its exact mode), since `started` is `at` there
--   simple   the calls of loose_calls FINAL that are a call alone (still running) or a call and
--            its result in two hours: paired from their rows there (a few per hour)
--   complex  the other calls of loose_calls FINAL (results without their call, whose call may
--            have cancelled there with a first result; a tool_use_id used by two calls): paired
--            from all their rows in call_rollup, a result without its call with its own fields
--            from loose_calls. When there are none, the scan of call_rollup's `call` column that
--            finds their rows reads nothing.
-- Reading both tables with FINAL is what makes this proportional to the window: 017 read them as
-- they were, so it had to find the calls whose halves sat in parts not merged yet ("strays") by
-- scanning every row of call_rollup that is not whole, at every question.
CREATE OR REPLACE VIEW tool_calls AS
WITH
    shapes AS (
        SELECT
            call,
            countIf(called) AS calls,
            countIf(NOT called) AS results,
            minIf(hour, called) AS call_hour,
            maxIf(hour, NOT called) AS result_hour
        FROM loose_calls FINAL
        GROUP BY call
    ),
    simple AS (
        SELECT call FROM shapes
        WHERE (calls = 1 AND results = 0) OR (calls = 1 AND results = 1 AND result_hour > call_hour)
    ),
    complex AS (
        SELECT call FROM shapes
        WHERE NOT ((calls = 1 AND results = 0) OR (calls = 1 AND results = 1 AND result_hour > call_hour))
    )
SELECT
    session_id,
    tool_use_id,
    toString(agent) AS agent,
    toString(team) AS team,
    toString(agent_id) AS agent_id,
    toString(host) AS host,
    toString(tool) AS tool,
    toString(text) AS text,
    CAST(at AS Nullable(DateTime64(3, 'UTC'))) AS started,
    CAST(ended AS Nullable(DateTime64(3, 'UTC'))) AS ended,
    coalesce(CAST(duration_ms AS Nullable(Int64)), dateDiff('millisecond', started, ended)) AS duration_ms,
    ['running', 'ok', 'error', 'interrupted', 'denied'][outcome + 1] AS status,
    toString(error) AS error
FROM call_rollup FINAL
WHERE called AND outcome > 0 AND call NOT IN (SELECT call FROM loose_calls FINAL)
UNION ALL
SELECT
    session_id,
    tool_use_id,
    toString(argMin(agent, NOT called)) AS agent,
    toString(argMin(team, NOT called)) AS team,
    argMin(agent_id, NOT called) AS agent_id,
    toString(argMin(host, NOT called)) AS host,
    toString(argMin(tool, NOT called)) AS tool,
    argMin(text, NOT called) AS text,
    CAST(min(started) AS Nullable(DateTime64(3, 'UTC'))) AS started,
    max(ended) AS ended,
    coalesce(max(duration_ms), dateDiff('millisecond', started, ended)) AS duration_ms,
    ['running', 'ok', 'error', 'interrupted', 'denied'][max(outcome) + 1] AS status,
    max(error) AS error
FROM loose_calls FINAL
WHERE call IN simple
GROUP BY session_id, tool_use_id
UNION ALL
SELECT
    p.session_id AS session_id,
    p.tool_use_id AS tool_use_id,
    if(p.called, p.agent, o.agent) AS agent,
    if(p.called, p.team, o.team) AS team,
    if(p.called, p.agent_id, o.agent_id) AS agent_id,
    if(p.called, p.host, o.host) AS host,
    if(p.called, p.tool, o.tool) AS tool,
    if(p.called, p.text, o.text) AS text,
    p.started AS started,
    p.ended AS ended,
    coalesce(p.duration_ms, dateDiff('millisecond', p.started, p.ended)) AS duration_ms,
    if(p.called, ['running', 'ok', 'error', 'interrupted', 'denied'][p.outcome + 1], 'orphan') AS status,
    p.error AS error
FROM
(
    SELECT
        session_id,
        tool_use_id,
        max(called) AS called,
        toString(max(agent)) AS agent,
        toString(max(team)) AS team,
        toString(max(agent_id)) AS agent_id,
        toString(max(host)) AS host,
        toString(max(tool)) AS tool,
        toString(max(text)) AS text,
        CAST(min(started) AS Nullable(DateTime64(3, 'UTC'))) AS started,
        CAST(max(ended) AS Nullable(DateTime64(3, 'UTC'))) AS ended,
        CAST(max(duration_ms) AS Nullable(Int64)) AS duration_ms,
        max(outcome) AS outcome,
        toString(max(error)) AS error
    FROM call_rollup
    WHERE call IN complex
    GROUP BY session_id, tool_use_id
) AS p
LEFT JOIN
(
    SELECT
        session_id, tool_use_id, toString(argMin(agent, ended)) AS agent, toString(argMin(team, ended)) AS team,
        argMin(agent_id, ended) AS agent_id, toString(argMin(host, ended)) AS host,
        toString(argMin(tool, ended)) AS tool, argMin(text, ended) AS text
    FROM loose_calls FINAL
    WHERE NOT called
    GROUP BY session_id, tool_use_id
) AS o ON o.session_id = p.session_id AND o.tool_use_id = p.tool_use_id;
