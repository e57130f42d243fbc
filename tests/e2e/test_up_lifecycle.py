"""`agentwatch up` started and stopped as people do it.

`up --dashboard --demo N`, the README's main command, in a real pseudo-terminal: the pipeline
(nats-server, store, query service) and the demo run as children; the dashboard shows their
traffic; `q` quits the dashboard and stops every child, after the last batch is stored. A closed
terminal and a kill stop it without leaving its nats-server behind; Ctrl-C under traffic leaves
nothing in flight.
"""

from __future__ import annotations

import asyncio
import json
import os
import pty
import re
import select
import signal
import socket
import subprocess
import threading
import time
from pathlib import Path

import nats

from agentwatch.contract import encode_envelope, envelopes_from_stdin
from tests.conftest import CAPTURES, clean_env, free_port, load_fixture_file, run_cli, tool
from tests.integration.test_store import Service
from tests.services import NatsServer

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


class Traffic:
    """Hook envelopes (captured payloads through the contract, fresh ids) published at `rate` per
    second from a thread of its own, each through JetStream: `stored_by_stream` holds the ids the
    stream acknowledged, with the time it did."""

    def __init__(self, url: str, rate: float) -> None:
        self.url = url
        self.rate = rate
        self.stored_by_stream: list[tuple[str, float]] = []
        self.failures = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=lambda: asyncio.run(self._run()), daemon=True)
        self._thread.start()

    async def _run(self) -> None:
        payloads = [json.dumps(rec["payload"]).encode() for rec in load_fixture_file(CAPTURES)]
        nc = await nats.connect(self.url, max_reconnect_attempts=-1, reconnect_time_wait=0.1)
        js = nc.jetstream()
        started = time.monotonic()
        sent = 0
        try:
            while not self._stop.is_set():
                for subject, env in envelopes_from_stdin(payloads[sent % len(payloads)], {}, host="traffic"):
                    try:
                        await js.publish(subject, encode_envelope(env), headers={"Nats-Msg-Id": env["id"]})
                    except Exception:
                        self.failures += 1
                        continue
                    self.stored_by_stream.append((env["id"], time.time()))
                sent += 1
                await asyncio.sleep(max(0.0, started + sent / self.rate - time.monotonic()))
        finally:
            await nc.close()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(30)


def _in_flight(env: dict[str, str]) -> tuple[int, str]:
    """What `agentwatch status` says the store's consumer has in flight (with all it printed; it
    exits 1 while no store answers queries)."""
    status = run_cli("status", env=env)
    found = re.search(r"agentwatch-store: [\d,]+ waiting, ([\d,]+) in flight", status.stdout)
    assert found, status.stdout
    return int(found[1].replace(",", "")), status.stdout


def _stored(env: dict[str, str], ids: list[str]) -> int:
    """How many of `ids` are stored, as events or as messages (genie.msg.*). The query goes on
    stdin: thousands of ids are more than one argument may hold."""
    listed = ",".join(f"'{i}'" for i in ids)  # ULIDs made by the contract: nothing to quote
    both = "SELECT id FROM events UNION ALL SELECT id FROM messages"
    query = f"SELECT uniqExact(id) AS n FROM ({both}) WHERE id IN ({listed})"  # noqa: S608
    result = subprocess.run([tool("agentwatch"), "sql", "-", "--format", "json"], input=query, env=env,
                            capture_output=True, text=True, timeout=60, check=False)  # fmt: skip
    assert result.returncode == 0, result.stderr
    return int(json.loads(result.stdout)[0]["n"])


def test_up_stopped_under_traffic_leaves_nothing_in_flight(nats_server: NatsServer, tmp_path: Path) -> None:
    """Ctrl-C of `up` while events arrive at 200 per second: what the store had fetched is written
    and acknowledged before it exits, so `status` shows nothing in flight (what the next start
    finds) and every event the stream held before the stop is stored within seconds of the
    restart, not after the ack wait (30 s). The bus is a server of the test's own, so it is there
    between the two runs and the traffic goes on."""
    env = clean_env(AGENTWATCH_DATA_DIR=str(tmp_path / "data"), AGENTWATCH_NATS_URL=nats_server.url)
    traffic = Traffic(nats_server.url, rate=200)
    try:
        up = Service(["up"], env)
        up.wait_ready()
        time.sleep(6)
        code, output = up.stop(signal.SIGINT)
        stopped = time.time()
        assert code == 0 and "stopped:" in output, output
        in_flight, said = _in_flight(env)
        assert in_flight == 0, said
        held = [event_id for event_id, at in traffic.stored_by_stream if at <= stopped]
        assert len(held) > 1000
        again = Service(["up"], env)
        try:
            again.wait_ready()
            restarted = time.monotonic()
            while (count := _stored(env, held)) < len(held) and time.monotonic() - restarted < 20:
                time.sleep(0.2)
            took = time.monotonic() - restarted
        finally:
            again.stop(signal.SIGINT)
    finally:
        traffic.stop()
    assert count == len(held), f"{len(held) - count} of {len(held)} events not stored 20 s after the restart"
    assert took < 5, f"the events held before the stop took {took:.1f}s to be stored after the restart"
    assert traffic.failures == 0
