"""The store's side of agentwatch.agents: the agent state machine and identity, as SQL.

    python -m agentwatch.store.agents_sql > src/agentwatch/store/schema/012_agents.sql

The state table and the scope rule live once, as data, in agentwatch/agents.py; this module
writes them into the migration that keys the agent rollups by (host, scope, agent) and defines
the `agents` view. tests/integration/test_agent_states.py fails when the file is not what this
prints. An applied migration never changes: a later change of the table goes into a new file
made the same way (copy the template, point OUTPUT at it).
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

from agentwatch import agents

OUTPUT = "src/agentwatch/store/schema/012_agents.sql"
COMMAND = f"python -m agentwatch.store.agents_sql > {OUTPUT}"


def quote(text: str) -> str:
    """A string literal in SQL."""
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def _in(column: str, values: Sequence[str]) -> str:
    if len(values) == 1:
        return f"{column} = {quote(values[0])}"
    return f"{column} IN ({', '.join(quote(v) for v in values)})"


def scope_sql(team: str = "team", session_id: str = "session_id") -> str:
    """agents.scope() in SQL."""
    return f"if({session_id} != '', {session_id}, toString({team}))"


def is_state_sql(event: str = "event", note: str = "note") -> str:
    """True for the events that change their agent's state (agents.state_after is not None)."""
    plain = [e for e, notes, _ in agents.TRANSITIONS if not notes]
    parts = [_in(event, plain)]
    noted: dict[str, list[str]] = {}
    for e, notes, _ in agents.TRANSITIONS:
        if notes and e not in plain:
            noted.setdefault(e, []).extend(n for n in notes if n not in noted.get(e, []))
    parts += [f"({_in(event, [e])} AND {_in(note, notes)})" for e, notes in noted.items()]
    return " OR ".join(parts)


def state_case_sql(event: str, note: str) -> str:
    """agents.state_after() in SQL: the state the (event, note) of a state event puts its agent in;
    agents.INITIAL where there is none (event '')."""
    branches: list[tuple[list[str], tuple[str, ...], str]] = []
    for e, notes, state in agents.TRANSITIONS:
        last = branches[-1] if branches else None
        if last is not None and not notes and not last[1] and last[2] == state:
            last[0].append(e)
        else:
            branches.append(([e], notes, state))
    lines = []
    for events, notes, state in branches:
        condition = _in(event, events) + (f" AND {_in(note, notes)}" if notes else "")
        lines.append(f"{condition}, {quote(state)}")
    body = ",\n            ".join(lines)
    return f"multiIf(\n            {body},\n            {quote(agents.INITIAL)}\n        )"


def shown_state_sql(state: str, silent_s: str, lost_after_s: str = str(agents.LOST_AFTER_S)) -> str:
    """agents.shown_state() in SQL, at the default LOST_AFTER_S (or an SQL expression: a parameter)."""
    return (
        f"if({state} != {quote(agents.STOPPED)} AND {silent_s} > {lost_after_s}, "
        f"{quote(agents.LOST)}, {state})"
    )


def tool_states_sql() -> str:
    return ", ".join(quote(s) for s in sorted(agents.TOOL_STATES))


