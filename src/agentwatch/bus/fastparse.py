"""A faster NATS protocol parser for the store's pull subscription.

nats-py parses the wire protocol in pure Python on the event loop's thread: a regular expression
per control line, a bytearray deletion and two copies per payload, and a full header parse of
every JetStream delivery (each carries at least its `Nats-Msg-Id`). At the store's rates that was
about half of the store process's time, competing with chDB's insert threads and nats-server for
the machine's cores.

`FastParser` takes over MSG/HMSG frames for the subscriptions registered with `enable()` (the
store's pull-fetch inbox): it walks the received bytes with `find`/`split` and slices, builds each
message without parsing its headers (`PulledMsg` parses them on first access, which the store
never does), and queues it as nats-py would. Parsing and queueing a 1 KB delivery takes about
2.2 microseconds instead of 4.8 (the best of six runs on the 2-core reference machine, the test
stream of the store's tests). Everything else keeps nats-py's own code path:

- frames for other subscriptions, and the server's status messages (404/408/409 ending a pull
  request, 100 heartbeats), go to nats-py's `_process_msg` with exactly the arguments its parser
  would pass;
- every other operation (PING, PONG, +OK, -ERR, INFO) is handed, one line at a time, to nats-py's
  parser, and so is a message frame this loop does not recognise (nats-py then reads its
  payload); a line nats-py cannot take either is a protocol error, as nats-py would raise;
- a subscription near its pending limits, or one with a message cap, goes the stock path too,
  so slow-consumer handling is nats-py's.

It relies on nats-py internals (the parser's fields and states, the client's `_subs`, `stats`
and `_process_msg`, the subscription's pending queue and limits); `enable()` checks they are what
this module expects and otherwise leaves the connection alone. The parser is switched by changing
the class of the connection's existing parser object, so nothing of its state is lost, whenever
the switch happens.
"""

from __future__ import annotations

import asyncio
import dataclasses
from typing import Any

from nats.aio.msg import Msg
from nats.errors import ProtocolError
from nats.protocol import parser as stock

_CRLF = b"\r\n"
# The first line of a header block without an inline status ("NATS/1.0 404 ..." has one).
_PLAIN_HEADERS = b"NATS/1.0\r\n"
_MSG_FIELDS = ("_client", "subject", "reply", "data", "headers", "_metadata", "_ackd", "_sid")


def parse_headers(block: bytes) -> dict[str, str] | None:
    """The headers of a block without an inline status, as nats-py gives them: `Name: value`
    lines after the `NATS/1.0` line; names are ASCII without spaces, values UTF-8 (replaced
    where invalid), both stripped; None when there are none."""
    out: dict[str, str] = {}
    for line in block[len(_PLAIN_HEADERS) :].split(_CRLF):
        name, sep, value = line.partition(b":")
        if not sep:
            continue
        try:
            key = name.strip().decode("ascii")
        except UnicodeDecodeError:
            continue
        if any(c.isspace() for c in key):
            continue
        out[key] = value.strip().decode("utf-8", "replace")
    return out or None


class PulledMsg(Msg):
    """A nats-py `Msg` whose header block is parsed on first access of `headers`."""

    _raw_headers: bytes | None = None
    _parsed_headers: dict[str, str] | None = None

    @property
    def headers(self) -> dict[str, str] | None:
        raw = self._raw_headers
        if raw is not None:
            self._parsed_headers = parse_headers(raw)
            self._raw_headers = None
        return self._parsed_headers

    @headers.setter
    def headers(self, value: dict[str, str] | None) -> None:
        self._parsed_headers = value
        self._raw_headers = None


_new_msg = object.__new__


