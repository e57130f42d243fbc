"""`agentwatch hooks install|uninstall|print`: the command line of emitter/settings.py."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path

from agentwatch.cli.errors import CliError
from agentwatch.emitter.settings import (
    DEFAULT_SCOPE,
    DEFAULT_TIMEOUT,
    EMIT_NAME,
    SCOPES,
    SettingsError,
    default_command,
    install,
    settings_path,
    snippet,
    uninstall,
)
from agentwatch.emitter.telemetry import DEFAULT_ENDPOINT


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a whole number of seconds >= 1, got {text!r}")
    return value


def _report(action: Callable[[argparse.Namespace], str], args: argparse.Namespace) -> int:
    try:
        print(action(args))
    except SettingsError as exc:
        raise CliError(str(exc)) from None
    return 0


def _install_cmd(args: argparse.Namespace) -> int:
    return _report(
        lambda a: install(
            settings_path(a.scope, a.project_dir),
            a.emit_command or default_command(),
            timeout=a.timeout,
            async_=a.async_,
            dry_run=a.dry_run,
            otel=(a.otel_endpoint or DEFAULT_ENDPOINT) if a.otel or a.otel_endpoint else None,
        ),
        args,
    )


def _uninstall_cmd(args: argparse.Namespace) -> int:
    return _report(lambda a: uninstall(settings_path(a.scope, a.project_dir), dry_run=a.dry_run), args)


def _print_cmd(args: argparse.Namespace) -> int:
    return _report(
        lambda a: snippet(a.emit_command or default_command(), a.timeout, a.async_).rstrip("\n"), args
    )


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add `hooks install|uninstall|print` to the `agentwatch` command line."""
    hooks = subparsers.add_parser(
        "hooks",
        help="register agentwatch's hook in Claude Code settings",
        description="Write, remove or show agentwatch's hook registration in Claude Code settings files.",
    )
    actions = hooks.add_subparsers(dest="hooks_action", metavar="ACTION", required=True)

    where = argparse.ArgumentParser(add_help=False)
    where.add_argument(
        "--scope",
        choices=SCOPES,
        default=DEFAULT_SCOPE,
        help="user: ~/.claude/settings.json (or $CLAUDE_CONFIG_DIR); project: .claude/settings.json; "
        "local: .claude/settings.local.json (default: %(default)s)",
    )
    where.add_argument(
        "--project-dir",
        type=Path,
        default=None,
        metavar="DIR",
        help="project root for the project and local scopes (default: .)",
    )
    where.add_argument(
        "--dry-run", action="store_true", help="change nothing; show the diff that would apply"
    )

    handler = argparse.ArgumentParser(add_help=False)
    handler.add_argument(
        "--timeout",
        type=_positive_int,
        default=DEFAULT_TIMEOUT,
        metavar="SECONDS",
        help="hook timeout in seconds (default: %(default)s)",
    )
    handler.add_argument(
        "--async", dest="async_", action="store_true", help="let Claude Code run the hook in the background"
    )
    handler.add_argument(
        "--command",
        dest="emit_command",
        default=None,
        metavar="COMMAND",
        help=f"hook command, as a shell string whose first word is {EMIT_NAME} "
        f"(default: the {EMIT_NAME} installed with agentwatch)",
    )

    install_p = actions.add_parser(
        "install", parents=[where, handler], help="register the hook on every event (idempotent)"
    )
    install_p.add_argument(
        "--otel",
        action="store_true",
        help="also set Claude Code's OpenTelemetry variables in the settings' env, so it sends its own "
        f"telemetry to the collector's OTLP receiver ({DEFAULT_ENDPOINT}); uninstall removes them",
    )
    install_p.add_argument(
        "--otel-endpoint", metavar="URL", default=None, help="with --otel: the collector's OTLP/HTTP base URL"
    )
    install_p.set_defaults(func=_install_cmd)
    uninstall_p = actions.add_parser(
        "uninstall",
        parents=[where],
        help="remove agentwatch's hooks and telemetry settings, and nothing else (a file that install "
        "created is deleted)",
    )
    uninstall_p.set_defaults(func=_uninstall_cmd)
    print_p = actions.add_parser("print", parents=[handler], help="print the JSON that install would merge")
    print_p.set_defaults(func=_print_cmd)
