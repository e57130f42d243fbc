"""The collector's HTTP doors (the OTLP receiver and /metrics) against clients that hold connections:
`agentwatch store` on a real nats-server with embedded ClickHouse, both doors on free loopback
ports, raw TCP clients.

- 50 idle connections to each door: a normal request still gets its answer while they are open,
  and the server closes every one of them within 15 s.
- As many idle connections as a door serves at once: the next one is answered 503 at once, and
  once the idle ones are gone a normal request is answered again.
- A client that sends half its body and closes: no dead letter, no traceback, one line in the log.
"""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from agentwatch.consumers.http_doors import MAX_CONNECTIONS
from tests.conftest import clean_env, free_port, run_cli, tool
from tests.services import NatsServer

pytestmark = pytest.mark.timeout(300)

IDLE = 50
RELEASED_WITHIN_S = 15.0
HALF_BODY = b'{"resourceLogs": [' + b" " * 482  # 500 of the 1000 bytes its Content-Length says


class Store:
    """`agentwatch store -v` whose output is read all along (a pipe nobody reads would stop it)."""

    def __init__(self, env: dict[str, str]) -> None:
        self.proc = subprocess.Popen(
            [tool("agentwatch"), "store", "-v"],
            env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        )  # fmt: skip
        self.lines: list[str] = []
        self._ready = threading.Event()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        assert self._ready.wait(90), "".join(self.lines)
        assert self.proc.poll() is None, "".join(self.lines)

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.append(line)
            if line.startswith("Ctrl-C stops"):
                self._ready.set()
        self._ready.set()

    def stop(self) -> tuple[int, str]:
        self.proc.send_signal(signal.SIGINT)
        code = self.proc.wait(60)
        self._reader.join(10)
        assert self.proc.stdout is not None
        self.proc.stdout.close()
        return code, "".join(self.lines)


@pytest.fixture
def store(nats_server: NatsServer, tmp_path: Path) -> Iterator[tuple[Store, dict[str, str]]]:
    env = clean_env(
        AGENTWATCH_DATA_DIR=str(tmp_path / "data"),
        AGENTWATCH_NATS_URL=nats_server.url,
        AGENTWATCH_METRICS_ADDR=f"127.0.0.1:{free_port()}",
        AGENTWATCH_OTLP_ADDR=f"127.0.0.1:{free_port()}",
    )
    running = Store(env)
    try:
        yield running, env
    finally:
        if running.proc.poll() is None:
            running.stop()


def address(env: dict[str, str], door: str) -> tuple[str, int]:
    host, port = env[f"AGENTWATCH_{door}_ADDR"].rsplit(":", 1)
    return host, int(port)


def normal_request(env: dict[str, str], door: str) -> int:
    """A scrape of /metrics, or an (empty) OTLP logs export: its status."""
    host, port = address(env, door)
    if door == "METRICS":
        req = urllib.request.Request(f"http://{host}:{port}/metrics")
    else:
        req = urllib.request.Request(
            f"http://{host}:{port}/v1/logs", data=b'{"resourceLogs": []}', method="POST",
            headers={"Content-Type": "application/json"},
        )  # fmt: skip
    try:
        with urllib.request.urlopen(req, timeout=10) as resp:  # noqa: S310 (the test's own loopback door)
            resp.read()
            return int(resp.status)
    except urllib.error.HTTPError as exc:
        return int(exc.code)


def idle(env: dict[str, str], door: str, count: int) -> list[socket.socket]:
    conns = [socket.create_connection(address(env, door), timeout=10) for _ in range(count)]
    time.sleep(0.5)  # all accepted, each held by the server
    return conns


def closed_by_the_server(conns: list[socket.socket], deadline: float) -> list[float]:
    """When each connection was closed by the other side (EOF or reset); fails past `deadline`."""
    started, closed = time.monotonic(), list[float]()
    for conn in conns:
        conn.settimeout(max(deadline - time.monotonic(), 0.01))
        try:
            data = conn.recv(1024)
        except TimeoutError:
            raise AssertionError(f"{len(conns) - len(closed)} connections still open") from None
        except ConnectionResetError:
            data = b""
        assert data == b"", data
        closed.append(time.monotonic() - started)
        conn.close()
    return closed


@pytest.mark.parametrize("door", ["OTLP", "METRICS"])
def test_idle_connections_are_released_and_do_not_keep_others_out(
    store: tuple[Store, dict[str, str]], door: str
) -> None:
    running, env = store
    started = time.monotonic()
    conns = idle(env, door, IDLE)
    assert normal_request(env, door) == 200, "a request while 50 idle connections are open"
    closed_by_the_server(conns, started + RELEASED_WITHIN_S)

    # As many as it serves at once: the next is answered 503 at once, without a thread.
    started = time.monotonic()
    conns = idle(env, door, MAX_CONNECTIONS)
    extra = socket.create_connection(address(env, door), timeout=5)
    answer = extra.recv(4096)
    extra.close()
    assert answer.startswith(b"HTTP/1.1 503 "), answer
    closed_by_the_server(conns, started + RELEASED_WITHIN_S)
    assert normal_request(env, door) == 200, "answered again once the idle connections are gone"
    code, output = running.stop()
    assert code == 0, output
    assert "Traceback" not in output, output
    assert f"connections refused (503): {MAX_CONNECTIONS} are open" in output, output


def test_a_client_that_closes_mid_body_is_one_line_not_a_dead_letter(
    store: tuple[Store, dict[str, str]],
) -> None:
    running, env = store
    sent = socket.create_connection(address(env, "OTLP"), timeout=10)
    head = (
        "POST /v1/logs HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n"
    )
    sent.sendall(head.encode() + HALF_BODY)
    time.sleep(0.3)
    sent.close()
    # A whole body that does not parse is a dead letter: the count below can see one.
    host, port = address(env, "OTLP")
    bad = urllib.request.Request(
        f"http://{host}:{port}/v1/logs", data=HALF_BODY, method="POST",
        headers={"Content-Type": "application/json"},
    )  # fmt: skip
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(bad, timeout=10)  # noqa: S310 (the test's own loopback door)
    assert refused.value.code == 400
    refused.value.close()
    assert normal_request(env, "OTLP") == 200
    result = run_cli(
        "sql", "SELECT subject, length(body) AS n FROM dead_letters", "--format", "json", env=env
    )
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == [{"subject": "otlp /v1/logs", "n": len(HALF_BODY)}]
    code, output = running.stop()
    assert code == 0, output
    assert "Traceback" not in output, output
    left = [line for line in output.splitlines() if "the client left" in line]
    assert len(left) == 1 and "after 500 of 1000 bytes" in left[0], output
