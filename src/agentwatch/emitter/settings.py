"""agentwatch's hook registration in Claude Code settings (`agentwatch hooks install|uninstall|print`).

Claude Code reads hooks from `settings.json` files that people also edit by hand and that other
tools write into, so every change here is a merge: agentwatch only ever adds or removes its own
handlers (command handlers whose first shell word is named `agentwatch-emit`, or that start it as
`hook_command` does) and leaves every other key, event, matcher group and handler as it found
them, in the same order.

A file that cannot be read back exactly (invalid JSON, or JSON with comments, which Claude Code
tolerates in some files) is refused and left byte-for-byte untouched: rewriting it would silently
drop what the user wrote. The replacement is atomic, so an interrupted run never leaves half a
settings file.

Formatting: a changed file keeps the bytes of everything but the handlers added or removed (see
jsonedit): what install adds is written in the file's own style (its indentation, 2 or 4 spaces, a
tab, or one line; its separators, line endings, `\\u` escapes and final newline), so an uninstall
after an install gives back, byte for byte, a file written as json.dumps or Claude Code writes them.
A new file is indented by 2 spaces, as Claude Code writes its own.

Backups and files install created (see settingsfile): an existing file is copied next to itself
before each change, and the result line names the copy. The first is `<name>.agentwatch-original`,
the user's file before agentwatch first changed it, never overwritten; each later change gets a
timestamped `<name>.agentwatch-backup-<UTC time>`, of which the last 5 (KEEP_BACKUPS) are kept. A file
that install created is deleted by the uninstall that would leave it `{}`, with the directories
install created for it if they are empty, instead of being left behind.

Two events are never registered (see the hooks reference, section 5): a `WorktreeCreate` hook
replaces git worktree creation instead of observing it, and `FileChanged` reads its matcher as the
list of files to watch.

Standard library only.
"""

from __future__ import annotations

import copy
import difflib
import json
import os
import shlex
import shutil
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from agentwatch.contract import HOOK_EVENTS
from agentwatch.emitter import jsonedit, settingsfile, telemetry

Json = dict[str, Any]

EMIT_NAME = "agentwatch-emit"
SKIPPED_EVENTS: tuple[str, ...] = ("WorktreeCreate", "FileChanged")
REGISTERED_EVENTS: tuple[str, ...] = tuple(e for e in HOOK_EVENTS if e not in SKIPPED_EVENTS)
SCOPES: tuple[str, ...] = ("user", "project", "local")
DEFAULT_SCOPE = "user"
DEFAULT_TIMEOUT = 5


class SettingsError(Exception):
    """A problem the user can fix; the message says what and how, and is shown as is."""


# -- where the settings live ----------------------------------------------------------------


def settings_path(scope: str = DEFAULT_SCOPE, project_dir: Path | str | None = None) -> Path:
    """The settings file Claude Code reads for `scope` (user, project or local)."""
    if scope == "user":
        config_dir = os.environ.get("CLAUDE_CONFIG_DIR")
        base = Path(config_dir).expanduser() if config_dir else Path.home() / ".claude"
        return base / "settings.json"
    root = Path(project_dir).expanduser().absolute() if project_dir is not None else Path.cwd()
    if scope == "project":
        return root / ".claude" / "settings.json"
    if scope == "local":
        return root / ".claude" / "settings.local.json"
    raise SettingsError(f"unknown scope {scope!r}: choose one of {', '.join(SCOPES)}")


# The command registered for an installed agentwatch-emit (see hook_command). The shell that runs
# it ignores the stop signals before it starts Python: a SIGTERM that comes while the interpreter
# starts (tens of ms on a loaded machine) would kill the hook with its event unread. An ignored
# signal stays ignored across exec, until the script's first line installs the hook's handlers.
TRAP = "trap '' HUP INT TERM; "
LAUNCH = TRAP + "exec "
# Python without `site` and isolated from the user's PYTHON* variables: the script puts its own
# package on sys.path (src/agentwatch/scripts/agentwatch-emit).
LAUNCH_FLAGS = "-IS"


# How the command tells the hook which agent runs it (Claude Code's needs no flag: the default).
HARNESS_FLAG = "--harness"


