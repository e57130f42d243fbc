"""A settings file on disk for `agentwatch hooks`: atomic replacement, backups, and the record that
install created the file.

Backups: an existing file is copied next to itself, with its mode and times, before each change.
The first copy is `<name>.agentwatch-original`, the user's file as it was before agentwatch first
changed it; it is created exclusively, so it is never overwritten, and never pruned (delete it to
let the next change take a new one). Every later change gets `<name>.agentwatch-backup-<UTC time>`,
as `settings.json.agentwatch-backup-20261123T103000Z`, with `-2`, `-3`... when several land in the
same second; only the last KEEP_BACKUPS of those are kept, so repeated installs cannot fill the
directory.

A file that install creates has no original: `<name>.agentwatch-created` records instead that it
did not exist, and how many directories install created for it, so that a later uninstall, in any
process, can delete the file rather than leave `{}`, along with the directories if they are empty
then, and with the timestamped backups that hold nothing but agentwatch's handlers. The record is
dropped as soon as the file holds something of the user's: an uninstall that leaves content, or an
install into a file that did not have agentwatch's handlers (one the user made again).

Standard library only.
"""

from __future__ import annotations

import itertools
import json
import os
import re
import secrets
import shutil
import time
from collections.abc import Callable
from pathlib import Path

ORIGINAL_SUFFIX = ".agentwatch-original"
BACKUP_SUFFIX = ".agentwatch-backup"
CREATED_SUFFIX = ".agentwatch-created"
KEEP_BACKUPS = 5

_STAMPED = re.compile(r"-(\d{8}T\d{6}Z)(?:-(\d+))?")


def _sibling(path: Path, suffix: str) -> Path:
    return path.with_name(path.name + suffix)


# -- backups --------------------------------------------------------------------------------


def original_path(path: Path) -> Path:
    """Where the user's file before agentwatch first changed it is kept."""
    return _sibling(path, ORIGINAL_SUFFIX)


def backup_stamp() -> str:
    """The current UTC second, as timestamped backups are named: 20261123T103000Z."""
    return time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())


def _copy_new(source: Path, copy_path: Path) -> bool:
    """Copy `source` to `copy_path` unless that already exists (then False): never overwrites.

    The copy is created private and then given the source's mode and times, so a settings file
    holding secrets in `env` is never readable by others, not even for a moment, through its backup.
    """
    try:
        fd = os.open(copy_path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        return False
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(source.read_bytes())
        shutil.copystat(source, copy_path)
    except BaseException:
        copy_path.unlink(missing_ok=True)
        raise
    return True


def stamped_backups(path: Path) -> list[Path]:
    """The timestamped backups of `path`, oldest first (others' files with similar names excluded)."""
    prefix = path.name + BACKUP_SUFFIX
    found: list[tuple[str, int, Path]] = []
    for sibling in path.parent.iterdir():
        match = _STAMPED.fullmatch(sibling.name[len(prefix) :]) if sibling.name.startswith(prefix) else None
        if match:
            found.append((match[1], int(match[2] or 1), sibling))
    return [item[2] for item in sorted(found)]


def back_up(path: Path) -> Path:
    """Copy `path` next to itself before it changes and return the copy: the original the first
    time (unless install created the file), a new timestamped backup every later time, dropping all
    but the last KEEP_BACKUPS of those."""
    original = _sibling(path, ORIGINAL_SUFFIX)
    if not _sibling(path, CREATED_SUFFIX).exists() and _copy_new(path, original):
        return original
    stamp = backup_stamp()
    for count in itertools.count(1):
        backup = _sibling(path, f"{BACKUP_SUFFIX}-{stamp}" + (f"-{count}" if count > 1 else ""))
        if _copy_new(path, backup):
            break
    for stale in stamped_backups(path)[:-KEEP_BACKUPS]:
        if stale != backup:
            stale.unlink(missing_ok=True)
    return backup


# -- the record that install created the file -------------------------------------------------


def created_directories(path: Path) -> int | None:
    """How many directories install created for `path`, or None when it did not create the file
    (or the record cannot be read: then the file is treated as the user's)."""
    try:
        record = json.loads(_sibling(path, CREATED_SUFFIX).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    directories = record.get("directories") if isinstance(record, dict) else None
    if isinstance(directories, bool) or not isinstance(directories, int) or directories < 0:
        return None
    return directories


def forget_created(path: Path) -> None:
    """Drop the record that install created `path`: the file is the user's now."""
    _sibling(path, CREATED_SUFFIX).unlink(missing_ok=True)


def _missing_directories(directory: Path) -> int:
    count = 0
    while not directory.exists() and directory.parent != directory:
        count += 1
        directory = directory.parent
    return count


def remove_created(path: Path, directories: int, disposable: Callable[[Path], bool]) -> list[Path]:
    """Delete `path`, which install created, with its `disposable` timestamped backups, its record,
    and then up to `directories` of its directories that are empty; return those directories."""
    path.unlink()
    for backup in stamped_backups(path):
        if disposable(backup):
            backup.unlink(missing_ok=True)
    forget_created(path)
    removed: list[Path] = []
    directory = path.parent
    for _ in range(directories):
        try:
            directory.rmdir()
        except OSError:
            break
        removed.append(directory)
        directory = directory.parent
    return removed


# -- writing --------------------------------------------------------------------------------


def write(path: Path, text: str, keep_record: bool) -> Path | None:
    """Replace `path` with `text` atomically, keeping its mode; return the backup of the old file,
    None for a new file. `keep_record` False drops the record that install created the file.

    The temporary file is created with the usual 0666-minus-umask mode, so a new settings file gets
    the same permissions any editor would give it; an existing one keeps its own.
    """
    backup: Path | None = None
    mode: int | None = None
    if path.exists():
        mode = path.stat().st_mode & 0o7777
        backup = back_up(path)
        if not keep_record:
            forget_created(path)
    else:
        directories = _missing_directories(path.parent)
        path.parent.mkdir(parents=True, exist_ok=True)
        _sibling(path, CREATED_SUFFIX).write_text(
            json.dumps({"created_by": "agentwatch hooks install", "directories": directories}) + "\n",
            encoding="utf-8",
        )
    temp = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}.tmp")
    fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as out:
            out.write(text)
            out.flush()
            os.fsync(out.fileno())
        if mode is not None:
            os.chmod(temp, mode)
        os.replace(temp, path)
    except BaseException:
        temp.unlink(missing_ok=True)
        raise
    return backup
