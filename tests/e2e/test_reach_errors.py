"""A bus or ClickHouse server that cannot be used is said in one line, the same from every command
and from the dashboard's status line: which of the four failures it is (credentials refused, no
server, a server that takes the connection and never answers, TLS) and which setting to fix.

For each failure `agentwatch sql "SELECT 1"`, `agentwatch status` and `agentwatch up` (and for the
bus `agentwatch doctor`, which asks with the hook's own client) run against it, at once, each in
its own process, while the real dashboard (AgentwatchApp with NatsLiveSource and History, under
Textual's pilot) opens on it: all must show the same line, and `up` must stop with it within
seconds instead of waiting or starting a bus of its own.

The bus is a real nats-server (with `authorization {}` for credentials, a `tls {}` block with a
certificate made here for TLS), or nothing (a closed port), or a socket that accepts and never
writes. ClickHouse is a stand-in: there is no ClickHouse server on the test machines, and what
agentwatch meets there is HTTP, so a small local HTTP server answers as ClickHouse's HTTP interface
does when it refuses a password (403 with `X-ClickHouse-Exception-Code: 516` and ClickHouse's
`Code: 516. DB::Exception: ... Authentication failed` text: HTTPHandler's exceptionCodeToHTTPStatus),
or serves TLS with a certificate the client does not trust; a closed port and a silent socket
stand for no server and a server that never answers, exactly as they would for a real one.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import http.server
import ssl
import subprocess
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from textual.worker import WorkerCancelled

from agentwatch.cli.sources import dashboard_sources
from agentwatch.tui.app import AgentwatchApp
from tests.conftest import clean_env, free_port, tool
from tests.services import NatsServer, SilentServer

# How long a new connection may take to answer (AGENTWATCH_CONNECT_TIMEOUT), short for the test.
ANSWER_S = "1"
# `up` stops with the line within this (its imports on a loaded machine, one ANSWER_S of waiting).
UP_STOPS_WITHIN_S = 20.0
NATS_FILES = "AGENTWATCH_NATS_CA, AGENTWATCH_NATS_CERT, AGENTWATCH_NATS_KEY"


@dataclass(frozen=True)
class Case:
    """A failure to provoke, and the words its line must hold: which failure, which setting."""

    system: str  # bus or clickhouse
    says: str
    detail: str


CASES: dict[str, Case] = {
    "bus-credentials": Case(
        "bus",
        "refused the credentials: fix the user and password in AGENTWATCH_NATS_URL",
        "(Authorization Violation)",
    ),
    "bus-no-server": Case(
        "bus", "no server answers at nats://alice:***@127.0.0.1:{port}",
        "or point AGENTWATCH_NATS_URL at a running one (connection refused)",
    ),
    "bus-silent": Case(
        "bus", "took the connection but sent nothing back: check that AGENTWATCH_NATS_URL", "(timed out)"
    ),
    "bus-tls-plain-server": Case(
        "bus", f"TLS with the NATS server at tls://127.0.0.1:{{port}} failed: check {NATS_FILES}",
        "of AGENTWATCH_NATS_URL (the server does not speak TLS)",
    ),
    "bus-tls-untrusted": Case(
        "bus", f"TLS with the NATS server at tls://127.0.0.1:{{port}} failed: check {NATS_FILES}",
        "(certificate verify failed: self-signed certificate)",
    ),
    "clickhouse-credentials": Case(
        "clickhouse",
        "the ClickHouse server at http://alice:***@127.0.0.1:{port}/agentwatch refused the credentials: "
        "fix the user and password in AGENTWATCH_CLICKHOUSE_URL",
        "(ClickHouse code 516: Authentication failed)",
    ),
    "clickhouse-no-server": Case(
        "clickhouse", "no server answers at http://alice:***@127.0.0.1:{port}/agentwatch",
        "point AGENTWATCH_CLICKHOUSE_URL at a running one (connection refused)",
    ),
    "clickhouse-silent": Case(
        "clickhouse", "took the connection but sent nothing back: check that AGENTWATCH_CLICKHOUSE_URL",
        "(timed out)",
    ),
    "clickhouse-tls-plain-server": Case(
        "clickhouse", "TLS with the ClickHouse server at https://alice:***@127.0.0.1:{port}/agentwatch",
        "of AGENTWATCH_CLICKHOUSE_URL (the server does not speak TLS)",
    ),
    "clickhouse-tls-untrusted": Case(
        "clickhouse", "TLS with the ClickHouse server at https://alice:***@127.0.0.1:{port}/agentwatch",
        "(certificate verify failed: self-signed certificate)",
    ),
}  # fmt: skip


@pytest.fixture(scope="module")
def certificate(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A self-signed certificate for 127.0.0.1 (openssl; no client trusts it)."""
    where = tmp_path_factory.mktemp("tls")
    cert, key = where / "cert.pem", where / "key.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", "/CN=127.0.0.1",
         "-addext", "subjectAltName=IP:127.0.0.1", "-keyout", str(key), "-out", str(cert)],
        check=True, capture_output=True, timeout=60,
    )  # fmt: skip
    return cert, key


