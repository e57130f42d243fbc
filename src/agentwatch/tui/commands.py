"""The dashboard's command palette entries (Ctrl+P): its views, help, and the busiest agents."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from textual.app import SystemCommand

from agentwatch.tui.model import counted

PALETTE_AGENTS = 100  # agents offered in the palette, busiest first


def system_commands(app: Any) -> Iterable[SystemCommand]:
    """`app` is the AgentwatchApp (typed loosely: that module imports this one)."""
    yield SystemCommand("Live view", "The roster of agents and the event feed", app.action_live)
    yield SystemCommand("Team view", "Who messaged whom, tasks, idle teammates", app.action_team)
    yield SystemCommand(
        "Tools and history", "Per-tool durations and failure rates, sessions (SQL)", app.action_tools
    )
    yield SystemCommand(
        "Alerts", "Open and recent alerts of the watchdog; Enter: the agent", app.action_alerts
    )
    yield SystemCommand(
        "Sessions", "Every session: its turns, events, agents, alerts, replay", app.action_sessions
    )
    yield SystemCommand(
        "Search", "A word, an error, a file or a command in the whole history", app.action_search
    )
    yield SystemCommand(
        "Cost", "Burn rate; cost by agent, team, model, day; the costliest turns", app.action_cost
    )
    yield SystemCommand("Help", "Keys and what the columns mean", app.action_help)
    for _, agent in app.state.roster.ordered(app.state.sort)[:PALETTE_AGENTS]:
        yield SystemCommand(
            f"Agent: {agent.name} ({agent.team or agent.scope[:8]})",
            f"{agent.state} · {counted(agent.tool_calls, 'call')} · {counted(agent.errors, 'error')}",
            lambda key=agent.key: app.show_agent(key),
        )