def hook_command(script: str, harness: str = "") -> str:
    """The command that runs the agentwatch-emit at `script`: its interpreter (the script's `#!`
    line, written by pip) started with LAUNCH_FLAGS behind LAUNCH; just the script when its first
    line names no Python. `harness`: the short name of the agent that runs it (`codex`, `gemini`),
    passed as `--harness NAME`; none for Claude Code.

    Where that Python is this one, the command first runs the script as compiled by the hook
    (compiled_script: Python runs a `.pyc` without compiling it, which it does with a script on
    every run) when that file is newer than the script: `TRAP[ PYC -nt SCRIPT ] && exec PYTHON
    -IS PYC; exec PYTHON -IS SCRIPT`."""
    named = [HARNESS_FLAG, harness] if harness else []
    python = _interpreter(script)
    if python is None:
        return shlex.join([script, *named])
    compiled = compiled_script(script, python)
    if compiled is None:
        return LAUNCH + shlex.join([python, LAUNCH_FLAGS, script, *named])
    return _with_compiled(compiled, python, script, named)


def _with_compiled(compiled: str, python: str, script: str, named: list[str]) -> str:
    check = f"[ {shlex.quote(compiled)} -nt {shlex.quote(script)} ]"
    run_compiled = shlex.join([python, LAUNCH_FLAGS, compiled, *named])
    return f"{TRAP}{check} && exec {run_compiled}; exec {shlex.join([python, LAUNCH_FLAGS, script, *named])}"


def compiled_script(script: str, python: str) -> str | None:
    """Where the hook writes its script compiled (emitter/bundle.py) for the installation whose
    `bin` holds `script`, when `python` is this interpreter and that installation has the
    `site-packages` the script reads from; None otherwise."""
    try:
        if not os.path.samefile(python, sys.executable):
            return None
    except OSError:
        return None
    root = os.path.dirname(os.path.dirname(os.path.abspath(script)))
    site = os.path.join(root, "lib", f"python{sys.version_info[0]}.{sys.version_info[1]}", "site-packages")
    if not os.path.isdir(site):
        return None
    return os.path.join(site, "__pycache__", f"{EMIT_NAME}.{sys.implementation.cache_tag}.pyc")


def _compiled_parts(command: str) -> tuple[str, str, str, list[str]] | None:
    """(compiled, python, script, harness words) of a command in _with_compiled's form."""
    head, sep, tail = command.partition("; exec ")
    if not sep or not head.startswith(TRAP + "[ "):
        return None
    try:
        check, words = shlex.split(head.removeprefix(TRAP)), shlex.split(tail)
    except ValueError:
        return None
    if len(words) not in (3, 5) or len(check) != 7 + len(words):
        return None
    python, script, named = words[0], words[2], words[3:]
    compiled = check[1]
    expected = ["[", compiled, "-nt", script, "]", "&&", "exec", python, LAUNCH_FLAGS, compiled, *named]
    if check != expected or words[1] != LAUNCH_FLAGS:
        return None
    return compiled, python, script, named


def with_harness(command: str, harness: str) -> str:
    """`command` (hook_command's form, or a plain `agentwatch-emit` command) naming `harness`."""
    if not harness or HARNESS_FLAG in command.split():
        return command
    parts = _compiled_parts(command)
    if parts is not None:
        compiled, python, script, _ = parts
        return _with_compiled(compiled, python, script, [HARNESS_FLAG, harness])
    return f"{command} {HARNESS_FLAG} {shlex.quote(harness)}"


def _interpreter(script: str) -> str | None:
    """The Python that `script`'s `#!` line names, when it is one existing file (pip's form)."""
    try:
        with open(script, "rb") as f:
            first = f.readline(512)
    except OSError:
        return None
    words = first[2:].decode("utf-8", "replace").split() if first.startswith(b"#!") else []
    if len(words) != 1 or not os.path.isabs(words[0]) or not os.path.isfile(words[0]):
        return None
    return words[0] if os.path.basename(words[0]).startswith(("python", "pypy")) else None


def default_command(harness: str = "") -> str:
    """The command (see hook_command) of the agentwatch-emit that belongs to this installation.

    The one next to the running interpreter comes first: it is the one installed with this very
    package, whereas PATH may lead to another environment's copy.
    """
    beside = Path(sys.executable).parent / EMIT_NAME
    if beside.is_file():
        return hook_command(os.path.abspath(beside), harness)
    found = shutil.which(EMIT_NAME)
    if found:
        return hook_command(os.path.abspath(found), harness)
    raise SettingsError(
        f"cannot find {EMIT_NAME} (looked next to {sys.executable} and on PATH); install agentwatch "
        f"in this environment or pass --command /path/to/{EMIT_NAME}"
    )


# -- what agentwatch registers --------------------------------------------------------------


