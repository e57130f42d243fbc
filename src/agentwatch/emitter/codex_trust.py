"""Codex CLI runs no user hook it has not been told to trust: this writes that trust for
agentwatch's own hooks, as `hooks install --harness codex` does right after it wrote them.

Codex keeps a `trusted_hash` per hook in `$CODEX_HOME/config.toml`, under
`[hooks.state."<hooks.json path>:<event in snake_case>:<group>:<handler>"]`; a hook whose hash is
missing ("untrusted") or no longer matches its definition ("modified") is skipped. The hash is the
one Codex itself computes: `codex app-server` (JSON-RPC over stdio) answers `hooks/list` with each
hook's `key`, `command` and `currentHash`, so nothing of Codex's hashing is copied here.

config.toml is the user's: it is read and checked with tomlkit, and changed as little as can be.
Each trusted hash is a table of two lines appended at the end (`[hooks.state."<key>"]` and
`trusted_hash = "..."`), which uninstall takes out again line for line, so install then uninstall
gives the file back byte for byte; where that cannot be done (a hash already there, a file laid
out otherwise) tomlkit edits the document, keeping its format. Backups and the record of a file
install created: as for settings files (settingsfile).

tomlkit is imported here only: never on the hook's path.
"""

from __future__ import annotations

import json
import os
import selectors
import shutil
import subprocess
import time
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from agentwatch.contract import snake_case
from agentwatch.emitter import settingsfile
from agentwatch.emitter.settings import SettingsError, is_agentwatch_handler

Json = dict[str, Any]
APP_SERVER_TIMEOUT_S = 30.0


def codex_home() -> Path:
    """$CODEX_HOME, else ~/.codex."""
    home = os.environ.get("CODEX_HOME")
    return Path(home).expanduser() if home else Path.home() / ".codex"


def codex_binary(explicit: str | None = None) -> str | None:
    """The `codex` to ask: the one given, else the first on PATH; None when there is none."""
    if explicit:
        return explicit if os.path.isfile(explicit) or shutil.which(explicit) else None
    return shutil.which("codex")


def our_keys(hooks_path: Path, settings: Json) -> list[str]:
    """The keys Codex gives agentwatch's handlers in `settings` (the object of `hooks_path`)."""
    hooks = settings.get("hooks")
    keys: list[str] = []
    for event, groups in hooks.items() if isinstance(hooks, dict) else ():
        for g, group in enumerate(groups if isinstance(groups, list) else ()):
            inner = group.get("hooks") if isinstance(group, dict) else None
            for h, handler in enumerate(inner if isinstance(inner, list) else ()):
                if is_agentwatch_handler(handler):
                    keys.append(f"{hooks_path}:{snake_case(event)}:{g}:{h}")
    return keys


# --- asking Codex --------------------------------------------------------------------------------


class CodexUnavailable(Exception):
    """`codex app-server` could not say the hashes; the message says why."""


