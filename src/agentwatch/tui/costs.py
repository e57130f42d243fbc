"""What the agents cost, as the dashboard shows it: per agent (its own, and with its subagents),
per team, and the last hour. No Textual here: the app asks the store (queries.DASHBOARD_COSTS),
hands the rows in, and reads cells and status-line words back.

The dollars come from the store, which prices the token usage the hooks read from Claude Code's
transcripts; the dashboard asks again every few seconds, and soon after usage arrives on the bus.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from agentwatch.format import money

# (own cost, with its subagents', tokens, API calls with no known price)
Cost = tuple[float | None, float | None, int, int]
NONE: Cost = (None, None, 0, 0)


class Costs:
    """The latest answer of the store about costs."""

    def __init__(self) -> None:
        self.agents: dict[str, Cost] = {}
        self.teams: dict[str, Cost] = {}
        self.hour: float | None = None

    def update(self, rows: Iterable[Sequence[Any]]) -> None:
        """Rows of queries.DASHBOARD_COSTS: (what, name, usd, usd with subagents, tokens, unpriced)."""
        agents: dict[str, Cost] = {}
        teams: dict[str, Cost] = {}
        hour = None
        for what, name, usd, with_subs, tokens, unpriced in rows:
            entry: Cost = (usd, with_subs, int(tokens or 0), int(unpriced or 0))
            if what == "agent":
                agents[str(name)] = entry
            elif what == "team":
                teams[str(name)] = entry
            elif what == "hour":
                hour = usd
        self.agents, self.teams, self.hour = agents, teams, hour

    def own(self, agent: str) -> str:
        """The agent's own cost: '$0.42', 'unpriced', or '' when nothing is known."""
        usd, _, tokens, _ = self.agents.get(agent, NONE)
        return money(usd, tokens)

    def with_subagents(self, agent: str) -> str:
        """The agent's cost with its subagents', where they add something."""
        own, with_subs, tokens, _ = self.agents.get(agent, NONE)
        if with_subs is None or own is None or with_subs <= own + 0.005:
            return ""
        return money(with_subs, tokens)

    def status(self) -> str:
        """The last hour's cost and the teams that cost most, for the status line ('' if none)."""
        words = []
        if self.hour is not None:
            words.append(f"{money(self.hour, 1)} in the last hour")
        top = sorted(self.teams.items(), key=lambda item: -(item[1][0] or 0))[:3]
        words += [f"{team} {money(cost[0], cost[2])}" for team, cost in top]
        return " · ".join(words)
