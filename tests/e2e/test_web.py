"""`agentwatch web` end to end: the whole pipeline with demo traffic, the web server in front, and a
real headless Chromium (Debian's package, driven by Playwright; no browser is downloaded).

What a tab shows is read from what its websocket carried: the dashboard's screen, as the terminal
bytes xterm.js draws on its canvas.
"""

from __future__ import annotations

import contextlib
import http.client
import os
import re
import shutil
import signal
import socket
import struct
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, NamedTuple

import pytest

from tests.conftest import clean_env, free_port, tool, wait_port

pytestmark = pytest.mark.slow

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
MAX_SESSIONS = 2
ANSI = re.compile(rb"\x1b\[[0-9;?]*[A-Za-z]|\x1b[()][A-Z0-9]|\x1b[=>]")


class Web(NamedTuple):
    url: str
    signin: str
    token: str
    host: str
    pid: int
    config: Path
    env: dict[str, str]


def _stop(proc: subprocess.Popen[Any]) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)


@pytest.fixture(scope="module")
def web(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Web]:
    """`agentwatch up`, `agentwatch demo` at 40 events/s and `agentwatch web` on free ports."""
    root = tmp_path_factory.mktemp("web")
    env = clean_env(
        AGENTWATCH_DATA_DIR=str(root / "data"),
        AGENTWATCH_CONFIG_DIR=str(root / "config"),
        AGENTWATCH_NATS_URL=f"nats://127.0.0.1:{free_port()}",
    )
    procs: list[subprocess.Popen[Any]] = []

    def start(name: str, *args: str) -> Path:
        """Run `agentwatch ARGS`, its output to a file (a pipe nobody reads would fill and stop it)."""
        out = root / f"{name}.log"
        with out.open("w") as f:
            procs.append(
                subprocess.Popen([tool("agentwatch"), *args], env=env, stdout=f, stderr=subprocess.STDOUT)
            )
        return out

    def wait_line(log: Path, prefix: str, timeout: float = 90) -> str:
        deadline = time.monotonic() + timeout
        while True:
            found = [line for line in log.read_text().splitlines() if line.strip().startswith(prefix)]
            if found:
                return found[0].strip()
            assert time.monotonic() < deadline, f"no line {prefix!r} in {log.name}: {log.read_text()}"
            time.sleep(0.1)

    try:
        wait_line(start("up", "up"), "ready in:")
        start("demo", "demo", "--rate", "40")
        port = free_port()
        log = start("web", "web", "--port", str(port), "--max-sessions", str(MAX_SESSIONS))
        signin = wait_line(log, f"http://127.0.0.1:{port}/signin?token=")
        wait_port(port, 30)
        token = signin.split("token=", 1)[1]
        yield Web(
            f"http://127.0.0.1:{port}",
            signin,
            token,
            f"127.0.0.1:{port}",
            procs[-1].pid,
            root / "config",
            env,
        )
    finally:
        for proc in reversed(procs):
            _stop(proc)


def request(web: Web, path: str, headers: dict[str, str] | None = None) -> http.client.HTTPResponse:
    host, port = web.host.split(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=10)
    conn.request("GET", path, headers={"Host": web.host, **(headers or {})})
    response = conn.getresponse()
    response.read()
    conn.close()
    return response


def signed_in_cookie(web: Web) -> str:
    response = request(web, "/signin?token=" + web.token)
    assert response.status == 303 and response.getheader("Location") == "/"
    cookie = response.getheader("Set-Cookie") or ""
    assert "HttpOnly" in cookie and "SameSite=Strict" in cookie
    return cookie.split(";", 1)[0]


WEBSOCKET = {"Connection": "Upgrade", "Upgrade": "websocket", "Sec-WebSocket-Version": "13",
             "Sec-WebSocket-Key": "dGhlIHNhbXBsZSBub25jZQ=="}  # fmt: skip


