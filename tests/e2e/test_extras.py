"""Each extra works on its own: the package installed into fresh virtual environments, as a user
would install it (from a wheel of this checkout, dependencies from the package index or pip's cache).

- bare: `agentwatch-emit`, `agentwatch doctor`, `agentwatch spool status`, `agentwatch hooks print`
  run; the commands of other extras say in one line which extra they need;
- [tui]: `agentwatch sql` answers and the dashboard opens against a running bus and store, without
  loading FastStream, chDB or the consumers;
- [consumers]: `agentwatch up` starts, stores an event and stops cleanly.
The pipeline the [tui] venv talks to runs from the development install.
"""

from __future__ import annotations

import json
import os
import shlex
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import ROOT, bus_login, clean_env, free_port, run_emit
from tests.integration.test_store import Service, wait_rows

pytestmark = pytest.mark.slow

PAYLOAD = b'{"hook_event_name": "Stop", "session_id": "extras-test", "cwd": "/tmp"}'


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(out), str(ROOT)],
        check=True,
        capture_output=True,
        timeout=300,
    )
    (found,) = out.glob("agentwatch-*.whl")
    return found


def fresh_venv(where: Path, wheel: Path, extra: str) -> Path:
    """A new virtual environment with agentwatch[extra] installed; returns its bin directory."""
    base = getattr(sys, "_base_executable", sys.executable)
    subprocess.run([base, "-m", "venv", str(where)], check=True, timeout=120)
    target = f"{wheel}[{extra}]" if extra else str(wheel)
    result = subprocess.run(
        [str(where / "bin" / "python"), "-m", "pip", "install", "-q", target],
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    subprocess.run([str(where / "bin" / "python"), "-m", "compileall", "-q", str(where / "lib")], timeout=300,
                   capture_output=True, check=False)  # fmt: skip
    return where / "bin"


def run(
    bin_dir: Path, *args: str, env: dict[str, str], stdin: bytes = b""
) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [str(bin_dir / args[0]), *args[1:]],
        input=stdin,
        env=env,
        capture_output=True,
        timeout=120,
        check=False,
    )


def test_the_bare_install_runs_the_hook_and_its_commands(wheel: Path, tmp_path: Path) -> None:
    bin_dir = fresh_venv(tmp_path / "venv", wheel, "")
    env = clean_env(
        AGENTWATCH_DATA_DIR=str(tmp_path / "data"), AGENTWATCH_NATS_URL=f"nats://127.0.0.1:{free_port()}"
    )
    hook = run(bin_dir, "agentwatch-emit", env=env, stdin=PAYLOAD)
    assert (hook.returncode, hook.stdout) == (0, b""), hook.stderr
    status = run(bin_dir, "agentwatch", "spool", "status", env=env)
    assert status.returncode == 0 and b"pending:  1 event message(s)" in status.stdout, status.stderr
    doctor = run(bin_dir, "agentwatch", "doctor", "--runs", "1", "--timeout", "0.5", env=env)
    assert (
        doctor.returncode == 1 and b"no server answers at" in doctor.stdout and b"hook time:" in doctor.stdout
    )
    printed = run(bin_dir, "agentwatch", "hooks", "print", env=env)
    assert printed.returncode == 0 and "Stop" in json.loads(printed.stdout)["hooks"], printed.stderr
    assert_registered_command_runs(json.loads(printed.stdout), bin_dir, env, pending=2)
    needs = [(["sql", "SELECT 1"], "tui"), (["status"], "tui"), (["up"], "consumers"),
             (["store"], "consumers"), (["demo", "--count", "1"], "tui"), (["tui"], "tui"),
             (["web"], "web")]  # fmt: skip
    for command, extra in needs:
        result = run(bin_dir, "agentwatch", *command, env=env)
        err = result.stderr.decode()
        assert result.returncode == 2, (command, err)
        assert f"pip install 'agentwatch[{extra}]'" in err and "Traceback" not in err, (command, err)
        assert len(err.strip().splitlines()) == 1, (command, err)


