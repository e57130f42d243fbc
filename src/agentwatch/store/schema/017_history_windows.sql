-- Time-bounded questions on the documented views cost what the window holds, not the history.
--
-- tool_calls (004) paired every call of the history from `events` at every question: a
-- `WHERE started >= ...` on it cannot reach the events table, because `started` only exists
-- after the pairing (10.9 s at 10M events for the last hour). It now reads call_rollup (010),
-- whose rows are mostly whole calls (a PreToolUse and its result folded in one hour), and the
-- engine finds a window's whole calls through a projection ordered by `started`. What is not
-- one whole row there (a call whose result came in a later hour, a call still running or never
-- answered, a result whose call was never stored, rows the engine has not merged yet) is kept
-- apart in loose_calls, a table that forgets a call once its call and result met in one hour, so
-- it holds those few calls whatever the history's size (docs/benchmarks.md).

-- call_rollup: its rows by the call's start (a projection of row numbers only: the index the
-- windowed read uses), and the rows that are not a whole call (called, outcome: a few bytes a row),
-- so finding those reads their granules only. Projections of an aggregating table are rebuilt
-- when its parts merge.
ALTER TABLE call_rollup MODIFY SETTING deduplicate_merge_projection_mode = 'rebuild';

ALTER TABLE call_rollup ADD PROJECTION IF NOT EXISTS by_started (SELECT _part_offset ORDER BY started);

ALTER TABLE call_rollup ADD PROJECTION IF NOT EXISTS by_wholeness (SELECT call, called, outcome ORDER BY called, outcome);

ALTER TABLE call_rollup MATERIALIZE PROJECTION by_started;

ALTER TABLE call_rollup MATERIALIZE PROJECTION by_wholeness;

-- loose_calls: the tool events of call_rollup again, a call's PreToolUse with sign 1 and each result
-- with sign -1, keyed by the call and the UTC hour. A call and one result of the same hour cancel
-- (at insert within one block, else at the next merge) and leave nothing; what stays is what
-- call_rollup cannot give as one whole row: a call and its result in two hours (one row each),
-- a call with no result yet (its row), a result with no call (its row), and, of a call with two
-- results in its hour, the second result (the call and the first cancelled: tool_calls pairs such
-- a result from `events`). Columns as in call_rollup, one event each.
CREATE TABLE IF NOT EXISTS loose_calls
(
    session_id String,
    tool_use_id String,
    hour DateTime('UTC'),
    call UInt64,
    sign Int8,
    version UInt8 DEFAULT 0,
    agent LowCardinality(String),
    team LowCardinality(String),
    agent_id String,
    host LowCardinality(String),
    tool LowCardinality(String),
    text String,
    called Bool,
    started Nullable(DateTime64(3, 'UTC')),
    ended Nullable(DateTime64(3, 'UTC')),
    duration_ms Nullable(Int64),
    outcome UInt8,
    error String
)
ENGINE = VersionedCollapsingMergeTree(sign, version)
PARTITION BY toYYYYMM(hour)
ORDER BY (session_id, tool_use_id, hour);

CREATE MATERIALIZED VIEW IF NOT EXISTS loose_calls_mv TO loose_calls AS
SELECT
    session_id,
    tool_use_id,
    toStartOfHour(timestamp) AS hour,
    cityHash64(session_id, tool_use_id) AS call,
    toInt8(if(event = 'PreToolUse', 1, -1)) AS sign,
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

-- The backfill: the rows of call_rollup that are not a whole call (a whole row is a call and its
-- results of one hour: nothing of it would stay). Unmerged halves of one hour cancel here too.
INSERT INTO loose_calls (session_id, tool_use_id, hour, call, sign, agent, team, agent_id, host, tool, text,
                        called, started, ended, duration_ms, outcome, error)
SELECT
    session_id, tool_use_id, hour, call, toInt8(if(called, 1, -1)) AS sign, agent, team, agent_id, host,
    tool, text, called, started, ended, duration_ms, outcome, error
FROM call_rollup
WHERE called = false OR outcome = 0;

