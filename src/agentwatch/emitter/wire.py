"""A minimal core-NATS publisher over one short-lived socket.

INFO, CONNECT, HPUB with a Nats-Msg-Id header, PING, PONG: the PONG proves the server took every
message sent before it. One connection, no reconnects, every wait bounded by the caller's
deadline. User/password and token come from the URL; `tls://` (or a server that requires TLS)
upgrades the socket after INFO. NKEY and creds files fall back to nats-py (see fallback.py).
What the hook learned about a server (does a stream capture genie.>?) is kept between its runs in
the data dir (`bus_memory`, `remember_bus`).

Standard library only, and built on `_socket` rather than `socket`, whose import builds enums
that would cost the hook a noticeable share of its start-up time.
"""

from __future__ import annotations

import _socket
import posix
import time

from agentwatch import __version__
from agentwatch.config import ServerURL, data_dir
from agentwatch.contract import DEFAULT_MAX_PAYLOAD, MSG_ID_HEADER
from agentwatch.jsonfast import dumps, loads

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Mapping
    from typing import Any

    # (subject, message id, body)
    Message = tuple[str, str, bytes]

# Reply subjects for JetStream's acknowledgements; a deployment that restricts the hook's user
# grants it `subscribe: "_AW_ACK.>"` (see deploy/nats/accounts.conf).
ACK_PREFIX = "_AW_ACK"
# JetStream's API for "which streams capture this subject"; the hook's user needs publish rights
# on it (deploy/nats/accounts.conf grants them), else the hook waits for acks as it always did.
STREAM_NAMES_API = "$JS.API.STREAM.NAMES"


class BusError(Exception):
    """The bus could not be reached, refused us, or did not confirm in time."""

    stream_missing = False


class StreamMissing(BusError):
    """No stream stored the messages, on a server where one captured genie.> before: they are not
    sent (see Connection.publish's `stored`)."""

    stream_missing = True


