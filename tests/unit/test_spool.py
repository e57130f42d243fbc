"""The spool's in-flight file when the hook's deadline interrupts its write."""

from __future__ import annotations

import os
import posix
import time
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


def test_held_messages_follow_the_capture_in_its_file(tmp_path: Path) -> None:
    """The messages are added to the run's own in-flight file (no second file, no rename), and a
    recovery of that file queues them as they are, not messages made again from the stdin."""
    spool = Spool(str(tmp_path / "spool"), rebuild=lambda header, raw: [("genie.x", "02NEW", b"{}")])
    capture, raw = _capture(spool, b'{"hook_event_name": "Stop"}')
    held = spool.hold(MESSAGES, capture)
    assert held == capture and os.listdir(tmp_path / "spool" / "inflight") == [str(os.getpid())]
    data = Path(held).read_bytes()
    assert data.startswith(b"#stdin =") and data.endswith(
        raw + b'genie.agent.a.response 01ID {"id":"01ID"}\n'
    )
    Path(held).rename(Path(held).with_name(str(DEAD)))
    assert spool.recover() == 1
    assert (tmp_path / "spool" / "queue").read_bytes() == b'genie.agent.a.response 01ID {"id":"01ID"}\n'


def test_a_run_killed_while_it_added_its_messages_is_rebuilt_from_its_stdin(tmp_path: Path) -> None:
    """Killed with part of its messages written after its capture (not yet marked HELD): the
    recovery makes the messages from the stdin the capture's size says, without those bytes."""
    seen: list[bytes] = []

    def rebuild(header: bytes, raw: bytes) -> list[tuple[str, str, bytes]]:
        seen.append(raw)
        return [("genie.agent.a.response", "02NEW", b'{"id":"02NEW"}')]

    spool = Spool(str(tmp_path / "spool"), rebuild=rebuild)
    capture, raw = _capture(spool, b'{"hook_event_name": "Stop"}')
    with open(capture, "ab") as f:
        f.write(b"genie.agent.a.response 01ID {")
    Path(capture).rename(Path(capture).with_name(str(DEAD)))
    assert spool.recover() == 1
    assert seen == [raw]
    assert (tmp_path / "spool" / "queue").read_bytes() == b'genie.agent.a.response 02NEW {"id":"02NEW"}\n'


def test_confirmed_messages_leave_nothing_in_flight_nor_to_recover(tmp_path: Path) -> None:
    """Confirmed messages are deleted: the spool is empty, and nothing is queued again."""
    spool = Spool(str(tmp_path / "spool"), rebuild=lambda header, raw: [])
    for _ in range(2):
        capture, _ = _capture(spool, b'{"hook_event_name": "Stop"}')
        spool.release(spool.hold(MESSAGES, capture))
    spool.release(spool.hold(MESSAGES))  # a run whose stdin was not captured
    assert os.listdir(tmp_path / "spool" / "inflight") == []
    assert spool.is_empty()
    assert spool.recover() == 0
    assert not (tmp_path / "spool" / "queue").exists()


DEAD = 2**22 + 17  # above the kernel's largest pid: no process has it


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


def test_an_unreadable_capture_does_not_make_every_run_flush(tmp_path: Path) -> None:
    """A capture kept as unreadable is for a person to see: no flush takes it, so the hook's check
    for work (every run with the bus up makes it) does not count it."""
    spool = Spool(str(tmp_path / "spool"), rebuild=lambda header, raw: [])
    capture, _ = _capture(spool, b'{"hook_event_name": "Stop"}')
    Path(capture).rename(Path(capture).with_name(f"{DEAD}.unreadable"))
    assert spool.is_empty()
    assert spool.status().unreadable == 1


def test_an_append_the_disk_stops_part_way_leaves_nothing_of_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The disk takes the first bytes of an append and refuses the rest: the file is cut back to
    where the append began, and the next append starts a line of its own."""
    spool = Spool(str(tmp_path / "spool"))
    assert spool.append(MESSAGES)
    before = (tmp_path / "spool" / "queue").read_bytes()
    real_write = posix.write

    def full(fd: int, data: bytes) -> int:
        if len(data) > 10:
            return real_write(fd, bytes(data[:10]))
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(posix, "write", full)
    with pytest.raises(OSError, match="No space left"):
        spool.append([("genie.agent.a.response", "02ID", b'{"id":"02ID","x":"' + b"y" * 100 + b'"}')])
    monkeypatch.undo()
    assert (tmp_path / "spool" / "queue").read_bytes() == before
    with (tmp_path / "spool" / "queue").open("ab") as f:
        f.write(b"genie.agent.a.response 03ID {")  # a writer killed mid-line
    assert spool.append(MESSAGES)
    assert (tmp_path / "spool" / "queue").read_bytes().endswith(b"03ID {\n" + before)


def test_a_flushed_event_says_what_the_spool_still_holds_when_it_is_sent(tmp_path: Path) -> None:
    """`spool_bytes` says what the spool held, unsent, when the event was published: for a
    spooled event, what is left once the batch it is sent in is confirmed (0 for the last). A
    quoted `"spool_bytes":` inside a string is not the envelope's and stays as it was."""
    from agentwatch.emitter.spool import restamp

    spool = Spool(str(tmp_path / "spool"))
    body = b'{"v":1,"id":"01A","text":"say \\"spool_bytes\\":7","seq":1,"spool_bytes":%d,"data":{}}'
    spool.append([("genie.agent.a.stop", f"01A{n}", body % (n * 1000)) for n in range(3)])
    sent: list[bytes] = []
    spool.flush(lambda batch: sent.extend(b for _, _, b in batch), deadline=time.monotonic() + 10)
    assert len(sent) == 3 and all(b'"spool_bytes":0,' in b for b in sent), sent
    assert all(b'say \\"spool_bytes\\":7' in b for b in sent)
    assert restamp(b'{"spool_bytes":123456,"x":1}', 42) == b'{"spool_bytes":42,"x":1}'
    assert restamp(b'{"x":1}', 42) == b'{"x":1}'
