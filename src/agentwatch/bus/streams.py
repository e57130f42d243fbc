"""The stream and consumers every service shares, declared once from the contract module."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import time
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import Any

from nats.aio.msg import Msg
from nats.errors import TimeoutError as FetchTimeout
from nats.js.api import AckPolicy as JsAckPolicy
from nats.js.api import ConsumerConfig, DeliverPolicy, DiscardPolicy, StorageType, StreamConfig
from nats.js.client import JetStreamContext
from nats.js.errors import NotFoundError

from agentwatch import config
from agentwatch.contract import ALL_SUBJECTS

log = logging.getLogger("agentwatch.store")

STREAM_NAME = "GENIE"
STORE_DURABLE = "agentwatch-store"
DUPLICATE_WINDOW_S = 120.0
# Deliveries before JetStream gives up on a message; the store dead-letters it on the advisory.
MAX_DELIVER = 10
ACK_WAIT_S = 30.0
# Unacknowledged messages the store may hold: bounds its memory whatever the backlog. Room for
# two of the store's largest batches (consumers/store.py): one being written, the next gathering.
MAX_ACK_PENDING = 100_000

# The watchdog (consumers/alerts.py): its alerts on their own stream, so they are kept and
# de-duplicated (Nats-Msg-Id "{id}.{state}") like events; and, when it runs alone (`alerts run`),
# its own durable consumer of GENIE (beside the store it sees the store's deliveries).
ALERTS_STREAM = "ALERTS"
ALERT_SUBJECTS = "agentwatch.alert.>"
ALERTS_DURABLE = "agentwatch-alerts"


def alert_subject(severity: str, rule: str) -> str:
    return f"agentwatch.alert.{severity}.{rule}"


def alerts_stream_config(environ: Mapping[str, str] = os.environ) -> StreamConfig:
    """ALERTS captures agentwatch.alert.>, on disk, kept as long as GENIE keeps events."""
    days = config.number(environ, "AGENTWATCH_STREAM_MAX_AGE_DAYS", 7)
    return StreamConfig(
        name=ALERTS_STREAM,
        subjects=[ALERT_SUBJECTS],
        storage=StorageType.FILE,
        max_age=days * 86400.0,
        discard=DiscardPolicy.OLD,
        duplicate_window=DUPLICATE_WINDOW_S,
        num_replicas=config.number(environ, "AGENTWATCH_STREAM_REPLICAS", 1),
    )


def alerts_consumer_config(environ: Mapping[str, str] = os.environ) -> ConsumerConfig:
    """The watchdog follows new events only: on a first start it rebuilds the past from the store."""
    return ConsumerConfig(
        durable_name=ALERTS_DURABLE,
        ack_policy=JsAckPolicy.EXPLICIT,
        ack_wait=ack_wait(environ),
        deliver_policy=DeliverPolicy.NEW,
        max_ack_pending=MAX_ACK_PENDING,
    )


def stream_config(environ: Mapping[str, str] = os.environ) -> StreamConfig:
    """GENIE captures genie.>, on disk, bounded by age and bytes, de-duplicating by Nats-Msg-Id."""
    days = config.number(environ, "AGENTWATCH_STREAM_MAX_AGE_DAYS", 7)
    max_bytes = config.number(environ, "AGENTWATCH_STREAM_MAX_BYTES", 8 * 1024**3)
    replicas = config.number(environ, "AGENTWATCH_STREAM_REPLICAS", 1)
    return StreamConfig(
        name=STREAM_NAME,
        subjects=[ALL_SUBJECTS],
        storage=StorageType.FILE,
        max_age=days * 86400.0,
        max_bytes=max_bytes,
        discard=DiscardPolicy.OLD,
        duplicate_window=DUPLICATE_WINDOW_S,
        num_replicas=replicas,
    )


def ack_wait(environ: Mapping[str, str] = os.environ) -> float:
    """Seconds before JetStream redelivers an unacknowledged message (AGENTWATCH_ACK_WAIT_SECONDS)."""
    return float(config.number(environ, "AGENTWATCH_ACK_WAIT_SECONDS", int(ACK_WAIT_S)))


def store_consumer_config(environ: Mapping[str, str] = os.environ) -> ConsumerConfig:
    return ConsumerConfig(
        durable_name=STORE_DURABLE,
        ack_policy=JsAckPolicy.EXPLICIT,
        ack_wait=ack_wait(environ),
        max_deliver=config.number(environ, "AGENTWATCH_MAX_DELIVER", MAX_DELIVER),
        max_ack_pending=MAX_ACK_PENDING,
    )


async def ensure_stream(js: JetStreamContext, environ: Mapping[str, str] = os.environ) -> str:
    """Create the stream, or update it to the configured limits; returns what was done."""
    for wanted in (alerts_stream_config(environ), stream_config(environ)):
        try:
            await js.stream_info(str(wanted.name))
        except NotFoundError:
            await js.add_stream(wanted)
            done = "created"
            continue
        await js.update_stream(wanted)
        done = "updated"
    return done  # of GENIE


async def ensure_watchdog_consumer(js: JetStreamContext, environ: Mapping[str, str] = os.environ) -> None:
    """The durable of a watchdog running alone, created before it says it is ready: it follows new
    events only, so every event published once the banner is out is watched."""
    try:
        await js.consumer_info(STREAM_NAME, ALERTS_DURABLE)
    except NotFoundError:
        await js.add_consumer(STREAM_NAME, alerts_consumer_config(environ))


async def restore_store_stream(js: JetStreamContext, environ: Mapping[str, str] = os.environ) -> list[str]:
    """Recreate the GENIE stream and the store's durable where they are gone (deleted by hand, a
    JetStream whose storage was reset): the store's pull requests are answered again, the same
    subscription as before. Returns what was recreated (none when both were there)."""
    made = []
    try:
        await js.stream_info(STREAM_NAME)
    except NotFoundError:
        await ensure_stream(js, environ)
        made.append(f"the {STREAM_NAME} stream")
    try:
        await js.consumer_info(STREAM_NAME, STORE_DURABLE)
    except NotFoundError:
        await js.add_consumer(STREAM_NAME, store_consumer_config(environ))
        made.append(f"the store's consumer {STORE_DURABLE}")
    return made


# How often the store makes sure its stream and durable are there (two JetStream API requests).
STREAM_CHECK_S = 2.0


async def watch_stream(
    js: Callable[[], JetStreamContext], environ: Mapping[str, str], every: float = STREAM_CHECK_S
) -> None:
    """Every `every` seconds, recreate the GENIE stream and the store's durable where they are
    gone (streams.restore_store_stream), with one line saying so: without them the store waits for
    messages that never come, and the bus keeps nothing published meanwhile."""
    while True:
        await asyncio.sleep(every)
        try:
            made = await restore_store_stream(js(), environ)
        except Exception as exc:  # the bus away (the client reconnects), or another store was first
            log.debug("could not check the stream: %s", exc)
            continue
        if made:
            log.warning(
                "%s had gone (deleted, or JetStream's storage reset): recreated; the bus kept "
                "nothing published to %s while it was missing",
                " and ".join(made),
                ALL_SUBJECTS,
            )


async def raise_ack_pending(js: JetStreamContext, durable: str = STORE_DURABLE) -> None:
    """A durable made with a lower MAX_ACK_PENDING (by an earlier version) gets the current one:
    the consumer is only created where it is missing, so its limit would otherwise stay."""
    try:
        info = await js.consumer_info(STREAM_NAME, durable)
    except NotFoundError:
        return
    config = info.config
    if 0 < (config.max_ack_pending or 0) < MAX_ACK_PENDING:
        config.max_ack_pending = MAX_ACK_PENDING
        await js.add_consumer(STREAM_NAME, config)  # an existing durable: updated in place


async def seen_not_stored(js: JetStreamContext, durable: str = ALERTS_DURABLE) -> tuple[int, int]:
    """(first, last): the stream sequences the watchdog's `durable` (its own, or the store's when
    it reads the store's deliveries) was delivered and the store's had not acknowledged (so
    perhaps not written yet). Empty (first > last) when either durable is not there."""
    try:
        store = await js.consumer_info(STREAM_NAME, STORE_DURABLE)
        watchdog = store if durable == STORE_DURABLE else await js.consumer_info(STREAM_NAME, durable)
    except NotFoundError:
        return 1, 0
    return int(store.ack_floor.stream_seq or 0) + 1, int(watchdog.delivered.stream_seq or 0)


async def read_range(
    js: JetStreamContext, first: int, last: int, *, since: float | None = None, batch: int = 1000
) -> list[Msg]:
    """The GENIE messages of stream sequences first..last that the stream still holds, in order,
    through an ephemeral consumer of its own (deleted after); with `since` (a Unix time), none
    the stream took before it: a store days behind does not make this read days of messages."""
    if last < first:
        return []
    config = ConsumerConfig(
        deliver_policy=DeliverPolicy.BY_START_SEQUENCE,
        opt_start_seq=first,
        ack_policy=JsAckPolicy.NONE,
        inactive_threshold=30.0,
        mem_storage=True,
    )
    if since is not None:
        with contextlib.suppress(NotFoundError):
            head = await js.get_msg(STREAM_NAME, first, next=True)
            if head.time is not None and head.time.timestamp() < since:
                config.deliver_policy, config.opt_start_seq = DeliverPolicy.BY_START_TIME, None
                config.opt_start_time = datetime.fromtimestamp(since, tz=UTC)
    # Created unnamed ($JS.API.CONSUMER.CREATE.GENIE, where the server refuses a durable), named by
    # the server: deploy's store user may make this consumer and no other durable.
    info = await js.add_consumer(STREAM_NAME, config)
    psub = await js.pull_subscribe_bind(consumer=info.name, stream=STREAM_NAME)
    out: list[Msg] = []
    try:
        while True:
            try:
                msgs = await psub.fetch(batch, timeout=2.0)
            except FetchTimeout:
                return out  # nothing more in the stream
            for msg in msgs:
                meta = msg.metadata
                if meta.sequence.stream > last:
                    return out
                if meta.sequence.stream >= first:
                    out.append(msg)
                if meta.sequence.stream == last or meta.num_pending == 0:
                    return out
    finally:
        await psub.unsubscribe()
        with contextlib.suppress(Exception):  # an ephemeral consumer goes by itself when idle
            await js.delete_consumer(STREAM_NAME, info.name)


async def prepare_stream(
    url: str,
    environ: Mapping[str, str] = os.environ,
    patience: float = 30.0,
    *,
    watchdog_alone: bool = False,
) -> str:
    """Create or update the stream, raise an existing store durable's limit to the current
    MAX_ACK_PENDING and, with `watchdog_alone`, create the durable of a watchdog running without a
    store (`agentwatch alerts run`),
    retrying while a cluster has no leader for it yet (a node that just restarted, an election
    under way)."""
    from agentwatch.bus.connect import connect

    deadline = time.monotonic() + patience
    while True:
        try:
            nc = await connect(url, environ, name="agentwatch-setup", role=config.STORE)
            try:
                done = await ensure_stream(nc.jetstream(), environ)
                if watchdog_alone:
                    await ensure_watchdog_consumer(nc.jetstream(), environ)
                await raise_ack_pending(nc.jetstream())
                return done
            finally:
                await nc.close()
        except Exception:
            if time.monotonic() >= deadline:
                raise
            await asyncio.sleep(1.0)


async def stream_status(url: str, environ: Mapping[str, str] = os.environ) -> list[str]:
    """Lines saying how full the stream is and how far behind the store's consumer is."""
    from agentwatch.bus.connect import connect

    lines = []
    nc = await connect(url, environ, name="agentwatch-status")
    try:
        js = nc.jetstream()
        try:
            si = await js.stream_info(STREAM_NAME)
            st = si.state
            lines.append(
                f"stream:    {STREAM_NAME}: {st.messages:,} messages, {st.bytes / 1e6:,.1f} MB, "
                f"sequences {st.first_seq}..{st.last_seq}"
            )
        except NotFoundError:
            lines.append(f"stream:    {STREAM_NAME} does not exist yet: `agentwatch up` creates it")
            return lines
        try:
            ci = await js.consumer_info(STREAM_NAME, STORE_DURABLE)
            lines.append(
                f"consumer:  {STORE_DURABLE}: {ci.num_pending:,} waiting, {ci.num_ack_pending:,} in flight, "
                f"{ci.num_redelivered:,} redelivered"
            )
        except NotFoundError:
            lines.append(f"consumer:  {STORE_DURABLE} does not exist yet: no store has run on this bus")
    finally:
        await nc.close()
    return lines


async def stream_captures(opts: Mapping[str, Any], inbox_prefix: str, subject: str, timeout: float) -> bool:
    """Whether a JetStream stream captures `subject`, asked with the login in `opts` (its replies
    on `inbox_prefix`, where that login may receive them); raises when it cannot be asked."""
    import nats

    nc = await nats.connect(
        **opts, inbox_prefix=inbox_prefix, allow_reconnect=False, connect_timeout=max(1, int(timeout))
    )
    try:
        await nc.jetstream(timeout=timeout).find_stream_name_by_subject(subject)
        return True
    except NotFoundError:
        return False
    finally:
        await nc.close()
