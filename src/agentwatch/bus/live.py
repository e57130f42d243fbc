"""The dashboard's live feed: a core NATS subscription on genie.> and agentwatch.alert.> (nats-py).

The callback only hands the bytes over: the dashboard buffers, decodes and applies them on its
repaint timer. A subscription that falls too far behind drops messages at nats-py's pending
limits (said on the status line) rather than growing without bound. Every status text shows the
bus URL masked: it is on a screen.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from agentwatch import config
from agentwatch.bus.connect import BusUnreachable, connect
from agentwatch.bus.streams import ALERT_SUBJECTS
from agentwatch.contract import ALL_SUBJECTS

if TYPE_CHECKING:
    from nats.aio.msg import Msg

# An envelope's JSON as it came off the bus.
Deliver = Callable[[Any], None]
Status = Callable[[bool, str], None]


class NatsLiveSource:
    """Delivers every envelope on genie.> as it is published, and says when the bus comes and goes."""

    def __init__(
        self,
        url: str,
        environ: Mapping[str, str] = os.environ,
        retry_seconds: float = 2.0,
        pending_msgs: int = 20_000,
        pending_bytes: int = 64 << 20,
    ) -> None:
        self.url = url
        self.shown = config.display_urls(url)
        self.environ = environ
        self.retry_seconds = retry_seconds
        self.pending_msgs = pending_msgs
        self.pending_bytes = pending_bytes
        self.dropped = 0

    def _here(self) -> str:
        dropped = f" ({self.dropped} events dropped: too far behind)" if self.dropped else ""
        return f"bus {self.shown}{dropped}"

    async def run(self, deliver: Deliver, status: Status) -> None:
        """Run until cancelled; reconnect by itself; never raise for a bus that is away."""
        from nats.errors import SlowConsumerError

        async def disconnected() -> None:
            status(False, f"bus away at {self.shown}; reconnecting")

        async def reconnected() -> None:
            status(True, self._here())

        async def error(exc: Exception) -> None:
            if isinstance(exc, SlowConsumerError):
                self.dropped += 1
                status(True, self._here())

        async def on_message(msg: Msg) -> None:
            deliver(msg.data)

        while True:
            try:
                nc = await connect(
                    self.url,
                    self.environ,
                    name="agentwatch-dashboard",
                    persistent=True,
                    disconnected=disconnected,
                    reconnected=reconnected,
                    error=error,
                )
            except BusUnreachable as exc:  # the line every command says for the same failure
                status(False, f"{exc}; retrying")
                await asyncio.sleep(self.retry_seconds)
                continue
            except ValueError as exc:  # a URL that does not parse (its message masks it)
                status(False, f"{exc}: fix AGENTWATCH_NATS_URL")
                await asyncio.sleep(self.retry_seconds)
                continue
            try:
                for subject in (ALL_SUBJECTS, ALERT_SUBJECTS):
                    await nc.subscribe(
                        subject,
                        cb=on_message,
                        pending_msgs_limit=self.pending_msgs,
                        pending_bytes_limit=self.pending_bytes,
                    )
                status(True, self._here())
                await asyncio.Event().wait()
            finally:
                with contextlib.suppress(Exception):  # a connection that is gone has nothing to close
                    await nc.close()