_TEMPLATE = """\
-- GENERATED from agentwatch/agents.py (the agent state machine and identity) by
--     @COMMAND@
-- Edit that table, not this file, and regenerate; a test fails when this is not current.
--
-- Agents are keyed by where they live (agents.scope: their session, else their team) and their
-- host, not by their name alone: two `researcher`s in two sessions are two rows, each with its
-- own counts, messages and cost. The name-keyed agent_rollup and cost_by_agent (009) go.

-- agent_key_rollup: per host, scope and agent name, the inputs of the `agents` view:
--   latest      (team, parent_agent, agent_type, agent_id, session_id, event) of its latest event
--   state       (event, notification type, tool, time, id) of its latest state event
--   first_seen, last_seen, tool_calls (PreToolUse), errors (@ERROR_EVENT_NAMES@),
--   events (rows of `events`), messages_sent (messages it sent)
CREATE TABLE IF NOT EXISTS agent_key_rollup
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
ENGINE = AggregatingMergeTree
ORDER BY (host, scope, agent);

CREATE MATERIALIZED VIEW IF NOT EXISTS agent_key_rollup_mv TO agent_key_rollup AS
@EVENTS_LIVE@
GROUP BY host, scope, agent;

CREATE MATERIALIZED VIEW IF NOT EXISTS agent_key_messages_mv TO agent_key_rollup AS
SELECT
    host,
    @SCOPE@ AS scope,
    agent, min(timestamp) AS first_seen, max(timestamp) AS last_seen, toUInt64(count()) AS messages_sent
FROM message_envelopes
GROUP BY host, scope, agent;

-- agent_cost_rollup: per host, scope, agent (with its parent), team and model: API messages,
-- tokens, their price (signed sums: see usage_in in 009), the sessions, the latest message's
-- team, parent, agent_id and type. agent_costs and the dashboard's roster read it.
CREATE TABLE IF NOT EXISTS agent_cost_rollup
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
ENGINE = AggregatingMergeTree
ORDER BY (host, scope, agent, parent_agent, team, model);

CREATE MATERIALIZED VIEW IF NOT EXISTS agent_cost_rollup_mv TO agent_cost_rollup AS
@COST_SELECT@
FROM usage_in
GROUP BY host, scope, agent, parent_agent, team, model;

-- The backfill: what was stored before these rollups existed (each message's host is its
-- SendMessage event's).
INSERT INTO agent_key_rollup
    (host, scope, agent, latest, state, first_seen, last_seen, tool_calls, errors, events, messages_sent)
@EVENTS_BACKFILL@
GROUP BY host, scope, agent;

INSERT INTO agent_key_rollup (host, scope, agent, first_seen, last_seen, messages_sent)
SELECT
    host,
    @SCOPE@ AS scope,
    agent, min(timestamp) AS first_seen, max(timestamp) AS last_seen, toUInt64(count()) AS messages_sent
FROM
(
    SELECT m.timestamp AS timestamp, m.from_agent AS agent, m.team AS team, m.session_id AS session_id,
        coalesce(e.host, '') AS host
    FROM messages AS m FINAL
    LEFT JOIN
    (
        SELECT id, any(host) AS host FROM events WHERE id IN (SELECT event_id FROM messages) GROUP BY id
    ) AS e ON e.id = m.event_id
    SETTINGS join_use_nulls = 1
)
GROUP BY host, scope, agent;

INSERT INTO agent_cost_rollup
    (host, scope, agent, parent_agent, team, model, api_calls, input_tokens, output_tokens, cache_read_tokens,
     cache_write_5m_tokens, cache_write_1h_tokens, priced_usd, unpriced_calls, first_at, last_at, sessions,
     latest)
@COST_SELECT@
FROM (SELECT *, toInt8(1) AS sign FROM usage FINAL)
GROUP BY host, scope, agent, parent_agent, team, model;

DROP VIEW IF EXISTS agent_rollup_mv;

DROP TABLE IF EXISTS agent_rollup;

DROP VIEW IF EXISTS cost_by_agent_mv;

DROP TABLE IF EXISTS cost_by_agent;

-- agents: one row per agent (host, scope, name): those with events, and those known only from
-- token usage (an imported transcript: last_event 'Usage', no state event). The columns of 009's
-- view, and:
--   scope         where it lives: its session, else its team (agents.scope)
--   state         by agents.TRANSITIONS from its latest state event; `lost` once its scope sent
--                 nothing for @LOST_AFTER@ s while it is not stopped
--   current_tool  the tool of its latest state event while working or waiting
--   state_since   when its latest state event happened (NULL: none yet)
--   silent_s      seconds since the latest event (or API message) of its scope
--   state_event, state_note, state_id
--                 that event ('' when none), its notification type, its id
--   scope_last_seen
--                 the time of the latest event (or API message) of its scope
CREATE OR REPLACE VIEW agents AS
@AGENTS_SELECT@;

-- agent_costs: one row per agent (host, scope, name) with usage; the columns of 009's view, and
-- host and scope. The subagents' cost is that of the agents of its host and scope whose parent it is.
CREATE OR REPLACE VIEW agent_costs AS
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
"""

