-- Rollups: aggregates kept at insert time by materialized views, so that the questions about
-- aggregates (per tool, per session, per agent, per message edge) read a few thousand rows, not
-- the whole history. See docs/architecture.md, "Rollups", for the design and its limits.
--
-- Counts and quantile states are not idempotent: an event inserted twice would be counted twice.
-- The store's writer (store/writes.py) therefore drops, before each insert, the ids already in
-- `event_ids` (and repeats inside the batch): a redelivered event never reaches these views. The
-- states that are idempotent anyway (min, max, argMax by (timestamp, id), uniqExact) stay right
-- even if one does.
--
-- The last statements fill every rollup from the history already stored (the backfill).

-- event_ids: every stored event and message envelope id, ordered by id: the writer's lookup.
CREATE TABLE IF NOT EXISTS event_ids
(
    id String,
    timestamp DateTime64(3, 'UTC')
)
ENGINE = ReplacingMergeTree
ORDER BY id;

CREATE MATERIALIZED VIEW IF NOT EXISTS event_ids_events_mv TO event_ids AS
SELECT id, timestamp FROM events;

CREATE MATERIALIZED VIEW IF NOT EXISTS event_ids_messages_mv TO event_ids AS
SELECT id, timestamp FROM message_envelopes;

-- tool_hourly: per tool and UTC hour. Calls count at their PreToolUse, results at theirs.
CREATE TABLE IF NOT EXISTS tool_hourly
(
    hour DateTime('UTC'),
    tool LowCardinality(String),
    calls SimpleAggregateFunction(sum, UInt64),
    failures SimpleAggregateFunction(sum, UInt64),
    interrupted SimpleAggregateFunction(sum, UInt64),
    denied SimpleAggregateFunction(sum, UInt64),
    finished SimpleAggregateFunction(sum, UInt64),
    timed SimpleAggregateFunction(sum, UInt64),
    durations AggregateFunction(quantilesTiming(0.5, 0.95), Int64),
    max_ms SimpleAggregateFunction(max, Nullable(Int64)),
    last_error AggregateFunction(argMax, String, Tuple(DateTime64(3, 'UTC'), String))
)
ENGINE = AggregatingMergeTree
ORDER BY (hour, tool);

CREATE MATERIALIZED VIEW IF NOT EXISTS tool_hourly_mv TO tool_hourly AS
SELECT
    toStartOfHour(timestamp) AS hour,
    tool_name AS tool,
    toUInt64(countIf(event = 'PreToolUse')) AS calls,
    toUInt64(countIf(event = 'PostToolUseFailure')) AS failures,
    toUInt64(countIf(event = 'PostToolUseFailure' AND JSONExtractBool(data, 'is_interrupt'))) AS interrupted,
    toUInt64(countIf(event = 'PermissionDenied')) AS denied,
    toUInt64(countIf(event != 'PreToolUse')) AS finished,
    toUInt64(countIf(event != 'PreToolUse' AND duration_ms IS NOT NULL)) AS timed,
    quantilesTimingStateIf(0.5, 0.95)(assumeNotNull(duration_ms), event != 'PreToolUse' AND duration_ms IS NOT NULL)
        AS durations,
    maxIf(duration_ms, event != 'PreToolUse') AS max_ms,
    argMaxStateIf(
        JSONExtractString(data, 'error'), (timestamp, id), event = 'PostToolUseFailure'
        AND JSONExtractString(data, 'error') != ''
    ) AS last_error
FROM events
WHERE tool_name != '' AND event IN ('PreToolUse', 'PostToolUse', 'PostToolUseFailure', 'PermissionDenied')
GROUP BY hour, tool;

-- session_rollup: per session, the inputs of the `sessions` view's columns.
CREATE TABLE IF NOT EXISTS session_rollup
(
    session_id String,
    main_events SimpleAggregateFunction(sum, UInt64),
    main_agent AggregateFunction(argMin, LowCardinality(String), Tuple(DateTime64(3, 'UTC'), String)),
    parent_agent AggregateFunction(argMin, LowCardinality(String), Tuple(DateTime64(3, 'UTC'), String)),
    main_team AggregateFunction(argMin, LowCardinality(String), Tuple(DateTime64(3, 'UTC'), String)),
    first_team AggregateFunction(argMin, LowCardinality(String), Tuple(DateTime64(3, 'UTC'), String)),
    host AggregateFunction(argMin, LowCardinality(String), Tuple(DateTime64(3, 'UTC'), String)),
    cwd AggregateFunction(argMin, String, Tuple(DateTime64(3, 'UTC'), String)),
    first_start SimpleAggregateFunction(min, Nullable(DateTime64(3, 'UTC'))),
    first_seen SimpleAggregateFunction(min, DateTime64(3, 'UTC')),
    last_end SimpleAggregateFunction(max, Nullable(DateTime64(3, 'UTC'))),
    last_start SimpleAggregateFunction(max, Nullable(DateTime64(3, 'UTC'))),
    end_reason AggregateFunction(argMax, String, Tuple(DateTime64(3, 'UTC'), String)),
    last_seen SimpleAggregateFunction(max, DateTime64(3, 'UTC')),
    events SimpleAggregateFunction(sum, UInt64),
    tool_calls SimpleAggregateFunction(sum, UInt64),
    errors SimpleAggregateFunction(sum, UInt64),
    prompts SimpleAggregateFunction(sum, UInt64),
    subagents AggregateFunction(uniqExact, String),
    last_turn AggregateFunction(argMax, LowCardinality(String), Tuple(DateTime64(3, 'UTC'), String))
)
ENGINE = AggregatingMergeTree
ORDER BY session_id
-- Small granules: the dashboard reads a few hundred sessions by id, spread over the whole key.
SETTINGS index_granularity = 256;

