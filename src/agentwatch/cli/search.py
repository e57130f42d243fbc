"""`agentwatch search TEXT`: where a word, an error, a file or a command occurs in the history.

Every event's one-line text and its payload are indexed by word (store/schema/015_search.sql):
every word of TEXT must occur as a whole word (in any case), and TEXT itself must occur as typed
(in any case). The newest events first, each with its session, so `agentwatch export --session`
or the dashboard's session page can follow.
"""

from __future__ import annotations

import argparse
import datetime as dt
from typing import Any

from agentwatch.cli.errors import CliError, require
from agentwatch.cli.sessions import resolve_session
from agentwatch.format import truncate
from agentwatch.harnesses import short_id

# (header, column, width) of the table.
COLUMNS = (
    ("time (UTC)", "timestamp", 19),
    ("session", "session_id", 8),
    ("agent", "agent", 20),
    ("event", "event", 18),
)


def lines(rows: list[dict[str, Any]], width: int = 160) -> list[str]:
    """The results as a table: time, session (its short id), agent, event, and what
    matched (the event's line, else the payload around the match)."""
    fixed = sum(w + 2 for _, _, w in COLUMNS)
    out = ["  ".join(h.ljust(w) for h, _, w in COLUMNS) + "  match"]
    for row in rows:
        cells = []
        for _, column, w in COLUMNS:
            value = row.get(column)
            text = f"{value:%Y-%m-%d %H:%M:%S}" if isinstance(value, dt.datetime) else str(value or "")
            if column == "session_id":  # the part `--session` takes that tells sessions apart
                text = short_id(text)
            cells.append(truncate(text, w).ljust(w))
        match = str(row.get("text") or "")
        if row.get("excerpt"):
            match = f"{match}  payload: …{' '.join(str(row['excerpt']).split())}…"
        out.append("  ".join(cells) + "  " + truncate(match, max(20, width - fixed)))
    return out


def cmd_search(args: argparse.Namespace) -> int:
    require("search", "tui", "nats", "orjson")
    from agentwatch.cli.cost import parse_since
    from agentwatch.cli.sql import render, run_sql
    from agentwatch.store import queries, session_queries

    if not session_queries.searchable(args.text):
        raise CliError(f"nothing to search for in {args.text!r}: give a word (letters or digits)")
    since = parse_since(args.since) if args.since else queries.EPOCH
    session = resolve_session(args.session or "")
    query = session_queries.search(
        args.text, since, args.agent or "", session, args.limit, args.person, args.repo
    )
    answer = run_sql(query.sql, params=query.params)
    if args.format != "table":
        render(answer, args.format)
        return 0
    if not answer.rows:
        print(f"no event holds {args.text!r}" + (f" since {since} UTC" if args.since else ""))
        return 0
    for line in lines(answer.dicts()):
        print(line)
    shown = len(answer.rows)
    more = " (the newest; --limit for more)" if shown >= args.limit else ""
    print(f"({shown} event{'s' if shown != 1 else ''}{more}, {answer.elapsed_ms} ms)")
    return 0


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    search = sub.add_parser(
        "search",
        help="find a word, error, file or command in the whole history: agentwatch search TEXT",
        description="The events whose text or payload holds TEXT, newest first. Every word of TEXT "
        "must occur as a whole word, in any case, and TEXT as typed (in any case): `make test`, "
        "`src/app.py`, `PaymentError`. Backed by a text index: a rare word is found in milliseconds "
        "at any size of history.",
    )
    search.add_argument("text", help="what to look for")
    search.add_argument(
        "--since", metavar="WHEN", help="only events since: 30m, 12h, 7d, 2w, today, or a date (UTC)"
    )
    search.add_argument("--agent", metavar="NAME", help="only this agent's events")
    search.add_argument(
        "--session", metavar="ID", help="only this session's events (its id or a unique part of it)"
    )
    search.add_argument("--person", default="", help="only events of this person's sessions")
    search.add_argument("--repo", default="", help="only events in this repository (host/owner/name)")
    search.add_argument("--limit", type=int, default=50, help="events to list at most (default 50)")
    search.add_argument("--format", choices=("table", "csv", "json", "jsonl"), default="table")
    search.set_defaults(func=cmd_search)