def assert_registered_command_runs(
    snippet: dict[str, Any], bin_dir: Path, env: dict[str, str], pending: int
) -> None:
    """The command `hooks print` gives runs the hook as Claude Code would (by a shell), without
    `site`: its interpreter under -X importtime shows what the script loaded."""
    (handler,) = snippet["hooks"]["Stop"][0]["hooks"]
    command = handler["command"]
    python, script = str(bin_dir / "python"), str(bin_dir / "agentwatch-emit")
    lib = bin_dir.parent / "lib" / f"python{sys.version_info[0]}.{sys.version_info[1]}"
    compiled = str(
        lib / "site-packages" / "__pycache__" / f"agentwatch-emit.{sys.implementation.cache_tag}.pyc"
    )
    first, _, last = command.rpartition("; exec ")
    words = shlex.split(last)
    assert words == [python, "-IS", script], command  # the script, and first its compiled copy
    assert first == f"trap '' HUP INT TERM; [ {compiled} -nt {script} ] && exec {python} -IS {compiled}", (
        command
    )
    hook = subprocess.run(
        ["/bin/sh", "-c", command], input=PAYLOAD, env=env, capture_output=True, timeout=60, check=False
    )
    assert (hook.returncode, hook.stdout, hook.stderr) == (0, b"", b"")
    status = run(bin_dir, "agentwatch", "spool", "status", env=env)
    assert f"pending:  {pending} event message(s)".encode() in status.stdout, status.stdout
    assert Path(compiled).stat().st_mtime_ns > Path(script).stat().st_mtime_ns, "written by that run"
    for ran in (script, compiled):
        traced = subprocess.run(
            [python, "-X", "importtime", "-IS", ran],
            input=PAYLOAD,
            env=env,
            capture_output=True,
            timeout=60,
            check=False,
        )
        loaded = {line.split(b"|")[-1].strip() for line in traced.stderr.splitlines()}
        assert b"agentwatch.emitter.hook" in loaded and b"site" not in loaded, traced.stderr[-2000:]