CREATE MATERIALIZED VIEW IF NOT EXISTS session_rollup_mv TO session_rollup AS
SELECT
    session_id,
    toUInt64(countIf(agent_id = '')) AS main_events,
    argMinStateIf(agent, (timestamp, id), agent_id = '') AS main_agent,
    argMinStateIf(parent_agent, (timestamp, id), parent_agent != '') AS parent_agent,
    argMinStateIf(team, (timestamp, id), agent_id = '') AS main_team,
    argMinState(team, (timestamp, id)) AS first_team,
    argMinStateIf(host, (timestamp, id), host != '') AS host,
    argMinStateIf(cwd, (timestamp, id), cwd != '') AS cwd,
    minOrNullIf(timestamp, event = 'SessionStart') AS first_start,
    min(timestamp) AS first_seen,
    maxOrNullIf(timestamp, event = 'SessionEnd') AS last_end,
    maxOrNullIf(timestamp, event = 'SessionStart') AS last_start,
    argMaxStateIf(
        if(event = 'SessionEnd', JSONExtractString(data, 'reason'), ''), (timestamp, id), event = 'SessionEnd'
    ) AS end_reason,
    max(timestamp) AS last_seen,
    toUInt64(count()) AS events,
    toUInt64(countIf(event = 'PreToolUse')) AS tool_calls,
    toUInt64(countIf(event IN ('PostToolUseFailure', 'StopFailure'))) AS errors,
    toUInt64(countIf(event = 'UserPromptSubmit')) AS prompts,
    uniqExactStateIf(agent_id, agent_id != '') AS subagents,
    argMaxStateIf(
        event, (timestamp, id), agent_id = '' AND event IN ('UserPromptSubmit', 'Stop', 'StopFailure')
    ) AS last_turn
FROM events
WHERE session_id != ''
GROUP BY session_id;

-- session_seq_rollup: per session and host, the numbered events (for coverage_pct).
CREATE TABLE IF NOT EXISTS session_seq_rollup
(
    session_id String,
    host LowCardinality(String),
    max_seq SimpleAggregateFunction(max, UInt64),
    stored AggregateFunction(uniqExact, UInt64)
)
ENGINE = AggregatingMergeTree
ORDER BY (session_id, host)
-- Small granules: the dashboard reads a few hundred sessions by id, spread over the whole key.
SETTINGS index_granularity = 256;

CREATE MATERIALIZED VIEW IF NOT EXISTS session_seq_rollup_mv TO session_seq_rollup AS
SELECT session_id, host, toUInt64(max(seq)) AS max_seq, uniqExactStateIf(toUInt64(seq), seq > 0) AS stored
FROM events
WHERE session_id != ''
GROUP BY session_id, host;

-- agent_rollup: per agent name, the inputs of the `agents` view's columns.
CREATE TABLE IF NOT EXISTS agent_rollup
(
    agent LowCardinality(String),
    latest AggregateFunction(
        argMax,
        Tuple(String, String, String, String, String, String, String),
        Tuple(DateTime64(3, 'UTC'), String)
    ),
    state AggregateFunction(argMax, Tuple(String, String, String), Tuple(DateTime64(3, 'UTC'), String)),
    first_seen SimpleAggregateFunction(min, DateTime64(3, 'UTC')),
    last_seen SimpleAggregateFunction(max, DateTime64(3, 'UTC')),
    tool_calls SimpleAggregateFunction(sum, UInt64),
    errors SimpleAggregateFunction(sum, UInt64),
    events SimpleAggregateFunction(sum, UInt64)
)
ENGINE = AggregatingMergeTree
ORDER BY agent;

CREATE MATERIALIZED VIEW IF NOT EXISTS agent_rollup_mv TO agent_rollup AS
SELECT
    agent,
    argMaxState(
        (toString(team), toString(parent_agent), toString(agent_type), agent_id, session_id, toString(host),
         toString(event)),
        (timestamp, id)
    ) AS latest,
    argMaxStateIf((toString(event), note, toString(tool_name)), (timestamp, id), is_state) AS state,
    min(timestamp) AS first_seen,
    max(timestamp) AS last_seen,
    toUInt64(countIf(event = 'PreToolUse')) AS tool_calls,
    toUInt64(countIf(event IN ('PostToolUseFailure', 'StopFailure'))) AS errors,
    toUInt64(count()) AS events
FROM
(
    SELECT
        agent, team, parent_agent, agent_type, agent_id, session_id, host, tool_name, timestamp, id,
        event, note,
        event IN (
            'PreToolUse', 'PostToolUse', 'PostToolUseFailure', 'PermissionRequest',
            'PermissionDenied', 'UserPromptSubmit', 'UserPromptExpansion', 'Stop', 'StopFailure',
            'SubagentStart', 'SubagentStop', 'TeammateIdle', 'SessionStart', 'SessionEnd',
            'PreCompact', 'PostCompact', 'PostToolBatch', 'Elicitation', 'ElicitationResult'
        ) OR (event = 'Notification' AND note IN ('permission_prompt', 'idle_prompt')) AS is_state
    FROM
    (
        SELECT
            agent, team, parent_agent, agent_type, agent_id, session_id, host, tool_name, timestamp, id,
            event, if(event = 'Notification', JSONExtractString(data, 'notification_type'), '') AS note
        FROM events
    )
)
GROUP BY agent;

-- edge_hourly: per UTC hour, team, sender and recipient, the messages sent.
CREATE TABLE IF NOT EXISTS edge_hourly
(
    hour DateTime('UTC'),
    team LowCardinality(String),
    from_agent LowCardinality(String),
    to_agent LowCardinality(String),
    messages SimpleAggregateFunction(sum, UInt64),
    last_at SimpleAggregateFunction(max, DateTime64(3, 'UTC')),
    last_summary AggregateFunction(argMax, String, Tuple(DateTime64(3, 'UTC'), String))
)
ENGINE = AggregatingMergeTree
ORDER BY (hour, team, from_agent, to_agent);

CREATE MATERIALIZED VIEW IF NOT EXISTS edge_hourly_mv TO edge_hourly AS
SELECT
    toStartOfHour(timestamp) AS hour, team, from_agent, to_agent, toUInt64(count()) AS messages,
    max(timestamp) AS last_at, argMaxState(summary, (timestamp, id)) AS last_summary
FROM messages
GROUP BY hour, team, from_agent, to_agent;

-- usage_in: the store's insert target for API messages (a Null table: keeps nothing). A row with
-- sign 1 is stored in `usage` (usage_in_mv) and added to cost_hourly; a row with sign -1 is a copy
-- of a message the store replaced by a larger one (see `usage`'s version): it only takes its
-- figures back out of cost_hourly. One insert does both, so no crash can leave half of it done.
CREATE TABLE IF NOT EXISTS usage_in
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
    sign Int8 DEFAULT 1
)
ENGINE = Null;

