-- call_rollup: one row per tool call and UTC hour (keyed by a hash of the call, then the call),
-- the call and its result folded together by the engine's merges, so that a per-call question
-- about a window (tool_calls_since) reads rows that are already paired instead of pairing every
-- call of the window at query time. It replaces
-- call_events (009), which kept the events and paired them per query: at 10M events a day's
-- calls took 150 to 200 ms to pair; here they take a scan (docs/benchmarks.md).
--
-- Every column is a key or a min/max: folding the same event in twice changes nothing, so a
-- redelivered event (which the writer keeps out anyway) or the backfill below meeting a row the
-- view already wrote cannot count twice. A call's row is whole once its PreToolUse and its result
-- are in one part of the same hour; until the merge that joins them (seconds for fresh parts), or
-- when the result falls in the next hour, its rows are separate and tool_calls_since pairs those
-- few at query time.
--
-- The call's fields (agent, team, agent_id, host, tool, text, started) are its PreToolUse's: the
-- other events write '' or NULL there, so max/min pick the call's. outcome: 0 for the call itself,
-- then 1 ok, 2 error, 3 interrupted, 4 denied; the largest wins, as in tool_calls' precedence.
CREATE TABLE IF NOT EXISTS call_rollup
(
    hour DateTime('UTC'),
    call UInt64,
    session_id String,
    tool_use_id String,
    agent SimpleAggregateFunction(max, LowCardinality(String)),
    team SimpleAggregateFunction(max, LowCardinality(String)),
    agent_id SimpleAggregateFunction(max, String),
    host SimpleAggregateFunction(max, LowCardinality(String)),
    tool SimpleAggregateFunction(max, LowCardinality(String)),
    text SimpleAggregateFunction(max, String),
    called SimpleAggregateFunction(max, Bool),
    started SimpleAggregateFunction(min, Nullable(DateTime64(3, 'UTC'))),
    ended SimpleAggregateFunction(max, Nullable(DateTime64(3, 'UTC'))),
    duration_ms SimpleAggregateFunction(max, Nullable(Int64)),
    outcome SimpleAggregateFunction(max, UInt8),
    error SimpleAggregateFunction(max, String)
)
ENGINE = AggregatingMergeTree
PARTITION BY toYYYYMM(hour)
PRIMARY KEY (hour, call)
ORDER BY (hour, call, session_id, tool_use_id);

CREATE MATERIALIZED VIEW IF NOT EXISTS call_rollup_mv TO call_rollup AS
SELECT
    toStartOfHour(timestamp) AS hour,
    cityHash64(session_id, tool_use_id) AS call,
    session_id,
    tool_use_id,
    if(event = 'PreToolUse', agent, '') AS agent,
    if(event = 'PreToolUse', team, '') AS team,
    if(event = 'PreToolUse', agent_id, '') AS agent_id,
    if(event = 'PreToolUse', host, '') AS host,
    if(event = 'PreToolUse', tool_name, '') AS tool,
    if(event = 'PreToolUse', text, '') AS text,
    event = 'PreToolUse' AS called,
    if(event = 'PreToolUse', timestamp, NULL) AS started,
    if(event = 'PreToolUse', NULL, timestamp) AS ended,
    if(event = 'PreToolUse', NULL, duration_ms) AS duration_ms,
    toUInt8(multiIf(
        event = 'PermissionDenied', 4,
        event = 'PostToolUseFailure' AND JSONExtractBool(data, 'is_interrupt'), 3,
        event = 'PostToolUseFailure', 2,
        event = 'PostToolUse', 1,
        0
    )) AS outcome,
    if(event = 'PostToolUseFailure', JSONExtractString(data, 'error'), '') AS error
FROM events
WHERE tool_use_id != '' AND event IN ('PreToolUse', 'PostToolUse', 'PostToolUseFailure', 'PermissionDenied');

-- The backfill, from call_events (the same events, their payload fields already read out).
INSERT INTO call_rollup
SELECT
    toStartOfHour(timestamp) AS hour,
    cityHash64(session_id, tool_use_id) AS call,
    session_id,
    tool_use_id,
    if(event = 'PreToolUse', agent, '') AS agent,
    if(event = 'PreToolUse', team, '') AS team,
    if(event = 'PreToolUse', agent_id, '') AS agent_id,
    if(event = 'PreToolUse', host, '') AS host,
    if(event = 'PreToolUse', tool_name, '') AS tool,
    text,
    event = 'PreToolUse' AS called,
    if(event = 'PreToolUse', timestamp, NULL) AS started,
    if(event = 'PreToolUse', NULL, timestamp) AS ended,
    duration_ms,
    toUInt8(multiIf(
        event = 'PermissionDenied', 4,
        event = 'PostToolUseFailure' AND is_interrupt, 3,
        event = 'PostToolUseFailure', 2,
        event = 'PostToolUse', 1,
        0
    )) AS outcome,
    error
FROM call_events;

-- tool_calls_since(since = ...): the `tool_calls` columns for the calls that started at or after
-- `since`, from that window of call_rollup only:
--   SELECT * FROM tool_calls_since(since = now64(3) - INTERVAL 1 HOUR) WHERE status = 'error'
-- The calls whose every row in the window is whole (a call and its result in one row: nearly all)
-- are read as they are. The others (a fresh part not merged yet, a result in the next hour, a call
-- still running, a second result) are paired per query from all their rows: `split`, the hashes of
-- those calls, is small. A hash shared by two calls only sends a whole row to the pairing, which
-- groups by the call itself. A result is paired with its call when both are in the window (a
-- result comes after its call); the results of calls started before `since` are left out, so no
-- row is an orphan.
CREATE OR REPLACE VIEW tool_calls_since AS
WITH split AS (
    SELECT call FROM call_rollup
    WHERE hour >= toStartOfHour({since:DateTime64(3, 'UTC')}) AND NOT (called AND outcome > 0)
)
SELECT
    session_id, tool_use_id, agent, team, agent_id, host, tool, text, started, ended,
    coalesce(duration_ms, dateDiff('millisecond', started, ended)) AS duration_ms,
    ['running', 'ok', 'error', 'interrupted', 'denied'][outcome + 1] AS status,
    error
FROM call_rollup
WHERE hour >= toStartOfHour({since:DateTime64(3, 'UTC')}) AND called AND outcome > 0
    AND started >= {since:DateTime64(3, 'UTC')} AND call NOT IN split
UNION ALL
SELECT
    r.session_id AS session_id,
    r.tool_use_id AS tool_use_id,
    max(r.agent) AS agent,
    max(r.team) AS team,
    max(r.agent_id) AS agent_id,
    max(r.host) AS host,
    max(r.tool) AS tool,
    max(r.text) AS text,
    min(r.started) AS started,
    max(r.ended) AS ended,
    coalesce(max(r.duration_ms), dateDiff('millisecond', started, ended)) AS duration_ms,
    ['running', 'ok', 'error', 'interrupted', 'denied'][max(r.outcome) + 1] AS status,
    max(r.error) AS error
FROM call_rollup AS r
WHERE r.hour >= toStartOfHour({since:DateTime64(3, 'UTC')}) AND r.call IN split
GROUP BY r.session_id, r.tool_use_id
HAVING max(r.called) AND started >= {since:DateTime64(3, 'UTC')};

-- call_events is no longer read: its view stops, and the table (a copy of events) goes.
DROP VIEW IF EXISTS call_events_mv;

DROP TABLE IF EXISTS call_events;