def is_agentwatch_command(command: str) -> bool:
    """True when `command` runs agentwatch-emit: its first word, or hook_command's form; this is
    how our handlers are told from others."""
    parts = _compiled_parts(command)
    if parts is not None:
        compiled, python, script, harness = parts
        own = os.path.basename(compiled).startswith(f"{EMIT_NAME}.") and compiled.endswith(".pyc")
        return own and is_agentwatch_command(LAUNCH + shlex.join([python, LAUNCH_FLAGS, script, *harness]))
    try:
        words = shlex.split(command.removeprefix(LAUNCH))
    except ValueError:
        return False
    if command.startswith(LAUNCH):
        named = len(words) == 3 or (len(words) == 5 and words[3] == HARNESS_FLAG)
        return named and words[1] == LAUNCH_FLAGS and os.path.basename(words[2]) == EMIT_NAME
    return bool(words) and os.path.basename(words[0]) == EMIT_NAME


def is_agentwatch_handler(handler: object) -> bool:
    """True for a command handler that runs agentwatch-emit."""
    if not isinstance(handler, dict) or handler.get("type") != "command":
        return False
    command = handler.get("command")
    return isinstance(command, str) and is_agentwatch_command(command)


def make_handler(command: str, timeout: int = DEFAULT_TIMEOUT, async_: bool = False) -> Json:
    """The handler registered on every event; refuses one that uninstall could not find again."""
    if not is_agentwatch_command(command):
        raise SettingsError(
            f"the hook command must run {EMIT_NAME} (its first word must be a path named {EMIT_NAME}; "
            f"quote it if it contains spaces), got {command!r}"
        )
    if isinstance(timeout, bool) or not isinstance(timeout, int) or timeout < 1:
        raise SettingsError(f"the timeout must be a whole number of seconds >= 1, got {timeout!r}")
    handler: Json = {"type": "command", "command": command, "timeout": timeout}
    if async_:
        handler["async"] = True
    return handler


def hooks_block(command: str, timeout: int = DEFAULT_TIMEOUT, async_: bool = False) -> Json:
    """The `{"hooks": {...}}` object that install merges into a settings file."""
    handler = make_handler(command, timeout, async_)
    return {"hooks": {event: [{"hooks": [dict(handler)]}] for event in REGISTERED_EVENTS}}


def snippet(command: str, timeout: int = DEFAULT_TIMEOUT, async_: bool = False) -> str:
    """`hooks_block` as JSON text, for pasting into a settings file by hand."""
    return render(hooks_block(command, timeout, async_))


# -- merging ----------------------------------------------------------------------------------


def _apply(
    settings: Json,
    handler: Json | None,
    handlers: Mapping[str, Json] | None = None,
    group: Json | None = None,
) -> tuple[Json, int]:
    """A copy of `settings` without agentwatch's handlers and, when `handler` is given, with it
    registered on every REGISTERED_EVENT (`handlers`: one handler per event, on those events, for
    another harness's file; `group`: the other keys of the group that holds it, as Gemini CLI's
    `matcher`); plus how many events changed.

    A re-install puts the new group where the old one was, so that changing an option does not
    reorder a file. Only containers emptied by removing our handlers are dropped: anything that was
    already empty, or that is not shaped like a hook list, belongs to someone else.
    """
    result = copy.deepcopy(settings)
    if "hooks" not in result:
        if handler is None and not handlers:
            return result, 0
        result["hooks"] = {}
    hooks = result["hooks"]
    if not isinstance(hooks, dict):
        raise SettingsError(f'"hooks" is a {_kind(hooks)}, not an object')
    if handler is not None and handlers is None:
        handlers = dict.fromkeys(REGISTERED_EVENTS, handler)
    handlers = handlers or {}
    template = dict(group or {})
    wanted = tuple(handlers)
    for event in wanted:
        if event in hooks and not isinstance(hooks[event], list):
            raise SettingsError(f'"hooks.{event}" is a {_kind(hooks[event])}, not a list')

    changed = 0
    for event in list(hooks):
        groups = hooks[event]
        if not isinstance(groups, list):
            continue
        kept: list[Any] = []
        slot: int | None = None
        removed = False
        for entry in groups:
            inner = entry.get("hooks") if isinstance(entry, dict) else None
            if not isinstance(inner, list) or not any(is_agentwatch_handler(h) for h in inner):
                kept.append(entry)
                continue
            removed = True
            others = [h for h in inner if not is_agentwatch_handler(h)]
            if others:
                entry["hooks"] = others
                kept.append(entry)
            elif slot is None and {k: v for k, v in entry.items() if k != "hooks"} == template:
                slot = len(kept)
        if event in handlers:
            kept.insert(len(kept) if slot is None else slot, {**template, "hooks": [dict(handlers[event])]})
            hooks[event] = kept
            changed += kept != groups
        elif removed:
            changed += 1
            if kept:
                hooks[event] = kept
            else:
                del hooks[event]
    if handlers:
        for event in wanted:
            if event not in hooks:
                hooks[event] = [{**template, "hooks": [dict(handlers[event])]}]
                changed += 1
    elif changed and not hooks:
        del result["hooks"]
    return result, changed


