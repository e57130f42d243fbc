-- Token usage and cost, from the usage envelopes the hook (and `agentwatch import`) reads out of
-- Claude Code's transcripts (subject genie.agent.{agent}.usage; see the README's "What it costs").
-- The store prices each API message with genai-prices, at the price valid at the message's time.

-- usage: one row per API message.
--   session_id, message_id, request_id
--                 the message's session, Anthropic's message id, and its request id (requestId,
--                 or requestRef in Claude Code 2.1.330): the key, one row each
--   timestamp     the message's time, from the transcript
--   agent, team, parent_agent, agent_id, agent_type, host
--                 the agent whose transcript it is, as its hook events name it
--   subagent_id, subagent_type
--                 set when it came from a subagent's or teammate's own transcript
--   model         the model that answered
--   input_tokens, output_tokens, cache_read_tokens
--                 as Anthropic reports them (input_tokens excludes the cache's)
--   cache_write_tokens, cache_write_5m_tokens, cache_write_1h_tokens
--                 cache writes, and their split by time to live
--   cost_usd      the price of those tokens; NULL when the price table does not know the model
--                 (shown as "unpriced", never as $0)
--   price_model   the price table's id of the model priced ('' when unpriced)
--   sidechain     the line was marked as a sidechain's
--   envelope_id   the usage envelope's id
--   version       2 * all tokens + (not a sidechain): of the copies of one message (read again,
--                 sent again, imported after the hook sent it) the one with the largest usage is
--                 kept, the original before a sidechain's copy when they are equal
-- ReplacingMergeTree: read it with FINAL (the views do) so a message is counted once even before
-- the background merge. Not partitioned: copies of one message must meet in one part set.
CREATE TABLE IF NOT EXISTS usage
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
    stored_at DateTime64(3, 'UTC') DEFAULT now64(3)
)
ENGINE = ReplacingMergeTree(version)
ORDER BY (session_id, message_id, request_id);

-- cost_states: Claude Code's own running total per session (its last cost-state record, which
-- includes the session's subagents and teammates).
--   session_id, timestamp, agent, team, host
--   total_cost_usd  Claude Code's totalCostUSD
--   input_tokens, output_tokens, cache_read_tokens, cache_write_5m_tokens, cache_write_1h_tokens
--                   its modelUsage summed over the models
--   model_usage     its modelUsage, as JSON text ({model: {inputTokens, outputTokens, ..., costUSD}})
--   version         all its tokens: a running total only grows, so the largest is the last
CREATE TABLE IF NOT EXISTS cost_states
(
    session_id String,
    timestamp DateTime64(3, 'UTC'),
    agent LowCardinality(String),
    team LowCardinality(String),
    host LowCardinality(String),
    total_cost_usd Float64,
    input_tokens UInt64,
    output_tokens UInt64,
    cache_read_tokens UInt64,
    cache_write_5m_tokens UInt64,
    cache_write_1h_tokens UInt64,
    model_usage String CODEC(ZSTD(3)),
    envelope_id String,
    version UInt64,
    stored_at DateTime64(3, 'UTC') DEFAULT now64(3)
)
ENGINE = ReplacingMergeTree(version)
ORDER BY session_id;

-- session_costs: one row per session with usage or a cost-state.
--   session_id
--   agent, team     the session's main agent (the agent of its usage without agent_id; the
--                   subagents' parent when only theirs was read) and its team
--   api_calls       API messages
--   input_tokens, output_tokens, cache_read_tokens, cache_write_5m_tokens, cache_write_1h_tokens
--   cost_usd        their price, subagents and teammates included; NULL when no message of it
--                   could be priced (see unpriced_calls)
--   unpriced_calls  messages of a model the price table does not know (not in cost_usd)
--   claude_cost_usd Claude Code's own total (its last cost-state), NULL when none was read
--   models          the models used
--   first_at, last_at  the first and last message's time
CREATE VIEW IF NOT EXISTS session_costs AS
SELECT
    session_id, agent, team, api_calls, input_tokens, output_tokens, cache_read_tokens,
    cache_write_5m_tokens, cache_write_1h_tokens,
    if(api_calls > 0 AND unpriced_calls = api_calls, NULL, coalesce(priced_usd, 0)) AS cost_usd,
    unpriced_calls, claude_cost_usd, models, first_at, last_at