AUTH_FAILED = (
    b"Code: 516. DB::Exception: alice: Authentication failed: password is incorrect, or there is no user "
    b"with such name. (AUTHENTICATION_FAILED) (version 25.8.1.1)\n"
)


class RefusesPassword(http.server.BaseHTTPRequestHandler):
    """ClickHouse's HTTP interface refusing a password (the stand-in is only ever asked with a wrong one)."""

    def do_GET(self) -> None:
        self.refuse()

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self.refuse()

    def refuse(self) -> None:
        self.send_response(403)
        self.send_header("X-ClickHouse-Exception-Code", "516")
        self.send_header("Content-Type", "text/plain; charset=UTF-8")
        self.send_header("Content-Length", str(len(AUTH_FAILED)))
        self.end_headers()
        self.wfile.write(AUTH_FAILED)

    def log_message(self, format: str, *args: object) -> None:
        """Quiet: the test reads what the client says."""


def clickhouse_stand_in(tls: tuple[Path, Path] | None = None) -> http.server.ThreadingHTTPServer:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), RefusesPassword)
    if tls is not None:
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(str(tls[0]), str(tls[1]))
        server.socket = ctx.wrap_socket(server.socket, server_side=True)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


@contextlib.contextmanager
def failing(name: str, tmp: Path, cert: tuple[Path, Path], bus: NatsServer) -> Iterator[tuple[str, str, int]]:
    """(AGENTWATCH_NATS_URL, AGENTWATCH_CLICKHOUSE_URL or '', the failing server's port) of a case."""
    kind = name.split("-", 1)[1]
    with contextlib.ExitStack() as stack:
        port = free_port()
        if kind == "silent":
            silent = SilentServer()
            stack.callback(silent.close)
            port = silent.port
        elif name.startswith("bus-") and kind != "no-server":
            conf = {
                "credentials": "authorization { user: alice, password: right }\n",
                "tls-plain-server": "",
                "tls-untrusted": f'tls {{ cert_file: "{cert[0]}", key_file: "{cert[1]}" }}\n',
            }[kind]
            server = NatsServer(tmp / "nats", config=conf, stream=False).start()
            stack.callback(server.stop)
            port = server.port
        elif kind != "no-server":
            http_server = clickhouse_stand_in(cert if kind == "tls-untrusted" else None)
            stack.callback(http_server.server_close)
            stack.callback(http_server.shutdown)
            port = int(http_server.server_address[1])
        if name.startswith("bus-"):
            # A URL with a user: with nothing there, `up` would start a bus of its own at a plain
            # local URL (what it is for); at a fleet's URL it must say what is wrong instead.
            user = "alice:wrong@" if kind in ("credentials", "no-server") else ""
            scheme = "tls" if kind.startswith("tls") else "nats"
            yield f"{scheme}://{user}127.0.0.1:{port}", "", port
        else:
            scheme = "https" if kind.startswith("tls") else "http"
            yield bus.url, f"{scheme}://alice:wrong@127.0.0.1:{port}/agentwatch", port


@pytest.fixture(scope="module")
def bus(tmp_path_factory: pytest.TempPathFactory) -> Iterator[NatsServer]:
    """The bus the ClickHouse cases run on: there, only ClickHouse fails."""
    server = NatsServer(tmp_path_factory.mktemp("nats")).start()
    yield server
    server.stop()


