"""`agentwatch hooks install|uninstall|print`: the command line of emitter/settings.py (Claude Code)
and emitter/registration.py (Codex CLI, Gemini CLI)."""

from __future__ import annotations

import argparse
from collections.abc import Callable, Mapping
from pathlib import Path

from agentwatch.cli.errors import CliError
from agentwatch.emitter.registration import (
    codex_hooks_path,
    found_harnesses,
    gemini_settings_path,
    install_codex,
    install_gemini,
    uninstall_codex,
    uninstall_gemini,
)
from agentwatch.emitter.registration import snippet as harness_snippet
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
from agentwatch.harnesses import CLAUDE_CODE, CODEX, GEMINI_CLI, HARNESSES, LABELS, harness_named


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


def chosen(args: argparse.Namespace, default: list[str]) -> list[str]:
    """The harnesses a command acts on: --harness (`all`: every one), else `default`."""
    if args.harness is None:
        return default
    return list(HARNESSES) if args.harness == "all" else [harness_named(args.harness)]


def _default_harnesses(args: argparse.Namespace) -> list[str]:
    # A project or local scope is Claude Code's: the others are registered for the user.
    return [CLAUDE_CODE] if args.scope != DEFAULT_SCOPE else found_harnesses()


def otel_endpoint(args: argparse.Namespace, environ: Mapping[str, str]) -> str | None:
    """Where Claude Code is to send its telemetry: --otel-endpoint, else the receiver `up` serves
    (AGENTWATCH_OTLP_ADDR, else the default); None without --otel."""
    if not (args.otel or args.otel_endpoint):
        return None
    if args.otel_endpoint:
        return str(args.otel_endpoint)
    addr = environ.get("AGENTWATCH_OTLP_ADDR", "").strip()
    return f"http://{addr}" if addr and addr.lower() != "off" else DEFAULT_ENDPOINT


def check_otel_receiver(endpoint: str, timeout: float = 2.0) -> str:
    """A note on who answers at `endpoint`: agentwatch's OTLP receiver (''), or nothing yet; CliError
    when another program holds it (Claude Code would send its telemetry there)."""
    import http.client
    import urllib.error
    import urllib.request

    try:
        with urllib.request.urlopen(endpoint.rstrip("/") + "/v1/logs", timeout=timeout) as answer:  # noqa: S310
            server = answer.headers.get("Server", "")
    except urllib.error.HTTPError as exc:  # our receiver answers a GET with 405
        server = exc.headers.get("Server", "") if exc.headers else ""
    except (urllib.error.URLError, http.client.HTTPException, OSError) as exc:
        reason = getattr(exc, "reason", exc)
        if isinstance(reason, ConnectionRefusedError):
            return f"nothing listens at {endpoint} yet: `agentwatch up` serves it (AGENTWATCH_OTLP_ADDR)"
        server = f"not an HTTP server that answers ({reason})"
    if server.startswith("agentwatch-otlp"):
        return ""
    raise CliError(
        f"{endpoint} is held by another program ({server or 'no Server header'}), not agentwatch's "
        "OTLP receiver: Claude Code's telemetry would go there. Stop it, or run `agentwatch up` with "
        "AGENTWATCH_OTLP_ADDR=127.0.0.1:PORT and install with that setting (or --otel-endpoint)"
    )


def _claude_install(args: argparse.Namespace) -> str:
    import os

    endpoint = otel_endpoint(args, os.environ)
    note = check_otel_receiver(endpoint) if endpoint and not args.dry_run else ""
    line = install(
        settings_path(args.scope, args.project_dir),
        args.emit_command or default_command(),
        timeout=args.timeout,
        async_=args.async_,
        dry_run=args.dry_run,
        otel=endpoint,
    )
    if args.dry_run:
        return line
    return f"{LABELS[CLAUDE_CODE]}: {line}" + (f"\n  {note}" if note else "")


def _install_cmd(args: argparse.Namespace) -> int:
    harnesses = chosen(args, _default_harnesses(args))
    _scoped(args, harnesses)
    lines: list[str] = []
    try:
        for harness in harnesses:
            if harness == CLAUDE_CODE:
                lines.append(_claude_install(args))
                continue
            command = args.emit_command or default_command()
            if harness == CODEX:
                lines += install_codex(command, args.timeout, args.dry_run, args.codex).lines
            else:
                lines += install_gemini(command, args.timeout, args.dry_run).lines
    except SettingsError as exc:
        print("\n".join(lines)) if lines else None
        raise CliError(str(exc)) from None
    print("\n".join(lines))
    return 0


def _scoped(args: argparse.Namespace, harnesses: list[str]) -> None:
    if args.scope != DEFAULT_SCOPE and harnesses != [CLAUDE_CODE]:
        raise CliError(f"--scope {args.scope} is Claude Code's: leave it out, or add --harness claude")


