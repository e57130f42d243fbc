"""Every `agentwatch` command in the README's and docs' shell blocks runs as written, against a
running pipeline, in a sandbox home (so `hooks install` writes nowhere real). The SQL blocks of
docs/queries.md run in tests/integration/test_schema.py; the ones written inline here run with
their command. Commands that run until stopped are started, checked, and stopped with Ctrl-C;
`up --dashboard` needs a terminal and is run in one by tests/e2e/test_up_lifecycle.py."""

from __future__ import annotations

import os
import re
import shlex
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from agentwatch.cli import build_parser
from tests.conftest import ROOT, clean_env, free_port
from tests.integration.test_store import Service

pytestmark = pytest.mark.slow

DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
BLOCK = re.compile(r"^```(?:bash|sh)\n(.*?)^```", re.DOTALL | re.MULTILINE)
# Commands that run until stopped: the line they print once they work.
RUNS_UNTIL_STOPPED = {
    "demo": "agentwatch demo: publishing to",
    "up": "Ctrl-C stops",
    "store": "Ctrl-C stops",
    "web": "agentwatch web: the dashboard at",
}
BIN = Path(sys.executable).parent


def documented_commands() -> list[tuple[str, str]]:
    """(where, command line) of every line of a shell block that runs agentwatch."""
    found = []
    for doc in DOCS:
        for block in BLOCK.findall(doc.read_text()):
            for line in block.splitlines():
                command = line.split("  #", 1)[0].strip()
                if command.startswith("agentwatch ") or command == "agentwatch":
                    found.append((f"{doc.relative_to(ROOT)}", command))
    return found


COMMANDS = documented_commands()


def test_the_docs_have_commands_to_check() -> None:
    assert len(COMMANDS) >= 12
    assert all(where for where, _ in COMMANDS)


@pytest.mark.parametrize(("where", "command"), COMMANDS, ids=[c for _, c in COMMANDS])
def test_every_documented_command_parses(where: str, command: str) -> None:
    words = shlex.split(command.split("<", 1)[0])[1:]
    args = build_parser().parse_args(words)
    assert args.command is None or getattr(args, "func", None) is not None, f"{where}: {command}"


@pytest.fixture(scope="module")
def sandbox(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, dict[str, str]]]:
    """A running pipeline with some demo traffic, a home of its own, and a working directory."""
    root = tmp_path_factory.mktemp("docs")
    env = clean_env(
        AGENTWATCH_DATA_DIR=str(root / "data"),
        AGENTWATCH_NATS_URL=f"nats://127.0.0.1:{free_port()}",
        HOME=str(root / "home"),
        CLAUDE_CONFIG_DIR=str(root / "home" / ".claude"),
        PATH=f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}",
    )
    (root / "home").mkdir()
    work = root / "work"
    work.mkdir()
    (work / "slowest-tools.sql").write_text("SELECT tool, count() AS calls FROM tool_calls GROUP BY tool\n")
    up = Service(["up"], env)
    try:
        up.wait_ready(60)
        subprocess.run([str(BIN / "agentwatch"), "demo", "--count", "300", "--rate", "0", "--seed", "3"],
                       env=env, check=True, capture_output=True, timeout=60)  # fmt: skip
        yield work, env
    finally:
        code, output = up.stop(signal.SIGINT)
        assert code == 0, output


def run_until_stopped(command: str, ready: str, env: dict[str, str], cwd: Path) -> None:
    proc = subprocess.Popen(
        ["sh", "-c", f"exec {command}"], cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        text=True, start_new_session=True,
    )  # fmt: skip
    assert proc.stdout is not None
    seen = []
    deadline = time.monotonic() + 60
    for line in proc.stdout:
        seen.append(line)
        if ready in line or time.monotonic() > deadline:
            break
    proc.send_signal(signal.SIGINT)
    rest, _ = proc.communicate(timeout=60)
    output = "".join(seen) + rest
    assert any(ready in line for line in seen), output
    assert proc.returncode == 0 and "Traceback" not in output, output


@pytest.mark.parametrize(("where", "command"), COMMANDS, ids=[c for _, c in COMMANDS])
def test_every_documented_command_runs(
    where: str, command: str, sandbox: tuple[Path, dict[str, str]]
) -> None:
    work, env = sandbox
    words = shlex.split(command.split("<", 1)[0])[1:]
    if "--dashboard" in words or words in ([], ["tui"]):
        return  # a terminal program: tests/e2e/test_up_lifecycle.py and tests/tui run it
    name = words[0]
    if name in RUNS_UNTIL_STOPPED and not {"--count", "--duration"} & set(words):
        own = dict(
            env,
            AGENTWATCH_DATA_DIR=str(work / f"own-{name}"),
            AGENTWATCH_NATS_URL=f"nats://127.0.0.1:{free_port()}",
        )
        run_until_stopped(command, RUNS_UNTIL_STOPPED[name], own if name == "up" else env, work)
        return
    result = subprocess.run(
        ["sh", "-c", command], cwd=work, env=env, capture_output=True, text=True, timeout=120, check=False
    )
    assert result.returncode == 0, (
        f"{where}: `{command}` exited {result.returncode}\n{result.stdout}\n{result.stderr}"
    )
    assert "Traceback" not in result.stderr, result.stderr