FROM
(
    SELECT
        session_id,
        multiIf(
            countIf(is_usage AND agent_id = '') > 0,
            argMinIf(agent, (timestamp, message_id), is_usage AND agent_id = ''),
            countIf(is_usage) > 0,
            anyIf(parent_agent, is_usage AND parent_agent != ''),
            anyIf(agent, NOT is_usage)
        ) AS agent,
        multiIf(
            countIf(is_usage AND agent_id = '') > 0,
            argMinIf(team, (timestamp, message_id), is_usage AND agent_id = ''),
            countIf(is_usage) > 0,
            anyIf(team, is_usage),
            anyIf(team, NOT is_usage)
        ) AS team,
        countIf(is_usage) AS api_calls,
        sum(input_tokens) AS input_tokens,
        sum(output_tokens) AS output_tokens,
        sum(cache_read_tokens) AS cache_read_tokens,
        sum(cache_write_5m_tokens) AS cache_write_5m_tokens,
        sum(cache_write_1h_tokens) AS cache_write_1h_tokens,
        sumIf(price, is_usage) AS priced_usd,
        countIf(is_usage AND price IS NULL) AS unpriced_calls,
        maxIf(claude_total, NOT is_usage) AS claude_cost_usd,
        arraySort(groupUniqArrayIf(model, is_usage)) AS models,
        if(countIf(is_usage) > 0, minIf(timestamp, is_usage), min(timestamp)) AS first_at,
        if(countIf(is_usage) > 0, maxIf(timestamp, is_usage), max(timestamp)) AS last_at
    FROM
    (
        SELECT
            session_id, true AS is_usage, agent, team, parent_agent, agent_id, message_id, timestamp,
            model, input_tokens, output_tokens, cache_read_tokens, cache_write_5m_tokens,
            cache_write_1h_tokens, cost_usd AS price, CAST(NULL AS Nullable(Float64)) AS claude_total
        FROM usage FINAL
        UNION ALL
        SELECT
            session_id, false AS is_usage, agent, team, '' AS parent_agent, '' AS agent_id,
            '' AS message_id, timestamp, '' AS model, 0 AS input_tokens, 0 AS output_tokens,
            0 AS cache_read_tokens, 0 AS cache_write_5m_tokens, 0 AS cache_write_1h_tokens,
            CAST(NULL AS Nullable(Float64)) AS price, total_cost_usd AS claude_total
        FROM cost_states FINAL
    )
    GROUP BY session_id
);

-- agent_costs: one row per agent (main agents, subagents, teammates).
--   agent, team, parent_agent, agent_id, agent_type  from its latest message
--   sessions        how many sessions it spent in
--   api_calls, input_tokens, output_tokens, cache_read_tokens, cache_write_5m_tokens,
--   cache_write_1h_tokens, cost_usd, unpriced_calls, models, first_at, last_at
--                   as in session_costs, for its own messages
--   subagents_cost_usd     what the agents whose parent it is cost
--   cost_with_subagents_usd  cost_usd + subagents_cost_usd
CREATE VIEW IF NOT EXISTS agent_costs AS
SELECT
    a.agent AS agent,
    a.team AS team,
    a.parent_agent AS parent_agent,
    a.agent_id AS agent_id,
    a.agent_type AS agent_type,
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
        argMax(team, (timestamp, message_id)) AS team,
        argMax(parent_agent, (timestamp, message_id)) AS parent_agent,
        argMax(agent_id, (timestamp, message_id)) AS agent_id,
        argMax(agent_type, (timestamp, message_id)) AS agent_type,
        uniqExact(session_id) AS sessions,
        count() AS api_calls,
        sum(input_tokens) AS input_tokens,
        sum(output_tokens) AS output_tokens,
        sum(cache_read_tokens) AS cache_read_tokens,
        sum(cache_write_5m_tokens) AS cache_write_5m_tokens,
        sum(cache_write_1h_tokens) AS cache_write_1h_tokens,
        sum(cost_usd) AS priced_usd,
        countIf(cost_usd IS NULL) AS unpriced_calls,
        arraySort(groupUniqArray(model)) AS models,
        min(timestamp) AS first_at,
        max(timestamp) AS last_at
    FROM usage FINAL
    GROUP BY agent
) AS a
LEFT JOIN
(
    SELECT parent_agent, sum(cost_usd) AS priced_usd
    FROM usage FINAL
    WHERE parent_agent != ''
    GROUP BY parent_agent
) AS s ON s.parent_agent = a.agent;

-- cost_daily: one row per UTC day, team and model.
--   day, team, model
--   sessions, agents   how many spent that day
--   api_calls, input_tokens, output_tokens, cache_read_tokens, cache_write_5m_tokens,
--   cache_write_1h_tokens, cost_usd, unpriced_calls   as in session_costs
CREATE VIEW IF NOT EXISTS cost_daily AS
SELECT
    day, team, model, sessions, agents, api_calls, input_tokens, output_tokens, cache_read_tokens,
    cache_write_5m_tokens, cache_write_1h_tokens,
    if(unpriced_calls = api_calls, NULL, coalesce(priced_usd, 0)) AS cost_usd,
    unpriced_calls
FROM
(
    SELECT
        toDate(timestamp) AS day,
        team,
        model,
        uniqExact(session_id) AS sessions,
        uniqExact(agent) AS agents,
        count() AS api_calls,
        sum(input_tokens) AS input_tokens,
        sum(output_tokens) AS output_tokens,
        sum(cache_read_tokens) AS cache_read_tokens,
        sum(cache_write_5m_tokens) AS cache_write_5m_tokens,
        sum(cache_write_1h_tokens) AS cache_write_1h_tokens,
        sum(cost_usd) AS priced_usd,
        countIf(cost_usd IS NULL) AS unpriced_calls
    FROM usage FINAL
    GROUP BY day, team, model
);
