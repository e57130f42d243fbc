"""Textual's terminal and web drivers, made to end the dashboard when it is told to, whatever state
Textual is in.

Textual's terminal driver leaves SIGTERM and SIGHUP alone (the process dies on the spot and leaves
the terminal raw, on the alternate screen); its web driver turns SIGTERM and textual-serve's "quit"
into an ExitApp message for the event loop. That loop can stop running anything: a Resize and a
quit that reach the app while it starts (a browser tab closed within a second of opening it) keep
the default screen's message pump busy for good (seen with Textual 8.2: its queue goes round a
Resize and the compositor refresh that laying the screen out defers while the exit holds repaints
back), the queue is never empty, the pump never yields, and neither the exit nor any signal handler
of the loop ever runs again. A plain Textual app under textual-serve does the same: the process
spins at full CPU, its memory growing, until SIGKILL.

These drivers ask the app to exit on SIGTERM and SIGHUP, in a browser tab also on the server's
quit and when the server's pipe closes (the server has gone), and a thread of their own ends the
process `GRACE` seconds later if it is still there. A second signal ends it at once.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import termios
import threading
import time
from asyncio import AbstractEventLoop
from collections.abc import Callable, Mapping
from types import FrameType
from typing import Any

from textual.app import App
from textual.driver import Driver
from textual.drivers.linux_driver import LinuxDriver
from textual.drivers.web_driver import WebDriver

# Seconds the app has to exit on its own once told to end, before the process is ended for it.
GRACE = 0.5
ENDING_SIGNALS = (signal.SIGTERM, signal.SIGHUP)
# What Textual's terminal driver turns on, turned off: mouse reports, bracketed paste, the Kitty
# keyboard protocol, focus reports, the alternate screen; and the cursor shown again.
TERMINAL_RESET = (
    b"\x1b[?1000l\x1b[?1003l\x1b[?1015l\x1b[?1006l\x1b[?2004l\x1b[<u\x1b[?1004l\x1b[?1049l\x1b[?25h"
)
# The driver textual-serve names in TEXTUAL_DRIVER for each tab's process.
TEXTUAL_SERVE_DRIVER = "textual.drivers.web_driver:WebDriver"


class Ending:
    """The end of the dashboard's process: asked for once, by a signal or by the driver, and certain
    `GRACE` seconds later whatever the app is doing, unless its `App.run` has returned by then."""

    def __init__(self, app: App[Any], loop: AbstractEventLoop, last_words: Callable[[], None]) -> None:
        self._app = app
        self._loop = loop
        self._last_words = last_words
        self._asked = threading.Event()
        self._code = 0
        self._before: dict[int, Any] = {}
        threading.Thread(target=self._end_when_asked, name="agentwatch-end", daemon=True).start()

    def catch_signals(self) -> None:
        """While the app runs, SIGTERM and SIGHUP end it (handlers are the main thread's to set)."""
        if threading.current_thread() is not threading.main_thread():
            return
        with contextlib.suppress(NotImplementedError, RuntimeError):
            self._loop.remove_signal_handler(signal.SIGTERM)  # the web driver's, run by the loop
        for sig in ENDING_SIGNALS:
            self._before.setdefault(sig, signal.getsignal(sig))
            signal.signal(sig, self._on_signal)

    def release_signals(self) -> None:
        """The app is done with the screen: the signals do again what they did before it."""
        if threading.current_thread() is threading.main_thread():
            for sig, handler in self._before.items():
                signal.signal(sig, signal.SIG_DFL if handler is None else handler)

    def _on_signal(self, signum: int, _frame: FrameType | None) -> None:
        if self._asked.is_set():
            os._exit(128 + signum)
        self.ask(128 + signum)

    def ask(self, code: int) -> None:
        """Ask the app to exit with `code`; the process ends `GRACE` seconds later if it has not."""
        if self._asked.is_set():
            return
        self._code = code
        self._asked.set()
        with contextlib.suppress(RuntimeError):  # the loop is closed: the exit is under way
            self._loop.call_soon_threadsafe(self._exit_later)

    def _exit_later(self) -> None:
        """In the loop: the exit, after what the app has queued already. An app still starting
        finishes starting first (an exit in the middle of it fails in Textual's Header, exit code 1)."""
        self._app.call_later(self._app.exit, return_code=self._code)

    def _end_when_asked(self) -> None:
        self._asked.wait()
        deadline = time.monotonic() + GRACE
        while time.monotonic() < deadline:
            if self._loop.is_closed():  # App.run has returned: what the process does next is
                return  # its caller's (`up --dashboard` stops its pipeline)
            time.sleep(0.02)
        with contextlib.suppress(Exception):
            self._last_words()
        os._exit(self._code)


class TerminalDriver(LinuxDriver):
    """The terminal driver, ending on SIGTERM and SIGHUP; ended by the deadline, it gives the
    terminal back as it found it."""

    _ending: Ending | None = None

    def start_application_mode(self) -> None:
        if self._ending is None:  # once: an app resumed after Ctrl+Z starts application mode again
            self._ending = Ending(self._app, self._loop, self._restore_terminal)
        super().start_application_mode()  # type: ignore[no-untyped-call]  # Textual leaves it unannotated
        self._ending.catch_signals()

    def stop_application_mode(self) -> None:
        super().stop_application_mode()
        if self._ending is not None:
            self._ending.release_signals()

    def _restore_terminal(self) -> None:
        if self.attrs_before is not None:
            termios.tcsetattr(self.fileno, termios.TCSANOW, self.attrs_before)
        if sys.__stderr__ is not None:  # where Textual writes
            os.write(sys.__stderr__.fileno(), TERMINAL_RESET)


class BrowserDriver(WebDriver):
    """textual-serve's web driver, ending on SIGTERM and SIGHUP, on the server's quit (the tab has
    gone) and when its pipe from the server closes (the server has gone)."""

    _ending: Ending | None = None

    def start_application_mode(self) -> None:
        # Before Textual's: its last step starts the thread that reads the server's quit.
        self._ending = Ending(self._app, self._loop, lambda: None)
        super().start_application_mode()
        self._ending.catch_signals()  # after Textual's: it takes SIGTERM for its loop

    def stop_application_mode(self) -> None:
        super().stop_application_mode()
        if self._ending is not None:
            self._ending.release_signals()

    def on_meta(self, packet_type: str, payload: dict[str, object]) -> None:
        if packet_type == "quit" and self._ending is not None:
            self._ending.ask(0)
        else:
            super().on_meta(packet_type, payload)

    def run_input_thread(self) -> None:
        super().run_input_thread()
        if not self.exit_event.is_set() and self._ending is not None:  # the input ended under the app
            self._ending.ask(0)


def ending_driver(environ: Mapping[str, str] = os.environ) -> type[Driver] | None:
    """The driver Textual would choose here, ending as above; None leaves Textual's own choice (a
    driver someone named in TEXTUAL_DRIVER)."""
    named = environ.get("TEXTUAL_DRIVER")
    if named == TEXTUAL_SERVE_DRIVER:
        return BrowserDriver
    return TerminalDriver if named is None else None
