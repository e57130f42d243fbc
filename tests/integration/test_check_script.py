"""scripts/venv.sh, the first step of the README's test command: a .venv made by another
interpreter is made anew, one made by this interpreter is kept."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.conftest import ROOT, clean_env

SCRIPT = ROOT / "scripts" / "venv.sh"


def run(where: Path) -> subprocess.CompletedProcess[str]:
    env = clean_env(PYTHON=getattr(sys, "_base_executable", sys.executable))
    return subprocess.run(
        ["bash", str(SCRIPT)], cwd=where, env=env, capture_output=True, text=True, timeout=120, check=False
    )


def test_a_venv_of_another_interpreter_is_made_anew(tmp_path: Path) -> None:
    foreign = tmp_path / ".venv" / "bin"
    foreign.mkdir(parents=True)
    (foreign / "python").write_text("#!/bin/sh\necho /usr 3.9.2\n")
    (foreign / "python").chmod(0o755)
    (tmp_path / ".venv" / "left-over").write_text("from the other interpreter")
    result = run(tmp_path)
    assert result.returncode == 0, result.stderr
    assert "made by another interpreter" in result.stderr
    assert not (tmp_path / ".venv" / "left-over").exists()
    python = str(tmp_path / ".venv" / "bin" / "python")
    made = subprocess.run(
        [python, "-c", "import sys; print(sys.version)"], capture_output=True, text=True, check=True
    )
    assert made.stdout.strip() == sys.version


def test_a_venv_of_this_interpreter_is_kept(tmp_path: Path) -> None:
    assert run(tmp_path).returncode == 0
    (tmp_path / ".venv" / "kept").write_text("still here")
    result = run(tmp_path)
    assert result.returncode == 0 and "another interpreter" not in result.stderr
    assert (tmp_path / ".venv" / "kept").exists()
