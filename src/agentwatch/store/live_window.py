"""The live window as SQL: the scopes the dashboard's questions read, and those questions' text.

The roster, its costs and the team's edges were folds over every agent ever seen (the `agents`
view, agent_cost_rollup, edge_hourly over all hours): their cost grew with the history, every
refresh. They now read the live window (020_live_window.sql): the scopes (sessions, else teams)
with an event, message or API message in the last {lost_after_s} seconds, and the newest {limit}
scopes by their latest one. Every agent the roster can show is in one: the live agents are in the
live scopes, and a scope's latest activity is that of its newest agent, so the newest {limit}
finished agents are in the newest {limit} scopes. scope_hours is ordered by hour first: the
innermost question reads its newest 4 x {limit} rows in order and stops, the next one reads the
hours from the oldest of those; the agent rollups, ordered by (host, scope, ...), are then read for
those scopes alone.

Text only (queries.py binds the values): `{limit:UInt32}` and `{lost_after_s:UInt32}`. The
migration is generated here too, with the scope rule and the `agents` SELECT of agents_sql.py:

    python -m agentwatch.store.live_window > src/agentwatch/store/schema/020_live_window.sql

and the one that replaced both agents views with a flatter SELECT (`... live_window flat`, 026).
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

from agentwatch.store.agents_sql import agents_select, agents_select_layered, scope_sql

OUTPUT = "src/agentwatch/store/schema/020_live_window.sql"
COMMAND = f"python -m agentwatch.store.live_window > {OUTPUT}"
ROSTER_LIMIT = 300

# The hours the window spans: those of the newest 4 x {limit} rows of scope_hours (one per hour and
# scope once merged: {limit} scopes or more unless a few scopes were alone for days), read in order
# of the table's key and stopped there; LIMIT 1 BY scope would read the whole table.
WINDOW_START = (
    "least(toStartOfHour(now() - toIntervalSecond({lost_after_s:UInt32})), (SELECT min(hour) FROM "
    "(SELECT hour FROM scope_hours ORDER BY hour DESC LIMIT 4 * {limit:UInt32})))"
)
# The window's (host, scope) pairs, in brackets: for `(host, scope) IN ...`.
# Constants only: every value is a parameter.
WINDOW_SCOPES = (
    "(SELECT host, scope FROM (SELECT host, scope, max(last_seen) AS seen, "  # noqa: S608
    "row_number() OVER (ORDER BY seen DESC, host, scope) AS n FROM scope_hours "
    f"WHERE hour >= {WINDOW_START} GROUP BY host, scope) "
    "WHERE n <= {limit:UInt32} OR seen >= now64(3) - toIntervalSecond({lost_after_s:UInt32}))"
)

# The roster: the `agents` view's columns for the window's scopes (the view's SELECT, generated
# with the scopes inside), with the latest state event in its parts (so the dashboard applies live
# events after it by the same rule), the silence of its scope, and the totals over the window's
# agents (the roster shows at most {limit} of them).
ROSTER_SQL = f"""\
SELECT
    agent, host, scope, team, parent_agent, agent_type, agent_id, session_id, first_seen, last_seen,
    state, current_tool, state_since, state_event, state_note, state_id, scope_last_seen, silent_s,
    tool_calls, errors, messages_sent, events,
    count() OVER () AS agents_total,
    sum(events) OVER () AS events_total,
    sum(messages_sent) OVER () AS messages_total,
    countIf(state IN ('lost', 'stopped')) OVER () AS done_total
