"""A fleet on loopback for the tests: a hub (`agentwatch up` taking leaf connections), hosts
(`agentwatch up --hub`, each its own data dir and AGENTWATCH_HOST), each host's link to the hub
through a TCP proxy the test can cut, and the installed hook publishing on a host."""

from __future__ import annotations

import asyncio
import contextlib
import json
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

from tests.conftest import clean_env, free_port, run_cli, tool, wait_port
from tests.integration.test_store import Service


class LinkProxy:
    """A TCP proxy (asyncio, in a thread of its own) from a local port to `target`; `cut()` drops
    every connection through it and refuses new ones until `restore()`."""

    def __init__(self, target_port: int) -> None:
        self.target = target_port
        self.port = free_port()
        self.open = True
        self._writers: set[asyncio.StreamWriter] = set()
        self._loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()
        self._ready.wait(10)

    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)
        server = self._loop.run_until_complete(asyncio.start_server(self._client, "127.0.0.1", self.port))
        self._ready.set()
        self._loop.run_forever()
        server.close()
        self._drop()
        tasks = asyncio.all_tasks(self._loop)
        for task in tasks:
            task.cancel()
        self._loop.run_until_complete(asyncio.gather(*tasks, return_exceptions=True))
        self._loop.run_until_complete(server.wait_closed())
        self._loop.close()

    async def _client(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if not self.open:
            writer.close()
            return
        try:
            up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self.target)
        except OSError:
            writer.close()
            return
        self._writers.update((writer, up_writer))
        await asyncio.gather(self._pipe(reader, up_writer), self._pipe(up_reader, writer))

    async def _pipe(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while self.open:
                data = await reader.read(65536)
                if not data or not self.open:
                    break
                writer.write(data)
                await writer.drain()
        except (OSError, asyncio.CancelledError):
            pass
        finally:
            self._writers.discard(writer)
            with contextlib.suppress(Exception):
                writer.close()

    def _drop(self) -> None:
        for writer in list(self._writers):
            with contextlib.suppress(Exception):
                writer.transport.abort()
        self._writers.clear()

    def cut(self) -> None:
        self.open = False
        self._loop.call_soon_threadsafe(self._drop)

    def restore(self) -> None:
        self.open = True

    def close(self) -> None:
        self.cut()
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(5)


class Hub:
    """`agentwatch up` with a leaf port for the hosts."""

    def __init__(self, root: Path) -> None:
        self.leaf_port = free_port()
        self.env = clean_env(
            AGENTWATCH_DATA_DIR=str(root / "hub"),
            AGENTWATCH_NATS_URL=f"nats://127.0.0.1:{free_port()}",
            AGENTWATCH_LEAF_ADDR=f"127.0.0.1:{self.leaf_port}",
            AGENTWATCH_METRICS_ADDR=f"127.0.0.1:{free_port()}",
            AGENTWATCH_OTLP_ADDR="off",
        )
        self.service: Service | None = None

    def start(self, timeout: float = 90) -> None:
        self.service = Service(["up"], self.env)
        self.service.wait_ready(timeout)

    def stop(self) -> str:
        assert self.service is not None
        code, output = self.service.stop()
        self.service = None
        assert code == 0, output
        return output

    def add_host(self, name: str, port: int) -> str:
        """`agentwatch hosts add NAME` on the hub: the URL it prints for the host, to the leaf port
        at `port` (the host's proxy)."""
        result = run_cli("hosts", "add", name, env=self.env)
        assert result.returncode == 0, result.stderr
        assert "the hub's running bus took it" in result.stdout, result.stdout
        url = next(line for line in result.stdout.splitlines() if line.startswith("AGENTWATCH_HUB_URL="))
        return url.partition("=")[2].replace(f"127.0.0.1:{self.leaf_port}", f"127.0.0.1:{port}")

    def hosts(self) -> dict[str, dict[str, Any]]:
        result = run_cli("hosts", "--json", env=self.env)
        assert result.returncode == 0, result.stderr
        return {row["host"]: row for row in json.loads(result.stdout)}

    def count(self, host: str) -> tuple[int, int]:
        """(rows, distinct ids) of the events of `host` stored."""
        query = f"SELECT count() AS n, uniqExact(id) AS u FROM events WHERE host = '{host}'"  # noqa: S608
        result = run_cli("sql", query, "--format", "json", env=self.env)
        if result.returncode != 0:
            return -1, -1
        row = json.loads(result.stdout)[0]
        return int(row["n"]), int(row["u"])

    def alerts(self, rule: str, host: str) -> list[str]:
        """The states of the alerts of `rule` on `host` the store holds, one per change."""
        where = f"rule = '{rule}' AND host = '{host}'"
        query = f"SELECT state FROM alerts FINAL WHERE {where} ORDER BY at"  # noqa: S608
        result = run_cli("sql", query, "--format", "json", env=self.env)
        return [row["state"] for row in json.loads(result.stdout)] if result.returncode == 0 else []

    def wait_count(self, host: str, expected: int, timeout: float) -> float:
        """Seconds until `expected` events of `host` are stored; AssertionError after `timeout`,
        or at once when any is stored twice."""
        started = time.monotonic()
        rows = ids = -1
        while time.monotonic() - started < timeout:
            rows, ids = self.count(host)
            assert rows == ids, f"{rows - ids} events of {host} stored twice"
            if rows >= expected:
                return time.monotonic() - started
            time.sleep(0.5)
        raise AssertionError(f"{rows} of {expected} events of {host} stored within {timeout}s")


class Host:
    """`agentwatch up --hub` on an agent host, its link through a LinkProxy."""

    def __init__(self, root: Path, name: str, hub: Hub) -> None:
        self.name = name
        self.link = LinkProxy(hub.leaf_port)
        self.env = clean_env(
            AGENTWATCH_DATA_DIR=str(root / name),
            AGENTWATCH_NATS_URL=f"nats://127.0.0.1:{free_port()}",
            AGENTWATCH_HOST=name,
        )
        # The hub's URL with the host's own leaf login, from the environment, never on the command line.
        self.hub_url = hub.add_host(name, self.link.port)
        self.service = Service(["up"], {**self.env, "AGENTWATCH_HUB_URL": self.hub_url})
        self.sent = 0
        self._count = threading.Lock()
        self.hook = tool("agentwatch-emit")

    def wait_ready(self, timeout: float = 30) -> None:
        self.service.wait_ready(timeout)

    def stop(self) -> None:
        code, output = self.service.stop()
        self.link.close()
        assert code == 0, output

    def emit(self, n: int = 1) -> list[float]:
        """Run the installed hook `n` times, one event each; each run's seconds."""
        took = []
        for _ in range(n):
            with self._count:
                self.sent += 1
                number = self.sent
            session = f"fleet-{self.name}"
            event = {"hook_event_name": "Notification", "session_id": session, "message": str(number)}
            payload = json.dumps(event).encode()
            started = time.perf_counter()
            done = subprocess.run([self.hook], input=payload, env=self.env, check=False, timeout=20)
            took.append(time.perf_counter() - started)
            assert done.returncode == 0
        return took

    def own(self) -> dict[str, Any]:
        """`agentwatch hosts --json` on this host: its own row, as it sees itself."""
        result = run_cli("hosts", "--json", env=self.env)
        assert result.returncode == 0, result.stderr
        rows = json.loads(result.stdout)
        assert len(rows) == 1 and rows[0]["seen_from"] == "this host", rows
        return dict(rows[0])

    def spooled(self) -> int:
        """Bytes waiting in the hook's spool on this host."""
        from agentwatch.emitter.hook import spool_for

        return spool_for(self.env).status().bytes


class RogueLeaf:
    """A nats-server of someone's own making, joined to the hub as a leaf with `url`'s login (a
    host's machine in the wrong hands): what its clients may hear through the hub."""

    def __init__(self, root: Path, url: str) -> None:
        self.port = free_port()
        conf = root / f"rogue-{self.port}.conf"
        conf.write_text(json.dumps({"leafnodes": {"remotes": [{"urls": [url]}]}}))
        args = [tool("nats-server"), "-a", "127.0.0.1", "-p", str(self.port), "-n", f"rogue-{self.port}"]
        self.proc = subprocess.Popen(
            [*args, "-c", str(conf)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        wait_port(self.port)

    @property
    def url(self) -> str:
        return f"nats://127.0.0.1:{self.port}"

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(10)


class Publisher:
    """`workers` threads running the hook on `host` at `rate` runs a second in all (as fast as
    they can when that is more than they manage), until stopped; each run's (start, seconds)."""

    def __init__(self, host: Host, rate: float, workers: int = 1) -> None:
        self.host = host
        self.interval = workers / rate
        self.runs: list[tuple[float, float]] = []
        self.failures: list[str] = []  # hook runs that failed or did not end in time
        self._stop = threading.Event()
        self._threads = [threading.Thread(target=self._work, daemon=True) for _ in range(workers)]
        for thread in self._threads:
            thread.start()

    def _work(self) -> None:
        while not self._stop.is_set():
            started = time.monotonic()
            try:
                took = self.host.emit(1)[0]
            except (AssertionError, subprocess.SubprocessError) as exc:
                self.failures.append(repr(exc))
                continue
            self.runs.append((started, took))
            self._stop.wait(max(self.interval - (time.monotonic() - started), 0.0))

    def between(self, start: float, end: float) -> list[float]:
        """The seconds of the runs that started between `start` and `end`."""
        return [took for at, took in self.runs if start <= at < end]

    def stop(self) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join(30)
