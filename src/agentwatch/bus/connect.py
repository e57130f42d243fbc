"""The one way agentwatch's services and commands connect to NATS (nats-py).

Everything a connection needs comes from configuration (config.nats_options): the server list,
user/password or token from the URL, NKEY seed and creds files, TLS with a private CA and client
certificates. Credentials travel as options, never inside a URL that an error message might print.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING

from agentwatch import config

if TYPE_CHECKING:
    from nats.aio.client import Client

Callback = Callable[[], Awaitable[None]]


class BusUnreachable(ConnectionError):
    """The bus cannot be used: the message (config.unreachable) says where (masked), which of the
    four failures it is (credentials refused, no server, a server that does not answer, TLS) and
    which setting to fix."""


async def connect(
    url: str,
    environ: Mapping[str, str] = os.environ,
    *,
    name: str,
    persistent: bool = False,
    timeout: float = 3.0,
    disconnected: Callback | None = None,
    reconnected: Callback | None = None,
    error: Callable[[Exception], Awaitable[None]] | None = None,
) -> Client:
    """A connection to the bus.

    `persistent` connections (services, the dashboard) reconnect forever; the others (a command
    that runs once) fail at once with BusUnreachable and a plain message, where nats-py's
    defaults would retry and print tracebacks.
    """
    import nats

    errors: list[Exception] = []

    async def keep(exc: Exception) -> None:
        errors.append(exc)
        if error is not None:
            await error(exc)

    opts = config.nats_options(url, environ, name=name)
    opts.update(connect_timeout=timeout, error_cb=keep)
    if persistent:
        opts.update(allow_reconnect=True, max_reconnect_attempts=-1, reconnect_time_wait=1)
    else:
        # nats-py's initial connect tries each server until it exceeds this (0 means forever).
        opts.update(allow_reconnect=False, max_reconnect_attempts=1, reconnect_time_wait=0.1)
    if disconnected is not None:
        opts["disconnected_cb"] = disconnected
    if reconnected is not None:
        opts["reconnected_cb"] = reconnected
    try:
        return await asyncio.wait_for(nats.connect(**opts), timeout * len(opts["servers"]) + 2)
    except Exception as exc:
        # What the client met on the way (a refused password, a TLS failure) says more than the
        # connect's own timeout or "no servers available" at the end of it.
        reasons = [config.reason_chain(e) for e in errors] + [config.reason_chain(exc)]
        telling = next((r for r in reasons if config.problem_kind(r)), reasons[-1])
        raise BusUnreachable(config.unreachable("bus", config.display_urls(url), telling)) from None
