"""agentwatch's hook registration in Claude Code settings files.

These files belong to the user and to other tools too, so most tests check what must *not*
change: other keys, other events, other handlers, key order, and the bytes of a file we refuse.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import stat
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from agentwatch.cli import main
from agentwatch.contract import HOOK_EVENTS
from agentwatch.emitter import settings as cs
from agentwatch.emitter import settingsfile

OTHER_TOOL = {"type": "command", "command": "/usr/local/bin/other-tool --log", "timeout": 30}


@pytest.fixture
def emit(tmp_path: Path) -> str:
    """A hook command whose path needs quoting, as a venv under a home with spaces would give."""
    return shlex.quote(str(tmp_path / "my venv" / "bin" / "agentwatch-emit"))


@pytest.fixture
def settings(tmp_path: Path) -> Path:
    return tmp_path / "claude" / "settings.json"


def write_json(path: Path, value: Any, indent: int | None = None) -> bytes:
    path.parent.mkdir(parents=True, exist_ok=True)
    data = json.dumps(value, indent=indent, ensure_ascii=False).encode()
    path.write_bytes(data)
    return data


def load(path: Path) -> Any:
    return json.loads(path.read_text(encoding="utf-8"))


def ordered(value: Any) -> str:
    """A form of `value` in which key order counts, for comparing files object by object."""
    return json.dumps(value, ensure_ascii=False)


def own_handlers(value: Any, event: str) -> list[Any]:
    return [h for g in value["hooks"].get(event, []) for h in g["hooks"] if cs.is_agentwatch_handler(h)]


def original_of(path: Path) -> Path:
    return path.with_name(path.name + ".agentwatch-original")


def backups(path: Path) -> list[str]:
    """The names of the backups agentwatch keeps next to `path`, the original first, then oldest first."""
    if not path.parent.exists():
        return []
    names = [p.name for p in path.parent.iterdir() if p.name.startswith(path.name + ".agentwatch-")]
    stamped = sorted(n for n in names if re.search(r"\.agentwatch-backup-\d{8}T\d{6}Z(-\d+)?$", n))
    return [n for n in names if n.endswith(".agentwatch-original")] + stamped


def stamps(monkeypatch: pytest.MonkeyPatch, *values: str) -> None:
    """Make the timestamped backups' clock read `values`, one per backup (the last one sticks)."""
    queue = list(values)
    monkeypatch.setattr(settingsfile, "backup_stamp", lambda: queue.pop(0) if len(queue) > 1 else queue[0])


ORIGINALS: dict[str, dict[str, Any]] = {
    "other keys and hooks": {
        "model": "opus",
        "env": {"FOO": "bär"},
        "hooks": {
            "PreToolUse": [{"matcher": "Bash", "hooks": [OTHER_TOOL]}],
            "SomeFutureEvent": [{"hooks": [OTHER_TOOL]}],
        },
        "permissions": {"allow": ["Bash(ls:*)"]},
    },
    "same event from another tool": {
        "hooks": {"Stop": [{"hooks": [OTHER_TOOL]}], "SessionEnd": [{"hooks": [OTHER_TOOL, OTHER_TOOL]}]},
    },
    "skipped events used by others": {
        "hooks": {
            "WorktreeCreate": [{"hooks": [{"type": "command", "command": "make-worktree"}]}],
            "FileChanged": [{"matcher": ".envrc", "hooks": [OTHER_TOOL]}],
        },
        "statusLine": {"type": "command", "command": "status"},
    },
    "no hooks at all": {"theme": "dark", "includeCoAuthoredBy": False},
    "empty groups of others": {"hooks": {"Stop": [{"hooks": []}], "SomeFutureEvent": []}},
}


# -- what gets registered -------------------------------------------------------------------


def test_registered_events_are_all_but_worktree_create_and_file_changed() -> None:
    assert len(HOOK_EVENTS) == 33
    assert len(cs.REGISTERED_EVENTS) == 31
    assert "WorktreeCreate" not in cs.REGISTERED_EVENTS
    assert "FileChanged" not in cs.REGISTERED_EVENTS
    assert list(cs.REGISTERED_EVENTS) == [
        e for e in HOOK_EVENTS if e not in {"WorktreeCreate", "FileChanged"}
    ]


def test_install_into_a_missing_file_registers_every_event(settings: Path, emit: str) -> None:
    message = cs.install(settings, emit)

    written = load(settings)
    assert list(written) == ["hooks"]
    assert list(written["hooks"]) == list(cs.REGISTERED_EVENTS)
    for event in cs.REGISTERED_EVENTS:
        assert written["hooks"][event] == [{"hooks": [{"type": "command", "command": emit, "timeout": 5}]}]
    assert settings.read_text(encoding="utf-8") == json.dumps(written, indent=2) + "\n"
    assert message == f"installed agentwatch hooks for 31 events in {settings} (new file)"
    assert backups(settings) == []


def test_timeout_and_async_go_into_the_handler(settings: Path, emit: str) -> None:
    cs.install(settings, emit, timeout=9, async_=True)
    handler = load(settings)["hooks"]["PreToolUse"][0]["hooks"][0]
    assert handler == {"type": "command", "command": emit, "timeout": 9, "async": True}


def test_handler_is_synchronous_unless_asked() -> None:
    assert "async" not in cs.make_handler("agentwatch-emit")


@pytest.mark.parametrize("command", ["/usr/bin/other", "echo agentwatch-emit", "'unbalanced", ""])
def test_a_command_that_does_not_run_agentwatch_emit_is_refused(settings: Path, command: str) -> None:
    with pytest.raises(cs.SettingsError, match="must run agentwatch-emit"):
        cs.install(settings, command)
    assert not settings.exists()


@pytest.mark.parametrize("timeout", [0, -1, True])
def test_a_bad_timeout_is_refused(settings: Path, emit: str, timeout: int) -> None:
    with pytest.raises(cs.SettingsError, match="timeout"):
        cs.install(settings, emit, timeout=timeout)