CREATE MATERIALIZED VIEW IF NOT EXISTS usage_in_mv TO usage AS
SELECT
    session_id, message_id, request_id, timestamp, agent, team, parent_agent, agent_id, agent_type,
    subagent_id, subagent_type, host, model, input_tokens, output_tokens, cache_read_tokens,
    cache_write_tokens, cache_write_5m_tokens, cache_write_1h_tokens, cost_usd, price_model, sidechain,
    envelope_id, version
FROM usage_in
WHERE sign > 0;

-- The cost rollups. Their sums are signed, so a replaced copy's row (sign -1) cancels its figures;
-- the views keep the keys whose api_calls add up to more than 0. The states (the latest message's
-- fields, the first main-agent message, the sessions) take added rows only.

-- cost_hourly: per UTC hour, agent (with its parent), team and model: API messages, tokens, their
-- price, the sessions, the agent's latest message's team, parent, agent_id and type.
CREATE TABLE IF NOT EXISTS cost_hourly
(
    hour DateTime('UTC'),
    agent LowCardinality(String),
    parent_agent LowCardinality(String),
    team LowCardinality(String),
    model LowCardinality(String),
    api_calls SimpleAggregateFunction(sum, Int64),
    input_tokens SimpleAggregateFunction(sum, Int64),
    output_tokens SimpleAggregateFunction(sum, Int64),
    cache_read_tokens SimpleAggregateFunction(sum, Int64),
    cache_write_5m_tokens SimpleAggregateFunction(sum, Int64),
    cache_write_1h_tokens SimpleAggregateFunction(sum, Int64),
    priced_usd SimpleAggregateFunction(sum, Float64),
    unpriced_calls SimpleAggregateFunction(sum, Int64),
    first_at SimpleAggregateFunction(min, Nullable(DateTime64(3, 'UTC'))),
    last_at SimpleAggregateFunction(max, Nullable(DateTime64(3, 'UTC'))),
    sessions AggregateFunction(uniqExact, String),
    latest AggregateFunction(argMax, Tuple(String, String, String, String), Tuple(DateTime64(3, 'UTC'), String))
)
ENGINE = AggregatingMergeTree
ORDER BY (hour, agent, parent_agent, team, model);

CREATE MATERIALIZED VIEW IF NOT EXISTS cost_hourly_mv TO cost_hourly AS
SELECT
    toStartOfHour(timestamp) AS hour, agent, parent_agent, team, model,
    sum(toInt64(sign)) AS api_calls,
    sum(sign * toInt64(input_tokens)) AS input_tokens,
    sum(sign * toInt64(output_tokens)) AS output_tokens,
    sum(sign * toInt64(cache_read_tokens)) AS cache_read_tokens,
    sum(sign * toInt64(cache_write_5m_tokens)) AS cache_write_5m_tokens,
    sum(sign * toInt64(cache_write_1h_tokens)) AS cache_write_1h_tokens,
    sumIf(sign * assumeNotNull(cost_usd), cost_usd IS NOT NULL) AS priced_usd,
    sumIf(toInt64(sign), cost_usd IS NULL) AS unpriced_calls,
    minOrNullIf(timestamp, sign > 0) AS first_at,
    maxOrNullIf(timestamp, sign > 0) AS last_at,
    uniqExactStateIf(session_id, sign > 0) AS sessions,
    argMaxStateIf(
        (toString(team), toString(parent_agent), agent_id, toString(agent_type)), (timestamp, message_id), sign > 0
    ) AS latest
FROM usage_in
GROUP BY hour, agent, parent_agent, team, model;

-- cost_by_agent: per agent (with its parent), team and model, over all time: what agent_costs
-- and the dashboard's roster read (its rows do not grow with the history, only with the agents).
CREATE TABLE IF NOT EXISTS cost_by_agent
(
    agent LowCardinality(String),
    parent_agent LowCardinality(String),
    team LowCardinality(String),
    model LowCardinality(String),
    api_calls SimpleAggregateFunction(sum, Int64),
    input_tokens SimpleAggregateFunction(sum, Int64),
    output_tokens SimpleAggregateFunction(sum, Int64),
    cache_read_tokens SimpleAggregateFunction(sum, Int64),
    cache_write_5m_tokens SimpleAggregateFunction(sum, Int64),
    cache_write_1h_tokens SimpleAggregateFunction(sum, Int64),
    priced_usd SimpleAggregateFunction(sum, Float64),
    unpriced_calls SimpleAggregateFunction(sum, Int64),
    first_at SimpleAggregateFunction(min, Nullable(DateTime64(3, 'UTC'))),
    last_at SimpleAggregateFunction(max, Nullable(DateTime64(3, 'UTC'))),
    sessions AggregateFunction(uniqExact, String),
    latest AggregateFunction(argMax, Tuple(String, String, String, String), Tuple(DateTime64(3, 'UTC'), String))
)
ENGINE = AggregatingMergeTree
ORDER BY (agent, parent_agent, team, model);

CREATE MATERIALIZED VIEW IF NOT EXISTS cost_by_agent_mv TO cost_by_agent AS
SELECT
    agent, parent_agent, team, model,
    sum(toInt64(sign)) AS api_calls,
    sum(sign * toInt64(input_tokens)) AS input_tokens,
    sum(sign * toInt64(output_tokens)) AS output_tokens,
    sum(sign * toInt64(cache_read_tokens)) AS cache_read_tokens,
    sum(sign * toInt64(cache_write_5m_tokens)) AS cache_write_5m_tokens,
    sum(sign * toInt64(cache_write_1h_tokens)) AS cache_write_1h_tokens,
    sumIf(sign * assumeNotNull(cost_usd), cost_usd IS NOT NULL) AS priced_usd,
    sumIf(toInt64(sign), cost_usd IS NULL) AS unpriced_calls,
    minOrNullIf(timestamp, sign > 0) AS first_at,
    maxOrNullIf(timestamp, sign > 0) AS last_at,
    uniqExactStateIf(session_id, sign > 0) AS sessions,
    argMaxStateIf(
        (toString(team), toString(parent_agent), agent_id, toString(agent_type)), (timestamp, message_id), sign > 0
    ) AS latest
FROM usage_in
GROUP BY agent, parent_agent, team, model;

