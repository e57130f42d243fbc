-- Who, where, which repository (issue 37): the session's person, repository and branch, which the
-- hook learns once per session from git's files (emitter/attribution.py) and every envelope carries.
-- Numbered 021: 020 is taken by the live window's table.
--
-- events and usage gain three columns (the envelope's fields of the same names):
--   person   git's user.email for the session's repository, else the OS user; a salted hash
--            (`h-...`) under AGENTWATCH_PERSON_MODE=hash; '' under `off`
--   repo     the `origin` remote as host/owner/name (never a credential), else the top-level
--            folder's name; '' outside a repository
--   branch   HEAD's branch, or the short commit of a detached head; '' outside a repository
-- What was stored before this migration has none: no stored row says which repository its cwd
-- was in (git's files are read by the hook, on the agent's host), so those rows keep '' and are
-- counted under '' in the rollups below. Usage sent by the hook or imported from now on carries them.
ALTER TABLE events ADD COLUMN IF NOT EXISTS person LowCardinality(String) DEFAULT '';
ALTER TABLE events ADD COLUMN IF NOT EXISTS repo LowCardinality(String) DEFAULT '';
ALTER TABLE events ADD COLUMN IF NOT EXISTS branch LowCardinality(String) DEFAULT '';
ALTER TABLE events_in ADD COLUMN IF NOT EXISTS person String DEFAULT '';
ALTER TABLE events_in ADD COLUMN IF NOT EXISTS repo String DEFAULT '';
ALTER TABLE events_in ADD COLUMN IF NOT EXISTS branch String DEFAULT '';
ALTER TABLE usage ADD COLUMN IF NOT EXISTS person LowCardinality(String) DEFAULT '';
ALTER TABLE usage ADD COLUMN IF NOT EXISTS repo LowCardinality(String) DEFAULT '';
ALTER TABLE usage ADD COLUMN IF NOT EXISTS branch LowCardinality(String) DEFAULT '';
ALTER TABLE usage_in ADD COLUMN IF NOT EXISTS person LowCardinality(String) DEFAULT '';
ALTER TABLE usage_in ADD COLUMN IF NOT EXISTS repo LowCardinality(String) DEFAULT '';
ALTER TABLE usage_in ADD COLUMN IF NOT EXISTS branch LowCardinality(String) DEFAULT '';

-- The views that store events_in's and usage_in's rows pass the three columns on.
ALTER TABLE events_in_mv MODIFY QUERY
SELECT
    id, timestamp, v, event, kind, agent, team, direction, peer, text, source, session_id, agent_id,
    agent_type, parent_agent, tool_name, tool_use_id, host, cwd, redacted, truncated, data, seq,
    spool_bytes, prompt_id, duration_ms, permission_mode, model, harness, harness_event, person, repo,
    branch
FROM events_in;

ALTER TABLE usage_in_mv MODIFY QUERY
SELECT
    session_id, message_id, request_id, timestamp, agent, team, parent_agent, agent_id, agent_type,
    subagent_id, subagent_type, host, model, input_tokens, output_tokens, cache_read_tokens,
    cache_write_tokens, cache_write_5m_tokens, cache_write_1h_tokens, cost_usd, price_model, sidechain,
    envelope_id, version, harness, reasoning_tokens, hour, person, repo, branch
FROM usage_in
WHERE sign > 0;

-- cost_by_owner: per UTC hour, person, repository, branch and model: API messages, tokens, their
-- price and the sessions, signed like the other cost rollups (009_rollups.sql), so a replaced copy
-- cancels itself. What `agentwatch cost --by person|repo|branch` reads; a day is its hours summed.
CREATE TABLE IF NOT EXISTS cost_by_owner
(
    hour DateTime('UTC'),
    person LowCardinality(String),
    repo LowCardinality(String),
    branch LowCardinality(String),
    model LowCardinality(String),
    api_calls SimpleAggregateFunction(sum, Int64),
    input_tokens SimpleAggregateFunction(sum, Int64),
    output_tokens SimpleAggregateFunction(sum, Int64),
    cache_read_tokens SimpleAggregateFunction(sum, Int64),
    cache_write_5m_tokens SimpleAggregateFunction(sum, Int64),
    cache_write_1h_tokens SimpleAggregateFunction(sum, Int64),
    priced_usd SimpleAggregateFunction(sum, Float64),
    unpriced_calls SimpleAggregateFunction(sum, Int64),
    sessions AggregateFunction(uniqExact, String)
)
ENGINE = AggregatingMergeTree
ORDER BY (hour, person, repo, branch, model);

CREATE MATERIALIZED VIEW IF NOT EXISTS cost_by_owner_mv TO cost_by_owner AS
SELECT
    toStartOfHour(timestamp) AS hour, person, repo, branch, model,
    sum(toInt64(sign)) AS api_calls,
    sum(sign * toInt64(input_tokens)) AS input_tokens,
    sum(sign * toInt64(output_tokens)) AS output_tokens,
    sum(sign * toInt64(cache_read_tokens)) AS cache_read_tokens,
    sum(sign * toInt64(cache_write_5m_tokens)) AS cache_write_5m_tokens,
    sum(sign * toInt64(cache_write_1h_tokens)) AS cache_write_1h_tokens,
    sumIf(sign * assumeNotNull(cost_usd), cost_usd IS NOT NULL) AS priced_usd,
    sumIf(toInt64(sign), cost_usd IS NULL) AS unpriced_calls,
    uniqExactStateIf(session_id, sign > 0) AS sessions
FROM usage_in
GROUP BY hour, person, repo, branch, model;

-- The usage stored before this migration, counted once (under '', see above).
INSERT INTO cost_by_owner
SELECT
    toStartOfHour(timestamp) AS hour, person, repo, branch, model,
    toInt64(count()) AS api_calls,
    sum(toInt64(input_tokens)) AS input_tokens,
    sum(toInt64(output_tokens)) AS output_tokens,
    sum(toInt64(cache_read_tokens)) AS cache_read_tokens,
    sum(toInt64(cache_write_5m_tokens)) AS cache_write_5m_tokens,
    sum(toInt64(cache_write_1h_tokens)) AS cache_write_1h_tokens,
    sumIf(assumeNotNull(cost_usd), cost_usd IS NOT NULL) AS priced_usd,
    toInt64(countIf(cost_usd IS NULL)) AS unpriced_calls,
    uniqExactState(session_id) AS sessions
FROM usage FINAL
GROUP BY hour, person, repo, branch, model;

-- activity_by_owner: per UTC hour, person, repository and branch: events, tool calls, failed tool
-- calls, sessions and agents (events are stored once each: event_ids keeps repeats out).
CREATE TABLE IF NOT EXISTS activity_by_owner
(
    hour DateTime('UTC'),
    person LowCardinality(String),
    repo LowCardinality(String),
    branch LowCardinality(String),
    events SimpleAggregateFunction(sum, UInt64),
    tool_calls SimpleAggregateFunction(sum, UInt64),
    tool_errors SimpleAggregateFunction(sum, UInt64),
    sessions AggregateFunction(uniqExact, String),
    agents AggregateFunction(uniqExact, String)
)
ENGINE = AggregatingMergeTree
ORDER BY (hour, person, repo, branch);

CREATE MATERIALIZED VIEW IF NOT EXISTS activity_by_owner_mv TO activity_by_owner AS
SELECT
    toStartOfHour(timestamp) AS hour, person, repo, branch,
    count() AS events,
    countIf(event = 'PreToolUse') AS tool_calls,
    countIf(event = 'PostToolUseFailure') AS tool_errors,
    uniqExactStateIf(session_id, session_id != '') AS sessions,
    uniqExactState(agent) AS agents
FROM events
GROUP BY hour, person, repo, branch;

INSERT INTO activity_by_owner
SELECT
    toStartOfHour(timestamp) AS hour, person, repo, branch,
    count() AS events,
    countIf(event = 'PreToolUse') AS tool_calls,
    countIf(event = 'PostToolUseFailure') AS tool_errors,
    uniqExactStateIf(session_id, session_id != '') AS sessions,
    uniqExactState(agent) AS agents
FROM events FINAL
GROUP BY hour, person, repo, branch;

-- The sessions' owner: `sessions` and `session_costs` gain person, repo and branch, each the
-- session's latest (by time; a session keeps one unless its branch was switched), from
-- session_owner: one row per session once merged, fed by its events and by its usage (a session
-- imported from its transcripts has no events).
CREATE TABLE IF NOT EXISTS session_owner
(
    session_id String,
    owner SimpleAggregateFunction(max, Tuple(DateTime64(3, 'UTC'), String, String, String))
)
ENGINE = AggregatingMergeTree
ORDER BY session_id;

CREATE MATERIALIZED VIEW IF NOT EXISTS session_owner_mv TO session_owner AS
SELECT session_id, max((timestamp, toString(person), toString(repo), toString(branch))) AS owner
FROM events
WHERE session_id != ''
GROUP BY session_id;

CREATE MATERIALIZED VIEW IF NOT EXISTS session_owner_usage_mv TO session_owner AS
SELECT session_id, max((timestamp, toString(person), toString(repo), toString(branch))) AS owner
FROM usage_in
WHERE sign > 0 AND session_id != ''
GROUP BY session_id;

-- The views: 019's session_costs and 009's sessions, each with the three columns at its end.
CREATE OR REPLACE VIEW session_costs AS
SELECT
    t.session_id AS session_id,
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
    o.owner.2 AS person,
    o.owner.3 AS repo,
    o.owner.4 AS branch
FROM session_totals AS t FINAL
LEFT JOIN (SELECT session_id, max(owner) AS owner FROM session_owner GROUP BY session_id) AS o
    ON o.session_id = t.session_id
WHERE calls > 0 OR claude.1 = 1;

CREATE OR REPLACE VIEW sessions AS
SELECT
    r.session_id AS session_id, agent, team, host, cwd, started, ended, end_reason, last_seen, events,
    tool_calls, errors, prompts, subagents, outcome, o.owner.2 AS person, o.owner.3 AS repo,
    o.owner.4 AS branch
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
) AS r
LEFT JOIN (SELECT session_id, max(owner) AS owner FROM session_owner GROUP BY session_id) AS o
    ON o.session_id = r.session_id;
