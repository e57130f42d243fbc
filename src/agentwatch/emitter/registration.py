"""agentwatch's hook registration in each harness's own file: Claude Code's settings.json (see
settings.py), Codex CLI's hooks.json (and its trust in config.toml, see codex_trust.py) and Gemini
CLI's settings.json. One merge for all three (settings._apply): only agentwatch's handlers are
added or removed, everything else is kept byte for byte, with the same backups and dry runs.

What each harness gets (reference: codex-and-gemini-hooks.md, 1.10 and 2.10):

- Codex CLI: `$CODEX_HOME/hooks.json` (else ~/.codex/hooks.json), every event of CODEX_EVENTS, the
  timeout in seconds, SessionEnd and Interrupt at most 3 s (Codex cuts a larger one down, with a
  warning); then each hook trusted (codex_trust), or Codex runs none of them.
- Gemini CLI: `~/.gemini/settings.json` (`$GEMINI_CLI_HOME/.gemini/settings.json`), every event of
  GEMINI_EVENTS, in groups matching `*`, each handler named `agentwatch`, the timeout in
  milliseconds. User-level hooks need no trust.

The command is the one Claude Code gets (settings.hook_command), with `--harness codex|gemini`.
Standard library only (tomlkit, in codex_trust, only when Codex's hooks are trusted).
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any, NamedTuple

from agentwatch.emitter import settings
from agentwatch.emitter.settings import SettingsError, make_handler, read_settings, with_harness
from agentwatch.harnesses import CLAUDE_CODE, CODEX, CODEX_EVENTS, GEMINI_CLI, GEMINI_EVENTS, LABELS, SHORT

Json = dict[str, Any]
# Codex ends SessionEnd and Interrupt hooks at 3 s whatever they ask for.
CODEX_CAPPED = {"SessionEnd": 3, "Interrupt": 3}
GEMINI_GROUP: Json = {"matcher": "*"}
GEMINI_HANDLER_NAME = "agentwatch"
TRUST_BY_HAND = "run `codex`, type /hooks and trust agentwatch's hooks"


class Done(NamedTuple):
    """What one harness's install or uninstall did: its lines for the output."""

    harness: str
    lines: list[str]


def gemini_settings_path() -> Path:
    home = os.environ.get("GEMINI_CLI_HOME")
    return (Path(home).expanduser() if home else Path.home()) / ".gemini" / "settings.json"


def codex_hooks_path() -> Path:
    from agentwatch.emitter.codex_trust import codex_home

    return codex_home() / "hooks.json"


def found_harnesses() -> list[str]:
    """The harnesses this machine has: the CLI on PATH, or its folder in the home directory (Claude
    Code's config dir, $CODEX_HOME or ~/.codex, ~/.gemini). Claude Code alone when none is found."""
    claude = os.environ.get("CLAUDE_CONFIG_DIR") or str(Path.home() / ".claude")
    codex = os.environ.get("CODEX_HOME") or str(Path.home() / ".codex")
    found = [
        harness
        for harness, binary, folder in (
            (CLAUDE_CODE, "claude", claude),
            (CODEX, "codex", codex),
            (GEMINI_CLI, "gemini", str(gemini_settings_path().parent)),
        )
        if shutil.which(binary) or os.path.isdir(os.path.expanduser(folder))
    ]
    return found or [CLAUDE_CODE]


def handlers(harness: str, command: str, timeout: int) -> dict[str, Json]:
    """Each event's handler in `harness`'s file."""
    command = with_harness(command, SHORT[harness])
    if harness == CODEX:
        return {e: make_handler(command, min(timeout, CODEX_CAPPED.get(e, timeout))) for e in CODEX_EVENTS}
    handler = make_handler(command, timeout)
    gemini = {
        "name": GEMINI_HANDLER_NAME,
        "type": "command",
        "command": handler["command"],
        "timeout": timeout * 1000,
    }
    return dict.fromkeys(GEMINI_EVENTS, gemini)


def block(harness: str, command: str, timeout: int) -> Json:
    """The `{"hooks": {...}}` object install merges into `harness`'s file (`hooks print`)."""
    group = GEMINI_GROUP if harness == GEMINI_CLI else {}
    return {"hooks": {e: [{**group, "hooks": [h]}] for e, h in handlers(harness, command, timeout).items()}}


def snippet(harness: str, command: str, timeout: int) -> str:
    return json.dumps(block(harness, command, timeout), indent=2, ensure_ascii=False) + "\n"


def _result(harness: str, path: Path, verb: str, changed: int, written: str, diff: str | None) -> str:
    if diff is not None:
        return diff
    if not written and verb == "install":
        return f"{LABELS[harness]}: agentwatch hooks already installed in {path} (no change)"
    if not written:
        return f"{LABELS[harness]}: no agentwatch hooks in {path} (no change)"
    if verb == "install":
        return f"{LABELS[harness]}: installed agentwatch hooks for {changed} events in {path}{written}"
    return f"{LABELS[harness]}: removed agentwatch hooks from {changed} events in {path}{written}"


