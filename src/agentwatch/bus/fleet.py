"""A fleet on NATS: agent hosts each with their own JetStream domain and GENIE stream, a hub that
sources them all.

A host (`agentwatch up --hub URL`) runs its nats-server as a leaf node of the hub, in a JetStream
domain named after it (config.host_domain), with its own GENIE stream on genie.>: the hook's
events are acknowledged by the disk of the host. Every few seconds the host announces itself on
`agentwatch.hosts.<domain>`; the hub's HOSTS stream keeps the last announcement of each host, and
the hub's collector adds the GENIE stream of every announced host as a source of its own GENIE
stream (cross-domain sourcing through `$JS.<domain>.API`). While a host's link is down its events
wait in its stream; once the link is back the hub pulls them, and the stream's de-duplication by
Nats-Msg-Id keeps each event once.

The hub cannot see through a cut link; the host can see itself. The hub's collector tells each
host, every few seconds, how far into the host's stream it has reached (`agentwatch.fleet.reached.
<domain>`); the host keeps the last word in its data dir (OWN_NAME), and `agentwatch hosts` on the
host shows its own row: its stream's messages past that point, growing while the link is cut.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from nats.js.api import DiscardPolicy, ExternalStream, StorageType, StreamConfig, StreamSource
from nats.js.client import JetStreamContext
from nats.js.errors import NotFoundError

from agentwatch import config
from agentwatch.bus.streams import STREAM_NAME

log = logging.getLogger("agentwatch.fleet")

HOSTS_STREAM = "HOSTS"
HOSTS_PREFIX = "agentwatch.hosts"
HOSTS_SUBJECTS = f"{HOSTS_PREFIX}.*"
# The inboxes of `agentwatch hosts`: a host's answers come back through its leaf link, which
# admits replies on these and no other inbox (cli/buslogin.py).
FLEET_INBOX = "_AW_FLEET"
# How often a host announces itself, and the hub's collector looks for new hosts.
ANNOUNCE_S = 5.0
SYNC_S = 2.0
# A source the hub has not heard from for this long (its heartbeats come every second) is cut off.
CUT_AFTER_S = 5.0
# At most one restart of a host's sourcing in this many seconds.
RESTART_S = 10.0
# The hub's word to each host of how far into its stream it has reached (HostSync.step).
REACHED_PREFIX = "agentwatch.fleet.reached"
# A host not told for this long counts its link as cut (told every SYNC_S, while the link is up).
TOLD_WITHIN_S = CUT_AFTER_S + SYNC_S
# A host's own view of its link, in its data dir: its name and domain, its `up`'s pid, the hub's
# last word (written by the host's `up`, removed when it stops).
OWN_NAME = "fleet-host.json"


def hosts_subject(domain: str) -> str:
    return f"{HOSTS_PREFIX}.{domain}"


def reached_subject(domain: str) -> str:
    return f"{REACHED_PREFIX}.{domain}"


def api_prefix(domain: str) -> str:
    """The JetStream API of `domain`, as the hub reaches it across the host's leaf connection."""
    return f"$JS.{domain}.API"


def domain_of(api: str) -> str:
    """The domain of an API prefix `$JS.<domain>.API`; '' for any other."""
    parts = api.split(".")
    return parts[1] if len(parts) == 3 and parts[0] == "$JS" and parts[2] == "API" else ""


def hosts_stream_config(environ: Mapping[str, str]) -> StreamConfig:
    """HOSTS keeps each host's last announcement (one message per subject), on disk."""
    return StreamConfig(
        name=HOSTS_STREAM,
        subjects=[HOSTS_SUBJECTS],
        storage=StorageType.FILE,
        max_msgs_per_subject=1,
        discard=DiscardPolicy.OLD,
        num_replicas=config.number(environ, "AGENTWATCH_STREAM_REPLICAS", 1),
    )


def host_source(domain: str) -> StreamSource:
    return StreamSource(name=STREAM_NAME, external=ExternalStream(api=api_prefix(domain)))


