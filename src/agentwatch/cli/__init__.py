"""The `agentwatch` command: one entry point for every part a person runs by hand.

Each command lives in its own module here, registers its own arguments, and stops with a
CliError whose message says what to do; `main` is the one place that prints it. This package is
the only one that parses arguments, and nothing else in agentwatch imports it.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from agentwatch import __version__
from agentwatch.cli import (
    alerts,
    ask,
    cost,
    coverage,
    demo,
    doctor,
    export,
    hooks,
    importer,
    otel,
    pipeline,
    search,
    spool,
    sql,
    status,
    tui,
    web,
)
from agentwatch.cli.errors import CliError


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="agentwatch",
        description="Observability for teams of AI coding agents (Claude Code, Codex CLI, Gemini CLI): "
        "their hooks' events and token usage on a NATS bus, stored in ClickHouse, with a live dashboard, "
        "SQL, costs, search, exports and alerts. With no command, the live dashboard.",
    )
    parser.add_argument("--version", action="version", version=f"agentwatch {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for command in (
        pipeline,
        sql,
        status,
        coverage,
        cost,
        search,
        export,
        alerts,
        otel,
        ask,
        importer,
        tui,
        web,
        demo,
        hooks,
        spool,
        doctor,
    ):
        command.register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command; returns its exit status (the console script exits with it)."""
    parser = build_parser()
    args = parser.parse_args(argv)
    func = getattr(args, "func", None)
    if func is None:
        if args.command is not None:
            parser.print_help()
            return 0
        func = tui.cmd_tui
    try:
        code: int = func(args)
    except CliError as exc:
        print(f"agentwatch: {exc}", file=sys.stderr)
        return exc.code
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        # `agentwatch status | head -3`: the reader left; say nothing, and keep Python from
        # complaining again when it flushes stdout at exit.
        import os

        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141
    return code
