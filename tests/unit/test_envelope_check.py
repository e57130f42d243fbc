"""What a reader takes as said (envelope_check.check_envelope, and the store's `screen` that the store
and the watchdog share): times outside 2000 .. a day ahead replaced by the arrival time, numbers
outside their columns zeroed, the originals kept in `data`; the watchdog sees the corrected time."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest
from nats.aio.msg import Msg

from agentwatch.consumers.rules import Engine, parse_rules
from agentwatch.consumers.screen import screen
from agentwatch.contract import EnvelopeError, iso_utc
from agentwatch.envelope_check import CORRECTED_KEY, check_envelope
from agentwatch.format import utc_seconds

NOW = 1795316400.0  # 2026-11-22T03:00:00Z
nc: Any = None  # no connection: the messages are only read


def envelope(**fields: object) -> dict[str, object]:
    base: dict[str, object] = {
        "v": 1, "id": "01X", "timestamp": iso_utc(NOW - 5), "event": "PreToolUse", "kind": "tool_call",
        "agent": "a", "session_id": "s", "host": "h", "tool_name": "Bash", "tool_use_id": "u", "seq": 3,
        "redacted": 0, "truncated": False, "spool_bytes": 0, "duration_ms": None,
        "data": {"tool_name": "Bash"},
    }  # fmt: skip
    return {**base, **fields}


def test_an_envelope_as_the_hook_writes_it_is_taken_as_is() -> None:
    env = envelope()
    assert check_envelope(env, NOW) is env


@pytest.mark.parametrize(
    "stamp",
    ["9999-12-31T00:00:00.000Z", "1900-01-01T00:00:00.000Z", "1999-12-31T23:59:59.999Z",
     iso_utc(NOW + 86400 + 60), "2026-13-45T99:99:99.000Z", "yesterday", "2026-W47-1"],
)  # fmt: skip
def test_a_time_out_of_range_becomes_the_arrival_time(stamp: object) -> None:
    out = check_envelope(envelope(timestamp=stamp), NOW, arrived=NOW - 1)
    assert out["timestamp"] == iso_utc(NOW - 1)
    assert out["data"][CORRECTED_KEY]["timestamp"] == stamp
    assert out["data"]["tool_name"] == "Bash", "the payload kept"


def test_a_time_within_range_in_another_form_is_the_same_time_in_the_wire_form() -> None:
    out = check_envelope(envelope(timestamp="2026-11-22T05:59:58+03:00"), NOW)
    assert out["timestamp"] == "2026-11-22T02:59:58.000Z" and CORRECTED_KEY not in out["data"]
    assert check_envelope(envelope(timestamp=iso_utc(NOW + 3600)), NOW)["timestamp"] == iso_utc(NOW + 3600)


@pytest.mark.parametrize(
    ("field", "value", "stored"),
    [("seq", 2**70, 0), ("seq", 2**64, 0), ("seq", -1, 0), ("seq", 1.0, 0), ("seq", "7", 0),
     ("spool_bytes", -5, 0), ("redacted", 2**32, 0), ("redacted", True, 0),
     ("duration_ms", 2**63, None), ("duration_ms", "12", None), ("truncated", "yes", False),
     ("truncated", 1, False), ("hook_ms", -1.5, 0), ("hook_ms", "12", 0), ("hook_ms", float("nan"), 0),
     ("hook_ms", 1e12, 0), ("hook_ms", True, 0)],
)  # fmt: skip
def test_a_number_out_of_its_column_is_zeroed_and_kept_in_data(
    field: str, value: object, stored: object
) -> None:
    out = check_envelope(envelope(**{field: value}, data="not an object"), NOW)
    assert out[field] == stored
    assert out["data"] == {
        "data": "not an object",
        CORRECTED_KEY: {field: value, "why": out["data"][CORRECTED_KEY]["why"]},
    }
    assert check_envelope(envelope(**{field: None}), NOW)[field] is None, "null: the column's default"


def test_the_largest_values_in_range_are_kept() -> None:
    env = envelope(
        seq=2**64 - 1, spool_bytes=2**64 - 1, redacted=2**32 - 1, duration_ms=-(2**63), hook_ms=1e9
    )
    assert check_envelope(env, NOW) is env


@pytest.mark.parametrize(
    "fields",
    [{"v": 2}, {"v": "1"}, {"agent": ""}, {"agent": 7}, {"id": None}, {"timestamp": ""}, {"timestamp": 1234}],
)
def test_what_is_no_envelope_is_refused_with_its_reason(fields: dict[str, object]) -> None:
    with pytest.raises(EnvelopeError):
        check_envelope(envelope(**fields), NOW)


def test_the_watchdog_sees_the_corrected_time() -> None:
    """A call stamped 1900 made the stuck-tool rule see it running for four billion seconds."""
    now = time.time()
    body = json.dumps(envelope(timestamp="1900-01-01T00:00:00.000Z", seq=2**70)).encode()
    envs: list[dict[str, Any]] = []
    fixes = screen([Msg(nc, subject="genie.tool.a.call", data=body)], now, lambda _m, env: envs.append(env))
    (env,) = envs
    assert abs(utc_seconds(env["timestamp"]) - now) < 1  # type: ignore[operator]
    assert env["seq"] == 0
    assert fixes, "the store inserts the corrected body"
    rules = "[stuck_tool]\nfloor_s = 30\n"
    engine = Engine(parse_rules(rules))
    engine.take(env, now)
    assert engine.tick(now + 1) == [], "a call that began a second ago is not stuck"
    raw = Engine(parse_rules(rules))
    raw.take(json.loads(body), now)
    assert [a["rule"] for a in raw.tick(now + 1)] == ["stuck_tool"], "(what it did before)"


def test_bodies_that_are_no_envelope_are_found_before_the_insert() -> None:
    bodies = [
        b'{"v":1,"id":"x","seq":NaN}',
        b"\xff",
        b'{"v":1,"id":"x"}',
        b"[1]",
        json.dumps(envelope()).encode(),
    ]
    envs: list[dict[str, Any]] = []
    msgs = [Msg(nc, subject="genie.tool.a.call", data=b) for b in bodies]
    fixes = screen(msgs, NOW, lambda _m, env: envs.append(env))
    assert len(envs) == 1 and envs[0]["id"] == "01X"
    assert sorted(type(v).__name__ for v in fixes.values()) == ["bytes", "str", "str", "str", "str"]
