-- session_costs for the newest sessions without aggregating every session's keys at each question.
--
-- session_costs (009) summed session_cost's rows per key (session, agent, parent, team, model),
-- merged their argMin states, added each session's cost_states FINAL and grouped it all again per
-- session: over every session of the history, since the engine does not push a question's
-- `ORDER BY last_at DESC LIMIT 200` into a view's GROUP BY (184 ms at 10M events, 4.2x the time at
-- 1M). It now reads session_totals: one row per session once merged, every column a simple
-- aggregate (sums, min and max of plain values and of tuples), which `FINAL` folds without
-- aggregate states, and the view only picks its columns from that row.
--
-- The figures are the same as 009's, but for one case the rollup cannot see: 009 left out a key
-- (agent, parent, team, model) whose every message was replaced by a copy under another key;
-- here such a message's first copy still counts in the session's first_at, last_at, its first
-- main-agent message and its subagents' parent (its tokens and price are taken back either way).

-- session_totals: per session, its usage's figures (signed, as in session_cost) and its last
-- cost-state.
--   calls, main_calls, input .. cache_1h, priced, unpriced   sums of the signed usage rows
--   model_set        the models of its messages (a copy has its message's model, so a replaced
--                    copy never leaves a model behind)
--   first_usage, last_usage   the time of its first and last stored message (copies included)
--   main             (time, message id, agent, team) of its first main-agent message (no
--                    agent_id); (2299-12-31 23:59:59.999, '', '', '') when it has none
--   parent           its subagents' parent (the largest name, when they have several)
--   usage_team       its messages' team (the largest)
--   claude           (1, version, total_cost_usd, time, agent, team) of its cost-state with the
--                    largest version, what cost_states FINAL keeps; all zero when it has none
CREATE TABLE IF NOT EXISTS session_totals
(
    session_id String,
    calls SimpleAggregateFunction(sum, Int64),
    main_calls SimpleAggregateFunction(sum, Int64),
    input SimpleAggregateFunction(sum, Int64),
    output SimpleAggregateFunction(sum, Int64),
    cache_read SimpleAggregateFunction(sum, Int64),
    cache_5m SimpleAggregateFunction(sum, Int64),
    cache_1h SimpleAggregateFunction(sum, Int64),
    priced SimpleAggregateFunction(sum, Float64),
    unpriced SimpleAggregateFunction(sum, Int64),
    model_set SimpleAggregateFunction(groupUniqArrayArray, Array(String)),
    first_usage SimpleAggregateFunction(min, Nullable(DateTime64(3, 'UTC'))),
    last_usage SimpleAggregateFunction(max, Nullable(DateTime64(3, 'UTC'))),
    main SimpleAggregateFunction(min, Tuple(DateTime64(3, 'UTC'), String, String, String))
        DEFAULT (toDateTime64('2299-12-31 23:59:59.999', 3, 'UTC'), '', '', ''),
    parent SimpleAggregateFunction(max, String),
    usage_team SimpleAggregateFunction(max, String),
    claude SimpleAggregateFunction(max, Tuple(UInt8, UInt64, Float64, DateTime64(3, 'UTC'), String, String))
)
ENGINE = AggregatingMergeTree
ORDER BY session_id;

CREATE MATERIALIZED VIEW IF NOT EXISTS session_totals_usage_mv TO session_totals AS
SELECT
    session_id,
    sum(toInt64(sign)) AS calls,
    sumIf(toInt64(sign), agent_id = '') AS main_calls,
    sum(sign * toInt64(input_tokens)) AS input,
    sum(sign * toInt64(output_tokens)) AS output,
    sum(sign * toInt64(cache_read_tokens)) AS cache_read,
    sum(sign * toInt64(cache_write_5m_tokens)) AS cache_5m,
    sum(sign * toInt64(cache_write_1h_tokens)) AS cache_1h,
    sumIf(sign * assumeNotNull(cost_usd), cost_usd IS NOT NULL) AS priced,
    sumIf(toInt64(sign), cost_usd IS NULL) AS unpriced,
    groupUniqArrayIf(toString(model), sign > 0) AS model_set,
    minOrNullIf(timestamp, sign > 0) AS first_usage,
    maxOrNullIf(timestamp, sign > 0) AS last_usage,
    min(
        if(
            sign > 0 AND agent_id = '', (timestamp, message_id, toString(agent), toString(team)),
            (toDateTime64('2299-12-31 23:59:59.999', 3, 'UTC'), '', '', '')
        )
    ) AS main,
    maxIf(toString(parent_agent), sign > 0) AS parent,
    maxIf(toString(team), sign > 0) AS usage_team
