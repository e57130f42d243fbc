"""The dashboard process ends within a second of SIGTERM or SIGHUP, in a terminal and behind
`agentwatch web`, and by itself when its browser tab or its server has gone (tui/drivers.py).

Each test starts the installed `agentwatch tui` the way it runs for real: on a pseudo-terminal, or
with the pipes and the environment textual-serve gives a tab's process. No bus answers: the
dashboard runs all the same, saying so.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import pty
import signal
import struct
import subprocess
import sys
import termios
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import IO

import pytest

from tests.conftest import clean_env, free_port, tool

pytestmark = pytest.mark.slow

WITHIN = 1.0  # seconds from the signal to the end of the process
ALT_SCREEN_ON, ALT_SCREEN_OFF = b"\x1b[?1049h", b"\x1b[?1049l"


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    return clean_env(
        AGENTWATCH_DATA_DIR=str(tmp_path / "data"),
        AGENTWATCH_CONFIG_DIR=str(tmp_path / "config"),
        AGENTWATCH_NATS_URL=f"nats://127.0.0.1:{free_port()}",
        TERM="xterm-256color",
    )


class Output:
    """Everything a process writes to `fd`, read by a thread so that the process never blocks."""

    def __init__(self, fd: int) -> None:
        self.data = b""
        self._fd = fd
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def read_to_the_end(self) -> None:
        """Once the process has ended: the reader has all it wrote (its fd may then be closed)."""
        self._reader.join(10)
        assert not self._reader.is_alive()

    def _read(self) -> None:
        while True:
            try:
                chunk = os.read(self._fd, 65536)
            except OSError:  # the pseudo-terminal's other side closed
                return
            if not chunk:
                return
            self.data += chunk

    def wait_for(self, marker: bytes, timeout: float = 60) -> int:
        """Where `marker` first appears."""
        deadline = time.monotonic() + timeout
        while (at := self.data.find(marker)) < 0:
            assert time.monotonic() < deadline, f"no {marker!r} in {self.data[-2000:]!r}"
            time.sleep(0.02)
        return at


def seconds_to_end(proc: subprocess.Popen[bytes], sig: int) -> float:
    start = time.monotonic()
    os.kill(proc.pid, sig)
    proc.wait(10)
    return time.monotonic() - start


def ended(proc: subprocess.Popen[bytes], output: Output) -> None:
    if proc.poll() is None:
        proc.kill()
    proc.wait(10)
    output.read_to_the_end()


@pytest.fixture
def terminal(env: dict[str, str]) -> Iterator[tuple[subprocess.Popen[bytes], Output]]:
    """The dashboard on a pseudo-terminal of 120x40, up and on its alternate screen."""
    leader, follower = pty.openpty()
    fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 120, 0, 0))
    command = [tool("agentwatch"), "tui"]
    with subprocess.Popen(command, stdin=follower, stdout=follower, stderr=follower, env=env) as proc:
        os.close(follower)
        output = Output(leader)
        try:
            output.wait_for(ALT_SCREEN_ON)
            output.wait_for(b"agents")  # drawn: the app runs
            yield proc, output
        finally:
            ended(proc, output)
            os.close(leader)


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP])
def test_in_a_terminal_a_signal_ends_the_dashboard_and_gives_the_terminal_back(
    terminal: tuple[subprocess.Popen[bytes], Output], sig: signal.Signals
) -> None:
    proc, output = terminal
    on = output.wait_for(ALT_SCREEN_ON)
    took = seconds_to_end(proc, sig)
    assert took < WITHIN, f"{sig.name}: ended after {took:.2f}s"
    assert proc.returncode == 128 + sig, "the app's own exit, with the signal's code"
    output.read_to_the_end()
    assert output.data.rfind(ALT_SCREEN_OFF) > on, "the terminal is back on its main screen"
    print(f"\n{sig.name}: the terminal dashboard ended in {took:.2f}s")


def packet(kind: bytes, payload: bytes) -> bytes:
    """textual-serve's framing of what it sends a tab's process on stdin."""
    return kind + len(payload).to_bytes(4, "big") + payload


def meta(**fields: object) -> bytes:
    return packet(b"M", json.dumps(fields).encode())


@contextlib.contextmanager
def browser_tab(env: dict[str, str]) -> Iterator[tuple[subprocess.Popen[bytes], Output]]:
    """The dashboard as textual-serve starts it for a tab: pipes, and its web driver named in the
    environment (textual_serve/app_service.py)."""
    driver = {"TEXTUAL_DRIVER": "textual.drivers.web_driver:WebDriver", "COLUMNS": "133", "ROWS": "39"}
    command = [sys.executable, "-m", "agentwatch", "tui"]
    pipe, none = subprocess.PIPE, subprocess.DEVNULL
    with subprocess.Popen(command, stdin=pipe, stdout=pipe, stderr=none, env={**env, **driver}) as proc:
        assert proc.stdout is not None
        output = Output(proc.stdout.fileno())
        try:
            yield proc, output
        finally:
            ended(proc, output)


def send(stdin: IO[bytes] | None, data: bytes) -> None:
    assert stdin is not None
    stdin.write(data)
    stdin.flush()


@pytest.mark.parametrize("end", ["SIGTERM", "SIGHUP", "quit", "stdin closed"])
def test_behind_the_web_server_the_dashboard_ends_when_told_or_left(env: dict[str, str], end: str) -> None:
    with browser_tab(env) as (proc, output):
        output.wait_for(b"__GANGLION__\n")  # textual-serve's sign that the app runs
        output.wait_for(ALT_SCREEN_ON)
        time.sleep(1)  # well under way, drawing
        start = time.monotonic()
        if end.startswith("SIG"):
            took = seconds_to_end(proc, signal.Signals[end])
            assert proc.returncode == 128 + signal.Signals[end]
        else:
            if end == "quit":  # what textual-serve sends when the tab has gone
                send(proc.stdin, meta(type="quit"))
            else:  # the server has gone
                assert proc.stdin is not None
                proc.stdin.close()
            proc.wait(10)
            took = time.monotonic() - start
            assert proc.returncode == 0
        assert took < WITHIN, f"{end}: ended after {took:.2f}s"
        print(f"\n{end}: the tab's dashboard ended in {took:.2f}s")


def test_a_tab_gone_while_its_dashboard_starts_ends_it(env: dict[str, str]) -> None:
    """The browser's first resize, then the quit, both before the app is up: with Textual's own web
    driver this leaves the process spinning for good (tui/drivers.py)."""
    with browser_tab(env) as (proc, _output):
        send(proc.stdin, meta(type="resize", width=133, height=44) + meta(type="quit"))
        proc.wait(20)
        assert proc.returncode == 0


STUCK = """
import asyncio, os, sys
from textual.app import App
from agentwatch.tui.drivers import Ending

ending = Ending(App(), asyncio.new_event_loop(), lambda: os.write(1, b"last words\\n"))
ending.catch_signals()
print("stuck", flush=True)
while True:  # like the pump that never yields: the event loop never runs again
    pass
"""


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP])
def test_a_stuck_event_loop_does_not_keep_the_process(sig: signal.Signals) -> None:
    with subprocess.Popen([sys.executable, "-c", STUCK], stdout=subprocess.PIPE) as proc:
        assert proc.stdout is not None
        try:
            assert proc.stdout.readline() == b"stuck\n"
            took = seconds_to_end(proc, sig)
            assert took < WITHIN, f"ended after {took:.2f}s"
            assert proc.returncode == 128 + sig
            assert proc.stdout.read() == b"last words\n", "the driver's undoing ran first"
        finally:
            proc.kill()