# The `agents` view's SELECT as 012_agents and 020_live_window wrote it: four layers (the rollups'
# merge, its tuples taken apart, the scope's window, the shown state), each a projection ClickHouse
# analyses again; kept to render those applied migrations (agents_select_layered), replaced by
# _AGENTS_SELECT in 026_flat_agents.
_AGENTS_SELECT_LAYERED = """\
SELECT
    agent, team, parent_agent, agent_type, agent_id, session_id, host, first_seen, last_seen, last_event,
    @SHOWN_STATE@ AS state,
    if(raw_state IN (@TOOL_STATES@), tool, '') AS current_tool,
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
            @STATE_CASE@ AS raw_state,
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
@IN_SCOPES@            GROUP BY host, scope, agent
        )
        UNION ALL
        SELECT
            host, scope, agent, c.1 AS team, c.2 AS parent_agent, c.4 AS agent_type, c.3 AS agent_id,
            scope AS session_id, 'Usage' AS last_event, first_seen, last_seen, toUInt64(0) AS tool_calls,
            toUInt64(0) AS errors, toUInt64(0) AS events, toUInt64(0) AS messages_sent,
            @INITIAL@ AS raw_state, '' AS tool, CAST(NULL AS Nullable(DateTime64(3, 'UTC'))) AS state_since,
            '' AS state_event, '' AS state_note, '' AS state_id
        FROM
        (
            SELECT
                host, scope, agent, argMaxMerge(latest) AS c, assumeNotNull(min(first_at)) AS first_seen,
                assumeNotNull(max(last_at)) AS last_seen
            FROM agent_cost_rollup
@IN_SCOPES@            GROUP BY host, scope, agent
            HAVING sum(api_calls) > 0
        )
        WHERE (host, scope, agent) NOT IN (SELECT host, scope, agent FROM agent_key_rollup@KEY_SCOPES@)
    )
)"""

# The `agents` view's SELECT: the view as it is, and (agents_select) the same restricted to some
# scopes, which the dashboard's roster asks. Two layers: each rollup's rows merged and taken apart
# in one SELECT per rollup (an agent with API messages but no event of its own from the cost
# rollup), then the scope's latest activity (a window) and the state shown. Planning, not reading,
# was most of the layered form's time at 10M events; this one answers the same rows (026).
_AGENTS_SELECT = """\
SELECT
    agent, team, parent_agent, agent_type, agent_id, session_id, host, first_seen, last_seen, last_event,
    @SHOWN_STATE@ AS state,
    if(raw_state IN (@TOOL_STATES@), tool, '') AS current_tool,
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
        @STATE_CASE@ AS raw_state,
        s.3 AS tool, if(s.1 = '', NULL, s.4) AS state_since, s.1 AS state_event, s.2 AS state_note,
        s.5 AS state_id
    FROM agent_key_rollup
@IN_SCOPES@    GROUP BY host, scope, agent
    UNION ALL
    WITH argMaxMerge(latest) AS c
    SELECT
        host, scope, agent, c.1 AS team, c.2 AS parent_agent, c.4 AS agent_type, c.3 AS agent_id,
        scope AS session_id, 'Usage' AS last_event, assumeNotNull(min(first_at)) AS first_seen,
        assumeNotNull(max(last_at)) AS last_seen, toUInt64(0) AS tool_calls, toUInt64(0) AS errors,
        toUInt64(0) AS events, toUInt64(0) AS messages_sent,
        @INITIAL@ AS raw_state, '' AS tool, CAST(NULL AS Nullable(DateTime64(3, 'UTC'))) AS state_since,
        '' AS state_event, '' AS state_note, '' AS state_id
    FROM agent_cost_rollup
@NOT_KEY@    GROUP BY host, scope, agent
    HAVING sum(api_calls) > 0
)"""

_EVENTS_SELECT = """\
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
    toUInt64(countIf(@IS_ERROR@)) AS errors,
    toUInt64(count()) AS events,
    toUInt64(0) AS messages_sent
FROM
(
    SELECT
        host,
        @SCOPE@ AS scope,
        agent, team, parent_agent, agent_type, agent_id, session_id, tool_name, timestamp, id, event, note,
        @IS_STATE@ AS is_state
    FROM
    (
        SELECT
            host, agent, team, parent_agent, agent_type, agent_id, session_id, tool_name, timestamp, id,
            event,
            if(event = 'Notification', JSONExtractString(data, '@NOTE_FIELD@'), '') AS note
        FROM @SOURCE@
    )
)"""

_COST_SELECT = """\
SELECT
    host,
    @SCOPE@ AS scope,
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
    ) AS latest"""