class FastParser(stock.Parser):
    """nats-py's parser with a fast path for MSG/HMSG frames of registered subscriptions.

    Uses the stock parser's own fields (`buf`, `state`, `needed`, `header_needed`, `msg_arg`) with
    the same meaning, so either implementation can pick up where the other left off.
    """

    fast_sids: dict[int, Any]

    # long: one pass per read; helpers would cost a call per message on the store's hot path
    async def parse(self, data: bytes = b"") -> None:
        if self.state != stock.AWAITING_CONTROL_LINE:
            # The stock parser read a control line and awaits its payload: let it finish exactly
            # that message, then carry on here.
            self.buf.extend(data)
            size = self.needed + stock.CRLF_SIZE
            if len(self.buf) < size:
                return
            data = bytes(self.buf[size:])
            del self.buf[size:]
            held = self.buf
            await stock.Parser.parse(self)
            if self.buf is not held:
                return
            if self.state != stock.AWAITING_CONTROL_LINE or held:
                raise ProtocolError("nats: unexpected parser state")
        if self.buf:
            self.buf.extend(data)
            work = bytes(self.buf)
        else:
            work = data if type(data) is bytes else bytes(data)
        # The bytes are in `work` from here on; `buf` is an empty array of this call's own until
        # the end. nats-py resets the parser (a new `buf`) when the connection fails, possibly
        # while one of its handlers awaited here: then the rest belongs to a dead connection.
        self.buf = mark = bytearray()
        nc: Any = self.nc
        subs: Any = nc._subs  # sid -> nats-py Subscription
        fast = self.fast_sids
        stats = nc.stats
        last: Any = None  # the subscription whose queue room is counted in `room`
        queue: Any = None
        room = 0
        end = len(work)
        pos = 0
        while pos < end:
            eol = work.find(_CRLF, pos)
            if eol < 0:
                break
            if work.startswith(b"HMSG ", pos):
                args = work[pos + 5 : eol].split()
                count = len(args)
                if count == 5:
                    subject, sid_raw, reply, hlen_raw, total_raw = args
                elif count == 4:
                    subject, sid_raw, hlen_raw, total_raw = args
                    reply = b""
                else:
                    raise ProtocolError("nats: malformed MSG")
                try:
                    sid, hlen, total = int(sid_raw), int(hlen_raw), int(total_raw)
                except ValueError:
                    raise ProtocolError("nats: malformed MSG") from None
            elif work.startswith(b"MSG ", pos):
                args = work[pos + 4 : eol].split()
                count = len(args)
                if count == 4:
                    subject, sid_raw, reply, total_raw = args
                elif count == 3:
                    subject, sid_raw, total_raw = args
                    reply = b""
                else:
                    raise ProtocolError("nats: malformed MSG")
                hlen = 0
                try:
                    sid, total = int(sid_raw), int(total_raw)
                except ValueError:
                    raise ProtocolError("nats: malformed MSG") from None
            else:
                # Any other operation: nats-py's parser, one line at a time.
                self.buf = line = bytearray(work[pos : eol + 2])
                await stock.Parser.parse(self)
                if self.buf is not line:
                    return
                if line:
                    raise ProtocolError("nats: unknown protocol")  # stock would wait forever
                if self.state != stock.AWAITING_CONTROL_LINE:
                    # A message frame it reads although this loop does not: it takes the payload.
                    await self.parse(work[eol + 2 :])
                    return
                self.buf = mark
                pos = eol + 2
                continue
            start = eol + 2
            stop = start + total
            if stop + 2 > end:
                break  # the payload is not all here yet: parse this frame again with more bytes
            if not 0 <= hlen <= total:
                raise ProtocolError("nats: malformed MSG")
            pos = stop + 2
            sub: Any = fast.get(sid)
            if (
                sub is not None
                and subs.get(sid) is sub
                and (hlen == 0 or work.startswith(_PLAIN_HEADERS, start, start + hlen))
                and not sub._max_msgs
            ):
                if sub is not last:
                    last = sub
                    queue = sub._pending_queue
                    room = queue.maxsize - queue.qsize() if queue.maxsize > 0 else -1  # -1: unbounded
                payload = work[start + hlen : stop]
                size = len(payload)
                limit = sub._pending_bytes_limit
                if room and (limit <= 0 or sub._pending_size + size < limit):
                    room -= room > 0
                    stats["in_msgs"] += 1
                    stats["in_bytes"] += size
                    sub._received += 1
                    msg = _new_msg(PulledMsg)
                    msg._client = nc
                    msg.subject = subject.decode()
                    msg.reply = reply.decode()
                    msg.data = payload
                    msg._sid = sid
                    if hlen:
                        msg._raw_headers = work[start:start + hlen]  # fmt: skip
                    sub._pending_size += size
                    queue.put_nowait(msg)
                    continue
            # nats-py's own handling, with the arguments its parser passes.
            headers = work[start : start + hlen] if hlen else None
            last = None  # what nats-py does may change the pending queue
            await nc._process_msg(sid, subject, reply, work[start + hlen : stop], headers)
            if self.buf is not mark:
                return
        if pos < end:
            mark.extend(memoryview(work)[pos:])


def _usable(nc: Any, sub: Any) -> bool:
    """True when nats-py's internals are what FastParser relies on."""
    try:
        parser = nc._ps
        fields = tuple(f.name for f in dataclasses.fields(Msg))
        return (
            type(parser) in (stock.Parser, FastParser)
            and isinstance(parser.buf, bytearray)
            and isinstance(getattr(parser, "state", None), int)
            and isinstance(getattr(parser, "needed", None), int)
            and stock.AWAITING_CONTROL_LINE != stock.AWAITING_MSG_PAYLOAD
            and stock.CRLF_SIZE == 2
            and fields == _MSG_FIELDS
            and isinstance(getattr(nc, "_subs", None), dict)
            and isinstance(getattr(nc, "stats", None), dict)
            and {"in_msgs", "in_bytes"} <= nc.stats.keys()
            and callable(getattr(nc, "_process_msg", None))
            and isinstance(getattr(sub, "_id", None), int)
            and isinstance(getattr(sub, "_pending_queue", None), asyncio.Queue)
            and isinstance(getattr(sub, "_pending_size", None), int)
            and isinstance(getattr(sub, "_pending_bytes_limit", None), int)
            and isinstance(getattr(sub, "_received", None), int)
            and isinstance(getattr(sub, "_max_msgs", None), int)
            and getattr(sub, "_cb", 0) is None
            and getattr(sub, "_future", 0) is None
            and getattr(sub, "_jsi", 0) is None
        )
    except Exception:
        return False


def enable(nc: Any, sub: Any) -> bool:
    """Parse `sub`'s messages on connection `nc` with FastParser; True when it is active."""
    parser: Any = getattr(nc, "_ps", None)
    if type(parser) is FastParser and sub is parser.fast_sids.get(getattr(sub, "_id", -1)):
        return True
    if not _usable(nc, sub):
        return False
    if type(parser) is not FastParser:
        parser.fast_sids = {}
        parser.__class__ = FastParser
    subs = nc._subs  # forget subscriptions since closed
    parser.fast_sids = {sid: s for sid, s in parser.fast_sids.items() if subs.get(sid) is s}
    parser.fast_sids[sub._id] = sub
    return True


def disable(nc: Any) -> None:
    """Back to nats-py's parser for connection `nc` (its state carries over)."""
    parser: Any = getattr(nc, "_ps", None)
    if type(parser) is FastParser:
        parser.__class__ = stock.Parser  # type: ignore[assignment]  # (mypy narrowed it)
