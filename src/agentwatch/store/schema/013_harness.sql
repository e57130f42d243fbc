-- Every coding agent on one bus: Claude Code, Codex CLI and Gemini CLI (agentwatch/harnesses.py).
--
-- events gains two columns (the envelope's fields of the same names):
--   harness        who sent the event: claude-code, codex or gemini-cli (an envelope from an
--                  emitter older than this column is Claude Code's: it knew no other)
--   harness_event  the harness's own name of the event (Gemini's BeforeTool, AfterModel, ...);
--                  `event` is the normalised one (PreToolUse; PostModelRequest or
--                  ModelResponseChunk), which the subjects, the state machine and the rules use
ALTER TABLE events ADD COLUMN IF NOT EXISTS harness LowCardinality(String) DEFAULT 'claude-code';
ALTER TABLE events ADD COLUMN IF NOT EXISTS harness_event LowCardinality(String) DEFAULT event;

-- usage gains, for every API message:
--   harness          whose logs it was read from
--   reasoning_tokens the reasoning (Codex) or thought (Gemini) tokens among output_tokens, which
--                    include them: they are billed as output
-- The tokens of every harness are stored in Anthropic's terms (input_tokens without the cached
-- part, cache_read_tokens the cached part): Codex's and Gemini's input includes its cached tokens,
-- and the emitter takes them out before it sends them.
ALTER TABLE usage ADD COLUMN IF NOT EXISTS harness LowCardinality(String) DEFAULT 'claude-code';
ALTER TABLE usage ADD COLUMN IF NOT EXISTS reasoning_tokens UInt64 DEFAULT 0;
ALTER TABLE usage_in ADD COLUMN IF NOT EXISTS harness LowCardinality(String) DEFAULT 'claude-code';
ALTER TABLE usage_in ADD COLUMN IF NOT EXISTS reasoning_tokens UInt64 DEFAULT 0;

-- The view that stores usage_in's rows in usage now passes the two columns on.
ALTER TABLE usage_in_mv MODIFY QUERY
SELECT
    session_id, message_id, request_id, timestamp, agent, team, parent_agent, agent_id, agent_type,
    subagent_id, subagent_type, host, model, input_tokens, output_tokens, cache_read_tokens,
    cache_write_tokens, cache_write_5m_tokens, cache_write_1h_tokens, cost_usd, price_model, sidechain,
    envelope_id, version, harness, reasoning_tokens
FROM usage_in
WHERE sign > 0;

-- cost_by_harness: per UTC hour, harness and model: API messages, tokens, their price and the
-- sessions, signed like the other cost rollups (009_rollups.sql), so a replaced copy cancels
-- itself. What `agentwatch cost --by harness` reads.
CREATE TABLE IF NOT EXISTS cost_by_harness
(
    hour DateTime('UTC'),
    harness LowCardinality(String),
    model LowCardinality(String),
    api_calls SimpleAggregateFunction(sum, Int64),
    input_tokens SimpleAggregateFunction(sum, Int64),
    output_tokens SimpleAggregateFunction(sum, Int64),
    reasoning_tokens SimpleAggregateFunction(sum, Int64),
    cache_read_tokens SimpleAggregateFunction(sum, Int64),
    cache_write_5m_tokens SimpleAggregateFunction(sum, Int64),
    cache_write_1h_tokens SimpleAggregateFunction(sum, Int64),
    priced_usd SimpleAggregateFunction(sum, Float64),
    unpriced_calls SimpleAggregateFunction(sum, Int64),
    sessions AggregateFunction(uniqExact, String)
)
ENGINE = AggregatingMergeTree
ORDER BY (hour, harness, model);

CREATE MATERIALIZED VIEW IF NOT EXISTS cost_by_harness_mv TO cost_by_harness AS
SELECT
    toStartOfHour(timestamp) AS hour, harness, model,
    sum(toInt64(sign)) AS api_calls,
    sum(sign * toInt64(input_tokens)) AS input_tokens,
    sum(sign * toInt64(output_tokens)) AS output_tokens,
    sum(sign * toInt64(reasoning_tokens)) AS reasoning_tokens,
    sum(sign * toInt64(cache_read_tokens)) AS cache_read_tokens,
    sum(sign * toInt64(cache_write_5m_tokens)) AS cache_write_5m_tokens,
    sum(sign * toInt64(cache_write_1h_tokens)) AS cache_write_1h_tokens,
    sumIf(sign * assumeNotNull(cost_usd), cost_usd IS NOT NULL) AS priced_usd,
    sumIf(toInt64(sign), cost_usd IS NULL) AS unpriced_calls,
    uniqExactStateIf(session_id, sign > 0) AS sessions
FROM usage_in
GROUP BY hour, harness, model;

-- The usage stored before this migration (all of it Claude Code's), counted once.
INSERT INTO cost_by_harness
SELECT
    toStartOfHour(timestamp) AS hour, harness, model,
    toInt64(count()) AS api_calls,
    sum(toInt64(input_tokens)) AS input_tokens,
    sum(toInt64(output_tokens)) AS output_tokens,
    sum(toInt64(reasoning_tokens)) AS reasoning_tokens,
    sum(toInt64(cache_read_tokens)) AS cache_read_tokens,
    sum(toInt64(cache_write_5m_tokens)) AS cache_write_5m_tokens,
    sum(toInt64(cache_write_1h_tokens)) AS cache_write_1h_tokens,
    sumIf(assumeNotNull(cost_usd), cost_usd IS NOT NULL) AS priced_usd,
    toInt64(countIf(cost_usd IS NULL)) AS unpriced_calls,
    uniqExactState(session_id) AS sessions
FROM usage FINAL
GROUP BY hour, harness, model;
