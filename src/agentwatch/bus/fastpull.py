"""A faster JetStream pull fetch for nats-py, used by the store's FastStream pull subscriber.

nats-py's `PullSubscription.fetch` awaits every message of a batch through its own `wait_for`
timer: about 28 microseconds a message on this project's 2-core reference machine, which caps the
store near 28,000 events/s whatever ClickHouse can take. This fetch sends the same pull request,
awaits the first message with one timer, then drains what has already arrived without a timer per
message (about 11 microseconds a message). Same protocol, same semantics: it returns up to `batch`
messages, fewer when the request expires, and skips the server's status messages.

One pull request per subscription is open at a time. A fetch that ends before all of its request's
messages arrived (its caller's timeout) leaves the request open, and the next fetch waits for the
rest instead of asking again: the request ends when its last message, or the server's status
ending it (404/408/409), arrives. Asking again for messages already on their way let a backlog
pile up in the server, which holds at most `max_pending` (64 MB) for a connection: under a backlog
of the hook's envelopes the store's and the watchdog's deliveries passed it, the server cut the
connection as a slow consumer, and everything it held for the store waited for the ack wait.
Each request is bounded in bytes too (REQUEST_MAX_BYTES), so large envelopes cannot pass it.

Stopping, `close` lets the open requests end, hands what they brought to the handlers, and only
then lets the pull loops be cancelled: nothing fetched is left unacknowledged.

The first fetch on a subscription also switches its connection to `fastparse.FastParser` for the
subscription's inbox (parsing was then the larger half of the store's event-loop time).

It relies on nats-py internals (`_sub`, `_pending_queue`, `_nms`, `_deliver`); `fast_fetch` checks
they are there and uses nats-py's own fetch otherwise, and `fastparse.enable` checks what it needs
in the same way (a test asserts both fast paths are active).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from typing import Any

from nats.aio.msg import Msg
from nats.errors import TimeoutError as FetchTimeout
from nats.js.client import JetStreamContext

from agentwatch.bus import fastparse

_ORIGINAL = JetStreamContext.PullSubscription.fetch
_END_OF_REQUEST = frozenset({"404", "408", "409"})
_PULLED = fastparse.PulledMsg
# The bytes one pull request may bring (see _request_bytes).
REQUEST_MAX_BYTES = 8 * 1024 * 1024
# A request whose end (all its messages, or the server's status) has not come this long after it
# expired, with no message meanwhile, is taken as over (a reconnect lost it).
REQUEST_GRACE_S = 1.0


def _usable(psub: Any) -> bool:
    sub = getattr(psub, "_sub", None)
    return (
        sub is not None
        and isinstance(getattr(sub, "_pending_queue", None), asyncio.Queue)
        and hasattr(sub, "_pending_size")
        and isinstance(getattr(psub, "_nms", None), str)
        and isinstance(getattr(psub, "_deliver", None), str)
        and getattr(psub, "_nc", None) is not None
    )


class OpenRequest:
    """A subscription's pull request as far as this client knows: the messages the server may
    still send for it, until when it can be trusted to be alive without news, and whether the
    subscription is closing (no new requests; see `close`)."""

    __slots__ = ("closing", "gave", "owed", "quiet", "reconnects", "until")

    def __init__(self) -> None:
        self.owed = 0
        self.until = 0.0
        self.reconnects = 0
        self.closing = False
        self.gave = False  # the last fetch returned messages
        self.quiet = asyncio.Event()  # closing, and everything fetched was handed over


def open_request(psub: Any) -> OpenRequest:
    state: OpenRequest | None = psub.__dict__.get("_agentwatch_request")
    if state is None:
        state = psub._agentwatch_request = OpenRequest()
    return state


def _request_bytes(nc: Any) -> int:
    """A request's byte bound: small beside nats-server's 64 MiB of pending data per connection,
    never below the largest message the server takes (a bigger one could never be delivered)."""
    return max(REQUEST_MAX_BYTES, 2 * int(getattr(nc, "max_payload", 0) or 0))


# long: one loop per fetch; helpers would cost a call per message on the store's hot path
async def fast_fetch(
    self: Any, batch: int = 1, timeout: float | None = 5, heartbeat: float | None = None
) -> list[Msg]:
    if not _usable(self) or heartbeat:
        result: list[Msg] = await _ORIGINAL(self, batch=batch, timeout=timeout, heartbeat=heartbeat)
        return result
    timeout = 5.0 if timeout is None else timeout
    sub = self._sub
    nc = self._nc
    fastparse.enable(nc, sub)
    queue: asyncio.Queue[Msg] = sub._pending_queue
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    state = open_request(self)
    if state.owed > 0 and (deadline - timeout > state.until or nc.stats["reconnects"] != state.reconnects):
        state.owed = 0  # its end never came (lost with a connection): taken as over
    msgs: list[Msg] = []
    need = batch
    sent = False
    try:
        while need > 0:
            if queue.empty():
                if state.owed <= 0:
                    if state.closing or sent:
                        break
                    # One open request per subscription: what the server was asked for and has
                    # not sent yet is never asked for again, so however slowly this process
                    # reads, the server holds at most one request's worth for it.
                    expires = max(int(timeout * 1e9) - 100_000, 1_000_000)
                    request = {"batch": need, "expires": expires, "max_bytes": _request_bytes(nc)}
                    await nc.publish(self._nms, json.dumps(request).encode(), self._deliver)
                    state.owed, state.reconnects, sent = need, nc.stats["reconnects"], True
                    state.until = loop.time() + expires / 1e9 + REQUEST_GRACE_S
                left = deadline - loop.time()
                if left <= 0:
                    break
                try:
                    msg = await asyncio.wait_for(queue.get(), left)
                except TimeoutError:
                    break
            else:
                msg = queue.get_nowait()
            sub._pending_size -= len(msg.data)
            if msg.__class__ is not _PULLED:  # (a PulledMsg is never a status message)
                status = _status(msg)
                if status:
                    if status in _END_OF_REQUEST:
                        state.owed = 0
                        if sent:
                            break  # this call's own request ended: the caller decides what next
                    continue  # heartbeats and other notices
            msgs.append(msg)
            need -= 1
            state.owed -= 1
    finally:
        if msgs:  # news of the request: it is alive
            state.until = max(state.until, loop.time() + REQUEST_GRACE_S)
    return await _handed(state, msgs, timeout)


async def _handed(state: OpenRequest, msgs: list[Msg], timeout: float) -> list[Msg]:
    """What fetch returns: `msgs`, or FetchTimeout (what nats-py raises, and what FastStream's
    pull loop expects). Closing, a call after one that returned nothing finds the caller holding
    nothing (FastStream's pull loop hands what it fetched to its handler before it fetches
    again): then the subscription is quiet, and the call waits to be cancelled."""
    if msgs:
        state.gave = True
        return msgs
    if state.closing and not state.gave and state.owed <= 0:
        state.quiet.set()
        await asyncio.sleep(timeout)
    state.gave = False
    raise FetchTimeout


async def close(psubs: list[Any], timeout: float) -> bool:
    """Stop `psubs` asking for messages and wait (at most `timeout` seconds) until what their
    open requests still bring has been fetched and handed to their handlers: after that,
    cancelling their pull loops loses nothing. True when all became quiet in time."""
    states = [open_request(p) for p in psubs if _usable(p)]
    for state in states:
        state.closing = True
    try:
        async with asyncio.timeout(timeout):
            for state in states:
                await state.quiet.wait()
    except TimeoutError:
        return False
    return True


def _status(msg: Msg) -> str:
    if msg.__class__ is fastparse.PulledMsg:
        return ""  # never a status message (those take nats-py's path); its headers stay unparsed
    headers = msg.headers
    if not headers:
        return ""
    return headers.get("Status", "")


def install() -> bool:
    """Make nats-py pull subscriptions use fast_fetch; True when it is active."""
    JetStreamContext.PullSubscription.fetch = fast_fetch  # type: ignore[method-assign]
    return True


async def ack_all(msgs: list[Msg]) -> None:
    """Acknowledge `msgs` with one write instead of one publish each (a publish validates the
    subject, builds a command and schedules a flush: about 2 microseconds a message)."""
    await _reply_all(msgs, b"")


async def nak_all(msgs: list[Msg]) -> None:
    """Hand `msgs` back to JetStream for delivery again at once (one write)."""
    await _reply_all(msgs, b"-NAK")


async def in_progress_all(msgs: list[Msg]) -> None:
    """Tell JetStream `msgs` are still being worked on (one write): their ack wait starts again."""
    await _reply_all([m for m in msgs if not m._ackd], b"+WPI", final=False)


async def keep_in_progress(msgs: list[Msg], every: float) -> None:
    """Until cancelled, every `every` seconds, tell JetStream `msgs` are in progress (a batch
    being written: a slow ClickHouse, a refused body to find), so it neither delivers them again
    (to be stored or dead-lettered twice) nor counts them against max_deliver."""
    while True:
        await asyncio.sleep(every)
        with contextlib.suppress(Exception):  # the bus away: redelivery is then fine
            await in_progress_all(msgs)


async def _reply_all(msgs: list[Msg], body: bytes, *, final: bool = True) -> None:
    if not msgs:
        return
    client: Any = msgs[0]._client
    send = getattr(client, "_send_command", None)
    flush = getattr(client, "_flush_pending", None)
    replies = [m.reply for m in msgs]
    if send is None or flush is None or not all(replies):
        for msg in msgs:
            await (msg.ack() if not body else msg.nak() if final else msg.in_progress())
        return
    tail = f" {len(body)}\r\n{body.decode()}\r\n"
    await send("".join([f"PUB {reply}{tail}" for reply in replies]).encode())
    await flush()
    if final:
        for msg in msgs:
            msg._ackd = True
