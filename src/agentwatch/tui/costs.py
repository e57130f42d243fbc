"""What the agents cost, as the dashboard shows it: per agent (its own, and with its subagents),
per team, and since the start of the previous hour. No Textual here: the app asks the store
(queries.DASHBOARD_COSTS), hands the rows in, and reads cells and status-line words back.

The dollars come from the store, which prices the token usage the hooks read from Claude Code's
transcripts; the dashboard asks again every few seconds, and soon after usage arrives on the bus.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Sequence
from typing import Any

from agentwatch.agents import AgentKey
from agentwatch.format import money, utc_datetime

# (own cost, with its subagents', tokens, API calls with no known price)
Cost = tuple[float | None, float | None, int, int]
NONE: Cost = (None, None, 0, 0)


class Costs:
    """The latest answer of the store about costs; agents by key (host, scope, name)."""

    def __init__(self) -> None:
        self.agents: dict[AgentKey, Cost] = {}
        self.teams: dict[str, Cost] = {}
        self.hour: float | None = None
        # The start of the hour row's window: the previous whole UTC hour's (the rollup is hourly).
        self.hour_from: dt.datetime | None = None

    def update(self, rows: Iterable[Sequence[Any]]) -> None:
        """Rows of queries.DASHBOARD_COSTS: (what, host, scope, name, usd, usd with subagents,
        tokens, unpriced)."""
        agents: dict[AgentKey, Cost] = {}
        teams: dict[str, Cost] = {}
        hour, hour_from = None, None
        for what, host, scope, name, usd, with_subs, tokens, unpriced in rows:
            entry: Cost = (usd, with_subs, int(tokens or 0), int(unpriced or 0))
            if what == "agent":
                agents[(str(host), str(scope), str(name))] = entry
            elif what == "team":
                teams[str(name)] = entry
            elif what == "hour":
                hour, hour_from = usd, _utc(name)
        self.agents, self.teams, self.hour, self.hour_from = agents, teams, hour, hour_from

    def own(self, agent: AgentKey) -> str:
        """The agent's own cost: '$0.42', 'unpriced', or '' when nothing is known."""
        usd, _, tokens, _ = self.agents.get(agent, NONE)
        return money(usd, tokens)

    def with_subagents(self, agent: AgentKey) -> str:
        """The agent's cost with its subagents', where they add something."""
        own, with_subs, tokens, _ = self.agents.get(agent, NONE)
        if with_subs is None or own is None or with_subs <= own + 0.005:
            return ""
        return money(with_subs, tokens)

    def status(self) -> str:
        """The cost since the start of the previous hour (local time), for the status line ('' if
        none): the hourly rollup's window is the last whole hour and this one, and says so."""
        if self.hour is None:
            return ""
        if self.hour_from is None:
            return f"{money(self.hour, 1)} in the last hour"
        return f"{money(self.hour, 1)} since {self.hour_from.astimezone():%H:%M} (last hour and this)"

    def teams_status(self) -> str:
        """The three teams that cost most, for the status line ('' if none)."""
        top = sorted(self.teams.items(), key=lambda item: -(item[1][0] or 0))[:3]
        return " · ".join(f"{team} {money(cost[0], cost[2])}" for team, cost in top)


def _utc(text: Any) -> dt.datetime | None:
    """'2026-11-23 15:00:00' (UTC, as the store writes it) as an aware time; None if it is not one."""
    return utc_datetime(text)
