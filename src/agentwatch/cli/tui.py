"""`agentwatch` / `agentwatch tui`: the live dashboard, on the bus and store of this configuration."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Mapping
from typing import Any

from agentwatch.cli.errors import missing_extra, require


def open_dashboard(environ: Mapping[str, str] = os.environ) -> int:
    """Run the dashboard until the person quits it, or SIGTERM or SIGHUP ends it (within a second,
    whatever it is doing: `tui/drivers.py`); its exit code."""
    try:
        from agentwatch.cli.sources import dashboard_sources
        from agentwatch.tui.app import AgentwatchApp

        live, history = dashboard_sources(environ)
    except ImportError as exc:
        raise missing_extra(exc, "tui", "tui") from None
    from agentwatch.config import lost_after_s

    app = AgentwatchApp(
        live,
        history,
        theme=environ.get("AGENTWATCH_THEME", "").strip() or None,
        lost_after_s=lost_after_s(environ),
    )
    app.hosts = lambda: _host_rows(environ)
    if sys.platform != "win32":  # Textual's drivers there are others
        from agentwatch.tui.drivers import ending_driver

        app.driver_class = ending_driver(environ) or app.driver_class
    try:
        app.run()
    finally:
        history.close()
    return app.return_code or 0


def _host_rows(environ: Mapping[str, str]) -> list[dict[str, Any]]:
    """The hosts view's rows: `agentwatch hosts --json`'s (asked of the bus and the store)."""
    from agentwatch.cli.hosts import host_rows

    return host_rows(dict(environ))


def cmd_tui(_args: argparse.Namespace) -> int:
    require("tui", "tui", "textual", "nats", "orjson")
    return open_dashboard()


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    tui = sub.add_parser(
        "tui",
        help="the live dashboard (also: agentwatch with no command)",
        description="The live dashboard: agents, their activity and history, from the bus and the store.",
    )
    tui.set_defaults(func=cmd_tui)
