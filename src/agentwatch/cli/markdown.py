"""A session as a Markdown transcript (`agentwatch export --format md`): per session, its facts,
then each turn (one prompt's work: session_queries.session_turns) under a heading that names it,
with its tools, time, tokens and cost, and a table of its events; the events outside any turn
(a session's start and end, events of hooks without prompt ids) after them."""

from __future__ import annotations

import datetime as dt
from collections import defaultdict
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any, BinaryIO

from agentwatch.format import duration, money, one_line, tool_counts

if TYPE_CHECKING:
    from agentwatch.cli.sources import History
    from agentwatch.store.answer import Answer


def _time(value: Any) -> str:
    return value.strftime("%H:%M:%S") if isinstance(value, dt.datetime) else str(value or "")


def _cell(text: Any) -> str:
    return one_line(text, 300).replace("|", "\\|")


def turn_heading(number: int, turn: dict[str, Any]) -> str:
    prompt = one_line(turn.get("prompt"), 120) or "(no prompt: a message or a resumed turn)"
    return f"## Turn {number}: {prompt}"


def turn_facts(turn: dict[str, Any]) -> str:
    """One line of a turn's figures, as the session page shows them."""
    facts = [
        f"{_time(turn['started'])} UTC",
        f"wall {duration(turn['wall_ms'])}",
        f"{turn['tool_calls']} tool calls" + (f" ({tool_counts(turn['tools'])})" if turn["tools"] else ""),
        f"{turn['failed']} failed",
        f"tools took {duration(turn['tool_ms'])}",
        f"{turn['subagents']} subagents",
        f"{turn['messages']} messages",
        f"{int(turn['tokens']):,} tokens",
        money(turn["cost_usd"], int(turn["tokens"])) or "no cost read",
    ]
    return " · ".join(facts)


def _events_table(events: list[dict[str, Any]]) -> list[str]:
    lines = ["| time | agent | event | what |", "|---|---|---|---|"]
    for env in events:
        cells = (_time(env["timestamp"]), _cell(env["agent"]), _cell(env["event"]), _cell(env["text"]))
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def session_markdown(session: str, events: list[dict[str, Any]], turns: list[dict[str, Any]]) -> list[str]:
    """The transcript of one session: its heading and facts, its turns, the rest."""
    agents = sorted({str(e["agent"]) for e in events if e.get("agent")})
    first, last = events[0]["timestamp"], events[-1]["timestamp"]
    span = f"{first:%Y-%m-%d %H:%M:%S} to {last:%H:%M:%S} UTC" if isinstance(first, dt.datetime) else ""
    cost = sum(float(t["cost_usd"] or 0) for t in turns)
    tokens = sum(int(t["tokens"]) for t in turns)
    lines = [
        f"# Session {session or '(none)'}",
        "",
        f"{len(events):,} events · {len(turns)} turns · agents: {', '.join(agents) or 'none'} · {span}"
        + (f" · {tokens:,} tokens, {money(cost, tokens)} in its turns" if tokens else ""),
        "",
    ]
    by_turn: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for env in events:
        by_turn[str(env.get("prompt_id") or "")].append(env)
    for number, turn in enumerate(turns, 1):
        lines += [turn_heading(number, turn), "", turn_facts(turn), ""]
        lines += [*_events_table(by_turn.pop(str(turn["prompt_id"]), [])), ""]
    rest = sorted((e for group in by_turn.values() for e in group), key=lambda e: (e["timestamp"], e["id"]))
    if rest:
        lines += ["## Outside any turn", "", *_events_table(rest), ""]
    return lines


def write_markdown(
    history: History, answers: Iterator[Answer], out: BinaryIO, read: Callable[[int], None]
) -> int:
    """Every session of the export, one after the other (an export by time may hold many)."""
    from agentwatch.store import session_queries

    sessions: dict[str, list[dict[str, Any]]] = defaultdict(list)
    n = 0
    for answer in answers:
        for row in answer.dicts():
            sessions[str(row.get("session_id") or "")].append(row)
        n += len(answer.rows)
        read(len(answer.rows))
    for session, events in sessions.items():
        turns = history.query(*session_queries.session_turns(session)).dicts() if session else []
        out.write(("\n".join(session_markdown(session, events, turns)) + "\n").encode())
    return n
