-- coverage's spool_bytes: the spool backlog the hook on a host reported last, by arrival (the
-- row stored last), no longer by the event's own time. A flush sends spooled events after newer
-- ones, and each now says what the spool still holds once it is sent (emitter/spool.py): so a
-- flushed spool reads 0 at once, where the newest event by time still said what it had waited on.
-- The view as 005 made it, but that one expression.
CREATE OR REPLACE VIEW coverage AS
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
    SELECT host, argMax(spool_bytes, (stored_at, timestamp, id)) AS spool_bytes
    FROM events
    WHERE seq > 0
    GROUP BY host
) AS h ON h.host = s.host;