# --- the hub ------------------------------------------------------------------------------------


async def ensure_hosts_stream(js: JetStreamContext, environ: Mapping[str, str]) -> None:
    try:
        await js.stream_info(HOSTS_STREAM)
    except NotFoundError:
        await js.add_stream(hosts_stream_config(environ))


async def announcements(js: JetStreamContext) -> dict[str, dict[str, Any]]:
    """Each announced host's last announcement, by domain."""
    try:
        info = await js.stream_info(HOSTS_STREAM, subjects_filter=HOSTS_SUBJECTS)
    except NotFoundError:
        return {}
    found: dict[str, dict[str, Any]] = {}
    for subject in sorted(info.state.subjects or {}):
        domain = subject[len(HOSTS_PREFIX) + 1 :]
        try:
            msg = await js.get_last_msg(HOSTS_STREAM, subject)
            body = json.loads(msg.data or b"{}")
        except (NotFoundError, ValueError):
            continue
        if isinstance(body, dict):
            # When the hub took it, by the hub's clock: the host reached the hub then.
            body["arrived"] = msg.time.timestamp() if msg.time is not None else 0.0
            found[domain] = body
    return found


async def sourced_domains(js: JetStreamContext) -> set[str]:
    info = await js.stream_info(STREAM_NAME)
    return {domain_of(s.external.api) for s in info.config.sources or [] if s.external} - {""}


async def add_sources(js: JetStreamContext, domains: set[str]) -> list[str]:
    """Add the GENIE stream of each host of `domains` not sourced yet; the domains added."""
    info = await js.stream_info(STREAM_NAME)
    cfg = info.config
    have = {domain_of(s.external.api) for s in cfg.sources or [] if s.external}
    missing = sorted(domains - have)
    if missing:
        cfg.sources = [*(cfg.sources or []), *(host_source(d) for d in missing)]
        await js.update_stream(cfg)
    return missing


async def forget(js: JetStreamContext, domain: str) -> bool:
    """Stop sourcing host `domain` and drop its announcement; False when it was not known."""
    info = await js.stream_info(STREAM_NAME)
    cfg = info.config
    kept = [s for s in cfg.sources or [] if not (s.external and domain_of(s.external.api) == domain)]
    known = len(kept) != len(cfg.sources or [])
    if known:
        cfg.sources = kept or None
        await js.update_stream(cfg)
    with contextlib.suppress(NotFoundError):
        info = await js.stream_info(HOSTS_STREAM, subjects_filter=hosts_subject(domain))
        if info.state.subjects:
            await js.purge_stream(HOSTS_STREAM, subject=hosts_subject(domain))
            known = True
    return known