-- cost_by_day: per UTC day, team and model: what cost_daily reads.
CREATE TABLE IF NOT EXISTS cost_by_day
(
    day Date,
    team LowCardinality(String),
    model LowCardinality(String),
    api_calls SimpleAggregateFunction(sum, Int64),
    input_tokens SimpleAggregateFunction(sum, Int64),
    output_tokens SimpleAggregateFunction(sum, Int64),
    cache_read_tokens SimpleAggregateFunction(sum, Int64),
    cache_write_5m_tokens SimpleAggregateFunction(sum, Int64),
    cache_write_1h_tokens SimpleAggregateFunction(sum, Int64),
    priced_usd SimpleAggregateFunction(sum, Float64),
    unpriced_calls SimpleAggregateFunction(sum, Int64),
    sessions AggregateFunction(uniqExact, String),
    agents AggregateFunction(uniqExact, String)
)
ENGINE = AggregatingMergeTree
ORDER BY (day, team, model);

CREATE MATERIALIZED VIEW IF NOT EXISTS cost_by_day_mv TO cost_by_day AS
SELECT
    toDate(timestamp) AS day, team, model,
    sum(toInt64(sign)) AS api_calls,
    sum(sign * toInt64(input_tokens)) AS input_tokens,
    sum(sign * toInt64(output_tokens)) AS output_tokens,
    sum(sign * toInt64(cache_read_tokens)) AS cache_read_tokens,
    sum(sign * toInt64(cache_write_5m_tokens)) AS cache_write_5m_tokens,
    sum(sign * toInt64(cache_write_1h_tokens)) AS cache_write_1h_tokens,
    sumIf(sign * assumeNotNull(cost_usd), cost_usd IS NOT NULL) AS priced_usd,
    sumIf(toInt64(sign), cost_usd IS NULL) AS unpriced_calls,
    uniqExactStateIf(session_id, sign > 0) AS sessions,
    uniqExactStateIf(toString(agent), sign > 0) AS agents
FROM usage_in
GROUP BY day, team, model;

-- session_cost: per session, agent (with its parent), team and model: the same figures, and the
-- session's first message of a main agent (no agent_id), for session_costs.
CREATE TABLE IF NOT EXISTS session_cost
(
    session_id String,
    agent LowCardinality(String),
    parent_agent LowCardinality(String),
    team LowCardinality(String),
    model LowCardinality(String),
    api_calls SimpleAggregateFunction(sum, Int64),
    main_calls SimpleAggregateFunction(sum, Int64),
    input_tokens SimpleAggregateFunction(sum, Int64),
    output_tokens SimpleAggregateFunction(sum, Int64),
    cache_read_tokens SimpleAggregateFunction(sum, Int64),
    cache_write_5m_tokens SimpleAggregateFunction(sum, Int64),
    cache_write_1h_tokens SimpleAggregateFunction(sum, Int64),
    priced_usd SimpleAggregateFunction(sum, Float64),
    unpriced_calls SimpleAggregateFunction(sum, Int64),
    first_at SimpleAggregateFunction(min, Nullable(DateTime64(3, 'UTC'))),
    last_at SimpleAggregateFunction(max, Nullable(DateTime64(3, 'UTC'))),
    main AggregateFunction(argMin, Tuple(String, String), Tuple(DateTime64(3, 'UTC'), String))
)
ENGINE = AggregatingMergeTree
ORDER BY (session_id, agent, parent_agent, team, model)
-- Small granules: the dashboard reads a few hundred sessions by id, spread over the whole key.
SETTINGS index_granularity = 256;

CREATE MATERIALIZED VIEW IF NOT EXISTS session_cost_mv TO session_cost AS
SELECT
    session_id, agent, parent_agent, team, model,
    sum(toInt64(sign)) AS api_calls,
    sumIf(toInt64(sign), agent_id = '') AS main_calls,
    sum(sign * toInt64(input_tokens)) AS input_tokens,
    sum(sign * toInt64(output_tokens)) AS output_tokens,
    sum(sign * toInt64(cache_read_tokens)) AS cache_read_tokens,
    sum(sign * toInt64(cache_write_5m_tokens)) AS cache_write_5m_tokens,
    sum(sign * toInt64(cache_write_1h_tokens)) AS cache_write_1h_tokens,
    sumIf(sign * assumeNotNull(cost_usd), cost_usd IS NOT NULL) AS priced_usd,
    sumIf(toInt64(sign), cost_usd IS NULL) AS unpriced_calls,
    minOrNullIf(timestamp, sign > 0) AS first_at,
    maxOrNullIf(timestamp, sign > 0) AS last_at,
    argMinStateIf((toString(agent), toString(team)), (timestamp, message_id), sign > 0 AND agent_id = '') AS main
FROM usage_in
GROUP BY session_id, agent, parent_agent, team, model;

-- The documented views keep their names and columns, and now read the rollups.
CREATE OR REPLACE VIEW sessions AS
SELECT
    session_id, agent, team, host, cwd, started, ended, end_reason, last_seen, events, tool_calls,
    errors, prompts, subagents, outcome
FROM
(
    SELECT
        session_id,
        sum(main_events) AS main_n,
        if(main_n > 0, argMinMerge(main_agent), argMinMerge(parent_agent)) AS agent,
        if(main_n > 0, argMinMerge(main_team), argMinMerge(first_team)) AS team,
        argMinMerge(host) AS host,
        argMinMerge(cwd) AS cwd,
        coalesce(min(first_start), min(first_seen)) AS started,
        max(last_end) AS last_end_at,
        max(last_start) AS last_start_at,
        if(
            last_end_at IS NOT NULL AND (last_start_at IS NULL OR last_end_at >= last_start_at), last_end_at, NULL
        ) AS ended,
        if(ended IS NULL, '', argMaxMerge(end_reason)) AS end_reason,
        max(last_seen) AS last_seen,
        sum(events) AS events,
        sum(tool_calls) AS tool_calls,
        sum(errors) AS errors,
        sum(prompts) AS prompts,
        uniqExactMerge(subagents) AS subagents,
        argMaxMerge(last_turn) AS last_turn_event,
        multiIf(
            last_turn_event = 'StopFailure', 'failed',
            ended IS NOT NULL, 'ended',
            last_turn_event = 'Stop', 'idle',
            'running'
        ) AS outcome
    FROM session_rollup
    GROUP BY session_id
);

