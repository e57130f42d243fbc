"""What the collector's two HTTP doors (the OTLP receiver, /metrics) do about clients that hold a
connection open: both are the standard library's threading servers (http.server; wsgiref, which
prometheus-client builds on), one thread per connection, which by themselves wait forever for a
client that says nothing and take every connection offered.

- Every connection's socket gets a timeout of READ_TIMEOUT_S (socketserver's own per-request
  socket, before the handler runs): a client silent that long, between two requests of a kept-alive
  connection, inside its headers or its body, or not reading the answer, is disconnected.
- At most MAX_CONNECTIONS connections are served at once; one more is answered 503 (Retry-After)
  and closed without a thread.
- A client that leaves (a reset, a broken pipe, a timeout) is one line at INFO in the log, not a
  traceback on stderr; any other error of a request is still logged with its traceback.

A client that trickles one byte every few seconds is not cut by the timeout (it applies to each
read): the cap is what bounds the threads such clients can hold.
"""

from __future__ import annotations

import contextlib
import logging
import socket
import socketserver
import sys
import threading
import time
from typing import Any

READ_TIMEOUT_S = 5.0
MAX_CONNECTIONS = 64
_REFUSAL_LOG_S = 60.0
_BUSY_TEXT = b"too many connections open; retry\n"
BUSY = (
    b"HTTP/1.1 503 Service Unavailable\r\nContent-Type: text/plain\r\nRetry-After: 1\r\n"
    b"Connection: close\r\nContent-Length: " + str(len(_BUSY_TEXT)).encode() + b"\r\n\r\n" + _BUSY_TEXT
)


class Bounded(socketserver.ThreadingMixIn, socketserver.TCPServer):
    """A threading TCP server (put before the server class: `class S(Bounded, HTTPServer)`) with a
    read timeout on every connection and a cap on the connections served at once. Listens on IPv6
    when its host is an IPv6 address."""

    daemon_threads = True  # a connection being served never holds up the collector's exit
    door = "http"  # its name in the log
    log = logging.getLogger("agentwatch")
    read_timeout = READ_TIMEOUT_S
    max_connections = MAX_CONNECTIONS
    request_queue_size = MAX_CONNECTIONS  # a burst of connections waits to be accepted, or refused

    def __init__(self, server_address: tuple[str, int], handler: Any, bind_and_activate: bool = True) -> None:
        self.address_family = socket.AF_INET6 if ":" in server_address[0] else socket.AF_INET
        self._slots = threading.BoundedSemaphore(self.max_connections)
        self._refused, self._refusal_logged = 0, 0.0
        super().__init__(server_address, handler, bind_and_activate)

    def process_request(self, request: Any, client_address: Any) -> None:
        if not self._slots.acquire(blocking=False):
            self._refuse(request)
            return
        try:
            request.settimeout(self.read_timeout)
            super().process_request(request, client_address)
        except BaseException:
            self._slots.release()
            raise

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            self._slots.release()

    def handle_error(self, request: Any, client_address: Any) -> None:  # noqa: ARG002 - socketserver's signature
        """One line for a client that left or stayed silent; the traceback for anything else."""
        exc = sys.exc_info()[1]
        who = client_address[0] if isinstance(client_address, tuple) and client_address else "a client"
        if isinstance(exc, OSError):
            self.log.info("%s: %s left: %s", self.door, who, exc or type(exc).__name__)
        else:
            self.log.error("%s: a request from %s failed", self.door, who, exc_info=True)

    def _refuse(self, request: socket.socket) -> None:
        """503 and close, on the accepting thread, without waiting for anything."""
        try:
            request.setblocking(False)
            # What the client sent already is read, so that the close does not reset the
            # connection before the client reads the answer.
            with contextlib.suppress(OSError):
                for _ in range(16):
                    if not request.recv(65536):
                        break
            request.send(BUSY)
        except OSError:
            pass
        self.shutdown_request(request)
        self._refused += 1
        now = time.monotonic()
        if now - self._refusal_logged >= _REFUSAL_LOG_S:
            self.log.warning(
                "%s: %d connections refused (503): %d are open, the most it serves at once",
                self.door, self._refused, self.max_connections,
            )  # fmt: skip
            self._refused, self._refusal_logged = 0, now
