-- The hook's own run time (issue 39): each hook run's own event says, in `hook_ms`, the
-- milliseconds from its script's first line to its messages made (its transcripts read and its
-- session's owner marked): what the hook adds to the agent's wait before it sends. 0 where no hook
-- run made the envelope (usage, the demo, a run made again from the spool) and in rows stored
-- before this migration. `otel-export` sends it as agentwatch.hook.duration.
ALTER TABLE events ADD COLUMN IF NOT EXISTS hook_ms Float32 DEFAULT 0;
ALTER TABLE events_in ADD COLUMN IF NOT EXISTS hook_ms Float32 DEFAULT 0;

-- The view that stores events_in's rows passes it on.
ALTER TABLE events_in_mv MODIFY QUERY
SELECT
    id, timestamp, v, event, kind, agent, team, direction, peer, text, source, session_id, agent_id,
    agent_type, parent_agent, tool_name, tool_use_id, host, cwd, redacted, truncated, data, seq,
    spool_bytes, prompt_id, duration_ms, permission_mode, model, harness, harness_event, person, repo,
    branch, hook_ms
FROM events_in;
