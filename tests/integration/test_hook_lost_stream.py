"""A stream deleted under the hook: its events stay spooled until a stream captures genie.> again.

Before, once the hook's memory of the stream expired (a minute), it asked JetStream, heard that no
stream captures genie.>, took the server's PONG as confirmation and emptied its spool into nothing.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import nats

from tests.conftest import clean_env, hook_settled, run_cli, run_emit
from tests.services import NatsServer, make_stream


def _payload(i: int) -> bytes:
    return json.dumps(
        {
            "session_id": "10575742-0000-4000-8000-000000000000",
            "hook_event_name": "PreToolUse",
            "tool_name": "Bash",
            "tool_input": {"command": f"echo {i}"},
        }
    ).encode()


def _stream(url: str, delete: bool = False) -> list[str]:
    """The commands of every event GENIE holds (after deleting it, when asked: none)."""

    async def run() -> list[str]:
        nc = await nats.connect(url)
        try:
            js = nc.jetstream()
            if delete:
                await js.delete_stream("GENIE")
                return []
            last = (await js.stream_info("GENIE")).state.last_seq
            return [
                json.loads((await js.get_msg("GENIE", seq)).data or b"")["data"]["tool_input"]["command"]
                for seq in range(1, last + 1)
            ]
        finally:
            await nc.close()

    return asyncio.run(run())


def _age_knowledge(data: Path, seconds: float) -> None:
    """Make what the hook learned about the bus `seconds` older, as if that time had passed."""
    path = data / "bus-knowledge"
    lines = []
    for line in path.read_text().splitlines():
        parts = line.split()
        parts[2] = f"{float(parts[2]) - seconds:.3f}"
        lines.append(" ".join(parts))
    path.write_text("\n".join(lines) + "\n")


def test_a_deleted_stream_keeps_the_events_spooled_until_one_is_back(tmp_path: Path) -> None:
    server = NatsServer(tmp_path / "nats").start()
    data = tmp_path / "data"
    env = clean_env(AGENTWATCH_DATA_DIR=str(data), AGENTWATCH_NATS_URL=server.url)
    try:
        assert run_emit(_payload(0), env).returncode == 0
        assert hook_settled(data)
        assert _stream(server.url) == ["echo 0"], "acknowledged by the stream"
        _stream(server.url, delete=True)

        # Just after: the hook still knows a stream is there, and JetStream answers "no responders".
        for i in (1, 2):
            assert run_emit(_payload(i), env).returncode == 0
            assert hook_settled(data)
        # A minute later: its knowledge expired, it asks, and no stream captures genie.> now.
        _age_knowledge(data, 120)
        for i in (3, 4, 5):
            assert run_emit(_payload(i), env).returncode == 0
            assert hook_settled(data)
            _age_knowledge(data, 120)
        status = run_cli("spool", "status", env=env).stdout
        assert "pending:  5 event message(s)" in status, status
        crash = (data / "crash.jsonl").read_text()
        assert "no stream for genie.> any more" in crash

        make_stream(server.url)  # the collector (or `agentwatch up`) makes it again
        assert run_emit(_payload(6), env).returncode == 0
        assert hook_settled(data)
        flush = run_cli("spool", "flush", env=env)
        assert flush.returncode == 0, flush.stdout + flush.stderr
        stored = _stream(server.url)
        assert sorted(stored) == [f"echo {i}" for i in range(1, 7)], "every spooled event, once"
        assert "pending:  0 event message(s)" in run_cli("spool", "status", env=env).stdout
    finally:
        server.stop()


def test_a_bus_that_never_had_a_stream_still_takes_the_pong(tmp_path: Path) -> None:
    """The other side of the rule: where no stream ever captured genie.> (genie's own bus before
    `agentwatch up`), the server's PONG confirms, as it did."""
    server = NatsServer(tmp_path / "nats", stream=False).start()
    data = tmp_path / "data"
    env = clean_env(AGENTWATCH_DATA_DIR=str(data), AGENTWATCH_NATS_URL=server.url)
    try:
        for i in range(3):
            assert run_emit(_payload(i), env).returncode == 0
            assert hook_settled(data)
            _age_knowledge(data, 120)
        assert "pending:  0 event message(s)" in run_cli("spool", "status", env=env).stdout
    finally:
        server.stop()
