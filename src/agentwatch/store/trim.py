"""Payload weight: before storage, a string of an event's payload longer than the limit (a Read of
a binary as base64, an Edit's whole original file, a very long command output) keeps its head
and its tail, and says in between how much was cut and how long it was.

Only bodies longer than the limit are decoded (nothing else is on the store's hot path); a body
that was trimmed gets `truncated: true`, like the hook's own cuts. The limit is
AGENTWATCH_STORE_FIELD_MAX_BYTES (0: keep everything).
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any

import orjson

DEFAULT_FIELD_MAX_BYTES = 16_384
FIELD_MAX_SETTING = "AGENTWATCH_STORE_FIELD_MAX_BYTES"


def field_max_bytes(environ: Mapping[str, str] = os.environ) -> int:
    """The limit per payload string, in UTF-8 bytes; 0 turns trimming off."""
    raw = environ.get(FIELD_MAX_SETTING, "").strip()
    if not raw:
        return DEFAULT_FIELD_MAX_BYTES
    try:
        value = int(raw)
    except ValueError:
        return DEFAULT_FIELD_MAX_BYTES
    return max(0, value)


def cut(text: str, limit: int) -> str:
    """`text` within about `limit` bytes: its head and tail, the cut noted with the original size."""
    data = text.encode("utf-8")
    if len(data) <= limit:
        return text
    keep = max(limit // 2, 1)
    head = data[:keep].decode("utf-8", "ignore")
    tail = data[-keep:].decode("utf-8", "ignore")
    note = f"\n[agentwatch: {len(data) - 2 * keep} of {len(data)} bytes cut]\n"
    return head + note + tail


def _trim(value: Any, limit: int) -> tuple[Any, bool]:
    if isinstance(value, str):
        if len(value) * 4 <= limit:  # cannot be over the limit: no encoding needed
            return value, False
        trimmed = cut(value, limit)
        return trimmed, trimmed is not value
    if isinstance(value, dict):
        changed = False
        for key, item in value.items():
            value[key], done = _trim(item, limit)
            changed = changed or done
        return value, changed
    if isinstance(value, list):
        changed = False
        for i, item in enumerate(value):
            value[i], done = _trim(item, limit)
            changed = changed or done
        return value, changed
    return value, False


def trim_bodies(bodies: Sequence[bytes], limit: int) -> list[bytes]:
    """The bodies, those longer than `limit` with their payload's long strings cut (see `cut`)."""
    if limit <= 0:
        return list(bodies)
    out: list[bytes] = []
    for body in bodies:
        if len(body) <= limit:
            out.append(body)
            continue
        try:
            env = orjson.loads(body)
        except orjson.JSONDecodeError:
            out.append(body)  # not JSON: ClickHouse rejects it, and the writer dead-letters it
            continue
        if not isinstance(env, dict) or "data" not in env:
            out.append(body)
            continue
        env["data"], changed = _trim(env["data"], limit)
        if changed:
            env["truncated"] = True
            out.append(orjson.dumps(env))
        else:
            out.append(body)
    return out
