"""A full disk under the hook's data dir: nothing glued, nothing lost without a trace.

The data dir is a 64 KiB tmpfs of its own, filled by a file of the test's; the hook runs as the
agent runs it (`agentwatch-emit`, the bus down, then up), and what reaches the GENIE stream is
read back message by message.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
from collections.abc import Iterator
from pathlib import Path

import nats
import pytest

from agentwatch.emitter.spool import Spool
from tests.conftest import clean_env, free_port, hook_settled, run_cli, run_emit
from tests.services import NatsServer

SESSION = "d15cf011-0000-4000-8000-000000000000"


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    data = tmp_path / "data"
    data.mkdir()
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=64k,mode=0700", "tmpfs", str(data)],
        capture_output=True,
        text=True,
        check=False,
    )
    if mounted.returncode != 0:
        pytest.skip(
            f"a full disk needs a small tmpfs, and mounting one is not permitted here: {mounted.stderr}"
        )
    try:
        yield data
    finally:
        subprocess.run(["umount", "-l", str(data)], check=False)


def _payload(i: int, pad: int = 0) -> bytes:
    return json.dumps(
        {
            "session_id": SESSION,
            "hook_event_name": "PreToolUse",
            "tool_name": "Bash",
            "tool_input": {"command": f"echo {i}", "description": "x" * pad},
            "tool_use_id": f"toolu_{i:04d}",
        }
    ).encode()


def _fill(path: Path, leave: int = 0) -> None:
    """Write `path` until the disk takes no more, then give `leave` bytes of it back."""
    with path.open("ab", buffering=0) as f:
        try:
            while True:
                f.write(b"\0" * 1024)
        except OSError:
            pass
    if leave:
        with path.open("r+b") as f:
            f.truncate(max(0, path.stat().st_size - leave))


def _stored(url: str) -> list[dict[str, object]]:
    """Every envelope the GENIE stream holds, read back one by one."""

    async def read() -> list[dict[str, object]]:
        nc = await nats.connect(url)
        try:
            js = nc.jetstream()
            last = (await js.stream_info("GENIE")).state.last_seq
            stored = []
            for seq in range(1, last + 1):
                msg = await js.get_msg("GENIE", seq)
                stored.append({**json.loads(msg.data or b""), "_subject": msg.subject})
            return stored
        finally:
            await nc.close()

    return asyncio.run(read())


def _queue_lines(data: Path) -> list[bytes]:
    queue = data / "spool" / "queue"
    return queue.read_bytes().splitlines() if queue.exists() else []


def _whole(line: bytes) -> bool:
    """One message: `SUBJECT ID BODY`, its body one JSON envelope with that id."""
    subject, msg_id, body = line.split(b" ", 2)
    env = json.loads(body)
    return subject.startswith(b"genie.") and env["id"] == msg_id.decode()


def test_a_full_disk_glues_nothing_and_loses_nothing_silently(small_disk: Path, tmp_path: Path) -> None:
    port = free_port()
    env = clean_env(AGENTWATCH_DATA_DIR=str(small_disk), AGENTWATCH_NATS_URL=f"nats://127.0.0.1:{port}")
    before = list(range(3))  # the hook ran here before: its spool and records exist
    for i in before:
        assert run_emit(_payload(i), env).returncode == 0
    filler = small_disk / "filler"

    # Full: nothing can be written at all. Then a page free, and events larger than a page: the
    # appends fail part-way (and a few of the small ones fit).
    during: list[int] = []
    _fill(filler)
    for i in range(10, 14):
        result = run_emit(_payload(i, pad=6000), env)
        assert result.returncode == 0 and result.stdout == b""
        during.append(i)
    for leave in (4096, 4096, 8192):
        _fill(filler, leave=leave)
        for i in range(20 + len(during), 23 + len(during)):
            assert run_emit(_payload(i, pad=6000 if i % 2 else 200), env).returncode == 0
            during.append(i)
    lines = _queue_lines(small_disk)
    assert all(_whole(line) for line in lines), "every spooled line is one whole message"
    assert (small_disk / "spool" / "queue").read_bytes().endswith(b"\n")

    filler.unlink()  # space returns
    after = list(range(100, 105))
    for i in after[:2]:  # the bus still down: spooled behind what is there
        assert run_emit(_payload(i, pad=6000), env).returncode == 0
    assert all(_whole(line) for line in _queue_lines(small_disk))

    server = NatsServer(tmp_path / "nats", port=port).start()
    try:
        for i in after[2:]:  # the bus up: each run publishes, and drains the spool
            assert run_emit(_payload(i), env).returncode == 0
            assert hook_settled(small_disk), sorted(
                p.name for p in (small_disk / "spool" / "inflight").iterdir()
            )
        flush = run_cli("spool", "flush", env=env)
        assert flush.returncode == 0, flush.stdout + flush.stderr
        assert "damaged" not in flush.stdout, "no line is damaged, none glued"
        stored = _stored(server.url)
    finally:
        server.stop()

    commands = [str(e["data"]["tool_input"]["command"]) for e in stored]  # type: ignore[index]
    assert len(commands) == len(set(commands)), "each event stored once"
    got = {int(c.split()[1]) for c in commands}
    assert set(before) <= got and set(after) <= got, (
        "every event before the disk filled and after space returned"
    )
    kept_while_full = got & set(during)
    lost, reported, _ = Spool(str(small_disk / "spool")).lost()
    assert len(kept_while_full) + lost == len(during), "each event of the full disk is stored or counted lost"
    assert lost >= 4 and reported == lost, (
        "the 4 events of the disk with no room at all are counted, and reported"
    )
    crash = [json.loads(line) for line in (small_disk / "crash.jsonl").read_text().splitlines()]
    assert any(c["kind"] == "disk_full" and "lost to a full disk" in c["message"] for c in crash)
    assert f"lost:     {lost} " in run_cli("spool", "status", env=env).stdout
    leftovers = [p.name for p in (small_disk / "spool" / "inflight").iterdir()]
    assert leftovers == [], f"no in-flight file stays behind: {leftovers}"
    assert not list(small_disk.glob("**/*.tmp")) and not list(small_disk.glob("bus-knowledge.*"))


def test_the_reader_never_sends_two_events_glued_as_one(tmp_path: Path) -> None:
    """A spool an earlier version left after a full disk: a partial line, the next message glued to
    it. The whole message at the end of such a line is sent, alone; the partial one is counted."""
    port = free_port()
    data = tmp_path / "data"
    env = clean_env(AGENTWATCH_DATA_DIR=str(data), AGENTWATCH_NATS_URL=f"nats://127.0.0.1:{port}")
    for i in range(4):
        assert run_emit(_payload(i), env).returncode == 0
    queue = data / "spool" / "queue"
    lines = queue.read_bytes().splitlines(keepends=True)
    # Cut short at three points: in the body, after the id, inside the subject.
    cut = [lines[0][: len(lines[0]) // 2], lines[1][: lines[1].index(b" {") - 3], lines[2][:9]]
    queue.write_bytes(cut[0] + lines[1] + cut[1] + lines[2] + cut[2] + lines[3])
    server = NatsServer(tmp_path / "nats", port=port).start()
    try:
        flush = run_cli("spool", "flush", env=env)
        assert flush.returncode == 0, flush.stderr
        assert "skipped 3 damaged line(s)" in flush.stdout
        stored = _stored(server.url)
    finally:
        server.stop()
    commands = sorted(str(e["data"]["tool_input"]["command"]) for e in stored)  # type: ignore[index]
    assert commands == ["echo 1", "echo 2", "echo 3"]
    assert {(e["_subject"], e["id"]) for e in stored} == {
        tuple(ln.decode().split(" ")[:2]) for ln in lines[1:]
    }
