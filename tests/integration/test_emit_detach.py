"""The hook leaves the wait for the bus (the server's greeting, the stream's acknowledgements) to
a child of its own: the agent waits for the event to be on disk, not for JetStream to store it,
and nothing is lost.

Each test runs the registered command (`hooks install`'s, through /bin/sh) as the agent does,
reading its stdout and stderr to their end."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import threading
import time
from collections.abc import Callable
from pathlib import Path

from agentwatch.emitter.settings import hook_command
from agentwatch.emitter.spool import Spool
from tests.conftest import clean_env, run_cli, tool
from tests.services import Collector, NatsServer, SilentServer

PAYLOAD = {
    "hook_event_name": "PreToolUse",
    "session_id": "detach-session",
    "tool_name": "Bash",
    "tool_input": {"command": "git status"},
    "tool_use_id": "toolu_detach",
}


class GreetingServer(SilentServer):
    """Greets as a NATS server with JetStream, takes every byte it is sent, and never answers:
    a stream that does not acknowledge."""

    def __init__(self) -> None:
        self.received = b""
        super().__init__()

    def greet(self, conn: socket.socket) -> None:
        info = {
            "server_id": "x",
            "version": "2.10.0",
            "headers": True,
            "jetstream": True,
            "max_payload": 1 << 20,
        }
        conn.sendall(b"INFO " + json.dumps(info).encode() + b"\r\n")
        threading.Thread(target=self._read, args=(conn,), daemon=True).start()

    def _read(self, conn: socket.socket) -> None:
        while True:
            try:
                chunk = conn.recv(65536)
            except OSError:
                return
            if not chunk:
                return
            self.received += chunk


def registered(env: dict[str, str]) -> tuple[float, subprocess.CompletedProcess[bytes]]:
    """One run of the registered command, as the agent runs it: (its wall time, its result)."""
    started = time.monotonic()
    result = subprocess.run(
        ["/bin/sh", "-c", hook_command(tool("agentwatch-emit"))],
        input=json.dumps(PAYLOAD).encode(),
        env=env,
        capture_output=True,
        timeout=30,
        check=False,
    )
    return time.monotonic() - started, result


def in_flight(data: Path) -> list[str]:
    folder = data / "spool" / "inflight"
    return sorted(p.name for p in folder.iterdir()) if folder.exists() else []


def test_the_agent_does_not_wait_for_acks_that_do_not_come(tmp_path: Path) -> None:
    """A stream that never acknowledges: the command the agent ran ends long before the deadline
    (its stdout and stderr closed too), the child that took the run over sends the event, waits,
    spools it at the deadline, and leaves no in-flight file."""
    server = GreetingServer()
    data = tmp_path / "data"
    env = clean_env(
        AGENTWATCH_DATA_DIR=str(data),
        AGENTWATCH_NATS_URL=f"nats://127.0.0.1:{server.port}",
        AGENTWATCH_DEADLINE_MS="3000",
    )
    try:
        elapsed, result = registered(env)
        assert result.returncode == 0 and result.stdout == b"" and result.stderr == b""
        assert elapsed < 1.5, f"the agent waited {elapsed:.2f} s: the wait was not handed over"
        sent = time.monotonic() + 2
        while b"HPUB genie." not in server.received and time.monotonic() < sent:
            time.sleep(0.01)
        assert b"HPUB genie." in server.received, "the child greeted and sent the event"
        assert in_flight(data), "the child holds the event while it waits for the acks"
        time.sleep(3.5)  # the child's deadline passes
    finally:
        server.close()
    assert in_flight(data) == [], "the child settled its in-flight file"
    assert "pending:  1 event message(s)" in run_cli("spool", "status", env=env).stdout


def test_acknowledged_events_arrive_once_and_are_released(
    shared_nats: NatsServer, collector_for: Callable[..., Collector], tmp_path: Path
) -> None:
    """With the stream up (it acknowledges), every run's event arrives once, and no run leaves a
    file in flight or an event in the queue once its child is done."""
    collector = collector_for(shared_nats.url)
    data = tmp_path / "data"
    env = clean_env(AGENTWATCH_DATA_DIR=str(data), AGENTWATCH_NATS_URL=shared_nats.url)
    for _ in range(10):
        _, result = registered(env)
        assert result.returncode == 0 and result.stdout == b"" and result.stderr == b""
    collector.wait_for(10)
    ids = [json.loads(m.data)["id"] for m in collector.settle()]
    assert len(ids) == len(set(ids)) == 10
    deadline = time.monotonic() + 5
    while in_flight(data) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert in_flight(data) == []
    queue = data / "spool" / "queue"
    assert not queue.exists() or queue.stat().st_size == 0, "nothing was spooled"


def test_a_handed_over_event_is_never_another_runs_to_recover(tmp_path: Path) -> None:
    """The moment the agent's command has ended, its event's in-flight file is named after the
    child that holds it, a process that runs: a recovery then (another run's flush, `spool
    status`) takes nothing, so nothing is queued beside the child's own send. (A caller that
    reads the hook's output to its end waits for the child to let go of it; this one does not.)"""
    server = GreetingServer()
    data = tmp_path / "data"
    env = clean_env(
        AGENTWATCH_DATA_DIR=str(data),
        AGENTWATCH_NATS_URL=f"nats://127.0.0.1:{server.port}",
        # Longer than the 25 runs take on a slow, busy host: a child that reached its deadline
        # would spool its event itself, as it should, and the queue would not say who queued it.
        AGENTWATCH_DEADLINE_MS="30000",
    )
    spool = Spool(str(data / "spool"))
    cpu = {min(os.sched_getaffinity(0))}
    mine = os.sched_getaffinity(0)

    def idle() -> None:  # the hook, and its child, run only when this test does not want the CPU
        os.sched_setaffinity(0, cpu)
        os.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0))

    os.sched_setaffinity(0, cpu)  # one CPU: the child waits while this test recovers
    try:
        for _ in range(25):
            done = subprocess.run([tool("agentwatch-emit")], input=json.dumps(PAYLOAD).encode(), env=env,
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=30,
                                  check=False, preexec_fn=idle)  # fmt: skip
            recovered = spool.recover()  # at once, as a run starting now would
            assert done.returncode == 0 and recovered == 0, "a run's event was recovered from its child"
            for name in in_flight(data):
                os.kill(int(name.split(".", 1)[0]), 0)  # raises when no such process runs
        assert spool.pending_bytes() == 0, "an event was queued beside its child's send"
    finally:
        os.sched_setaffinity(0, mine)
        server.close()
