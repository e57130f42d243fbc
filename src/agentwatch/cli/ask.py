"""`agentwatch mcp`: the MCP server agents ask about their team (stdio), on the read side.

`claude mcp add agentwatch -- agentwatch mcp` registers it with Claude Code (docs/integrations.md has Codex
CLI's and Gemini CLI's equivalents). It reads through the same `History` as the dashboard and
`agentwatch sql`, one connection for its life: the query service of a running `agentwatch up`,
or a ClickHouse server's read-only user.
"""

from __future__ import annotations

import argparse
import json
import sys

from agentwatch.cli.errors import missing_extra, require


def cmd_mcp(args: argparse.Namespace) -> int:
    require("mcp", "mcp", "mcp", "nats", "orjson")
    if args.list_tools:
        from agentwatch.ask import tools

        listed = tools.tool_list()
        print(json.dumps(listed, indent=2, ensure_ascii=False))
        size = tools.schema_bytes(listed)
        print(f"{len(listed)} tools, {size:,} bytes of schema (~{size // 4} tokens)", file=sys.stderr)
        return 0
    try:
        from agentwatch.ask.server import serve
        from agentwatch.cli.sources import History
    except ImportError as exc:
        raise missing_extra(exc, "mcp", "mcp") from None
    history = History()
    try:
        serve(history)
    finally:
        history.close()
    return 0


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    mcp = sub.add_parser(
        "mcp",
        help="the MCP server agents ask (stdio): roster, cost, alerts, timeline, SQL, coverage",
        description="An MCP server over stdio for coding agents: six read-only tools over the store "
        "(roster, cost, alerts, timeline, sql, coverage). Register it with "
        "`claude mcp add agentwatch -- agentwatch mcp`.",
    )
    mcp.add_argument(
        "--list-tools", action="store_true", help="print the tools' schemas as JSON and their size, then exit"
    )
    mcp.set_defaults(func=cmd_mcp)
