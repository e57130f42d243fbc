-- GENERATED from src/agentwatch/store/schema/*.sql by src/agentwatch/store/cluster.py: do not
-- edit. Change the migrations (or the rules in cluster.py), then regenerate:
--   python -m agentwatch.store.cluster > deploy/clickhouse/schema-cluster.sql
--
-- agentwatch's schema for a ClickHouse cluster: the single-node migrations (001_events to 028_agents_since_planned_less),
-- with replicated local tables and Distributed tables over them under the single-node names, so
-- the store and every query run unchanged: the store inserts into, and queries read, the names
-- without _local.
--
--   events_local              ReplicatedReplacingMergeTree, one copy per replica of a shard
--   events                    Distributed over events_local, sharded by cityHash64(id)
--   messages_local            ReplicatedReplacingMergeTree, one copy per replica of a shard
--   messages                  Distributed over messages_local, sharded by cityHash64(id)
--   dead_letters_local        ReplicatedMergeTree, one copy per replica of a shard
--   dead_letters              Distributed over dead_letters_local, sharded by rand()
--   usage_local               ReplicatedReplacingMergeTree, one copy per replica of a shard
--   usage                     Distributed over usage_local, sharded by cityHash64(session_id)
--   cost_states_local         ReplicatedReplacingMergeTree, one copy per replica of a shard
--   cost_states               Distributed over cost_states_local, sharded by cityHash64(session_id)
--   alerts_local              ReplicatedReplacingMergeTree, one copy per replica of a shard
--   alerts                    Distributed over alerts_local, sharded by cityHash64(id)
--   event_ids_local           ReplicatedReplacingMergeTree, one copy per replica of a shard
--   event_ids                 Distributed over event_ids_local, sharded by cityHash64(id)
--   tool_hourly_local         ReplicatedAggregatingMergeTree, one copy per replica of a shard
--   tool_hourly               Distributed over tool_hourly_local, sharded by cityHash64(tool)
--   session_rollup_local      ReplicatedAggregatingMergeTree, one copy per replica of a shard
--   session_rollup            Distributed over session_rollup_local, sharded by cityHash64(session_id)
--   session_seq_rollup_local  ReplicatedAggregatingMergeTree, one copy per replica of a shard
--   session_seq_rollup        Distributed over session_seq_rollup_local, sharded by cityHash64(session_id)
--   edge_hourly_local         ReplicatedAggregatingMergeTree, one copy per replica of a shard
--   edge_hourly               Distributed over edge_hourly_local, sharded by cityHash64(from_agent)
--   cost_hourly_local         ReplicatedAggregatingMergeTree, one copy per replica of a shard
--   cost_hourly               Distributed over cost_hourly_local, sharded by cityHash64(agent)
--   cost_by_day_local         ReplicatedAggregatingMergeTree, one copy per replica of a shard
--   cost_by_day               Distributed over cost_by_day_local, sharded by cityHash64(team)
--   session_cost_local        ReplicatedAggregatingMergeTree, one copy per replica of a shard
--   session_cost              Distributed over session_cost_local, sharded by cityHash64(session_id)
--   call_rollup_local         ReplicatedAggregatingMergeTree, one copy per replica of a shard
--   call_rollup               Distributed over call_rollup_local, sharded by cityHash64(session_id, tool_use_id)
--   tool_daily_local          ReplicatedAggregatingMergeTree, one copy per replica of a shard
--   tool_daily                Distributed over tool_daily_local, sharded by cityHash64(tool)
--   agent_key_rollup_local    ReplicatedAggregatingMergeTree, one copy per replica of a shard
--   agent_key_rollup          Distributed over agent_key_rollup_local, sharded by cityHash64(host, scope, agent)
--   agent_cost_rollup_local   ReplicatedAggregatingMergeTree, one copy per replica of a shard
--   agent_cost_rollup         Distributed over agent_cost_rollup_local, sharded by cityHash64(host, scope, agent)
--   cost_by_harness_local     ReplicatedAggregatingMergeTree, one copy per replica of a shard
--   cost_by_harness           Distributed over cost_by_harness_local, sharded by cityHash64(harness)
--   otel_logs_local           ReplicatedReplacingMergeTree, one copy per replica of a shard
--   otel_logs                 Distributed over otel_logs_local, sharded by cityHash64(id)
--   otel_metrics_local        ReplicatedReplacingMergeTree, one copy per replica of a shard
--   otel_metrics              Distributed over otel_metrics_local, sharded by cityHash64(id)
--   otel_spans_local          ReplicatedReplacingMergeTree, one copy per replica of a shard
--   otel_spans                Distributed over otel_spans_local, sharded by cityHash64(id)
--   loose_calls_local         ReplicatedVersionedCollapsingMergeTree, one copy per replica of a shard
--   loose_calls               Distributed over loose_calls_local, sharded by cityHash64(session_id, tool_use_id)
--   session_totals_local      ReplicatedAggregatingMergeTree, one copy per replica of a shard
--   session_totals            Distributed over session_totals_local, sharded by cityHash64(session_id)
--   scope_hours_local         ReplicatedAggregatingMergeTree, one copy per replica of a shard
--   scope_hours               Distributed over scope_hours_local, sharded by cityHash64(host, scope)
--   cost_by_owner_local       ReplicatedAggregatingMergeTree, one copy per replica of a shard
--   cost_by_owner             Distributed over cost_by_owner_local, sharded by cityHash64(repo)
--   activity_by_owner_local   ReplicatedAggregatingMergeTree, one copy per replica of a shard
--   activity_by_owner         Distributed over activity_by_owner_local, sharded by cityHash64(repo)
--   session_owner_local       ReplicatedAggregatingMergeTree, one copy per replica of a shard
--   session_owner             Distributed over session_owner_local, sharded by cityHash64(session_id)
--   events_in                 Null, on every node (keeps nothing)
--   message_envelopes         Null, on every node (keeps nothing)
--   usage_in                  Null, on every node (keeps nothing)
--   message_envelopes_mv      materialized view to messages
--   tool_calls                view
--   sessions                  view
--   agents                    view
--   coverage                  view
--   session_costs             view
--   agent_costs               view
--   cost_daily                view
--   open_alerts               view
--   event_ids_events_mv       materialized view to event_ids_local, per shard
--   event_ids_messages_mv     materialized view to event_ids
--   tool_hourly_mv            materialized view to tool_hourly_local, per shard
--   session_rollup_mv         materialized view to session_rollup_local, per shard
--   session_seq_rollup_mv     materialized view to session_seq_rollup_local, per shard
--   edge_hourly_mv            materialized view to edge_hourly_local, per shard
--   usage_in_mv               materialized view to usage
--   cost_hourly_mv            materialized view to cost_hourly
--   cost_by_day_mv            materialized view to cost_by_day
--   session_cost_mv           materialized view to session_cost
--   tool_stats                view
--   team_edges                view
--   tool_calls_since          view
--   call_rollup_mv            materialized view to call_rollup_local, per shard
--   tool_daily_mv             materialized view to tool_daily_local, per shard
--   agent_key_messages_mv     materialized view to agent_key_rollup
--   agent_cost_rollup_mv      materialized view to agent_cost_rollup
--   cost_by_harness_mv        materialized view to cost_by_harness
--   hook_runs                 view
--   api_requests              view
--   otel_metric_totals        view
--   events_in_mv              materialized view to events
--   loose_calls_mv            materialized view to loose_calls_local, per shard
--   session_totals_usage_mv   materialized view to session_totals
--   session_totals_states_mv  materialized view to session_totals_local, per shard
--   scope_hours_events_mv     materialized view to scope_hours_local, per shard
--   scope_hours_messages_mv   materialized view to scope_hours
--   scope_hours_usage_mv      materialized view to scope_hours
--   agents_since              view
--   cost_by_owner_mv          materialized view to cost_by_owner
--   activity_by_owner_mv      materialized view to activity_by_owner_local, per shard
--   session_owner_mv          materialized view to session_owner_local, per shard
--   session_owner_usage_mv    materialized view to session_owner
--   agent_key_rollup_mv       materialized view to agent_key_rollup_local, per shard
--   session_totals_owner_mv   materialized view to session_totals
--
-- Sharding (SHARDING_KEYS in cluster.py): events and messages by cityHash64(id). A redelivered
-- event has the same id, so both copies land on the same shard and the ReplacingMergeTree
-- collapses them there; `FINAL` (which the views use) is applied per shard, which is therefore
-- exact. Do not shard them by anything else.
--
-- Columns are exactly the single-node ones: tests/integration/test_deploy_cluster_schema.py
-- applies this file to an embedded engine, engines rewritten to their single-node forms, and
-- compares system.columns; the views are the single-node views with ON CLUSTER added.
--
-- Needs: remote_servers with the cluster, ClickHouse Keeper (or ZooKeeper), and the macros
-- {cluster}, {shard}, {replica} on every node (deploy/clickhouse/config.d/agentwatch.xml).
-- Apply as an administrator, from any node:
--
--   clickhouse-client --query "CREATE DATABASE IF NOT EXISTS agentwatch ON CLUSTER '{cluster}'"
--   clickhouse-client --database agentwatch --multiquery < deploy/clickhouse/schema-cluster.sql
--
-- Every statement is idempotent (IF NOT EXISTS, OR REPLACE): after a new migration, regenerate
-- and apply the whole file again. The Distributed tables name the database `agentwatch`:
-- for another, regenerate with --database NAME.
--
-- The store still runs its migrations at start (apply_migrations): every CREATE is
-- IF NOT EXISTS, so against this schema they find the tables and change nothing (they only
-- create the small local `schema_migrations` table on the node the store talks to).
--
-- Retention: the store's AGENTWATCH_RETENTION_DAYS must stay 0 on a cluster (it would ALTER the
-- Distributed tables, which have no TTL). Set the TTL on the local tables instead, once:
--
--   ALTER TABLE events_local ON CLUSTER '{cluster}' MODIFY TTL toDateTime(timestamp) + INTERVAL 90 DAY;
--   ALTER TABLE messages_local ON CLUSTER '{cluster}' MODIFY TTL toDateTime(timestamp) + INTERVAL 90 DAY;
--   ALTER TABLE call_rollup_local ON CLUSTER '{cluster}' MODIFY TTL toDateTime(hour) + INTERVAL 90 DAY;
--   ALTER TABLE loose_calls_local ON CLUSTER '{cluster}' MODIFY TTL toDateTime(hour) + INTERVAL 90 DAY;
--
-- Statements end with a semicolon at the end of a line, and nowhere else (as in the migrations).

-- 001_events --------------------------------------------------------------------------------------
-- One row per hook invocation: every envelope field in a typed column (see the README's
-- "The wire contract"), the payload as JSON text in `data`.
--
-- ReplacingMergeTree on (timestamp, id): id is unique per event and timestamp comes from the
-- same envelope, so a redelivered event has the same key and collapses to one row under FINAL
-- (and at merge time). Both copies always land in the same monthly partition.
-- Retention is a TTL set by agentwatch.store.migrations.apply_migrations, not here.
--
-- Statements in these files end with a semicolon at the end of a line, and nowhere else.
CREATE TABLE IF NOT EXISTS events_local ON CLUSTER '{cluster}'
(
    id String,
    timestamp DateTime64(3, 'UTC'),
    v UInt8,
    event LowCardinality(String),
    kind LowCardinality(String),
    agent LowCardinality(String),
    team LowCardinality(String),
    direction LowCardinality(String),
    peer String,
    text String,
    source LowCardinality(String),
    session_id String,
    agent_id String,
    agent_type LowCardinality(String),
    parent_agent LowCardinality(String),
    tool_name LowCardinality(String),
    tool_use_id String,
    host LowCardinality(String),
    cwd String,
    redacted UInt32,
    truncated Bool,
    data String CODEC(ZSTD(3)),
    stored_at DateTime64(3, 'UTC') DEFAULT now64(3),
    INDEX idx_session_id session_id TYPE bloom_filter(0.01) GRANULARITY 4,
    INDEX idx_tool_use_id tool_use_id TYPE bloom_filter(0.01) GRANULARITY 4
)
ENGINE = ReplicatedReplacingMergeTree('/clickhouse/tables/{shard}/{database}/events', '{replica}')
PARTITION BY toYYYYMM(timestamp)
ORDER BY (timestamp, id);

-- events: Distributed over events_local, under the single-node name.
-- By cityHash64(id): the rows a ReplacingMergeTree collapses meet on one shard.
CREATE TABLE IF NOT EXISTS events ON CLUSTER '{cluster}' AS events_local
ENGINE = Distributed('{cluster}', 'agentwatch', 'events_local', cityHash64(id));

-- 002_messages ------------------------------------------------------------------------------------
-- One row per SendMessage delivery, filled from the message envelopes (kind "message", subject
-- genie.msg.*) whose data is {event_id, from, to, to_raw, to_agent_id, message_type, summary,
-- message}. The tool event itself (the SendMessage PostToolUse) is a row of `events`: nothing is
-- counted twice.
--
-- The store inserts the raw message envelopes (JSONEachRow) into the Null table
-- `message_envelopes`, which keeps nothing: the materialized view turns each one into a row of
-- `messages`.
CREATE TABLE IF NOT EXISTS messages_local ON CLUSTER '{cluster}'
(
    id String,                                -- the message envelope's id
    event_id String,                          -- the SendMessage tool event it came from
    timestamp DateTime64(3, 'UTC'),
    from_agent LowCardinality(String),
    to_agent LowCardinality(String),          -- the recipient's agent name (broadcast for a broadcast)
    team LowCardinality(String),
    to_raw String,                            -- the `to` as the sender wrote it
    to_agent_id String,                       -- the agent id the delivery reached, when reported
    message_type LowCardinality(String),      -- message, broadcast, shutdown_request, ...
    summary String,
    text String CODEC(ZSTD(3)),               -- a string message as is, a structured one as JSON
    session_id String,
    stored_at DateTime64(3, 'UTC') DEFAULT now64(3)
)
ENGINE = ReplicatedReplacingMergeTree('/clickhouse/tables/{shard}/{database}/messages', '{replica}')
PARTITION BY toYYYYMM(timestamp)
ORDER BY (timestamp, id);

-- messages: Distributed over messages_local, under the single-node name.
-- By cityHash64(id): the rows a ReplacingMergeTree collapses meet on one shard.
CREATE TABLE IF NOT EXISTS messages ON CLUSTER '{cluster}' AS messages_local
ENGINE = Distributed('{cluster}', 'agentwatch', 'messages_local', cityHash64(id));

-- message_envelopes: on every node (Null keeps nothing); the store inserts into the node it
-- talks to, and the materialized views over it write through the Distributed tables.
CREATE TABLE IF NOT EXISTS message_envelopes ON CLUSTER '{cluster}'
(
    id String,
    timestamp DateTime64(3, 'UTC'),
    v UInt8,
    event LowCardinality(String),
    kind LowCardinality(String),
    agent LowCardinality(String),
    team LowCardinality(String),
    peer String,
    text String,
    session_id String,
    agent_id String,
    host LowCardinality(String),
    data String
)
ENGINE = Null;

CREATE MATERIALIZED VIEW IF NOT EXISTS message_envelopes_mv ON CLUSTER '{cluster}' TO messages AS
SELECT
    id,
    JSONExtractString(data, 'event_id') AS event_id,
    timestamp,
    if(JSONHas(data, 'from'), JSONExtractString(data, 'from'), agent) AS from_agent,
    if(JSONHas(data, 'to'), JSONExtractString(data, 'to'), peer) AS to_agent,
    team,
    JSONExtractString(data, 'to_raw') AS to_raw,
    JSONExtractString(data, 'to_agent_id') AS to_agent_id,
    JSONExtractString(data, 'message_type') AS message_type,
    JSONExtractString(data, 'summary') AS summary,
    if(
        JSONType(data, 'message') = 'String',
        JSONExtractString(data, 'message'),
        JSONExtractRaw(data, 'message')
    ) AS text,
    session_id
FROM message_envelopes;

-- 003_dead_letters --------------------------------------------------------------------------------
-- Messages the store can never insert (not an envelope, an unsupported version, rejected by
-- ClickHouse row by row): kept with the reason, so nothing vanishes silently.
CREATE TABLE IF NOT EXISTS dead_letters_local ON CLUSTER '{cluster}'
(
    received_at DateTime64(3, 'UTC') DEFAULT now64(3),
    subject String,
    stream_seq UInt64,                        -- the JetStream stream sequence of the message
    deliveries UInt32,                        -- how many times it was delivered before giving up
    reason String,
    body String CODEC(ZSTD(3))                -- the message body, UTF-8 (invalid bytes replaced)
)
ENGINE = ReplicatedMergeTree('/clickhouse/tables/{shard}/{database}/dead_letters', '{replica}')
ORDER BY received_at;

-- dead_letters: Distributed over dead_letters_local, under the single-node name.
-- By rand(): nothing to collapse, so any shard will do.
CREATE TABLE IF NOT EXISTS dead_letters ON CLUSTER '{cluster}' AS dead_letters_local
ENGINE = Distributed('{cluster}', 'agentwatch', 'dead_letters_local', rand());

-- 004_views ---------------------------------------------------------------------------------------
-- Read-side views. Each reads `events FINAL`, so a redelivered event (same timestamp and id)
-- is counted once even before the background merge collapsed it.
-- Ties between events of the same millisecond are broken by id (a ULID, time-ordered).

-- tool_calls: one row per tool_use_id (not empty), the PreToolUse paired with its result.
-- Pairs are made within a session: a tool_use_id is unique there (and in practice everywhere).
--   session_id, tool_use_id
--                 the call's session and id, from Claude Code
--   agent, team, agent_id, host
--                 from the PreToolUse (from the result when the call was never seen)
--   tool          tool_name
--   text          the call's one-line summary (the PreToolUse's text, else the result's)
--   started       the PreToolUse time, NULL when it was never seen
--   ended         the PostToolUse / PostToolUseFailure / PermissionDenied time, NULL while running
--   duration_ms   the result payload's duration_ms when present, else ended - started in
--                 milliseconds, NULL when unpaired and the payload has none
--   status        ok, error, interrupted (a failure with is_interrupt true), denied, running (a
--                 call with no result yet), orphan (a result whose call was never seen)
--   error         the failure's error text, '' otherwise
CREATE VIEW IF NOT EXISTS tool_calls ON CLUSTER '{cluster}' AS
SELECT
    session_id,
    tool_use_id,
    argMin(agent, (is_call = 0, timestamp, id)) AS agent,
    argMin(team, (is_call = 0, timestamp, id)) AS team,
    argMin(agent_id, (is_call = 0, timestamp, id)) AS agent_id,
    argMin(host, (is_call = 0, timestamp, id)) AS host,
    argMin(tool_name, (is_call = 0, timestamp, id)) AS tool,
    argMin(text, (is_call = 0, timestamp, id)) AS text,
    minOrNullIf(timestamp, is_call = 1) AS started,
    maxOrNullIf(timestamp, is_call = 0) AS ended,
    coalesce(
        maxOrNullIf(payload_duration_ms, is_call = 0),
        dateDiff('millisecond', started, ended)
    ) AS duration_ms,
    multiIf(
        countIf(is_call = 1) = 0, 'orphan',
        countIf(event = 'PermissionDenied') > 0, 'denied',
        countIf(event = 'PostToolUseFailure' AND is_interrupt) > 0, 'interrupted',
        countIf(event = 'PostToolUseFailure') > 0, 'error',
        countIf(event = 'PostToolUse') > 0, 'ok',
        'running'
    ) AS status,
    anyIf(failure_error, event = 'PostToolUseFailure') AS error
FROM
(
    SELECT
        tool_use_id, agent, team, session_id, agent_id, host, tool_name, text, timestamp, id, event,
        toUInt8(event = 'PreToolUse') AS is_call,
        if(event = 'PreToolUse', NULL, JSONExtract(data, 'duration_ms', 'Nullable(Int64)'))
            AS payload_duration_ms,
        if(event = 'PostToolUseFailure', JSONExtractBool(data, 'is_interrupt'), false) AS is_interrupt,
        if(event = 'PostToolUseFailure', JSONExtractString(data, 'error'), '') AS failure_error
    FROM events FINAL
    WHERE tool_use_id != ''
      AND event IN ('PreToolUse', 'PostToolUse', 'PostToolUseFailure', 'PermissionDenied')
)
GROUP BY session_id, tool_use_id;

-- sessions: one row per session_id (not empty).
--   session_id
--   agent         the session's main agent: the agent of its events without agent_id (the
--                 subagents' parent_agent when only subagent events were seen)
--   team          the main agent's team
--   host, cwd     of the first event that has one
--   started       the first SessionStart's time, else the first event's
--   ended         the last SessionEnd's time, NULL when not ended (or resumed after it)
--   end_reason    that SessionEnd's reason (clear, logout, prompt_input_exit, other, ...), '' if none
--   last_seen     the latest event's time
--   events        how many events
--   tool_calls    how many PreToolUse, subagents' included
--   errors        how many PostToolUseFailure and StopFailure
--   prompts       how many UserPromptSubmit
--   subagents     how many distinct agent_id (subagents and teammates)
--   outcome       failed (the main agent's last turn ended with a StopFailure), ended,
--                 idle (its last turn ended with Stop: waiting for a prompt), running
CREATE VIEW IF NOT EXISTS sessions ON CLUSTER '{cluster}' AS
SELECT
    session_id, agent, team, host, cwd, started, ended, end_reason, last_seen, events, tool_calls,
    errors, prompts, subagents, outcome
FROM
(
    SELECT
        session_id,
        if(
            countIf(agent_id = '') > 0,
            argMinIf(agent, (timestamp, id), agent_id = ''),
            anyIf(parent_agent, parent_agent != '')
        ) AS agent,
        if(countIf(agent_id = '') > 0, argMinIf(team, (timestamp, id), agent_id = ''), any(team)) AS team,
        argMinIf(host, (timestamp, id), host != '') AS host,
        argMinIf(cwd, (timestamp, id), cwd != '') AS cwd,
        coalesce(minOrNullIf(timestamp, event = 'SessionStart'), min(timestamp)) AS started,
        maxOrNullIf(timestamp, event = 'SessionEnd') AS last_end,
        maxOrNullIf(timestamp, event = 'SessionStart') AS last_start,
        if(last_end IS NOT NULL AND (last_start IS NULL OR last_end >= last_start), last_end, NULL) AS ended,
        if(ended IS NULL, '', argMaxIf(end_reason_raw, (timestamp, id), event = 'SessionEnd')) AS end_reason,
        max(timestamp) AS last_seen,
        count() AS events,
        countIf(event = 'PreToolUse') AS tool_calls,
        countIf(event IN ('PostToolUseFailure', 'StopFailure')) AS errors,
        countIf(event = 'UserPromptSubmit') AS prompts,
        uniqExactIf(agent_id, agent_id != '') AS subagents,
        argMaxIf(
            event, (timestamp, id), agent_id = '' AND event IN ('UserPromptSubmit', 'Stop', 'StopFailure')
        ) AS last_turn_event,
        multiIf(
            last_turn_event = 'StopFailure', 'failed',
            ended IS NOT NULL, 'ended',
            last_turn_event = 'Stop', 'idle',
            'running'
        ) AS outcome
    FROM
    (
        SELECT
            session_id, agent, team, parent_agent, agent_id, host, cwd, timestamp, id, event,
            if(event = 'SessionEnd', JSONExtractString(data, 'reason'), '') AS end_reason_raw
        FROM events FINAL
        WHERE session_id != ''
    )
    GROUP BY session_id
);

-- agents: one row per agent name.
--   agent
--   team, parent_agent, agent_type, agent_id, session_id, host
--                 from its latest event
--   first_seen, last_seen
--   last_event    the latest event's name
--   state         from the latest event that says something about the agent's state:
--                 working (PreToolUse), waiting (PermissionRequest, an MCP Elicitation, or a
--                 Notification of type permission_prompt), idle (Stop, SubagentStop, TeammateIdle, a Notification of
--                 type idle_prompt, SessionStart), stopped (SessionEnd), failed (StopFailure),
--                 thinking (anything else: a prompt, a tool result, a subagent start, ...).
--                 Events that arrive whatever the agent does (InstructionsLoaded, FileChanged,
--                 ConfigChange, CwdChanged, TaskCreated, other Notifications, ...) are not counted.
--   current_tool  the tool of that PreToolUse while working, '' otherwise
--   tool_calls    how many PreToolUse
--   errors        how many PostToolUseFailure and StopFailure
--   messages_sent how many messages it sent (rows of `messages`)
--   events        how many events
CREATE VIEW IF NOT EXISTS agents ON CLUSTER '{cluster}' AS
SELECT
    a.agent AS agent,
    a.team AS team,
    a.parent_agent AS parent_agent,
    a.agent_type AS agent_type,
    a.agent_id AS agent_id,
    a.session_id AS session_id,
    a.host AS host,
    a.first_seen AS first_seen,
    a.last_seen AS last_seen,
    a.last_event AS last_event,
    multiIf(
        a.state_event = 'PreToolUse', 'working',
        a.state_event IN ('PermissionRequest', 'Elicitation'), 'waiting',
        a.state_event = 'Notification' AND a.state_note = 'permission_prompt', 'waiting',
        a.state_event IN ('Stop', 'SubagentStop', 'TeammateIdle', 'SessionStart', 'Notification'), 'idle',
        a.state_event = 'SessionEnd', 'stopped',
        a.state_event = 'StopFailure', 'failed',
        'thinking'
    ) AS state,
    if(a.state_event = 'PreToolUse', a.state_tool, '') AS current_tool,
    a.tool_calls AS tool_calls,
    a.errors AS errors,
    coalesce(m.sent, 0) AS messages_sent,
    a.events AS events
FROM
(
    SELECT
        agent,
        argMax(team, (timestamp, id)) AS team,
        argMax(parent_agent, (timestamp, id)) AS parent_agent,
        argMax(agent_type, (timestamp, id)) AS agent_type,
        argMax(agent_id, (timestamp, id)) AS agent_id,
        argMax(session_id, (timestamp, id)) AS session_id,
        argMax(host, (timestamp, id)) AS host,
        min(timestamp) AS first_seen,
        max(timestamp) AS last_seen,
        argMax(event, (timestamp, id)) AS last_event,
        argMaxIf(event, (timestamp, id), is_state) AS state_event,
        argMaxIf(note, (timestamp, id), is_state) AS state_note,
        argMaxIf(tool_name, (timestamp, id), is_state) AS state_tool,
        countIf(event = 'PreToolUse') AS tool_calls,
        countIf(event IN ('PostToolUseFailure', 'StopFailure')) AS errors,
        count() AS events
    FROM
    (
        SELECT
            agent, team, parent_agent, agent_type, agent_id, session_id, host, tool_name, timestamp,
            id, event, note,
            event IN (
                'PreToolUse', 'PostToolUse', 'PostToolUseFailure', 'PermissionRequest',
                'PermissionDenied', 'UserPromptSubmit', 'UserPromptExpansion', 'Stop', 'StopFailure',
                'SubagentStart', 'SubagentStop', 'TeammateIdle', 'SessionStart', 'SessionEnd',
                'PreCompact', 'PostCompact', 'PostToolBatch', 'Elicitation', 'ElicitationResult'
            ) OR (event = 'Notification' AND note IN ('permission_prompt', 'idle_prompt')) AS is_state
        FROM
        (
            SELECT
                agent, team, parent_agent, agent_type, agent_id, session_id, host, tool_name,
                timestamp, id, event,
                if(event = 'Notification', JSONExtractString(data, 'notification_type'), '') AS note
            FROM events FINAL
        )
    )
    GROUP BY agent
) AS a
LEFT JOIN
(
    SELECT from_agent, count() AS sent FROM messages FINAL GROUP BY from_agent
) AS m ON m.from_agent = a.agent;

-- 005_coverage ------------------------------------------------------------------------------------
-- Fields the envelope carries since the hook numbers its events (see the README's wire contract):
--   seq              the event's number in its session on its host, 1, 2, 3, ... (0: none)
--   spool_bytes      bytes the hook's spool held, unsent, when it published the event
--   prompt_id, duration_ms, permission_mode, model
--                    payload fields worth a typed column; duration_ms is Claude Code's own tool
--                    time (PostToolUse, PostToolUseFailure), NULL elsewhere
-- Rows stored before this migration read them from `data` (the DEFAULT); new envelopes carry them.
ALTER TABLE events_local ON CLUSTER '{cluster}' ADD COLUMN IF NOT EXISTS seq UInt64 DEFAULT 0;

-- The same column on the Distributed events, whose columns are events_local's.
ALTER TABLE events ON CLUSTER '{cluster}' ADD COLUMN IF NOT EXISTS seq UInt64 DEFAULT 0;

ALTER TABLE events_local ON CLUSTER '{cluster}' ADD COLUMN IF NOT EXISTS spool_bytes UInt64 DEFAULT 0;

-- The same column on the Distributed events, whose columns are events_local's.
ALTER TABLE events ON CLUSTER '{cluster}' ADD COLUMN IF NOT EXISTS spool_bytes UInt64 DEFAULT 0;

ALTER TABLE events_local ON CLUSTER '{cluster}' ADD COLUMN IF NOT EXISTS prompt_id String DEFAULT JSONExtractString(data, 'prompt_id');

-- The same column on the Distributed events, whose columns are events_local's.
ALTER TABLE events ON CLUSTER '{cluster}' ADD COLUMN IF NOT EXISTS prompt_id String DEFAULT JSONExtractString(data, 'prompt_id');

ALTER TABLE events_local ON CLUSTER '{cluster}' ADD COLUMN IF NOT EXISTS duration_ms Nullable(Int64) DEFAULT JSONExtract(data, 'duration_ms', 'Nullable(Int64)');

-- The same column on the Distributed events, whose columns are events_local's.
ALTER TABLE events ON CLUSTER '{cluster}' ADD COLUMN IF NOT EXISTS duration_ms Nullable(Int64) DEFAULT JSONExtract(data, 'duration_ms', 'Nullable(Int64)');

ALTER TABLE events_local ON CLUSTER '{cluster}' ADD COLUMN IF NOT EXISTS permission_mode LowCardinality(String) DEFAULT JSONExtractString(data, 'permission_mode');

-- The same column on the Distributed events, whose columns are events_local's.
ALTER TABLE events ON CLUSTER '{cluster}' ADD COLUMN IF NOT EXISTS permission_mode LowCardinality(String) DEFAULT JSONExtractString(data, 'permission_mode');

ALTER TABLE events_local ON CLUSTER '{cluster}' ADD COLUMN IF NOT EXISTS model LowCardinality(String) DEFAULT if(JSONHas(data, 'model'), JSONExtractString(data, 'model'), JSONExtractString(data, 'to_model'));

-- The same column on the Distributed events, whose columns are events_local's.
ALTER TABLE events ON CLUSTER '{cluster}' ADD COLUMN IF NOT EXISTS model LowCardinality(String) DEFAULT if(JSONHas(data, 'model'), JSONExtractString(data, 'model'), JSONExtractString(data, 'to_model'));

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
CREATE VIEW IF NOT EXISTS coverage ON CLUSTER '{cluster}' AS
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

-- 006_usage ---------------------------------------------------------------------------------------
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
CREATE TABLE IF NOT EXISTS usage_local ON CLUSTER '{cluster}'
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
ENGINE = ReplicatedReplacingMergeTree('/clickhouse/tables/{shard}/{database}/usage', '{replica}', version)
ORDER BY (session_id, message_id, request_id);

-- usage: Distributed over usage_local, under the single-node name.
-- By cityHash64(session_id): the rows a ReplacingMergeTree collapses meet on one shard.
CREATE TABLE IF NOT EXISTS usage ON CLUSTER '{cluster}' AS usage_local
ENGINE = Distributed('{cluster}', 'agentwatch', 'usage_local', cityHash64(session_id));

-- cost_states: Claude Code's own running total per session (its last cost-state record, which
-- includes the session's subagents and teammates).
--   session_id, timestamp, agent, team, host
--   total_cost_usd  Claude Code's totalCostUSD
--   input_tokens, output_tokens, cache_read_tokens, cache_write_5m_tokens, cache_write_1h_tokens
--                   its modelUsage summed over the models
--   model_usage     its modelUsage, as JSON text ({model: {inputTokens, outputTokens, ..., costUSD}})
--   version         all its tokens: a running total only grows, so the largest is the last
CREATE TABLE IF NOT EXISTS cost_states_local ON CLUSTER '{cluster}'
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
ENGINE = ReplicatedReplacingMergeTree('/clickhouse/tables/{shard}/{database}/cost_states', '{replica}', version)
ORDER BY session_id;

-- cost_states: Distributed over cost_states_local, under the single-node name.
-- By cityHash64(session_id): the rows a ReplacingMergeTree collapses meet on one shard.
CREATE TABLE IF NOT EXISTS cost_states ON CLUSTER '{cluster}' AS cost_states_local
ENGINE = Distributed('{cluster}', 'agentwatch', 'cost_states_local', cityHash64(session_id));

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
CREATE VIEW IF NOT EXISTS session_costs ON CLUSTER '{cluster}' AS
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
CREATE VIEW IF NOT EXISTS agent_costs ON CLUSTER '{cluster}' AS
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
CREATE VIEW IF NOT EXISTS cost_daily ON CLUSTER '{cluster}' AS
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

-- 008_alerts --------------------------------------------------------------------------------------
-- alerts: every change of a watchdog alert (consumers/alerts.py), as published on
-- agentwatch.alert.{severity}.{rule}: one row per alert and state.
--   id          the alert's id: its rule, its subject and the time its condition began
--   rule        stuck_tool, silent_agent, loop, failure_burst, waiting_for_user,
--               idle_with_open_tasks, budget, hook_health
--   severity    info, warning or critical
--   state       firing or resolved
--   agent, team, session_id, host   what it is about ('' when not about one)
--   summary     one line a person can read
--   details     JSON: the figures behind it (and `key`, the subject the engine tracks)
--   since       when the condition began
--   at          when the alert took this state
-- ReplacingMergeTree on (id, state): an alert published twice (a restart, a redelivery) is one
-- row per state; read it with FINAL.
CREATE TABLE IF NOT EXISTS alerts_local ON CLUSTER '{cluster}'
(
    id String,
    rule LowCardinality(String),
    severity LowCardinality(String),
    state LowCardinality(String),
    agent LowCardinality(String),
    team LowCardinality(String),
    session_id String,
    host LowCardinality(String),
    summary String,
    details String,
    since DateTime64(3, 'UTC'),
    at DateTime64(3, 'UTC')
)
ENGINE = ReplicatedReplacingMergeTree('/clickhouse/tables/{shard}/{database}/alerts', '{replica}')
ORDER BY (id, state);

-- alerts: Distributed over alerts_local, under the single-node name.
-- By cityHash64(id): the rows a ReplacingMergeTree collapses meet on one shard.
CREATE TABLE IF NOT EXISTS alerts ON CLUSTER '{cluster}' AS alerts_local
ENGINE = Distributed('{cluster}', 'agentwatch', 'alerts_local', cityHash64(id));

-- open_alerts: alerts firing now: a firing row and no resolved row for the same id.
-- Columns as in alerts.
CREATE VIEW IF NOT EXISTS open_alerts ON CLUSTER '{cluster}' AS
SELECT id, rule, severity, state, agent, team, session_id, host, summary, details, since, at
FROM alerts FINAL
WHERE state = 'firing'
  AND id NOT IN (SELECT id FROM alerts FINAL WHERE state = 'resolved');

-- 009_rollups -------------------------------------------------------------------------------------
-- Rollups: aggregates kept at insert time by materialized views, so that the questions about
-- aggregates (per tool, per session, per agent, per message edge) read a few thousand rows, not
-- the whole history. See docs/architecture.md, "Rollups", for the design and its limits.
--
-- Counts and quantile states are not idempotent: an event inserted twice would be counted twice.
-- The store's writer (store/writes.py) therefore drops, before each insert, the ids already in
-- `event_ids` (and repeats inside the batch): a redelivered event never reaches these views. The
-- states that are idempotent anyway (min, max, argMax by (timestamp, id), uniqExact) stay right
-- even if one does.
--
-- The last statements fill every rollup from the history already stored (the backfill).

-- event_ids: every stored event and message envelope id, ordered by id: the writer's lookup.
CREATE TABLE IF NOT EXISTS event_ids_local ON CLUSTER '{cluster}'
(
    id String,
    timestamp DateTime64(3, 'UTC')
)
ENGINE = ReplicatedReplacingMergeTree('/clickhouse/tables/{shard}/{database}/event_ids', '{replica}')
ORDER BY id;

-- event_ids: Distributed over event_ids_local, under the single-node name.
-- By cityHash64(id): the rows a ReplacingMergeTree collapses meet on one shard.
CREATE TABLE IF NOT EXISTS event_ids ON CLUSTER '{cluster}' AS event_ids_local
ENGINE = Distributed('{cluster}', 'agentwatch', 'event_ids_local', cityHash64(id));

-- event_ids_events_mv: each shard rolls up its own rows into event_ids_local.
CREATE MATERIALIZED VIEW IF NOT EXISTS event_ids_events_mv ON CLUSTER '{cluster}' TO event_ids_local AS
SELECT id, timestamp FROM events_local;

CREATE MATERIALIZED VIEW IF NOT EXISTS event_ids_messages_mv ON CLUSTER '{cluster}' TO event_ids AS
SELECT id, timestamp FROM message_envelopes;

-- tool_hourly: per tool and UTC hour. Calls count at their PreToolUse, results at theirs.
CREATE TABLE IF NOT EXISTS tool_hourly_local ON CLUSTER '{cluster}'
(
    hour DateTime('UTC'),
    tool LowCardinality(String),
    calls SimpleAggregateFunction(sum, UInt64),
    failures SimpleAggregateFunction(sum, UInt64),
    interrupted SimpleAggregateFunction(sum, UInt64),
    denied SimpleAggregateFunction(sum, UInt64),
    finished SimpleAggregateFunction(sum, UInt64),
    timed SimpleAggregateFunction(sum, UInt64),
    durations AggregateFunction(quantilesTiming(0.5, 0.95), Int64),
    max_ms SimpleAggregateFunction(max, Nullable(Int64)),
    last_error AggregateFunction(argMax, String, Tuple(DateTime64(3, 'UTC'), String))
)
ENGINE = ReplicatedAggregatingMergeTree('/clickhouse/tables/{shard}/{database}/tool_hourly', '{replica}')
ORDER BY (hour, tool);

-- tool_hourly: Distributed over tool_hourly_local, under the single-node name.
-- By cityHash64(tool): the rows a AggregatingMergeTree collapses meet on one shard.
CREATE TABLE IF NOT EXISTS tool_hourly ON CLUSTER '{cluster}' AS tool_hourly_local
ENGINE = Distributed('{cluster}', 'agentwatch', 'tool_hourly_local', cityHash64(tool));

-- tool_hourly_mv: each shard rolls up its own rows into tool_hourly_local.
CREATE MATERIALIZED VIEW IF NOT EXISTS tool_hourly_mv ON CLUSTER '{cluster}' TO tool_hourly_local AS
SELECT
    toStartOfHour(timestamp) AS hour,
    tool_name AS tool,
    toUInt64(countIf(event = 'PreToolUse')) AS calls,
    toUInt64(countIf(event = 'PostToolUseFailure')) AS failures,
    toUInt64(countIf(event = 'PostToolUseFailure' AND JSONExtractBool(data, 'is_interrupt'))) AS interrupted,
    toUInt64(countIf(event = 'PermissionDenied')) AS denied,
    toUInt64(countIf(event != 'PreToolUse')) AS finished,
    toUInt64(countIf(event != 'PreToolUse' AND duration_ms IS NOT NULL)) AS timed,
    quantilesTimingStateIf(0.5, 0.95)(assumeNotNull(duration_ms), event != 'PreToolUse' AND duration_ms IS NOT NULL)
        AS durations,
    maxIf(duration_ms, event != 'PreToolUse') AS max_ms,
    argMaxStateIf(
        JSONExtractString(data, 'error'), (timestamp, id), event = 'PostToolUseFailure'
        AND JSONExtractString(data, 'error') != ''
    ) AS last_error
FROM events_local
WHERE tool_name != '' AND event IN ('PreToolUse', 'PostToolUse', 'PostToolUseFailure', 'PermissionDenied')
GROUP BY hour, tool;

-- session_rollup: per session, the inputs of the `sessions` view's columns.
CREATE TABLE IF NOT EXISTS session_rollup_local ON CLUSTER '{cluster}'
(
    session_id String,
    main_events SimpleAggregateFunction(sum, UInt64),
    main_agent AggregateFunction(argMin, LowCardinality(String), Tuple(DateTime64(3, 'UTC'), String)),
    parent_agent AggregateFunction(argMin, LowCardinality(String), Tuple(DateTime64(3, 'UTC'), String)),
    main_team AggregateFunction(argMin, LowCardinality(String), Tuple(DateTime64(3, 'UTC'), String)),
    first_team AggregateFunction(argMin, LowCardinality(String), Tuple(DateTime64(3, 'UTC'), String)),
    host AggregateFunction(argMin, LowCardinality(String), Tuple(DateTime64(3, 'UTC'), String)),
    cwd AggregateFunction(argMin, String, Tuple(DateTime64(3, 'UTC'), String)),
    first_start SimpleAggregateFunction(min, Nullable(DateTime64(3, 'UTC'))),
    first_seen SimpleAggregateFunction(min, DateTime64(3, 'UTC')),
    last_end SimpleAggregateFunction(max, Nullable(DateTime64(3, 'UTC'))),
    last_start SimpleAggregateFunction(max, Nullable(DateTime64(3, 'UTC'))),
    end_reason AggregateFunction(argMax, String, Tuple(DateTime64(3, 'UTC'), String)),
    last_seen SimpleAggregateFunction(max, DateTime64(3, 'UTC')),
    events SimpleAggregateFunction(sum, UInt64),
    tool_calls SimpleAggregateFunction(sum, UInt64),
    errors SimpleAggregateFunction(sum, UInt64),
    prompts SimpleAggregateFunction(sum, UInt64),
    subagents AggregateFunction(uniqExact, String),
    last_turn AggregateFunction(argMax, LowCardinality(String), Tuple(DateTime64(3, 'UTC'), String))
)
ENGINE = ReplicatedAggregatingMergeTree('/clickhouse/tables/{shard}/{database}/session_rollup', '{replica}')
ORDER BY session_id
-- Small granules: the dashboard reads a few hundred sessions by id, spread over the whole key.
SETTINGS index_granularity = 256;

-- session_rollup: Distributed over session_rollup_local, under the single-node name.
-- By cityHash64(session_id): the rows a AggregatingMergeTree collapses meet on one shard.
CREATE TABLE IF NOT EXISTS session_rollup ON CLUSTER '{cluster}' AS session_rollup_local
ENGINE = Distributed('{cluster}', 'agentwatch', 'session_rollup_local', cityHash64(session_id));

-- session_rollup_mv: each shard rolls up its own rows into session_rollup_local.
CREATE MATERIALIZED VIEW IF NOT EXISTS session_rollup_mv ON CLUSTER '{cluster}' TO session_rollup_local AS
SELECT
    session_id,
    toUInt64(countIf(agent_id = '')) AS main_events,
    argMinStateIf(agent, (timestamp, id), agent_id = '') AS main_agent,
    argMinStateIf(parent_agent, (timestamp, id), parent_agent != '') AS parent_agent,
    argMinStateIf(team, (timestamp, id), agent_id = '') AS main_team,
    argMinState(team, (timestamp, id)) AS first_team,
    argMinStateIf(host, (timestamp, id), host != '') AS host,
    argMinStateIf(cwd, (timestamp, id), cwd != '') AS cwd,
    minOrNullIf(timestamp, event = 'SessionStart') AS first_start,
    min(timestamp) AS first_seen,
    maxOrNullIf(timestamp, event = 'SessionEnd') AS last_end,
    maxOrNullIf(timestamp, event = 'SessionStart') AS last_start,
    argMaxStateIf(
        if(event = 'SessionEnd', JSONExtractString(data, 'reason'), ''), (timestamp, id), event = 'SessionEnd'
    ) AS end_reason,
    max(timestamp) AS last_seen,
    toUInt64(count()) AS events,
    toUInt64(countIf(event = 'PreToolUse')) AS tool_calls,
    toUInt64(countIf(event IN ('PostToolUseFailure', 'StopFailure'))) AS errors,
    toUInt64(countIf(event = 'UserPromptSubmit')) AS prompts,
    uniqExactStateIf(agent_id, agent_id != '') AS subagents,
    argMaxStateIf(
        event, (timestamp, id), agent_id = '' AND event IN ('UserPromptSubmit', 'Stop', 'StopFailure')
    ) AS last_turn
FROM events_local
WHERE session_id != ''
GROUP BY session_id;

-- session_seq_rollup: per session and host, the numbered events (for coverage_pct).
CREATE TABLE IF NOT EXISTS session_seq_rollup_local ON CLUSTER '{cluster}'
(
    session_id String,
    host LowCardinality(String),
    max_seq SimpleAggregateFunction(max, UInt64),
    stored AggregateFunction(uniqExact, UInt64)
)
ENGINE = ReplicatedAggregatingMergeTree('/clickhouse/tables/{shard}/{database}/session_seq_rollup', '{replica}')
ORDER BY (session_id, host)
-- Small granules: the dashboard reads a few hundred sessions by id, spread over the whole key.
SETTINGS index_granularity = 256;

-- session_seq_rollup: Distributed over session_seq_rollup_local, under the single-node name.
-- By cityHash64(session_id): the rows a AggregatingMergeTree collapses meet on one shard.
CREATE TABLE IF NOT EXISTS session_seq_rollup ON CLUSTER '{cluster}' AS session_seq_rollup_local
ENGINE = Distributed('{cluster}', 'agentwatch', 'session_seq_rollup_local', cityHash64(session_id));

-- session_seq_rollup_mv: each shard rolls up its own rows into session_seq_rollup_local.
CREATE MATERIALIZED VIEW IF NOT EXISTS session_seq_rollup_mv ON CLUSTER '{cluster}' TO session_seq_rollup_local AS
SELECT session_id, host, toUInt64(max(seq)) AS max_seq, uniqExactStateIf(toUInt64(seq), seq > 0) AS stored
FROM events_local
WHERE session_id != ''
GROUP BY session_id, host;

-- agent_rollup: per agent name, the inputs of the `agents` view's columns.
CREATE TABLE IF NOT EXISTS agent_rollup_local ON CLUSTER '{cluster}'
(
    agent LowCardinality(String),
    latest AggregateFunction(
        argMax,
        Tuple(String, String, String, String, String, String, String),
        Tuple(DateTime64(3, 'UTC'), String)
    ),
    state AggregateFunction(argMax, Tuple(String, String, String), Tuple(DateTime64(3, 'UTC'), String)),
    first_seen SimpleAggregateFunction(min, DateTime64(3, 'UTC')),
    last_seen SimpleAggregateFunction(max, DateTime64(3, 'UTC')),
    tool_calls SimpleAggregateFunction(sum, UInt64),
    errors SimpleAggregateFunction(sum, UInt64),
    events SimpleAggregateFunction(sum, UInt64)
)
ENGINE = ReplicatedAggregatingMergeTree('/clickhouse/tables/{shard}/{database}/agent_rollup', '{replica}')
ORDER BY agent;

-- agent_rollup: Distributed over agent_rollup_local, under the single-node name.
-- By cityHash64(agent): the rows a AggregatingMergeTree collapses meet on one shard.
CREATE TABLE IF NOT EXISTS agent_rollup ON CLUSTER '{cluster}' AS agent_rollup_local
ENGINE = Distributed('{cluster}', 'agentwatch', 'agent_rollup_local', cityHash64(agent));

-- agent_rollup_mv: each shard rolls up its own rows into agent_rollup_local.
CREATE MATERIALIZED VIEW IF NOT EXISTS agent_rollup_mv ON CLUSTER '{cluster}' TO agent_rollup_local AS
SELECT
    agent,
    argMaxState(
        (toString(team), toString(parent_agent), toString(agent_type), agent_id, session_id, toString(host),
         toString(event)),
        (timestamp, id)
    ) AS latest,
    argMaxStateIf((toString(event), note, toString(tool_name)), (timestamp, id), is_state) AS state,
    min(timestamp) AS first_seen,
    max(timestamp) AS last_seen,
    toUInt64(countIf(event = 'PreToolUse')) AS tool_calls,
    toUInt64(countIf(event IN ('PostToolUseFailure', 'StopFailure'))) AS errors,
    toUInt64(count()) AS events
FROM
(
    SELECT
        agent, team, parent_agent, agent_type, agent_id, session_id, host, tool_name, timestamp, id,
        event, note,
        event IN (
            'PreToolUse', 'PostToolUse', 'PostToolUseFailure', 'PermissionRequest',
            'PermissionDenied', 'UserPromptSubmit', 'UserPromptExpansion', 'Stop', 'StopFailure',
            'SubagentStart', 'SubagentStop', 'TeammateIdle', 'SessionStart', 'SessionEnd',
            'PreCompact', 'PostCompact', 'PostToolBatch', 'Elicitation', 'ElicitationResult'
        ) OR (event = 'Notification' AND note IN ('permission_prompt', 'idle_prompt')) AS is_state
    FROM
    (
        SELECT
            agent, team, parent_agent, agent_type, agent_id, session_id, host, tool_name, timestamp, id,
            event, if(event = 'Notification', JSONExtractString(data, 'notification_type'), '') AS note
        FROM events_local
    )
)
GROUP BY agent;

-- edge_hourly: per UTC hour, team, sender and recipient, the messages sent.
CREATE TABLE IF NOT EXISTS edge_hourly_local ON CLUSTER '{cluster}'
(
    hour DateTime('UTC'),
    team LowCardinality(String),
    from_agent LowCardinality(String),
    to_agent LowCardinality(String),
    messages SimpleAggregateFunction(sum, UInt64),
    last_at SimpleAggregateFunction(max, DateTime64(3, 'UTC')),
    last_summary AggregateFunction(argMax, String, Tuple(DateTime64(3, 'UTC'), String))
)
ENGINE = ReplicatedAggregatingMergeTree('/clickhouse/tables/{shard}/{database}/edge_hourly', '{replica}')
ORDER BY (hour, team, from_agent, to_agent);

-- edge_hourly: Distributed over edge_hourly_local, under the single-node name.
-- By cityHash64(from_agent): the rows a AggregatingMergeTree collapses meet on one shard.
CREATE TABLE IF NOT EXISTS edge_hourly ON CLUSTER '{cluster}' AS edge_hourly_local
ENGINE = Distributed('{cluster}', 'agentwatch', 'edge_hourly_local', cityHash64(from_agent));

-- edge_hourly_mv: each shard rolls up its own rows into edge_hourly_local.
CREATE MATERIALIZED VIEW IF NOT EXISTS edge_hourly_mv ON CLUSTER '{cluster}' TO edge_hourly_local AS
SELECT
    toStartOfHour(timestamp) AS hour, team, from_agent, to_agent, toUInt64(count()) AS messages,
    max(timestamp) AS last_at, argMaxState(summary, (timestamp, id)) AS last_summary
FROM messages_local
GROUP BY hour, team, from_agent, to_agent;

-- usage_in: the store's insert target for API messages (a Null table: keeps nothing). A row with
-- sign 1 is stored in `usage` (usage_in_mv) and added to cost_hourly; a row with sign -1 is a copy
-- of a message the store replaced by a larger one (see `usage`'s version): it only takes its
-- figures back out of cost_hourly. One insert does both, so no crash can leave half of it done.
-- usage_in: on every node (Null keeps nothing); the store inserts into the node it
-- talks to, and the materialized views over it write through the Distributed tables.
CREATE TABLE IF NOT EXISTS usage_in ON CLUSTER '{cluster}'
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
    sign Int8 DEFAULT 1
)
ENGINE = Null;

CREATE MATERIALIZED VIEW IF NOT EXISTS usage_in_mv ON CLUSTER '{cluster}' TO usage AS
SELECT
    session_id, message_id, request_id, timestamp, agent, team, parent_agent, agent_id, agent_type,
    subagent_id, subagent_type, host, model, input_tokens, output_tokens, cache_read_tokens,
    cache_write_tokens, cache_write_5m_tokens, cache_write_1h_tokens, cost_usd, price_model, sidechain,
    envelope_id, version
FROM usage_in
WHERE sign > 0;

-- The cost rollups. Their sums are signed, so a replaced copy's row (sign -1) cancels its figures;
-- the views keep the keys whose api_calls add up to more than 0. The states (the latest message's
-- fields, the first main-agent message, the sessions) take added rows only.

-- cost_hourly: per UTC hour, agent (with its parent), team and model: API messages, tokens, their
-- price, the sessions, the agent's latest message's team, parent, agent_id and type.
CREATE TABLE IF NOT EXISTS cost_hourly_local ON CLUSTER '{cluster}'
(
    hour DateTime('UTC'),
    agent LowCardinality(String),
    parent_agent LowCardinality(String),
    team LowCardinality(String),
    model LowCardinality(String),
    api_calls SimpleAggregateFunction(sum, Int64),
    input_tokens SimpleAggregateFunction(sum, Int64),
    output_tokens SimpleAggregateFunction(sum, Int64),
    cache_read_tokens SimpleAggregateFunction(sum, Int64),
    cache_write_5m_tokens SimpleAggregateFunction(sum, Int64),
    cache_write_1h_tokens SimpleAggregateFunction(sum, Int64),
    priced_usd SimpleAggregateFunction(sum, Float64),
    unpriced_calls SimpleAggregateFunction(sum, Int64),
    first_at SimpleAggregateFunction(min, Nullable(DateTime64(3, 'UTC'))),
    last_at SimpleAggregateFunction(max, Nullable(DateTime64(3, 'UTC'))),
    sessions AggregateFunction(uniqExact, String),
    latest AggregateFunction(argMax, Tuple(String, String, String, String), Tuple(DateTime64(3, 'UTC'), String))
)
ENGINE = ReplicatedAggregatingMergeTree('/clickhouse/tables/{shard}/{database}/cost_hourly', '{replica}')
ORDER BY (hour, agent, parent_agent, team, model);

-- cost_hourly: Distributed over cost_hourly_local, under the single-node name.
-- By cityHash64(agent): the rows a AggregatingMergeTree collapses meet on one shard.
CREATE TABLE IF NOT EXISTS cost_hourly ON CLUSTER '{cluster}' AS cost_hourly_local
ENGINE = Distributed('{cluster}', 'agentwatch', 'cost_hourly_local', cityHash64(agent));

CREATE MATERIALIZED VIEW IF NOT EXISTS cost_hourly_mv ON CLUSTER '{cluster}' TO cost_hourly AS
SELECT
    toStartOfHour(timestamp) AS hour, agent, parent_agent, team, model,
    sum(toInt64(sign)) AS api_calls,
    sum(sign * toInt64(input_tokens)) AS input_tokens,
    sum(sign * toInt64(output_tokens)) AS output_tokens,
    sum(sign * toInt64(cache_read_tokens)) AS cache_read_tokens,
    sum(sign * toInt64(cache_write_5m_tokens)) AS cache_write_5m_tokens,
    sum(sign * toInt64(cache_write_1h_tokens)) AS cache_write_1h_tokens,
    sumIf(sign * assumeNotNull(cost_usd), cost_usd IS NOT NULL) AS priced_usd,
    sumIf(toInt64(sign), cost_usd IS NULL) AS unpriced_calls,
    minOrNullIf(timestamp, sign > 0) AS first_at,
    maxOrNullIf(timestamp, sign > 0) AS last_at,
    uniqExactStateIf(session_id, sign > 0) AS sessions,
    argMaxStateIf(
        (toString(team), toString(parent_agent), agent_id, toString(agent_type)), (timestamp, message_id), sign > 0
    ) AS latest
FROM usage_in
GROUP BY hour, agent, parent_agent, team, model;

-- cost_by_agent: per agent (with its parent), team and model, over all time: what agent_costs
-- and the dashboard's roster read (its rows do not grow with the history, only with the agents).
CREATE TABLE IF NOT EXISTS cost_by_agent_local ON CLUSTER '{cluster}'
(
    agent LowCardinality(String),
    parent_agent LowCardinality(String),
    team LowCardinality(String),
    model LowCardinality(String),
    api_calls SimpleAggregateFunction(sum, Int64),
    input_tokens SimpleAggregateFunction(sum, Int64),
    output_tokens SimpleAggregateFunction(sum, Int64),
    cache_read_tokens SimpleAggregateFunction(sum, Int64),
    cache_write_5m_tokens SimpleAggregateFunction(sum, Int64),
    cache_write_1h_tokens SimpleAggregateFunction(sum, Int64),
    priced_usd SimpleAggregateFunction(sum, Float64),
    unpriced_calls SimpleAggregateFunction(sum, Int64),
    first_at SimpleAggregateFunction(min, Nullable(DateTime64(3, 'UTC'))),
    last_at SimpleAggregateFunction(max, Nullable(DateTime64(3, 'UTC'))),
    sessions AggregateFunction(uniqExact, String),
    latest AggregateFunction(argMax, Tuple(String, String, String, String), Tuple(DateTime64(3, 'UTC'), String))
)
ENGINE = ReplicatedAggregatingMergeTree('/clickhouse/tables/{shard}/{database}/cost_by_agent', '{replica}')
ORDER BY (agent, parent_agent, team, model);

-- cost_by_agent: Distributed over cost_by_agent_local, under the single-node name.
-- By cityHash64(agent): the rows a AggregatingMergeTree collapses meet on one shard.
CREATE TABLE IF NOT EXISTS cost_by_agent ON CLUSTER '{cluster}' AS cost_by_agent_local
ENGINE = Distributed('{cluster}', 'agentwatch', 'cost_by_agent_local', cityHash64(agent));

CREATE MATERIALIZED VIEW IF NOT EXISTS cost_by_agent_mv ON CLUSTER '{cluster}' TO cost_by_agent AS
SELECT
    agent, parent_agent, team, model,
    sum(toInt64(sign)) AS api_calls,
    sum(sign * toInt64(input_tokens)) AS input_tokens,
    sum(sign * toInt64(output_tokens)) AS output_tokens,
    sum(sign * toInt64(cache_read_tokens)) AS cache_read_tokens,
    sum(sign * toInt64(cache_write_5m_tokens)) AS cache_write_5m_tokens,
    sum(sign * toInt64(cache_write_1h_tokens)) AS cache_write_1h_tokens,
    sumIf(sign * assumeNotNull(cost_usd), cost_usd IS NOT NULL) AS priced_usd,
    sumIf(toInt64(sign), cost_usd IS NULL) AS unpriced_calls,
    minOrNullIf(timestamp, sign > 0) AS first_at,
    maxOrNullIf(timestamp, sign > 0) AS last_at,
    uniqExactStateIf(session_id, sign > 0) AS sessions,
    argMaxStateIf(
        (toString(team), toString(parent_agent), agent_id, toString(agent_type)), (timestamp, message_id), sign > 0
    ) AS latest
FROM usage_in
GROUP BY agent, parent_agent, team, model;

-- cost_by_day: per UTC day, team and model: what cost_daily reads.
CREATE TABLE IF NOT EXISTS cost_by_day_local ON CLUSTER '{cluster}'
(
    day Date,
    team LowCardinality(String),
    model LowCardinality(String),
    api_calls SimpleAggregateFunction(sum, Int64),
    input_tokens SimpleAggregateFunction(sum, Int64),
    output_tokens SimpleAggregateFunction(sum, Int64),
    cache_read_tokens SimpleAggregateFunction(sum, Int64),
    cache_write_5m_tokens SimpleAggregateFunction(sum, Int64),
    cache_write_1h_tokens SimpleAggregateFunction(sum, Int64),
    priced_usd SimpleAggregateFunction(sum, Float64),
    unpriced_calls SimpleAggregateFunction(sum, Int64),
    sessions AggregateFunction(uniqExact, String),
    agents AggregateFunction(uniqExact, String)
)
ENGINE = ReplicatedAggregatingMergeTree('/clickhouse/tables/{shard}/{database}/cost_by_day', '{replica}')
ORDER BY (day, team, model);

-- cost_by_day: Distributed over cost_by_day_local, under the single-node name.
-- By cityHash64(team): the rows a AggregatingMergeTree collapses meet on one shard.
CREATE TABLE IF NOT EXISTS cost_by_day ON CLUSTER '{cluster}' AS cost_by_day_local
ENGINE = Distributed('{cluster}', 'agentwatch', 'cost_by_day_local', cityHash64(team));

CREATE MATERIALIZED VIEW IF NOT EXISTS cost_by_day_mv ON CLUSTER '{cluster}' TO cost_by_day AS
SELECT
    toDate(timestamp) AS day, team, model,
    sum(toInt64(sign)) AS api_calls,
    sum(sign * toInt64(input_tokens)) AS input_tokens,
    sum(sign * toInt64(output_tokens)) AS output_tokens,
    sum(sign * toInt64(cache_read_tokens)) AS cache_read_tokens,
    sum(sign * toInt64(cache_write_5m_tokens)) AS cache_write_5m_tokens,
    sum(sign * toInt64(cache_write_1h_tokens)) AS cache_write_1h_tokens,
    sumIf(sign * assumeNotNull(cost_usd), cost_usd IS NOT NULL) AS priced_usd,
    sumIf(toInt64(sign), cost_usd IS NULL) AS unpriced_calls,
    uniqExactStateIf(session_id, sign > 0) AS sessions,
    uniqExactStateIf(toString(agent), sign > 0) AS agents
FROM usage_in
GROUP BY day, team, model;

-- session_cost: per session, agent (with its parent), team and model: the same figures, and the
-- session's first message of a main agent (no agent_id), for session_costs.
CREATE TABLE IF NOT EXISTS session_cost_local ON CLUSTER '{cluster}'
(
    session_id String,
    agent LowCardinality(String),
    parent_agent LowCardinality(String),
    team LowCardinality(String),
    model LowCardinality(String),
    api_calls SimpleAggregateFunction(sum, Int64),
    main_calls SimpleAggregateFunction(sum, Int64),
    input_tokens SimpleAggregateFunction(sum, Int64),
    output_tokens SimpleAggregateFunction(sum, Int64),
    cache_read_tokens SimpleAggregateFunction(sum, Int64),
    cache_write_5m_tokens SimpleAggregateFunction(sum, Int64),
    cache_write_1h_tokens SimpleAggregateFunction(sum, Int64),
    priced_usd SimpleAggregateFunction(sum, Float64),
    unpriced_calls SimpleAggregateFunction(sum, Int64),
    first_at SimpleAggregateFunction(min, Nullable(DateTime64(3, 'UTC'))),
    last_at SimpleAggregateFunction(max, Nullable(DateTime64(3, 'UTC'))),
    main AggregateFunction(argMin, Tuple(String, String), Tuple(DateTime64(3, 'UTC'), String))
)
ENGINE = ReplicatedAggregatingMergeTree('/clickhouse/tables/{shard}/{database}/session_cost', '{replica}')
ORDER BY (session_id, agent, parent_agent, team, model)
-- Small granules: the dashboard reads a few hundred sessions by id, spread over the whole key.
SETTINGS index_granularity = 256;

-- session_cost: Distributed over session_cost_local, under the single-node name.
-- By cityHash64(session_id): the rows a AggregatingMergeTree collapses meet on one shard.
CREATE TABLE IF NOT EXISTS session_cost ON CLUSTER '{cluster}' AS session_cost_local
ENGINE = Distributed('{cluster}', 'agentwatch', 'session_cost_local', cityHash64(session_id));

CREATE MATERIALIZED VIEW IF NOT EXISTS session_cost_mv ON CLUSTER '{cluster}' TO session_cost AS
SELECT
    session_id, agent, parent_agent, team, model,
    sum(toInt64(sign)) AS api_calls,
    sumIf(toInt64(sign), agent_id = '') AS main_calls,
    sum(sign * toInt64(input_tokens)) AS input_tokens,
    sum(sign * toInt64(output_tokens)) AS output_tokens,
    sum(sign * toInt64(cache_read_tokens)) AS cache_read_tokens,
    sum(sign * toInt64(cache_write_5m_tokens)) AS cache_write_5m_tokens,
    sum(sign * toInt64(cache_write_1h_tokens)) AS cache_write_1h_tokens,
    sumIf(sign * assumeNotNull(cost_usd), cost_usd IS NOT NULL) AS priced_usd,
    sumIf(toInt64(sign), cost_usd IS NULL) AS unpriced_calls,
    minOrNullIf(timestamp, sign > 0) AS first_at,
    maxOrNullIf(timestamp, sign > 0) AS last_at,
    argMinStateIf((toString(agent), toString(team)), (timestamp, message_id), sign > 0 AND agent_id = '') AS main
FROM usage_in
GROUP BY session_id, agent, parent_agent, team, model;

-- The documented views keep their names and columns, and now read the rollups.
CREATE OR REPLACE VIEW sessions ON CLUSTER '{cluster}' AS
SELECT
    session_id, agent, team, host, cwd, started, ended, end_reason, last_seen, events, tool_calls,
    errors, prompts, subagents, outcome
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
);

CREATE OR REPLACE VIEW agents ON CLUSTER '{cluster}' AS
SELECT
    a.agent AS agent,
    a.latest.1 AS team,
    a.latest.2 AS parent_agent,
    a.latest.3 AS agent_type,
    a.latest.4 AS agent_id,
    a.latest.5 AS session_id,
    a.latest.6 AS host,
    a.first_seen AS first_seen,
    a.last_seen AS last_seen,
    a.latest.7 AS last_event,
    multiIf(
        a.state.1 = 'PreToolUse', 'working',
        a.state.1 IN ('PermissionRequest', 'Elicitation'), 'waiting',
        a.state.1 = 'Notification' AND a.state.2 = 'permission_prompt', 'waiting',
        a.state.1 IN ('Stop', 'SubagentStop', 'TeammateIdle', 'SessionStart', 'Notification'), 'idle',
        a.state.1 = 'SessionEnd', 'stopped',
        a.state.1 = 'StopFailure', 'failed',
        'thinking'
    ) AS state,
    if(a.state.1 = 'PreToolUse', a.state.3, '') AS current_tool,
    a.tool_calls AS tool_calls,
    a.errors AS errors,
    coalesce(m.sent, 0) AS messages_sent,
    a.events AS events
FROM
(
    SELECT
        agent, argMaxMerge(latest) AS latest, argMaxMerge(state) AS state, min(first_seen) AS first_seen,
        max(last_seen) AS last_seen, sum(tool_calls) AS tool_calls, sum(errors) AS errors, sum(events) AS events
    FROM agent_rollup
    GROUP BY agent
) AS a
LEFT JOIN
(
    SELECT toString(from_agent) AS from_agent, sum(messages) AS sent FROM edge_hourly GROUP BY from_agent
) AS m ON m.from_agent = toString(a.agent);

-- tool_stats: per tool and window (1h, 1d, 7d, all). A window is made of whole UTC hours: the
-- hours that began within it, the current one included (so "1h" covers 60 to 120 minutes).
--   window, tool
--   calls         PreToolUse events
--   failures      PostToolUseFailure events (interrupted included)
--   interrupted   of which is_interrupt was true
--   denied        PermissionDenied events
--   finished      results of any kind (PostToolUse, PostToolUseFailure, PermissionDenied)
--   failure_pct   100 * failures / finished, NULL when nothing finished
--   timed         results that reported duration_ms
--   p50_ms, p95_ms  quantiles of those durations (quantileTiming: exact below 1,024 ms, to 16 ms
--                 below 30 s; 30,000 stands for "30 s or more"); NULL when none was timed
--   max_ms        the longest reported duration, exact
--   unpaired      calls - finished when positive (calls still running, or whose result is missing)
--   last_error    the latest failure's error text
CREATE VIEW IF NOT EXISTS tool_stats ON CLUSTER '{cluster}' AS
SELECT
    w.window AS window, tool, sum(calls) AS calls, sum(failures) AS failures,
    sum(interrupted) AS interrupted, sum(denied) AS denied, sum(finished) AS finished,
    if(finished = 0, NULL, round(100 * failures / finished, 1)) AS failure_pct,
    sum(timed) AS timed,
    quantilesTimingMerge(0.5, 0.95)(durations) AS q,
    if(timed = 0, NULL, toInt64(q[1])) AS p50_ms,
    if(timed = 0, NULL, toInt64(q[2])) AS p95_ms,
    max(max_ms) AS max_ms,
    toUInt64(greatest(toInt64(calls) - toInt64(finished), 0)) AS unpaired,
    argMaxMerge(last_error) AS last_error
FROM tool_hourly
INNER JOIN
(
    SELECT arrayJoin([('1h', 3600), ('1d', 86400), ('7d', 604800), ('all', 0)]) AS w_pair,
        w_pair.1 AS window, w_pair.2 AS seconds
) AS w ON 1 = 1
WHERE w.seconds = 0 OR hour >= toStartOfHour(now() - toIntervalSecond(w.seconds))
GROUP BY w.window, tool;

-- team_edges: per sender and recipient, the messages sent, from edge_hourly (hours as above).
--   team, from_agent, to_agent, messages, last_at, last_summary
CREATE VIEW IF NOT EXISTS team_edges ON CLUSTER '{cluster}' AS
SELECT
    team, from_agent, to_agent, sum(messages) AS messages, max(last_at) AS last_at,
    argMaxMerge(last_summary) AS last_summary
FROM edge_hourly
GROUP BY team, from_agent, to_agent;

-- The cost views keep their names and columns (006_usage.sql says what each means), and now read
-- the cost rollups: first their rows summed per key, the keys whose messages were all replaced
-- left out.
CREATE OR REPLACE VIEW session_costs ON CLUSTER '{cluster}' AS
SELECT
    session_id, agent, team, api_calls, input_tokens, output_tokens, cache_read_tokens,
    cache_write_5m_tokens, cache_write_1h_tokens,
    if(api_calls > 0 AND unpriced_calls = api_calls, NULL, coalesce(priced_usd, 0)) AS cost_usd,
    unpriced_calls, claude_cost_usd, models, first_at, last_at
FROM
(
    SELECT
        session_id,
        argMinMerge(main) AS main_agent_team,
        multiIf(
            sum(main_calls) > 0, main_agent_team.1,
            sum(calls) > 0, anyIf(parent_agent, is_usage AND parent_agent != ''),
            anyIf(agent, NOT is_usage)
        ) AS agent,
        multiIf(
            sum(main_calls) > 0, main_agent_team.2,
            sum(calls) > 0, anyIf(team, is_usage),
            anyIf(team, NOT is_usage)
        ) AS team,
        toUInt64(sum(calls)) AS api_calls,
        toUInt64(sum(input)) AS input_tokens,
        toUInt64(sum(output)) AS output_tokens,
        toUInt64(sum(cache_read)) AS cache_read_tokens,
        toUInt64(sum(cache_5m)) AS cache_write_5m_tokens,
        toUInt64(sum(cache_1h)) AS cache_write_1h_tokens,
        sumIf(priced, is_usage) AS priced_usd,
        toUInt64(sum(unpriced)) AS unpriced_calls,
        maxIf(claude_total, NOT is_usage) AS claude_cost_usd,
        arraySort(groupUniqArrayIf(model, is_usage)) AS models,
        if(sum(calls) > 0, minIf(first, is_usage), min(first)) AS first_at,
        if(sum(calls) > 0, maxIf(last, is_usage), max(last)) AS last_at
    FROM
    (
        SELECT
            session_id, true AS is_usage, agent, parent_agent, team, model, sum(api_calls) AS calls,
            sum(main_calls) AS main_calls, sum(input_tokens) AS input, sum(output_tokens) AS output,
            sum(cache_read_tokens) AS cache_read, sum(cache_write_5m_tokens) AS cache_5m,
            sum(cache_write_1h_tokens) AS cache_1h, sum(priced_usd) AS priced, sum(unpriced_calls) AS unpriced,
            CAST(NULL AS Nullable(Float64)) AS claude_total, assumeNotNull(min(first_at)) AS first,
            assumeNotNull(max(last_at)) AS last, argMinMergeState(main) AS main
        FROM session_cost
        GROUP BY session_id, agent, parent_agent, team, model
        HAVING calls > 0
        UNION ALL
        SELECT
            session_id, false AS is_usage, any(agent) AS agent, '' AS parent_agent, any(team) AS team,
            '' AS model, 0 AS calls, 0 AS main_calls, 0 AS input, 0 AS output, 0 AS cache_read,
            0 AS cache_5m, 0 AS cache_1h, 0 AS priced, 0 AS unpriced,
            CAST(max(total_cost_usd) AS Nullable(Float64)) AS claude_total, min(timestamp) AS first,
            max(timestamp) AS last, argMinStateIf(('', ''), (timestamp, ''), false) AS main
        FROM cost_states FINAL
        GROUP BY session_id
    )
    GROUP BY session_id
);

CREATE OR REPLACE VIEW agent_costs ON CLUSTER '{cluster}' AS
SELECT
    a.agent AS agent,
    a.latest.1 AS team,
    a.latest.2 AS parent_agent,
    a.latest.3 AS agent_id,
    a.latest.4 AS agent_type,
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
        argMaxMerge(latest) AS latest,
        uniqExactMerge(sessions) AS sessions,
        toUInt64(sum(calls)) AS api_calls,
        toUInt64(sum(input)) AS input_tokens,
        toUInt64(sum(output)) AS output_tokens,
        toUInt64(sum(cache_read)) AS cache_read_tokens,
        toUInt64(sum(cache_5m)) AS cache_write_5m_tokens,
        toUInt64(sum(cache_1h)) AS cache_write_1h_tokens,
        sum(priced) AS priced_usd,
        toUInt64(sum(unpriced)) AS unpriced_calls,
        arraySort(groupUniqArray(model)) AS models,
        min(first) AS first_at,
        max(last) AS last_at
    FROM
    (
        SELECT
            agent, model, sum(api_calls) AS calls, sum(input_tokens) AS input, sum(output_tokens) AS output,
            sum(cache_read_tokens) AS cache_read, sum(cache_write_5m_tokens) AS cache_5m,
            sum(cache_write_1h_tokens) AS cache_1h, sum(priced_usd) AS priced, sum(unpriced_calls) AS unpriced,
            assumeNotNull(min(first_at)) AS first, assumeNotNull(max(last_at)) AS last,
            uniqExactMergeState(sessions) AS sessions, argMaxMergeState(latest) AS latest
        FROM cost_by_agent
        GROUP BY agent, parent_agent, team, model
        HAVING calls > 0
    )
    GROUP BY agent
) AS a
LEFT JOIN
(
    SELECT toString(parent_agent) AS parent_agent, sum(priced_usd) AS priced_usd
    FROM cost_by_agent
    WHERE parent_agent != ''
    GROUP BY parent_agent
) AS s ON s.parent_agent = toString(a.agent);

CREATE OR REPLACE VIEW cost_daily ON CLUSTER '{cluster}' AS
SELECT
    day, team, model, sessions, agents, api_calls, input_tokens, output_tokens, cache_read_tokens,
    cache_write_5m_tokens, cache_write_1h_tokens,
    if(unpriced_calls = api_calls, NULL, coalesce(priced_usd, 0)) AS cost_usd,
    unpriced_calls
FROM
(
    SELECT
        day,
        team,
        model,
        uniqExactMerge(sessions) AS sessions,
        uniqExactMerge(agents) AS agents,
        toUInt64(sum(api_calls)) AS api_calls,
        toUInt64(sum(input_tokens)) AS input_tokens,
        toUInt64(sum(output_tokens)) AS output_tokens,
        toUInt64(sum(cache_read_tokens)) AS cache_read_tokens,
        toUInt64(sum(cache_write_5m_tokens)) AS cache_write_5m_tokens,
        toUInt64(sum(cache_write_1h_tokens)) AS cache_write_1h_tokens,
        sum(priced_usd) AS priced_usd,
        toUInt64(sum(unpriced_calls)) AS unpriced_calls
    FROM cost_by_day
    GROUP BY day, team, model
    HAVING api_calls > 0
);

-- call_events: the tool-call events of `events` (calls, results, denials), narrow, with the
-- payload fields the pairing needs read out at insert time, ordered by time: what
-- tool_calls_since reads. Like the rollups, it never sees a redelivered event (the writer keeps
-- them out); the pairing's aggregates give the same answer for a row seen twice anyway. Its rows
-- expire with the events' (RETENTION_TABLES).
CREATE TABLE IF NOT EXISTS call_events_local ON CLUSTER '{cluster}'
(
    timestamp DateTime64(3, 'UTC'),
    id String,
    session_id String,
    tool_use_id String,
    event LowCardinality(String),
    agent LowCardinality(String),
    team LowCardinality(String),
    agent_id String,
    host LowCardinality(String),
    tool_name LowCardinality(String),
    text String,
    duration_ms Nullable(Int64),
    is_interrupt Bool,
    error String
)
ENGINE = ReplicatedReplacingMergeTree('/clickhouse/tables/{shard}/{database}/call_events', '{replica}')
PARTITION BY toYYYYMM(timestamp)
ORDER BY (timestamp, id);

-- call_events: Distributed over call_events_local, under the single-node name.
-- By cityHash64(id): the rows a ReplacingMergeTree collapses meet on one shard.
CREATE TABLE IF NOT EXISTS call_events ON CLUSTER '{cluster}' AS call_events_local
ENGINE = Distributed('{cluster}', 'agentwatch', 'call_events_local', cityHash64(id));

-- call_events_mv: each shard rolls up its own rows into call_events_local.
CREATE MATERIALIZED VIEW IF NOT EXISTS call_events_mv ON CLUSTER '{cluster}' TO call_events_local AS
SELECT
    timestamp, id, session_id, tool_use_id, event, agent, team, agent_id, host, tool_name,
    if(event = 'PreToolUse', text, '') AS text,
    if(event = 'PreToolUse', NULL, duration_ms) AS duration_ms,
    if(event = 'PostToolUseFailure', JSONExtractBool(data, 'is_interrupt'), false) AS is_interrupt,
    if(event = 'PostToolUseFailure', JSONExtractString(data, 'error'), '') AS error
FROM events_local
WHERE tool_use_id != '' AND event IN ('PreToolUse', 'PostToolUse', 'PostToolUseFailure', 'PermissionDenied');

-- tool_calls_since(since = ...): the `tool_calls` columns for the calls that started at or after
-- `since`, paired from that window of call_events only (ordered by time), so its cost follows
-- the window, not the history:
--   SELECT * FROM tool_calls_since(since = now64(3) - INTERVAL 1 HOUR) WHERE status = 'error'
-- A result is paired with its call when both are in the window (a result comes after its call);
-- the results of calls started before `since` are left out, so no row is an orphan, and a call's
-- fields are its PreToolUse's (one per call; call_events keeps the text of calls only).
CREATE VIEW IF NOT EXISTS tool_calls_since ON CLUSTER '{cluster}' AS
SELECT
    session_id,
    tool_use_id,
    anyIf(agent, event = 'PreToolUse') AS agent,
    anyIf(team, event = 'PreToolUse') AS team,
    anyIf(agent_id, event = 'PreToolUse') AS agent_id,
    anyIf(host, event = 'PreToolUse') AS host,
    anyIf(tool_name, event = 'PreToolUse') AS tool,
    anyIf(text, event = 'PreToolUse') AS text,
    minOrNullIf(timestamp, event = 'PreToolUse') AS started,
    maxOrNullIf(timestamp, event != 'PreToolUse') AS ended,
    coalesce(maxOrNullIf(duration_ms, event != 'PreToolUse'), dateDiff('millisecond', started, ended)) AS duration_ms,
    multiIf(
        max(event = 'PermissionDenied'), 'denied',
        max(event = 'PostToolUseFailure' AND is_interrupt), 'interrupted',
        max(event = 'PostToolUseFailure'), 'error',
        max(event = 'PostToolUse'), 'ok',
        'running'
    ) AS status,
    anyIf(error, event = 'PostToolUseFailure') AS error
FROM call_events
WHERE timestamp >= {since:DateTime64(3, 'UTC')}
GROUP BY session_id, tool_use_id
HAVING max(event = 'PreToolUse');

-- 010_call_rollup ---------------------------------------------------------------------------------
-- call_rollup: one row per tool call and UTC hour (keyed by a hash of the call, then the call),
-- the call and its result folded together by the engine's merges, so that a per-call question
-- about a window (tool_calls_since) reads rows that are already paired instead of pairing every
-- call of the window at query time. It replaces
-- call_events (009), which kept the events and paired them per query: at 10M events a day's
-- calls took 150 to 200 ms to pair; here they take a scan (docs/benchmarks.md).
--
-- Every column is a key or a min/max: folding the same event in twice changes nothing, so a
-- redelivered event (which the writer keeps out anyway) or the backfill below meeting a row the
-- view already wrote cannot count twice. A call's row is whole once its PreToolUse and its result
-- are in one part of the same hour; until the merge that joins them (seconds for fresh parts), or
-- when the result falls in the next hour, its rows are separate and tool_calls_since pairs those
-- few at query time.
--
-- The call's fields (agent, team, agent_id, host, tool, text, started) are its PreToolUse's: the
-- other events write '' or NULL there, so max/min pick the call's. outcome: 0 for the call itself,
-- then 1 ok, 2 error, 3 interrupted, 4 denied; the largest wins, as in tool_calls' precedence.
CREATE TABLE IF NOT EXISTS call_rollup_local ON CLUSTER '{cluster}'
(
    hour DateTime('UTC'),
    call UInt64,
    session_id String,
    tool_use_id String,
    agent SimpleAggregateFunction(max, LowCardinality(String)),
    team SimpleAggregateFunction(max, LowCardinality(String)),
    agent_id SimpleAggregateFunction(max, String),
    host SimpleAggregateFunction(max, LowCardinality(String)),
    tool SimpleAggregateFunction(max, LowCardinality(String)),
    text SimpleAggregateFunction(max, String),
    called SimpleAggregateFunction(max, Bool),
    started SimpleAggregateFunction(min, Nullable(DateTime64(3, 'UTC'))),
    ended SimpleAggregateFunction(max, Nullable(DateTime64(3, 'UTC'))),
    duration_ms SimpleAggregateFunction(max, Nullable(Int64)),
    outcome SimpleAggregateFunction(max, UInt8),
    error SimpleAggregateFunction(max, String)
)
ENGINE = ReplicatedAggregatingMergeTree('/clickhouse/tables/{shard}/{database}/call_rollup', '{replica}')
PARTITION BY toYYYYMM(hour)
PRIMARY KEY (hour, call)
ORDER BY (hour, call, session_id, tool_use_id);

-- call_rollup: Distributed over call_rollup_local, under the single-node name.
-- By cityHash64(session_id, tool_use_id): the rows a AggregatingMergeTree collapses meet on one shard.
CREATE TABLE IF NOT EXISTS call_rollup ON CLUSTER '{cluster}' AS call_rollup_local
ENGINE = Distributed('{cluster}', 'agentwatch', 'call_rollup_local', cityHash64(session_id, tool_use_id));

-- call_rollup_mv: each shard rolls up its own rows into call_rollup_local.
CREATE MATERIALIZED VIEW IF NOT EXISTS call_rollup_mv ON CLUSTER '{cluster}' TO call_rollup_local AS
SELECT
    toStartOfHour(timestamp) AS hour,
    cityHash64(session_id, tool_use_id) AS call,
    session_id,
    tool_use_id,
    if(event = 'PreToolUse', agent, '') AS agent,
    if(event = 'PreToolUse', team, '') AS team,
    if(event = 'PreToolUse', agent_id, '') AS agent_id,
    if(event = 'PreToolUse', host, '') AS host,
    if(event = 'PreToolUse', tool_name, '') AS tool,
    if(event = 'PreToolUse', text, '') AS text,
    event = 'PreToolUse' AS called,
    if(event = 'PreToolUse', timestamp, NULL) AS started,
    if(event = 'PreToolUse', NULL, timestamp) AS ended,
    if(event = 'PreToolUse', NULL, duration_ms) AS duration_ms,
    toUInt8(multiIf(
        event = 'PermissionDenied', 4,
        event = 'PostToolUseFailure' AND JSONExtractBool(data, 'is_interrupt'), 3,
        event = 'PostToolUseFailure', 2,
        event = 'PostToolUse', 1,
        0
    )) AS outcome,
    if(event = 'PostToolUseFailure', JSONExtractString(data, 'error'), '') AS error
FROM events_local
WHERE tool_use_id != '' AND event IN ('PreToolUse', 'PostToolUse', 'PostToolUseFailure', 'PermissionDenied');

-- tool_calls_since(since = ...): the `tool_calls` columns for the calls that started at or after
-- `since`, from that window of call_rollup only:
--   SELECT * FROM tool_calls_since(since = now64(3) - INTERVAL 1 HOUR) WHERE status = 'error'
-- The calls whose every row in the window is whole (a call and its result in one row: nearly all)
-- are read as they are. The others (a fresh part not merged yet, a result in the next hour, a call
-- still running, a second result) are paired per query from all their rows: `split`, the hashes of
-- those calls, is small. A hash shared by two calls only sends a whole row to the pairing, which
-- groups by the call itself. A result is paired with its call when both are in the window (a
-- result comes after its call); the results of calls started before `since` are left out, so no
-- row is an orphan.
CREATE OR REPLACE VIEW tool_calls_since ON CLUSTER '{cluster}' AS
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

-- call_events is no longer read: its view stops, and the table (a copy of events) goes.
DROP VIEW IF EXISTS call_events_mv ON CLUSTER '{cluster}';

DROP TABLE IF EXISTS call_events ON CLUSTER '{cluster}' SYNC;

DROP TABLE IF EXISTS call_events_local ON CLUSTER '{cluster}' SYNC;

-- 011_tool_daily ----------------------------------------------------------------------------------
-- tool_daily: tool_hourly folded into UTC days, for the per-tool answers over all time. Summed
-- over every hour, tool_hourly's duration states hold up to a thousand durations per hour and
-- tool before they turn into fixed histograms, so "all" cost in proportion to the events (at 10M
-- events, 38 ms against 14 ms at 1M; 85 ms at 30M). A day's state is past that size at a few
-- thousand results, so "all" reads one row per day and tool whatever the events: 15 ms at 1M,
-- 10M and 30M (docs/benchmarks.md).
--
-- Its view reads tool_hourly's inserted rows (the partial states of each insert), so it sees what
-- tool_hourly sees: the events the writer let through (store/writes.py keeps redeliveries out).
CREATE TABLE IF NOT EXISTS tool_daily_local ON CLUSTER '{cluster}'
(
    day Date,
    tool LowCardinality(String),
    calls SimpleAggregateFunction(sum, UInt64),
    failures SimpleAggregateFunction(sum, UInt64),
    interrupted SimpleAggregateFunction(sum, UInt64),
    denied SimpleAggregateFunction(sum, UInt64),
    finished SimpleAggregateFunction(sum, UInt64),
    timed SimpleAggregateFunction(sum, UInt64),
    durations AggregateFunction(quantilesTiming(0.5, 0.95), Int64),
    max_ms SimpleAggregateFunction(max, Nullable(Int64)),
    last_error AggregateFunction(argMax, String, Tuple(DateTime64(3, 'UTC'), String))
)
ENGINE = ReplicatedAggregatingMergeTree('/clickhouse/tables/{shard}/{database}/tool_daily', '{replica}')
ORDER BY (day, tool);

-- tool_daily: Distributed over tool_daily_local, under the single-node name.
-- By cityHash64(tool): the rows a AggregatingMergeTree collapses meet on one shard.
CREATE TABLE IF NOT EXISTS tool_daily ON CLUSTER '{cluster}' AS tool_daily_local
ENGINE = Distributed('{cluster}', 'agentwatch', 'tool_daily_local', cityHash64(tool));

-- tool_daily_mv: each shard rolls up its own rows into tool_daily_local.
CREATE MATERIALIZED VIEW IF NOT EXISTS tool_daily_mv ON CLUSTER '{cluster}' TO tool_daily_local AS
SELECT
    toDate(hour) AS day,
    tool,
    sum(calls) AS calls,
    sum(failures) AS failures,
    sum(interrupted) AS interrupted,
    sum(denied) AS denied,
    sum(finished) AS finished,
    sum(timed) AS timed,
    quantilesTimingMergeState(0.5, 0.95)(durations) AS durations,
    max(max_ms) AS max_ms,
    argMaxMergeState(last_error) AS last_error
FROM tool_hourly_local
GROUP BY day, tool;

-- tool_stats keeps its columns; its window 'all' now reads tool_daily, the others tool_hourly.
CREATE OR REPLACE VIEW tool_stats ON CLUSTER '{cluster}' AS
SELECT
    window, tool, sum(calls) AS calls, sum(failures) AS failures,
    sum(interrupted) AS interrupted, sum(denied) AS denied, sum(finished) AS finished,
    if(finished = 0, NULL, round(100 * failures / finished, 1)) AS failure_pct,
    sum(timed) AS timed,
    quantilesTimingMerge(0.5, 0.95)(durations) AS q,
    if(timed = 0, NULL, toInt64(q[1])) AS p50_ms,
    if(timed = 0, NULL, toInt64(q[2])) AS p95_ms,
    max(max_ms) AS max_ms,
    toUInt64(greatest(toInt64(calls) - toInt64(finished), 0)) AS unpaired,
    argMaxMerge(last_error) AS last_error
FROM
(
    SELECT w.window AS window, tool, calls, failures, interrupted, denied, finished, timed, durations,
        max_ms, last_error
    FROM tool_hourly
    INNER JOIN
    (
        SELECT arrayJoin([('1h', 3600), ('1d', 86400), ('7d', 604800)]) AS w_pair,
            w_pair.1 AS window, w_pair.2 AS seconds
    ) AS w ON 1 = 1
    WHERE hour >= toStartOfHour(now() - toIntervalSecond(w.seconds))
    UNION ALL
    SELECT 'all' AS window, tool, calls, failures, interrupted, denied, finished, timed, durations,
        max_ms, last_error
    FROM tool_daily
)
GROUP BY window, tool;

-- 012_agents --------------------------------------------------------------------------------------
-- GENERATED from agentwatch/agents.py (the agent state machine and identity) by
--     python -m agentwatch.store.agents_sql > src/agentwatch/store/schema/012_agents.sql
-- Edit that table, not this file, and regenerate; a test fails when this is not current.
--
-- Agents are keyed by where they live (agents.scope: their session, else their team) and their
-- host, not by their name alone: two `researcher`s in two sessions are two rows, each with its
-- own counts, messages and cost. The name-keyed agent_rollup and cost_by_agent (009) go.

-- agent_key_rollup: per host, scope and agent name, the inputs of the `agents` view:
--   latest      (team, parent_agent, agent_type, agent_id, session_id, event) of its latest event
--   state       (event, notification type, tool, time, id) of its latest state event
--   first_seen, last_seen, tool_calls (PreToolUse), errors (PostToolUseFailure, StopFailure),
--   events (rows of `events`), messages_sent (messages it sent)
CREATE TABLE IF NOT EXISTS agent_key_rollup_local ON CLUSTER '{cluster}'
(
    host LowCardinality(String),
    scope String,
    agent LowCardinality(String),
    latest AggregateFunction(
        argMax, Tuple(String, String, String, String, String, String), Tuple(DateTime64(3, 'UTC'), String)
    ),
    state AggregateFunction(
        argMax,
        Tuple(String, String, String, DateTime64(3, 'UTC'), String),
        Tuple(DateTime64(3, 'UTC'), String)
    ),
    first_seen SimpleAggregateFunction(min, DateTime64(3, 'UTC')),
    last_seen SimpleAggregateFunction(max, DateTime64(3, 'UTC')),
    tool_calls SimpleAggregateFunction(sum, UInt64),
    errors SimpleAggregateFunction(sum, UInt64),
    events SimpleAggregateFunction(sum, UInt64),
    messages_sent SimpleAggregateFunction(sum, UInt64)
)
ENGINE = ReplicatedAggregatingMergeTree('/clickhouse/tables/{shard}/{database}/agent_key_rollup', '{replica}')
ORDER BY (host, scope, agent);

-- agent_key_rollup: Distributed over agent_key_rollup_local, under the single-node name.
-- By cityHash64(host, scope, agent): the rows a AggregatingMergeTree collapses meet on one shard.
CREATE TABLE IF NOT EXISTS agent_key_rollup ON CLUSTER '{cluster}' AS agent_key_rollup_local
ENGINE = Distributed('{cluster}', 'agentwatch', 'agent_key_rollup_local', cityHash64(host, scope, agent));

-- agent_key_rollup_mv: each shard rolls up its own rows into agent_key_rollup_local.
CREATE MATERIALIZED VIEW IF NOT EXISTS agent_key_rollup_mv ON CLUSTER '{cluster}' TO agent_key_rollup_local AS
SELECT
    host, scope, agent,
    argMaxState(
        (toString(team), toString(parent_agent), toString(agent_type), agent_id, session_id, toString(event)),
        (timestamp, id)
    ) AS latest,
    argMaxStateIf(
        (toString(event), note, toString(tool_name), timestamp, id), (timestamp, id), is_state
    ) AS state,
    min(timestamp) AS first_seen,
    max(timestamp) AS last_seen,
    toUInt64(countIf(event = 'PreToolUse')) AS tool_calls,
    toUInt64(countIf(event IN ('PostToolUseFailure', 'StopFailure'))) AS errors,
    toUInt64(count()) AS events,
    toUInt64(0) AS messages_sent
FROM
(
    SELECT
        host,
        if(session_id != '', session_id, toString(team)) AS scope,
        agent, team, parent_agent, agent_type, agent_id, session_id, tool_name, timestamp, id, event, note,
        event IN ('PreToolUse', 'PermissionRequest', 'Elicitation', 'PostToolUse', 'PostToolUseFailure', 'PermissionDenied', 'PostToolBatch', 'ElicitationResult', 'UserPromptSubmit', 'UserPromptExpansion', 'SubagentStart', 'PreCompact', 'PostCompact', 'SessionStart', 'Stop', 'SubagentStop', 'TeammateIdle', 'StopFailure', 'SessionEnd') OR (event = 'Notification' AND note IN ('permission_prompt', 'elicitation_dialog', 'idle_prompt')) AS is_state
    FROM
    (
        SELECT
            host, agent, team, parent_agent, agent_type, agent_id, session_id, tool_name, timestamp, id,
            event,
            if(event = 'Notification', JSONExtractString(data, 'notification_type'), '') AS note
        FROM events_local
    )
)
GROUP BY host, scope, agent;

CREATE MATERIALIZED VIEW IF NOT EXISTS agent_key_messages_mv ON CLUSTER '{cluster}' TO agent_key_rollup AS
SELECT
    host,
    if(session_id != '', session_id, toString(team)) AS scope,
    agent, min(timestamp) AS first_seen, max(timestamp) AS last_seen, toUInt64(count()) AS messages_sent
FROM message_envelopes
GROUP BY host, scope, agent;

-- agent_cost_rollup: per host, scope, agent (with its parent), team and model: API messages,
-- tokens, their price (signed sums: see usage_in in 009), the sessions, the latest message's
-- team, parent, agent_id and type. agent_costs and the dashboard's roster read it.
CREATE TABLE IF NOT EXISTS agent_cost_rollup_local ON CLUSTER '{cluster}'
(
    host LowCardinality(String),
    scope String,
    agent LowCardinality(String),
    parent_agent LowCardinality(String),
    team LowCardinality(String),
    model LowCardinality(String),
    api_calls SimpleAggregateFunction(sum, Int64),
    input_tokens SimpleAggregateFunction(sum, Int64),
    output_tokens SimpleAggregateFunction(sum, Int64),
    cache_read_tokens SimpleAggregateFunction(sum, Int64),
    cache_write_5m_tokens SimpleAggregateFunction(sum, Int64),
    cache_write_1h_tokens SimpleAggregateFunction(sum, Int64),
    priced_usd SimpleAggregateFunction(sum, Float64),
    unpriced_calls SimpleAggregateFunction(sum, Int64),
    first_at SimpleAggregateFunction(min, Nullable(DateTime64(3, 'UTC'))),
    last_at SimpleAggregateFunction(max, Nullable(DateTime64(3, 'UTC'))),
    sessions AggregateFunction(uniqExact, String),
    latest AggregateFunction(
        argMax, Tuple(String, String, String, String), Tuple(DateTime64(3, 'UTC'), String)
    )
)
ENGINE = ReplicatedAggregatingMergeTree('/clickhouse/tables/{shard}/{database}/agent_cost_rollup', '{replica}')
ORDER BY (host, scope, agent, parent_agent, team, model);

-- agent_cost_rollup: Distributed over agent_cost_rollup_local, under the single-node name.
-- By cityHash64(host, scope, agent): the rows a AggregatingMergeTree collapses meet on one shard.
CREATE TABLE IF NOT EXISTS agent_cost_rollup ON CLUSTER '{cluster}' AS agent_cost_rollup_local
ENGINE = Distributed('{cluster}', 'agentwatch', 'agent_cost_rollup_local', cityHash64(host, scope, agent));

CREATE MATERIALIZED VIEW IF NOT EXISTS agent_cost_rollup_mv ON CLUSTER '{cluster}' TO agent_cost_rollup AS
SELECT
    host,
    if(session_id != '', session_id, toString(team)) AS scope,
    agent, parent_agent, team, model,
    sum(toInt64(sign)) AS api_calls,
    sum(sign * toInt64(input_tokens)) AS input_tokens,
    sum(sign * toInt64(output_tokens)) AS output_tokens,
    sum(sign * toInt64(cache_read_tokens)) AS cache_read_tokens,
    sum(sign * toInt64(cache_write_5m_tokens)) AS cache_write_5m_tokens,
    sum(sign * toInt64(cache_write_1h_tokens)) AS cache_write_1h_tokens,
    sumIf(sign * assumeNotNull(cost_usd), cost_usd IS NOT NULL) AS priced_usd,
    sumIf(toInt64(sign), cost_usd IS NULL) AS unpriced_calls,
    minOrNullIf(timestamp, sign > 0) AS first_at,
    maxOrNullIf(timestamp, sign > 0) AS last_at,
    uniqExactStateIf(session_id, sign > 0) AS sessions,
    argMaxStateIf(
        (toString(team), toString(parent_agent), agent_id, toString(agent_type)),
        (timestamp, message_id),
        sign > 0
    ) AS latest
FROM usage_in
GROUP BY host, scope, agent, parent_agent, team, model;

DROP VIEW IF EXISTS agent_rollup_mv ON CLUSTER '{cluster}';

DROP TABLE IF EXISTS agent_rollup ON CLUSTER '{cluster}' SYNC;

DROP TABLE IF EXISTS agent_rollup_local ON CLUSTER '{cluster}' SYNC;

DROP VIEW IF EXISTS cost_by_agent_mv ON CLUSTER '{cluster}';

DROP TABLE IF EXISTS cost_by_agent ON CLUSTER '{cluster}' SYNC;

DROP TABLE IF EXISTS cost_by_agent_local ON CLUSTER '{cluster}' SYNC;

-- agents: one row per agent (host, scope, name): those with events, and those known only from
-- token usage (an imported transcript: last_event 'Usage', no state event). The columns of 009's
-- view, and:
--   scope         where it lives: its session, else its team (agents.scope)
--   state         by agents.TRANSITIONS from its latest state event; `lost` once its scope sent
--                 nothing for 600 s while it is not stopped
--   current_tool  the tool of its latest state event while working or waiting
--   state_since   when its latest state event happened (NULL: none yet)
--   silent_s      seconds since the latest event (or API message) of its scope
--   state_event, state_note, state_id
--                 that event ('' when none), its notification type, its id
--   scope_last_seen
--                 the time of the latest event (or API message) of its scope
CREATE OR REPLACE VIEW agents ON CLUSTER '{cluster}' AS
SELECT
    agent, team, parent_agent, agent_type, agent_id, session_id, host, first_seen, last_seen, last_event,
    if(raw_state != 'stopped' AND silent_s > 600, 'lost', raw_state) AS state,
    if(raw_state IN ('waiting', 'working'), tool, '') AS current_tool,
    tool_calls, errors, messages_sent, events, scope, state_since, silent_s, state_event, state_note,
    state_id, scope_last_seen
FROM
(
    SELECT
        *,
        max(last_seen) OVER (PARTITION BY host, scope) AS scope_last_seen,
        dateDiff('millisecond', scope_last_seen, now64(3)) / 1000 AS silent_s
    FROM
    (
        SELECT
            host, scope, agent, l.1 AS team, l.2 AS parent_agent, l.3 AS agent_type, l.4 AS agent_id,
            l.5 AS session_id, l.6 AS last_event, first_seen, last_seen, tool_calls, errors, events,
            messages_sent,
            multiIf(
            s.1 = 'PreToolUse', 'working',
            s.1 IN ('PermissionRequest', 'Elicitation'), 'waiting',
            s.1 = 'Notification' AND s.2 IN ('permission_prompt', 'elicitation_dialog'), 'waiting',
            s.1 = 'Notification' AND s.2 = 'idle_prompt', 'idle',
            s.1 IN ('PostToolUse', 'PostToolUseFailure', 'PermissionDenied', 'PostToolBatch', 'ElicitationResult', 'UserPromptSubmit', 'UserPromptExpansion', 'SubagentStart', 'PreCompact', 'PostCompact'), 'thinking',
            s.1 IN ('SessionStart', 'Stop', 'SubagentStop', 'TeammateIdle'), 'idle',
            s.1 = 'StopFailure', 'failed',
            s.1 = 'SessionEnd', 'stopped',
            'thinking'
        ) AS raw_state,
            s.3 AS tool,
            if(s.1 = '', NULL, s.4) AS state_since,
            s.1 AS state_event,
            s.2 AS state_note,
            s.5 AS state_id
        FROM
        (
            SELECT
                host, scope, agent, argMaxMerge(latest) AS l, argMaxMerge(state) AS s,
                min(first_seen) AS first_seen,
                max(last_seen) AS last_seen, sum(tool_calls) AS tool_calls, sum(errors) AS errors,
                sum(events) AS events, sum(messages_sent) AS messages_sent
            FROM agent_key_rollup
            GROUP BY host, scope, agent
        )
        UNION ALL
        SELECT
            host, scope, agent, c.1 AS team, c.2 AS parent_agent, c.4 AS agent_type, c.3 AS agent_id,
            scope AS session_id, 'Usage' AS last_event, first_seen, last_seen, toUInt64(0) AS tool_calls,
            toUInt64(0) AS errors, toUInt64(0) AS events, toUInt64(0) AS messages_sent,
            'thinking' AS raw_state, '' AS tool, CAST(NULL AS Nullable(DateTime64(3, 'UTC'))) AS state_since,
            '' AS state_event, '' AS state_note, '' AS state_id
        FROM
        (
            SELECT
                host, scope, agent, argMaxMerge(latest) AS c, assumeNotNull(min(first_at)) AS first_seen,
                assumeNotNull(max(last_at)) AS last_seen
            FROM agent_cost_rollup
            GROUP BY host, scope, agent
            HAVING sum(api_calls) > 0
        )
        WHERE (host, scope, agent) NOT IN (SELECT host, scope, agent FROM agent_key_rollup)
    )
);

-- agent_costs: one row per agent (host, scope, name) with usage; the columns of 009's view, and
-- host and scope. The subagents' cost is that of the agents of its host and scope whose parent it is.
CREATE OR REPLACE VIEW agent_costs ON CLUSTER '{cluster}' AS
SELECT
    a.agent AS agent,
    a.latest.1 AS team,
    a.latest.2 AS parent_agent,
    a.latest.3 AS agent_id,
    a.latest.4 AS agent_type,
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
    coalesce(a.priced_usd, 0) + coalesce(s.priced_usd, 0) AS cost_with_subagents_usd,
    a.host AS host,
    a.scope AS scope
FROM
(
    SELECT
        host,
        scope,
        agent,
        argMaxMerge(latest) AS latest,
        uniqExactMerge(sessions) AS sessions,
        toUInt64(sum(calls)) AS api_calls,
        toUInt64(sum(input)) AS input_tokens,
        toUInt64(sum(output)) AS output_tokens,
        toUInt64(sum(cache_read)) AS cache_read_tokens,
        toUInt64(sum(cache_5m)) AS cache_write_5m_tokens,
        toUInt64(sum(cache_1h)) AS cache_write_1h_tokens,
        sum(priced) AS priced_usd,
        toUInt64(sum(unpriced)) AS unpriced_calls,
        arraySort(groupUniqArray(model)) AS models,
        min(first) AS first_at,
        max(last) AS last_at
    FROM
    (
        SELECT
            host, scope, agent, model, sum(api_calls) AS calls, sum(input_tokens) AS input,
            sum(output_tokens) AS output, sum(cache_read_tokens) AS cache_read,
            sum(cache_write_5m_tokens) AS cache_5m, sum(cache_write_1h_tokens) AS cache_1h,
            sum(priced_usd) AS priced, sum(unpriced_calls) AS unpriced,
            assumeNotNull(min(first_at)) AS first, assumeNotNull(max(last_at)) AS last,
            uniqExactMergeState(sessions) AS sessions, argMaxMergeState(latest) AS latest
        FROM agent_cost_rollup
        GROUP BY host, scope, agent, parent_agent, team, model
        HAVING calls > 0
    )
    GROUP BY host, scope, agent
) AS a
LEFT JOIN
(
    SELECT host, scope, toString(parent_agent) AS parent_agent, sum(priced_usd) AS priced_usd
    FROM agent_cost_rollup
    WHERE parent_agent != ''
    GROUP BY host, scope, parent_agent
) AS s ON s.host = a.host AND s.scope = a.scope AND s.parent_agent = toString(a.agent);

-- 013_harness -------------------------------------------------------------------------------------
-- Every coding agent on one bus: Claude Code, Codex CLI and Gemini CLI (agentwatch/harnesses.py).
--
-- events gains two columns (the envelope's fields of the same names):
--   harness        who sent the event: claude-code, codex or gemini-cli (an envelope from an
--                  emitter older than this column is Claude Code's: it knew no other)
--   harness_event  the harness's own name of the event (Gemini's BeforeTool, AfterModel, ...);
--                  `event` is the normalised one (PreToolUse; PostModelRequest or
--                  ModelResponseChunk), which the subjects, the state machine and the rules use
ALTER TABLE events_local ON CLUSTER '{cluster}' ADD COLUMN IF NOT EXISTS harness LowCardinality(String) DEFAULT 'claude-code';

-- The same column on the Distributed events, whose columns are events_local's.
ALTER TABLE events ON CLUSTER '{cluster}' ADD COLUMN IF NOT EXISTS harness LowCardinality(String) DEFAULT 'claude-code';

ALTER TABLE events_local ON CLUSTER '{cluster}' ADD COLUMN IF NOT EXISTS harness_event LowCardinality(String) DEFAULT event;

-- The same column on the Distributed events, whose columns are events_local's.
ALTER TABLE events ON CLUSTER '{cluster}' ADD COLUMN IF NOT EXISTS harness_event LowCardinality(String) DEFAULT event;

-- usage gains, for every API message:
--   harness          whose logs it was read from
--   reasoning_tokens the reasoning (Codex) or thought (Gemini) tokens among output_tokens, which
--                    include them: they are billed as output
-- The tokens of every harness are stored in Anthropic's terms (input_tokens without the cached
-- part, cache_read_tokens the cached part): Codex's and Gemini's input includes its cached tokens,
-- and the emitter takes them out before it sends them.
ALTER TABLE usage_local ON CLUSTER '{cluster}' ADD COLUMN IF NOT EXISTS harness LowCardinality(String) DEFAULT 'claude-code';

-- The same column on the Distributed usage, whose columns are usage_local's.
ALTER TABLE usage ON CLUSTER '{cluster}' ADD COLUMN IF NOT EXISTS harness LowCardinality(String) DEFAULT 'claude-code';

ALTER TABLE usage_local ON CLUSTER '{cluster}' ADD COLUMN IF NOT EXISTS reasoning_tokens UInt64 DEFAULT 0;

-- The same column on the Distributed usage, whose columns are usage_local's.
ALTER TABLE usage ON CLUSTER '{cluster}' ADD COLUMN IF NOT EXISTS reasoning_tokens UInt64 DEFAULT 0;

ALTER TABLE usage_in ON CLUSTER '{cluster}' ADD COLUMN IF NOT EXISTS harness LowCardinality(String) DEFAULT 'claude-code';

ALTER TABLE usage_in ON CLUSTER '{cluster}' ADD COLUMN IF NOT EXISTS reasoning_tokens UInt64 DEFAULT 0;

-- The view that stores usage_in's rows in usage now passes the two columns on.
ALTER TABLE usage_in_mv ON CLUSTER '{cluster}' MODIFY QUERY
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
CREATE TABLE IF NOT EXISTS cost_by_harness_local ON CLUSTER '{cluster}'
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
ENGINE = ReplicatedAggregatingMergeTree('/clickhouse/tables/{shard}/{database}/cost_by_harness', '{replica}')
ORDER BY (hour, harness, model);

-- cost_by_harness: Distributed over cost_by_harness_local, under the single-node name.
-- By cityHash64(harness): the rows a AggregatingMergeTree collapses meet on one shard.
CREATE TABLE IF NOT EXISTS cost_by_harness ON CLUSTER '{cluster}' AS cost_by_harness_local
ENGINE = Distributed('{cluster}', 'agentwatch', 'cost_by_harness_local', cityHash64(harness));

CREATE MATERIALIZED VIEW IF NOT EXISTS cost_by_harness_mv ON CLUSTER '{cluster}' TO cost_by_harness AS
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

-- 014_otel ----------------------------------------------------------------------------------------
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
CREATE TABLE IF NOT EXISTS otel_logs_local ON CLUSTER '{cluster}'
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
ENGINE = ReplicatedReplacingMergeTree('/clickhouse/tables/{shard}/{database}/otel_logs', '{replica}')
ORDER BY id;

-- otel_logs: Distributed over otel_logs_local, under the single-node name.
-- By cityHash64(id): the rows a ReplacingMergeTree collapses meet on one shard.
CREATE TABLE IF NOT EXISTS otel_logs ON CLUSTER '{cluster}' AS otel_logs_local
ENGINE = Distributed('{cluster}', 'agentwatch', 'otel_logs_local', cityHash64(id));

-- otel_metrics: one row per metric data point, as sent (a DELTA point is the change over its
-- interval: add them up; a CUMULATIVE one is the total since start_time: take the latest).
--   id            the point's hash
--   metric, unit, kind (sum, gauge, histogram), temporality (delta, cumulative, ''), monotonic
--   start_time, time   the interval
--   value         asDouble or asInt (a histogram: its sum), count (a histogram's count, else 0)
--   session_id
--   series        the attributes as canonical JSON: with `metric`, the key of one series
--   attributes, resource, service_name
CREATE TABLE IF NOT EXISTS otel_metrics_local ON CLUSTER '{cluster}'
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
ENGINE = ReplicatedReplacingMergeTree('/clickhouse/tables/{shard}/{database}/otel_metrics', '{replica}')
ORDER BY id;

-- otel_metrics: Distributed over otel_metrics_local, under the single-node name.
-- By cityHash64(id): the rows a ReplacingMergeTree collapses meet on one shard.
CREATE TABLE IF NOT EXISTS otel_metrics ON CLUSTER '{cluster}' AS otel_metrics_local
ENGINE = Distributed('{cluster}', 'agentwatch', 'otel_metrics_local', cityHash64(id));

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
CREATE TABLE IF NOT EXISTS otel_spans_local ON CLUSTER '{cluster}'
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
ENGINE = ReplicatedReplacingMergeTree('/clickhouse/tables/{shard}/{database}/otel_spans', '{replica}')
ORDER BY id;

-- otel_spans: Distributed over otel_spans_local, under the single-node name.
-- By cityHash64(id): the rows a ReplacingMergeTree collapses meet on one shard.
CREATE TABLE IF NOT EXISTS otel_spans ON CLUSTER '{cluster}' AS otel_spans_local
ENGINE = Distributed('{cluster}', 'agentwatch', 'otel_spans_local', cityHash64(id));

-- hook_runs: per session, hook event and hook (`hook_name`: the event and its matcher,
-- PreToolUse:Bash), from Claude Code's hook_execution_complete events: how often they ran, how
-- long, how often they failed or blocked. One firing runs `num_hooks` commands.
--   session_id, hook_event, hook_name
--   runs          firings (hook_execution_complete events)
--   commands      hook commands run (the sum of num_hooks, Claude Code's own plugins' included)
--   succeeded, blocked, failed (non-blocking errors), cancelled   commands, by outcome
--   total_ms, avg_ms, max_ms   the firings' total_duration_ms
--   first_at, last_at
CREATE VIEW IF NOT EXISTS hook_runs ON CLUSTER '{cluster}' AS
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
CREATE VIEW IF NOT EXISTS api_requests ON CLUSTER '{cluster}' AS
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
CREATE VIEW IF NOT EXISTS otel_metric_totals ON CLUSTER '{cluster}' AS
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

-- 015_search --------------------------------------------------------------------------------------
-- Search across the whole history (`agentwatch search`, the dashboard's search): a text index on
-- the event's one-line text and on its payload (the hook's JSON, after redaction).
--
-- A text index (an inverted index: ClickHouse 26.2 and later) maps each word to the rows that
-- hold it: the words are split at every character that is not a letter or a digit, lower-cased
-- (the preprocessor). `hasAllTokens(text, 'make test')` reads the rows that hold both words, so a
-- rare word costs a few granules at any size of history, not a scan (docs/queries.md, "search").
-- An n-gram bloom filter (ngrambf_v1) finds parts of words too, but one filter per granule of
-- 8,192 payloads saturates and stops skipping; the words' posting lists do not.
--
-- Events stored before this file was applied are indexed by the MATERIALIZE INDEX mutations at
-- the end, in the background (on a cluster, run them by hand on events_local); until they are
-- done, those parts are read in full: the same answer, slower.
ALTER TABLE events_local ON CLUSTER '{cluster}' ADD INDEX IF NOT EXISTS idx_text_words text TYPE text(tokenizer = splitByNonAlpha, preprocessor = lower(text));

ALTER TABLE events_local ON CLUSTER '{cluster}' ADD INDEX IF NOT EXISTS idx_data_words data TYPE text(tokenizer = splitByNonAlpha, preprocessor = lower(data));

-- 016_events_in -----------------------------------------------------------------------------------
-- events_in: where the store inserts the event envelopes (JSONEachRow), on their way to `events`.
-- A Null table (keeps nothing) with the columns of `events`, each of its LowCardinality(String)
-- columns read as a plain String: ClickHouse reads a LowCardinality column from JSON text one
-- value at a time into its dictionary (a temporary column per value), which was more than half
-- of the cost of parsing an envelope; the view below converts each block's whole columns at once
-- (about a quarter less CPU per stored event, rollups included). The defaults are those of
-- `events`, so an envelope without a field gets what `events` would have given it; `stored_at`
-- is left to `events`. A column added to `events` is added here too, and to the view
-- (tests/integration/test_schema.py compares them).
-- events_in: on every node (Null keeps nothing); the store inserts into the node it
-- talks to, and the materialized views over it write through the Distributed tables.
CREATE TABLE IF NOT EXISTS events_in ON CLUSTER '{cluster}'
(
    id String,
    timestamp DateTime64(3, 'UTC'),
    v UInt8,
    event String,
    kind String,
    agent String,
    team String,
    direction String,
    peer String,
    text String,
    source String,
    session_id String,
    agent_id String,
    agent_type String,
    parent_agent String,
    tool_name String,
    tool_use_id String,
    host String,
    cwd String,
    redacted UInt32,
    truncated Bool,
    data String,
    seq UInt64 DEFAULT 0,
    spool_bytes UInt64 DEFAULT 0,
    prompt_id String DEFAULT JSONExtractString(data, 'prompt_id'),
    duration_ms Nullable(Int64) DEFAULT JSONExtract(data, 'duration_ms', 'Nullable(Int64)'),
    permission_mode String DEFAULT JSONExtractString(data, 'permission_mode'),
    model String DEFAULT if(JSONHas(data, 'model'), JSONExtractString(data, 'model'), JSONExtractString(data, 'to_model')),
    harness String DEFAULT 'claude-code',
    harness_event String DEFAULT event
)
ENGINE = Null;

-- Every block inserted into events_in, into `events`, whose own views (the rollups, event_ids)
-- then see it as they saw the store's inserts before.
CREATE MATERIALIZED VIEW IF NOT EXISTS events_in_mv ON CLUSTER '{cluster}' TO events AS
SELECT
    id, timestamp, v, event, kind, agent, team, direction, peer, text, source, session_id, agent_id,
    agent_type, parent_agent, tool_name, tool_use_id, host, cwd, redacted, truncated, data, seq,
    spool_bytes, prompt_id, duration_ms, permission_mode, model, harness, harness_event
FROM events_in;

-- 017_history_windows -----------------------------------------------------------------------------
-- Time-bounded questions on the documented views cost what the window holds, not the history.
--
-- tool_calls (004) paired every call of the history from `events` at every question: a
-- `WHERE started >= ...` on it cannot reach the events table, because `started` only exists
-- after the pairing (10.9 s at 10M events for the last hour). It now reads call_rollup (010),
-- whose rows are mostly whole calls (a PreToolUse and its result folded in one hour), and the
-- engine finds a window's whole calls through a projection ordered by `started`. What is not
-- one whole row there (a call whose result came in a later hour, a call still running or never
-- answered, a result whose call was never stored, rows the engine has not merged yet) is kept
-- apart in loose_calls, a table that forgets a call once its call and result met in one hour, so
-- it holds those few calls whatever the history's size (docs/benchmarks.md).

-- call_rollup: its rows by the call's start (a projection of row numbers only: the index the
-- windowed read uses), and the rows that are not a whole call (called, outcome: a few bytes a row),
-- so finding those reads their granules only. Projections of an aggregating table are rebuilt
-- when its parts merge.
ALTER TABLE call_rollup_local ON CLUSTER '{cluster}' MODIFY SETTING deduplicate_merge_projection_mode = 'rebuild';

ALTER TABLE call_rollup_local ON CLUSTER '{cluster}' ADD PROJECTION IF NOT EXISTS by_started (SELECT _part_offset ORDER BY started);

ALTER TABLE call_rollup_local ON CLUSTER '{cluster}' ADD PROJECTION IF NOT EXISTS by_wholeness (SELECT call, called, outcome ORDER BY called, outcome);

-- loose_calls: the tool events of call_rollup again, a call's PreToolUse with sign 1 and each result
-- with sign -1, keyed by the call and the UTC hour. A call and one result of the same hour cancel
-- (at insert within one block, else at the next merge) and leave nothing; what stays is what
-- call_rollup cannot give as one whole row: a call and its result in two hours (one row each),
-- a call with no result yet (its row), a result with no call (its row), and what is left of a call
-- with more events (a second result in a later hour, ...). Columns as in call_rollup, one event
-- each, but every row keeps its own event's agent, team, agent_id, host, tool and text (a result's
-- too: a result without its call shows them).
CREATE TABLE IF NOT EXISTS loose_calls_local ON CLUSTER '{cluster}'
(
    session_id String,
    tool_use_id String,
    hour DateTime('UTC'),
    call UInt64,
    sign Int8,
    version UInt8 DEFAULT 0,
    agent LowCardinality(String),
    team LowCardinality(String),
    agent_id String,
    host LowCardinality(String),
    tool LowCardinality(String),
    text String,
    called Bool,
    started Nullable(DateTime64(3, 'UTC')),
    ended Nullable(DateTime64(3, 'UTC')),
    duration_ms Nullable(Int64),
    outcome UInt8,
    error String
)
ENGINE = ReplicatedVersionedCollapsingMergeTree('/clickhouse/tables/{shard}/{database}/loose_calls', '{replica}', sign, version)
PARTITION BY toYYYYMM(hour)
ORDER BY (session_id, tool_use_id, hour);

-- loose_calls: Distributed over loose_calls_local, under the single-node name.
-- By cityHash64(session_id, tool_use_id): the rows a VersionedCollapsingMergeTree collapses meet on one shard.
CREATE TABLE IF NOT EXISTS loose_calls ON CLUSTER '{cluster}' AS loose_calls_local
ENGINE = Distributed('{cluster}', 'agentwatch', 'loose_calls_local', cityHash64(session_id, tool_use_id));

-- loose_calls_mv: each shard rolls up its own rows into loose_calls_local.
CREATE MATERIALIZED VIEW IF NOT EXISTS loose_calls_mv ON CLUSTER '{cluster}' TO loose_calls_local AS
SELECT
    session_id,
    tool_use_id,
    toStartOfHour(timestamp) AS hour,
    cityHash64(session_id, tool_use_id) AS call,
    toInt8(if(event = 'PreToolUse', 1, -1)) AS sign,
    agent,
    team,
    agent_id,
    host,
    tool_name AS tool,
    text,
    event = 'PreToolUse' AS called,
    if(event = 'PreToolUse', timestamp, NULL) AS started,
    if(event = 'PreToolUse', NULL, timestamp) AS ended,
    if(event = 'PreToolUse', NULL, duration_ms) AS duration_ms,
    toUInt8(multiIf(
        event = 'PermissionDenied', 4,
        event = 'PostToolUseFailure' AND JSONExtractBool(data, 'is_interrupt'), 3,
        event = 'PostToolUseFailure', 2,
        event = 'PostToolUse', 1,
        0
    )) AS outcome,
    if(event = 'PostToolUseFailure', JSONExtractString(data, 'error'), '') AS error
FROM events_local
WHERE tool_use_id != '' AND event IN ('PreToolUse', 'PostToolUse', 'PostToolUseFailure', 'PermissionDenied');

-- tool_calls: the same columns and rows as before (004_views.sql says what each means), from
--   whole     call_rollup's whole rows (a call and its results in one row), but for the calls in
--             loose_calls or in `strays`; a window's are found through the projection by_started
--   loose     the calls of loose_calls that are a call alone (still running) or a call and its
--             result in two hours: paired per question from their rows there (a few per hour)
--   mixed     the other calls of loose_calls (results without their call, whose call may have
--             cancelled there with a first result; two rows of one hour not merged yet; two calls)
--             and `strays` (calls whose halves cancelled in loose_calls while call_rollup has not
--             merged them yet: a fresh part): paired from all their rows in call_rollup, a result
--             without its call with its own fields from loose_calls. When there are none (the
--             engine merged loose_calls, no result lost its call), the scan of call_rollup's `call`
--             column that finds their rows reads nothing; when there are, it reads that column.
-- A tool_use_id used by two calls, each with its result, one pair cancelled in loose_calls and
-- the other whole in call_rollup, shows what loose_calls has left of it until the merges.
CREATE OR REPLACE VIEW tool_calls ON CLUSTER '{cluster}' AS
WITH
    loose AS (SELECT call FROM loose_calls),
    shapes AS (
        SELECT
            call,
            countIf(called) AS calls,
            countIf(NOT called) AS results,
            minIf(hour, called) AS call_hour,
            maxIf(hour, NOT called) AS result_hour
        FROM loose_calls
        GROUP BY call
    ),
    simple AS (
        SELECT call FROM shapes
        WHERE (calls = 1 AND results = 0) OR (calls = 1 AND results = 1 AND result_hour > call_hour)
    ),
    complex AS (
        SELECT call FROM shapes
        WHERE NOT ((calls = 1 AND results = 0) OR (calls = 1 AND results = 1 AND result_hour > call_hour))
    ),
    strays AS (SELECT call FROM call_rollup WHERE (called = false OR outcome = 0) AND call NOT IN loose),
    mixed AS (SELECT call FROM complex UNION ALL SELECT call FROM strays)
SELECT
    session_id,
    tool_use_id,
    toString(agent) AS agent,
    toString(team) AS team,
    toString(agent_id) AS agent_id,
    toString(host) AS host,
    toString(tool) AS tool,
    toString(text) AS text,
    started,
    CAST(ended AS Nullable(DateTime64(3, 'UTC'))) AS ended,
    coalesce(CAST(duration_ms AS Nullable(Int64)), dateDiff('millisecond', started, ended)) AS duration_ms,
    ['running', 'ok', 'error', 'interrupted', 'denied'][outcome + 1] AS status,
    toString(error) AS error
FROM call_rollup
WHERE called AND outcome > 0 AND call NOT IN loose AND call NOT IN strays
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
    CAST(min(started) AS SimpleAggregateFunction(min, Nullable(DateTime64(3, 'UTC')))) AS started,
    max(ended) AS ended,
    coalesce(max(duration_ms), dateDiff('millisecond', started, ended)) AS duration_ms,
    ['running', 'ok', 'error', 'interrupted', 'denied'][max(outcome) + 1] AS status,
    max(error) AS error
FROM loose_calls
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
        CAST(min(started) AS SimpleAggregateFunction(min, Nullable(DateTime64(3, 'UTC')))) AS started,
        CAST(max(ended) AS Nullable(DateTime64(3, 'UTC'))) AS ended,
        CAST(max(duration_ms) AS Nullable(Int64)) AS duration_ms,
        max(outcome) AS outcome,
        toString(max(error)) AS error
    FROM call_rollup
    WHERE call IN mixed
    GROUP BY session_id, tool_use_id
) AS p
LEFT JOIN
(
    SELECT
        session_id, tool_use_id, toString(argMin(agent, ended)) AS agent, toString(argMin(team, ended)) AS team,
        argMin(agent_id, ended) AS agent_id, toString(argMin(host, ended)) AS host,
        toString(argMin(tool, ended)) AS tool, argMin(text, ended) AS text
    FROM loose_calls
    WHERE NOT called
    GROUP BY session_id, tool_use_id
) AS o ON o.session_id = p.session_id AND o.tool_use_id = p.tool_use_id;

-- 018_time_windows --------------------------------------------------------------------------------
-- A time-bounded question on `usage` or `tool_calls` reads its window, not the history
-- (docs/benchmarks.md, "The documented views for a window").

-- usage was ordered by (session_id, message_id, request_id), so that the copies of one API message
-- (read again, sent again, imported; each with the time of its own transcript line) meet and the
-- ReplacingMergeTree keeps the largest. `usage FINAL WHERE timestamp >= ...` then read every row:
-- a projection by time is not used under FINAL, and session ids are random, so no index on the
-- time could skip a granule. Now it is ordered by `hour` first:
--   hour   the UTC hour of the message's first stored copy. The store sets it: a new message gets
--          the hour of its time, a copy that replaces a stored one gets the stored one's hour
--          (store/usage.py, changed_usage), so the copies of a message still share one key, even
--          when their times fall in two hours.
-- The table's granules then hold an hour or so each: a minmax index on `timestamp` finds a
-- window's, under FINAL too (use_skip_indexes_if_final, on by default, with its exact mode, which
-- adds the granules of other parts that share their keys); a bloom filter on `session_id` finds a
-- session's (the session page, the store's lookup of the stored copies).
ALTER TABLE usage_local ON CLUSTER '{cluster}' ADD COLUMN IF NOT EXISTS hour DateTime('UTC') DEFAULT toStartOfHour(timestamp);

-- The same column on the Distributed usage, whose columns are usage_local's.
ALTER TABLE usage ON CLUSTER '{cluster}' ADD COLUMN IF NOT EXISTS hour DateTime('UTC') DEFAULT toStartOfHour(timestamp);

ALTER TABLE usage_in ON CLUSTER '{cluster}' ADD COLUMN IF NOT EXISTS hour DateTime('UTC') DEFAULT toStartOfHour(timestamp);

-- The view that stores usage_in's rows in usage passes the hour on.
ALTER TABLE usage_in_mv ON CLUSTER '{cluster}' MODIFY QUERY
SELECT
    session_id, message_id, request_id, timestamp, agent, team, parent_agent, agent_id, agent_type,
    subagent_id, subagent_type, host, model, input_tokens, output_tokens, cache_read_tokens,
    cache_write_tokens, cache_write_5m_tokens, cache_write_1h_tokens, cost_usd, price_model, sidechain,
    envelope_id, version, harness, reasoning_tokens, hour
FROM usage_in
WHERE sign > 0;

-- The rebuild: the same columns in the new order, filled with the stored messages (one row each:
-- FINAL), then put in usage's place. The views and queries read `usage` by its name.
CREATE TABLE IF NOT EXISTS usage_by_hour_local ON CLUSTER '{cluster}'
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
    stored_at DateTime64(3, 'UTC') DEFAULT now64(3),
    harness LowCardinality(String) DEFAULT 'claude-code',
    reasoning_tokens UInt64 DEFAULT 0,
    hour DateTime('UTC') DEFAULT toStartOfHour(timestamp),
    INDEX by_time timestamp TYPE minmax GRANULARITY 1,
    INDEX by_session session_id TYPE bloom_filter GRANULARITY 1
)
ENGINE = ReplicatedReplacingMergeTree('/clickhouse/tables/{shard}/{database}/usage_by_hour', '{replica}', version)
ORDER BY (hour, session_id, message_id, request_id);

-- usage_by_hour: Distributed over usage_by_hour_local, under the single-node name.
-- By cityHash64(session_id): the rows a ReplacingMergeTree collapses meet on one shard.
CREATE TABLE IF NOT EXISTS usage_by_hour ON CLUSTER '{cluster}' AS usage_by_hour_local
ENGINE = Distributed('{cluster}', 'agentwatch', 'usage_by_hour_local', cityHash64(session_id));

DROP TABLE IF EXISTS usage_by_hour ON CLUSTER '{cluster}' SYNC;

DROP TABLE IF EXISTS usage_by_hour_local ON CLUSTER '{cluster}' SYNC;

-- call_rollup gains `at`: the time of the call's PreToolUse in a row that has one (`started`),
-- else the end of the row's hour. Not Nullable, so a minmax index over it holds each granule's
-- hour (a NULL would count as the largest time, and the granules of rows without their call would
-- match every window); a whole row's `at` is its `started`. MATERIALIZED: computed from the row
-- at every insert (the view's, which does not name it) and for the rows stored before, left out
-- of `SELECT *` and of an INSERT without a column list; merges keep the smallest, the call's.
ALTER TABLE call_rollup_local ON CLUSTER '{cluster}' ADD COLUMN IF NOT EXISTS at SimpleAggregateFunction(min, DateTime64(3, 'UTC')) MATERIALIZED coalesce(started, hour + toIntervalMillisecond(3599999));

-- The same column on the Distributed call_rollup, whose columns are call_rollup_local's.
ALTER TABLE call_rollup ON CLUSTER '{cluster}' ADD COLUMN IF NOT EXISTS at SimpleAggregateFunction(min, DateTime64(3, 'UTC')) MATERIALIZED coalesce(started, hour + toIntervalMillisecond(3599999));

ALTER TABLE call_rollup_local ON CLUSTER '{cluster}' ADD INDEX IF NOT EXISTS by_at at TYPE minmax GRANULARITY 1;

-- tool_calls: the same columns and rows (004_views.sql says what each means), from
--   whole    call_rollup FINAL's whole rows (a call and its results of one hour, merged at read
--            when their parts are not yet), but for the calls left in loose_calls FINAL; a
--            window's are found by the index on `at` (FINAL uses it: use_skip_indexes_if_final,
--            with its exact mode), since `started` is `at` there
--   simple   the calls of loose_calls FINAL that are a call alone (still running) or a call and
--            its result in two hours: paired from their rows there (a few per hour)
--   complex  the other calls of loose_calls FINAL (results without their call, whose call may
--            have cancelled there with a first result; a tool_use_id used by two calls): paired
--            from all their rows in call_rollup, a result without its call with its own fields
--            from loose_calls. When there are none, the scan of call_rollup's `call` column that
--            finds their rows reads nothing.
-- Reading both tables with FINAL is what makes this proportional to the window: 017 read them as
-- they were, so it had to find the calls whose halves sat in parts not merged yet ("strays") by
-- scanning every row of call_rollup that is not whole, at every question.
CREATE OR REPLACE VIEW tool_calls ON CLUSTER '{cluster}' AS
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

-- 019_session_totals ------------------------------------------------------------------------------
-- session_costs for the newest sessions without aggregating every session's keys at each question.
--
-- session_costs (009) summed session_cost's rows per key (session, agent, parent, team, model),
-- merged their argMin states, added each session's cost_states FINAL and grouped it all again per
-- session: over every session of the history, since the engine does not push a question's
-- `ORDER BY last_at DESC LIMIT 200` into a view's GROUP BY (184 ms at 10M events, 4.2x the time at
-- 1M). It now reads session_totals: one row per session once merged, every column a simple
-- aggregate (sums, min and max of plain values and of tuples), which `FINAL` folds without
-- aggregate states, and the view only picks its columns from that row.
--
-- The figures are the same as 009's, but for one case the rollup cannot see: 009 left out a key
-- (agent, parent, team, model) whose every message was replaced by a copy under another key;
-- here such a message's first copy still counts in the session's first_at, last_at, its first
-- main-agent message and its subagents' parent (its tokens and price are taken back either way).

-- session_totals: per session, its usage's figures (signed, as in session_cost) and its last
-- cost-state.
--   calls, main_calls, input .. cache_1h, priced, unpriced   sums of the signed usage rows
--   model_set        the models of its messages (a copy has its message's model, so a replaced
--                    copy never leaves a model behind)
--   first_usage, last_usage   the time of its first and last stored message (copies included)
--   main             (time, message id, agent, team) of its first main-agent message (no
--                    agent_id); (2299-12-31 23:59:59.999, '', '', '') when it has none
--   parent           its subagents' parent (the largest name, when they have several)
--   usage_team       its messages' team (the largest)
--   claude           (1, version, total_cost_usd, time, agent, team) of its cost-state with the
--                    largest version, what cost_states FINAL keeps; all zero when it has none
CREATE TABLE IF NOT EXISTS session_totals_local ON CLUSTER '{cluster}'
(
    session_id String,
    calls SimpleAggregateFunction(sum, Int64),
    main_calls SimpleAggregateFunction(sum, Int64),
    input SimpleAggregateFunction(sum, Int64),
    output SimpleAggregateFunction(sum, Int64),
    cache_read SimpleAggregateFunction(sum, Int64),
    cache_5m SimpleAggregateFunction(sum, Int64),
    cache_1h SimpleAggregateFunction(sum, Int64),
    priced SimpleAggregateFunction(sum, Float64),
    unpriced SimpleAggregateFunction(sum, Int64),
    model_set SimpleAggregateFunction(groupUniqArrayArray, Array(String)),
    first_usage SimpleAggregateFunction(min, Nullable(DateTime64(3, 'UTC'))),
    last_usage SimpleAggregateFunction(max, Nullable(DateTime64(3, 'UTC'))),
    main SimpleAggregateFunction(min, Tuple(DateTime64(3, 'UTC'), String, String, String))
        DEFAULT (toDateTime64('2299-12-31 23:59:59.999', 3, 'UTC'), '', '', ''),
    parent SimpleAggregateFunction(max, String),
    usage_team SimpleAggregateFunction(max, String),
    claude SimpleAggregateFunction(max, Tuple(UInt8, UInt64, Float64, DateTime64(3, 'UTC'), String, String))
)
ENGINE = ReplicatedAggregatingMergeTree('/clickhouse/tables/{shard}/{database}/session_totals', '{replica}')
ORDER BY session_id;

-- session_totals: Distributed over session_totals_local, under the single-node name.
-- By cityHash64(session_id): the rows a AggregatingMergeTree collapses meet on one shard.
CREATE TABLE IF NOT EXISTS session_totals ON CLUSTER '{cluster}' AS session_totals_local
ENGINE = Distributed('{cluster}', 'agentwatch', 'session_totals_local', cityHash64(session_id));

CREATE MATERIALIZED VIEW IF NOT EXISTS session_totals_usage_mv ON CLUSTER '{cluster}' TO session_totals AS
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
    maxIf(toString(team), sign > 0) AS usage_team
FROM usage_in
GROUP BY session_id;

-- session_totals_states_mv: each shard rolls up its own rows into session_totals_local.
CREATE MATERIALIZED VIEW IF NOT EXISTS session_totals_states_mv ON CLUSTER '{cluster}' TO session_totals_local AS
SELECT
    session_id,
    max((toUInt8(1), version, total_cost_usd, timestamp, toString(agent), toString(team))) AS claude
FROM cost_states_local
GROUP BY session_id;

-- The view: 006_usage.sql says what each column means.
CREATE OR REPLACE VIEW session_costs ON CLUSTER '{cluster}' AS
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
    if(calls > 0, assumeNotNull(last_usage), claude.4) AS last_at
FROM session_totals FINAL
WHERE calls > 0 OR claude.1 = 1;

-- 020_live_window ---------------------------------------------------------------------------------
-- GENERATED by
--     python -m agentwatch.store.live_window > src/agentwatch/store/schema/020_live_window.sql
-- from store/live_window.py and store/agents_sql.py; a test fails when this is not current.
--
-- The live window: which scopes (sessions, else teams) were active lately, found by time.
--
-- The dashboard's roster read the `agents` view, one row per agent ever seen, and sorted them all to
-- show 300: 2.6 s at 100,000 agents, every refresh. agent_key_rollup and agent_cost_rollup are
-- ordered by (host, scope, ...): an IN on (host, scope) reads a few of their granules, once the
-- scopes are known. This table finds them: ordered by hour first, so the newest hours are the end
-- of its sort key, which a question reads in order and stops (queries.roster).

-- scope_hours: per UTC hour, host and scope (agents.scope), the time of the latest event, message or
-- API message of that scope in that hour. Everything that makes an agent appear in `agents` feeds
-- it: events, messages, usage.
CREATE TABLE IF NOT EXISTS scope_hours_local ON CLUSTER '{cluster}'
(
    hour DateTime('UTC'),
    host LowCardinality(String),
    scope String,
    last_seen SimpleAggregateFunction(max, DateTime64(3, 'UTC'))
)
ENGINE = ReplicatedAggregatingMergeTree('/clickhouse/tables/{shard}/{database}/scope_hours', '{replica}')
ORDER BY (hour, host, scope);

-- scope_hours: Distributed over scope_hours_local, under the single-node name.
-- By cityHash64(host, scope): the rows a AggregatingMergeTree collapses meet on one shard.
CREATE TABLE IF NOT EXISTS scope_hours ON CLUSTER '{cluster}' AS scope_hours_local
ENGINE = Distributed('{cluster}', 'agentwatch', 'scope_hours_local', cityHash64(host, scope));

-- scope_hours_events_mv: each shard rolls up its own rows into scope_hours_local.
CREATE MATERIALIZED VIEW IF NOT EXISTS scope_hours_events_mv ON CLUSTER '{cluster}' TO scope_hours_local AS
SELECT
    toStartOfHour(timestamp) AS hour, host, if(session_id != '', session_id, toString(team)) AS scope,
    max(timestamp) AS last_seen
FROM events_local
GROUP BY hour, host, scope;

CREATE MATERIALIZED VIEW IF NOT EXISTS scope_hours_messages_mv ON CLUSTER '{cluster}' TO scope_hours AS
SELECT
    toStartOfHour(timestamp) AS hour, host, if(session_id != '', session_id, toString(team)) AS scope,
    max(timestamp) AS last_seen
FROM message_envelopes
GROUP BY hour, host, scope;

CREATE MATERIALIZED VIEW IF NOT EXISTS scope_hours_usage_mv ON CLUSTER '{cluster}' TO scope_hours AS
SELECT
    toStartOfHour(timestamp) AS hour, host, if(session_id != '', session_id, toString(team)) AS scope,
    max(timestamp) AS last_seen
FROM usage_in
WHERE sign > 0
GROUP BY hour, host, scope;

-- agents_since(since = ...): the `agents` view's rows of the scopes with an event, message or API
-- message at or after `since` (every agent of those scopes, over all their time), read from
-- scope_hours' hours since then and the agent rollups' rows of those scopes alone: what a person
-- asks instead of the whole `agents` view (docs/queries.md).
CREATE OR REPLACE VIEW agents_since ON CLUSTER '{cluster}' AS
SELECT
    agent, team, parent_agent, agent_type, agent_id, session_id, host, first_seen, last_seen, last_event,
    if(raw_state != 'stopped' AND silent_s > 600, 'lost', raw_state) AS state,
    if(raw_state IN ('waiting', 'working'), tool, '') AS current_tool,
    tool_calls, errors, messages_sent, events, scope, state_since, silent_s, state_event, state_note,
    state_id, scope_last_seen
FROM
(
    SELECT
        *,
        max(last_seen) OVER (PARTITION BY host, scope) AS scope_last_seen,
        dateDiff('millisecond', scope_last_seen, now64(3)) / 1000 AS silent_s
    FROM
    (
        SELECT
            host, scope, agent, l.1 AS team, l.2 AS parent_agent, l.3 AS agent_type, l.4 AS agent_id,
            l.5 AS session_id, l.6 AS last_event, first_seen, last_seen, tool_calls, errors, events,
            messages_sent,
            multiIf(
            s.1 = 'PreToolUse', 'working',
            s.1 IN ('PermissionRequest', 'Elicitation'), 'waiting',
            s.1 = 'Notification' AND s.2 IN ('permission_prompt', 'elicitation_dialog'), 'waiting',
            s.1 = 'Notification' AND s.2 = 'idle_prompt', 'idle',
            s.1 IN ('PostToolUse', 'PostToolUseFailure', 'PermissionDenied', 'PostToolBatch', 'ElicitationResult', 'UserPromptSubmit', 'UserPromptExpansion', 'SubagentStart', 'PreCompact', 'PostCompact'), 'thinking',
            s.1 IN ('SessionStart', 'Stop', 'SubagentStop', 'TeammateIdle'), 'idle',
            s.1 = 'StopFailure', 'failed',
            s.1 = 'SessionEnd', 'stopped',
            'thinking'
        ) AS raw_state,
            s.3 AS tool,
            if(s.1 = '', NULL, s.4) AS state_since,
            s.1 AS state_event,
            s.2 AS state_note,
            s.5 AS state_id
        FROM
        (
            SELECT
                host, scope, agent, argMaxMerge(latest) AS l, argMaxMerge(state) AS s,
                min(first_seen) AS first_seen,
                max(last_seen) AS last_seen, sum(tool_calls) AS tool_calls, sum(errors) AS errors,
                sum(events) AS events, sum(messages_sent) AS messages_sent
            FROM agent_key_rollup
            WHERE (host, scope) IN (SELECT host, scope FROM scope_hours WHERE hour >= toStartOfHour({since:DateTime64(3, 'UTC')}) GROUP BY host, scope HAVING max(last_seen) >= {since:DateTime64(3, 'UTC')})
            GROUP BY host, scope, agent
        )
        UNION ALL
        SELECT
            host, scope, agent, c.1 AS team, c.2 AS parent_agent, c.4 AS agent_type, c.3 AS agent_id,
            scope AS session_id, 'Usage' AS last_event, first_seen, last_seen, toUInt64(0) AS tool_calls,
            toUInt64(0) AS errors, toUInt64(0) AS events, toUInt64(0) AS messages_sent,
            'thinking' AS raw_state, '' AS tool, CAST(NULL AS Nullable(DateTime64(3, 'UTC'))) AS state_since,
            '' AS state_event, '' AS state_note, '' AS state_id
        FROM
        (
            SELECT
                host, scope, agent, argMaxMerge(latest) AS c, assumeNotNull(min(first_at)) AS first_seen,
                assumeNotNull(max(last_at)) AS last_seen
            FROM agent_cost_rollup
            WHERE (host, scope) IN (SELECT host, scope FROM scope_hours WHERE hour >= toStartOfHour({since:DateTime64(3, 'UTC')}) GROUP BY host, scope HAVING max(last_seen) >= {since:DateTime64(3, 'UTC')})
            GROUP BY host, scope, agent
            HAVING sum(api_calls) > 0
        )
        WHERE (host, scope, agent) NOT IN (SELECT host, scope, agent FROM agent_key_rollup WHERE (host, scope) IN (SELECT host, scope FROM scope_hours WHERE hour >= toStartOfHour({since:DateTime64(3, 'UTC')}) GROUP BY host, scope HAVING max(last_seen) >= {since:DateTime64(3, 'UTC')}))
    )
);

-- 021_attribution ---------------------------------------------------------------------------------
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
ALTER TABLE events_local ON CLUSTER '{cluster}' ADD COLUMN IF NOT EXISTS person LowCardinality(String) DEFAULT '';

-- The same column on the Distributed events, whose columns are events_local's.
ALTER TABLE events ON CLUSTER '{cluster}' ADD COLUMN IF NOT EXISTS person LowCardinality(String) DEFAULT '';

ALTER TABLE events_local ON CLUSTER '{cluster}' ADD COLUMN IF NOT EXISTS repo LowCardinality(String) DEFAULT '';

-- The same column on the Distributed events, whose columns are events_local's.
ALTER TABLE events ON CLUSTER '{cluster}' ADD COLUMN IF NOT EXISTS repo LowCardinality(String) DEFAULT '';

ALTER TABLE events_local ON CLUSTER '{cluster}' ADD COLUMN IF NOT EXISTS branch LowCardinality(String) DEFAULT '';

-- The same column on the Distributed events, whose columns are events_local's.
ALTER TABLE events ON CLUSTER '{cluster}' ADD COLUMN IF NOT EXISTS branch LowCardinality(String) DEFAULT '';

ALTER TABLE events_in ON CLUSTER '{cluster}' ADD COLUMN IF NOT EXISTS person String DEFAULT '';

ALTER TABLE events_in ON CLUSTER '{cluster}' ADD COLUMN IF NOT EXISTS repo String DEFAULT '';

ALTER TABLE events_in ON CLUSTER '{cluster}' ADD COLUMN IF NOT EXISTS branch String DEFAULT '';

ALTER TABLE usage_local ON CLUSTER '{cluster}' ADD COLUMN IF NOT EXISTS person LowCardinality(String) DEFAULT '';

-- The same column on the Distributed usage, whose columns are usage_local's.
ALTER TABLE usage ON CLUSTER '{cluster}' ADD COLUMN IF NOT EXISTS person LowCardinality(String) DEFAULT '';

ALTER TABLE usage_local ON CLUSTER '{cluster}' ADD COLUMN IF NOT EXISTS repo LowCardinality(String) DEFAULT '';

-- The same column on the Distributed usage, whose columns are usage_local's.
ALTER TABLE usage ON CLUSTER '{cluster}' ADD COLUMN IF NOT EXISTS repo LowCardinality(String) DEFAULT '';

ALTER TABLE usage_local ON CLUSTER '{cluster}' ADD COLUMN IF NOT EXISTS branch LowCardinality(String) DEFAULT '';

-- The same column on the Distributed usage, whose columns are usage_local's.
ALTER TABLE usage ON CLUSTER '{cluster}' ADD COLUMN IF NOT EXISTS branch LowCardinality(String) DEFAULT '';

ALTER TABLE usage_in ON CLUSTER '{cluster}' ADD COLUMN IF NOT EXISTS person LowCardinality(String) DEFAULT '';

ALTER TABLE usage_in ON CLUSTER '{cluster}' ADD COLUMN IF NOT EXISTS repo LowCardinality(String) DEFAULT '';

ALTER TABLE usage_in ON CLUSTER '{cluster}' ADD COLUMN IF NOT EXISTS branch LowCardinality(String) DEFAULT '';

-- The views that store events_in's and usage_in's rows pass the three columns on.
ALTER TABLE events_in_mv ON CLUSTER '{cluster}' MODIFY QUERY
SELECT
    id, timestamp, v, event, kind, agent, team, direction, peer, text, source, session_id, agent_id,
    agent_type, parent_agent, tool_name, tool_use_id, host, cwd, redacted, truncated, data, seq,
    spool_bytes, prompt_id, duration_ms, permission_mode, model, harness, harness_event, person, repo,
    branch
FROM events_in;

ALTER TABLE usage_in_mv ON CLUSTER '{cluster}' MODIFY QUERY
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
CREATE TABLE IF NOT EXISTS cost_by_owner_local ON CLUSTER '{cluster}'
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
ENGINE = ReplicatedAggregatingMergeTree('/clickhouse/tables/{shard}/{database}/cost_by_owner', '{replica}')
ORDER BY (hour, person, repo, branch, model);

-- cost_by_owner: Distributed over cost_by_owner_local, under the single-node name.
-- By cityHash64(repo): the rows a AggregatingMergeTree collapses meet on one shard.
CREATE TABLE IF NOT EXISTS cost_by_owner ON CLUSTER '{cluster}' AS cost_by_owner_local
ENGINE = Distributed('{cluster}', 'agentwatch', 'cost_by_owner_local', cityHash64(repo));

CREATE MATERIALIZED VIEW IF NOT EXISTS cost_by_owner_mv ON CLUSTER '{cluster}' TO cost_by_owner AS
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

-- activity_by_owner: per UTC hour, person, repository and branch: events, tool calls, failed tool
-- calls, sessions and agents (events are stored once each: event_ids keeps repeats out).
CREATE TABLE IF NOT EXISTS activity_by_owner_local ON CLUSTER '{cluster}'
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
ENGINE = ReplicatedAggregatingMergeTree('/clickhouse/tables/{shard}/{database}/activity_by_owner', '{replica}')
ORDER BY (hour, person, repo, branch);

-- activity_by_owner: Distributed over activity_by_owner_local, under the single-node name.
-- By cityHash64(repo): the rows a AggregatingMergeTree collapses meet on one shard.
CREATE TABLE IF NOT EXISTS activity_by_owner ON CLUSTER '{cluster}' AS activity_by_owner_local
ENGINE = Distributed('{cluster}', 'agentwatch', 'activity_by_owner_local', cityHash64(repo));

-- activity_by_owner_mv: each shard rolls up its own rows into activity_by_owner_local.
CREATE MATERIALIZED VIEW IF NOT EXISTS activity_by_owner_mv ON CLUSTER '{cluster}' TO activity_by_owner_local AS
SELECT
    toStartOfHour(timestamp) AS hour, person, repo, branch,
    count() AS events,
    countIf(event = 'PreToolUse') AS tool_calls,
    countIf(event = 'PostToolUseFailure') AS tool_errors,
    uniqExactStateIf(session_id, session_id != '') AS sessions,
    uniqExactState(agent) AS agents
FROM events_local
GROUP BY hour, person, repo, branch;

-- The sessions' owner: `sessions` and `session_costs` gain person, repo and branch, each the
-- session's latest (by time; a session keeps one unless its branch was switched), from
-- session_owner: one row per session once merged, fed by its events and by its usage (a session
-- imported from its transcripts has no events).
CREATE TABLE IF NOT EXISTS session_owner_local ON CLUSTER '{cluster}'
(
    session_id String,
    owner SimpleAggregateFunction(max, Tuple(DateTime64(3, 'UTC'), String, String, String))
)
ENGINE = ReplicatedAggregatingMergeTree('/clickhouse/tables/{shard}/{database}/session_owner', '{replica}')
ORDER BY session_id;

-- session_owner: Distributed over session_owner_local, under the single-node name.
-- By cityHash64(session_id): the rows a AggregatingMergeTree collapses meet on one shard.
CREATE TABLE IF NOT EXISTS session_owner ON CLUSTER '{cluster}' AS session_owner_local
ENGINE = Distributed('{cluster}', 'agentwatch', 'session_owner_local', cityHash64(session_id));

-- session_owner_mv: each shard rolls up its own rows into session_owner_local.
CREATE MATERIALIZED VIEW IF NOT EXISTS session_owner_mv ON CLUSTER '{cluster}' TO session_owner_local AS
SELECT session_id, max((timestamp, toString(person), toString(repo), toString(branch))) AS owner
FROM events_local
WHERE session_id != ''
GROUP BY session_id;

CREATE MATERIALIZED VIEW IF NOT EXISTS session_owner_usage_mv ON CLUSTER '{cluster}' TO session_owner AS
SELECT session_id, max((timestamp, toString(person), toString(repo), toString(branch))) AS owner
FROM usage_in
WHERE sign > 0 AND session_id != ''
GROUP BY session_id;

-- The views: 019's session_costs and 009's sessions, each with the three columns at its end.
CREATE OR REPLACE VIEW session_costs ON CLUSTER '{cluster}' AS
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

CREATE OR REPLACE VIEW sessions ON CLUSTER '{cluster}' AS
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

-- 022_call_outcomes -------------------------------------------------------------------------------
-- GENERATED from agentwatch/agents.py (CALL_OUTCOMES: a tool call's outcome by its number in
-- call_rollup) by
--     python -m agentwatch.store.calls_sql > src/agentwatch/store/schema/022_call_outcomes.sql
-- Edit that table, not this file, and regenerate; a test fails when this is not current.
--
-- The views that name an outcome, each query as the migration that last defined it has it
-- (tool_calls: 018_time_windows.sql, tool_calls_since: 010_call_rollup.sql),
-- with the names written from that table: running, ok, error, interrupted, denied.
CREATE OR REPLACE VIEW tool_calls ON CLUSTER '{cluster}' AS
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

CREATE OR REPLACE VIEW tool_calls_since ON CLUSTER '{cluster}' AS
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

-- 023_invalid_input -------------------------------------------------------------------------------
-- Generated by `python -m agentwatch.store.agents_sql invalid-input > src/agentwatch/store/schema/023_invalid_input.sql`: do not edit.
--
-- Invalid hook input (agents.INVALID_INPUT_EVENTS: InvalidPayload, Unknown) stays in `events` with
-- its reason, and makes no agent: the agent rollup's materialized view of 012, without it.
DROP VIEW IF EXISTS agent_key_rollup_mv ON CLUSTER '{cluster}';

-- agent_key_rollup_mv: each shard rolls up its own rows into agent_key_rollup_local.
CREATE MATERIALIZED VIEW IF NOT EXISTS agent_key_rollup_mv ON CLUSTER '{cluster}' TO agent_key_rollup_local AS
SELECT
    host, scope, agent,
    argMaxState(
        (toString(team), toString(parent_agent), toString(agent_type), agent_id, session_id, toString(event)),
        (timestamp, id)
    ) AS latest,
    argMaxStateIf(
        (toString(event), note, toString(tool_name), timestamp, id), (timestamp, id), is_state
    ) AS state,
    min(timestamp) AS first_seen,
    max(timestamp) AS last_seen,
    toUInt64(countIf(event = 'PreToolUse')) AS tool_calls,
    toUInt64(countIf(event IN ('PostToolUseFailure', 'StopFailure'))) AS errors,
    toUInt64(count()) AS events,
    toUInt64(0) AS messages_sent
FROM
(
    SELECT
        host,
        if(session_id != '', session_id, toString(team)) AS scope,
        agent, team, parent_agent, agent_type, agent_id, session_id, tool_name, timestamp, id, event, note,
        event IN ('PreToolUse', 'PermissionRequest', 'Elicitation', 'PostToolUse', 'PostToolUseFailure', 'PermissionDenied', 'PostToolBatch', 'ElicitationResult', 'UserPromptSubmit', 'UserPromptExpansion', 'SubagentStart', 'PreCompact', 'PostCompact', 'SessionStart', 'Stop', 'SubagentStop', 'TeammateIdle', 'StopFailure', 'SessionEnd') OR (event = 'Notification' AND note IN ('permission_prompt', 'elicitation_dialog', 'idle_prompt')) AS is_state
    FROM
    (
        SELECT
            host, agent, team, parent_agent, agent_type, agent_id, session_id, tool_name, timestamp, id,
            event,
            if(event = 'Notification', JSONExtractString(data, 'notification_type'), '') AS note
        FROM events_local WHERE NOT (event IN ('InvalidPayload', 'Unknown'))
    )
)
GROUP BY host, scope, agent;

-- 024_hook_time -----------------------------------------------------------------------------------
-- The hook's own run time (issue 39): each hook run's own event says, in `hook_ms`, the
-- milliseconds from its script's first line to its messages made (its transcripts read and its
-- session's owner marked): what the hook adds to the agent's wait before it sends. 0 where no hook
-- run made the envelope (usage, the demo, a run made again from the spool) and in rows stored
-- before this migration. `otel-export` sends it as agentwatch.hook.duration.
ALTER TABLE events_local ON CLUSTER '{cluster}' ADD COLUMN IF NOT EXISTS hook_ms Float32 DEFAULT 0;

-- The same column on the Distributed events, whose columns are events_local's.
ALTER TABLE events ON CLUSTER '{cluster}' ADD COLUMN IF NOT EXISTS hook_ms Float32 DEFAULT 0;

ALTER TABLE events_in ON CLUSTER '{cluster}' ADD COLUMN IF NOT EXISTS hook_ms Float32 DEFAULT 0;

-- The view that stores events_in's rows passes it on.
ALTER TABLE events_in_mv ON CLUSTER '{cluster}' MODIFY QUERY
SELECT
    id, timestamp, v, event, kind, agent, team, direction, peer, text, source, session_id, agent_id,
    agent_type, parent_agent, tool_name, tool_use_id, host, cwd, redacted, truncated, data, seq,
    spool_bytes, prompt_id, duration_ms, permission_mode, model, harness, harness_event, person, repo,
    branch, hook_ms
FROM events_in;

-- 025_spool_by_arrival ----------------------------------------------------------------------------
-- coverage's spool_bytes: the spool backlog the hook on a host reported last, by arrival (the
-- row stored last), no longer by the event's own time. A flush sends spooled events after newer
-- ones, and each now says what the spool still holds once it is sent (emitter/spool.py): so a
-- flushed spool reads 0 at once, where the newest event by time still said what it had waited on.
-- The view as 005 made it, but that one expression.
CREATE OR REPLACE VIEW coverage ON CLUSTER '{cluster}' AS
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

-- 026_flat_agents ---------------------------------------------------------------------------------
-- GENERATED by
--     python -m agentwatch.store.live_window flat > src/agentwatch/store/schema/026_flat_agents.sql
-- from store/agents_sql.py and store/live_window.py; a test fails when this is not current.
--
-- The `agents` view (012) and agents_since (020) in two layers where they had four: each rollup's
-- rows merged and taken apart in one SELECT, then the scope's latest activity and the state shown.
-- The same rows; ClickHouse analyses each layer's projection again, and that, not reading, was
-- most of what a question over agents_since cost at 10M events.
CREATE OR REPLACE VIEW agents ON CLUSTER '{cluster}' AS
SELECT
    agent, team, parent_agent, agent_type, agent_id, session_id, host, first_seen, last_seen, last_event,
    if(raw_state != 'stopped' AND silent_s > 600, 'lost', raw_state) AS state,
    if(raw_state IN ('waiting', 'working'), tool, '') AS current_tool,
    tool_calls, errors, messages_sent, events, scope, state_since,
    dateDiff('millisecond', scope_last_seen, now64(3)) / 1000 AS silent_s,
    state_event, state_note, state_id,
    max(last_seen) OVER (PARTITION BY host, scope) AS scope_last_seen
FROM
(
    WITH argMaxMerge(latest) AS l, argMaxMerge(state) AS s
    SELECT
        host, scope, agent, l.1 AS team, l.2 AS parent_agent, l.3 AS agent_type, l.4 AS agent_id,
        l.5 AS session_id, l.6 AS last_event, min(first_seen) AS first_seen, max(last_seen) AS last_seen,
        sum(tool_calls) AS tool_calls, sum(errors) AS errors, sum(events) AS events,
        sum(messages_sent) AS messages_sent,
        multiIf(
            s.1 = 'PreToolUse', 'working',
            s.1 IN ('PermissionRequest', 'Elicitation'), 'waiting',
            s.1 = 'Notification' AND s.2 IN ('permission_prompt', 'elicitation_dialog'), 'waiting',
            s.1 = 'Notification' AND s.2 = 'idle_prompt', 'idle',
            s.1 IN ('PostToolUse', 'PostToolUseFailure', 'PermissionDenied', 'PostToolBatch', 'ElicitationResult', 'UserPromptSubmit', 'UserPromptExpansion', 'SubagentStart', 'PreCompact', 'PostCompact'), 'thinking',
            s.1 IN ('SessionStart', 'Stop', 'SubagentStop', 'TeammateIdle'), 'idle',
            s.1 = 'StopFailure', 'failed',
            s.1 = 'SessionEnd', 'stopped',
            'thinking'
        ) AS raw_state,
        s.3 AS tool, if(s.1 = '', NULL, s.4) AS state_since, s.1 AS state_event, s.2 AS state_note,
        s.5 AS state_id
    FROM agent_key_rollup
    GROUP BY host, scope, agent
    UNION ALL
    WITH argMaxMerge(latest) AS c
    SELECT
        host, scope, agent, c.1 AS team, c.2 AS parent_agent, c.4 AS agent_type, c.3 AS agent_id,
        scope AS session_id, 'Usage' AS last_event, assumeNotNull(min(first_at)) AS first_seen,
        assumeNotNull(max(last_at)) AS last_seen, toUInt64(0) AS tool_calls, toUInt64(0) AS errors,
        toUInt64(0) AS events, toUInt64(0) AS messages_sent,
        'thinking' AS raw_state, '' AS tool, CAST(NULL AS Nullable(DateTime64(3, 'UTC'))) AS state_since,
        '' AS state_event, '' AS state_note, '' AS state_id
    FROM agent_cost_rollup
    WHERE (host, scope, agent) NOT IN (SELECT host, scope, agent FROM agent_key_rollup)
    GROUP BY host, scope, agent
    HAVING sum(api_calls) > 0
);

CREATE OR REPLACE VIEW agents_since ON CLUSTER '{cluster}' AS
SELECT
    agent, team, parent_agent, agent_type, agent_id, session_id, host, first_seen, last_seen, last_event,
    if(raw_state != 'stopped' AND silent_s > 600, 'lost', raw_state) AS state,
    if(raw_state IN ('waiting', 'working'), tool, '') AS current_tool,
    tool_calls, errors, messages_sent, events, scope, state_since,
    dateDiff('millisecond', scope_last_seen, now64(3)) / 1000 AS silent_s,
    state_event, state_note, state_id,
    max(last_seen) OVER (PARTITION BY host, scope) AS scope_last_seen
FROM
(
    WITH argMaxMerge(latest) AS l, argMaxMerge(state) AS s
    SELECT
        host, scope, agent, l.1 AS team, l.2 AS parent_agent, l.3 AS agent_type, l.4 AS agent_id,
        l.5 AS session_id, l.6 AS last_event, min(first_seen) AS first_seen, max(last_seen) AS last_seen,
        sum(tool_calls) AS tool_calls, sum(errors) AS errors, sum(events) AS events,
        sum(messages_sent) AS messages_sent,
        multiIf(
            s.1 = 'PreToolUse', 'working',
            s.1 IN ('PermissionRequest', 'Elicitation'), 'waiting',
            s.1 = 'Notification' AND s.2 IN ('permission_prompt', 'elicitation_dialog'), 'waiting',
            s.1 = 'Notification' AND s.2 = 'idle_prompt', 'idle',
            s.1 IN ('PostToolUse', 'PostToolUseFailure', 'PermissionDenied', 'PostToolBatch', 'ElicitationResult', 'UserPromptSubmit', 'UserPromptExpansion', 'SubagentStart', 'PreCompact', 'PostCompact'), 'thinking',
            s.1 IN ('SessionStart', 'Stop', 'SubagentStop', 'TeammateIdle'), 'idle',
            s.1 = 'StopFailure', 'failed',
            s.1 = 'SessionEnd', 'stopped',
            'thinking'
        ) AS raw_state,
        s.3 AS tool, if(s.1 = '', NULL, s.4) AS state_since, s.1 AS state_event, s.2 AS state_note,
        s.5 AS state_id
    FROM agent_key_rollup
    WHERE (host, scope) IN (SELECT host, scope FROM scope_hours WHERE hour >= toStartOfHour({since:DateTime64(3, 'UTC')}) GROUP BY host, scope HAVING max(last_seen) >= {since:DateTime64(3, 'UTC')})
    GROUP BY host, scope, agent
    UNION ALL
    WITH argMaxMerge(latest) AS c
    SELECT
        host, scope, agent, c.1 AS team, c.2 AS parent_agent, c.4 AS agent_type, c.3 AS agent_id,
        scope AS session_id, 'Usage' AS last_event, assumeNotNull(min(first_at)) AS first_seen,
        assumeNotNull(max(last_at)) AS last_seen, toUInt64(0) AS tool_calls, toUInt64(0) AS errors,
        toUInt64(0) AS events, toUInt64(0) AS messages_sent,
        'thinking' AS raw_state, '' AS tool, CAST(NULL AS Nullable(DateTime64(3, 'UTC'))) AS state_since,
        '' AS state_event, '' AS state_note, '' AS state_id
    FROM agent_cost_rollup
    WHERE (host, scope) IN (SELECT host, scope FROM scope_hours WHERE hour >= toStartOfHour({since:DateTime64(3, 'UTC')}) GROUP BY host, scope HAVING max(last_seen) >= {since:DateTime64(3, 'UTC')}) AND (host, scope, agent) NOT IN (SELECT host, scope, agent FROM agent_key_rollup WHERE (host, scope) IN (SELECT host, scope FROM scope_hours WHERE hour >= toStartOfHour({since:DateTime64(3, 'UTC')}) GROUP BY host, scope HAVING max(last_seen) >= {since:DateTime64(3, 'UTC')}))
    GROUP BY host, scope, agent
    HAVING sum(api_calls) > 0
);

-- 027_session_owner_in_totals ---------------------------------------------------------------------
-- session_costs without its join: each session's owner in session_totals itself.
--
-- 021's view joined every session's owner (session_owner, grouped per session) to
-- `session_totals FINAL`: the join's right side was built from every session of the history at
-- each question, whatever the question asked. Now session_totals gains
--   owner   each session's latest (time, person, repo, branch), from its events and its usage
--           as session_owner has it
-- and the view reads `session_totals FINAL` alone. The figures are 021's.
ALTER TABLE session_totals_local ON CLUSTER '{cluster}' ADD COLUMN IF NOT EXISTS owner SimpleAggregateFunction(max, Tuple(DateTime64(3, 'UTC'), String, String, String));

-- The same column on the Distributed session_totals, whose columns are session_totals_local's.
ALTER TABLE session_totals ON CLUSTER '{cluster}' ADD COLUMN IF NOT EXISTS owner SimpleAggregateFunction(max, Tuple(DateTime64(3, 'UTC'), String, String, String));

-- Fed from events_in, where the store inserts the events (016), not from `events`: on a cluster
-- events_in is on every node and session_totals is sharded by session, so a session's owner rows
-- meet its usage rows on one shard, which FINAL needs (`events` is sharded by event id).
CREATE MATERIALIZED VIEW IF NOT EXISTS session_totals_owner_mv ON CLUSTER '{cluster}' TO session_totals AS
SELECT session_id, max((timestamp, person, repo, branch)) AS owner
FROM events_in
WHERE session_id != ''
GROUP BY session_id;

-- A session's usage names its owner too (a session imported from its transcripts has no events).
ALTER TABLE session_totals_usage_mv ON CLUSTER '{cluster}' MODIFY QUERY
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
CREATE OR REPLACE VIEW session_costs ON CLUSTER '{cluster}' AS
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

-- 028_agents_since_planned_less -------------------------------------------------------------------
-- GENERATED by
--     python -m agentwatch.store.live_window since > src/agentwatch/store/schema/028_agents_since_planned_less.sql
-- from store/agents_sql.py and store/live_window.py; a test fails when this is not current.
--
-- agents_since (026) with less for ClickHouse to plan, which was most of a question's time at 10M
-- events: the scopes active since `since` found without grouping scope_hours (a scope's latest is
-- since then when one of its hours' is), and the usage-only agents' `NOT IN` over the agents of
-- every scope with an hour since then (a few scopes more than the view shows, which changes
-- nothing: that branch reads the shown scopes' rows alone). The same rows.
CREATE OR REPLACE VIEW agents_since ON CLUSTER '{cluster}' AS
SELECT
    agent, team, parent_agent, agent_type, agent_id, session_id, host, first_seen, last_seen, last_event,
    if(raw_state != 'stopped' AND silent_s > 600, 'lost', raw_state) AS state,
    if(raw_state IN ('waiting', 'working'), tool, '') AS current_tool,
    tool_calls, errors, messages_sent, events, scope, state_since,
    dateDiff('millisecond', scope_last_seen, now64(3)) / 1000 AS silent_s,
    state_event, state_note, state_id,
    max(last_seen) OVER (PARTITION BY host, scope) AS scope_last_seen
FROM
(
    WITH argMaxMerge(latest) AS l, argMaxMerge(state) AS s
    SELECT
        host, scope, agent, l.1 AS team, l.2 AS parent_agent, l.3 AS agent_type, l.4 AS agent_id,
        l.5 AS session_id, l.6 AS last_event, min(first_seen) AS first_seen, max(last_seen) AS last_seen,
        sum(tool_calls) AS tool_calls, sum(errors) AS errors, sum(events) AS events,
        sum(messages_sent) AS messages_sent,
        multiIf(
            s.1 = 'PreToolUse', 'working',
            s.1 IN ('PermissionRequest', 'Elicitation'), 'waiting',
            s.1 = 'Notification' AND s.2 IN ('permission_prompt', 'elicitation_dialog'), 'waiting',
            s.1 = 'Notification' AND s.2 = 'idle_prompt', 'idle',
            s.1 IN ('PostToolUse', 'PostToolUseFailure', 'PermissionDenied', 'PostToolBatch', 'ElicitationResult', 'UserPromptSubmit', 'UserPromptExpansion', 'SubagentStart', 'PreCompact', 'PostCompact'), 'thinking',
            s.1 IN ('SessionStart', 'Stop', 'SubagentStop', 'TeammateIdle'), 'idle',
            s.1 = 'StopFailure', 'failed',
            s.1 = 'SessionEnd', 'stopped',
            'thinking'
        ) AS raw_state,
        s.3 AS tool, if(s.1 = '', NULL, s.4) AS state_since, s.1 AS state_event, s.2 AS state_note,
        s.5 AS state_id
    FROM agent_key_rollup
    WHERE (host, scope) IN (SELECT host, scope FROM scope_hours WHERE hour >= toStartOfHour({since:DateTime64(3, 'UTC')}) AND last_seen >= {since:DateTime64(3, 'UTC')})
    GROUP BY host, scope, agent
    UNION ALL
    WITH argMaxMerge(latest) AS c
    SELECT
        host, scope, agent, c.1 AS team, c.2 AS parent_agent, c.4 AS agent_type, c.3 AS agent_id,
        scope AS session_id, 'Usage' AS last_event, assumeNotNull(min(first_at)) AS first_seen,
        assumeNotNull(max(last_at)) AS last_seen, toUInt64(0) AS tool_calls, toUInt64(0) AS errors,
        toUInt64(0) AS events, toUInt64(0) AS messages_sent,
        'thinking' AS raw_state, '' AS tool, CAST(NULL AS Nullable(DateTime64(3, 'UTC'))) AS state_since,
        '' AS state_event, '' AS state_note, '' AS state_id
    FROM agent_cost_rollup
    WHERE (host, scope) IN (SELECT host, scope FROM scope_hours WHERE hour >= toStartOfHour({since:DateTime64(3, 'UTC')}) AND last_seen >= {since:DateTime64(3, 'UTC')}) AND (host, scope, agent) NOT IN (SELECT host, scope, agent FROM agent_key_rollup WHERE (host, scope) IN (SELECT host, scope FROM scope_hours WHERE hour >= toStartOfHour({since:DateTime64(3, 'UTC')})))
    GROUP BY host, scope, agent
    HAVING sum(api_calls) > 0
);