class Connection:
    """One connected, authenticated client socket."""

    def __init__(self, url: ServerURL, deadline: float, greet: bool = True) -> None:
        self.url = url
        self.deadline = deadline
        self.info: dict[str, Any] = {}
        self.greeted = False
        self._buf = b""
        self._sock: Any = None
        self._refused: BusError | None = None
        self._pending = b""  # CONNECT, sent with the first write
        self._start()
        if greet:
            self.greet()

    @property
    def max_payload(self) -> int:
        value = self.info.get("max_payload")
        return value if isinstance(value, int) and value > 0 else DEFAULT_MAX_PAYLOAD

    def _remaining(self) -> float:
        left = self.deadline - time.monotonic()
        if left <= 0:
            raise BusError("deadline reached")
        return left

    def _start(self) -> None:
        """Resolve the host and begin the TCP connection without waiting for it: the server
        accepts and sends its INFO while the caller does its own work (see greet)."""
        try:
            # An ASCII host goes as bytes: a str would load the IDNA codec on every run.
            host = self.url.host.encode() if self.url.host.isascii() else self.url.host
            self._addrs = _socket.getaddrinfo(host, self.url.port, 0, _socket.SOCK_STREAM)
        except OSError as exc:
            self._refused = BusError(f"cannot resolve {self.url.host}: {exc}")
            return
        self._errors: list[str] = []
        self._connect_next()

    def _connect_next(self) -> None:
        """Begin connecting to the next address; one that refuses at once (as loopback does) is
        skipped. Sets _refused when none is left."""
        while self._addrs:
            family, socktype, proto, _, addr = self._addrs.pop(0)
            sock = _socket.socket(family, socktype, proto)
            sock.setblocking(False)
            try:
                sock.setsockopt(_socket.IPPROTO_TCP, _socket.TCP_NODELAY, 1)
                sock.connect(addr)
            except BlockingIOError:  # EINPROGRESS (the `errno` module costs the hook 0.08 ms)
                pass
            except OSError as exc:
                sock.close()
                self._errors.append(str(exc))
                continue
            self._sock = sock
            return
        self._refused = BusError(f"cannot connect to {self.url.display()}: {'; '.join(self._errors)}")

    def greet(self) -> None:
        """Wait for the connection and the server's INFO (TLS after it when asked for); the
        CONNECT goes with the first write. Raises BusError."""
        url = self.url
        while not self.greeted:
            if self._refused is not None:
                raise self._refused
            try:
                line = self._readline()
                if not line.startswith(b"INFO "):
                    raise BusError(f"{url.display()} did not greet like a NATS server: {line[:60]!r}")
                self.info = loads(line[5:].decode("utf-8", "replace"))
                if url.tls or self.info.get("tls_required"):
                    self._start_tls()
                self._pending = self._connect_line()
                self.greeted = True
            except (OSError, ValueError, BusError) as exc:
                connected = self._connected()
                self.close()
                if isinstance(exc, BusError):
                    raise
                if connected or isinstance(exc, ValueError):
                    raise BusError(f"{url.display()}: {exc}") from None
                self._errors.append(str(exc))  # the connection never was: the next address
                self._connect_next()

    def connecting(self) -> bool:
        """Whether a connection is begun and not yet greeted, nor refused: what follows waits on
        the server. (A loopback port where nothing listens may refuse only after `connect`
        returned: its error is on the socket by now.)"""
        if self._sock is None or self._refused is not None or self.greeted:
            return False
        try:
            error = self._sock.getsockopt(_socket.SOL_SOCKET, _socket.SO_ERROR)  # read, it is cleared
        except OSError:
            return False
        if not error:
            return True
        self.close()
        self._errors.append(f"[Errno {error}] {posix.strerror(error)}")
        self._connect_next()  # the next address, if any: refused at once or begun
        return self.connecting()

    def _connected(self) -> bool:
        try:
            self._sock.getpeername()
        except (OSError, AttributeError):
            return False
        return True

    def _start_tls(self) -> None:
        import os
        import socket
        import ssl

        ctx = ssl.create_default_context(cafile=os.environ.get("AGENTWATCH_NATS_CA") or None)
        cert = os.environ.get("AGENTWATCH_NATS_CERT")
        if cert:
            ctx.load_cert_chain(cert, os.environ.get("AGENTWATCH_NATS_KEY") or None)
        plain = socket.socket(fileno=self._sock.detach())
        plain.settimeout(self._remaining())
        self._sock = ctx.wrap_socket(plain, server_hostname=self.url.host)

    def _connect_line(self) -> bytes:
        opts: dict[str, object] = {
            "verbose": False,
            "pedantic": False,
            "headers": True,
            # A publish whose reply nobody answers (no stream captures the subject) gets a 503
            # status instead of silence, so the hook need not wait out its deadline for an ack.
            "no_responders": True,
            "lang": "python-agentwatch-emit",
            "version": __version__,
            "protocol": 1,
            "name": "agentwatch-emit",
        }
        if self.url.user:
            opts["user"] = self.url.user
            opts["pass"] = self.url.password
        elif self.url.token:
            opts["auth_token"] = self.url.token
        return b"CONNECT " + dumps(opts).encode() + b"\r\n"

    def _send(self, data: bytes) -> None:
        self._sock.settimeout(self._remaining())
        self._sock.sendall(self._pending + data)
        self._pending = b""

    def _readline(self) -> bytes:
        while b"\r\n" not in self._buf:
            self._sock.settimeout(self._remaining())
            chunk = self._sock.recv(65536)
            if not chunk:
                raise BusError(f"{self.url.display()} closed the connection")
            self._buf += chunk
        line, _, self._buf = self._buf.partition(b"\r\n")
        return line

    def _read_exact(self, n: int) -> bytes:
        while len(self._buf) < n:
            self._sock.settimeout(self._remaining())
            chunk = self._sock.recv(max(65536, n - len(self._buf)))
            if not chunk:
                raise BusError(f"{self.url.display()} closed the connection")
            self._buf += chunk
        data, self._buf = self._buf[:n], self._buf[n:]
        return data

    def publish(
        self, messages: Iterable[Message], stream: bool | None = None, stored: bool = False
    ) -> bool | None:
        """Send `messages`; return once each is stored, or raise BusError.

        On a server with JetStream, stored means the stream's acknowledgement (a PubAck on the
        reply subject); a server's PONG alone is not enough in a cluster: it proves that server
        received a message, not that the stream leader stored it, and a node killed at that moment
        loses it. Without JetStream, or where no stream captures the subject, the PONG after the
        messages is all the confirmation there is. Message ids make JetStream drop the repeats of
        anything sent again.

        `stream` is what the caller knows of the bus: True (a stream captures genie.>: wait for
        its acks), False (none does: the PONG confirms), None (ask JetStream, in the same write).
        Returns what this call learned (True, False), or None when it learned nothing.

        `stored`: a stream captured genie.> on this server before; only a stream's ack confirms,
        and a server with no stream for them (JetStream's answer, a 503 "no responders", no
        JetStream at all) raises StreamMissing: the messages stay with the caller.
        """
        batch = list(messages)
        headers = bool(self.info.get("headers", True))
        if stored:
            stream = stream or None
            if not (headers and self.info.get("jetstream")) or self._acks_refused:
                raise StreamMissing(f"{self.url.display()} {_STREAM_GONE}")
        acks = headers and bool(self.info.get("jetstream")) and not self._acks_refused and stream is not False
        parts = []
        if acks and not self._inbox:
            self._inbox = f"{ACK_PREFIX}.{posix.urandom(8).hex()}"
            parts.append(f"SUB {self._inbox}.* 1\r\n".encode())
        ask = acks and stream is None and bool(batch)
        if ask:
            # Does a stream capture these subjects? Asked in the same write, answered alongside the
            # PONG: it costs no round trip, and spares a wait for acks that no stream will send
            # (a core subscriber on genie.> otherwise keeps "no responders" from ending it).
            question = f'{{"subject":"{batch[0][0]}"}}'.encode()
            parts.append(f"PUB {STREAM_NAMES_API} {self._inbox}.s {len(question)}\r\n".encode())
            parts.append(question + b"\r\n")
        for i, (subject, msg_id, body) in enumerate(batch):
            reply = f" {self._inbox}.{i}" if acks else ""
            if headers:
                hdr = f"NATS/1.0\r\n{MSG_ID_HEADER}: {msg_id}\r\n\r\n".encode()
                parts.append(f"HPUB {subject}{reply} {len(hdr)} {len(hdr) + len(body)}\r\n".encode())
                parts.append(hdr)
            else:
                parts.append(f"PUB {subject} {len(body)}\r\n".encode())
            parts.append(body)
            parts.append(b"\r\n")
        parts.append(b"PING\r\n")
        try:
            self._send(b"".join(parts))
            if acks:
                return self._await_acks(len(batch), stored)
            self.confirm()
        except OSError as exc:
            raise BusError(f"{self.url.display()}: {self._server_said() or exc}") from None
        return None

    # This connection's inbox for acknowledgements, subscribed with the first batch; refused where
    # the user may only publish, and then the PONG is the confirmation.
    _inbox = ""
    _acks_refused = False

    def _server_said(self) -> str:
        """What the server sent before it closed (an -ERR such as Authorization Violation)."""
        try:
            self._sock.settimeout(0.05)
            while True:
                chunk = self._sock.recv(65536)
                if not chunk:
                    break
                self._buf += chunk
        except (OSError, AttributeError):
            pass
        at = self._buf.find(b"-ERR")
        if at < 0:
            return ""
        return "refused: " + self._buf[at + 5 :].split(b"\r\n", 1)[0].decode(errors="replace")

    def _await_acks(self, count: int, stored: bool = False) -> bool | None:
        """Read until every message 0..count-1 has its PubAck or no-responders status, or JetStream
        answered the question publish() asked that no stream captures them (the PONG confirms;
        `stored`: StreamMissing is raised instead)."""
        waiting = set(range(count))
        ponged = False
        learned: bool | None = None
        prefix = self._inbox.encode()
        while waiting or not ponged:
            line = self._readline()
            if line.startswith((b"MSG ", b"HMSG ")):
                fields = line.split()
                total = int(fields[-1])
                hdr_len = int(fields[-2]) if fields[0] == b"HMSG" else 0
                payload = self._read_exact(total + 2)[:total]
                tag = fields[1].rsplit(b".", 1)[-1] if fields[1].startswith(prefix) else b""
                head, body = payload[:hdr_len], payload[hdr_len:]
                if tag == b"s":
                    learned = _stream_found(head, body)
                    if learned is False and stored:
                        raise StreamMissing(f"{self.url.display()} {_STREAM_GONE}")
                    if learned is False:
                        waiting.clear()  # no stream will acknowledge: the PONG is the confirmation
                    continue
                index = int(tag) if tag.isdigit() else -1
                if index not in waiting:
                    continue
                if head.startswith(b"NATS/1.0 503"):
                    if stored:
                        raise StreamMissing(f"{self.url.display()} {_STREAM_GONE}")
                    waiting.discard(index)  # no stream for this subject: core delivery is all there is
                    learned = False if learned is None else learned
                    continue
                if b'"error"' in body[:200]:
                    raise BusError(
                        f"{self.url.display()} did not store a message: {body[:300].decode(errors='replace')}"
                    )
                learned = True
                waiting.discard(index)
            elif line == b"PONG":
                ponged = True
            elif line.startswith(b"-ERR"):
                text = line[5:].decode(errors="replace")
                if "Permissions Violation for Publish" in text and STREAM_NAMES_API in text:
                    continue  # this user may not ask: wait for the acks as before
                if "Permissions Violation for Subscription" in text:
                    # This user may not receive acks: fall back to the server's PONG.
                    self._acks_refused = True
                    if not ponged:
                        self.confirm()
                    return learned
                raise BusError(f"{self.url.display()} refused: {text}")
            elif line == b"PING":
                self._send(b"PONG\r\n")
        return learned

    def confirm(self) -> None:
        """Wait for the PONG that follows everything sent so far."""
        while True:
            line = self._readline()
            if line == b"PONG":
                return
            if line.startswith(b"-ERR"):
                raise BusError(f"{self.url.display()} refused: {line[5:].decode(errors='replace')}")
            if line == b"PING":
                self._send(b"PONG\r\n")
            # INFO updates and +OK need no answer.

    def close(self) -> None:
        if self._sock is not None:
            try:
                self._sock.close()
            finally:
                self._sock = None


