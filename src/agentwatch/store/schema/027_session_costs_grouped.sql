-- session_costs without FINAL and without a join, so that a question about some sessions reads
-- those sessions' rows alone.
--
-- 021's view read `session_totals FINAL` and joined every session's owner (session_owner, grouped
-- per session) to it. FINAL merges every row of every granule it reads before a WHERE on
-- session_id is applied, and the join's right side was built whole at each question: even "the
-- sessions of the last day" (docs/queries.md) folded all of them (70 ms at 10M events, 78 ms for
-- every session). Now:
--   owner   session_totals gains each session's latest (time, person, repo, branch), fed as
--           session_owner is (its events, its usage), so the view needs no join
--   the view groups session_totals by session_id, each column by its own aggregate: a WHERE on
--           session_id (an IN over scope_hours' last day) is applied before the grouping, to the
--           rows of those sessions alone
-- The figures are 021's: the same aggregates FINAL applied, the same owner.
ALTER TABLE session_totals ADD COLUMN IF NOT EXISTS owner SimpleAggregateFunction(max, Tuple(DateTime64(3, 'UTC'), String, String, String));

CREATE MATERIALIZED VIEW IF NOT EXISTS session_totals_owner_mv TO session_totals AS
SELECT session_id, max((timestamp, toString(person), toString(repo), toString(branch))) AS owner
FROM events
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
FROM
(
    SELECT
        session_id, sum(t.calls) AS calls, sum(t.main_calls) AS main_calls, sum(t.input) AS input,
        sum(t.output) AS output, sum(t.cache_read) AS cache_read, sum(t.cache_5m) AS cache_5m,
        sum(t.cache_1h) AS cache_1h, sum(t.priced) AS priced, sum(t.unpriced) AS unpriced,
        groupUniqArrayArray(t.model_set) AS model_set, min(t.first_usage) AS first_usage,
        max(t.last_usage) AS last_usage, min(t.main) AS main, max(t.parent) AS parent,
        max(t.usage_team) AS usage_team, max(t.claude) AS claude, max(t.owner) AS owner
    FROM session_totals AS t
    GROUP BY session_id
)
WHERE calls > 0 OR claude.1 = 1;

-- The backfill: the owners stored before (max is idempotent: a row the new views also wrote meanwhile
-- changes nothing).
INSERT INTO session_totals (session_id, owner)
SELECT session_id, max(owner) FROM session_owner GROUP BY session_id;
