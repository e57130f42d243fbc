"""One browser tab's dashboard process, from its start to its certain end.

textual-serve's `AppService` starts the app through a shell (`create_subprocess_shell`, so a signal
sent to its process reaches `/bin/sh`, not the dashboard) and, when the tab goes, sends it "quit"
and waits for its reader task only: that task ends at the first write to the websocket that has
gone (the ConnectionResetError is swallowed), after which nobody reads the dashboard's output or
waits for it. A dashboard that does not act on the quit runs on, and outlives the server too.

Here each dashboard:

- is exec'd without a shell, as the leader of a new session (its own process group, out of the
  reach of the terminal's Ctrl-C, which is the server's to handle), and on Linux with the kernel's
  parent-death signal set to SIGKILL, so it cannot outlive the server even when the server is
  SIGKILLed;
- has its output read to the end whether or not the tab is still there, so it never blocks on a
  full pipe on its way out;
- is stopped for sure: "quit", then SIGTERM to its process group after `QUIT_WAIT` seconds, then
  SIGKILL after `TERM_WAIT` more, and reaped.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shlex
import signal
import sys
from collections.abc import Callable

from textual_serve.app_service import AppService

QUIT_WAIT = 2.0
TERM_WAIT = 2.0

_PR_SET_PDEATHSIG = 1


def _parent_death_signal() -> Callable[[], None] | None:
    """On Linux, the function a child runs between fork and exec to die (SIGKILL) with this process."""
    if not sys.platform.startswith("linux"):
        return None
    import ctypes

    try:
        # Looked up here, in the parent: the child of a process with threads should do as little
        # as possible before exec (no dlsym, no imports), so it only calls it.
        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None
    server = os.getpid()

    def die_with_server() -> None:
        prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
        if os.getppid() != server:  # the server died before the call: the signal will never come
            os._exit(1)

    return die_with_server


class DashboardProcess(AppService):
    """textual-serve's app service, whose process ends when its tab ends or the server does."""

    _ending: asyncio.Task[None] | None = None

    async def _open_app_process(self, width: int = 80, height: int = 24) -> asyncio.subprocess.Process:
        self._process = process = await asyncio.create_subprocess_exec(
            *shlex.split(self.command),
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            env=self._build_environment(width=width, height=height),
            start_new_session=True,
            preexec_fn=_parent_death_signal(),
        )
        assert process.stdin is not None
        self._stdin = process.stdin
        return process

    @property
    def pid(self) -> int | None:
        return None if self._process is None else self._process.pid

    def ended(self) -> str:
        """How the process ended, for the log."""
        if self._process is None:
            return "no process started"
        code = self._process.returncode
        if code is None:
            return f"process {self.pid} still running"
        how = f"by {signal.Signals(-code).name}" if code < 0 else f"with exit code {code}"
        return f"process {self.pid} ended {how}"

    # A tab that has gone takes nothing with it: what the dashboard still writes is read and dropped
    # (textual-serve's reader would stop at the first failed write, and the pipe fill up).

    async def on_data(self, payload: bytes) -> None:
        with contextlib.suppress(ConnectionResetError):
            await super().on_data(payload)

    async def on_meta(self, data: bytes) -> None:
        with contextlib.suppress(ConnectionResetError):
            await super().on_meta(data)

    async def on_packed(self, payload: bytes) -> None:
        with contextlib.suppress(ConnectionResetError):
            await super().on_packed(payload)

    async def stop(self) -> None:
        """End the dashboard and wait until it has ended; every caller waits for the same ending,
        which a cancelled caller does not interrupt."""
        if self._ending is None:
            self._ending = asyncio.ensure_future(self._end())
        await asyncio.shield(self._ending)

    async def _end(self) -> None:
        process = self._process
        if process is None:
            return
        sure = asyncio.ensure_future(self._make_sure(process))
        try:
            # textual-serve's stop: the tab's downloads cancelled, "quit" sent, its reader waited
            # for, which now reads to the end of the output, that is to the end of the process.
            await super().stop()
        finally:
            await sure

    @staticmethod
    async def _make_sure(process: asyncio.subprocess.Process) -> None:
        for sig, wait in ((signal.SIGTERM, QUIT_WAIT), (signal.SIGKILL, TERM_WAIT)):
            try:
                await asyncio.wait_for(process.wait(), wait)
                return
            except TimeoutError:
                if process.returncode is None:
                    with contextlib.suppress(ProcessLookupError, PermissionError):
                        os.killpg(process.pid, sig)
        await process.wait()