def _filled(text: str, lost_after_s: str = str(agents.LOST_AFTER_S)) -> str:
    replacements = {
        "@COMMAND@": COMMAND,
        "@IS_STATE@": is_state_sql(),
        "@SCOPE@": scope_sql(),
        "@STATE_CASE@": state_case_sql("s.1", "s.2"),
        "@SHOWN_STATE@": shown_state_sql("raw_state", "silent_s", lost_after_s),
        "@TOOL_STATES@": tool_states_sql(),
        "@INITIAL@": quote(agents.INITIAL),
        "@LOST_AFTER@": str(agents.LOST_AFTER_S),
        "@NOTE_FIELD@": agents.NOTE_FIELD,
        "@IS_ERROR@": _in("event", agents.ERROR_EVENTS),
        "@ERROR_EVENT_NAMES@": ", ".join(agents.ERROR_EVENTS),
    }
    for token, value in replacements.items():
        text = text.replace(token, value)
    return text


def agents_select(
    scopes: str = "", lost_after_s: str = str(agents.LOST_AFTER_S), key_scopes: str = ""
) -> str:
    """The `agents` view's SELECT; with `scopes` (SQL that gives (host, scope) pairs: a subquery
    in brackets, or a parameter), only the agents of those scopes, read from the rollups' rows of
    those scopes alone (their sort keys start with host and scope). `lost_after_s`: the silence
    after which an agent not stopped is lost, as SQL (a number or a parameter). `key_scopes`: the
    pairs whose agents the usage-only branch's `NOT IN` reads (every pair of `scopes` among them),
    `scopes` when not given."""
    in_scopes = f"(host, scope) IN {scopes}" if scopes else ""
    in_key = f"(host, scope) IN {key_scopes or scopes}" if scopes else ""
    key = f"SELECT host, scope, agent FROM agent_key_rollup{' WHERE ' + in_key if scopes else ''}"  # noqa: S608 - constants only
    not_key = f"(host, scope, agent) NOT IN ({key})"
    text = _AGENTS_SELECT.replace("@IN_SCOPES@", f"    WHERE {in_scopes}\n" if scopes else "")
    text = text.replace("@NOT_KEY@", f"    WHERE {in_scopes + ' AND ' if scopes else ''}{not_key}\n")
    return _filled(text, lost_after_s)


def agents_select_layered(scopes: str = "") -> str:
    """agents_select as 012_agents (the `agents` view) and 020_live_window (agents_since) wrote it."""
    where = f"            WHERE (host, scope) IN {scopes}\n" if scopes else ""
    text = _AGENTS_SELECT_LAYERED.replace("@IN_SCOPES@", where)
    text = text.replace("@KEY_SCOPES@", f" WHERE (host, scope) IN {scopes}" if scopes else "")
    return _filled(text)


def render() -> str:
    """The whole migration file."""
    text = (
        _TEMPLATE.replace("@EVENTS_LIVE@", _EVENTS_SELECT.replace("@SOURCE@", "events"))
        .replace("@EVENTS_BACKFILL@", _EVENTS_SELECT.replace("@SOURCE@", "events FINAL"))
        .replace("@COST_SELECT@", _COST_SELECT)
        .replace("@AGENTS_SELECT@", agents_select_layered())
    )
    return _filled(text)


INVALID_INPUT_OUTPUT = "src/agentwatch/store/schema/023_invalid_input.sql"

_INVALID_INPUT_TEMPLATE = """\
-- Generated by `python -m agentwatch.store.agents_sql invalid-input > @OUTPUT@`: do not edit.
--
-- Invalid hook input (agents.INVALID_INPUT_EVENTS: @INVALID@) stays in `events` with
-- its reason, and makes no agent: the agent rollup's materialized view of 012, without it.
DROP VIEW IF EXISTS agent_key_rollup_mv;

CREATE MATERIALIZED VIEW IF NOT EXISTS agent_key_rollup_mv TO agent_key_rollup AS
@EVENTS_LIVE@
GROUP BY host, scope, agent;
"""


def render_invalid_input() -> str:
    """The migration that leaves invalid hook input out of the agent rollup."""
    source = f"events WHERE NOT ({_in('event', agents.INVALID_INPUT_EVENTS)})"
    text = _INVALID_INPUT_TEMPLATE.replace("@EVENTS_LIVE@", _EVENTS_SELECT.replace("@SOURCE@", source))
    text = text.replace("@OUTPUT@", INVALID_INPUT_OUTPUT)
    return _filled(text.replace("@INVALID@", ", ".join(agents.INVALID_INPUT_EVENTS)))


def main(argv: Sequence[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else list(argv)
    sys.stdout.write(render_invalid_input() if args[:1] == ["invalid-input"] else render())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
