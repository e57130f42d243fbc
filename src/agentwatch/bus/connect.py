"""The one way agentwatch's services and commands connect to NATS (nats-py).

Everything a connection needs comes from configuration (config.nats_options): the server list,
user/password or token from the URL, NKEY seed and creds files, TLS with a private CA and client
certificates. Credentials travel as options, never inside a URL that an error message might print.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Any

from agentwatch import config, reach

if TYPE_CHECKING:
    from nats.aio.client import Client

Callback = Callable[[], Awaitable[None]]


class BusUnreachable(ConnectionError):
    """The bus cannot be used: the message (reach.unreachable) says where (masked), which of the
    four failures it is (credentials refused, no server, a server that does not answer, TLS) and
    which setting to fix."""


async def connect(
    url: str,
    environ: Mapping[str, str] = os.environ,
    *,
    name: str,
    role: str = config.DASHBOARD,
    persistent: bool = False,
    timeout: float | None = None,
    disconnected: Callback | None = None,
    reconnected: Callback | None = None,
    error: Callable[[Exception], Awaitable[None]] | None = None,
    inbox_prefix: str = "",
) -> Client:
    """A connection to the bus.

    The first connect tries each server once and fails with BusUnreachable, a plain one-line
    message, once all have failed (nats-py's own would retry forever, or give up at the first
    server of a cluster, and print tracebacks). `persistent` connections (services, the
    dashboard) then reconnect forever; the others (a command that runs once) never do.
    `timeout` (AGENTWATCH_CONNECT_TIMEOUT unless given) bounds each server's answer. `role`:
    which of `agentwatch up`'s logins a plain local URL uses (config.use_local_login).
    """
    from nats.aio.client import Client as Nats

    if timeout is None:
        timeout = float(config.connect_timeout(environ))
    opts = config.nats_options(url, environ, name=name, role=role)
    nc = Nats()
    errors: list[Exception] = []  # what the first connect met, server by server
    tried_all = asyncio.Event()
    first = True

    async def keep(exc: Exception) -> None:
        if first:
            errors.append(exc)
            if len(errors) >= len(opts["servers"]):
                tried_all.set()
        if error is not None:
            await error(exc)

    opts.update(
        connect_timeout=timeout,
        error_cb=keep,
        allow_reconnect=True,
        max_reconnect_attempts=-1,
        reconnect_time_wait=1 if persistent else 0.1,
    )
    if inbox_prefix:  # replies that must come back through a leaf link that admits only these
        opts["inbox_prefix"] = inbox_prefix
    if disconnected is not None:
        opts["disconnected_cb"] = disconnected
    if reconnected is not None:
        opts["reconnected_cb"] = reconnected
    try:
        await refuse_plain_servers(url, timeout)
        await _first_connect(nc, opts, tried_all, timeout * len(opts["servers"]) + 2)
    except asyncio.CancelledError:
        with contextlib.suppress(Exception):  # what the attempts left open
            await nc.close()
        raise
    except Exception as exc:
        with contextlib.suppress(Exception):
            await nc.close()
        # What the client met on the way (a refused password, a TLS failure) says more than the
        # connect's own timeout or "no servers available" at the end of it.
        met = [reach.reason_chain(e) for e in errors]
        reasons = [*met, reach.reason_chain(exc)]
        telling = next((r for r in reasons if reach.problem_kind(r)), (met or reasons)[-1])
        raise BusUnreachable(reach.unreachable("bus", config.display_urls(url), telling)) from None
    first = False
    if not persistent:
        nc.options["allow_reconnect"] = False  # read by nats-py when the connection drops
    return nc


async def _first_connect(nc: Client, opts: dict[str, Any], tried_all: asyncio.Event, limit: float) -> None:
    """nats-py's connect, ended when every server failed once (`tried_all`) or after `limit` s."""
    connecting = asyncio.ensure_future(nc.connect(**opts))
    gave_up = asyncio.ensure_future(tried_all.wait())
    try:
        await asyncio.wait({connecting, gave_up}, timeout=limit, return_when=asyncio.FIRST_COMPLETED)
    finally:
        gave_up.cancel()
        if not connecting.done():
            connecting.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await connecting
    if connecting.cancelled():
        if tried_all.is_set():
            raise ConnectionError("every server of the bus failed")  # each said why (error_cb)
        raise TimeoutError(f"no server of the bus connected within {limit:.0f}s")
    connecting.result()


async def refuse_plain_servers(url: str, timeout: float) -> None:
    """Raise ssl.SSLError when a `tls://` server of `url` greets without requiring TLS.

    nats-py upgrades a connection to TLS only when the server's INFO says `tls_required`: given a
    `tls://` URL and a server without it, it carries on in clear and sends the CONNECT, password
    included, unencrypted (nats.go refuses; nats-io/nats.py#912 brings that to nats-py's next
    client). So each `tls://` server's greeting is read first, on a connection of its own that
    sends nothing; a server that cannot be reached is left for nats-py to report."""
    import ssl

    servers = [s for s in config.parse_urls(url) if s.tls]
    if not servers:
        return
    greetings = await asyncio.gather(*(_greeting(s.host, s.port, timeout) for s in servers))
    for info in greetings:
        if info is None or info.get("tls_required"):
            continue
        if info.get("tls_available"):
            raise ssl.SSLError("the server offers TLS but does not require TLS: nats-py would not use it")
        raise ssl.SSLError("the server does not speak TLS (it greeted in clear, without tls_required)")


async def _greeting(host: str, port: int, timeout: float) -> dict[str, object] | None:
    """The INFO a NATS server sends on connect; None when there is none to read in time."""
    import json

    writer = None
    try:
        reader, writer = await asyncio.wait_for(asyncio.open_connection(host, port), timeout)
        line = await asyncio.wait_for(reader.readline(), timeout)
        if not line.startswith(b"INFO "):
            return None
        info = json.loads(line[5:])
        return info if isinstance(info, dict) else None
    except (OSError, TimeoutError, ValueError):
        return None
    finally:
        if writer is not None:
            writer.close()
