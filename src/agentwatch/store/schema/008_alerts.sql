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
CREATE TABLE IF NOT EXISTS alerts
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
ENGINE = ReplacingMergeTree
ORDER BY (id, state);

-- open_alerts: alerts firing now: a firing row and no resolved row for the same id.
-- Columns as in alerts.
CREATE VIEW IF NOT EXISTS open_alerts AS
SELECT id, rule, severity, state, agent, team, session_id, host, summary, details, since, at
FROM alerts FINAL
WHERE state = 'firing'
  AND id NOT IN (SELECT id FROM alerts FINAL WHERE state = 'resolved');
