"""The spool's in-flight file when the hook's deadline interrupts its write."""

from __future__ import annotations

import os
import posix
from pathlib import Path

import pytest

from agentwatch.emitter.spool import Spool


class Interruption(BaseException):
    """What the hook's SIGALRM handler raises (hook.Deadline), wherever Python happens to be."""


MESSAGES = [("genie.agent.a.response", "01ID", b'{"id":"01ID"}')]


def test_a_deadline_just_after_the_close_leaves_no_temporary_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The deadline comes just after a close returned (the signal's handler runs at the next
    instruction): the temporary file goes, and what propagates is the deadline, not EBADF from
    closing the descriptor a second time."""
    spool = Spool(str(tmp_path / "spool"))
    real_close = os.close

    def close_then_interrupt(fd: int) -> None:
        real_close(fd)
        raise Interruption

    monkeypatch.setattr(posix, "close", close_then_interrupt)  # what the spool calls
    with pytest.raises(Interruption):
        spool.hold(MESSAGES)
    monkeypatch.undo()
    left = sorted(p.name for p in (tmp_path / "spool" / "inflight").iterdir())
    assert not [name for name in left if name.endswith(".tmp")], left


def test_held_messages_replace_the_capture_whole(tmp_path: Path) -> None:
    spool = Spool(str(tmp_path / "spool"))
    capture, _ = _capture(spool, b'{"hook_event_name": "Stop"}')
    held = spool.hold(MESSAGES, capture)
    assert Path(held).read_bytes() == b'genie.agent.a.response 01ID {"id":"01ID"}\n'
    assert os.listdir(tmp_path / "spool" / "inflight") == [f"{os.getpid()}.held"]


def test_confirmed_messages_leave_nothing_in_flight_nor_to_recover(tmp_path: Path) -> None:
    """Confirmed messages are deleted; no in-flight file is renamed over another (a deletion
    then waits for the disk write such a rename starts): the spool is empty, nothing is queued."""
    spool = Spool(str(tmp_path / "spool"), rebuild=lambda header, raw: [])
    for _ in range(2):
        capture, _ = _capture(spool, b'{"hook_event_name": "Stop"}')
        spool.retire(spool.hold(MESSAGES, capture))
    assert os.listdir(tmp_path / "spool" / "inflight") == []
    assert spool.is_empty()
    assert spool.recover() == 0
    assert not (tmp_path / "spool" / "queue").exists()


def test_a_run_killed_between_holding_and_dropping_its_capture_is_queued_once(tmp_path: Path) -> None:
    """Killed after its messages were written and before its capture went: recovery queues the
    messages (their ids, as sent) and drops the capture instead of making it into new ones."""
    spool = Spool(str(tmp_path / "spool"), rebuild=lambda header, raw: [("genie.x", "02NEW", b"{}")])
    inflight = tmp_path / "spool" / "inflight"
    inflight.mkdir(parents=True)
    dead = 2**22 + 17  # above the kernel's largest pid: no process has it
    (inflight / str(dead)).write_bytes(b"#stdin +{}\n" + b'{"hook_event_name": "Stop"}')
    (inflight / f"{dead}.held").write_bytes(b'genie.agent.a.response 01ID {"id":"01ID"}\n')
    assert spool.recover() == 1
    assert (tmp_path / "spool" / "queue").read_bytes() == b'genie.agent.a.response 01ID {"id":"01ID"}\n'
    assert os.listdir(inflight) == []


def test_a_deadline_inside_hold_settles_the_messages_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The deadline comes after the messages file is in place and before the capture is dropped:
    hold never returned, so the run settles with its capture's path; the messages are queued
    once and nothing stays in flight."""
    spool = Spool(str(tmp_path / "spool"))
    capture, _ = _capture(spool, b'{"hook_event_name": "Stop"}')

    def interrupted(held: str) -> None:
        raise Interruption

    monkeypatch.setattr(spool, "release", interrupted)
    with pytest.raises(Interruption):
        spool.hold(MESSAGES, capture)
    monkeypatch.undo()
    assert spool.settle(capture, MESSAGES)
    assert (tmp_path / "spool" / "queue").read_bytes() == b'genie.agent.a.response 01ID {"id":"01ID"}\n'
    assert os.listdir(tmp_path / "spool" / "inflight") == []


def _capture(spool: Spool, payload: bytes) -> tuple[str, bytes]:
    """This process's capture of `payload`, as the hook reads its stdin."""
    read_end, write_end = os.pipe()
    os.write(write_end, payload)
    os.close(write_end)
    try:
        raw, path = spool.capture_stdin(read_end, b"{}")
    finally:
        os.close(read_end)
    return path, raw