CREATE OR REPLACE VIEW agents AS
SELECT
    a.agent AS agent,
    a.latest.1 AS team,
    a.latest.2 AS parent_agent,
    a.latest.3 AS agent_type,
    a.latest.4 AS agent_id,
    a.latest.5 AS session_id,
    a.latest.6 AS host,
    a.first_seen AS first_seen,
    a.last_seen AS last_seen,
    a.latest.7 AS last_event,
    multiIf(
        a.state.1 = 'PreToolUse', 'working',
        a.state.1 IN ('PermissionRequest', 'Elicitation'), 'waiting',
        a.state.1 = 'Notification' AND a.state.2 = 'permission_prompt', 'waiting',
        a.state.1 IN ('Stop', 'SubagentStop', 'TeammateIdle', 'SessionStart', 'Notification'), 'idle',
        a.state.1 = 'SessionEnd', 'stopped',
        a.state.1 = 'StopFailure', 'failed',
        'thinking'
    ) AS state,
    if(a.state.1 = 'PreToolUse', a.state.3, '') AS current_tool,
    a.tool_calls AS tool_calls,
    a.errors AS errors,
    coalesce(m.sent, 0) AS messages_sent,
    a.events AS events
FROM
(
    SELECT
        agent, argMaxMerge(latest) AS latest, argMaxMerge(state) AS state, min(first_seen) AS first_seen,
        max(last_seen) AS last_seen, sum(tool_calls) AS tool_calls, sum(errors) AS errors, sum(events) AS events
    FROM agent_rollup
    GROUP BY agent
) AS a
LEFT JOIN
(
    SELECT toString(from_agent) AS from_agent, sum(messages) AS sent FROM edge_hourly GROUP BY from_agent
) AS m ON m.from_agent = toString(a.agent);

-- tool_stats: per tool and window (1h, 1d, 7d, all). A window is made of whole UTC hours: the
-- hours that began within it, the current one included (so "1h" covers 60 to 120 minutes).
--   window, tool
--   calls         PreToolUse events
--   failures      PostToolUseFailure events (interrupted included)
--   interrupted   of which is_interrupt was true
--   denied        PermissionDenied events
--   finished      results of any kind (PostToolUse, PostToolUseFailure, PermissionDenied)
--   failure_pct   100 * failures / finished, NULL when nothing finished
--   timed         results that reported duration_ms
--   p50_ms, p95_ms  quantiles of those durations (quantileTiming: exact below 1,024 ms, to 16 ms
--                 below 30 s; 30,000 stands for "30 s or more"); NULL when none was timed
--   max_ms        the longest reported duration, exact
--   unpaired      calls - finished when positive (calls still running, or whose result is missing)
--   last_error    the latest failure's error text
CREATE VIEW IF NOT EXISTS tool_stats AS
SELECT
    w.window AS window, tool, sum(calls) AS calls, sum(failures) AS failures,
    sum(interrupted) AS interrupted, sum(denied) AS denied, sum(finished) AS finished,
    if(finished = 0, NULL, round(100 * failures / finished, 1)) AS failure_pct,
    sum(timed) AS timed,
    quantilesTimingMerge(0.5, 0.95)(durations) AS q,
    if(timed = 0, NULL, toInt64(q[1])) AS p50_ms,
    if(timed = 0, NULL, toInt64(q[2])) AS p95_ms,
    max(max_ms) AS max_ms,
    toUInt64(greatest(toInt64(calls) - toInt64(finished), 0)) AS unpaired,
    argMaxMerge(last_error) AS last_error
FROM tool_hourly
INNER JOIN
(
    SELECT arrayJoin([('1h', 3600), ('1d', 86400), ('7d', 604800), ('all', 0)]) AS w_pair,
        w_pair.1 AS window, w_pair.2 AS seconds
) AS w ON 1 = 1
WHERE w.seconds = 0 OR hour >= toStartOfHour(now() - toIntervalSecond(w.seconds))
GROUP BY w.window, tool;

-- team_edges: per sender and recipient, the messages sent, from edge_hourly (hours as above).
--   team, from_agent, to_agent, messages, last_at, last_summary
CREATE VIEW IF NOT EXISTS team_edges AS
SELECT
    team, from_agent, to_agent, sum(messages) AS messages, max(last_at) AS last_at,
    argMaxMerge(last_summary) AS last_summary
FROM edge_hourly
GROUP BY team, from_agent, to_agent;

-- The cost views keep their names and columns (006_usage.sql says what each means), and now read
-- the cost rollups: first their rows summed per key, the keys whose messages were all replaced
-- left out.
CREATE OR REPLACE VIEW session_costs AS
SELECT
    session_id, agent, team, api_calls, input_tokens, output_tokens, cache_read_tokens,
    cache_write_5m_tokens, cache_write_1h_tokens,
    if(api_calls > 0 AND unpriced_calls = api_calls, NULL, coalesce(priced_usd, 0)) AS cost_usd,
    unpriced_calls, claude_cost_usd, models, first_at, last_at
FROM
(
    SELECT
        session_id,
        argMinMerge(main) AS main_agent_team,
        multiIf(
            sum(main_calls) > 0, main_agent_team.1,
            sum(calls) > 0, anyIf(parent_agent, is_usage AND parent_agent != ''),
            anyIf(agent, NOT is_usage)
        ) AS agent,
        multiIf(
            sum(main_calls) > 0, main_agent_team.2,
            sum(calls) > 0, anyIf(team, is_usage),
            anyIf(team, NOT is_usage)
        ) AS team,
        toUInt64(sum(calls)) AS api_calls,
        toUInt64(sum(input)) AS input_tokens,
        toUInt64(sum(output)) AS output_tokens,
        toUInt64(sum(cache_read)) AS cache_read_tokens,
        toUInt64(sum(cache_5m)) AS cache_write_5m_tokens,
        toUInt64(sum(cache_1h)) AS cache_write_1h_tokens,
        sumIf(priced, is_usage) AS priced_usd,
        toUInt64(sum(unpriced)) AS unpriced_calls,
        maxIf(claude_total, NOT is_usage) AS claude_cost_usd,
        arraySort(groupUniqArrayIf(model, is_usage)) AS models,
        if(sum(calls) > 0, minIf(first, is_usage), min(first)) AS first_at,
        if(sum(calls) > 0, maxIf(last, is_usage), max(last)) AS last_at
    FROM
    (
        SELECT
            session_id, true AS is_usage, agent, parent_agent, team, model, sum(api_calls) AS calls,
            sum(main_calls) AS main_calls, sum(input_tokens) AS input, sum(output_tokens) AS output,
            sum(cache_read_tokens) AS cache_read, sum(cache_write_5m_tokens) AS cache_5m,
            sum(cache_write_1h_tokens) AS cache_1h, sum(priced_usd) AS priced, sum(unpriced_calls) AS unpriced,
            CAST(NULL AS Nullable(Float64)) AS claude_total, assumeNotNull(min(first_at)) AS first,
            assumeNotNull(max(last_at)) AS last, argMinMergeState(main) AS main
        FROM session_cost
        GROUP BY session_id, agent, parent_agent, team, model
        HAVING calls > 0
        UNION ALL
        SELECT
            session_id, false AS is_usage, any(agent) AS agent, '' AS parent_agent, any(team) AS team,
            '' AS model, 0 AS calls, 0 AS main_calls, 0 AS input, 0 AS output, 0 AS cache_read,
            0 AS cache_5m, 0 AS cache_1h, 0 AS priced, 0 AS unpriced,
            CAST(max(total_cost_usd) AS Nullable(Float64)) AS claude_total, min(timestamp) AS first,
            max(timestamp) AS last, argMinStateIf(('', ''), (timestamp, ''), false) AS main
        FROM cost_states FINAL
        GROUP BY session_id
    )
    GROUP BY session_id
);

