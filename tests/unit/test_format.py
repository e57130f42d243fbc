"""The one set of wording rules the commands and the dashboard share (agentwatch/format.py)."""

from __future__ import annotations

import datetime as dt

import pytest

from agentwatch.format import (
    age,
    ago,
    clock,
    day_time,
    duration,
    human_bytes,
    one_line,
    rate,
    shorten,
    truncate,
    utc_datetime,
    utc_seconds,
)

NOW = 1_795_310_400.0  # 2026-11-22 01:20:00 UTC


@pytest.mark.parametrize(
    ("ms", "text"),
    [
        (None, "-"),
        (0, "0ms"),
        (120, "120ms"),
        (999.4, "999ms"),
        (1000, "1.0s"),
        (3400, "3.4s"),
        (42_000, "42s"),
        (125_000, "2m05s"),
        (6_590_000, "1h49m"),
        (3 * 86_400_000 + 4 * 3_600_000, "3d04h"),
        (-5, "0ms"),
    ],
)
def test_duration(ms: float | None, text: str) -> None:
    assert duration(ms) == text


@pytest.mark.parametrize(
    ("seconds", "text"),
    [
        (None, "-"),
        (0, "0s"),
        (59.9, "59s"),
        (60, "1m"),
        (3599, "59m"),
        (3600, "1h"),
        (86_400 * 2, "2d"),
        (-3, "0s"),
    ],
)
def test_age(seconds: float | None, text: str) -> None:
    assert age(seconds) == text


def test_unknown_is_said_as_the_caller_wants() -> None:
    assert age(None, unknown="") == ""
    assert duration(None, unknown="?") == "?"


@pytest.mark.parametrize(
    ("seconds", "text"), [(45, "45s"), (720, "12m"), (12_600, "3.5h"), (172_800, "2.0d")]
)
def test_ago_for_status_lines(seconds: float, text: str) -> None:
    assert ago(seconds) == text


def test_rates_sizes_and_times() -> None:
    assert rate(14.28) == "14.3%"
    assert rate(0) == "0.0%"
    assert rate(None) == "-"
    assert human_bytes(1023) == "1023 B"
    assert human_bytes(1536) == "1.5 KiB"
    assert clock(NOW) == "01:20:00"
    today = dt.datetime(2026, 11, 22, 3, 37, 45, tzinfo=dt.UTC)
    assert day_time(today, NOW) == "03:37:45"
    assert day_time(dt.datetime(2026, 11, 21, 23, 59, tzinfo=dt.UTC), NOW) == "11-21 23:59"
    assert day_time(None, NOW) == "-"


def test_names_are_cut_sensibly() -> None:
    cut = shorten("mcp__github__create_pull_request", 16)
    assert len(cut) == 16 and cut.startswith("mcp__gi") and cut.endswith("request") and "…" in cut
    assert shorten("Bash", 16) == "Bash"
    assert shorten("abcdefgh", 4) == "abc…"
    assert shorten("abc", 0) == ""
    assert truncate("abcdefgh", 4) == "abc…"
    assert truncate("abc", 4) == "abc"
    assert one_line("Exit code 1\n  Traceback:\tboom", 20) == "Exit code 1 Tracebac"
    assert one_line(None) == ""


def test_the_wire_times_read_fast_are_the_times_read_whole() -> None:
    """utc_seconds reads the envelope's own form from its second (cached) and its milliseconds:
    exactly the float the datetime gives, across seconds, days, a leap day and the cache's reset."""
    start = dt.datetime(2028, 2, 28, 23, 59, 58, tzinfo=dt.UTC)
    for step in range(0, 12_000_000, 997):  # past 10,000 distinct seconds: the cache starts over
        when = start + dt.timedelta(milliseconds=step)
        text = when.strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"
        whole = utc_datetime(text)
        assert whole is not None
        assert utc_seconds(text) == whole.timestamp() == when.timestamp(), text


@pytest.mark.parametrize(
    "text",
    [
        "2026-11-24T09:00:00.12xZ",
        "2026-11-24T09:00:00.1٣3Z",  # a digit, but not an ASCII one
        "2026-11-24T09:00:60.123Z",
        "2026-13-24T09:00:00.123Z",
        "2026-11-24 09:00:00.123Z",
        "2026-11-24T09:00:00.123+00:00",
        "2026-11-24T09:00:00Z",
        "",
        "not a time at all, 24 ch",
    ],
)
def test_odd_times_read_as_the_datetime_reads_them(text: str) -> None:
    whole = utc_datetime(text)
    assert utc_seconds(text) == (None if whole is None else whole.timestamp())


def test_tool_counts_in_the_order_first_used() -> None:
    from agentwatch.format import tool_counts

    assert tool_counts(["Bash", "Read", "Bash", "Edit", "Bash"]) == "Bash ×3, Read, Edit"
    assert tool_counts([]) == ""