def test_nothing_answers_without_the_token_or_from_another_site(web: Web) -> None:
    assert (web.config / "web-token").stat().st_mode & 0o777 == 0o600
    for path in ("/", "/ws", "/static/js/textual.js"):
        response = request(web, path)
        assert response.status == 401, path
        assert response.getheader("Access-Control-Allow-Origin") is None
    assert request(web, "/ws", WEBSOCKET).status == 401, "the websocket too"
    assert request(web, "/signin?token=not-the-token").status == 401
    cookie = {"Cookie": signed_in_cookie(web)}
    page = request(web, "/", cookie)
    assert page.status == 200
    assert page.getheader("Access-Control-Allow-Origin") is None, "no CORS header, ever"
    assert page.getheader("X-Frame-Options") == "DENY"
    foreign = {**cookie, "Origin": "http://evil.example"}
    assert request(web, "/", foreign).status == 403
    assert request(web, "/ws", {**foreign, **WEBSOCKET}).status == 403, "another page cannot drive it"
    assert request(web, "/", {**cookie, "Host": "rebound.example:80"}).status == 421, "DNS rebinding"


def descendants(pid: int) -> set[int]:
    """Processes below `pid` whose command line runs the dashboard."""
    parents: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                parents[int(entry.name)] = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, ValueError, IndexError):
                continue
    found, frontier = set(), {pid}
    while frontier:
        frontier = {child for child, parent in parents.items() if parent in frontier}
        found |= frontier
    out = set()
    for child in found:
        try:
            args = Path(f"/proc/{child}/cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if b"tui" in args and not args[0].endswith(b"sh"):  # the dashboard, not the shell that started it
            out.add(child)
    return out


def rss_kib(pids: set[int]) -> int:
    total = 0
    for pid in pids:
        try:
            status = Path(f"/proc/{pid}/status").read_text()
        except OSError:
            continue
        total += next((int(line.split()[1]) for line in status.splitlines() if line.startswith("VmRSS:")), 0)
    return total


def back_to_main(page: Any) -> None:
    """Escape, then a pause before the next key: a terminal's ESC followed at once by a key reads as
    Alt and that key (the help stayed up, and `c` never reached the app). The screen has no text
    of its own to wait for: the help's list names every key of the main screen."""
    page.keyboard.press("Escape")
    page.wait_for_timeout(600)


class Screen:
    """What one tab's websocket brought: the terminal output as text, ANSI sequences removed."""

    def __init__(self, page: Any) -> None:
        self.chunks: list[bytes] = []
        page.on("websocket", lambda ws: ws.on("framereceived", self._frame))

    def _frame(self, payload: bytes | str) -> None:
        self.chunks.append(payload if isinstance(payload, bytes) else payload.encode())

    def text(self) -> str:
        return ANSI.sub(b"", b"".join(self.chunks)).decode("utf-8", "replace")

    def wait_for(self, page: Any, found: Callable[[str], bool], what: str, timeout: float = 30) -> None:
        deadline = time.monotonic() + timeout
        while not found(self.text()):
            assert time.monotonic() < deadline, f"the tab never showed {what}"
            page.wait_for_timeout(200)


@pytest.mark.skipif(
    CHROMIUM is None, reason="no Chromium: scripts/browser.sh installs Debian's (needs root and apt)"
)
def test_the_dashboard_in_a_real_browser(web: Web, tmp_path: Path) -> None:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            context = browser.new_context(viewport={"width": 1400, "height": 900})
            page = context.new_page()
            screen = Screen(page)
            page.goto(web.signin)
            screen.wait_for(page, lambda t: "agents" in t and "events" in t, "the dashboard")
            screen.wait_for(
                page, lambda t: "implementer" in t and "PreToolUse" in t, "live demo agents and events"
            )
            shot = Path(os.environ.get("SCREENSHOT_DIR", str(tmp_path))) / "web-dashboard.png"
            page.screenshot(path=str(shot))
            assert shot.stat().st_size > 10_000
            # No click first: the page gives xterm.js's textarea (where it takes keys) the focus.
            assert page.evaluate("document.activeElement.className") == "xterm-helper-textarea"
            # xterm.js draws the screen as rows of text (its DOM renderer), where the sparklines'
            # blocks stay in their row; its WebGL renderer drew them down across rows.
            assert page.locator(".xterm-rows > div").count() > 20
            mark = len(screen.text())
            page.keyboard.press("h")
            screen.wait_for(page, lambda t: "Tools and history" in t[mark:], "the tools view after `h`")
            back_to_main(page)
            mark = len(screen.text())
            page.keyboard.press("?")
            screen.wait_for(
                page, lambda t: "Live view" in t[mark:] and "this help" in t[mark:], "the help after `?`"
            )
            back_to_main(page)
            mark = len(screen.text())
            page.keyboard.press("c")  # the head (burn rate, window) above the tabs
            screen.wait_for(page, lambda t: "burning" in t[mark:] and "By agent" in t[mark:], "the cost head")
            page.keyboard.press("Escape")
            (first,) = _wait_children(web.pid, 1)

            second = context.new_page()
            second.goto(web.url + "/")
            both = _wait_children(web.pid, 2)
            total, alone = rss_kib({web.pid} | both) / 1024, rss_kib({web.pid}) / 1024
            print(
                f"\nweb server and {MAX_SESSIONS} dashboards: {total:.0f} MiB RSS (server: {alone:.0f} MiB)"
            )
            third = context.new_page()
            refused = third.goto(web.url + "/")
            assert refused is not None and refused.status == 503
            assert "Too many dashboards open" in third.content()

            page.close()
            deadline = time.monotonic() + 10
            while first in descendants(web.pid):
                assert time.monotonic() < deadline, "closing the tab ended its dashboard"
                time.sleep(0.1)
            assert len(descendants(web.pid)) == 1
            # The server counts the place free once it has reaped the process and closed the
            # socket, a moment after the process is gone: within the same 10 s.
            again = third.goto(web.url + "/")
            while again is not None and again.status == 503 and time.monotonic() < deadline:
                time.sleep(0.2)
                again = third.goto(web.url + "/")
            assert again is not None and again.status == 200, "a place is free again"
        finally:
            browser.close()


def _wait_children(pid: int, count: int, timeout: float = 30) -> set[int]:
    deadline = time.monotonic() + timeout
    while len(found := descendants(pid)) < count:
        assert time.monotonic() < deadline, f"{count} dashboard processes under the web server"
        time.sleep(0.1)
    return found


# -- every dashboard ends with its tab, and with the server -----------------------------------------

BROWSER_MISSING = "no Chromium: scripts/browser.sh installs Debian's (needs root and apt)"
GONE_WITHIN = 10.0


def running(pid: int) -> bool:
    """The process exists and is not a zombie (an orphan's zombie is for init to reap)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


def seconds_until_gone(pids: set[int], what: str) -> float:
    """How long until none of `pids` runs; fails past GONE_WITHIN."""
    start = time.monotonic()
    while left := {pid for pid in pids if running(pid)}:
        assert time.monotonic() - start < GONE_WITHIN, f"dashboard process {left} still running {what}"
        time.sleep(0.05)
    return time.monotonic() - start


def new_dashboard(web: Web, before: set[int], timeout: float = 30) -> int:
    """The one dashboard process started under the server since `before` was taken."""
    deadline = time.monotonic() + timeout
    while not (new := descendants(web.pid) - before):
        assert time.monotonic() < deadline, "no dashboard process started for the tab"
        time.sleep(0.05)
    (pid,) = new
    return pid


def chromium(url: str, profile: Path, *extra: str) -> subprocess.Popen[bytes]:
    """Headless Chromium on `url`, in its own process group (the browser is several processes)."""
    assert CHROMIUM is not None
    return subprocess.Popen(
        [CHROMIUM, *CHROMIUM_ARGS, f"--user-data-dir={profile}", "--window-size=1200,800", *extra, url],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )


@pytest.mark.skipif(CHROMIUM is None, reason=BROWSER_MISSING)
def test_a_killed_browser_leaves_no_dashboard(web: Web, tmp_path: Path) -> None:
    before = descendants(web.pid)
    browser = chromium(web.signin, tmp_path / "profile")
    try:
        dashboard = new_dashboard(web, before)
        time.sleep(3)  # the dashboard is up and drawing, not still starting
        assert running(dashboard)
        os.killpg(browser.pid, signal.SIGKILL)
        took = seconds_until_gone({dashboard}, "after its browser was SIGKILLed")
        print(f"\ndashboard gone {took:.2f}s after its browser was SIGKILLed")
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(browser.pid, signal.SIGKILL)
        browser.wait(10)


@pytest.mark.skipif(CHROMIUM is None, reason=BROWSER_MISSING)
def test_a_tab_closed_while_its_dashboard_starts_leaves_no_dashboard(web: Web, tmp_path: Path) -> None:
    """The issue's way in: a screenshot of the sign-in address, the tab gone within a second. On a
    loaded machine the screenshot may be taken, and the tab closed, before the page opened its
    socket: then no dashboard started and nothing is tested, so the tab is opened again (at most
    five times) until one did."""
    started: set[int] = set()
    for attempt in range(5):
        before = descendants(web.pid)
        shot = tmp_path / f"shot-{attempt}.png"
        browser = chromium(web.signin, tmp_path / f"profile-{attempt}", f"--screenshot={shot}")
        while browser.poll() is None:  # the tab's dashboard lives for a second at least: seen here
            started |= descendants(web.pid) - before
            time.sleep(0.02)
        assert browser.returncode == 0 and shot.exists()
        time.sleep(1)
        started |= descendants(web.pid) - before
        if started:
            break
    assert started, "five tabs started no dashboard"
    took = seconds_until_gone(started, "after its tab was closed")
    print(f"\ndashboard gone {took:.2f}s after the screenshot's tab closed")


def websocket_open(web: Web) -> socket.socket:
    """A signed-in websocket to the server, the handshake done, nothing more."""
    host, port = web.host.split(":")
    sock = socket.create_connection((host, int(port)), timeout=10)
    headers = {**WEBSOCKET, "Host": web.host, "Cookie": signed_in_cookie(web)}
    request_text = "GET /ws?width=120&height=40 HTTP/1.1\r\n" + "".join(
        f"{k}: {v}\r\n" for k, v in headers.items()
    )
    sock.sendall((request_text + "\r\n").encode())
    answer = b""
    while b"\r\n\r\n" not in answer:
        chunk = sock.recv(4096)
        assert chunk, f"the server closed the connection: {answer!r}"
        answer += chunk
    assert answer.startswith(b"HTTP/1.1 101"), answer
    return sock


@pytest.mark.parametrize("drop", ["fin", "reset"])
def test_a_socket_dropped_without_a_close_frame_ends_its_dashboard(web: Web, drop: str) -> None:
    before = descendants(web.pid)
    sock = websocket_open(web)
    try:
        dashboard = new_dashboard(web, before)
        deadline = time.monotonic() + 30
        drawn = b""
        while b"\x1b[?1049h" not in drawn:  # the dashboard is on its alternate screen: it runs
            assert time.monotonic() < deadline, "the dashboard never drew"
            drawn += sock.recv(65536)
        if drop == "reset":  # RST: the connection is torn down at once
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        else:  # FIN: the end of the stream, with no websocket close frame before it
            sock.shutdown(socket.SHUT_WR)
    finally:
        sock.close()
    took = seconds_until_gone({dashboard}, f"after its socket was dropped ({drop})")
    print(f"\ndashboard gone {took:.2f}s after a {drop} without a close frame")


@pytest.mark.skipif(CHROMIUM is None, reason=BROWSER_MISSING)
@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGTERM])
def test_no_dashboard_outlives_the_server(web: Web, tmp_path: Path, sig: signal.Signals) -> None:
    """A second server, two tabs open on it, then the server ended by `sig`."""
    from playwright.sync_api import sync_playwright

    port = free_port()
    log = tmp_path / "web.log"
    with log.open("w") as out:
        server = subprocess.Popen(
            [tool("agentwatch"), "web", "--port", str(port)],
            env=web.env,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    try:
        wait_port(port, 30)
        signin = f"http://127.0.0.1:{port}/signin?token={web.token}"
        with sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
            try:
                page = browser.new_context().new_page()
                page.goto(signin)
                page.context.new_page().goto(f"http://127.0.0.1:{port}/")
                dashboards = _wait_children(server.pid, 2)
                server.send_signal(sig)
                took = seconds_until_gone(dashboards, f"after the server got {sig.name}")
                print(f"\n2 dashboards gone {took:.2f}s after the server got {sig.name}")
            finally:
                browser.close()
        assert server.wait(10) == (-sig if sig == signal.SIGKILL else 0), log.read_text()
    finally:
        _stop(server)