CREATE OR REPLACE VIEW agent_costs AS
SELECT
    a.agent AS agent,
    a.latest.1 AS team,
    a.latest.2 AS parent_agent,
    a.latest.3 AS agent_id,
    a.latest.4 AS agent_type,
    a.sessions AS sessions,
    a.api_calls AS api_calls,
    a.input_tokens AS input_tokens,
    a.output_tokens AS output_tokens,
    a.cache_read_tokens AS cache_read_tokens,
    a.cache_write_5m_tokens AS cache_write_5m_tokens,
    a.cache_write_1h_tokens AS cache_write_1h_tokens,
    if(a.unpriced_calls = a.api_calls, NULL, coalesce(a.priced_usd, 0)) AS cost_usd,
    a.unpriced_calls AS unpriced_calls,
    a.models AS models,
    a.first_at AS first_at,
    a.last_at AS last_at,
    coalesce(s.priced_usd, 0) AS subagents_cost_usd,
    coalesce(a.priced_usd, 0) + coalesce(s.priced_usd, 0) AS cost_with_subagents_usd
FROM
(
    SELECT
        agent,
        argMaxMerge(latest) AS latest,
        uniqExactMerge(sessions) AS sessions,
        toUInt64(sum(calls)) AS api_calls,
        toUInt64(sum(input)) AS input_tokens,
        toUInt64(sum(output)) AS output_tokens,
        toUInt64(sum(cache_read)) AS cache_read_tokens,
        toUInt64(sum(cache_5m)) AS cache_write_5m_tokens,
        toUInt64(sum(cache_1h)) AS cache_write_1h_tokens,
        sum(priced) AS priced_usd,
        toUInt64(sum(unpriced)) AS unpriced_calls,
        arraySort(groupUniqArray(model)) AS models,
        min(first) AS first_at,
        max(last) AS last_at
    FROM
    (
        SELECT
            agent, model, sum(api_calls) AS calls, sum(input_tokens) AS input, sum(output_tokens) AS output,
            sum(cache_read_tokens) AS cache_read, sum(cache_write_5m_tokens) AS cache_5m,
            sum(cache_write_1h_tokens) AS cache_1h, sum(priced_usd) AS priced, sum(unpriced_calls) AS unpriced,
            assumeNotNull(min(first_at)) AS first, assumeNotNull(max(last_at)) AS last,
            uniqExactMergeState(sessions) AS sessions, argMaxMergeState(latest) AS latest
        FROM cost_by_agent
        GROUP BY agent, parent_agent, team, model
        HAVING calls > 0
    )
    GROUP BY agent
) AS a
LEFT JOIN
(
    SELECT toString(parent_agent) AS parent_agent, sum(priced_usd) AS priced_usd
    FROM cost_by_agent
    WHERE parent_agent != ''
    GROUP BY parent_agent
) AS s ON s.parent_agent = toString(a.agent);

CREATE OR REPLACE VIEW cost_daily AS
SELECT
    day, team, model, sessions, agents, api_calls, input_tokens, output_tokens, cache_read_tokens,
    cache_write_5m_tokens, cache_write_1h_tokens,
    if(unpriced_calls = api_calls, NULL, coalesce(priced_usd, 0)) AS cost_usd,
    unpriced_calls
FROM
(
    SELECT
        day,
        team,
        model,
        uniqExactMerge(sessions) AS sessions,
        uniqExactMerge(agents) AS agents,
        toUInt64(sum(api_calls)) AS api_calls,
        toUInt64(sum(input_tokens)) AS input_tokens,
        toUInt64(sum(output_tokens)) AS output_tokens,
        toUInt64(sum(cache_read_tokens)) AS cache_read_tokens,
        toUInt64(sum(cache_write_5m_tokens)) AS cache_write_5m_tokens,
        toUInt64(sum(cache_write_1h_tokens)) AS cache_write_1h_tokens,
        sum(priced_usd) AS priced_usd,
        toUInt64(sum(unpriced_calls)) AS unpriced_calls
    FROM cost_by_day
    GROUP BY day, team, model
    HAVING api_calls > 0
);

-- call_events: the tool-call events of `events` (calls, results, denials), narrow, with the
-- payload fields the pairing needs read out at insert time, ordered by time: what
-- tool_calls_since reads. Like the rollups, it never sees a redelivered event (the writer keeps
-- them out); the pairing's aggregates give the same answer for a row seen twice anyway. Its rows
-- expire with the events' (RETENTION_TABLES).
CREATE TABLE IF NOT EXISTS call_events
(
    timestamp DateTime64(3, 'UTC'),
    id String,
    session_id String,
    tool_use_id String,
    event LowCardinality(String),
    agent LowCardinality(String),
    team LowCardinality(String),
    agent_id String,
    host LowCardinality(String),
    tool_name LowCardinality(String),
    text String,
    duration_ms Nullable(Int64),
    is_interrupt Bool,
    error String
)
ENGINE = ReplacingMergeTree
PARTITION BY toYYYYMM(timestamp)
ORDER BY (timestamp, id);

