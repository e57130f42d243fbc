"""The read side of past sessions: the sessions list, one session's turns and events (the
session page, its replay, `agentwatch export`), and search over the whole history.

Like store/queries.py (whose `Query` these return), every value a person can influence is a
`{name:Type}` parameter bound by ClickHouse, and importing this module loads no client.

A turn is one `prompt_id`: Claude Code gives every event of one prompt's work the prompt's id,
its subagents' included. Its start and end are its first and last event; the API messages
(`usage`) of its session from its start until the next turn's start are its tokens and cost
(an ASOF join on the time: usage rows carry no prompt id). The events table keeps a redelivered
event until its merge, so each question here takes an id once (`LIMIT 1 BY id`).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from agentwatch.store.queries import EPOCH, Query

# One session's events, each id once, without their payloads (a Notification's payload is kept:
# its type decides its agent's state, agents.note_of).
_SESSION_EVENTS = (
    "SELECT id, timestamp, event, kind, agent, team, peer, parent_agent, agent_type, agent_id, session_id, "
    "host, tool_name, tool_use_id, text, prompt_id, duration_ms, seq, "
    "if(event = 'Notification', data, '') AS data "
    "FROM events WHERE session_id = {session:String} AND timestamp >= {after_at:DateTime64(3, 'UTC')} "
    "AND (timestamp, id) > ({after_at:DateTime64(3, 'UTC')}, {after_id:String}) "
    "ORDER BY timestamp, id LIMIT 1 BY id LIMIT {limit:UInt32}"
)

# The turns of one session. `tools` is the tool of each call in order; `tool_ms` the time Claude
# Code reported for the calls that finished; `failed` PostToolUseFailure and PermissionDenied.
_TURNS = """\
SELECT
    t.prompt_id AS prompt_id, t.started AS started, t.ended AS ended, t.wall_ms AS wall_ms,
    t.prompt AS prompt, t.agents AS agents, t.events AS events, t.tools AS tools,
    t.tool_calls AS tool_calls, t.failed AS failed, t.tool_ms AS tool_ms, t.subagents AS subagents,
    t.messages AS messages,
    coalesce(u.api_calls, 0) AS api_calls, coalesce(u.tokens, 0) AS tokens, u.cost_usd AS cost_usd
FROM
(
    SELECT
        prompt_id, min(timestamp) AS started, max(timestamp) AS ended,
        dateDiff('millisecond', started, ended) AS wall_ms,
        argMinIf(text, timestamp, event IN ('UserPromptSubmit', 'UserPromptExpansion')) AS prompt,
        groupUniqArray(agent) AS agents, count() AS events,
        arrayMap(c -> c.2, arraySort(groupArrayIf((timestamp, tool_name), event = 'PreToolUse'))) AS tools,
        countIf(event = 'PreToolUse') AS tool_calls,
        countIf(event IN ('PostToolUseFailure', 'PermissionDenied')) AS failed,
        sumIf(duration_ms, event IN ('PostToolUse', 'PostToolUseFailure')) AS tool_ms,
        countIf(event = 'SubagentStart') AS subagents,
        countIf(event = 'PreToolUse' AND tool_name = 'SendMessage') AS messages
    FROM (SELECT * FROM events WHERE session_id = {session:String} AND prompt_id != '' LIMIT 1 BY id)
    GROUP BY prompt_id
) AS t
LEFT JOIN
(
TURN_USAGE
) AS u ON u.turn = t.prompt_id
ORDER BY started, prompt_id"""

# Each API message's turn: the latest turn of its session that started at or before it. One sorted
# stream of the turns' starts and the messages per session, in which a message takes the last
# turn seen before it (anyLast skips the messages' NULLs). Then per turn: its API messages,
# tokens and cost (NULL when none could be priced).
TURN_USAGE_SQL = """\
SELECT
    session_id, turn, count() AS api_calls, toUInt64(sum(tokens)) AS tokens,
    if(countIf(cost_usd IS NULL) = count(), NULL, sum(coalesce(cost_usd, 0))) AS cost_usd