def test_own_handlers_are_recognised_by_the_first_word_of_their_command() -> None:
    assert cs.is_agentwatch_handler({"type": "command", "command": "agentwatch-emit"})
    assert cs.is_agentwatch_handler({"type": "command", "command": "'/a b/bin/agentwatch-emit' --x 1"})
    assert not cs.is_agentwatch_handler({"type": "command", "command": "/bin/agentwatch-emitter"})
    assert not cs.is_agentwatch_handler({"type": "command", "command": "nice agentwatch-emit"})
    assert not cs.is_agentwatch_handler({"type": "http", "url": "http://h/agentwatch-emit"})
    assert not cs.is_agentwatch_handler({"type": "command", "command": ["agentwatch-emit"]})
    assert not cs.is_agentwatch_handler("agentwatch-emit")


# -- merging ----------------------------------------------------------------------------------


def test_install_keeps_everything_else_in_place(settings: Path, emit: str) -> None:
    original = ORIGINALS["other keys and hooks"]
    write_json(settings, original)

    cs.install(settings, emit)

    written = load(settings)
    assert list(written) == list(original)
    for key in ("model", "env", "permissions"):
        assert written[key] == original[key]
    assert list(written["hooks"])[:2] == ["PreToolUse", "SomeFutureEvent"]
    assert written["hooks"]["SomeFutureEvent"] == original["hooks"]["SomeFutureEvent"]
    assert written["hooks"]["PreToolUse"][0] == original["hooks"]["PreToolUse"][0]
    assert written["hooks"]["PreToolUse"][1] == {
        "hooks": [{"type": "command", "command": emit, "timeout": 5}]
    }
    assert written["env"]["FOO"] == "bär"
    assert "bär" in settings.read_text(encoding="utf-8")


def test_install_adds_its_own_group_after_another_tools_handler(settings: Path, emit: str) -> None:
    write_json(settings, ORIGINALS["same event from another tool"])
    cs.install(settings, emit)
    stop = load(settings)["hooks"]["Stop"]
    assert stop[0] == {"hooks": [OTHER_TOOL]}
    assert stop[1]["hooks"][0]["command"] == emit


def test_install_twice_changes_nothing_the_second_time(settings: Path, emit: str) -> None:
    cs.install(settings, emit)
    first = settings.read_bytes()

    message = cs.install(settings, emit)

    assert message == f"agentwatch hooks already installed in {settings} (no change)"
    assert settings.read_bytes() == first
    assert backups(settings) == []
    written = load(settings)
    assert all(len(own_handlers(written, e)) == 1 for e in cs.REGISTERED_EVENTS)


def test_reinstall_with_other_options_replaces_the_handlers_in_place(settings: Path, tmp_path: Path) -> None:
    old = str(tmp_path / "old" / "agentwatch-emit")
    new = str(tmp_path / "new" / "agentwatch-emit")
    cs.install(settings, old)
    value = load(settings)
    value["hooks"]["Stop"].append({"hooks": [OTHER_TOOL]})
    write_json(settings, value)

    cs.install(settings, new, timeout=7, async_=True)

    written = load(settings)
    for event in cs.REGISTERED_EVENTS:
        assert own_handlers(written, event) == [
            {"type": "command", "command": new, "timeout": 7, "async": True}
        ]
    assert written["hooks"]["Stop"][1] == {"hooks": [OTHER_TOOL]}
    assert list(written["hooks"]) == list(cs.REGISTERED_EVENTS)


def test_install_drops_stale_handlers_on_skipped_events(settings: Path, emit: str) -> None:
    ours = {"type": "command", "command": emit}
    write_json(
        settings,
        {
            "hooks": {
                "WorktreeCreate": [{"hooks": [ours]}],
                "FileChanged": [{"matcher": ".envrc", "hooks": [ours, OTHER_TOOL]}],
            }
        },
    )

    cs.install(settings, emit)

    written = load(settings)
    assert "WorktreeCreate" not in written["hooks"]
    assert written["hooks"]["FileChanged"] == [{"matcher": ".envrc", "hooks": [OTHER_TOOL]}]


# -- uninstalling -----------------------------------------------------------------------------


@pytest.mark.parametrize("name", list(ORIGINALS))
def test_uninstall_gives_back_the_original(settings: Path, emit: str, name: str) -> None:
    original = ORIGINALS[name]
    write_json(settings, original)

    cs.install(settings, emit, timeout=3, async_=True)
    assert load(settings) != original
    message = cs.uninstall(settings)

    assert ordered(load(settings)) == ordered(original)
    assert message.startswith("removed agentwatch hooks from 31 events in ")


# -- files install created --------------------------------------------------------------------


def test_uninstall_removes_the_file_and_the_directory_install_created(tmp_path: Path, emit: str) -> None:
    """The reported bug: uninstall left a `{}` file behind where there had been none."""
    path = tmp_path / ".claude" / "settings.json"
    cs.install(path, emit)

    message = cs.uninstall(path)

    assert message == (
        f"removed agentwatch hooks from 31 events in {path}: deleted the file and the directory "
        f"{path.parent}, which install had created"
    )
    assert os.listdir(tmp_path) == []


def test_uninstall_keeps_a_directory_that_was_there_before(settings: Path, emit: str) -> None:
    settings.parent.mkdir()

    cs.install(settings, emit)
    message = cs.uninstall(settings)

    assert message.endswith(f"in {settings}: deleted the file, which install had created")
    assert settings.parent.is_dir()
    assert os.listdir(settings.parent) == []


def test_a_created_directory_that_holds_something_else_is_kept(settings: Path, emit: str) -> None:
    cs.install(settings, emit)
    (settings.parent / "CLAUDE.md").write_text("mine")

    message = cs.uninstall(settings)

    assert message.endswith(f"in {settings}: deleted the file, which install had created")
    assert os.listdir(settings.parent) == ["CLAUDE.md"]