def connect(
    urls: list[ServerURL], deadline: float, on_error: Callable[[str], None] | None = None
) -> Connection:
    """The first server of `urls` that accepts us before `deadline`."""
    errors = []
    for url in urls:
        try:
            return Connection(url, deadline)
        except BusError as exc:
            errors.append(str(exc))
            if time.monotonic() >= deadline:
                break
    message = "; ".join(errors) or "no server tried"
    if on_error is not None:
        on_error(message)
    raise BusError(message)


_STREAM_GONE = (
    "has no stream for genie.> any more (one captured it before): the events stay spooled until one "
    "does (`agentwatch up` or the collector makes it)"
)


def _stream_found(head: bytes, body: bytes) -> bool | None:
    """Whether JetStream's STREAM.NAMES reply names a stream; None when it did not say."""
    if head.startswith(b"NATS/1.0 503"):
        return False  # JetStream does not answer for this account: no stream will ack
    try:
        reply = loads(body.decode("utf-8", "replace"))
    except ValueError:
        return None
    if not isinstance(reply, dict) or reply.get("error") is not None:  # JetStream's API error object
        return None
    return bool(reply.get("streams"))


# --- what the hook remembers about the bus, between runs ------------------------------------------

# How long the hook trusts what it learned: a stream exists (then it waits for the stream's acks)
# or no stream captures genie.> (then the server's PONG confirms). Past this it asks JetStream
# again, in the same write as the events. A stream made or deleted meanwhile is noticed this late.
STREAM_KNOWN_S = 60.0
NO_STREAM_KNOWN_S = 30.0


