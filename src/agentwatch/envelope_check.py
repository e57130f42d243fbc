"""What a reader may take as an envelope says: times and numbers in range.

The store and the watchdog check every body with `check_envelope` before they act on it (see
docs/wire.md, "What a reader takes as said"). Standard library only, like the contract it extends.
"""

from __future__ import annotations

from agentwatch.contract import SCHEMA_VERSION, check_shape, iso_utc

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    Json = dict[str, Any]

# An envelope's time is taken as said when it is a time between TIME_FLOOR and FUTURE_SLACK_S
# after it reached the reader: before 2000 no agent ran (a year-1900 time made the watchdog see a
# tool running for four billion seconds), and a hook's clock a day ahead is broken (a year-9999
# time kept an agent "working" for ever, and ClickHouse clamps it to 2299). Any other time, or one
# that is no time at all, is replaced by the time the envelope reached the bus (`check_envelope`).
TIME_FLOOR = "2000-01-01T00:00:00.000Z"
TIME_FLOOR_S = 946684800.0
FUTURE_SLACK_S = 86400.0
# The typed columns' ranges (ClickHouse wraps or refuses a number outside them): field -> largest.
_U64, _U32 = 2**64 - 1, 2**32 - 1
_UNSIGNED = (("seq", _U64), ("spool_bytes", _U64), ("redacted", _U32))
_INT64 = 2**63
_HOOK_MS_MAX = 1e9  # `hook_ms` (Float32): a run's milliseconds, 0 up to this (11 days)
# Where an envelope says what the reader corrected, with the values it came with.
CORRECTED_KEY = "agentwatch_corrected"
_SECONDS: dict[str, float | None] = {}  # "2026-11-24T09:00:00" -> its Unix time (None: no time)


def wire_seconds(value: object) -> float | None:
    """Unix seconds of an envelope time; None when it is no time. The wire's own form
    (`2026-11-24T09:00:00.123Z`) is read from its second (parsed once per second) and its
    milliseconds; other ISO-8601 forms are parsed whole (a time without a zone is UTC)."""
    if type(value) is not str:
        return None
    if len(value) == 24 and value[19] == "." and value[23] == "Z" and value[20:23].isdigit():
        head = value[:19]
        whole = _SECONDS.get(head, 0.0)
        if whole == 0.0:
            whole = _parse_seconds(head)
            if len(_SECONDS) >= 10_000:
                _SECONDS.clear()
            _SECONDS[head] = whole
        return None if whole is None else whole + int(value[20:23]) / 1000
    return _parse_seconds(value)


def _parse_seconds(text: str) -> float | None:
    from datetime import UTC, datetime

    text = text.strip()
    if not (text.isascii() and 10 <= len(text) <= 40 and text[4] == text[7] == "-" and text[:4].isdigit()):
        return None  # (fromisoformat also takes week dates and the like: not envelope times)
    try:
        when = datetime.fromisoformat(text[:-1] + "+00:00" if text[-1:] in "Zz" else text)
    except ValueError:
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    try:
        return when.timestamp()
    except (OverflowError, ValueError, OSError):
        return None


def check_envelope(env: object, now: float, arrived: float | None = None) -> Json:
    """`env` (a decoded body) as a reader may store and act on it; EnvelopeError when it is not an
    envelope (decode_envelope's checks). Returns `env` itself when it needed nothing, else a
    corrected copy: a time outside TIME_FLOOR .. `now` + FUTURE_SLACK_S, or no time, becomes
    `arrived` (when the bus took it; else `now`); a time in another ISO-8601 form the same time in
    the wire's form; `seq`, `spool_bytes` or `redacted` that is not a whole number in its
    column's range becomes 0, `hook_ms` that is not a number from 0 to 1e9 0, `duration_ms`
    outside Int64 none, `truncated` not true or false false. The values it came with are kept in
    `data` under CORRECTED_KEY (with `data` itself under `data` there when it is not an object), so
    nothing is lost."""
    if type(env) is not dict:
        check_shape(env)
    assert type(env) is dict  # (for mypy: check_shape raised otherwise)
    get = env.get
    v = get("v")
    stamp: Any = get("timestamp")
    if not (
        type(v) is int
        and 1 <= v <= SCHEMA_VERSION
        and type(stamp) is str
        and stamp
        and type(get("id")) is str
        and get("id")
        and type(get("event")) is str
        and get("event")
        and type(get("kind")) is str
        and get("kind")
        and type(get("agent")) is str
        and get("agent")
    ):
        check_shape(env)  # says what is missing or wrong
    seconds = wire_seconds(stamp)
    seq, spool, redacted, duration, truncated, hook_ms = (
        get("seq"), get("spool_bytes"), get("redacted"), get("duration_ms"), get("truncated"), get("hook_ms"),
    )  # fmt: skip
    if (
        seconds is not None
        and TIME_FLOOR_S <= seconds <= now + FUTURE_SLACK_S
        and len(stamp) == 24
        and (seq is None or (type(seq) is int and 0 <= seq <= _U64))
        and (spool is None or (type(spool) is int and 0 <= spool <= _U64))
        and (redacted is None or (type(redacted) is int and 0 <= redacted <= _U32))
        and (duration is None or (type(duration) is int and -_INT64 <= duration < _INT64))
        and (truncated is None or type(truncated) is bool)
        and (hook_ms is None or _hook_ms_ok(hook_ms))
    ):
        return env  # the envelope as the hook writes it: nothing to correct
    fixed: Json | None = None
    if seconds is None or seconds < TIME_FLOOR_S or seconds > now + FUTURE_SLACK_S:
        fixed = {"timestamp": stamp}
        env = dict(env, timestamp=iso_utc(now if arrived is None else arrived))
    elif len(stamp) != 24 or stamp[23] != "Z":
        env = dict(env, timestamp=iso_utc(seconds))  # the same time, in the form ClickHouse reads
    for name, top in _UNSIGNED:
        value = env.get(name)
        if value is not None and (type(value) is not int or not 0 <= value <= top):
            fixed = fixed or {}
            fixed[name] = value
    duration = env.get("duration_ms")
    if duration is not None and (type(duration) is not int or not -_INT64 <= duration < _INT64):
        fixed = fixed or {}
        fixed["duration_ms"] = duration
    truncated = env.get("truncated")
    if truncated is not None and type(truncated) is not bool:
        fixed = fixed or {}
        fixed["truncated"] = truncated
    if hook_ms is not None and not _hook_ms_ok(hook_ms):
        fixed = fixed or {}
        fixed["hook_ms"] = hook_ms
    if fixed is None:
        return env
    out = dict(env)
    for name in fixed:
        if name != "timestamp":
            out[name] = None if name == "duration_ms" else (False if name == "truncated" else 0)
    data = out.get("data")
    note = {**fixed, "why": "outside what the envelope's fields may hold (docs/wire.md)"}
    kept = data if isinstance(data, dict) else {"data": data}
    out["data"] = {**kept, CORRECTED_KEY: note}
    return out


def _hook_ms_ok(value: object) -> bool:
    """A number of milliseconds from 0 to _HOOK_MS_MAX (NaN compares false: refused)."""
    return type(value) in (int, float) and 0 <= value <= _HOOK_MS_MAX  # type: ignore[operator]
