-- GENERATED from agentwatch/agents.py (CALL_OUTCOMES: a tool call's outcome by its number in
-- call_rollup) by
--     python -m agentwatch.store.calls_sql > src/agentwatch/store/schema/022_call_outcomes.sql
-- Edit that table, not this file, and regenerate; a test fails when this is not current.
--
-- The views that name an outcome, each query as the migration that last defined it has it
-- (tool_calls: 018_time_windows.sql, tool_calls_since: 010_call_rollup.sql),
-- with the names written from that table: running, ok, error, interrupted, denied.

CREATE OR REPLACE VIEW tool_calls AS
WITH
    shapes AS (
        SELECT
            call,
            countIf(called) AS calls,
            countIf(NOT called) AS results,
            minIf(hour, called) AS call_hour,
            maxIf(hour, NOT called) AS result_hour
        FROM loose_calls FINAL
        GROUP BY call
    ),
    simple AS (
        SELECT call FROM shapes
        WHERE (calls = 1 AND results = 0) OR (calls = 1 AND results = 1 AND result_hour > call_hour)
    ),
    complex AS (
        SELECT call FROM shapes
        WHERE NOT ((calls = 1 AND results = 0) OR (calls = 1 AND results = 1 AND result_hour > call_hour))
    )
SELECT
    session_id,
    tool_use_id,
    toString(agent) AS agent,
    toString(team) AS team,
    toString(agent_id) AS agent_id,
    toString(host) AS host,
    toString(tool) AS tool,
    toString(text) AS text,
    CAST(at AS Nullable(DateTime64(3, 'UTC'))) AS started,
    CAST(ended AS Nullable(DateTime64(3, 'UTC'))) AS ended,
    coalesce(CAST(duration_ms AS Nullable(Int64)), dateDiff('millisecond', started, ended)) AS duration_ms,
    ['running', 'ok', 'error', 'interrupted', 'denied'][outcome + 1] AS status,
    toString(error) AS error
FROM call_rollup FINAL
WHERE called AND outcome > 0 AND call NOT IN (SELECT call FROM loose_calls FINAL)
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
    CAST(min(started) AS Nullable(DateTime64(3, 'UTC'))) AS started,
    max(ended) AS ended,
    coalesce(max(duration_ms), dateDiff('millisecond', started, ended)) AS duration_ms,
    ['running', 'ok', 'error', 'interrupted', 'denied'][max(outcome) + 1] AS status,
    max(error) AS error
FROM loose_calls FINAL
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
        CAST(min(started) AS Nullable(DateTime64(3, 'UTC'))) AS started,
        CAST(max(ended) AS Nullable(DateTime64(3, 'UTC'))) AS ended,
        CAST(max(duration_ms) AS Nullable(Int64)) AS duration_ms,
        max(outcome) AS outcome,
        toString(max(error)) AS error
    FROM call_rollup
    WHERE call IN complex
    GROUP BY session_id, tool_use_id
) AS p
LEFT JOIN
(
    SELECT
        session_id, tool_use_id, toString(argMin(agent, ended)) AS agent, toString(argMin(team, ended)) AS team,
        argMin(agent_id, ended) AS agent_id, toString(argMin(host, ended)) AS host,
        toString(argMin(tool, ended)) AS tool, argMin(text, ended) AS text
    FROM loose_calls FINAL
    WHERE NOT called
    GROUP BY session_id, tool_use_id
) AS o ON o.session_id = p.session_id AND o.tool_use_id = p.tool_use_id;

CREATE OR REPLACE VIEW tool_calls_since AS
WITH split AS (
    SELECT call FROM call_rollup
    WHERE hour >= toStartOfHour({since:DateTime64(3, 'UTC')}) AND NOT (called AND outcome > 0)
)
SELECT
    session_id, tool_use_id, agent, team, agent_id, host, tool, text, started, ended,
    coalesce(duration_ms, dateDiff('millisecond', started, ended)) AS duration_ms,
    ['running', 'ok', 'error', 'interrupted', 'denied'][outcome + 1] AS status,
    error
FROM call_rollup
WHERE hour >= toStartOfHour({since:DateTime64(3, 'UTC')}) AND called AND outcome > 0
    AND started >= {since:DateTime64(3, 'UTC')} AND call NOT IN split
UNION ALL
SELECT
    r.session_id AS session_id,
    r.tool_use_id AS tool_use_id,
    max(r.agent) AS agent,
    max(r.team) AS team,
    max(r.agent_id) AS agent_id,
    max(r.host) AS host,
    max(r.tool) AS tool,
    max(r.text) AS text,
    min(r.started) AS started,
    max(r.ended) AS ended,
    coalesce(max(r.duration_ms), dateDiff('millisecond', started, ended)) AS duration_ms,
    ['running', 'ok', 'error', 'interrupted', 'denied'][max(r.outcome) + 1] AS status,
    max(r.error) AS error
FROM call_rollup AS r
WHERE r.hour >= toStartOfHour({since:DateTime64(3, 'UTC')}) AND r.call IN split
GROUP BY r.session_id, r.tool_use_id
HAVING max(r.called) AND started >= {since:DateTime64(3, 'UTC')};