def install_gemini(command: str, timeout: int, dry_run: bool, path: Path | None = None) -> Done:
    path = path or gemini_settings_path()
    changed, written, diff = settings._update(
        path, None, dry_run, handlers=handlers(GEMINI_CLI, command, timeout), group=GEMINI_GROUP
    )
    return Done(GEMINI_CLI, [_result(GEMINI_CLI, path, "install", changed, written, diff)])


def uninstall_gemini(dry_run: bool, path: Path | None = None) -> Done:
    path = path or gemini_settings_path()
    if not dry_run and not path.exists():
        return Done(
            GEMINI_CLI, [f"{LABELS[GEMINI_CLI]}: no agentwatch hooks in {path} (file does not exist)"]
        )
    changed, written, diff = settings._update(path, None, dry_run, group=GEMINI_GROUP)
    return Done(GEMINI_CLI, [_result(GEMINI_CLI, path, "uninstall", changed, written, diff)])


def install_codex(command: str, timeout: int, dry_run: bool, codex: str | None = None) -> Done:
    """Register on every Codex event in hooks.json, then trust each handler with the hash Codex
    reports for it (or say how, where no `codex` is at hand)."""
    from agentwatch.emitter import codex_trust

    path = codex_hooks_path()
    before = codex_trust.our_keys(path, read_settings(settings._target(path))[1])
    changed, written, diff = settings._update(path, None, dry_run, handlers=handlers(CODEX, command, timeout))
    lines = [_result(CODEX, path, "install", changed, written, diff)]
    if dry_run:
        lines.append(f"{LABELS[CODEX]}: would trust agentwatch's hooks in {path.parent / 'config.toml'}")
        return Done(CODEX, lines)
    lines.append(trust_codex(path, before, codex))
    return Done(CODEX, lines)


def trust_codex(path: Path, before: list[str], codex: str | None) -> str:
    """Trust agentwatch's handlers in `path` (hooks.json) with the hashes Codex computes; forget
    the keys of `before` that are no longer ours. The line that says what was trusted."""
    from agentwatch.emitter import codex_trust

    config = path.parent / "config.toml"
    label = LABELS[CODEX]
    keys = codex_trust.our_keys(path, read_settings(settings._target(path))[1])
    binary = codex_trust.codex_binary(codex)
    if binary is None:
        return (
            f"{label}: NOT TRUSTED YET: no `codex` on PATH to ask for the hashes of the {len(keys)} "
            "hooks, and Codex runs no hook it has not been told to trust. Run `agentwatch hooks install "
            "--harness codex` again where `codex` is on the PATH (or give it with --codex PATH), or "
            f"trust them in Codex: {TRUST_BY_HAND}."
        )
    try:
        listed = codex_trust.current_hashes(binary, path.parent, Path.cwd())
    except codex_trust.CodexUnavailable as exc:
        return f"{label}: NOT TRUSTED YET: {exc}. Run the install again, or {TRUST_BY_HAND}."
    ours = {
        str(h.get("key")): str(h.get("currentHash"))
        for h in listed
        if h.get("key") in keys and h.get("currentHash")
    }
    missing = [k for k in keys if k not in ours]
    count, written, _ = codex_trust.write_trust(config, ours, [k for k in before if k not in ours], False)
    line = f"{label}: trusted {len(ours)} hooks in {config}{written} (the hashes Codex reports for them)"
    if missing:
        line += f"; Codex did not list {len(missing)} of them ({', '.join(missing[:3])}): {TRUST_BY_HAND}"
    return line if count or written else f"{label}: the {len(ours)} hooks were trusted already in {config}"


def uninstall_codex(dry_run: bool) -> Done:
    """Take agentwatch's handlers out of hooks.json and their trusted hashes out of config.toml."""
    from agentwatch.emitter import codex_trust

    path = codex_hooks_path()
    label = LABELS[CODEX]
    if not dry_run and not path.exists():
        return Done(CODEX, [f"{label}: no agentwatch hooks in {path} (file does not exist)"])
    keys = codex_trust.our_keys(path, read_settings(settings._target(path))[1])
    changed, written, diff = settings._update(path, None, dry_run)
    lines = [_result(CODEX, path, "uninstall", changed, written, diff)]
    config = path.parent / "config.toml"
    if keys and (config.exists() or dry_run):
        _, trust_written, trust_diff = codex_trust.write_trust(config, {}, keys, dry_run)
        if trust_diff is not None:
            lines.append(trust_diff)
        elif trust_written:
            lines.append(f"{label}: removed the trust of {len(keys)} hooks from {config}{trust_written}")
    return Done(CODEX, lines)


def require_known(harness: str) -> None:
    if harness not in (CLAUDE_CODE, CODEX, GEMINI_CLI):
        raise SettingsError(f"unknown harness {harness!r}: choose claude, codex, gemini or all")
