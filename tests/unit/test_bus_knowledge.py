"""What the hook remembers about the bus (does a stream capture genie.>?) between its runs."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from agentwatch.emitter import wire

SERVER = "127.0.0.1:4222"


@pytest.mark.parametrize("stream", [True, False])
def test_what_a_run_learned_is_known_to_the_next_at_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, stream: bool
) -> None:
    """Learned at 1000.6 s and asked at the same moment: known (a time rounded to 1001 lay ahead
    of the clock, and a burst of runs each asked the bus and wrote the file again)."""
    env = {"AGENTWATCH_DATA_DIR": str(tmp_path)}
    monkeypatch.setattr(time, "time", lambda: 1000.6)
    wire.remember_bus(env, SERVER, stream)
    assert wire.bus_knowledge(env, SERVER) is stream
    assert wire.bus_knowledge(env, "127.0.0.1:4223") is None, "another server: nothing known"


def test_knowledge_expires(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    env = {"AGENTWATCH_DATA_DIR": str(tmp_path)}
    monkeypatch.setattr(time, "time", lambda: 1000.0)
    wire.remember_bus(env, SERVER, True)
    wire.remember_bus(env, "127.0.0.1:4223", False)
    assert wire.bus_knowledge(env, SERVER, now=1000.0 + wire.STREAM_KNOWN_S - 1) is True
    assert wire.bus_knowledge(env, SERVER, now=1000.0 + wire.STREAM_KNOWN_S + 1) is None
    assert wire.bus_knowledge(env, "127.0.0.1:4223", now=1000.0 + wire.NO_STREAM_KNOWN_S + 1) is None