FROM
(
    SELECT
        session_id, is_usage, tokens, cost_usd,
        anyLast(turn_start) OVER (PARTITION BY session_id ORDER BY at, is_usage
                                  ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW) AS turn
    FROM
    (
        SELECT session_id, min(timestamp) AS at, toNullable(prompt_id) AS turn_start, 0 AS is_usage,
            toUInt64(0) AS tokens, CAST(NULL AS Nullable(Float64)) AS cost_usd
        FROM events WHERE {events_where} AND prompt_id != '' GROUP BY session_id, prompt_id
        UNION ALL
        SELECT session_id, timestamp AS at, CAST(NULL AS Nullable(String)) AS turn_start, 1 AS is_usage,
            input_tokens + output_tokens + cache_read_tokens + cache_write_tokens AS tokens, cost_usd
        FROM usage FINAL WHERE {usage_where}
    )
)
WHERE is_usage = 1 AND turn IS NOT NULL
GROUP BY session_id, turn"""

# The session's agents (the `agents` view: its scope is the session) and its alerts.
_SESSION_AGENTS = (
    "SELECT agent, host, team, parent_agent, agent_type, state, tool_calls, errors, messages_sent, events, "
    "first_seen, last_seen FROM agents WHERE session_id = {session:String} OR scope = {session:String} "
    "ORDER BY first_seen, agent"
)
_SESSION_ALERTS = (
    "SELECT id, rule, severity, state, agent, summary, since, at FROM alerts FINAL "
    "WHERE session_id = {session:String} ORDER BY at DESC LIMIT 500"
)
# The agents of the sessions of a list (the sessions view's `agents` column).
_SESSION_AGENT_COUNTS = (
    "SELECT scope AS session_id, uniqExact(agent) AS agents FROM agents "
    "WHERE scope IN {ids:Array(String)} GROUP BY scope"
)
# Who ran the sessions of a list (the sessions view's `harness` column): their events from the
# oldest session's start on, so the primary key (timestamp, id) bounds the read to the list's
# window, and the session_id bloom filter (001_events.sql) skips the rest of it.
_SESSION_HARNESSES = (
    "SELECT session_id, arraySort(groupUniqArray(harness)) AS harnesses FROM events "
    "WHERE session_id IN {ids:Array(String)} AND timestamp >= {since:DateTime64(3, 'UTC')} "
    "GROUP BY session_id"
)

SESSION_EVENTS_PAGE = 5000


def session_events(
    session_id: str, limit: int = SESSION_EVENTS_PAGE, after: tuple[str, str] = (EPOCH, "")
) -> Query:
    """The session's events after `after` ((timestamp `YYYY-MM-DD hh:mm:ss.sss`, id): where the
    previous page ended), oldest first, at most `limit`, each id once; payloads left out but a
    Notification's."""
    return Query(
        _SESSION_EVENTS,
        {"session": session_id, "after_at": after[0], "after_id": after[1], "limit": int(limit)},
    )


def session_turns(session_id: str) -> Query:
    """One row per turn (prompt_id) of the session, oldest first: its first and last event and the
    milliseconds between (wall_ms), its prompt's line, the agents and events in it, its tools in
    order, tool_calls, failed (failed or denied calls), tool_ms (the calls' own reported time; NULL
    when none reported one),
    subagents started, messages sent, and its API messages, tokens and cost (NULL: unpriced)."""
    where = "session_id = {session:String}"
    usage = TURN_USAGE_SQL.format(events_where=where, usage_where=where)
    return Query(_TURNS.replace("TURN_USAGE", usage), {"session": session_id})


def session_agents(session_id: str) -> Query:
    """The agents of the session (the `agents` view), first seen first."""
    return Query(_SESSION_AGENTS, {"session": session_id})


