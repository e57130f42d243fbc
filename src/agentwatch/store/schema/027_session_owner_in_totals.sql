-- session_costs without its join: each session's owner in session_totals itself.
--
-- 021's view joined every session's owner (session_owner, grouped per session) to
-- `session_totals FINAL`: the join's right side was built from every session of the history at
-- each question, whatever the question asked. Now session_totals gains
--   owner   each session's latest (time, person, repo, branch), from its events and its usage
--           as session_owner has it
-- and the view reads `session_totals FINAL` alone. The figures are 021's.
ALTER TABLE session_totals ADD COLUMN IF NOT EXISTS owner SimpleAggregateFunction(max, Tuple(DateTime64(3, 'UTC'), String, String, String));

-- Fed from events_in, where the store inserts the events (016), not from `events`: on a cluster
-- events_in is on every node and session_totals is sharded by session, so a session's owner rows
-- meet its usage rows on one shard, which FINAL needs (`events` is sharded by event id).
CREATE MATERIALIZED VIEW IF NOT EXISTS session_totals_owner_mv TO session_totals AS
SELECT session_id, max((timestamp, person, repo, branch)) AS owner
FROM events_in
WHERE session_id != ''
GROUP BY session_id;

-- A session's usage names its owner too (a session imported from its transcripts has no events).
ALTER TABLE session_totals_usage_mv MODIFY QUERY
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
    maxIf(toString(team), sign > 0) AS usage_team,
    maxIf((timestamp, toString(person), toString(repo), toString(branch)), sign > 0 AND session_id != '') AS owner
FROM usage_in
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
    if(calls > 0, assumeNotNull(last_usage), claude.4) AS last_at,
    owner.2 AS person,
    owner.3 AS repo,
    owner.4 AS branch
FROM session_totals FINAL
WHERE calls > 0 OR claude.1 = 1;

-- The backfill: the owners stored before (max is idempotent: a row the new views also wrote meanwhile
-- changes nothing).
INSERT INTO session_totals (session_id, owner)
SELECT session_id, max(owner) FROM session_owner GROUP BY session_id;