CREATE MATERIALIZED VIEW IF NOT EXISTS call_events_mv TO call_events AS
SELECT
    timestamp, id, session_id, tool_use_id, event, agent, team, agent_id, host, tool_name,
    if(event = 'PreToolUse', text, '') AS text,
    if(event = 'PreToolUse', NULL, duration_ms) AS duration_ms,
    if(event = 'PostToolUseFailure', JSONExtractBool(data, 'is_interrupt'), false) AS is_interrupt,
    if(event = 'PostToolUseFailure', JSONExtractString(data, 'error'), '') AS error
FROM events
WHERE tool_use_id != '' AND event IN ('PreToolUse', 'PostToolUse', 'PostToolUseFailure', 'PermissionDenied');

-- tool_calls_since(since = ...): the `tool_calls` columns for the calls that started at or after
-- `since`, paired from that window of call_events only (ordered by time), so its cost follows
-- the window, not the history:
--   SELECT * FROM tool_calls_since(since = now64(3) - INTERVAL 1 HOUR) WHERE status = 'error'
-- A result is paired with its call when both are in the window (a result comes after its call);
-- the results of calls started before `since` are left out, so no row is an orphan, and a call's
-- fields are its PreToolUse's (one per call; call_events keeps the text of calls only).
CREATE VIEW IF NOT EXISTS tool_calls_since AS
SELECT
    session_id,
    tool_use_id,
    anyIf(agent, event = 'PreToolUse') AS agent,
    anyIf(team, event = 'PreToolUse') AS team,
    anyIf(agent_id, event = 'PreToolUse') AS agent_id,
    anyIf(host, event = 'PreToolUse') AS host,
    anyIf(tool_name, event = 'PreToolUse') AS tool,
    anyIf(text, event = 'PreToolUse') AS text,
    minOrNullIf(timestamp, event = 'PreToolUse') AS started,
    maxOrNullIf(timestamp, event != 'PreToolUse') AS ended,
    coalesce(maxOrNullIf(duration_ms, event != 'PreToolUse'), dateDiff('millisecond', started, ended)) AS duration_ms,
    multiIf(
        max(event = 'PermissionDenied'), 'denied',
        max(event = 'PostToolUseFailure' AND is_interrupt), 'interrupted',
        max(event = 'PostToolUseFailure'), 'error',
        max(event = 'PostToolUse'), 'ok',
        'running'
    ) AS status,
    anyIf(error, event = 'PostToolUseFailure') AS error
FROM call_events
WHERE timestamp >= {since:DateTime64(3, 'UTC')}
GROUP BY session_id, tool_use_id
HAVING max(event = 'PreToolUse');

-- The backfill: the rollups of what was stored before they existed.
INSERT INTO event_ids SELECT id, timestamp FROM events;

INSERT INTO event_ids SELECT id, timestamp FROM messages;

INSERT INTO tool_hourly
SELECT
    toStartOfHour(timestamp) AS hour,
    tool_name AS tool,
    toUInt64(countIf(event = 'PreToolUse')) AS calls,
    toUInt64(countIf(event = 'PostToolUseFailure')) AS failures,
    toUInt64(countIf(event = 'PostToolUseFailure' AND JSONExtractBool(data, 'is_interrupt'))) AS interrupted,
    toUInt64(countIf(event = 'PermissionDenied')) AS denied,
    toUInt64(countIf(event != 'PreToolUse')) AS finished,
    toUInt64(countIf(event != 'PreToolUse' AND duration_ms IS NOT NULL)) AS timed,
    quantilesTimingStateIf(0.5, 0.95)(assumeNotNull(duration_ms), event != 'PreToolUse' AND duration_ms IS NOT NULL)
        AS durations,
    maxIf(duration_ms, event != 'PreToolUse') AS max_ms,
    argMaxStateIf(
        JSONExtractString(data, 'error'), (timestamp, id), event = 'PostToolUseFailure'
        AND JSONExtractString(data, 'error') != ''
    ) AS last_error
FROM events FINAL
WHERE tool_name != '' AND event IN ('PreToolUse', 'PostToolUse', 'PostToolUseFailure', 'PermissionDenied')
GROUP BY hour, tool;

INSERT INTO session_rollup
SELECT
    session_id,
    toUInt64(countIf(agent_id = '')) AS main_events,
    argMinStateIf(agent, (timestamp, id), agent_id = '') AS main_agent,
    argMinStateIf(parent_agent, (timestamp, id), parent_agent != '') AS parent_agent,
    argMinStateIf(team, (timestamp, id), agent_id = '') AS main_team,
    argMinState(team, (timestamp, id)) AS first_team,
    argMinStateIf(host, (timestamp, id), host != '') AS host,
    argMinStateIf(cwd, (timestamp, id), cwd != '') AS cwd,
    minOrNullIf(timestamp, event = 'SessionStart') AS first_start,
    min(timestamp) AS first_seen,
    maxOrNullIf(timestamp, event = 'SessionEnd') AS last_end,
    maxOrNullIf(timestamp, event = 'SessionStart') AS last_start,
    argMaxStateIf(
        if(event = 'SessionEnd', JSONExtractString(data, 'reason'), ''), (timestamp, id), event = 'SessionEnd'
    ) AS end_reason,
    max(timestamp) AS last_seen,
    toUInt64(count()) AS events,
    toUInt64(countIf(event = 'PreToolUse')) AS tool_calls,
    toUInt64(countIf(event IN ('PostToolUseFailure', 'StopFailure'))) AS errors,
    toUInt64(countIf(event = 'UserPromptSubmit')) AS prompts,
    uniqExactStateIf(agent_id, agent_id != '') AS subagents,
    argMaxStateIf(
        event, (timestamp, id), agent_id = '' AND event IN ('UserPromptSubmit', 'Stop', 'StopFailure')
    ) AS last_turn
FROM events FINAL
WHERE session_id != ''
GROUP BY session_id;

INSERT INTO session_seq_rollup
SELECT session_id, host, toUInt64(max(seq)) AS max_seq, uniqExactStateIf(toUInt64(seq), seq > 0) AS stored
FROM events FINAL
WHERE session_id != ''
GROUP BY session_id, host;

INSERT INTO agent_rollup
SELECT
    agent,
    argMaxState(
        (toString(team), toString(parent_agent), toString(agent_type), agent_id, session_id, toString(host),
         toString(event)),
        (timestamp, id)
    ) AS latest,
    argMaxStateIf((toString(event), note, toString(tool_name)), (timestamp, id), is_state) AS state,
    min(timestamp) AS first_seen,
    max(timestamp) AS last_seen,
    toUInt64(countIf(event = 'PreToolUse')) AS tool_calls,
    toUInt64(countIf(event IN ('PostToolUseFailure', 'StopFailure'))) AS errors,
    toUInt64(count()) AS events