def current_hashes(codex: str, home: Path, cwd: Path, timeout: float = APP_SERVER_TIMEOUT_S) -> list[Json]:
    """The hooks Codex sees for `cwd` with CODEX_HOME=`home`, as `hooks/list` reports them (key,
    command, sourcePath, currentHash, trustStatus, ...)."""
    env = dict(os.environ, CODEX_HOME=str(home))
    try:
        proc = subprocess.Popen(
            [codex, "app-server"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            cwd=cwd,
            env=env,
            start_new_session=True,
        )
    except OSError as exc:
        raise CodexUnavailable(f"cannot start {codex} app-server: {exc.strerror or exc}") from None
    assert proc.stdin is not None
    assert proc.stdout is not None
    deadline = time.monotonic() + timeout
    try:
        _send(proc, {"jsonrpc": "2.0", "id": 1, "method": "initialize",
                     "params": {"clientInfo": {"name": "agentwatch", "version": "1"}}})  # fmt: skip
        _answer(proc, 1, deadline)
        _send(proc, {"jsonrpc": "2.0", "method": "initialized"})
        _send(proc, {"jsonrpc": "2.0", "id": 2, "method": "hooks/list", "params": {"cwds": [str(cwd)]}})
        result = _answer(proc, 2, deadline)
    finally:
        proc.kill()
        proc.wait(5)
    found: list[Json] = []
    for entry in result.get("data", []) if isinstance(result, dict) else []:
        found.extend(h for h in entry.get("hooks", []) if isinstance(h, dict))
    return found


def _send(proc: subprocess.Popen[bytes], message: Json) -> None:
    assert proc.stdin is not None
    try:
        proc.stdin.write(json.dumps(message).encode() + b"\n")
        proc.stdin.flush()
    except OSError as exc:
        raise CodexUnavailable(f"codex app-server closed its input: {exc}") from None


def _answer(proc: subprocess.Popen[bytes], wanted: int, deadline: float) -> Any:
    """The result of request `wanted`, skipping notifications; within the deadline."""
    assert proc.stdout is not None
    selector = selectors.DefaultSelector()
    selector.register(proc.stdout, selectors.EVENT_READ)
    buffer = b""
    while True:
        while b"\n" in buffer:
            line, buffer = buffer.split(b"\n", 1)
            try:
                message = json.loads(line)
            except ValueError:
                continue
            if isinstance(message, dict) and message.get("id") == wanted:
                if "error" in message:
                    raise CodexUnavailable(f"codex app-server refused: {message['error']}")
                return message.get("result")
        left = deadline - time.monotonic()
        if left <= 0 or not selector.select(left):
            raise CodexUnavailable("codex app-server did not answer in time")
        chunk = os.read(proc.stdout.fileno(), 1 << 16)
        if not chunk:
            raise CodexUnavailable("codex app-server ended without answering")
        buffer += chunk


# --- config.toml ---------------------------------------------------------------------------------


def _block(key: str, value: str) -> str:
    return f"[hooks.state.{json.dumps(key)}]\ntrusted_hash = {json.dumps(value)}\n"


def _state(doc: Any) -> Any:
    hooks = doc.get("hooks")
    state = hooks.get("state") if hooks is not None and hasattr(hooks, "get") else None
    return state if state is not None and hasattr(state, "get") else None


def _hash_of(doc: Any, key: str) -> str | None:
    state = _state(doc)
    entry = state.get(key) if state is not None else None
    value = entry.get("trusted_hash") if entry is not None and hasattr(entry, "get") else None
    return str(value) if value is not None else None


def _parse(text: str, path: Path) -> Any:
    import tomlkit
    from tomlkit.exceptions import TOMLKitError

    try:
        return tomlkit.parse(text)
    except TOMLKitError as exc:
        raise SettingsError(
            f"{path} is not valid TOML ({exc}); it was left untouched. Fix it and run the command again, "
            "or trust agentwatch's hooks in Codex itself (`codex`, then /hooks)."
        ) from None


def trusted_text(text: str, path: Path, trust: Mapping[str, str], forget: Iterable[str]) -> str:
    """`text` (config.toml) with each `trust` key's trusted hash set and each `forget` key's taken
    out (see the module's doc for how)."""
    import tomlkit

    gone = [key for key in forget if key not in trust]
    for key in gone:
        block = _block(key, _hash_of(_parse(text, path), key) or "")
        if block in text and (text.startswith(block) or f"\n{block}" in text):
            at = 0 if text.startswith(block) else text.index(f"\n{block}") + 1
            text = text[:at] + text[at + len(block) :]
    doc = _parse(text, path)
    for key in gone:
        state = _state(doc)
        if state is not None and key in state:  # laid out otherwise: tomlkit takes it out
            del state[key]
    changed = False
    for key, value in trust.items():
        if _hash_of(doc, key) not in (None, value):
            _state(doc)[key]["trusted_hash"] = value
            changed = True
    text = tomlkit.dumps(doc) if changed or any(k in (_state(doc) or {}) for k in gone) else text
    for key, value in trust.items():
        if _hash_of(_parse(text, path), key) is None:
            text = _append(text, path, key, value)
    return _drop_empty(text, path)


def _append(text: str, path: Path, key: str, value: str) -> str:
    """`text` with the table of one trusted hash at its end; through tomlkit where a plain append
    would not read back as that hash (hooks.state written inline, say)."""
    import tomlkit

    candidate = (text if not text or text.endswith("\n") else text + "\n") + _block(key, value)
    try:
        if _hash_of(tomlkit.parse(candidate), key) == value:
            return candidate
    except Exception:  # noqa: S110 - not appendable as text: tomlkit edits the document instead
        pass
    doc = _parse(text, path)
    hooks = doc.setdefault("hooks", tomlkit.table(is_super_table=True))
    state = hooks.setdefault("state", tomlkit.table(is_super_table=True))
    entry = tomlkit.table()
    entry.add("trusted_hash", value)
    state[key] = entry
    return tomlkit.dumps(doc)


def _drop_empty(text: str, path: Path) -> str:
    """Leave no empty `hooks.state` or `hooks` table that tomlkit's removals left behind."""
    import tomlkit

    doc = _parse(text, path)
    hooks = doc.get("hooks")
    state = _state(doc)
    if state is not None and not state and hasattr(hooks, "is_super_table") and state.is_super_table():
        del hooks["state"]
        if not hooks and hooks.is_super_table():
            del doc["hooks"]
        return tomlkit.dumps(doc)
    return text


def write_trust(
    config: Path, trust: Mapping[str, str], forget: Iterable[str], dry_run: bool
) -> tuple[int, str, str | None]:
    """Set `trust` and take `forget` out of `config` (config.toml): (keys written, what became of
    the file, the dry run's diff or None)."""
    from agentwatch.emitter.settings import unified_diff_of

    try:
        old = config.read_text(encoding="utf-8")
    except FileNotFoundError:
        old = None
    except OSError as exc:
        raise SettingsError(f"cannot read {config}: {exc.strerror or exc}") from None
    new = trusted_text(old or "", config, trust, forget)
    if new == (old or ""):
        return 0, "", "no change" if dry_run else None
    if dry_run:
        return len(trust), "", unified_diff_of(config, old, new or None)
    if not new and old is not None and settingsfile.created_directories(config) is not None:
        settingsfile.remove_created(config, 0, lambda _p: True)
        return len(trust), " (deleted the file, which install had created)", None
    try:
        backup = settingsfile.write(config, new, keep_record=bool(trust))
    except OSError as exc:
        raise SettingsError(f"cannot write {config}: {exc.strerror or exc}") from None
    return len(trust), " (new file)" if backup is None else f" (backup: {backup})", None
