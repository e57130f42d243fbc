"""`agentwatch cost`: tokens and dollars per session, agent, team, model, day, harness, person,
repository or branch, with totals.

The numbers come from the store's `usage` table (one row per API message, priced by the store)
and, per session, from Claude Code's own running total (`cost_states`) beside agentwatch's. A
model the price table does not know is "unpriced": its tokens count, its cost is not guessed.
"""

from __future__ import annotations

import argparse
import datetime as dt
from typing import Any

from agentwatch.cli.errors import CliError, require
from agentwatch.format import truncate, utc_datetime

BY = ("session", "agent", "team", "model", "day", "harness", "person", "repo", "branch")
TOKENS = (
    ("calls", "api_calls"),
    ("input", "input_tokens"),
    ("output", "output_tokens"),
    ("cache read", "cache_read_tokens"),
    ("write 5m", "cache_write_5m_tokens"),
    ("write 1h", "cache_write_1h_tokens"),
)
# What each grouping shows before the counts: (header, column, width).
KEYS: dict[str, tuple[tuple[str, str, int], ...]] = {
    "session": (("session", "session_id", 36), ("agent", "agent", 24), ("team", "team", 20)),
    "agent": (("agent", "agent", 28), ("parent", "parent_agent", 20), ("team", "team", 20)),
    "team": (("team", "team", 32),),
    "model": (("model", "model", 36),),
    "day": (("day (UTC)", "day", 10),),
    "harness": (
        ("harness", "harness", 12),
        ("sessions", "sessions", 8),
        ("reasoning", "reasoning_tokens", 12),
    ),
    "person": (("person", "person", 36), ("sessions", "sessions", 8)),
    "repo": (("repository", "repo", 40), ("sessions", "sessions", 8)),
    "branch": (("branch", "branch", 32), ("sessions", "sessions", 8)),
}
_UNITS = {"m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}


def parse_since(text: str, now: dt.datetime | None = None) -> str:
    """`7d`, `12h`, `30m`, `2w` ago, `today` (UTC), or a date or time (ISO, UTC unless it says) as
    ClickHouse's DateTime64(3) parameter text, in UTC."""
    now = now or dt.datetime.now(dt.UTC)
    text = text.strip()
    when: dt.datetime
    if text == "today":
        when = now.replace(hour=0, minute=0, second=0, microsecond=0)
    elif text[:-1].isdigit() and text[-1:] in _UNITS:
        when = now - dt.timedelta(seconds=int(text[:-1]) * _UNITS[text[-1]])
    else:
        parsed = utc_datetime(text)
        if parsed is None:
            raise CliError(
                f"--since {text!r}: give a duration (30m, 12h, 7d, 2w), `today`, or a date or time "
                "(2026-11-01, 2026-11-01T09:00)"
            )
        when = parsed
    return when.strftime("%Y-%m-%d %H:%M:%S.") + f"{when.microsecond // 1000:03d}"


def money(cost: Any, unpriced: Any = 0) -> str:
    """$ with four decimals; `unpriced` when nothing could be priced, a `*` when part could not."""
    if cost is None:
        return "unpriced"
    return f"${float(cost):,.4f}" + ("*" if unpriced else "")


def _cell(row: dict[str, Any], column: str, width: int) -> str:
    value = row.get(column)
    return truncate("" if value is None else str(value), width)


def table(by: str, rows: list[dict[str, Any]]) -> list[str]:
    """The lines of the table of `rows` grouped `by`."""
    keys = KEYS[by]
    headers = [h for h, _, _ in keys] + [h for h, _ in TOKENS] + ["cost"]
    if by == "session":
        headers.append("claude code")
    lines = [headers]
    for row in rows:
        line = [_cell(row, column, width) for _, column, width in keys]
        line += [f"{int(row[column] or 0):,}" for _, column in TOKENS]
        line.append(money(row["cost_usd"], row["unpriced_calls"]))
        if by == "session":
            claude = row.get("claude_cost_usd")
            line.append("-" if claude is None else money(claude))
        lines.append(line)
    widths = [max(len(line[i]) for line in lines) for i in range(len(headers))]
    text = []
    for n, line in enumerate(lines):
        cells = [
            cell.ljust(w) if i < len(keys) else cell.rjust(w)
            for i, (cell, w) in enumerate(zip(line, widths, strict=True))
        ]
        text.append("  ".join(cells).rstrip())
        if n == 0:
            text.append("  ".join("-" * w for w in widths))
    return text


def totals(total: dict[str, Any], since: str | None) -> list[str]:
    n = {k: int(v or 0) for k, v in total.items() if k.endswith(("_tokens", "_calls", "sessions"))}
    window = f" since {since} UTC" if since else ""
    lines = [
        f"total{window}: {n['api_calls']:,} API calls in {n['sessions']:,} sessions, "
        f"{n['input_tokens']:,} input, {n['output_tokens']:,} output, {n['cache_read_tokens']:,} cache read, "
        f"{n['cache_write_5m_tokens']:,} + {n['cache_write_1h_tokens']:,} cache write (5m + 1h) tokens: "
        f"{money(total['cost_usd'], total['unpriced_calls'])}",
    ]
    claude = total.get("claude_cost_usd")
    if claude:
        lines.append(f"Claude Code's own total for these sessions: {money(claude)}")
    if total["unpriced_calls"]:
        lines.append(
            f"* {int(total['unpriced_calls']):,} API calls of models the price table does not know are "
            "counted in tokens, not in dollars"
        )
    return lines


def cmd_cost(args: argparse.Namespace) -> int:
    require("cost", "tui", "nats", "orjson")
    from agentwatch.cli.sql import run_sql
    from agentwatch.store import queries

    # The cost rollups are hourly: a window starts at the start of the hour that holds --since.
    since = parse_since(args.since)[:13] + ":00:00.000" if args.since else None
    if (args.person or args.repo) and args.by not in queries.OWNER_BY:
        raise CliError(f"--person and --repo work with --by {'|'.join(queries.OWNER_BY)}, not {args.by}")
    query = queries.cost(args.by, since or queries.EPOCH, args.limit, args.person, args.repo)
    total_query = queries.cost_total(since or queries.EPOCH, args.person, args.repo)
    rows = run_sql(query.sql, params=query.params).dicts()
    total = run_sql(total_query.sql, params=total_query.params).first()
    if not rows and not total.get("api_calls") and (args.person or args.repo):
        print("no API calls of that person or repository: `agentwatch cost --by person` lists people")
        return 0
    if not rows and not total.get("api_calls"):
        print(_nothing(args, since, run_sql))
        return 0
    for line in table(args.by, rows):
        print(line)
    print()
    for line in totals(total, since):
        print(line)
    groups = int(total.get("sessions") or 0) if args.by == "session" else None
    if len(rows) >= args.limit and (groups is None or groups > len(rows)):
        counted = f" of {groups:,}" if groups is not None else ""
        print(f"({len(rows):,}{counted} {_PLURAL[args.by]} listed: --limit for more)")
    return 0


_PLURAL = {"session": "sessions", "agent": "agents", "team": "teams", "model": "models", "day": "days",
           "harness": "harnesses", "person": "people", "repo": "repositories",
           "branch": "branches"}  # fmt: skip


def _nothing(args: argparse.Namespace, since: str | None, run_sql: Any) -> str:
    """Why the table is empty: nothing stored at all, or nothing in this window or for this owner."""
    from agentwatch.store import queries

    if since is None and not (args.person or args.repo):
        return "no token usage stored yet: it arrives with the hook's Stop events, or run `agentwatch import`"
    everything = queries.cost_total()
    stored = int(run_sql(everything.sql, params=everything.params).first().get("api_calls") or 0)
    if not stored:
        return "no token usage stored yet: it arrives with the hook's Stop events, or run `agentwatch import`"
    owner = " ".join(f"{k} {v!r}" for k, v in (("of", args.person), ("in", args.repo)) if v)
    window = f" since {since} UTC" if since else ""
    return f"no API calls {owner + ' ' if owner else ''}stored{window}; {stored:,} stored in all"


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    cost = sub.add_parser(
        "cost",
        help="tokens and dollars per session, agent, team, model, day, harness, person, repository or "
        "branch, with totals",
        description="Tokens and dollars from the agents' transcripts (read by the hook at the end of each "
        "piece of work, or by `agentwatch import`), priced by the store at the price of the day. "
        "Per session, Claude Code's own total is shown beside.",
    )
    cost.add_argument("--by", choices=BY, default="session", help="how to group (default: session)")
    cost.add_argument(
        "--since",
        metavar="WHEN",
        help="only API calls since: 30m, 12h, 7d, 2w, today, or a date (UTC), from the start of that hour",
    )
    cost.add_argument(
        "--person", default="", help="only this person's API calls or sessions (as `--by person` shows it)"
    )
    cost.add_argument(
        "--repo", default="", help="only this repository's API calls or sessions (host/owner/name)"
    )
    cost.add_argument("--limit", type=int, default=50, help="rows to list (default 50)")
    cost.set_defaults(func=cmd_cost)
