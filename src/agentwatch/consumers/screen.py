"""Screening: every body the store fetched, parsed once and checked before anything acts on it.

The store's handler (or the watchdog beside it, which reads every envelope anyway) runs `screen`
over each fetched batch: what is no envelope is found before the insert, what is out of range is
corrected (envelope_check.check_envelope), and the store inserts the result, so ClickHouse never
sees a body it would refuse a whole batch for.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any

import orjson
from nats.aio.msg import Msg

from agentwatch.contract import ENVELOPE_PREFIX, EnvelopeError, dumps, is_usage_subject
from agentwatch.envelope_check import CORRECTED_KEY, check_envelope

# What screening found in a batch, by id() of the message: the body to insert instead of the one
# it came with (a corrected envelope, or one not written as the emitter writes it), or the reason
# the message can never be stored (a str).
Fixes = dict[int, bytes | str]


def screen(
    msgs: Sequence[Msg],
    now: float | None = None,
    each: Callable[[Msg, dict[str, Any]], None] | None = None,
) -> Fixes:
    """Every body of `msgs` parsed once and checked against the contract (check_envelope), so
    ClickHouse never sees one it would refuse: a body that is no envelope is found here with its
    reason, and one whose time or numbers are out of range is corrected (its values kept in its
    `data`). `each` (the watchdog) is handed every envelope as it will be stored, as it is parsed:
    a batch's decoded envelopes are never all held at once (holding them cost more than parsing
    them). Usage records are checked on their own path (store/usage.py). Returns what the store
    inserts or dead-letters instead of a body as it came."""
    now = time.time() if now is None else now
    fixes: Fixes = {}
    loads = orjson.loads
    for msg in msgs:
        body = msg.data
        try:
            env = loads(body)
        except orjson.JSONDecodeError as exc:
            fixes[id(msg)] = f"not an agentwatch envelope: not JSON: {exc}"
            continue
        subject = msg.subject
        if subject.endswith(".usage") and is_usage_subject(subject):
            if each is not None and type(env) is dict:
                each(msg, env)
            continue
        try:
            checked = check_envelope(env, now)
        except EnvelopeError as exc:
            fixes[id(msg)] = f"not an agentwatch envelope: {exc}"
            continue
        if checked is not env:
            data = checked.get("data")
            if isinstance(data, dict) and "timestamp" in data.get(CORRECTED_KEY, ()):
                checked = check_envelope(env, now, _arrived(msg, now))
            fixes[id(msg)] = _body(checked)
        elif not (body.startswith(ENVELOPE_PREFIX) and body.endswith(b"}")):
            fixes[id(msg)] = _body(checked)  # not as `dumps` writes it (ENVELOPE_PREFIX ... }): again
        if each is not None:
            each(msg, checked)
    return fixes


def _body(env: dict[str, Any]) -> bytes:
    """An envelope as the store inserts it (no subject: the contract derives it)."""
    return dumps({k: v for k, v in env.items() if k != "subject"})


def _arrived(msg: Msg, default: float) -> float:
    """When the stream took `msg` (the same on every delivery), else `default`."""
    try:
        return float(msg.metadata.timestamp.timestamp())
    except Exception:  # not a JetStream delivery (a test's own message)
        return default
