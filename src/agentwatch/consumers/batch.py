"""The raw-batch parser of the collector's pull subscribers (the store's and the watchdog's).

FastStream's batch parser copies every body into a list and reads every message's headers (which
makes `bus.fastparse` parse them all), and its default decoder makes every message of a batch its
own StreamMessage (a uuid4 each) to JSON-decode bodies the handlers never read: a quarter of the
store's time. With `parser=batch_as_is, decoder=raw_batch` a handler receives the fetched nats-py
messages themselves. (Here and not in bus/: only consumers/ imports FastStream.)
"""

from __future__ import annotations

from typing import Any

from faststream.nats.message import NatsBatchMessage
from nats.aio.msg import Msg


async def batch_as_is(msgs: list[Msg]) -> NatsBatchMessage:
    """The fetched messages as the batch's body, untouched."""
    return NatsBatchMessage(raw_message=msgs, body=msgs)


async def raw_batch(msg: Any) -> Any:
    """The batch's body as `batch_as_is` left it: the list of nats-py messages."""
    return msg.body
