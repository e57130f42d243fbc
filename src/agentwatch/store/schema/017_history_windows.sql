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
-- a call with no result yet (its row), a result with no call (its row), and what is left of a call
-- with more events (a second result in a later hour, ...). Columns as in call_rollup, one event
-- each, but every row keeps its own event's agent, team, agent_id, host, tool and text (a result's
-- too: a result without its call shows them).
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
    agent,
    team,
    agent_id,
    host,
    tool_name AS tool,
    text,
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
-- results of one hour: nothing of it would stay). Unmerged halves of one hour cancel here too. A
-- result's own fields are not in call_rollup: the backfilled results without a call take theirs
-- from `events`.
INSERT INTO loose_calls (session_id, tool_use_id, hour, call, sign, agent, team, agent_id, host, tool, text,
                        called, started, ended, duration_ms, outcome, error)
SELECT
    r.session_id, r.tool_use_id, r.hour, r.call, toInt8(if(r.called, 1, -1)) AS sign,
    if(r.called, r.agent, e.agent), if(r.called, r.team, e.team), if(r.called, r.agent_id, e.agent_id),
    if(r.called, r.host, e.host), if(r.called, r.tool, e.tool), if(r.called, r.text, e.text),
    r.called, r.started, r.ended, r.duration_ms, r.outcome, r.error
FROM (SELECT * FROM call_rollup WHERE called = false OR outcome = 0) AS r
LEFT JOIN
(
    SELECT
        session_id, tool_use_id, toStartOfHour(timestamp) AS hour, argMin(agent, (timestamp, id)) AS agent,
        argMin(team, (timestamp, id)) AS team, argMin(agent_id, (timestamp, id)) AS agent_id,
        argMin(host, (timestamp, id)) AS host, argMin(tool_name, (timestamp, id)) AS tool,
        argMin(text, (timestamp, id)) AS text
    FROM events FINAL
    WHERE tool_use_id IN (SELECT tool_use_id FROM call_rollup WHERE called = false)
      AND event IN ('PostToolUse', 'PostToolUseFailure', 'PermissionDenied')
    GROUP BY session_id, tool_use_id, hour
) AS e ON e.session_id = r.session_id AND e.tool_use_id = r.tool_use_id AND e.hour = r.hour;

-- tool_calls: the same columns and rows as before (004_views.sql says what each means), from
--   whole     call_rollup's whole rows (a call and its results in one row), but for the calls in
--             loose_calls or in `strays`; a window's are found through the projection by_started
--   loose     the calls of loose_calls that are a call alone (still running) or a call and its
--             result in two hours: paired per question from their rows there (a few per hour)
--   mixed     the other calls of loose_calls (results without their call, whose call may have
--             cancelled there with a first result; two rows of one hour not merged yet; two calls)
--             and `strays` (calls whose halves cancelled in loose_calls while call_rollup has not
--             merged them yet: a fresh part): paired from all their rows in call_rollup, a result
--             without its call with its own fields from loose_calls. When there are none (the
--             engine merged loose_calls, no result lost its call), the scan of call_rollup's `call`
--             column that finds their rows reads nothing; when there are, it reads that column.
-- A tool_use_id used by two calls, each with its result, one pair cancelled in loose_calls and
-- the other whole in call_rollup, shows what loose_calls has left of it until the merges.
CREATE OR REPLACE VIEW tool_calls AS
WITH
    loose AS (SELECT call FROM loose_calls),
    shapes AS (
        SELECT
            call,
            countIf(called) AS calls,
            countIf(NOT called) AS results,
            minIf(hour, called) AS call_hour,
            maxIf(hour, NOT called) AS result_hour
        FROM loose_calls
        GROUP BY call
    ),
    simple AS (
        SELECT call FROM shapes
        WHERE (calls = 1 AND results = 0) OR (calls = 1 AND results = 1 AND result_hour > call_hour)
    ),
    complex AS (
        SELECT call FROM shapes
        WHERE NOT ((calls = 1 AND results = 0) OR (calls = 1 AND results = 1 AND result_hour > call_hour))
    ),
    strays AS (SELECT call FROM call_rollup WHERE (called = false OR outcome = 0) AND call NOT IN loose),
    mixed AS (SELECT call FROM complex UNION ALL SELECT call FROM strays)
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
WHERE called AND outcome > 0 AND call NOT IN loose AND call NOT IN strays
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
    CAST(min(started) AS SimpleAggregateFunction(min, Nullable(DateTime64(3, 'UTC')))) AS started,
    max(ended) AS ended,
    coalesce(max(duration_ms), dateDiff('millisecond', started, ended)) AS duration_ms,
    ['running', 'ok', 'error', 'interrupted', 'denied'][max(outcome) + 1] AS status,
    max(error) AS error
FROM loose_calls
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
        CAST(min(started) AS SimpleAggregateFunction(min, Nullable(DateTime64(3, 'UTC')))) AS started,
        CAST(max(ended) AS Nullable(DateTime64(3, 'UTC'))) AS ended,
        CAST(max(duration_ms) AS Nullable(Int64)) AS duration_ms,
        max(outcome) AS outcome,
        toString(max(error)) AS error
    FROM call_rollup
    WHERE call IN mixed
    GROUP BY session_id, tool_use_id
) AS p
LEFT JOIN
(
    SELECT
        session_id, tool_use_id, toString(argMin(agent, ended)) AS agent, toString(argMin(team, ended)) AS team,
        argMin(agent_id, ended) AS agent_id, toString(argMin(host, ended)) AS host,
        toString(argMin(tool, ended)) AS tool, argMin(text, ended) AS text
    FROM loose_calls
    WHERE NOT called
    GROUP BY session_id, tool_use_id
) AS o ON o.session_id = p.session_id AND o.tool_use_id = p.tool_use_id;
