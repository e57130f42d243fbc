"""`agentwatch up --dashboard --demo N`, the README's main command, in a real pseudo-terminal.

The pipeline (nats-server, store, query service) and the demo run as children; the dashboard
shows their traffic; `q` quits the dashboard and stops every child, after the last batch is stored.
"""

from __future__ import annotations

import os
import pty
import re
import select
import signal
import socket
import subprocess
import time
from pathlib import Path

from tests.conftest import clean_env, free_port, tool

ANSI = re.compile(rb"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b[()][0-9A-Za-z]|\x1b[=>]")


def screen_text(raw: bytes) -> str:
    return ANSI.sub(b"", raw).decode("utf-8", "replace")


def test_up_with_dashboard_and_demo_then_quit_stops_everything(tmp_path: Path) -> None:
    port = free_port()
    env = clean_env(
        AGENTWATCH_DATA_DIR=str(tmp_path / "data"),
        AGENTWATCH_NATS_URL=f"nats://127.0.0.1:{port}",
        TERM="xterm-256color",
        COLUMNS="160",
        LINES="48",
    )
    master, slave = pty.openpty()
    os.set_blocking(master, False)
    proc = subprocess.Popen(
        [tool("agentwatch"), "up", "--dashboard", "--demo", "40"],
        stdin=slave,
        stdout=slave,
        stderr=slave,
        env=env,
        start_new_session=True,
    )
    os.close(slave)
    seen = b""

    def read_until(pattern: str, timeout: float) -> str:
        nonlocal seen
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            ready, _, _ = select.select([master], [], [], 0.2)
            if ready:
                try:
                    seen += os.read(master, 65536)
                except OSError:  # the terminal closed: the command ended
                    break
            text = screen_text(seen[-200_000:])
            if re.search(pattern, text):
                return text
        raise AssertionError(
            f"no {pattern!r} on screen after {timeout}s; last output:\n{screen_text(seen[-3000:])}"
        )

    try:
        read_until(r"starting the pipeline", 30)
        read_until(r"● bus nats://127\.0\.0\.1", 90)
        read_until(r"main-[0-9a-f]{8}", 60)  # the demo's lead, in the roster
        read_until(r"PreToolUse", 30)  # and its events, in the feed
        os.write(master, b"q")
        assert proc.wait(timeout=60) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        os.close(master)
    data = tmp_path / "data"
    log = (data / "up.log").read_text()
    assert "stopped:" in log, "the pipeline was stopped cleanly and said what it stored"
    stored = int(re.search(r"stopped: (\d+) events", log).group(1))  # type: ignore[union-attr]
    assert stored > 0
    # nothing left running: no process has the data dir in its command line (nats-server does),
    # and nothing listens on the bus port
    leftovers = subprocess.run(["pgrep", "-af", str(data)], capture_output=True, text=True, check=False)
    assert leftovers.stdout.strip() == "", f"processes left behind: {leftovers.stdout}"
    with socket.socket() as probe:
        assert probe.connect_ex(("127.0.0.1", port)) != 0, "the bus is still up after quitting"


def _nats_children(data: Path) -> list[str]:
    found = subprocess.run(["pgrep", "-af", str(data / "nats")], capture_output=True, text=True, check=False)
    return [line for line in found.stdout.splitlines() if "nats-server" in line]


def _start_up(tmp_path: Path) -> tuple[subprocess.Popen[str], Path, int]:
    port = free_port()
    data = tmp_path / "data"
    env = clean_env(AGENTWATCH_DATA_DIR=str(data), AGENTWATCH_NATS_URL=f"nats://127.0.0.1:{port}")
    proc = subprocess.Popen(
        [tool("agentwatch"), "up"], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    deadline = time.monotonic() + 60
    assert proc.stdout is not None
    for line in proc.stdout:
        if line.startswith("ready in:"):
            break
        assert time.monotonic() < deadline, "agentwatch up did not get ready"
    assert _nats_children(data), "up started its nats-server"
    return proc, data, port


def _gone(data: Path, timeout: float = 15.0) -> bool:
    deadline = time.monotonic() + timeout
    while _nats_children(data):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.1)
    return True


def test_a_closed_terminal_stops_up_like_sigterm(tmp_path: Path) -> None:
    proc, data, _ = _start_up(tmp_path)
    proc.send_signal(signal.SIGHUP)
    out, _ = proc.communicate(timeout=60)
    assert proc.returncode == 0 and "stopped:" in out, out
    assert _gone(data), "nats-server stopped with up"


def test_nats_server_does_not_outlive_a_killed_up(tmp_path: Path) -> None:
    proc, data, port = _start_up(tmp_path)
    proc.kill()
    proc.wait(timeout=30)
    assert proc.stdout is not None
    proc.stdout.close()
    assert _gone(data), f"nats-server left running after up was killed: {_nats_children(data)}"
    with socket.socket() as probe:
        assert probe.connect_ex(("127.0.0.1", port)) != 0
