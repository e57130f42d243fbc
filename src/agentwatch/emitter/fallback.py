"""NKEY and creds-file authentication through nats-py, for the hosts that need it.

Imported only when AGENTWATCH_NATS_CREDS or AGENTWATCH_NATS_NKEY is set: it costs the hook
asyncio and nats-py, so the common path (user/password, token, TLS) never loads it.
"""

from __future__ import annotations

import asyncio
import importlib
import sys
import time
from collections.abc import Mapping
from types import ModuleType
from typing import Any

from agentwatch.config import HOOK, display_urls, nats_options
from agentwatch.contract import DEFAULT_MAX_PAYLOAD, MSG_ID_HEADER
from agentwatch.emitter.wire import BusError


def _import_nats() -> ModuleType:
    """nats-py, without the aiohttp it imports when installed (the [web] extra brings it).

    nats-py loads aiohttp for its websocket transport, which the hook's URLs (nats://, tls://)
    never use, and that import alone costs some 250 ms of the hook's deadline. A None in
    sys.modules makes nats-py's optional import fail at once; it is taken out again after.
    """
    absent = "aiohttp" not in sys.modules
    if absent:
        sys.modules["aiohttp"] = None  # type: ignore[assignment]
    try:
        return importlib.import_module("nats")
    finally:
        if absent:
            del sys.modules["aiohttp"]


nats = _import_nats()

Message = tuple[str, str, bytes]


class FallbackConnection:
    def __init__(self, url: str, environ: Mapping[str, str], deadline: float) -> None:
        self.deadline = deadline
        self._loop = asyncio.new_event_loop()
        opts = nats_options(url, environ, name="agentwatch-emit", role=HOOK)
        opts.update(
            allow_reconnect=False,
            max_reconnect_attempts=0,
            connect_timeout=max(0.05, deadline - time.monotonic()),
        )
        try:
            self._nc: Any = self._run(nats.connect(**opts))
        except BusError:
            raise
        except Exception as exc:
            self._loop.close()
            raise BusError(f"cannot connect to {display_urls(url)}: {exc}") from None
        self.max_payload = self._nc.max_payload or DEFAULT_MAX_PAYLOAD

    def _run(self, coro: Any) -> Any:
        left = self.deadline - time.monotonic()
        if left <= 0:
            raise BusError("deadline reached")
        return self._loop.run_until_complete(asyncio.wait_for(coro, left))

    def publish(
        self,
        messages: list[Message],
        stream: bool | None = None,  # noqa: ARG002 - no stream is asked here (below)
        stored: bool = False,  # noqa: ARG002 - nor remembered: the hook keeps no bus knowledge here
    ) -> bool | None:
        """Core publish and flush: nats-py's PONG is the confirmation (the stream is not asked)."""

        async def send() -> None:
            for subject, msg_id, body in messages:
                await self._nc.publish(subject, body, headers={MSG_ID_HEADER: msg_id})
            await self._nc.flush()

        try:
            self._run(send())
        except Exception as exc:
            raise BusError(f"publish failed: {exc}") from None
        return None

    def close(self) -> None:
        try:
            self._run(self._nc.close())
        except Exception:  # noqa: S110 - closing a short-lived connection; nothing to recover
            pass
        finally:
            self._loop.close()