def _uninstall_cmd(args: argparse.Namespace) -> int:
    harnesses = chosen(args, _default_harnesses(args))
    _scoped(args, harnesses)
    lines: list[str] = []
    try:
        for harness in harnesses:
            if harness == CLAUDE_CODE:
                line = uninstall(settings_path(args.scope, args.project_dir), dry_run=args.dry_run)
                lines.append(line if args.dry_run else f"{LABELS[CLAUDE_CODE]}: {line}")
            elif harness == CODEX:
                lines += uninstall_codex(args.dry_run).lines
            else:
                lines += uninstall_gemini(args.dry_run).lines
    except SettingsError as exc:
        print("\n".join(lines)) if lines else None
        raise CliError(str(exc)) from None
    print("\n".join(lines))
    return 0


def _print_cmd(args: argparse.Namespace) -> int:
    """The JSON install would merge: Claude Code's unless --harness says otherwise; with several,
    each after a line naming its harness and file."""
    harnesses = chosen(args, [CLAUDE_CODE])
    where = {CLAUDE_CODE: settings_path(), CODEX: codex_hooks_path(), GEMINI_CLI: gemini_settings_path()}
    out = []
    try:
        for harness in harnesses:
            command = args.emit_command or default_command()
            if harness == CLAUDE_CODE:
                text = snippet(command, args.timeout, args.async_)
            else:
                text = harness_snippet(harness, command, args.timeout)
            head = f"# {LABELS[harness]}: {where[harness]}\n" if len(harnesses) > 1 else ""
            out.append(head + text.rstrip("\n"))
    except SettingsError as exc:
        raise CliError(str(exc)) from None
    print("\n".join(out))
    return 0


def _common_options() -> tuple[argparse.ArgumentParser, argparse.ArgumentParser, argparse.ArgumentParser]:
    """The options the actions share: where (Claude Code's scope, dry run), which harness, and the
    handler (timeout, async, command)."""
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
    which = argparse.ArgumentParser(add_help=False)
    which.add_argument(
        "--harness",
        choices=("claude", "codex", "gemini", "all"),
        default=None,
        help="the coding agent: Claude Code (~/.claude/settings.json), Codex CLI ($CODEX_HOME/hooks.json, "
        "each hook trusted in its config.toml), Gemini CLI (~/.gemini/settings.json), or all three "
        "(default: every one found on this machine; `print`: claude)",
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

    return where, which, handler


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add `hooks install|uninstall|print` to the `agentwatch` command line."""
    hooks = subparsers.add_parser(
        "hooks",
        help="register agentwatch's hook with Claude Code, Codex CLI and Gemini CLI",
        description="Write, remove or show agentwatch's hook registration in the coding agents' own files: "
        "Claude Code's settings.json, Codex CLI's hooks.json (and the hooks' trust in its config.toml), "
        "Gemini CLI's settings.json.",
    )
    actions = hooks.add_subparsers(dest="hooks_action", metavar="ACTION", required=True)

    where, which, handler = _common_options()
    install_p = actions.add_parser(
        "install",
        parents=[where, which, handler],
        help="register the hook on every event (idempotent)",
        description="Register agentwatch's hook on every event in the agents' own settings (Claude Code's "
        "settings.json, Codex's hooks.json, Gemini CLI's settings.json), keeping everything else in them; "
        "running it again changes nothing.",
    )
    install_p.add_argument(
        "--codex",
        metavar="PATH",
        default=None,
        help="the codex binary that says the hashes to trust (default: codex on PATH)",
    )
    install_p.add_argument(
        "--otel",
        action="store_true",
        help="also set Claude Code's OpenTelemetry variables in the settings' env, so it sends its own "
        f"telemetry to the collector's OTLP receiver (AGENTWATCH_OTLP_ADDR, default {DEFAULT_ENDPOINT}), "
        "checked to be agentwatch's; uninstall removes them",
    )
    install_p.add_argument(
        "--otel-endpoint", metavar="URL", default=None, help="with --otel: the collector's OTLP/HTTP base URL"
    )
    install_p.set_defaults(func=_install_cmd)
    uninstall_p = actions.add_parser(
        "uninstall",
        parents=[where, which],
        help="remove agentwatch's hooks and telemetry settings, and nothing else (a file that install "
        "created is deleted)",
        description="Remove agentwatch's hooks and telemetry settings from the agents' settings and nothing "
        "else: a file install created is deleted, a file it found is left as it was before.",
    )
    uninstall_p.set_defaults(func=_uninstall_cmd)
    print_p = actions.add_parser(
        "print",
        parents=[which, handler],
        help="print the JSON that install would merge",
        description="Print the registration install would merge into an agent's settings, to paste by "
        "hand or to read before installing; nothing is written.",
    )
    print_p.set_defaults(func=_print_cmd)
