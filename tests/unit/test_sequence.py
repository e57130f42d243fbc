"""The per-session counters' housekeeping: counters of sessions untouched for 30 days go."""

from __future__ import annotations

import os
from pathlib import Path

from agentwatch.emitter import sequence


def test_counters_untouched_for_a_month_are_removed(tmp_path: Path) -> None:
    assert sequence.next_seq(str(tmp_path), "old") == 1
    assert sequence.next_seq(str(tmp_path), "recent") == 1
    old = Path(sequence.counter_path(str(tmp_path), "old"))
    month_ago = old.stat().st_mtime - sequence.PRUNE_AFTER_S - 60
    os.utime(old, (month_ago, month_ago))
    assert sequence.prune(str(tmp_path)) == 1
    assert not old.exists()
    assert sequence.next_seq(str(tmp_path), "recent") == 2, "a live session keeps counting"
