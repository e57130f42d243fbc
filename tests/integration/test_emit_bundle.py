"""The hook's modules from one file (emitter/bundle.py): a run started as `hooks install`
registers it (-I -S) loads them from there when the file is as new as their sources, imports them
as usual when it is not (a source edited, the file damaged), and then writes the file anew; the
event is kept either way.

Each test runs its own copy of the installation (the script in bin/, the package in
lib/pythonX.Y/site-packages/, as pip lays them out), so the file it writes and damages is its own.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import agentwatch
from agentwatch.emitter import bundle
from agentwatch.emitter.settings import hook_command
from tests.conftest import clean_env, free_port, tool

PAYLOAD = json.dumps(
    {
        "session_id": "s-bundle",
        "hook_event_name": "PreToolUse",
        "tool_name": "Bash",
        "tool_input": {"command": "ls"},
    }
).encode()


def installation(tmp_path: Path) -> tuple[Path, Path]:
    """A copy of the installed hook: (its script, the directory that holds its package)."""
    root = tmp_path / "venv"
    home = root / "lib" / f"python{sys.version_info[0]}.{sys.version_info[1]}" / "site-packages"
    shutil.copytree(
        Path(agentwatch.__file__).parent, home / "agentwatch", ignore=shutil.ignore_patterns("__pycache__")
    )
    (root / "bin").mkdir()
    script = root / "bin" / "agentwatch-emit"
    shutil.copy(tool("agentwatch-emit"), script)
    return script, home


def run(script: Path, tmp_path: Path) -> dict[str, str]:
    """One hook run, the bus down (the event is spooled); {module: what loaded it} from -v."""
    env = clean_env(
        AGENTWATCH_DATA_DIR=str(tmp_path / "data"), AGENTWATCH_NATS_URL=f"nats://127.0.0.1:{free_port()}"
    )
    result = subprocess.run(
        [sys.executable, "-I", "-S", "-v", str(script)],
        input=PAYLOAD,
        env=env,
        capture_output=True,
        check=False,
    )
    assert result.returncode == 0 and result.stdout == b""
    found = re.findall(r"^import '([\w.]+)' # <([\w.]+)", result.stderr.decode(), re.MULTILINE)
    return dict(found)


def spooled(tmp_path: Path) -> int:
    queue = tmp_path / "data" / "spool" / "queue"
    return len(queue.read_bytes().splitlines()) if queue.exists() else 0


def from_bundle(loaded: dict[str, str]) -> set[str]:
    return {name for name, loader in loaded.items() if loader.endswith("BundledModules")}


def test_the_second_run_loads_every_common_module_from_the_file(tmp_path: Path) -> None:
    script, home = installation(tmp_path)
    first = run(script, tmp_path)
    assert from_bundle(first) == set(), "no file yet: imported as usual"
    assert Path(bundle.bundle_path(str(home))).is_file(), "written once the run was done"
    second = run(script, tmp_path)
    ours = {name for name in second if name.split(".")[0] == "agentwatch"}
    assert from_bundle(second) == ours == set(bundle.MODULES)
    assert "__future__" not in second, "the future statements are compiler flags in the file"
    assert spooled(tmp_path) == 2, "each run's event kept"


def test_an_edited_source_is_imported_from_itself_and_the_file_made_anew(tmp_path: Path) -> None:
    script, home = installation(tmp_path)
    run(script, tmp_path)
    wire = home / "agentwatch" / "emitter" / "wire.py"
    wire.write_text(wire.read_text() + "\nEDITED = True\n")
    loaded = run(script, tmp_path)
    assert from_bundle(loaded) == set(), "a file older than a source is not used at all"
    assert loaded["agentwatch.emitter.wire"].endswith("SourceFileLoader")
    written = bundle.bundle_path(str(home))
    assert b"EDITED" in Path(written).read_bytes(), "made anew from the edited source"
    assert from_bundle(run(script, tmp_path)) == set(bundle.MODULES)
    assert spooled(tmp_path) == 3


def test_a_damaged_file_is_ignored_and_written_anew(tmp_path: Path) -> None:
    script, home = installation(tmp_path)
    run(script, tmp_path)
    written = Path(bundle.bundle_path(str(home)))
    written.write_bytes(written.read_bytes()[:5000])
    assert from_bundle(run(script, tmp_path)) == set()
    assert from_bundle(run(script, tmp_path)) == set(bundle.MODULES)
    assert spooled(tmp_path) == 3


def test_the_script_reads_the_files_current_format() -> None:
    text = Path(tool("agentwatch-emit")).read_text()
    assert f"_bundle[0] != {bundle.FORMAT}:" in text


def test_the_script_compiled_beside_the_file_is_what_the_registered_command_runs(tmp_path: Path) -> None:
    """The run that writes the file also writes the script compiled (Python runs a `.pyc` without
    compiling it, as it must a script): run directly it loads the modules from the file. The
    command `hooks install` registers runs it while it is newer than the script; a new script (an
    upgrade) is run itself, and its run writes both anew."""
    script, home = installation(tmp_path)
    run(script, tmp_path)
    compiled = Path(bundle.compiled_script_path(str(home)))
    assert compiled.stat().st_mtime_ns > script.stat().st_mtime_ns
    assert from_bundle(run(compiled, tmp_path)) == set(bundle.MODULES)
    command = hook_command(str(script))
    assert f"[ {compiled} -nt {script} ] && exec " in command, command
    script.write_text(script.read_text() + "\n_upgraded = True\n")
    env = clean_env(
        AGENTWATCH_DATA_DIR=str(tmp_path / "data"), AGENTWATCH_NATS_URL=f"nats://127.0.0.1:{free_port()}"
    )
    result = subprocess.run(
        ["/bin/sh", "-c", command], input=PAYLOAD, env=env, capture_output=True, check=False
    )
    assert result.returncode == 0 and result.stdout == b"" and result.stderr == b""
    assert compiled.stat().st_mtime_ns > script.stat().st_mtime_ns, "written anew after the script"
    assert b"_upgraded" in compiled.read_bytes(), "from the new script"
    assert from_bundle(run(compiled, tmp_path)) == set(bundle.MODULES)
    assert spooled(tmp_path) == 4
