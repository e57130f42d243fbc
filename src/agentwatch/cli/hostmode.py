"""`agentwatch up --hub URL`: an agent host of a fleet.

The host runs the bundled nats-server as a leaf node of the hub (one outbound connection to the
hub's leaf port, with the hub's `leaf` login in URL), in a JetStream domain of its own named after
the host (AGENTWATCH_HOST, else the machine's name), with its own GENIE stream on genie.>. No store
runs here: the hook keeps its default URL and its events are acknowledged by this host's disk,
whether the hub can be reached or not; the hub sources the stream (bus/fleet.py) and catches up
after any cut. The host announces itself to the hub every few seconds.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import time
from typing import Any

from agentwatch import __version__, config
from agentwatch.cli.errors import CliError
from agentwatch.config import display_url, parse_urls

LEAF_SCHEMES = ("nats-leaf://", "nats://", "tls://", "ws://", "wss://")


def hub_url(value: str) -> str:
    """The hub's leaf URL as given (nats-leaf://leaf-NAME:PASSWORD@hub:7422), or CliError."""
    value = value.strip()
    if not value.startswith(LEAF_SCHEMES) or "," in value:
        raise CliError(
            f"--hub takes one URL of the hub's leaf port, e.g. nats-leaf://leaf-NAME:PASSWORD@hub:7422 "
            f"(`agentwatch hosts add NAME` on the hub prints this host's), not {display_url(value)}"
        )
    return value


def _check_login(hub: str, name: str, domain: str) -> None:
    """The hub lets a host's login speak for its own domain alone: a URL made for another host
    would join, and never be sourced."""
    from urllib.parse import urlsplit

    from agentwatch.cli.buslogin import LEAF_PREFIX, leaf_user

    user = urlsplit(hub).username or ""
    if user.startswith(LEAF_PREFIX) and user != leaf_user(domain):
        raise CliError(
            f"the hub's URL logs in as {user}, another host's login; this host is {name} (AGENTWATCH_HOST, "
            f"else the machine's name): `agentwatch hosts add {name}` on the hub prints its own"
        )


def _about(environ: dict[str, str], server: str) -> Any:
    """What the announcements say besides the stream: versions and the hook's spool."""

    def about() -> dict[str, Any]:
        from agentwatch.emitter.hook import spool_for

        try:
            spool = spool_for(environ).status().bytes
        except OSError:
            spool = None
        return {"version": __version__, "nats_version": server, "spool_bytes": spool}

    return about


def _drain(environ: dict[str, str]) -> None:
    """Send what the hook spooled (a run past its deadline on a busy machine) to this host's
    stream: here the bus is local and always up, so it need not wait for the next hook run."""
    from agentwatch.emitter.hook import Publisher, refit, spool_for

    spool = spool_for(environ)
    if spool.is_empty():
        return
    deadline = time.monotonic() + 5.0
    publisher = Publisher(environ, deadline)
    try:
        spool.flush(publisher.publish, deadline, refit(publisher.max_payload))
    finally:
        publisher.close()


def cmd_up_host(hub: str, local_nats: Any, probe_bus: Any) -> int:
    """Run this host; `local_nats` and `probe_bus` are cli/pipeline.py's (which calls this)."""
    from agentwatch.bus import fleet
    from agentwatch.cli.buslogin import Fleet

    hub = hub_url(hub)
    environ = dict(os.environ)
    started = time.monotonic()
    name = config.host_name(environ)
    domain = config.host_domain(name)
    _check_login(hub, name, domain)
    url = config.nats_url(environ)
    try:
        urls = parse_urls(url)
    except ValueError as exc:
        raise CliError(str(exc)) from None
    if not config.is_plain_local(urls):
        raise CliError(
            "host mode runs its own bus on this machine: leave AGENTWATCH_NATS_URL unset, or a local "
            f"address without credentials (it is {config.display_urls(url)})"
        )
    if probe_bus(url, 1.0, environ).info is not None:
        raise CliError(
            f"a bus already answers at {urls[0].display()}: stop it (or `agentwatch up`) first; host mode "
            "runs its own nats-server, a leaf of the hub"
        )
    data = config.ensure_dir(config.data_dir(environ))
    local = local_nats(urls[0], environ, fleet=Fleet(hub=hub, domain=domain))
    try:
        local.start()
    except RuntimeError as exc:
        raise CliError(str(exc)) from None
    server = str((probe_bus(url, 2.0, environ).info or {}).get("version", "?"))

    def ready(how: str) -> None:
        for line in (
            f"agentwatch up: host {name} of the fleet at {display_url(hub)}; data in {data}",
            f"nats:        started nats-server {server} on {urls[0].display()}, a leaf of the hub, "
            f"JetStream domain {domain} (data in {local.store_dir})",
            f"stream:      GENIE on genie.> ({how}): the hook's events are kept here until the hub has them",
            "store:       none here: the hub sources this host's stream",
            f"ready in:    {time.monotonic() - started:.1f}s",
            "Ctrl-C stops.",
        ):
            print(line, flush=True)

    # This host's own view of its link (bus/fleet.py): `agentwatch hosts` here reads it.
    own = {"host": name, "domain": domain, "pid": os.getpid(), "version": __version__, "nats_version": server,
           "hub": display_url(hub), "seq": None, "told_at": None}  # fmt: skip

    def told(seq: int) -> None:
        own.update(seq=seq, told_at=time.time())
        with contextlib.suppress(OSError):
            fleet.write_own_state(environ, own)

    fleet.write_own_state(environ, own)
    announcer = fleet.Announcer(name, domain, _about(environ, server), lambda: _drain(environ), told)
    try:
        asyncio.run(_serve(url, environ, announcer, ready))
    except KeyboardInterrupt:
        pass
    finally:
        with contextlib.suppress(OSError):
            os.unlink(fleet.own_path(environ))
        local.stop()
    return 0


async def _serve(url: str, environ: dict[str, str], announcer: Any, ready: Any) -> None:
    """Run the host until SIGTERM or SIGINT."""
    from agentwatch.bus import fleet

    loop = asyncio.get_running_loop()
    task = asyncio.ensure_future(fleet.serve_host(url, environ, announcer, ready))
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, task.cancel)
    with contextlib.suppress(asyncio.CancelledError):
        await task
