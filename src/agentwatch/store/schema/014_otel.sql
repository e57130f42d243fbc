-- Claude Code's own OpenTelemetry export, received over OTLP/HTTP by the collector
-- (consumers/otlp.py): its log events, metric data points and spans, next to the hook stream.
-- Every attribute is kept in `attributes` (and the resource's in `resource`) as text: Claude Code
-- sends many numbers and booleans as strings, so one type for all; numbers are written as
-- decimals (937, 0.013708), booleans as true and false, arrays and maps as JSON. The ids that
-- link a record to the hook events are columns of their own: session_id (= the hook's
-- session_id), prompt_id, tool_use_id, agent_id.
-- Each table is a ReplacingMergeTree ordered by `id`, a hash of the record's content (a span: its
-- trace and span ids), and the receiver inserts only the ids it does not hold yet: a request
-- posted twice (an exporter's retry) stores nothing twice. The views read FINAL as well.

-- otel_logs: one row per log record (Claude Code's events: api_request, hook_execution_complete,
-- tool_result, user_prompt, ...).
--   id            the record's hash
--   timestamp     its time (timeUnixNano, else observedTimeUnixNano)
--   event_name    `event.name` (the body without `claude_code.` when there is none)
--   body          the body, as text
--   session_id, prompt_id, tool_use_id, agent_id, user_id
--   event_sequence `event.sequence` (per process, gap-free from 0); -1 when absent
--   trace_id, span_id  the span it was emitted in (hex; '' when none)
--   service_name, service_version, scope_name
--   attributes, resource
CREATE TABLE IF NOT EXISTS otel_logs
(
    id String,
    timestamp DateTime64(9, 'UTC'),
    event_name LowCardinality(String),
    body String,
    session_id String,
    prompt_id String,
    tool_use_id String,
    agent_id String,
    user_id String,
    event_sequence Int64,
    trace_id String,
    span_id String,
    service_name LowCardinality(String),
    service_version LowCardinality(String),
    scope_name LowCardinality(String),
    attributes Map(String, String),
    resource Map(String, String),
    stored_at DateTime64(3, 'UTC') DEFAULT now64(3),
    INDEX idx_session_id session_id TYPE bloom_filter(0.01) GRANULARITY 4
)
ENGINE = ReplacingMergeTree
ORDER BY id;

-- otel_metrics: one row per metric data point, as sent (a DELTA point is the change over its
-- interval: add them up; a CUMULATIVE one is the total since start_time: take the latest).
--   id            the point's hash
--   metric, unit, kind (sum, gauge, histogram), temporality (delta, cumulative, ''), monotonic
--   start_time, time   the interval
--   value         asDouble or asInt (a histogram: its sum), count (a histogram's count, else 0)
--   session_id
--   series        the attributes as canonical JSON: with `metric`, the key of one series
--   attributes, resource, service_name
CREATE TABLE IF NOT EXISTS otel_metrics
(
    id String,
    metric LowCardinality(String),
    unit LowCardinality(String),
    kind LowCardinality(String),
    temporality LowCardinality(String),
    monotonic Bool,
    start_time DateTime64(9, 'UTC'),
    time DateTime64(9, 'UTC'),
    value Float64,
    count UInt64,
    session_id String,
    series String,
    attributes Map(String, String),
    resource Map(String, String),
    service_name LowCardinality(String),
    stored_at DateTime64(3, 'UTC') DEFAULT now64(3),
    INDEX idx_session_id session_id TYPE bloom_filter(0.01) GRANULARITY 4
)
ENGINE = ReplacingMergeTree
ORDER BY id;

-- otel_spans: one row per span (with CLAUDE_CODE_ENHANCED_TELEMETRY_BETA=1: interaction,
-- llm_request, tool, tool.blocked_on_user, tool.execution).
--   id            trace_id and span_id
--   trace_id, span_id, parent_span_id (hex), name, kind
--   start_time, end_time, duration_ms
--   status_code (0 unset, 1 ok, 2 error), status_message
--   session_id, prompt_id, tool_use_id (or gen_ai.tool.call.id), agent_id
--   conversation_id  gen_ai.conversation.id: the session on the main agent, the agent id inside a subagent
--   events        the span's events as JSON ([{time, name, attributes}])
--   attributes, resource, service_name
CREATE TABLE IF NOT EXISTS otel_spans
(
    id String,
    trace_id String,
    span_id String,
    parent_span_id String,
    name LowCardinality(String),
    kind UInt8,
    start_time DateTime64(9, 'UTC'),
    end_time DateTime64(9, 'UTC'),
    duration_ms Float64,
    status_code UInt8,
    status_message String,
    session_id String,
    prompt_id String,
    tool_use_id String,
    agent_id String,
    conversation_id String,
    events String CODEC(ZSTD(3)),
    attributes Map(String, String),
    resource Map(String, String),
    service_name LowCardinality(String),
    stored_at DateTime64(3, 'UTC') DEFAULT now64(3),
    INDEX idx_session_id session_id TYPE bloom_filter(0.01) GRANULARITY 4
)
ENGINE = ReplacingMergeTree
ORDER BY id;

-- hook_runs: per session, hook event and hook (`hook_name`: the event and its matcher,
-- PreToolUse:Bash), from Claude Code's hook_execution_complete events: how often they ran, how
-- long, how often they failed or blocked. One firing runs `num_hooks` commands.
--   session_id, hook_event, hook_name
--   runs          firings (hook_execution_complete events)
--   commands      hook commands run (the sum of num_hooks, Claude Code's own plugins' included)
--   succeeded, blocked, failed (non-blocking errors), cancelled   commands, by outcome
--   total_ms, avg_ms, max_ms   the firings' total_duration_ms
--   first_at, last_at
CREATE VIEW IF NOT EXISTS hook_runs AS
SELECT
    session_id,
    attributes['hook_event'] AS hook_event,
    attributes['hook_name'] AS hook_name,
    count() AS runs,
    sum(toUInt64OrZero(attributes['num_hooks'])) AS commands,
    sum(toUInt64OrZero(attributes['num_success'])) AS succeeded,
    sum(toUInt64OrZero(attributes['num_blocking'])) AS blocked,
    sum(toUInt64OrZero(attributes['num_non_blocking_error'])) AS failed,
    sum(toUInt64OrZero(attributes['num_cancelled'])) AS cancelled,
    sum(toUInt64OrZero(attributes['total_duration_ms'])) AS total_ms,
    round(avg(toFloat64OrZero(attributes['total_duration_ms'])), 1) AS avg_ms,
    max(toUInt64OrZero(attributes['total_duration_ms'])) AS max_ms,
    min(timestamp) AS first_at,
    max(timestamp) AS last_at
FROM otel_logs FINAL
WHERE event_name = 'hook_execution_complete'
GROUP BY session_id, hook_event, hook_name;

-- api_requests: one row per API request Claude Code made (its api_request events), beside the
-- same message's usage as read from the transcripts (`usage`, matched by session and tokens).
--   id, timestamp, session_id, prompt_id, agent_id, event_sequence
--   model, query_source, speed, effort
--   input_tokens, output_tokens, cache_read_tokens, cache_write_5m_tokens, cache_write_1h_tokens
--   duration_ms, ttft_ms
--   cost_usd, cost_usd_micros   Claude Code's price of the request
--   transcript_message_id, transcript_cost_usd   the transcript's message with these tokens and
--                 agentwatch's price of it ('' and NULL when no transcript usage matches)
CREATE VIEW IF NOT EXISTS api_requests AS
SELECT
    r.id AS id,
    r.timestamp AS timestamp,
    r.session_id AS session_id,
    r.prompt_id AS prompt_id,
    r.agent_id AS agent_id,
    r.event_sequence AS event_sequence,
    r.model AS model,
    r.query_source AS query_source,
    r.speed AS speed,
    r.effort AS effort,
    r.input_tokens AS input_tokens,
    r.output_tokens AS output_tokens,
    r.cache_read_tokens AS cache_read_tokens,
    r.cache_write_5m_tokens AS cache_write_5m_tokens,
    r.cache_write_1h_tokens AS cache_write_1h_tokens,
    r.duration_ms AS duration_ms,
    r.ttft_ms AS ttft_ms,
    r.cost_usd AS cost_usd,
    r.cost_usd_micros AS cost_usd_micros,
    u.message_id AS transcript_message_id,
    u.cost_usd AS transcript_cost_usd
FROM
(
    SELECT
        id, timestamp, session_id, prompt_id, agent_id, event_sequence,
        attributes['model'] AS model,
        attributes['query_source'] AS query_source,
        attributes['speed'] AS speed,
        attributes['effort'] AS effort,
        toUInt64OrZero(attributes['input_tokens']) AS input_tokens,
        toUInt64OrZero(attributes['output_tokens']) AS output_tokens,
        toUInt64OrZero(attributes['cache_read_tokens']) AS cache_read_tokens,
        toUInt64OrZero(attributes['cache_creation_5m_tokens']) AS cache_write_5m_tokens,
        toUInt64OrZero(attributes['cache_creation_1h_tokens']) AS cache_write_1h_tokens,
        toFloat64OrZero(attributes['duration_ms']) AS duration_ms,
        toFloat64OrZero(attributes['ttft_ms']) AS ttft_ms,
        toFloat64OrZero(attributes['cost_usd']) AS cost_usd,
        toUInt64OrZero(attributes['cost_usd_micros']) AS cost_usd_micros
    FROM otel_logs FINAL
    WHERE event_name = 'api_request'
) AS r
LEFT ANY JOIN
(
    SELECT session_id, input_tokens, output_tokens, cache_read_tokens, cache_write_5m_tokens,
        cache_write_1h_tokens, message_id, cost_usd
    FROM usage FINAL
    WHERE session_id IN (SELECT session_id FROM otel_logs WHERE event_name = 'api_request')
) AS u
ON u.session_id = r.session_id AND u.input_tokens = r.input_tokens AND u.output_tokens = r.output_tokens
    AND u.cache_read_tokens = r.cache_read_tokens AND u.cache_write_5m_tokens = r.cache_write_5m_tokens
    AND u.cache_write_1h_tokens = r.cache_write_1h_tokens;

-- otel_metric_totals: per metric, session and series, the total of its data points: DELTA points
-- added up, CUMULATIVE ones the latest per start time (then added over the start times).
--   metric, unit, session_id, series, attributes
--   value         the total
--   points        data points received
--   first_at, last_at
CREATE VIEW IF NOT EXISTS otel_metric_totals AS
SELECT
    metric,
    unit,
    session_id,
    series,
    any(attributes) AS attributes,
    sum(v) AS value,
    sum(n) AS points,
    min(first_at) AS first_at,
    max(last_at) AS last_at
FROM
(
    SELECT
        metric, unit, session_id, series, start_time,
        any(attributes) AS attributes,
        if(any(temporality) = 'cumulative', argMax(value, time), sum(value)) AS v,
        count() AS n,
        min(start_time) AS first_at,
        max(time) AS last_at
    FROM otel_metrics FINAL
    GROUP BY metric, unit, session_id, series, start_time
)
GROUP BY metric, unit, session_id, series;
