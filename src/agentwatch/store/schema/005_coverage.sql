-- Fields the envelope carries since the hook numbers its events (see the README's wire contract):
--   seq              the event's number in its session on its host, 1, 2, 3, ... (0: none)
--   spool_bytes      bytes the hook's spool held, unsent, when it published the event
--   prompt_id, duration_ms, permission_mode, model
--                    payload fields worth a typed column; duration_ms is Claude Code's own tool
--                    time (PostToolUse, PostToolUseFailure), NULL elsewhere
-- Rows stored before this migration read them from `data` (the DEFAULT); new envelopes carry them.
ALTER TABLE events ADD COLUMN IF NOT EXISTS seq UInt64 DEFAULT 0;
ALTER TABLE events ADD COLUMN IF NOT EXISTS spool_bytes UInt64 DEFAULT 0;
ALTER TABLE events ADD COLUMN IF NOT EXISTS prompt_id String DEFAULT JSONExtractString(data, 'prompt_id');
ALTER TABLE events ADD COLUMN IF NOT EXISTS duration_ms Nullable(Int64) DEFAULT JSONExtract(data, 'duration_ms', 'Nullable(Int64)');
ALTER TABLE events ADD COLUMN IF NOT EXISTS permission_mode LowCardinality(String) DEFAULT JSONExtractString(data, 'permission_mode');
ALTER TABLE events ADD COLUMN IF NOT EXISTS model LowCardinality(String) DEFAULT if(JSONHas(data, 'model'), JSONExtractString(data, 'model'), JSONExtractString(data, 'to_model'));

-- coverage: how complete the record of each session is, one row per (session_id, host).
-- Computed from what is stored, never kept as a verdict: an event that arrives late (from a
-- spool) raises the figure back.
--   session_id, host
--   max_seq          the highest event number seen (0: a session from hooks that did not number)
--   stored           how many distinct numbers are stored
--   missing          numbers in 1..max_seq never stored (emitted, not or not yet arrived)
--   coverage_pct     100 * stored / max_seq; NULL when nothing is numbered
--   unpaired_calls   PreToolUse calls with no result although their agent stopped afterwards
--                    (Stop, SubagentStop, StopFailure) or the session ended
--   open_subagents   subagents that started and never stopped
--   ended            a SessionEnd was seen
--   spool_bytes      the spool backlog the hook on that host reported last (any session)
CREATE VIEW IF NOT EXISTS coverage AS
SELECT
    s.session_id AS session_id,
    s.host AS host,
    s.max_seq AS max_seq,
    s.stored AS stored,
    s.max_seq - least(s.stored, s.max_seq) AS missing,
    if(s.max_seq = 0, NULL, round(100 * s.stored / s.max_seq, 2)) AS coverage_pct,
    coalesce(c.unpaired, 0) AS unpaired_calls,
    length(arrayFilter(a -> NOT has(s.stopped_agents, a), s.started_agents)) AS open_subagents,
    s.ended AS ended,
    coalesce(h.spool_bytes, 0) AS spool_bytes
FROM
(
    SELECT
        session_id,
        host,
        max(seq) AS max_seq,
        uniqExactIf(seq, seq > 0) AS stored,
        countIf(event = 'SessionEnd') > 0 AS ended,
        groupUniqArrayIf(agent_id, event = 'SubagentStart') AS started_agents,
        groupUniqArrayIf(agent_id, event = 'SubagentStop') AS stopped_agents
    FROM events FINAL
    WHERE session_id != ''
    GROUP BY session_id, host
) AS s
LEFT JOIN
(
    SELECT calls.session_id AS session_id, calls.host AS host, count() AS unpaired
    FROM
    (
        SELECT session_id, host, agent_id, tool_use_id, minIf(timestamp, event = 'PreToolUse') AS called
        FROM events FINAL
        WHERE tool_use_id != '' AND event IN ('PreToolUse', 'PostToolUse', 'PostToolUseFailure', 'PermissionDenied')
        GROUP BY session_id, host, agent_id, tool_use_id
        HAVING countIf(event = 'PreToolUse') > 0 AND countIf(event != 'PreToolUse') = 0
    ) AS calls
    LEFT JOIN
    (
        SELECT
            session_id, host, agent_id,
            max(timestamp) AS stopped
        FROM events FINAL
        WHERE event IN ('Stop', 'SubagentStop', 'StopFailure')
        GROUP BY session_id, host, agent_id
    ) AS rests ON rests.session_id = calls.session_id AND rests.host = calls.host AND rests.agent_id = calls.agent_id
    LEFT JOIN
    (
        SELECT session_id, host, max(timestamp) AS ended_at
        FROM events FINAL
        WHERE event = 'SessionEnd'
        GROUP BY session_id, host
    ) AS ends ON ends.session_id = calls.session_id AND ends.host = calls.host
    WHERE rests.stopped >= calls.called OR ends.ended_at >= calls.called
    GROUP BY calls.session_id, calls.host
) AS c ON c.session_id = s.session_id AND c.host = s.host
LEFT JOIN
(
    SELECT host, argMax(spool_bytes, (timestamp, id)) AS spool_bytes
    FROM events
    WHERE seq > 0
    GROUP BY host
) AS h ON h.host = s.host;
