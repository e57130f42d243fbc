"""The dashboard's cost view: the burn rate now, and the most expensive turns of a window.

By agent, team, model and day the view asks store/queries.py's `cost` (the cost rollups). The
turns are session_queries' (one per prompt_id, its API messages by time), across every session of
the window, each with its share of everything spent in the window. Values are parameters.
"""

from __future__ import annotations

from agentwatch.store.queries import Query
from agentwatch.store.session_queries import TURN_USAGE_SQL

# What was spent in the last minute, the last five, the last hour and today (UTC), from `usage`
# (one row per API message): the burn rate now. NULL costs (unpriced) count their tokens only.
BURN_RATE = Query(
    "SELECT "
    "sumIf(coalesce(cost_usd, 0), timestamp >= now64(3) - INTERVAL 1 MINUTE) AS last_minute_usd, "
    "sumIf(coalesce(cost_usd, 0), timestamp >= now64(3) - INTERVAL 5 MINUTE) AS last_5_minutes_usd, "
    "sumIf(coalesce(cost_usd, 0), timestamp >= now64(3) - INTERVAL 1 HOUR) AS last_hour_usd, "
    "sumIf(coalesce(cost_usd, 0), timestamp >= toStartOfDay(now64(3))) AS today_usd, "
    "countIf(timestamp >= now64(3) - INTERVAL 1 HOUR) AS last_hour_calls, "
    "sumIf(input_tokens + output_tokens + cache_read_tokens + cache_write_tokens, "
    "timestamp >= now64(3) - INTERVAL 1 HOUR) AS last_hour_tokens "
    "FROM usage FINAL WHERE timestamp >= least(now64(3) - INTERVAL 1 HOUR, toStartOfDay(now64(3)))"
)

# The turns' starts are looked for a day before the window: a message in the window may belong to
# a turn that started before it.
_TOP_TURNS = """\
SELECT
    u.session_id AS session_id, u.turn AS prompt_id, p.agent AS agent, p.prompt AS prompt,
    u.api_calls AS api_calls, u.tokens AS tokens, u.cost_usd AS cost_usd,
    if(total.usd > 0, round(100 * u.cost_usd / total.usd, 1), NULL) AS share_pct
FROM
(
TURN_USAGE
) AS u
LEFT JOIN
(
    SELECT session_id, prompt_id, argMin(agent, timestamp) AS agent, argMin(text, timestamp) AS prompt
    FROM events
    WHERE event IN ('UserPromptSubmit', 'UserPromptExpansion')
      AND timestamp >= {since:DateTime64(3, 'UTC')} - INTERVAL 1 DAY
    GROUP BY session_id, prompt_id
) AS p ON p.session_id = u.session_id AND p.prompt_id = u.turn
CROSS JOIN
(
    SELECT sum(coalesce(cost_usd, 0)) AS usd FROM usage FINAL WHERE timestamp >= {since:DateTime64(3, 'UTC')}
) AS total
WHERE u.cost_usd IS NOT NULL
ORDER BY u.cost_usd DESC, u.session_id, u.turn
LIMIT {limit:UInt32}"""


def top_turns(since: str, limit: int = 20) -> Query:
    """The `limit` turns that cost most of the API messages since `since` (UTC, `YYYY-MM-DD
    hh:mm:ss.sss`): session, prompt_id, its agent and prompt, API messages, tokens, cost, and its
    share of all that was spent since then (percent)."""
    usage = TURN_USAGE_SQL.format(
        events_where="timestamp >= {since:DateTime64(3, 'UTC')} - INTERVAL 1 DAY",
        usage_where="timestamp >= {since:DateTime64(3, 'UTC')}",
    )
    return Query(_TOP_TURNS.replace("TURN_USAGE", usage), {"since": since, "limit": int(limit)})
