"""No event lost while the bus is down: spool, then send exactly once."""

from __future__ import annotations

import asyncio
import json
import shutil
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import nats

from agentwatch.emitter.spool import Spool
from tests.conftest import clean_env, free_port, run_cli, run_emit
from tests.services import Collector, NatsServer


def _payload(i: int) -> bytes:
    return json.dumps(
        {
            "session_id": "0c0ffee0-0000-4000-8000-000000000000",
            "hook_event_name": "PreToolUse",
            "tool_name": "Bash",
            "tool_input": {"command": f"echo {i}"},
            "tool_use_id": f"toolu_{i:04d}",
        }
    ).encode()


def _spooled_ids(queue: Path) -> list[str]:
    return [line.split(b" ", 2)[1].decode() for line in queue.read_bytes().splitlines()]


def test_two_hundred_concurrent_events_arrive_exactly_once(tmp_path: Path, collector_for: Any) -> None:
    port = free_port()
    env = clean_env(
        AGENTWATCH_DATA_DIR=str(tmp_path / "data"), AGENTWATCH_NATS_URL=f"nats://127.0.0.1:{port}"
    )
    with ThreadPoolExecutor(max_workers=16) as pool:
        results = list(pool.map(lambda i: run_emit(_payload(i), env), range(200)))
    assert all(r.returncode == 0 and r.stdout == b"" for r in results)
    queue = tmp_path / "data" / "spool" / "queue"
    spooled = _spooled_ids(queue)
    assert len(spooled) == 200 and len(set(spooled)) == 200, "no line lost or torn by concurrent appends"
    assert "pending:  200 event message(s)" in run_cli("spool", "status", env=env).stdout

    server = NatsServer(tmp_path / "nats", port=port).start()
    try:
        collector: Collector = collector_for(server.url)
        flush = run_cli("spool", "flush", env=env)
        assert flush.returncode == 0, flush.stderr
        messages = collector.wait_for(200)
        messages = collector.settle(0.5)
        ids = [m.headers["Nats-Msg-Id"] for m in messages if m.headers]
        assert len(messages) == 200
        assert sorted(ids) == sorted(spooled)
        assert len(set(ids)) == 200
        commands = sorted(json.loads(m.data)["data"]["tool_input"]["command"] for m in messages)
        assert commands == sorted(f"echo {i}" for i in range(200))
        assert "pending:  0 event message(s)" in run_cli("spool", "status", env=env).stdout
        again = run_cli("spool", "flush", env=env)
        assert again.returncode == 0 and "nothing to send" in again.stdout
        assert len(collector.settle(0.3)) == 200
    finally:
        server.stop()


def test_next_emit_drains_the_spool_oldest_first(tmp_path: Path, collector_for: Any) -> None:
    port = free_port()
    env = clean_env(
        AGENTWATCH_DATA_DIR=str(tmp_path / "data"), AGENTWATCH_NATS_URL=f"nats://127.0.0.1:{port}"
    )
    for i in range(20):
        assert run_emit(_payload(i), env).returncode == 0
    server = NatsServer(tmp_path / "nats", port=port).start()
    try:
        collector: Collector = collector_for(server.url)
        assert run_emit(_payload(99), env).returncode == 0
        messages = collector.wait_for(21)
        commands = [json.loads(m.data)["data"]["tool_input"]["command"] for m in messages]
        assert commands[0] == "echo 99", "the live event goes first"
        assert commands[1:] == [f"echo {i}" for i in range(20)], "then the spool, oldest first"
        # The drain is the work of the hook's child (the one that waited for the stream's acks,
        # emitter/hook.py's _detach), which commits the spool's position after the last batch.
        spool, waited = Spool(str(tmp_path / "data" / "spool")), time.monotonic() + 5
        while not spool.is_empty() and time.monotonic() < waited:
            time.sleep(0.02)
        assert spool.is_empty()
    finally:
        server.stop()


def test_full_spool_refuses_and_logs(tmp_path: Path) -> None:
    env = clean_env(
        AGENTWATCH_DATA_DIR=str(tmp_path / "data"),
        AGENTWATCH_NATS_URL=f"nats://127.0.0.1:{free_port()}",
        AGENTWATCH_SPOOL_MAX_BYTES="4000",
    )
    for i in range(20):
        assert run_emit(_payload(i), env).returncode == 0
    queue = tmp_path / "data" / "spool" / "queue"
    kept = len(_spooled_ids(queue))
    assert 0 < kept < 20
    assert queue.stat().st_size <= 4000
    crash = (tmp_path / "data" / "crash.jsonl").read_text().splitlines()
    assert len(crash) == 20 - kept
    assert all(json.loads(line)["kind"] == "spool_full" for line in crash)


def test_resent_chunk_is_dropped_by_jetstream(tmp_path: Path) -> None:
    """A flusher killed after publishing but before committing re-sends: JetStream keeps one copy."""
    port = free_port()
    env = clean_env(
        AGENTWATCH_DATA_DIR=str(tmp_path / "data"), AGENTWATCH_NATS_URL=f"nats://127.0.0.1:{port}"
    )
    for i in range(30):
        run_emit(_payload(i), env)
    spool_dir = tmp_path / "data" / "spool"
    backup = tmp_path / "spool-copy"
    shutil.copytree(spool_dir, backup)
    server = NatsServer(tmp_path / "nats", port=port).start()
    try:
        assert run_cli("spool", "flush", env=env).returncode == 0
        shutil.rmtree(spool_dir)
        shutil.copytree(backup, spool_dir)  # as if the first flush never committed
        assert run_cli("spool", "flush", env=env).returncode == 0

        async def count() -> int:
            nc = await nats.connect(server.url)
            info = await nc.jetstream().stream_info("GENIE")
            await nc.close()
            return int(info.state.messages)

        assert asyncio.run(count()) == 30
    finally:
        server.stop()