def test_install_reinstall_and_uninstall_of_a_created_file_leave_nothing(
    tmp_path: Path, emit: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The original of a created file is no file, and backups that only ever held agentwatch's
    handlers have nothing of the user's: they go with the file."""
    stamps(monkeypatch, "20261123T103000Z")
    path = tmp_path / ".claude" / "settings.json"
    cs.install(path, emit)
    cs.install(path, emit, timeout=9)
    assert backups(path) == ["settings.json.agentwatch-backup-20261123T103000Z"]

    cs.uninstall(path)

    assert os.listdir(tmp_path) == []


def test_that_install_created_the_file_is_known_to_another_process(tmp_path: Path, emit: str) -> None:
    where = ["--scope", "project", "--project-dir", str(tmp_path)]
    agentwatch = [sys.executable, "-m", "agentwatch", "hooks"]
    subprocess.run([*agentwatch, "install", *where, "--command", emit], check=True, capture_output=True)
    assert (tmp_path / ".claude" / "settings.json").is_file()

    done = subprocess.run([*agentwatch, "uninstall", *where], check=True, capture_output=True, text=True)

    assert "deleted the file and the directory" in done.stdout
    assert os.listdir(tmp_path) == []


def test_a_created_file_the_user_added_to_is_kept(settings: Path, emit: str) -> None:
    cs.install(settings, emit)
    value = load(settings)
    settings.write_text(json.dumps({"model": "opus", **value}, indent=2) + "\n")

    message = cs.uninstall(settings)

    assert "(backup: " in message
    assert settings.read_text() == '{\n  "model": "opus"\n}\n'
    cs.install(settings, emit)
    cs.uninstall(settings)
    assert settings.read_text() == '{\n  "model": "opus"\n}\n'


def test_backups_holding_the_users_edits_outlive_a_created_file(
    settings: Path, emit: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    stamps(monkeypatch, "20261123T103000Z")
    cs.install(settings, emit)
    only_ours = settings.read_text()
    settings.write_text(json.dumps({"model": "opus", **load(settings)}, indent=2) + "\n")
    with_the_users = settings.read_bytes()
    cs.install(settings, emit, timeout=9)
    settings.write_text(only_ours)

    cs.uninstall(settings)

    assert not settings.exists()
    assert backups(settings) == ["settings.json.agentwatch-backup-20261123T103000Z"]
    assert settings.with_name(backups(settings)[0]).read_bytes() == with_the_users


def test_a_file_the_user_made_again_is_not_removed(settings: Path, emit: str) -> None:
    cs.install(settings, emit)
    settings.unlink()
    settings.write_text("{}\n")

    cs.install(settings, emit)
    message = cs.uninstall(settings)

    assert "(backup: " in message
    assert settings.read_text() == "{}\n"
    assert original_of(settings).read_text() == "{}\n"


def test_dry_run_uninstall_of_a_created_file_shows_its_removal(settings: Path, emit: str) -> None:
    cs.install(settings, emit)
    names = sorted(os.listdir(settings.parent))
    data = settings.read_bytes()

    diff = cs.uninstall(settings, dry_run=True)

    assert diff.startswith(f"--- {settings}\n+++ /dev/null\n")
    assert all(line.startswith(("-", "@")) for line in diff.splitlines()[2:])
    assert settings.read_bytes() == data
    assert sorted(os.listdir(settings.parent)) == names


def test_uninstall_drops_the_containers_it_emptied(settings: Path) -> None:
    """An event list or a `hooks` object emptied by uninstall is noise, so it goes; the price is
    that one that was already empty before install cannot be told apart and goes too."""
    ours = {"type": "command", "command": "agentwatch-emit"}
    write_json(
        settings, {"model": "opus", "hooks": {"Stop": [{"hooks": [ours]}, {"matcher": "*", "hooks": [ours]}]}}
    )
    cs.uninstall(settings)
    assert ordered(load(settings)) == ordered({"model": "opus"})


def test_uninstall_removes_only_agentwatch_handlers(settings: Path) -> None:
    lookalikes = [
        {"type": "command", "command": "/bin/agentwatch-emitter"},
        {"type": "command", "command": "echo agentwatch-emit"},
        {"type": "http", "url": "http://localhost/agentwatch-emit"},
    ]
    write_json(
        settings,
        {
            "hooks": {
                "PreToolUse": [
                    {
                        "matcher": "Bash",
                        "hooks": [{"type": "command", "command": "agentwatch-emit"}, OTHER_TOOL],
                    },
                    {"hooks": lookalikes},
                ],
                "Stop": [
                    {"matcher": "*", "hooks": [{"type": "command", "command": "'/x y/agentwatch-emit' -v"}]}
                ],
            }
        },
    )

    message = cs.uninstall(settings)

    assert load(settings) == {
        "hooks": {"PreToolUse": [{"matcher": "Bash", "hooks": [OTHER_TOOL]}, {"hooks": lookalikes}]}
    }
    assert message.startswith("removed agentwatch hooks from 2 events in ")


def test_uninstall_of_a_missing_file_creates_nothing(settings: Path) -> None:
    assert cs.uninstall(settings) == f"no agentwatch hooks in {settings} (file does not exist)"
    assert not settings.parent.exists()


def test_uninstall_without_our_hooks_leaves_the_file_alone(settings: Path) -> None:
    data = write_json(settings, ORIGINALS["other keys and hooks"])
    assert cs.uninstall(settings) == f"no agentwatch hooks in {settings} (no change)"
    assert settings.read_bytes() == data
    assert backups(settings) == []


# -- the file's own formatting ---------------------------------------------------------------

STYLES: dict[str, dict[str, Any]] = {
    "2 spaces": {"indent": 2},
    "4 spaces": {"indent": 4},
    "tabs": {"indent": "\t"},
    "one line": {},
    "one line, no spaces": {"separators": (",", ":")},
}


def styled(value: Any, style: str, end: str = "\n") -> bytes:
    """`value` as json.dumps writes it in `style`, followed by `end`."""
    return (json.dumps(value, ensure_ascii=False, **STYLES[style]) + end).encode()


@pytest.mark.parametrize("style", list(STYLES))
@pytest.mark.parametrize("name", list(ORIGINALS))
def test_install_then_uninstall_gives_back_the_original_byte_for_byte(
    settings: Path, emit: str, style: str, name: str
) -> None:
    settings.parent.mkdir()
    data = styled(ORIGINALS[name], style)
    settings.write_bytes(data)

    cs.install(settings, emit, timeout=3, async_=True)
    cs.install(settings, emit, timeout=9)
    cs.uninstall(settings)

    assert settings.read_bytes() == data


@pytest.mark.parametrize("end", ["", "\n", "\n\n", "\r\n"])
@pytest.mark.parametrize("style", ["2 spaces", "tabs", "one line"])
def test_what_follows_the_object_is_kept(settings: Path, emit: str, style: str, end: str) -> None:
    settings.parent.mkdir()
    data = styled(ORIGINALS["other keys and hooks"], style, end)
    settings.write_bytes(data)

    cs.install(settings, emit)
    assert settings.read_bytes().endswith(b"}" + end.encode())
    cs.uninstall(settings)

    assert settings.read_bytes() == data


@pytest.mark.parametrize("style", list(STYLES))
def test_install_writes_in_the_files_own_style(settings: Path, emit: str, style: str) -> None:
    settings.parent.mkdir()
    settings.write_bytes(styled(ORIGINALS["other keys and hooks"], style))

    cs.install(settings, emit)

    assert settings.read_bytes() == styled(load(settings), style)


def test_windows_line_endings_are_kept(settings: Path, emit: str) -> None:
    settings.parent.mkdir()
    data = styled(ORIGINALS["other keys and hooks"], "4 spaces").replace(b"\n", b"\r\n")
    settings.write_bytes(data)

    cs.install(settings, emit)
    installed = settings.read_bytes()
    assert installed.count(b"\n") == installed.count(b"\r\n") > data.count(b"\n")
    cs.uninstall(settings)

    assert settings.read_bytes() == data


@pytest.mark.parametrize("ensure_ascii", [True, False])
def test_non_ascii_text_is_written_as_the_file_writes_it(
    settings: Path, tmp_path: Path, ensure_ascii: bool
) -> None:
    settings.parent.mkdir()
    data = json.dumps({"env": {"NAME": "bär"}}, indent=2, ensure_ascii=ensure_ascii).encode()
    settings.write_bytes(data)
    command = shlex.quote(str(tmp_path / "bär" / "agentwatch-emit"))

    cs.install(settings, command)

    text = settings.read_text(encoding="utf-8")
    assert text.isascii() == ensure_ascii
    assert own_handlers(load(settings), "Stop")[0]["command"] == command
    cs.uninstall(settings)
    assert settings.read_bytes() == data


HAND_FORMATTED = """{
    "model" : "opus",
    "permissions": { "allow": ["Bash(ls:*)", "Read"],   "deny": [] },
    "env": {"RATIO": 1.50, "BIG": 1e400, "NAME": "b\\u00e4r", "EMPTY": { }},

    "hooks": {
        "PreToolUse": [ { "matcher": "Bash", "hooks": [ {"type": "command", "command": "x"} ] } ],
        "Stop": [
            { "hooks": [{"type": "command", "command": "agentwatch-emit"}, {"type":"command","command":"y"}] }
        ]
    }
}
"""


def test_only_agentwatch_handlers_change_in_a_hand_formatted_file(settings: Path, emit: str) -> None:
    """Numbers, escapes, spacing and one-line arrays the user wrote keep their bytes: only our
    handlers are added (in the file's style, on the line of a one-line array) or removed (here the
    old one in Stop is replaced, so uninstall removes it)."""
    settings.parent.mkdir()
    settings.write_text(HAND_FORMATTED)

    cs.install(settings, emit)

    installed = settings.read_text()
    head = HAND_FORMATTED[: HAND_FORMATTED.index('"hooks"')]
    assert installed.startswith(head)
    ours = f'{{"hooks" : [{{"type" : "command", "command" : {json.dumps(emit)}, "timeout" : 5}}]}}'
    theirs = '{ "matcher": "Bash", "hooks": [ {"type": "command", "command": "x"} ] }'
    assert f"[ {theirs}, {ours} ]," in installed
    assert '{ "hooks": [{"type":"command","command":"y"}] }' in installed
    assert installed.endswith("\n    }\n}\n")

    cs.uninstall(settings)

    expected = HAND_FORMATTED.replace('{"type": "command", "command": "agentwatch-emit"}, ', "")
    assert settings.read_text() == expected


def test_only_agentwatch_handlers_change_in_any_original(settings: Path, emit: str) -> None:
    for name, original in ORIGINALS.items():
        write_json(settings, original, indent=2)
        cs.install(settings, emit, timeout=3)
        assert ordered(cs.strip(load(settings))) == ordered(original), name
        cs.install(settings, emit, timeout=4, async_=True)
        assert ordered(cs.strip(load(settings))) == ordered(original), name


# -- writing ----------------------------------------------------------------------------------


def test_the_first_change_backs_up_the_users_original(settings: Path, emit: str) -> None:
    data = write_json(settings, {"model": "sonnet"})

    message = cs.install(settings, emit)

    assert original_of(settings).read_bytes() == data
    assert message.endswith(f"in {settings} (backup: {original_of(settings)})")
    assert backups(settings) == ["settings.json.agentwatch-original"]


def test_install_then_uninstall_keeps_the_users_original(
    settings: Path, emit: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The reported bug: the one backup was overwritten by uninstall with the installed version."""
    stamps(monkeypatch, "20261123T103000Z")
    data = write_json(settings, {"model": "sonnet"})
    cs.install(settings, emit)
    installed = settings.read_bytes()

    message = cs.uninstall(settings)

    stamped = settings.with_name("settings.json.agentwatch-backup-20261123T103000Z")
    assert message.endswith(f"in {settings} (backup: {stamped})")
    assert original_of(settings).read_bytes() == data
    assert stamped.read_bytes() == installed


def test_install_reinstall_and_uninstall_leave_the_original_recoverable(
    settings: Path, emit: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    stamps(monkeypatch, "20261123T103000Z", "20261123T103001Z")
    data = write_json(settings, ORIGINALS["other keys and hooks"], indent=2)

    cs.install(settings, emit)
    cs.install(settings, emit, timeout=9)
    cs.uninstall(settings)

    assert original_of(settings).read_bytes() == data
    assert backups(settings) == [
        "settings.json.agentwatch-original",
        "settings.json.agentwatch-backup-20261123T103000Z",
        "settings.json.agentwatch-backup-20261123T103001Z",
    ]


def test_each_change_has_its_own_backup_with_a_counter_within_a_second(
    settings: Path, emit: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    stamps(monkeypatch, "20261123T103000Z")
    write_json(settings, {"model": "sonnet"})
    cs.install(settings, emit)
    states = [settings.read_bytes()]
    messages = []
    for timeout in (7, 8):
        messages.append(cs.install(settings, emit, timeout=timeout))
        states.append(settings.read_bytes())
    messages.append(cs.uninstall(settings))

    names = [f"settings.json.agentwatch-backup-20261123T103000Z{n}" for n in ("", "-2", "-3")]
    assert backups(settings) == ["settings.json.agentwatch-original", *names]
    for name, state, message in zip(names, states, messages, strict=True):
        assert settings.with_name(name).read_bytes() == state
        assert message.endswith(f"(backup: {settings.with_name(name)})")


def test_an_existing_original_backup_is_never_overwritten(
    settings: Path, emit: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    stamps(monkeypatch, "20261123T103000Z")
    data = write_json(settings, {"model": "sonnet"})
    original_of(settings).write_text("the user's file from an earlier install")

    message = cs.install(settings, emit)

    assert original_of(settings).read_text() == "the user's file from an earlier install"
    stamped = settings.with_name("settings.json.agentwatch-backup-20261123T103000Z")
    assert stamped.read_bytes() == data
    assert message.endswith(f"(backup: {stamped})")


def test_only_the_last_timestamped_backups_are_kept(
    settings: Path, emit: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    changes = settingsfile.KEEP_BACKUPS + 3
    stamps(monkeypatch, *(f"20261123T1030{n:02d}Z" for n in range(changes)))
    data = write_json(settings, {"model": "sonnet"})
    others = ["settings.json.agentwatch-backup", "settings.json.agentwatch-backup-notes"]
    for name in others:
        settings.with_name(name).write_text(name)

    for n in range(changes + 1):
        cs.install(settings, emit, timeout=n + 1)

    assert backups(settings) == [
        "settings.json.agentwatch-original",
        *(f"settings.json.agentwatch-backup-20261123T1030{n:02d}Z" for n in range(3, changes)),
    ]
    assert original_of(settings).read_bytes() == data
    for name in others:
        assert settings.with_name(name).read_text() == name


def test_backup_stamps_are_utc_seconds() -> None:
    assert re.fullmatch(r"\d{8}T\d{6}Z", settingsfile.backup_stamp())


def test_backups_keep_the_files_mode(settings: Path, emit: str) -> None:
    write_json(settings, {"env": {"TOKEN": "secret"}})
    settings.chmod(0o600)
    cs.install(settings, emit)
    cs.uninstall(settings)
    for name in backups(settings):
        assert stat.S_IMODE(settings.with_name(name).stat().st_mode) == 0o600


def test_the_file_keeps_its_mode_and_no_temporary_file_is_left(settings: Path, emit: str) -> None:
    write_json(settings, {})
    settings.chmod(0o600)

    cs.install(settings, emit)

    assert stat.S_IMODE(settings.stat().st_mode) == 0o600
    assert sorted(p.name for p in settings.parent.iterdir()) == [
        "settings.json",
        "settings.json.agentwatch-original",
    ]


def test_a_symlinked_settings_file_stays_a_symlink(tmp_path: Path, emit: str) -> None:
    real = tmp_path / "dotfiles" / "claude-settings.json"
    write_json(real, {"model": "opus"})
    link = tmp_path / ".claude" / "settings.json"
    link.parent.mkdir()
    link.symlink_to(real)

    cs.install(link, emit)

    assert link.is_symlink()
    assert load(real)["model"] == "opus"
    assert "PreToolUse" in load(real)["hooks"]


def test_an_empty_file_counts_as_an_empty_object(settings: Path, emit: str) -> None:
    settings.parent.mkdir()
    settings.write_text("\n")
    cs.install(settings, emit)
    assert list(load(settings)["hooks"]) == list(cs.REGISTERED_EVENTS)


# -- dry run ----------------------------------------------------------------------------------


def test_dry_run_install_shows_a_diff_and_writes_nothing(settings: Path, emit: str) -> None:
    data = write_json(settings, {"model": "opus"}, indent=2)

    diff = cs.install(settings, emit, dry_run=True)

    assert settings.read_bytes() == data
    assert backups(settings) == []
    lines = diff.splitlines()
    assert lines[0] == f"--- {settings}"
    assert lines[1] == f"+++ {settings}"
    assert '+  "hooks": {' in lines
    assert '+    "PreToolUse": [' in lines
    assert not any("WorktreeCreate" in line for line in lines)


def test_dry_run_into_a_missing_file_creates_nothing(settings: Path, emit: str) -> None:
    diff = cs.install(settings, emit, dry_run=True)
    assert diff.startswith(f"--- /dev/null\n+++ {settings}\n")
    assert not settings.parent.exists()


def test_dry_run_says_when_nothing_would_change(settings: Path, emit: str) -> None:
    cs.install(settings, emit)
    assert cs.install(settings, emit, dry_run=True) == "no change"
    assert cs.uninstall(settings.with_name("absent.json"), dry_run=True) == "no change"


def test_dry_run_uninstall_shows_what_would_go(settings: Path, emit: str) -> None:
    write_json(settings, {}, indent=2)
    cs.install(settings, emit)
    data = settings.read_bytes()
    names = backups(settings)

    diff = cs.uninstall(settings, dry_run=True)

    assert settings.read_bytes() == data
    assert backups(settings) == names
    assert '-    "SessionStart": [' in diff.splitlines()
    assert "+{}" in diff.splitlines()


# -- files we refuse --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "line", "column"),
    [
        ('{\n  // the model\n  "model": "opus"\n}\n', 2, 3),
        ('{\n  "model": "opus", /* pinned */\n  "theme": "dark"\n}\n', 2, 20),
        ("// settings\n{}\n", 1, 1),
    ],
)
def test_json_with_comments_is_refused_untouched(
    settings: Path, emit: str, text: str, line: int, column: int
) -> None:
    settings.parent.mkdir()
    settings.write_text(text)
    data = settings.read_bytes()

    actions: list[Callable[[], str]] = [lambda: cs.install(settings, emit), lambda: cs.uninstall(settings)]
    for action in actions:
        with pytest.raises(cs.SettingsError) as caught:
            action()
        message = str(caught.value)
        assert str(settings) in message
        assert f"line {line}, column {column}" in message
        assert "comment" in message
        assert "left untouched" in message
        assert "agentwatch hooks print" in message

    assert settings.read_bytes() == data
    assert backups(settings) == []


@pytest.mark.parametrize(
    ("text", "line", "column"),
    [('{\n  "model": "opus",\n}\n', 3, 1), ('{"model": "opus"', 1, 17), ("\ufeff{}", 1, 1)],
)
def test_invalid_json_is_refused_untouched(
    settings: Path, emit: str, text: str, line: int, column: int
) -> None:
    settings.parent.mkdir()
    settings.write_bytes(text.encode())
    data = settings.read_bytes()

    with pytest.raises(cs.SettingsError) as caught:
        cs.install(settings, emit)

    message = str(caught.value)
    assert message.startswith(f"{settings}: line {line}, column {column}: the file is not valid JSON")
    assert "left untouched" in message
    assert settings.read_bytes() == data
    assert backups(settings) == []


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ([], "the top-level value is a list, not an object"),
        ("text", "the top-level value is a string, not an object"),
        ({"hooks": []}, '"hooks" is a list, not an object'),
        ({"hooks": None}, '"hooks" is a null, not an object'),
        ({"hooks": {"Stop": {"hooks": []}}}, '"hooks.Stop" is a object, not a list'),
    ],
)
def test_settings_of_the_wrong_shape_are_refused_untouched(
    settings: Path, emit: str, value: Any, expected: str
) -> None:
    data = write_json(settings, value)

    with pytest.raises(cs.SettingsError) as caught:
        cs.install(settings, emit)

    assert str(caught.value).startswith(f"{settings}: ")
    assert expected in str(caught.value)
    assert "left untouched" in str(caught.value)
    assert settings.read_bytes() == data


def test_a_hooks_value_of_the_wrong_shape_is_refused_by_uninstall(settings: Path) -> None:
    data = write_json(settings, {"hooks": ["agentwatch-emit"]})
    with pytest.raises(cs.SettingsError, match="not an object"):
        cs.uninstall(settings)
    assert settings.read_bytes() == data


def test_a_file_that_is_not_utf8_is_refused_untouched(settings: Path, emit: str) -> None:
    settings.parent.mkdir()
    settings.write_bytes(b'{"model": "\xff"}')
    with pytest.raises(cs.SettingsError, match="not UTF-8"):
        cs.install(settings, emit)
    assert settings.read_bytes() == b'{"model": "\xff"}'


# -- scopes and the default command ---------------------------------------------------------


def test_user_scope_follows_claude_config_dir(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", str(tmp_path / "cfg"))
    assert cs.settings_path("user") == tmp_path / "cfg" / "settings.json"
    assert cs.settings_path() == tmp_path / "cfg" / "settings.json"


def test_user_scope_defaults_to_the_home_directory(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("CLAUDE_CONFIG_DIR", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    assert cs.settings_path("user") == tmp_path / ".claude" / "settings.json"


def test_project_and_local_scopes(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    assert cs.settings_path("project", tmp_path) == tmp_path / ".claude" / "settings.json"
    assert cs.settings_path("local", tmp_path) == tmp_path / ".claude" / "settings.local.json"
    monkeypatch.chdir(tmp_path)
    assert cs.settings_path("project") == tmp_path / ".claude" / "settings.json"
    assert cs.settings_path("local", "sub") == tmp_path / "sub" / ".claude" / "settings.local.json"
    with pytest.raises(cs.SettingsError, match="unknown scope"):
        cs.settings_path("managed")


def fake_executable(directory: Path, name: str) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / name
    path.write_text("#!/bin/sh\nexit 0\n")
    path.chmod(0o755)
    return path


def test_default_command_prefers_the_emit_beside_the_interpreter(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    venv_bin = tmp_path / "a venv" / "bin"
    emit_path = fake_executable(venv_bin, "agentwatch-emit")
    fake_executable(tmp_path / "path", "agentwatch-emit")
    monkeypatch.setattr(sys, "executable", str(venv_bin / "python"))
    monkeypatch.setenv("PATH", str(tmp_path / "path"))

    command = cs.default_command()

    assert command == shlex.quote(str(emit_path))
    assert shlex.split(command) == [str(emit_path)]


def test_default_command_falls_back_to_path(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    on_path = fake_executable(tmp_path / "path", "agentwatch-emit")
    monkeypatch.setattr(sys, "executable", str(tmp_path / "bare" / "python"))
    monkeypatch.setenv("PATH", str(tmp_path / "path"))
    assert cs.default_command() == str(on_path)


def test_default_command_missing_is_a_clear_error(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(sys, "executable", str(tmp_path / "bare" / "python"))
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    with pytest.raises(cs.SettingsError, match=r"cannot find agentwatch-emit .* pass --command"):
        cs.default_command()


def fake_script(directory: Path, interpreter: str) -> Path:
    """An agentwatch-emit as pip installs it: its `#!` line names `interpreter`."""
    directory.mkdir(parents=True, exist_ok=True)
    script = directory / "agentwatch-emit"
    script.write_text(f"#!{interpreter}\nimport sys\n")
    script.chmod(0o755)
    return script


def test_the_command_starts_the_scripts_python_isolated_with_the_stop_signals_ignored(tmp_path: Path) -> None:
    python = fake_executable(tmp_path / "venv" / "bin", "python3")
    script = fake_script(tmp_path / "venv" / "bin", str(python))

    command = cs.hook_command(str(script))

    assert command == f"trap '' HUP INT TERM; exec {python} -IS {script}"
    assert cs.is_agentwatch_command(command)
    assert cs.make_handler(command)["command"] == command


@pytest.mark.parametrize("first_line", ["#!/usr/bin/env python3", "#!/bin/sh", "#!{missing}", "import sys"])
def test_a_script_without_its_own_python_is_registered_as_it_is(tmp_path: Path, first_line: str) -> None:
    script = tmp_path / "bin" / "agentwatch-emit"
    script.parent.mkdir()
    script.write_text(first_line.format(missing=tmp_path / "gone" / "python3") + "\n")
    assert cs.hook_command(str(script)) == str(script)


def test_only_the_commands_own_launch_form_is_recognised() -> None:
    ours = "trap '' HUP INT TERM; exec /v/bin/python3 -IS /v/bin/agentwatch-emit"
    assert cs.is_agentwatch_command(ours)
    assert not cs.is_agentwatch_command(ours.replace("agentwatch-emit", "other-tool"))
    assert not cs.is_agentwatch_command(ours.replace("-IS", "-c"))
    assert not cs.is_agentwatch_command(ours + " --extra")
    assert not cs.is_agentwatch_command("trap '' TERM; exec /v/bin/python3 -IS /v/bin/agentwatch-emit")


def test_the_command_runs_the_compiled_script_while_it_is_newer_where_the_python_is_this_one(
    settings: Path, tmp_path: Path
) -> None:
    """A script whose `#!` names this interpreter, in an installation with its site-packages:
    the command runs the script as the hook compiled it (emitter/bundle.py) while that file is
    newer than the script, the script otherwise; each with the harness's flag."""
    root = tmp_path / "venv"
    site = root / "lib" / f"python{sys.version_info[0]}.{sys.version_info[1]}" / "site-packages"
    site.mkdir(parents=True)
    script = fake_script(root / "bin", sys.executable)
    compiled = site / "__pycache__" / f"agentwatch-emit.{sys.implementation.cache_tag}.pyc"

    command = cs.hook_command(str(script))

    plain = f"exec {shlex.join([sys.executable, '-IS', str(script)])}"
    assert command == (
        f"trap '' HUP INT TERM; [ {compiled} -nt {script} ] && exec {sys.executable} -IS {compiled}; {plain}"
    )
    assert cs.is_agentwatch_command(command)
    codex = cs.hook_command(str(script), "codex")
    assert cs.with_harness(command, "codex") == codex and cs.is_agentwatch_command(codex)
    assert codex.count("--harness codex") == 2, "both runs name the harness"
    assert not cs.is_agentwatch_command(command.replace(" -nt ", " -ot "))
    assert not cs.is_agentwatch_command(command.replace(str(compiled), "/elsewhere/other.pyc"))
    assert not cs.is_agentwatch_command(command + " --extra")
    original = write_json(settings, {"hooks": {"Stop": [{"hooks": [OTHER_TOOL]}]}}, indent=2)
    cs.install(settings, command)
    assert own_handlers(load(settings), "Stop") == [{"type": "command", "command": command, "timeout": 5}]
    cs.uninstall(settings)
    assert settings.read_bytes() == original
    (site.parent.parent.parent / "lib").rename(root / "gone")
    assert cs.hook_command(str(script)) == f"trap '' HUP INT TERM; {plain}", "no site-packages: the script"


def test_install_replaces_a_plain_registration_with_the_launch_form_and_uninstall_removes_it(
    settings: Path, tmp_path: Path
) -> None:
    python = fake_executable(tmp_path / "venv" / "bin", "python3")
    script = fake_script(tmp_path / "venv" / "bin", str(python))
    original = write_json(settings, {"hooks": {"Stop": [{"hooks": [OTHER_TOOL]}]}}, indent=2)
    cs.install(settings, str(script))
    cs.install(settings, cs.hook_command(str(script)))
    handlers = own_handlers(load(settings), "Stop")
    assert handlers == [{"type": "command", "command": cs.hook_command(str(script)), "timeout": 5}]
    cs.uninstall(settings)
    assert settings.read_bytes() == original


def test_default_command_starts_the_installed_script_with_its_python(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    venv_bin = tmp_path / "venv" / "bin"
    python = fake_executable(venv_bin, "python")
    script = fake_script(venv_bin, str(python))
    monkeypatch.setattr(sys, "executable", str(python))
    assert cs.default_command() == f"trap '' HUP INT TERM; exec {python} -IS {script}"


# -- print ------------------------------------------------------------------------------------


def test_snippet_is_the_json_install_merges(settings: Path, emit: str) -> None:
    block = json.loads(cs.snippet(emit, timeout=4, async_=True))
    cs.install(settings, emit, timeout=4, async_=True)
    assert block == load(settings)
    assert list(block["hooks"]) == list(cs.REGISTERED_EVENTS)


# -- command line -----------------------------------------------------------------------------


def run(argv: list[str]) -> int:
    """The agentwatch command line, in this process."""
    assert argv[0] == "hooks"
    return main(argv)


def test_cli_install_print_and_uninstall(
    tmp_path: Path, emit: str, capsys: pytest.CaptureFixture[str]
) -> None:
    project = tmp_path / "proj"
    where = ["--scope", "project", "--project-dir", str(project)]
    path = project / ".claude" / "settings.json"

    assert run(["hooks", "install", *where, "--timeout", "3", "--async", "--command", emit]) == 0
    out, err = capsys.readouterr()
    assert out == f"Claude Code: installed agentwatch hooks for 31 events in {path} (new file)\n"
    assert err == ""
    assert own_handlers(load(path), "Stop") == [
        {"type": "command", "command": emit, "timeout": 3, "async": True}
    ]

    assert run(["hooks", "print", "--command", emit, "--timeout", "3", "--async"]) == 0
    out, _ = capsys.readouterr()
    assert json.loads(out) == load(path)

    assert run(["hooks", "uninstall", *where, "--dry-run"]) == 0
    out, _ = capsys.readouterr()
    assert out.startswith(f"--- {path}\n")
    assert own_handlers(load(path), "Stop")

    assert run(["hooks", "uninstall", *where]) == 0
    out, _ = capsys.readouterr()
    assert out == (
        f"Claude Code: removed agentwatch hooks from 31 events in {path}: deleted the file and the "
        f"directories {path.parent} and {project}, which install had created\n"
    )
    assert not project.exists()


def test_cli_defaults_to_user_scope_and_the_installed_emit(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    venv_bin = tmp_path / "venv" / "bin"
    emit_path = fake_executable(venv_bin, "agentwatch-emit")
    monkeypatch.setattr(sys, "executable", str(venv_bin / "python"))
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", str(tmp_path / "cfg"))
    # No other agent on this "machine": its home and PATH hold none.
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("PATH", str(tmp_path / "nothing"))
    monkeypatch.delenv("CODEX_HOME", raising=False)
    monkeypatch.delenv("GEMINI_CLI_HOME", raising=False)

    assert run(["hooks", "install"]) == 0

    path = tmp_path / "cfg" / "settings.json"
    assert (
        capsys.readouterr().out
        == f"Claude Code: installed agentwatch hooks for 31 events in {path} (new file)\n"
    )
    assert own_handlers(load(path), "PreToolUse") == [
        {"type": "command", "command": str(emit_path), "timeout": 5}
    ]


def test_cli_installs_for_every_harness_found_and_names_each(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A machine with Codex's and Gemini's folders (and no codex binary): each gets its hooks, each
    line names its harness, and Codex's says its hooks are not trusted yet and what to do."""
    venv_bin = tmp_path / "venv" / "bin"
    emit_path = fake_executable(venv_bin, "agentwatch-emit")
    monkeypatch.setattr(sys, "executable", str(venv_bin / "python"))
    home = tmp_path / "home"
    for folder in (".claude", ".codex", ".gemini"):
        (home / folder).mkdir(parents=True)
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("PATH", str(tmp_path / "nothing"))
    for name in ("CLAUDE_CONFIG_DIR", "CODEX_HOME", "GEMINI_CLI_HOME"):
        monkeypatch.delenv(name, raising=False)
    config = home / ".codex" / "config.toml"
    config.write_text('model = "gpt-5.5"\n')

    assert run(["hooks", "install"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [line.split(":")[0] for line in lines] == ["Claude Code", "Codex CLI", "Codex CLI", "Gemini CLI"]
    assert "NOT TRUSTED YET: no `codex` on PATH" in lines[2] and "/hooks" in lines[2]
    codex = load(home / ".codex" / "hooks.json")
    assert own_handlers(codex, "Stop") == [
        {"type": "command", "command": f"{emit_path} --harness codex", "timeout": 5}
    ]
    gemini = load(home / ".gemini" / "settings.json")
    assert gemini["hooks"]["AfterTool"][0]["hooks"][0]["timeout"] == 5000
    assert config.read_text() == 'model = "gpt-5.5"\n'

    assert run(["hooks", "uninstall"]) == 0
    assert not (home / ".codex" / "hooks.json").exists() and not (home / ".gemini" / "settings.json").exists()


def test_cli_reports_a_broken_file_with_exit_code_2(
    tmp_path: Path, emit: str, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / ".claude" / "settings.local.json"
    path.parent.mkdir()
    path.write_text('{\n  "a": 1 // note\n}\n')
    data = path.read_bytes()

    code = run(["hooks", "install", "--scope", "local", "--project-dir", str(tmp_path), "--command", emit])

    out, err = capsys.readouterr()
    assert code == 2
    assert out == ""
    assert err.startswith(f"agentwatch: {path}: line 2, column 10: ")
    assert err.count("\n") == 1
    assert path.read_bytes() == data


def test_cli_rejects_a_bad_timeout(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as caught:
        run(["hooks", "print", "--command", "agentwatch-emit", "--timeout", "0"])
    assert caught.value.code == 2
    assert "seconds >= 1" in capsys.readouterr().err


def test_cli_dry_run_changes_nothing(tmp_path: Path, emit: str, capsys: pytest.CaptureFixture[str]) -> None:
    where = ["--scope", "project", "--project-dir", str(tmp_path)]
    assert run(["hooks", "install", *where, "--command", emit, "--dry-run"]) == 0
    assert "+++ " in capsys.readouterr().out
    assert not (tmp_path / ".claude").exists()
    assert os.listdir(tmp_path) == []


DUPLICATED = (
    '{\n  "model": "opus",\n  "hooks": {\n    "Stop": [{"hooks": [{"type": "command", "command": "a"}]}],\n'
    '    "Stop": [{"hooks": [{"type": "command", "command": "b"}]}]\n  },\n  "model": "sonnet"\n}\n'
)


@pytest.mark.parametrize("harness", ["claude", "gemini"])
def test_a_settings_file_with_a_repeated_key_is_refused_untouched(tmp_path: Path, harness: str) -> None:
    """A rewrite could not keep both members of a repeated key (the changed object was written
    afresh, the last one winning): install then uninstall no longer gave back the file. Such a file
    is refused, byte for byte as it was, with one line that says which key to fix; once fixed,
    the round trip is exact again."""
    home = tmp_path / "home"
    path = home / (".claude" if harness == "claude" else ".gemini") / "settings.json"
    path.parent.mkdir(parents=True)
    path.write_text(DUPLICATED)
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith(("AGENTWATCH_", "GENIE_"))},
        "HOME": str(home),
        "GEMINI_CLI_HOME": str(home),
    }
    emit = str(Path(sys.executable).parent / "agentwatch-emit")

    def hooks(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "agentwatch", "hooks", *args, "--harness", harness],
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )

    for args in (("install", "--command", emit), ("uninstall",)):
        refused = hooks(*args)
        assert refused.returncode != 0, refused.stdout
        lines = refused.stderr.strip().splitlines()
        assert len(lines) == 1 and '"Stop" appears twice' in lines[0] and "left untouched" in lines[0], lines
        assert path.read_text() == DUPLICATED
        assert sorted(p.name for p in path.parent.iterdir()) == ["settings.json"], (
            "no backup, nothing written"
        )

    fixed = DUPLICATED.replace(
        '    "Stop": [{"hooks": [{"type": "command", "command": "a"}]}],\n', ""
    ).replace(',\n  "model": "sonnet"', "")
    path.write_text(fixed)
    assert hooks("install", "--command", emit).returncode == 0
    assert path.read_text() != fixed
    assert hooks("uninstall").returncode == 0
    assert path.read_text() == fixed
