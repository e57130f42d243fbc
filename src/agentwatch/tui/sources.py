"""Where the dashboard's data comes from: small Protocols, and their real implementations.

The app takes a LiveSource (envelopes as they happen) and a HistorySource (read-only SQL over the
store) through its constructor, so tests hand it deterministic fakes. Nothing here imports Textual.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Protocol

Envelope = dict[str, Any]
# An envelope, or its JSON as it came off the bus (decoded by the app when it applies it).
Deliver = Callable[[Envelope | bytes], None]
Status = Callable[[bool, str], None]


class LiveSource(Protocol):
    """Delivers every envelope on genie.> as it is published, and says when the bus comes and goes."""

    async def run(self, deliver: Deliver, status: Status) -> None:
        """Run until cancelled; reconnect by itself; never raise for a bus that is away."""


class HistorySource(Protocol):
    """Read-only SQL over the event history (`agentwatch sql`'s path). Called from a worker thread."""

    def query(self, sql: str) -> dict[str, Any]:
        """{"columns", "rows", ...} or {"error": message}; raises OSError/LookupError when unreachable."""


class NatsLiveSource:
    """A core NATS subscription on genie.>, in the dashboard's own event loop (nats-py).

    The callback only hands the bytes over: the app buffers, decodes and applies them on its
    repaint timer.
    A subscription that falls too far behind drops messages at nats-py's pending limits (said on
    the status line) rather than growing without bound.
    """

    def __init__(
        self, url: str, retry_seconds: float = 2.0, pending_msgs: int = 20_000, pending_bytes: int = 64 << 20
    ) -> None:
        self.url = url
        self.retry_seconds = retry_seconds
        self.pending_msgs = pending_msgs
        self.pending_bytes = pending_bytes
        self.dropped = 0

    async def run(self, deliver: Deliver, status: Status) -> None:
        import nats
        from nats.aio.msg import Msg
        from nats.errors import SlowConsumerError

        from agentwatch.contract import ALL_SUBJECTS

        servers = [u.strip() for u in self.url.split(",") if u.strip()]

        def here() -> str:
            return f"bus {self.url}" + (
                f" ({self.dropped} events dropped: too far behind)" if self.dropped else ""
            )

        async def disconnected() -> None:
            status(False, f"bus away at {self.url}; reconnecting")

        async def reconnected() -> None:
            status(True, here())

        async def error(exc: Exception) -> None:
            if isinstance(exc, SlowConsumerError):
                self.dropped += 1
                status(True, here())

        async def on_message(msg: Msg) -> None:
            deliver(msg.data)  # decoded on the app's repaint timer, in a batch

        while True:
            try:
                nc = await nats.connect(
                    servers,
                    name="agentwatch-dashboard",
                    max_reconnect_attempts=-1,
                    reconnect_time_wait=1,
                    connect_timeout=2,
                    allow_reconnect=True,
                    disconnected_cb=disconnected,
                    reconnected_cb=reconnected,
                    error_cb=error,
                )
            except Exception as exc:
                status(False, f"bus unreachable at {self.url} ({type(exc).__name__}); retrying")
                await asyncio.sleep(self.retry_seconds)
                continue
            try:
                await nc.subscribe(
                    ALL_SUBJECTS,
                    cb=on_message,
                    pending_msgs_limit=self.pending_msgs,
                    pending_bytes_limit=self.pending_bytes,
                )
                status(True, here())
                await asyncio.Event().wait()
            finally:
                await _close_quietly(nc.close())


async def _close_quietly(closing: Awaitable[Any]) -> None:
    with contextlib.suppress(Exception):  # a broker that never connected has nothing to close
        await closing


class StoreHistory:
    """History through the store's query service (or a ClickHouse server directly)."""

    def __init__(self, environ: Mapping[str, str] = os.environ) -> None:
        self.environ = environ

    def query(self, sql: str) -> dict[str, Any]:
        from agentwatch.up import query

        return query(sql, self.environ, timeout=10)


# The roster and feed need the headline of recent events, not their payloads (fetched one at a
# time when a person opens an event): a reply must fit one NATS message. Tasks are the one thing
# the team view needs from the payload: two short fields, for task events only. Messages live in
# their own table; they come back in the shape of the live message envelopes.
_HEADLINE_SQL = (
    "SELECT * FROM (SELECT * FROM ("
    "SELECT * FROM ("
    "SELECT id, timestamp, event, kind, agent, team, peer, parent_agent, agent_type, session_id, host, "
    "tool_name, tool_use_id, text, "
    "if(kind IN ('task_created', 'task_completed'), JSONExtractString(data, 'task_id'), '') AS task_id, "
    "if(kind IN ('task_created', 'task_completed'), JSONExtractString(data, 'task_subject'), '') "
    "AS task_subject "
    "FROM events {where}ORDER BY timestamp DESC LIMIT {limit}) "
    "UNION ALL SELECT * FROM ("
    "SELECT id, timestamp, 'PostToolUse' AS event, 'message' AS kind, from_agent AS agent, team, "
    "to_agent AS peer, '' AS parent_agent, '' AS agent_type, session_id, '' AS host, "
    "'SendMessage' AS tool_name, '' AS tool_use_id, "
    "concat('→ ', to_agent, ': ', leftUTF8(if(summary != '', summary, text), 200)) AS text, "
    "'' AS task_id, '' AS task_subject "
    "FROM messages {message_where}ORDER BY timestamp DESC LIMIT {limit})"
    ") ORDER BY timestamp DESC LIMIT {limit}"
    ") ORDER BY timestamp"
)
_AGENT_NAME = re.compile(r"[A-Za-z0-9_-]{1,128}")


def recent_events_sql(limit: int) -> str:
    """The newest `limit` events, oldest first, without payloads."""
    return _HEADLINE_SQL.format(where="", message_where="", limit=int(limit))


def agent_events_sql(agent: str, limit: int) -> str | None:
    """The newest `limit` events of one agent, oldest first, without payloads.

    None for a name that is not a subject token: names are never quoted into SQL otherwise.
    """
    if not _AGENT_NAME.fullmatch(agent):
        return None
    return _HEADLINE_SQL.format(
        where=f"WHERE agent = '{agent}' ", message_where=f"WHERE from_agent = '{agent}' ", limit=int(limit)
    )


def event_payload_sql(event_id: str) -> str | None:
    """The query for one event's payload; None for an id that is not a ULID (never quoted into SQL)."""
    if not event_id or len(event_id) > 32 or not event_id.isalnum():
        return None
    return f"SELECT data FROM events WHERE id = '{event_id}' LIMIT 1"  # noqa: S608 - checked alphanumeric


def rows_as_envelopes(result: Mapping[str, Any]) -> list[Envelope]:
    """Query rows with envelope column names, as envelopes (data parsed back from its JSON text)."""
    import orjson

    columns: list[str] = list(result.get("columns", []))
    out: list[Envelope] = []
    for row in result.get("rows", []):
        env = dict(zip(columns, row, strict=False))
        data = env.get("data")
        if isinstance(data, str):
            try:
                env["data"] = orjson.loads(data)
            except orjson.JSONDecodeError:
                env["data"] = {}
        ts = env.get("timestamp")
        if isinstance(ts, str) and not ts.endswith("Z") and "+" not in ts:
            env["timestamp"] = ts + "Z"
        out.append(env)
    return out