FROM
(
    SELECT
        agent, team, parent_agent, agent_type, agent_id, session_id, host, tool_name, timestamp, id,
        event, note,
        event IN (
            'PreToolUse', 'PostToolUse', 'PostToolUseFailure', 'PermissionRequest',
            'PermissionDenied', 'UserPromptSubmit', 'UserPromptExpansion', 'Stop', 'StopFailure',
            'SubagentStart', 'SubagentStop', 'TeammateIdle', 'SessionStart', 'SessionEnd',
            'PreCompact', 'PostCompact', 'PostToolBatch', 'Elicitation', 'ElicitationResult'
        ) OR (event = 'Notification' AND note IN ('permission_prompt', 'idle_prompt')) AS is_state
    FROM
    (
        SELECT
            agent, team, parent_agent, agent_type, agent_id, session_id, host, tool_name, timestamp, id,
            event, if(event = 'Notification', JSONExtractString(data, 'notification_type'), '') AS note
        FROM events FINAL
    )
)
GROUP BY agent;

INSERT INTO edge_hourly
SELECT
    toStartOfHour(timestamp) AS hour, team, from_agent, to_agent, toUInt64(count()) AS messages,
    max(timestamp) AS last_at, argMaxState(summary, (timestamp, id)) AS last_summary
FROM messages FINAL
GROUP BY hour, team, from_agent, to_agent;

INSERT INTO cost_hourly
SELECT
    toStartOfHour(timestamp) AS hour, agent, parent_agent, team, model,
    toInt64(count()) AS api_calls,
    toInt64(sum(input_tokens)) AS input_tokens,
    toInt64(sum(output_tokens)) AS output_tokens,
    toInt64(sum(cache_read_tokens)) AS cache_read_tokens,
    toInt64(sum(cache_write_5m_tokens)) AS cache_write_5m_tokens,
    toInt64(sum(cache_write_1h_tokens)) AS cache_write_1h_tokens,
    sumIf(assumeNotNull(cost_usd), cost_usd IS NOT NULL) AS priced_usd,
    toInt64(countIf(cost_usd IS NULL)) AS unpriced_calls,
    minOrNull(timestamp) AS first_at,
    maxOrNull(timestamp) AS last_at,
    uniqExactState(session_id) AS sessions,
    argMaxState((toString(team), toString(parent_agent), agent_id, toString(agent_type)), (timestamp, message_id))
        AS latest
FROM usage FINAL
GROUP BY hour, agent, parent_agent, team, model;

INSERT INTO session_cost
SELECT
    session_id, agent, parent_agent, team, model,
    toInt64(count()) AS api_calls,
    toInt64(countIf(agent_id = '')) AS main_calls,
    toInt64(sum(input_tokens)) AS input_tokens,
    toInt64(sum(output_tokens)) AS output_tokens,
    toInt64(sum(cache_read_tokens)) AS cache_read_tokens,
    toInt64(sum(cache_write_5m_tokens)) AS cache_write_5m_tokens,
    toInt64(sum(cache_write_1h_tokens)) AS cache_write_1h_tokens,
    sumIf(assumeNotNull(cost_usd), cost_usd IS NOT NULL) AS priced_usd,
    toInt64(countIf(cost_usd IS NULL)) AS unpriced_calls,
    minOrNull(timestamp) AS first_at,
    maxOrNull(timestamp) AS last_at,
    argMinStateIf((toString(agent), toString(team)), (timestamp, message_id), agent_id = '') AS main
FROM usage FINAL
GROUP BY session_id, agent, parent_agent, team, model;

INSERT INTO call_events
SELECT
    timestamp, id, session_id, tool_use_id, event, agent, team, agent_id, host, tool_name,
    if(event = 'PreToolUse', text, '') AS text,
    if(event = 'PreToolUse', NULL, duration_ms) AS duration_ms,
    if(event = 'PostToolUseFailure', JSONExtractBool(data, 'is_interrupt'), false) AS is_interrupt,
    if(event = 'PostToolUseFailure', JSONExtractString(data, 'error'), '') AS error
FROM events FINAL
WHERE tool_use_id != '' AND event IN ('PreToolUse', 'PostToolUse', 'PostToolUseFailure', 'PermissionDenied');

INSERT INTO cost_by_agent
SELECT
    agent, parent_agent, team, model,
    toInt64(count()) AS api_calls,
    toInt64(sum(input_tokens)) AS input_tokens,
    toInt64(sum(output_tokens)) AS output_tokens,
    toInt64(sum(cache_read_tokens)) AS cache_read_tokens,
    toInt64(sum(cache_write_5m_tokens)) AS cache_write_5m_tokens,
    toInt64(sum(cache_write_1h_tokens)) AS cache_write_1h_tokens,
    sumIf(assumeNotNull(cost_usd), cost_usd IS NOT NULL) AS priced_usd,
    toInt64(countIf(cost_usd IS NULL)) AS unpriced_calls,
    minOrNull(timestamp) AS first_at,
    maxOrNull(timestamp) AS last_at,
    uniqExactState(session_id) AS sessions,
    argMaxState((toString(team), toString(parent_agent), agent_id, toString(agent_type)), (timestamp, message_id))
        AS latest
FROM usage FINAL
GROUP BY agent, parent_agent, team, model;

INSERT INTO cost_by_day
SELECT
    toDate(timestamp) AS day, team, model,
    toInt64(count()) AS api_calls,
    toInt64(sum(input_tokens)) AS input_tokens,
    toInt64(sum(output_tokens)) AS output_tokens,
    toInt64(sum(cache_read_tokens)) AS cache_read_tokens,
    toInt64(sum(cache_write_5m_tokens)) AS cache_write_5m_tokens,
    toInt64(sum(cache_write_1h_tokens)) AS cache_write_1h_tokens,
    sumIf(assumeNotNull(cost_usd), cost_usd IS NOT NULL) AS priced_usd,
    toInt64(countIf(cost_usd IS NULL)) AS unpriced_calls,
    uniqExactState(session_id) AS sessions,
    uniqExactState(toString(agent)) AS agents
FROM usage FINAL
GROUP BY day, team, model;
