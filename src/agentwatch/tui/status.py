"""The live view's text: its status line, by priority (what must be seen is never cut by what is
nice to see), and the roster's cells.

Segments come in priority order; `keep` ones (paused, open alerts, a bus or store that cannot be
reached) are always shown, first; the others follow while they fit the width, each whole or not
at all. No Textual here: rich Text in, rich Text out.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, NamedTuple

from rich.text import Text

from agentwatch.agents import DONE
from agentwatch.format import age
from agentwatch.harnesses import CLAUDE_CODE, SHORT, short_id
from agentwatch.tui.model import counted, sparkline
from agentwatch.tui.roster import Agent, Roster

if TYPE_CHECKING:
    from agentwatch.tui.alerts import Alerts
    from agentwatch.tui.common import Palette
    from agentwatch.tui.costs import Costs
    from agentwatch.tui.live import LiveState

# What an empty dashboard says: nothing has arrived, and how to make something arrive.
EMPTY_HINT = "no events yet: register the hook with `agentwatch hooks install`, or try `agentwatch demo`"

GAP = "   "


class Segment(NamedTuple):
    text: str
    style: str = ""
    keep: bool = False


def fit(segments: Sequence[Segment], width: int) -> Text:
    """The segments that fit `width` cells, in their order: every `keep` one, then the others as
    long as each fits whole in what is left."""
    used = sum(len(s.text) for s in segments if s.keep and s.text) + len(GAP) * max(
        0, sum(1 for s in segments if s.keep and s.text) - 1
    )
    chosen: list[Segment] = []
    for segment in segments:
        if not segment.text:
            continue
        if segment.keep:
            chosen.append(segment)
            continue
        cost = len(segment.text) + (len(GAP) if chosen or used else 0)
        if used + cost <= width:
            chosen.append(segment)
            used += cost
    line = Text(no_wrap=True, overflow="ellipsis")
    for n, segment in enumerate(chosen):
        if n:
            line.append(GAP)
        line.append(segment.text, style=segment.style)
    return line


def live_segments(state: LiveState, pal: Palette, now: float) -> list[Segment]:
    """The status line's parts, by priority: paused, open alerts and a bus or store that cannot be
    reached first (never cut), then the bus, the figures, the cost, the rest."""
    warn = f"bold {pal.status['running']}"
    folded = 0 if state.show_folded else state.roster.folded_count(now)
    alerts = state.alerts.status()
    figures = counted(state.roster.total, "agent") + (f" ({folded} folded: o)" if folded else "")
    figures += " · " + counted(state.events_total + state.unconfirmed.events, "event")
    return [
        Segment(f"PAUSED ({state.waiting} waiting)" if state.paused else "", warn, keep=True),
        Segment(f"{alerts} (!)" if alerts else "", f"bold {pal.error}", keep=True),
        Segment("" if state.bus_ok else f"○ {state.bus_text}", pal.error, keep=True),
        Segment("" if state.store_ok else state.store_text, pal.error, keep=True),
        Segment(f"● {state.bus_text}" if state.bus_ok else "", pal.good),
        Segment(figures, "dim"),
        Segment(EMPTY_HINT if not state.feed.total and state.history_done else "", warn),
        Segment(state.costs.status(), "dim"),
        Segment(state.costs.teams_status(), "dim"),
        Segment(state.store_text if state.store_ok else "", "dim"),
        Segment(f"sorted by {state.sort}", "dim"),
        Segment("follow off" if not state.follow else "", warn),
        Segment(f"{state.dropped} events dropped while behind" if state.dropped else "", warn),
        Segment(f"{state.unreadable} events skipped (unreadable)" if state.unreadable else "", warn),
    ]


def roster_cells(
    row: tuple[int, Agent], now: float, pal: Palette, costs: Costs, alerts: Alerts, columns: Sequence[str]
) -> list[Text | str]:
    """One roster row's cells, for `columns` (layout.ROSTER_COLUMNS' names)."""
    depth, agent = row
    cells: dict[str, Text | str] = {
        "agent": alerts.mark(agent.key)
        + "  " * depth
        + ("└ " if depth else "")
        + agent.name
        + harness_mark(agent),
        "team": team_label(agent),
        "state": Text(agent.state, style=pal.state.get(agent.state, "")),
        "tool": agent.tool if agent.state not in DONE else "",
        "for": age(agent.tool_running_for(now), unknown=""),
        "seen": age(now - agent.last_seen if agent.last_seen else None, unknown=""),
        "calls": str(agent.tool_calls),
        "err": Text(str(agent.errors), style=pal.error if agent.errors else ""),
        "msg": str(agent.messages),
        "cost": costs.own(agent.key),
        "+subs": costs.with_subagents(agent.key),
        "activity": sparkline(list(agent.activity)[-12:]),
    }
    return [cells[key] for key in columns]


def harness_mark(agent: Agent) -> str:
    """` ·codex`, ` ·gemini` after an agent another harness than Claude Code runs; nothing else."""
    if not agent.harness or agent.harness == CLAUDE_CODE:
        return ""
    return f" ·{SHORT.get(agent.harness, agent.harness)}"


def team_label(agent: Agent) -> str:
    """The agent's team, and its session's first characters where the team does not say which
    session it is (a named team runs many): two runs of one team are two rows that say so."""
    if not agent.team or agent.team == f"session-{short_id(agent.scope)}" or agent.scope == agent.team:
        return agent.team or short_id(agent.scope)
    return f"{agent.team}·{short_id(agent.scope)[:6]}"


def roster_title(roster: Roster, now: float, shown: bool) -> str:
    """The roster pane's title: how many agents are folded away, and the key that shows them."""
    folded = roster.folded_count(now)
    return "agents" if not folded else f"agents · {folded} folded ({'shown, ' if shown else ''}o)"