def timed(command: list[str], env: dict[str, str]) -> tuple[int, str, str, float]:
    """A command's exit status, output, errors and how long it took to end."""
    started = time.monotonic()
    result = subprocess.run(
        [tool("agentwatch"), *command], env=env, capture_output=True, text=True, timeout=60, check=False
    )
    return result.returncode, result.stdout, result.stderr, time.monotonic() - started


def said(text: str) -> str:
    """The line a command stopped with (`agentwatch: ...` on stderr)."""
    lines = [line for line in text.splitlines() if line.startswith("agentwatch: ")]
    assert len(lines) == 1 and "Traceback" not in text, text
    return lines[0].removeprefix("agentwatch: ")


async def dashboard_line(env: dict[str, str], case: Case, port: int) -> str:
    """The dashboard's status line once it says why the bus or the store cannot be used."""
    live, history = dashboard_sources(env)
    app = AgentwatchApp(live, history, refresh_seconds=1.0)
    status = ""
    try:
        async with app.run_test(size=(700, 20)) as pilot:
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline:
                await pilot.pause(0.1)
                status = str(app.query_one("#status").render())
                # The bus's segment and the store's for a bus case (the store is asked over the
                # bus), the store's for a ClickHouse case.
                if status.count(case.detail) == (2 if case.system == "bus" else 1):
                    break
    finally:
        for worker in [w for w in app.workers if w.group == "live"]:
            with contextlib.suppress(WorkerCancelled, asyncio.TimeoutError):
                await asyncio.wait_for(worker.wait(), 10)
        history.close()
    return status


@pytest.mark.parametrize("name", list(CASES))
async def test_every_command_and_the_dashboard_say_the_same_line(
    name: str, tmp_path: Path, certificate: tuple[Path, Path], bus: NatsServer
) -> None:
    case = CASES[name]
    with failing(name, tmp_path, certificate, bus) as (nats_url, clickhouse_url, port):
        env = clean_env(
            AGENTWATCH_DATA_DIR=str(tmp_path / "data"),
            AGENTWATCH_NATS_URL=nats_url,
            AGENTWATCH_CONNECT_TIMEOUT=ANSWER_S,
        )
        if clickhouse_url:
            env["AGENTWATCH_CLICKHOUSE_URL"] = clickhouse_url
        commands = [["sql", "SELECT 1"], ["status"], ["up"]]
        if case.system == "bus":  # the hook's own client: the bus only
            commands.append(["doctor", "--runs", "1", "--timeout", "1"])
        with concurrent.futures.ThreadPoolExecutor(len(commands)) as pool:
            running = {command[0]: pool.submit(timed, command, env) for command in commands}
            status_line = await dashboard_line(env, case, port)
            outputs = {command: future.result() for command, future in running.items()}

    code, _, err, _ = outputs["sql"]
    line = said(err)
    assert code == 2, err
    assert case.says.format(port=port) in line and line.endswith(case.detail), line
    assert "wrong" not in line, "the password is masked"

    code, out, err, _ = outputs["status"]
    shown = [text.strip() for text in out.splitlines() if case.detail in text]
    assert code == 1 and shown == [line], out + err
    lines = out.splitlines()
    above = lines[[text.strip() for text in lines].index(line) - 1]
    assert above.startswith("bus:" if case.system == "bus" else "store:"), out

    code, out, err, took = outputs["up"]
    assert code == 2 and said(err) == line, out + err
    assert took < UP_STOPS_WITHIN_S, f"up took {took:.1f}s to stop"
    assert "started nats-server" not in out, "up started a bus of its own over one that is there"

    if case.system == "bus":
        code, out, err, _ = outputs["doctor"]
        assert code == 1 and line in [text.strip() for text in out.splitlines()], out + err

    # The bus's line (its own segment) or the store's; for a bus case the store's history comes
    # over the same bus and says the same line too.
    segment = f"○ {line}; retrying" if case.system == "bus" else f"store: {line}; retrying"
    assert segment in status_line, status_line
    if case.system == "bus":
        assert f"store: {line}; retrying" in status_line, status_line