class HostSync:
    """The hub's collector's part in a fleet: source each host as it announces itself, and
    restart the sourcing of a host whose link is back.

    After a cut, nats-server retries a source with a growing back-off (tens of seconds after a
    minute's cut); the host's announcements arrive again as soon as its link is back, so a source
    silent past CUT_AFTER_S whose host was just heard from is removed and added again: the hub
    resumes it at once, from the last message it holds of that host (the stream's de-duplication
    by Nats-Msg-Id covers any overlap)."""

    def __init__(self, environ: Mapping[str, str]) -> None:
        self.environ = environ
        self.restarted: dict[str, float] = {}  # domain: when its sourcing was last restarted
        # What the last look found, for /metrics: each host's announcement and source.
        self.known: dict[str, dict[str, Any]] = {}
        self.states: dict[str, SourceState] = {}

    def gauges(self) -> list[tuple[str, float, float | None, int | None]]:
        """(host, backlog as of the last contact, seconds since it, spool bytes) per host. The
        last contact is the source's, or the host's last announcement when that came later (a
        hub restarted meanwhile has had no contact with a cut host's source at all)."""
        out = []
        now = time.time()
        for domain in sorted(set(self.known) | set(self.states)):
            a, state = self.known.get(domain, {}), self.states.get(domain)
            spool = a.get("spool_bytes")
            heard = [now - float(a["arrived"])] if a.get("arrived") else []
            if state is not None and state.active_s is not None:
                heard.append(state.active_s)
            out.append(
                (
                    str(a.get("host") or domain),
                    float(state.lag) if state else float(a.get("last_seq") or 0),
                    max(min(heard), 0.0) if heard else None,
                    int(spool) if isinstance(spool, int) else None,
                )
            )
        return out

    async def step(self, nc: Any) -> list[str]:
        """One look; the domains added."""
        js = nc.jetstream()
        await ensure_hosts_stream(js, self.environ)
        known = self.known = await announcements(js)
        if not known:
            return []
        added = await add_sources(js, set(known))
        now = time.time()
        self.states = await source_states(nc)
        for domain, state in self.states.items():  # each host's own view (the module's docstring)
            with contextlib.suppress(Exception):
                await nc.publish(reached_subject(domain), json.dumps({"seq": state.seq}).encode())
        for domain, state in self.states.items():
            heard = float(known.get(domain, {}).get("arrived") or 0.0)
            silent = state.active_s is None or state.active_s > CUT_AFTER_S
            if silent and now - heard < 2 * ANNOUNCE_S and now - self.restarted.get(domain, 0.0) > RESTART_S:
                self.restarted[domain] = now
                await restart_source(js, domain)
                log.warning("host %s is back: its sourcing restarted", domain)
        return added


async def restart_source(js: JetStreamContext, domain: str) -> None:
    """Remove host `domain`'s source and add it again (HostSync says why)."""
    info = await js.stream_info(STREAM_NAME)
    cfg = info.config
    cfg.sources = [s for s in cfg.sources or [] if not (s.external and domain_of(s.external.api) == domain)]
    await js.update_stream(cfg)
    await add_sources(js, {domain})


async def watch_hosts(url: str, sync: HostSync, every: float = SYNC_S) -> None:
    """The hub's collector: every `every` seconds, source the hosts announced since (HostSync)."""
    from agentwatch.bus.connect import connect

    environ = sync.environ
    nc = None
    try:
        while True:
            try:
                if nc is None:
                    nc = await connect(
                        url, environ, name="agentwatch-fleet", role=config.STORE, persistent=True
                    )
                for domain in await sync.step(nc):
                    log.warning("host %s joined: its GENIE stream is now a source of the hub's", domain)
            except Exception as exc:  # the bus away (the client reconnects), or no right to HOSTS
                log.debug("could not look for new hosts: %s", exc)
            await asyncio.sleep(every)
    finally:
        if nc is not None:
            with contextlib.suppress(Exception):
                await nc.close()


@dataclass
class SourceState:
    """What the hub's GENIE stream knows of one host's stream."""

    domain: str
    lag: int = 0  # messages of the host's stream not yet at the hub, as of the last contact
    active_s: float | None = None  # seconds since the last contact; None: never
    seq: int = 0  # the host's stream sequence the hub has reached
    error: str = ""


async def source_states(nc: Any) -> dict[str, SourceState]:
    """The hub GENIE stream's sources, by domain (the raw stream info: nats-py keeps neither a
    source's `external` nor its `seq`)."""
    reply = await nc.request(f"$JS.API.STREAM.INFO.{STREAM_NAME}", b"", timeout=5.0)
    info = json.loads(reply.data or b"{}")
    if "error" in info:
        raise RuntimeError(str(info["error"].get("description", info["error"])))
    states = {}
    for src in info.get("sources") or []:
        domain = domain_of(str((src.get("external") or {}).get("api", "")))
        if not domain:
            continue
        active = int(src.get("active", -1))
        states[domain] = SourceState(
            domain,
            lag=int(src.get("lag") or 0),
            active_s=None if active < 0 else active / 1e9,
            seq=int(src.get("seq") or 0),
            error=str((src.get("error") or {}).get("description", "")),
        )
    return states