-- tool_calls: the same columns and rows as before (004_views.sql says what each means), from
--   whole     call_rollup's whole rows (a call and its results in one row), but for the calls in
--             `paired` or `lone`; a window's are found through the projection by_started
--   paired    the calls of loose_calls that kept a PreToolUse there (a call and a result in two
--             hours, a call still running, ...), and `strays`: calls whose two halves cancelled in
--             loose_calls while call_rollup has not merged them yet (a fresh part). Paired per
--             question from all their rows in call_rollup (a call's rows there are complete:
--             loose_calls may have cancelled some of a call's events and kept others)
--   lone      the calls of loose_calls left with results only (a result whose call was never
--             stored, a second result of a call paired in its hour): paired from `events` as 004
--             did (call_rollup keeps no fields of a result), found through the tool_use_id index
-- What is not a whole row is read as a whole per question: the `call` column of call_rollup for
-- `paired` (8 bytes a call), loose_calls whole (a few rows per hour).
CREATE OR REPLACE VIEW tool_calls AS
WITH
    loose AS (SELECT session_id, tool_use_id, call, called FROM loose_calls),
    lone AS (SELECT session_id, tool_use_id FROM loose GROUP BY session_id, tool_use_id HAVING NOT max(called)),
    strays AS (
        SELECT call FROM call_rollup WHERE (called = false OR outcome = 0) AND call NOT IN (SELECT call FROM loose)
    ),
    paired AS (SELECT call FROM loose WHERE called UNION ALL SELECT call FROM strays)
SELECT
    session_id,
    tool_use_id,
    toString(agent) AS agent,
    toString(team) AS team,
    toString(agent_id) AS agent_id,
    toString(host) AS host,
    toString(tool) AS tool,
    toString(text) AS text,
    started,
    CAST(ended AS Nullable(DateTime64(3, 'UTC'))) AS ended,
    coalesce(CAST(duration_ms AS Nullable(Int64)), dateDiff('millisecond', started, ended)) AS duration_ms,
    ['running', 'ok', 'error', 'interrupted', 'denied'][outcome + 1] AS status,
    toString(error) AS error
FROM call_rollup
WHERE called AND outcome > 0 AND call NOT IN paired AND call NOT IN (SELECT call FROM loose)
UNION ALL
SELECT
    session_id,
    tool_use_id,
    toString(max(agent)) AS agent,
    toString(max(team)) AS team,
    toString(max(agent_id)) AS agent_id,
    toString(max(host)) AS host,
    toString(max(tool)) AS tool,
    toString(max(text)) AS text,
    CAST(min(started) AS SimpleAggregateFunction(min, Nullable(DateTime64(3, 'UTC')))) AS started,
    CAST(max(ended) AS Nullable(DateTime64(3, 'UTC'))) AS ended,
    coalesce(CAST(max(duration_ms) AS Nullable(Int64)), dateDiff('millisecond', started, ended)) AS duration_ms,
    ['running', 'ok', 'error', 'interrupted', 'denied'][max(outcome) + 1] AS status,
    toString(max(error)) AS error
FROM call_rollup
WHERE call IN paired
GROUP BY session_id, tool_use_id
HAVING max(called)
UNION ALL
SELECT
    session_id,
    tool_use_id,
    toString(argMin(agent, (is_call = 0, timestamp, id))) AS agent,
    toString(argMin(team, (is_call = 0, timestamp, id))) AS team,
    argMin(agent_id, (is_call = 0, timestamp, id)) AS agent_id,
    toString(argMin(host, (is_call = 0, timestamp, id))) AS host,
    toString(argMin(tool_name, (is_call = 0, timestamp, id))) AS tool,
    argMin(text, (is_call = 0, timestamp, id)) AS text,
    CAST(minOrNullIf(timestamp, is_call = 1) AS SimpleAggregateFunction(min, Nullable(DateTime64(3, 'UTC')))) AS started,
    maxOrNullIf(timestamp, is_call = 0) AS ended,
    coalesce(
        maxOrNullIf(payload_duration_ms, is_call = 0),
        dateDiff('millisecond', started, ended)
    ) AS duration_ms,
    multiIf(
        countIf(is_call = 1) = 0, 'orphan',
        countIf(event = 'PermissionDenied') > 0, 'denied',
        countIf(event = 'PostToolUseFailure' AND is_interrupt) > 0, 'interrupted',
        countIf(event = 'PostToolUseFailure') > 0, 'error',
        countIf(event = 'PostToolUse') > 0, 'ok',
        'running'
    ) AS status,
    anyIf(failure_error, event = 'PostToolUseFailure') AS error
FROM
(
    SELECT
        tool_use_id, agent, team, session_id, agent_id, host, tool_name, text, timestamp, id, event,
        toUInt8(event = 'PreToolUse') AS is_call,
        if(event = 'PreToolUse', NULL, JSONExtract(data, 'duration_ms', 'Nullable(Int64)'))
            AS payload_duration_ms,
        if(event = 'PostToolUseFailure', JSONExtractBool(data, 'is_interrupt'), false) AS is_interrupt,
        if(event = 'PostToolUseFailure', JSONExtractString(data, 'error'), '') AS failure_error
    FROM events FINAL
    WHERE tool_use_id IN (SELECT tool_use_id FROM lone)
      AND (session_id, tool_use_id) IN lone
      AND event IN ('PreToolUse', 'PostToolUse', 'PostToolUseFailure', 'PermissionDenied')
)
GROUP BY session_id, tool_use_id;