def session_alerts(session_id: str) -> Query:
    """The alert changes of the session, newest first."""
    return Query(_SESSION_ALERTS, {"session": session_id})


def session_agent_counts(ids: list[str]) -> Query:
    """How many agents each of the sessions `ids` had."""
    return Query(_SESSION_AGENT_COUNTS, {"ids": [str(i) for i in ids]})


def session_harnesses(ids: list[str], since: str) -> Query:
    """The harnesses (claude-code, codex, gemini-cli) whose events each of the sessions `ids` has,
    from `since` (the oldest of their starts, 'YYYY-MM-DD HH:MM:SS.fff' UTC) on."""
    return Query(_SESSION_HARNESSES, {"ids": [str(i) for i in ids], "since": since})


# --- search ---------------------------------------------------------------------------------------

SEARCH_LIMIT = 200
_WORD = re.compile(r"[^\W_]", re.UNICODE)

# The text indexes of 015_search.sql hold the words of `text` and `data` (split at every character
# that is not a letter or digit, lower-cased): hasAllTokens reads only the granules that hold
# every word of the search, then the search must appear as it was typed (in any case).
_SEARCH = """\
SELECT
    id, timestamp, session_id, agent, team, host, event, kind, tool_name, text,
    if(positionCaseInsensitiveUTF8(text, {{q:String}}) > 0, '',
       substringUTF8(data, greatest(1, toInt64(positionCaseInsensitiveUTF8(data, {{q:String}})) - 60), 180))
        AS excerpt
FROM events
WHERE (hasAllTokens(text, {{q:String}}) OR hasAllTokens(data, {{q:String}}))
  AND (positionCaseInsensitiveUTF8(text, {{q:String}}) > 0
       OR positionCaseInsensitiveUTF8(data, {{q:String}}) > 0)
  AND timestamp >= {{since:DateTime64(3, 'UTC')}}{narrow}
ORDER BY timestamp DESC, id
LIMIT 1 BY id
LIMIT {{limit:UInt32}}"""


def searchable(text: str) -> bool:
    """Whether `text` has a word to look up (a letter or a digit): the index finds words."""
    return bool(_WORD.search(text))


def search(
    text: str,
    since: str = EPOCH,
    agent: str = "",
    session: str = "",
    limit: int = SEARCH_LIMIT,
    person: str = "",
    repo: str = "",
) -> Query:
    """The events whose text or payload holds `text` (case-insensitive; every word of it a whole
    word), newest first, from `since`, of one agent, session, person and repository when given:
    id, time, where, the event's line, and an excerpt of the payload around the match when the
    line lacks it."""
    if not searchable(text):
        raise ValueError(f"nothing to search for in {text!r}: give a word (letters or digits)")
    narrow = ""
    params: dict[str, Any] = {"q": text, "since": since, "limit": int(limit)}
    if agent:
        narrow += "\n  AND agent = {agent:String}"
        params["agent"] = agent
    if session:
        narrow += "\n  AND session_id = {session:String}"
        params["session"] = session
    narrow += _owner(params, person, repo, "\n  ")
    # `narrow` is one of a few fixed texts; every value is a parameter.
    return Query(_SEARCH.format(narrow=narrow), params)


# --- whose a session is -----------------------------------------------------------------------------


def session_owners(ids: Sequence[str]) -> Query:
    """The sessions `ids`' person, repo and branch: each one's latest (session_owner,
    021_attribution.sql); a session the hook said nothing of is not in the answer."""
    return Query(
        "SELECT session_id, o.2 AS person, o.3 AS repo, o.4 AS branch FROM (SELECT session_id, "
        "max(owner) AS o FROM session_owner WHERE session_id IN {ids:Array(String)} GROUP BY session_id)",
        {"ids": [str(i) for i in ids]},
    )


# --- export ---------------------------------------------------------------------------------------

