"""`agentwatch alerts`: the watchdog's alerts (open and recent), and `alerts run`, the watchdog alone.

`agentwatch up` and `agentwatch store` run the watchdog beside the store; `agentwatch alerts run`
runs it by itself against a fleet's bus and ClickHouse (its rules: AGENTWATCH_ALERTS_FILE).
"""

from __future__ import annotations

import argparse
import os
import time
from typing import Any

from agentwatch import config
from agentwatch.cli.errors import CliError, missing_extra, require
from agentwatch.format import truncate


def lines(rows: list[dict[str, Any]]) -> list[str]:
    """One line per alert change: when, state, severity, rule, who, summary."""
    out = []
    for row in rows:
        who = row.get("agent") or row.get("team") or row.get("session_id") or row.get("host") or "-"
        at = f"{row['at']:%Y-%m-%d %H:%M:%S}" if row.get("at") else ""
        out.append(
            f"{at}  {row.get('state', ''):<8} {row.get('severity', ''):<8} {row.get('rule', ''):<20} "
            f"{truncate(str(who), 24):<24} {row.get('summary', '')}"
        )
    return out


def cmd_alerts(args: argparse.Namespace) -> int:
    require("alerts", "tui", "nats", "orjson")
    from agentwatch.cli.cost import parse_since
    from agentwatch.cli.sql import run_sql
    from agentwatch.store import queries

    since = parse_since(args.since) if args.since else queries.EPOCH
    query = queries.alerts(open_only=args.open, since=since, limit=args.limit)
    rows = run_sql(query.sql, params=query.params).dicts()
    if not rows:
        print("no open alerts" if args.open else "no alerts")
        return 0
    for line in lines(rows):
        print(line)
    return 0


def cmd_alerts_run(args: argparse.Namespace) -> int:
    require("alerts run", "consumers", "faststream", "chdb")
    from agentwatch.cli.pipeline import hold_embedded_store, require_bus, require_clickhouse

    try:
        from agentwatch.consumers.app import CollectorError, run
    except ImportError as exc:
        raise missing_extra(exc, "alerts run", "consumers") from None
    url = config.nats_url(os.environ)
    require_bus(url)
    require_clickhouse(os.environ)
    hold_embedded_store(os.environ, "alerts run")
    try:
        run(
            url,
            os.environ,
            banner=[f"agentwatch alerts run on {config.display_urls(url)}"],
            verbose=args.verbose,
            started_at=time.monotonic(),
            store=False,
        )
    except CollectorError as exc:
        raise CliError(str(exc)) from None
    return 0


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    alerts = sub.add_parser(
        "alerts",
        help="the watchdog's alerts: open and recent; `alerts run` runs the watchdog alone",
        description="Alerts raised by the watchdog (stuck tools, loops, failure bursts, silent or idle "
        "agents, unanswered permissions, budgets, hook health), newest first.",
    )
    alerts.add_argument("--open", action="store_true", help="only the alerts firing now")
    alerts.add_argument(
        "--since", metavar="WHEN", help="only changes since: 30m, 12h, 7d, today, or a date (UTC)"
    )
    alerts.add_argument("--limit", type=int, default=50, help="rows to list (default 50)")
    alerts.set_defaults(func=cmd_alerts)
    actions = alerts.add_subparsers(dest="alerts_command", metavar="ACTION")
    run = actions.add_parser(
        "run",
        help="run the watchdog alone against an existing bus and ClickHouse (a fleet)",
        description="Run the watchdog by itself: it follows the GENIE stream and publishes alerts on "
        "agentwatch.alert.>, keeping them in ClickHouse (AGENTWATCH_CLICKHOUSE_URL).",
    )
    run.add_argument("-v", "--verbose", action="store_true", help="log more")
    run.set_defaults(func=cmd_alerts_run)