def _knowledge_path(environ: Mapping[str, str]) -> str:
    return f"{data_dir(environ).rstrip('/')}/bus-knowledge"


def bus_knowledge(environ: Mapping[str, str], server: str, now: float | None = None) -> bool | None:
    """Whether a stream captured genie.> on `server`, as learned recently; None when not known."""
    return bus_memory(environ, server, now)[0]


def bus_memory(environ: Mapping[str, str], server: str, now: float | None = None) -> tuple[bool | None, bool]:
    """What bus_knowledge says, and whether a stream ever captured genie.> on `server` (a line's
    fourth field, `1`: it does not expire)."""
    now = time.time() if now is None else now
    try:
        with open(_knowledge_path(environ), "rb") as f:
            lines = f.read(65536).decode("utf-8", "replace").splitlines()
    except OSError:
        return None, False
    for line in lines:
        parts = line.split()
        if len(parts) in (3, 4) and parts[0] == server and parts[1] in ("0", "1"):
            seen = parts[1] == "1" or parts[3:] == ["1"]
            try:
                age = now - float(parts[2])
            except ValueError:
                return None, seen
            stream = parts[1] == "1"
            return (stream if 0 <= age < (STREAM_KNOWN_S if stream else NO_STREAM_KNOWN_S) else None), seen
    return None, False


def remember_bus(environ: Mapping[str, str], server: str, stream: bool, seen: bool = False) -> None:
    """Keep what was learned about `server` (atomically; other servers' lines stay): whether a
    stream captures genie.> now, and whether one ever did (`seen`)."""
    path = _knowledge_path(environ)
    try:
        with open(path, "rb") as f:
            kept = [ln for ln in f.read(65536).decode("utf-8", "replace").splitlines()[-31:]
                    if ln.split(" ", 1)[0] != server]  # fmt: skip
    except OSError:
        kept = []
    # Not rounded: a time rounded up lies ahead of the next run's clock, which then knew nothing.
    kept.append(f"{server} {int(stream)} {time.time():.3f}" + (" 1" if seen or stream else ""))
    tmp = f"{path}.{posix.getpid()}"
    try:
        fd = posix.open(tmp, posix.O_WRONLY | posix.O_CREAT | posix.O_TRUNC, 0o600)
        try:
            posix.write(fd, ("\n".join(kept) + "\n").encode())
        finally:
            posix.close(fd)
        posix.replace(tmp, path)
    except OSError:  # a full disk: no temporary file stays behind
        try:  # noqa: SIM105 - contextlib would cost the hook an import
            posix.unlink(tmp)
        except OSError:
            pass