FROM
(
{agents_select(WINDOW_SCOPES, "{lost_after_s:UInt32}")}
)
ORDER BY state IN ('lost', 'stopped'), last_seen DESC, agent
LIMIT {{limit:UInt32}}"""  # noqa: S608 - constants only

_TOKENS = (
    "sum(input_tokens) + sum(output_tokens) + sum(cache_read_tokens) + sum(cache_write_5m_tokens) "
    "+ sum(cache_write_1h_tokens)"
)
_PRICE = "if(sum(api_calls) > 0 AND sum(unpriced_calls) = sum(api_calls), NULL, sum(priced_usd))"
_IN_WINDOW = f"(host, scope) IN {WINDOW_SCOPES}"
# The dashboard's costs: per agent of the window (its own, and with its subagents of the same host
# and scope), per team (its agents of the window), and from the start of the previous UTC hour.
DASHBOARD_COSTS_SQL = (
    "SELECT 'agent' AS what, a.host AS host, a.scope AS scope, toString(a.agent) AS name, a.usd AS usd, "  # noqa: S608
    "if(a.usd IS NULL AND s.usd = 0, NULL, coalesce(a.usd, 0) + s.usd) AS usd_with_subagents, "
    "a.tokens AS tokens, a.unpriced AS unpriced FROM "
    f"(SELECT toString(host) AS host, scope, agent, {_PRICE} AS usd, {_TOKENS} AS tokens, "
    f"sum(unpriced_calls) AS unpriced FROM agent_cost_rollup WHERE {_IN_WINDOW} "
    "GROUP BY host, scope, agent HAVING sum(api_calls) > 0) AS a "
    "LEFT JOIN (SELECT toString(host) AS host, scope, toString(parent_agent) AS parent, "
    f"sum(priced_usd) AS usd FROM agent_cost_rollup WHERE parent_agent != '' AND {_IN_WINDOW} "
    "GROUP BY host, scope, parent) AS s "
    "ON s.host = a.host AND s.scope = a.scope AND s.parent = toString(a.agent) "
    "UNION ALL "
    # A UNION takes its column names from its first SELECT. Named host and scope here, the empty
    # strings were what this WHERE read as host and scope, and it found no team.
    f"SELECT 'team' AS what, '' AS no_host, '' AS no_scope, toString(team) AS name, {_PRICE} AS usd, "
    f"{_PRICE} AS usd_with_subagents, {_TOKENS} AS tokens, sum(unpriced_calls) AS unpriced "
    f"FROM agent_cost_rollup WHERE team != '' AND {_IN_WINDOW} GROUP BY team HAVING sum(api_calls) > 0 "
    "UNION ALL "
    "SELECT 'hour' AS what, '' AS host, '' AS scope, "
    "toString(toStartOfHour(now() - INTERVAL 1 HOUR)) AS name, "
    f"{_PRICE} AS usd, {_PRICE} AS usd_with_subagents, {_TOKENS} AS tokens, "
    "sum(unpriced_calls) AS unpriced FROM cost_hourly WHERE hour >= toStartOfHour(now() - INTERVAL 1 HOUR)"
)

# The team's tasks: one row per task of the window's scopes, keyed as agents are (host, scope) plus
# the task's id: a lead's TaskCreated and a teammate's TaskCompleted share their session (in-process
# teammates run in the lead's), whatever `team_name` each payload carries. With the window's totals
# (the list shows at most {tasks}).
TASKS_TEMPLATE = (
    "SELECT host, scope, any(team) AS team, task_id, "  # noqa: S608 - constants only
    "argMinIf(subject, timestamp, subject != '') AS subject, "
    "argMinIf(agent, timestamp, kind = 'task_created') AS created_by, "
    "minIf(timestamp, kind = 'task_created') AS created_at, countIf(kind = 'task_created') > 0 AS created, "
    "argMinIf(agent, timestamp, kind = 'task_completed') AS completed_by, "
    "minIf(timestamp, kind = 'task_completed') AS completed_at, "
    "countIf(kind = 'task_completed') > 0 AS completed, "
    "count() OVER () AS tasks_total, countIf(NOT completed) OVER () AS open_total "
    f"FROM (SELECT toString(host) AS host, {scope_sql()} AS scope, toString(team) AS team, "
    "JSONExtractString(data, 'task_id') AS task_id, JSONExtractString(data, 'task_subject') AS subject, "
    "kind, toString(agent) AS agent, timestamp FROM events "
    "WHERE kind IN ('task_created', 'task_completed') AND @SCOPES@) "
    "WHERE task_id != '' GROUP BY host, scope, task_id "
    "ORDER BY completed, if(created, created_at, completed_at) DESC, scope, task_id "
    "LIMIT {tasks:UInt32}"
)
# (The dashboard asks it with the window's scopes and first time it already read: live_roster.)
TASKS_SQL = TASKS_TEMPLATE.replace("@SCOPES@", f"(host, scope) IN {WINDOW_SCOPES}")

# The scopes active since `since`, as 020 and 026 asked them (grouped, then the latest compared).
_SINCE_SCOPES_020 = (
    "(SELECT host, scope FROM scope_hours WHERE hour >= toStartOfHour({since:DateTime64(3, 'UTC')}) "
    "GROUP BY host, scope HAVING max(last_seen) >= {since:DateTime64(3, 'UTC')})"
)
# The same scopes without the grouping (028): a scope's latest is since then exactly when one of its
# hours' is, and no hour before since's holds a time since then. The pairs come as often as their
# hours: an IN does not mind.
_SINCE_SCOPES = (
    "(SELECT host, scope FROM scope_hours WHERE hour >= toStartOfHour({since:DateTime64(3, 'UTC')}) "
    "AND last_seen >= {since:DateTime64(3, 'UTC')})"
)
# Every scope with an hour since since's: those above and a few more, which is all the usage-only
# branch's `NOT IN` needs (its own rows are those of the scopes above alone), asked more simply.
_SINCE_HOURS = (
    "(SELECT host, scope FROM scope_hours WHERE hour >= toStartOfHour({since:DateTime64(3, 'UTC')}))"
)
_MIGRATION = """\
-- GENERATED by
--     @COMMAND@
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
CREATE TABLE IF NOT EXISTS scope_hours
(
    hour DateTime('UTC'),
    host LowCardinality(String),
    scope String,
    last_seen SimpleAggregateFunction(max, DateTime64(3, 'UTC'))
)
ENGINE = AggregatingMergeTree
ORDER BY (hour, host, scope);

