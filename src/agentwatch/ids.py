"""Event ids and times: ULIDs (time-sortable, 26 characters of Crockford base32) and ISO-8601 UTC.

Standard library only, and light: it is on the hook's path. The contract module re-exports these.
"""

from __future__ import annotations

import posix  # os.urandom without os: see config.py
import time

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

_CROCKFORD = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"


def new_event_id(now: float | None = None) -> str:
    """A 26-character ULID: 48 bits of Unix milliseconds, 80 random bits, Crockford base32.

    Lexical order is time order, so ids sort like the events they name.
    """
    ms = int((time.time() if now is None else now) * 1000)
    value = (ms << 80) | int.from_bytes(posix.urandom(10), "big")
    chars = []
    for _ in range(26):
        chars.append(_CROCKFORD[value & 31])
        value >>= 5
    return "".join(reversed(chars))


def sha1_digest(data: bytes) -> bytes:
    """The SHA-1 of `data`, for stable names and ids (not for security), through the C module
    alone: `hashlib` costs the hook several milliseconds."""
    try:
        sha1: Any = __import__("_sha1").sha1
    except ImportError:  # pragma: no cover - CPython builds it unless told not to
        import hashlib

        sha1 = hashlib.sha1
    return bytes(sha1(data, usedforsecurity=False).digest())


def stable_event_id(ms: int, key: str) -> str:
    """A ULID for something that must keep its id when sent again (a usage record read twice):
    48 bits of `ms`, then 80 bits of the SHA-1 of `key`. JetStream drops the repeat by this id."""
    value = (max(ms, 0) << 80) | int.from_bytes(sha1_digest(key.encode("utf-8", "replace"))[:10], "big")
    chars = []
    for _ in range(26):
        chars.append(_CROCKFORD[value & 31])
        value >>= 5
    return "".join(reversed(chars))


def event_id_time(event_id: str) -> float:
    """Unix time in seconds encoded in an event id."""
    value = 0
    for ch in event_id[:10]:
        value = value * 32 + _CROCKFORD.index(ch)
    return value / 1000.0


def iso_utc(now: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(now)) + f".{int(now * 1000) % 1000:03d}Z"