FROM usage_in
GROUP BY session_id;

CREATE MATERIALIZED VIEW IF NOT EXISTS session_totals_states_mv TO session_totals AS
SELECT
    session_id,
    max((toUInt8(1), version, total_cost_usd, timestamp, toString(agent), toString(team))) AS claude
FROM cost_states
GROUP BY session_id;

-- The view: 006_usage.sql says what each column means.
CREATE OR REPLACE VIEW session_costs AS
SELECT
    session_id,
    multiIf(main_calls > 0, main.3, calls > 0, parent, claude.5) AS agent,
    multiIf(main_calls > 0, main.4, calls > 0, usage_team, claude.6) AS team,
    toUInt64(greatest(calls, 0)) AS api_calls,
    toUInt64(if(calls > 0, input, 0)) AS input_tokens,
    toUInt64(if(calls > 0, output, 0)) AS output_tokens,
    toUInt64(if(calls > 0, cache_read, 0)) AS cache_read_tokens,
    toUInt64(if(calls > 0, cache_5m, 0)) AS cache_write_5m_tokens,
    toUInt64(if(calls > 0, cache_1h, 0)) AS cache_write_1h_tokens,
    if(calls > 0 AND unpriced = calls, NULL, if(calls > 0, priced, 0)) AS cost_usd,
    toUInt64(if(calls > 0, unpriced, 0)) AS unpriced_calls,
    if(claude.1 = 1, claude.3, NULL) AS claude_cost_usd,
    if(calls > 0, arraySort(model_set), []) AS models,
    if(calls > 0, assumeNotNull(first_usage), claude.4) AS first_at,
    if(calls > 0, assumeNotNull(last_usage), claude.4) AS last_at
FROM session_totals FINAL
WHERE calls > 0 OR claude.1 = 1;

-- The backfill: what was stored before (one row per message: usage FINAL; cost_states as they are).
INSERT INTO session_totals (
    session_id, calls, main_calls, input, output, cache_read, cache_5m, cache_1h, priced, unpriced, model_set,
    first_usage, last_usage, main, parent, usage_team, claude
)
SELECT
    session_id,
    toInt64(count()) AS calls,
    toInt64(countIf(agent_id = '')) AS main_calls,
    toInt64(sum(input_tokens)) AS input,
    toInt64(sum(output_tokens)) AS output,
    toInt64(sum(cache_read_tokens)) AS cache_read,
    toInt64(sum(cache_write_5m_tokens)) AS cache_5m,
    toInt64(sum(cache_write_1h_tokens)) AS cache_1h,
    sumIf(assumeNotNull(cost_usd), cost_usd IS NOT NULL) AS priced,
    toInt64(countIf(cost_usd IS NULL)) AS unpriced,
    groupUniqArray(toString(model)) AS model_set,
    minOrNull(timestamp) AS first_usage,
    maxOrNull(timestamp) AS last_usage,
    min(
        if(
            agent_id = '', (timestamp, message_id, toString(agent), toString(team)),
            (toDateTime64('2299-12-31 23:59:59.999', 3, 'UTC'), '', '', '')
        )
    ) AS main,
    max(toString(parent_agent)) AS parent,
    max(toString(team)) AS usage_team,
    (toUInt8(0), toUInt64(0), toFloat64(0), toDateTime64(0, 3, 'UTC'), '', '') AS claude
FROM usage FINAL
GROUP BY session_id;

INSERT INTO session_totals (session_id, claude)
SELECT session_id, max((toUInt8(1), version, total_cost_usd, timestamp, toString(agent), toString(team)))
FROM cost_states
GROUP BY session_id;