@dataclass
class HostStream:
    """A host's own stream, asked through its domain (only while its link is up)."""

    last_seq: int = 0
    oldest_waiting: float | None = None  # Unix time of the first message not yet at the hub
    reached: bool = False
    last_at: float | None = None  # Unix time of its last message (asked on the host alone)


async def host_stream(
    nc: Any, domain: str, hub_seq: int, timeout: float = 1.0, last: bool = False
) -> HostStream:
    """The host's stream's last sequence and the time of its oldest message the hub does not
    have yet, asked across the leaf link (an empty answer when the link is down); with `last`,
    the time of its last message too."""

    js: JetStreamContext = nc.jetstream(domain=domain, timeout=timeout)
    out = HostStream()
    try:
        info = await js.stream_info(STREAM_NAME)
    except Exception:
        return out
    out.reached, out.last_seq = True, int(info.state.last_seq or 0)
    asked = [(hub_seq + 1, "oldest_waiting")] if out.last_seq > hub_seq else []
    if last and out.last_seq:
        asked.append((out.last_seq, "last_at"))
    for seq, what in asked:
        with contextlib.suppress(Exception):
            msg = await js.get_msg(STREAM_NAME, seq, next=True)
            if msg.time is not None:
                setattr(out, what, msg.time.timestamp())
    return out


# --- a host -------------------------------------------------------------------------------------


@dataclass
class Announcer:
    """A host's `up`: its GENIE stream, and its announcement to the hub every ANNOUNCE_S."""

    name: str
    domain: str
    about: Callable[[], dict[str, Any]] = field(default=dict)
    chore: Callable[[], None] | None = None  # run in a thread before each announcement
    told: Callable[[int], None] | None = None  # the hub's word of how far it has reached

    async def _heard(self, msg: Any) -> None:
        try:
            seq = int(json.loads(msg.data)["seq"])
        except (ValueError, KeyError, TypeError):
            return
        if self.told is not None:
            self.told(seq)

    async def announce(self, nc: Any, js: JetStreamContext) -> None:
        body: dict[str, Any] = {"host": self.name, "domain": self.domain, "at": time.time(), **self.about()}
        with contextlib.suppress(Exception):
            info = await js.stream_info(STREAM_NAME)
            body.update(messages=info.state.messages, last_seq=info.state.last_seq, bytes=info.state.bytes)
        await nc.publish(hosts_subject(self.domain), json.dumps(body).encode())
        await nc.flush(timeout=2.0)

    async def run(self, nc: Any, every: float = ANNOUNCE_S) -> None:
        js = nc.jetstream()
        if self.told is not None:
            await nc.subscribe(reached_subject(self.domain), cb=self._heard)
        while True:
            if self.chore is not None:
                try:
                    await asyncio.to_thread(self.chore)
                except Exception as exc:
                    log.debug("host chore failed: %s", exc)
            try:
                await self.announce(nc, js)
            except Exception as exc:  # the local server restarting: the client reconnects
                log.debug("could not announce: %s", exc)
            await asyncio.sleep(every)


async def ensure_host_stream(js: JetStreamContext, environ: Mapping[str, str]) -> str:
    """A host's GENIE stream (the hub's limits, no sources): what acknowledges its hook's events."""
    from agentwatch.bus.streams import stream_config

    wanted = stream_config(environ)
    try:
        await js.stream_info(STREAM_NAME)
    except NotFoundError:
        await js.add_stream(wanted)
        return "created"
    await js.update_stream(wanted)
    return "updated"


async def serve_host(
    url: str, environ: Mapping[str, str], announcer: Announcer, ready: Callable[[str], None]
) -> None:
    """A host's `up` once its nats-server runs: make its stream, then announce until cancelled."""
    from agentwatch.bus.connect import connect

    nc = await connect(url, environ, name="agentwatch-host", role=config.STORE, persistent=True)
    try:
        ready(await ensure_host_stream(nc.jetstream(), environ))
        await announcer.run(nc)
    finally:
        with contextlib.suppress(Exception):
            await nc.close()