@FEEDS@
-- The backfill: each stored scope at the hour of its latest activity, from the agent rollups (the
-- live window needs a scope's latest hour; earlier hours of the scopes stored before are left out).
INSERT INTO scope_hours (hour, host, scope, last_seen)
SELECT toStartOfHour(seen) AS hour, host, scope, seen AS last_seen
FROM
(
    SELECT host, scope, max(last_seen) AS seen
    FROM
    (
        SELECT toString(host) AS host, scope, max(last_seen) AS last_seen
        FROM agent_key_rollup
        GROUP BY host, scope
        UNION ALL
        SELECT toString(host) AS host, scope, assumeNotNull(max(last_at)) AS last_seen
        FROM agent_cost_rollup
        GROUP BY host, scope
        HAVING sum(api_calls) > 0
    )
    GROUP BY host, scope
);

-- agents_since(since = ...): the `agents` view's rows of the scopes with an event, message or API
-- message at or after `since` (every agent of those scopes, over all their time), read from
-- scope_hours' hours since then and the agent rollups' rows of those scopes alone: what a person
-- asks instead of the whole `agents` view (docs/queries.md).
CREATE OR REPLACE VIEW agents_since AS
@AGENTS_SINCE@;
"""


# What feeds scope_hours: (the view's name, its source, the rows it takes).
_FEEDS = (
    ("events", "events", ""),
    ("messages", "message_envelopes", ""),
    ("usage", "usage_in", "WHERE sign > 0\n"),
)
_FEED = """\
CREATE MATERIALIZED VIEW IF NOT EXISTS scope_hours_{name}_mv TO scope_hours AS
SELECT
    toStartOfHour(timestamp) AS hour, host, @SCOPE@ AS scope,
    max(timestamp) AS last_seen
FROM {source}
{where}GROUP BY hour, host, scope;
"""


def render() -> str:
    """The whole migration file."""
    feeds = "\n".join(_FEED.format(name=n, source=source, where=where) for n, source, where in _FEEDS)
    return (
        _MIGRATION.replace("@FEEDS@", feeds)
        .replace("@COMMAND@", COMMAND)
        .replace("@SCOPE@", scope_sql())
        .replace("@AGENTS_SINCE@", agents_select_layered(_SINCE_SCOPES_020))
    )


FLAT_OUTPUT = "src/agentwatch/store/schema/026_flat_agents.sql"
FLAT_COMMAND = f"python -m agentwatch.store.live_window flat > {FLAT_OUTPUT}"
_FLAT_MIGRATION = """\
-- GENERATED by
--     @COMMAND@
-- from store/agents_sql.py and store/live_window.py; a test fails when this is not current.
--
-- The `agents` view (012) and agents_since (020) in two layers where they had four: each rollup's
-- rows merged and taken apart in one SELECT, then the scope's latest activity and the state shown.
-- The same rows; ClickHouse analyses each layer's projection again, and that, not reading, was
-- most of what a question over agents_since cost at 10M events.

CREATE OR REPLACE VIEW agents AS
@AGENTS@;

CREATE OR REPLACE VIEW agents_since AS
@AGENTS_SINCE@;
"""


def render_flat() -> str:
    """The migration that replaces the agents views with agents_sql's two-layer SELECT."""
    return (
        _FLAT_MIGRATION.replace("@COMMAND@", FLAT_COMMAND)
        .replace("@AGENTS@", agents_select())
        .replace("@AGENTS_SINCE@", agents_select(_SINCE_SCOPES_020))
    )


SINCE_OUTPUT = "src/agentwatch/store/schema/028_agents_since_planned_less.sql"
SINCE_COMMAND = f"python -m agentwatch.store.live_window since > {SINCE_OUTPUT}"
_SINCE_MIGRATION = """\
-- GENERATED by
--     @COMMAND@
-- from store/agents_sql.py and store/live_window.py; a test fails when this is not current.
--
-- agents_since (026) with less for ClickHouse to plan, which was most of a question's time at 10M
-- events: the scopes active since `since` found without grouping scope_hours (a scope's latest is
-- since then when one of its hours' is), and the usage-only agents' `NOT IN` over the agents of
-- every scope with an hour since then (a few scopes more than the view shows, which changes
-- nothing: that branch reads the shown scopes' rows alone). The same rows.

CREATE OR REPLACE VIEW agents_since AS
@AGENTS_SINCE@;
"""


def render_since() -> str:
    """The migration that replaces agents_since with the SELECT of agents_select and these scopes."""
    return _SINCE_MIGRATION.replace("@COMMAND@", SINCE_COMMAND).replace(
        "@AGENTS_SINCE@", agents_select(_SINCE_SCOPES, key_scopes=_SINCE_HOURS)
    )


def main(argv: Sequence[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else list(argv)
    renders = {"flat": render_flat, "since": render_since}
    sys.stdout.write(renders.get(args[0], render)() if args else render())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
