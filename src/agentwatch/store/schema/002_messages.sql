-- One row per SendMessage delivery, filled from the message envelopes (kind "message", subject
-- genie.msg.*) whose data is {event_id, from, to, to_raw, to_agent_id, message_type, summary,
-- message}. The tool event itself (the SendMessage PostToolUse) is a row of `events`: nothing is
-- counted twice.
--
-- The store inserts the raw message envelopes (JSONEachRow) into the Null table
-- `message_envelopes`, which keeps nothing: the materialized view turns each one into a row of
-- `messages`.
CREATE TABLE IF NOT EXISTS messages
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
ENGINE = ReplacingMergeTree
PARTITION BY toYYYYMM(timestamp)
ORDER BY (timestamp, id);

CREATE TABLE IF NOT EXISTS message_envelopes
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

CREATE MATERIALIZED VIEW IF NOT EXISTS message_envelopes_mv TO messages AS
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