def merge(settings: Json, handler: Json) -> Json:
    """`settings` with `handler` registered on every REGISTERED_EVENT, replacing any older one."""
    return _apply(settings, handler)[0]


def strip(settings: Json) -> Json:
    """`settings` without agentwatch's handlers: exactly what `merge` added."""
    return _apply(settings, None)[0]


def _kind(value: object) -> str:
    names = {dict: "object", list: "list", str: "string", bool: "boolean", int: "number", float: "number"}
    return "null" if value is None else names.get(type(value), type(value).__name__)


# -- reading and writing ----------------------------------------------------------------------


def render(settings: Json) -> str:
    """`settings` as a new file: indented by 2, as Claude Code writes its own."""
    return json.dumps(settings, indent=2, ensure_ascii=False) + "\n"


def rerender(old_text: str | None, old: Json, new: Json) -> str:
    """The text of `new` for a file that held `old_text`, in that file's style (see jsonedit)."""
    if old_text is None or not old_text.strip():
        return render(new)
    return jsonedit.rewrite(old_text, old, new)


class _DuplicateKey(Exception):
    def __init__(self, key: str) -> None:
        self.key = key


def _unique_keys(pairs: list[tuple[str, Any]]) -> Json:
    """An object's members, as json.loads makes them; raises _DuplicateKey for a key that is
    there twice. A rewrite could not keep both (jsonedit writes a changed object with a repeated
    key afresh, as json.loads read it), so uninstall would no longer give back the file's bytes:
    such a file is refused, untouched, rather than changed where its owner did not expect."""
    out: Json = {}
    for key, value in pairs:
        if key in out:
            raise _DuplicateKey(key)
        out[key] = value
    return out


def read_settings(path: Path) -> tuple[str | None, Json]:
    """The file's text (None when it does not exist) and its object.

    An empty file reads as `{}`: it holds nothing that a rewrite could lose.
    """
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return None, {}
    except OSError as exc:
        raise SettingsError(f"cannot read {path}: {exc.strerror or exc}") from exc
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise SettingsError(
            f"{path} is not UTF-8 text (byte {exc.start}); it was left untouched. Fix or move the file "
            "and run the command again, or add the hooks by hand (`agentwatch hooks print`)."
        ) from exc
    if not text.strip():
        return text, {}
    try:
        value = json.loads(text, object_pairs_hook=_unique_keys)
    except _DuplicateKey as dup:
        raise SettingsError(
            f"{path}: the key {json.dumps(dup.key)} appears twice in one object (only the last one counts); "
            "it was left untouched. Remove the other one and run the command again, or add the hooks by "
            "hand (`agentwatch hooks print` shows what to add)."
        ) from None
    except json.JSONDecodeError as exc:
        rest = text[exc.pos :].lstrip()
        if rest.startswith(("//", "/*")):
            problem = "has a comment, which agentwatch cannot keep when it rewrites the file"
            advice = "Remove the comments and run the command again, or add the hooks by hand"
        else:
            problem = f"is not valid JSON ({exc.msg})"
            advice = "Fix the file and run the command again, or add the hooks by hand"
        raise SettingsError(
            f"{path}: line {exc.lineno}, column {exc.colno}: the file {problem}; it was left untouched. "
            f"{advice} (`agentwatch hooks print` shows what to add)."
        ) from exc
    if not isinstance(value, dict):
        raise SettingsError(
            f"{path}: the top-level value is a {_kind(value)}, not an object; it was left untouched. "
            "Claude Code settings must be a JSON object: fix the file and run the command again."
        )
    return text, value


def unified_diff_of(path: Path, old: str | None, new: str | None) -> str:
    """A settings file's change as a unified diff (None: the file absent before, or after)."""
    lines = difflib.unified_diff(
        (old or "").splitlines(keepends=True),
        (new or "").splitlines(keepends=True),
        fromfile="/dev/null" if old is None else str(path),
        tofile="/dev/null" if new is None else str(path),
    )
    return "".join(line if line.endswith("\n") else line + "\n" for line in lines).rstrip("\n")


def _target(path: Path) -> Path:
    """The real file behind `path`: replacing a symlink would cut it off from its dotfiles repo."""
    return path.resolve() if path.is_symlink() else path


