"""`agentwatch` / `agentwatch tui`: the live dashboard, on the bus and store of this configuration."""

from __future__ import annotations

import argparse
import os
from collections.abc import Mapping

from agentwatch.cli.errors import missing_extra, require


def open_dashboard(environ: Mapping[str, str] = os.environ) -> None:
    """Run the dashboard until the person quits it."""
    try:
        from agentwatch.cli.sources import dashboard_sources
        from agentwatch.tui.app import run

        live, history = dashboard_sources(environ)
    except ImportError as exc:
        raise missing_extra(exc, "tui", "tui") from None
    from agentwatch.agents import LOST_AFTER_S
    from agentwatch.config import number

    try:
        run(
            live,
            history,
            theme=environ.get("AGENTWATCH_THEME", "").strip() or None,
            lost_after_s=number(environ, "AGENTWATCH_LOST_AFTER_S", LOST_AFTER_S),
        )
    finally:
        history.close()


def cmd_tui(_args: argparse.Namespace) -> int:
    require("tui", "tui", "textual", "nats", "orjson")
    open_dashboard()
    return 0


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    tui = sub.add_parser(
        "tui",
        help="the live dashboard (also: agentwatch with no command)",
        description="The live dashboard: agents, their activity and history, from the bus and the store.",
    )
    tui.set_defaults(func=cmd_tui)