def test_an_editable_install_runs_the_registered_command_without_site(tmp_path: Path) -> None:
    """`pip install -e`: the package is found through a .pth file, which -S skips; the script
    reads that file itself."""
    where = tmp_path / "venv"
    base = getattr(sys, "_base_executable", sys.executable)
    subprocess.run([base, "-m", "venv", str(where)], check=True, timeout=120)
    result = subprocess.run(
        [str(where / "bin" / "python"), "-m", "pip", "install", "-q", "-e", str(ROOT)],
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert not (
        where / "lib" / f"python{sys.version_info[0]}.{sys.version_info[1]}" / "site-packages" / "agentwatch"
    ).exists()
    env = clean_env(
        AGENTWATCH_DATA_DIR=str(tmp_path / "data"), AGENTWATCH_NATS_URL=f"nats://127.0.0.1:{free_port()}"
    )
    printed = run(where / "bin", "agentwatch", "hooks", "print", env=env)
    assert printed.returncode == 0, printed.stderr
    assert_registered_command_runs(json.loads(printed.stdout), where / "bin", env, pending=1)


@pytest.fixture
def pipeline(tmp_path: Path) -> Iterator[dict[str, str]]:
    """`agentwatch up` from the development install, with one event stored; yields its environment."""
    env = clean_env(
        AGENTWATCH_DATA_DIR=str(tmp_path / "up"), AGENTWATCH_NATS_URL=f"nats://127.0.0.1:{free_port()}"
    )
    up = Service(["up"], env)
    try:
        up.wait_ready(60)
        # A hook with a data dir of its own: given the hook's login of `up`'s bus.
        hook_env = dict(env, AGENTWATCH_DATA_DIR=str(tmp_path / "hook"), AGENTWATCH_NATS_URL=bus_login(env))
        assert run_emit(PAYLOAD, hook_env).returncode == 0
        wait_rows(env, "SELECT count() AS n FROM events", 1)
        yield env
    finally:
        code, output = up.stop(signal.SIGINT)
        assert code == 0, output


DASHBOARD = """
import asyncio, os, sys
from agentwatch.cli.sources import dashboard_sources
from agentwatch.tui.app import AgentwatchApp

async def main() -> None:
    live, history = dashboard_sources(os.environ)
    app = AgentwatchApp(live, history)
    async with app.run_test(size=(160, 40)) as pilot:
        for _ in range(200):
            await pilot.pause(0.05)
            status = str(app.query_one("#status").render())
            if app.state.bus_ok and "recent events loaded" in status:
                break
        print("STATUS", status)
        print("BUS", app.state.bus_ok)
    collector = {"faststream", "chdb", "pandas", "pyarrow", "aiohttp", "textual_serve"}
    loaded = sorted({m.split(".")[0] for m in sys.modules} & collector)
    loaded += [m for m in sys.modules if m.startswith("agentwatch.consumers")]
    print("LOADED", ",".join(loaded))

asyncio.run(main())
"""


def test_the_tui_extra_opens_the_dashboard_and_runs_sql(
    wheel: Path, tmp_path: Path, pipeline: dict[str, str]
) -> None:
    bin_dir = fresh_venv(tmp_path / "venv", wheel, "tui")
    env = dict(
        pipeline,
        AGENTWATCH_DATA_DIR=str(tmp_path / "operator"),
        AGENTWATCH_NATS_URL=bus_login(pipeline, "dashboard"),
    )
    sql = run(bin_dir, "agentwatch", "sql", "SELECT count() AS n FROM events", "--format", "json", env=env)
    assert sql.returncode == 0 and json.loads(sql.stdout) == [{"n": 1}], sql.stderr
    status = run(bin_dir, "agentwatch", "status", env=env)
    assert status.returncode == 0 and b"1 events" in status.stdout, status.stdout + status.stderr
    shown = run(bin_dir, "python", "-c", DASHBOARD, env=env)
    out = shown.stdout.decode()
    assert shown.returncode == 0, shown.stderr.decode()[-3000:]
    assert "store: 1 recent events loaded" in out and "BUS True" in out, out
    assert "LOADED \n" in out, "the dashboard loaded none of FastStream, chDB, pandas, pyarrow, aiohttp, ..."
    web = run(bin_dir, "agentwatch", "web", env=env)
    assert web.returncode == 2 and b"pip install 'agentwatch[web]'" in web.stderr, web.stderr


ENGINES = """
import importlib.metadata as metadata
for name in ("chdb-core-lite", "chdb-core", "chdb"):
    try:
        print(name, metadata.version(name))
    except metadata.PackageNotFoundError:
        pass
"""


def test_the_consumers_extra_runs_up(wheel: Path, tmp_path: Path) -> None:
    bin_dir = fresh_venv(tmp_path / "venv", wheel, "consumers")
    env = clean_env(
        AGENTWATCH_DATA_DIR=str(tmp_path / "up"), AGENTWATCH_NATS_URL=f"nats://127.0.0.1:{free_port()}"
    )
    # The embedded engine is chDB's lite build alone: neither the 530 MB library of chdb-core nor
    # the `chdb` wrapper (pyproject.toml says why; the README has the sizes).
    engines = run(bin_dir, "python", "-c", ENGINES, env=env)
    assert engines.returncode == 0, engines.stderr
    installed = [line.split()[0] for line in engines.stdout.decode().splitlines()]
    assert installed == ["chdb-core-lite"], engines.stdout
    env["PATH"] = f"{bin_dir}{os.pathsep}{env.get('PATH', '')}"
    up = subprocess.Popen(
        [str(bin_dir / "agentwatch"), "up"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    lines: list[str] = []
    assert up.stdout is not None
    for line in up.stdout:
        lines.append(line)
        if line.startswith("Ctrl-C stops"):
            break
    assert any(line.startswith("nats:        started nats-server") for line in lines), lines
    hook_env = dict(env, AGENTWATCH_DATA_DIR=str(tmp_path / "hook"), AGENTWATCH_NATS_URL=bus_login(env))
    hook = run(bin_dir, "agentwatch-emit", env=hook_env, stdin=PAYLOAD)
    assert hook.returncode == 0
    query = ["agentwatch", "sql", "SELECT count() AS n FROM events", "--format", "jsonl"]
    deadline = time.monotonic() + 30
    while (stored := run(bin_dir, *query, env=env)).stdout != b'{"n":1}\n':
        assert time.monotonic() < deadline, stored
        time.sleep(0.3)
    up.send_signal(signal.SIGINT)
    rest, _ = up.communicate(timeout=60)
    assert up.returncode == 0, "".join(lines) + rest
    assert "stopped: 1 events and 0 messages stored" in rest, rest