# The events table's columns, as an export holds them (the payload as its JSON text).
EXPORT_COLUMNS = (
    "id, timestamp, v, event, kind, agent, team, direction, peer, text, source, session_id, agent_id, "
    "agent_type, parent_agent, tool_name, tool_use_id, host, cwd, redacted, truncated, seq, prompt_id, "
    "duration_ms, person, repo, branch, data"
)
_EXPORT = (
    f"SELECT {EXPORT_COLUMNS} FROM events WHERE WHERE_CLAUSE "  # noqa: S608 (fixed texts; values are parameters)
    "AND timestamp >= {after_at:DateTime64(3, 'UTC')} "
    "AND (timestamp, id) > ({after_at:DateTime64(3, 'UTC')}, {after_id:String}) "
    "ORDER BY timestamp, id LIMIT 1 BY id LIMIT {limit:UInt32}"
)
# How many, and the newest time: the export's end (what is stored while it runs is the next one's).
_EXPORT_COUNT = "SELECT uniqExact(id) AS events, max(timestamp) AS until FROM events WHERE WHERE_CLAUSE"
_BY_SESSION = "session_id = {session:String}"
_BY_TIME = "timestamp >= {since:DateTime64(3, 'UTC')}"


def _owner(params: dict[str, Any], person: str, repo: str, before: str = " ") -> str:
    """The fixed conditions on the person and repository given (their values added to `params`)."""
    narrow = ""
    if person:
        narrow += f"{before}AND person = {{person:String}}"
        params["person"] = person
    if repo:
        narrow += f"{before}AND repo = {{repo:String}}"
        params["repo"] = repo
    return narrow


def _export_where(session: str, since: str, person: str = "", repo: str = "") -> tuple[str, dict[str, Any]]:
    """One of two fixed conditions, narrowed to a person or repository, and the values as parameters."""
    params: dict[str, Any] = {"session": session} if session else {"since": since}
    where = _BY_SESSION if session else _BY_TIME
    return where + _owner(params, person, repo), params


_UNTIL = " AND timestamp <= {until:DateTime64(3, 'UTC')}"


def _until(where: str, params: dict[str, Any], until: str) -> str:
    """The export's end: the newest event's time when it counted (export_count)."""
    if not until:
        return where
    params["until"] = until
    return where + _UNTIL


def export_count(session: str = "", since: str = EPOCH, person: str = "", repo: str = "") -> Query:
    """How many events an export of one session (else of everything since `since`) holds, and the
    newest one's time (`until` of export_page)."""
    where, params = _export_where(session, since, person, repo)
    return Query(_EXPORT_COUNT.replace("WHERE_CLAUSE", where), params)


def export_page(
    session: str = "",
    since: str = EPOCH,
    after: tuple[str, str] = (EPOCH, ""),
    limit: int = 2000,
    person: str = "",
    repo: str = "",
    until: str = "",
) -> Query:
    """The next `limit` events of an export after `after` (the last page's last time and id), in
    time order, every column of the events table, each id once; up to `until` when given."""
    where, params = _export_where(session, since, person, repo)
    where = _until(where, params, until)
    return Query(
        _EXPORT.replace("WHERE_CLAUSE", where),
        {**params, "after_at": after[0], "after_id": after[1], "limit": int(limit)},
    )


def sessions_matching(text: str, limit: int = 11) -> Query:
    """The sessions whose id is `text`, begins with it, or ends with it (the short id a screen
    shows of a time-ordered id is its tail: harnesses.short_id); an exact id first."""
    return Query(
        "SELECT session_id, min(timestamp) AS first_seen, count() AS events FROM events "
        "WHERE session_id != '' AND (startsWith(session_id, {text:String}) "
        "OR endsWith(session_id, {text:String})) "
        "GROUP BY session_id ORDER BY session_id != {text:String}, first_seen DESC LIMIT {limit:UInt32}",
        {"text": text, "limit": int(limit)},
    )
