"""The stream and consumers every service shares, declared once from the contract module."""

from __future__ import annotations

import os
from collections.abc import Mapping

from faststream.nats import JStream
from nats.js.api import AckPolicy as JsAckPolicy
from nats.js.api import ConsumerConfig, DiscardPolicy, StorageType, StreamConfig
from nats.js.client import JetStreamContext
from nats.js.errors import NotFoundError

from agentwatch import config
from agentwatch.contract import ALL_SUBJECTS

STREAM_NAME = "GENIE"
STORE_DURABLE = "agentwatch-store"
QUERY_SUBJECT = "agentwatch.query"
QUERY_QUEUE = "agentwatch-query"
DUPLICATE_WINDOW_S = 120.0
# Deliveries before JetStream gives up on a message; the store dead-letters it on the advisory.
MAX_DELIVER = 10
ACK_WAIT_S = 30.0
# Unacknowledged messages the store may hold: bounds its memory whatever the backlog.
MAX_ACK_PENDING = 40_000


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


def stream() -> JStream:
    """The stream as FastStream sees it: `up` creates and updates it, subscribers only bind."""
    return JStream(STREAM_NAME, subjects=[ALL_SUBJECTS], declare=False)


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
    wanted = stream_config(environ)
    try:
        await js.stream_info(STREAM_NAME)
    except NotFoundError:
        await js.add_stream(wanted)
        return "created"
    await js.update_stream(wanted)
    return "updated"