def test_damaged_lines_are_skipped_not_fatal(tmp_path: Path, collector_for: Any) -> None:
    port = free_port()
    env = clean_env(
        AGENTWATCH_DATA_DIR=str(tmp_path / "data"), AGENTWATCH_NATS_URL=f"nats://127.0.0.1:{port}"
    )
    run_emit(_payload(1), env)
    queue = tmp_path / "data" / "spool" / "queue"
    with queue.open("ab") as f:
        f.write(b"garbage without structure\n")
    run_emit(_payload(2), env)
    server = NatsServer(tmp_path / "nats", port=port).start()
    try:
        collector: Collector = collector_for(server.url)
        flush = run_cli("spool", "flush", env=env)
        assert flush.returncode == 0
        assert "skipped 1 damaged line(s)" in flush.stdout
        assert len(collector.wait_for(2)) == 2
    finally:
        server.stop()


def test_flush_with_bus_down_says_what_to_do(tmp_path: Path) -> None:
    env = clean_env(
        AGENTWATCH_DATA_DIR=str(tmp_path / "data"), AGENTWATCH_NATS_URL=f"nats://127.0.0.1:{free_port()}"
    )
    run_emit(_payload(1), env)
    flush = run_cli("spool", "flush", "--timeout", "1", env=env)
    assert flush.returncode == 2
    assert "does not answer" in flush.stderr and "stay spooled" in flush.stderr
    assert "pending:  1 event message(s)" in run_cli("spool", "status", env=env).stdout


def test_without_a_stream_core_subscribers_get_each_event_once_and_nothing_waits(
    tmp_path: Path, collector_for: Any
) -> None:
    """On JetStream with no stream for genie.>, a core subscriber's presence used to keep the hook
    waiting for acks no stream would send, until its deadline, and the event was spooled and sent
    again. Now JetStream is asked in the same write: no stream, so the PONG confirms."""
    server = NatsServer(tmp_path / "nats", stream=False).start()
    try:
        env = clean_env(
            AGENTWATCH_DATA_DIR=str(tmp_path / "data"),
            AGENTWATCH_NATS_URL=server.url,
            AGENTWATCH_DEADLINE_MS="2000",
        )
        collector: Collector = collector_for(server.url)
        started = time.monotonic()
        assert run_emit(_payload(1), env).returncode == 0
        assert time.monotonic() - started < 1.5, "no wait for acks that never come"
        assert len(collector.wait_for(1)) == 1, "live subscribers see it at once"
        assert "pending:  0 event message(s)" in run_cli("spool", "status", env=env).stdout
        knowledge = (tmp_path / "data" / "bus-knowledge").read_text().split()
        assert knowledge[:2] == [f"127.0.0.1:{server.port}", "0"], "it remembers: no stream here"
        assert run_emit(_payload(2), env).returncode == 0
        assert [m.data for m in collector.settle()] == [m.data for m in collector.wait_for(2)]
        assert len(collector.settle()) == 2, "each event once: nothing spooled, nothing sent again"
        assert not (tmp_path / "data" / "crash.jsonl").exists()
    finally:
        server.stop()


def _capture_in_child(tmp_path: Path, kind: str, size: int, fsize_limit: int = 0) -> dict[str, Any]:
    """Run Spool.capture_stdin in a child process fed `size` bytes through a pipe or a socket,
    optionally with a file size limit (a disk that takes no more): what it returned and left."""
    script = f"""
import json, os, resource, signal, socket, sys, threading
from agentwatch.emitter.spool import Spool
payload = b"x" * {size}
if {kind!r} == "pipe":
    r, w = os.pipe()
    writer = lambda: (os.write(w, payload), os.close(w))
else:
    a, b = socket.socketpair()
    r = a.fileno()
    writer = lambda: (b.sendall(payload), b.shutdown(socket.SHUT_WR))
threading.Thread(target=writer).start()
if {fsize_limit}:
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, ({fsize_limit}, {fsize_limit}))
spool = Spool({str(tmp_path / "spool")!r})
raw, path = spool.capture_stdin(r, b'{{"at": 1}}')
left = os.listdir(spool.inflight)
kept = open(path, "rb").read() if path else b""
print(json.dumps({{"same": raw == payload, "path": path, "left": left, "head": kept[:20].decode(),
                  "kept": len(kept)}}))
"""
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, timeout=60, check=True)
    return dict(json.loads(done.stdout))


def test_stdin_is_read_straight_into_the_in_flight_file_from_a_pipe_or_a_socket(tmp_path: Path) -> None:
    for kind, size in (("pipe", 10), ("pipe", 900_000), ("socket", 200_000)):
        got = _capture_in_child(tmp_path / kind / str(size), kind, size)
        assert got["same"], (kind, size)
        header = f'#stdin +{size:012d}{{"at": 1}}\n'  # complete, the size of the stdin it kept
        assert got["head"] == (header + "x" * 20)[:20] and got["kept"] == len(header) + size, (kind, got)


def test_a_disk_that_takes_no_more_keeps_the_whole_stdin_in_memory(tmp_path: Path) -> None:
    got = _capture_in_child(tmp_path, "pipe", 50_000, fsize_limit=4096)
    assert got["same"] and got["path"] == "" and got["left"] == []
    got = _capture_in_child(tmp_path / "s", "socket", 50_000, fsize_limit=4096)
    assert got["same"] and got["path"] == "" and got["left"] == []


def test_a_stdin_over_the_capture_limit_is_read_whole_and_not_kept_as_read(tmp_path: Path) -> None:
    got = _capture_in_child(tmp_path, "pipe", (1 << 20) + 5000)
    assert got["same"] and got["path"] == "" and got["left"] == []
