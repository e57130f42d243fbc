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
    held = spool.hold(MESSAGES)
    assert Path(held).read_bytes() == b'genie.agent.a.response 01ID {"id":"01ID"}\n'
    assert os.listdir(tmp_path / "spool" / "inflight") == [str(os.getpid())]


def test_a_retired_file_is_neither_in_flight_nor_recovered(tmp_path: Path) -> None:
    """Confirmed messages are renamed over one retired file (a deletion would wait for the disk
    write a rename over another file starts): the spool is empty, and nothing is queued again."""
    spool = Spool(str(tmp_path / "spool"), rebuild=lambda header, raw: [])
    spool.retire(spool.hold(MESSAGES))
    spool.retire(spool.hold(MESSAGES))
    assert os.listdir(tmp_path / "spool" / "inflight") == [".retired"]
    assert spool.is_empty()
    assert spool.recover() == 0
    assert not (tmp_path / "spool" / "queue").exists()