@dataclass
class HostView:
    """One host as the hub sees it: its announcement, its source, its own stream."""

    domain: str
    announced: dict[str, Any]
    source: SourceState | None
    stream: HostStream
    cut_after: float = CUT_AFTER_S
    own: bool = False  # this host's view of itself (own_view), not the hub's

    @property
    def cut(self) -> bool:
        """No contact for `cut_after` seconds (or never): the link, or the host, is down."""
        return self.source is None or self.source.active_s is None or self.source.active_s > self.cut_after

    @property
    def backlog(self) -> int:
        """Messages of the host not at the hub yet: as the host's stream says when it can be
        asked, else the lag as of the last contact."""
        if self.source is None:
            return int(self.announced.get("last_seq") or 0)
        if self.stream.reached:
            return max(self.stream.last_seq - self.source.seq, 0)
        return self.source.lag


async def fleet_view(url: str, environ: Mapping[str, str]) -> list[HostView]:
    """Every host announced or sourced, as the hub sees it now (the dashboard's login)."""
    from agentwatch.bus.connect import connect

    nc = await connect(url, environ, name="agentwatch-hosts", inbox_prefix=FLEET_INBOX)
    try:
        known = await announcements(nc.jetstream())
        sources = await source_states(nc)
        views = []
        for domain in sorted(set(known) | set(sources)):
            source = sources.get(domain)
            up = source is not None and source.active_s is not None and source.active_s <= CUT_AFTER_S
            stream = await host_stream(nc, domain, source.seq) if up and source else HostStream()
            views.append(HostView(domain, known.get(domain, {}), source, stream))
        return views
    finally:
        await nc.close()


def own_path(environ: Mapping[str, str]) -> str:
    return f"{config.data_dir(environ).rstrip('/')}/{OWN_NAME}"


def own_state(environ: Mapping[str, str]) -> dict[str, Any] | None:
    """This machine's part in a fleet, when a host's `up` runs here (OWN_NAME); else None."""
    import os

    try:
        with open(own_path(environ), "rb") as f:
            state = json.loads(f.read())
        os.kill(int(state["pid"]), 0)
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return state if isinstance(state, dict) else None


def write_own_state(environ: Mapping[str, str], state: dict[str, Any]) -> None:
    """Write the host's own view (a temporary file renamed over it: a reader sees it whole)."""
    import os

    path = own_path(environ)
    tmp = f"{path}.{os.getpid()}.tmp"
    with open(tmp, "w") as f:
        f.write(json.dumps(state))
    os.replace(tmp, path)


async def own_view(url: str, environ: Mapping[str, str], state: dict[str, Any]) -> HostView:
    """This host as it sees itself: its stream (on its own bus, whatever the link), and the
    stream's messages past what the hub last said it has reached (all of them when the hub has
    said nothing yet)."""
    from agentwatch.bus.connect import connect

    domain, seq, at = str(state["domain"]), state.get("seq"), state.get("told_at")
    nc = await connect(url, environ, name="agentwatch-hosts", inbox_prefix=FLEET_INBOX)
    try:
        stream = await host_stream(nc, domain, int(seq or 0), timeout=5.0, last=True)
    finally:
        await nc.close()
    source = None
    if seq is not None and at is not None:
        source = SourceState(domain, seq=int(seq), active_s=max(time.time() - float(at), 0.0))
    announced = {**state, "last_seq": stream.last_seq}
    return HostView(domain, announced, source, stream, cut_after=TOLD_WITHIN_S, own=True)


async def forget_host(url: str, environ: Mapping[str, str], domain: str) -> bool:
    """`agentwatch hosts forget`: with the store's login, which may change the stream."""
    from agentwatch.bus.connect import connect

    nc = await connect(url, environ, name="agentwatch-hosts", role=config.STORE)
    try:
        return await forget(nc.jetstream(), domain)
    finally:
        await nc.close()