def _only_ours(path: Path) -> bool:
    """True for a settings file that holds nothing but agentwatch's handlers."""
    try:
        return not telemetry.strip(strip(read_settings(path)[1]))
    except SettingsError:
        return False


def _deleted(directories: list[Path]) -> str:
    if not directories:
        return ": deleted the file, which install had created"
    names = [str(d) for d in directories]
    listed = names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]
    kind = "directory" if len(names) == 1 else "directories"
    return f": deleted the file and the {kind} {listed}, which install had created"


def _remove_created(
    path: Path, target: Path, directories: int, old_text: str | None, dry_run: bool
) -> tuple[str, str | None]:
    """Delete a file that install created, now that uninstall would leave it `{}`."""
    if dry_run:
        return "", unified_diff_of(path, old_text, None)
    try:
        removed = settingsfile.remove_created(target, directories, _only_ours)
    except OSError as exc:
        raise SettingsError(f"cannot delete {path}: {exc.strerror or exc}") from exc
    return _deleted(removed), None


def _original_text(target: Path, new: Json) -> str | None:
    """The user's file before agentwatch first changed it (`.agentwatch-original`), byte for byte,
    when an uninstall leaves what it held: an empty file installed into comes back empty, not `{}`."""
    try:
        text = settingsfile.original_path(target).read_bytes().decode("utf-8")
        value = json.loads(text) if text.strip() else {}
    except (OSError, ValueError):
        return None
    return text if value == new else None


def _update(
    path: Path,
    handler: Json | None,
    dry_run: bool,
    otel: str | None = None,
    handlers: Mapping[str, Json] | None = None,
    group: Json | None = None,
) -> tuple[int, str, str | None]:
    """Apply the change to the file: (events changed, what became of the file for the result
    line, dry-run diff or None). `otel`: the endpoint Claude Code's telemetry goes to (install);
    an uninstall takes the telemetry settings out. `handlers`, `group`: another harness's (see
    _apply); an uninstall of another harness's file passes `group` alone."""
    target = _target(path)
    old_text, old = read_settings(target)
    installing = handler is not None or bool(handlers)
    try:
        new, changed = _apply(old, handler, handlers, group)
        new = telemetry.add(new, otel) if otel else telemetry.strip(new) if not installing else new
    except (SettingsError, telemetry.TelemetryConflict) as exc:
        raise SettingsError(
            f"{path}: {exc}; it was left untouched. Fix the file and run the command again."
        ) from exc
    if new == old:
        return 0, "", "no change" if dry_run else None
    created = settingsfile.created_directories(target) if not installing and not new else None
    if created is not None:
        return changed, *_remove_created(path, target, created, old_text, dry_run)
    restored = None if installing else _original_text(target, new)
    new_text = restored if restored is not None else rerender(old_text, old, new)
    if dry_run:
        return changed, "", unified_diff_of(path, old_text, new_text) or "no change"
    try:
        if installing and old_text is not None and strip(old) == old:
            settingsfile.forget_created(target)  # a file the user made again: its first backup is theirs
        backup = settingsfile.write(target, new_text, keep_record=installing)
    except OSError as exc:
        raise SettingsError(f"cannot write {path}: {exc.strerror or exc}") from exc
    return changed, " (new file)" if backup is None else f" (backup: {backup})", None


def install(
    path: Path,
    command: str,
    timeout: int = DEFAULT_TIMEOUT,
    async_: bool = False,
    dry_run: bool = False,
    otel: str | None = None,
) -> str:
    """Register agentwatch-emit on every REGISTERED_EVENT in `path`, and with `otel` (an OTLP
    endpoint) Claude Code's telemetry settings in its `env`; return the one-line result (with
    `dry_run`, the diff that would be applied, or "no change")."""
    _, written, diff = _update(path, make_handler(command, timeout, async_), dry_run, otel)
    if diff is not None:
        return diff
    also = f", and Claude Code's telemetry to {otel}" if otel else ""
    if not written:
        return f"agentwatch hooks{also} already installed in {path} (no change)"
    return f"installed agentwatch hooks for {len(REGISTERED_EVENTS)} events{also} in {path}{written}"


def uninstall(path: Path, dry_run: bool = False) -> str:
    """Remove agentwatch's handlers from `path`, and nothing else; return the one-line result."""
    if not dry_run and not _target(path).exists():
        return f"no agentwatch hooks in {path} (file does not exist)"
    changed, written, diff = _update(path, None, dry_run)
    if diff is not None:
        return diff
    if not written:
        return f"no agentwatch hooks in {path} (no change)"
    if not changed:
        return f"removed Claude Code's telemetry settings from {path}{written}"
    return f"removed agentwatch hooks from {changed} events in {path}{written}"
