"""The OTLP/HTTP receiver: Claude Code's own telemetry (log events, metrics, spans) into the store.

`POST /v1/logs`, `/v1/metrics`, `/v1/traces`, protobuf (`application/x-protobuf`) or JSON
(`application/json`), gzip or not, on AGENTWATCH_OTLP_ADDR (`127.0.0.1:4318`, the OTLP/HTTP port;
`off` turns it off). Each request is decoded (consumers/otlp_decode.py) and its new records
inserted (store/otel.py) before the answer, so a 200 means stored; the exporter retries anything
else it may retry (503 while ClickHouse is away). Bad input never stops the receiver:

- 404 for another path, 405 for another method, 411 without a Content-Length;
- 413 for a body over AGENTWATCH_OTLP_MAX_BYTES (8 MiB), as sent or once unzipped (never read
  whole: the connection is closed);
- 415 for a Content-Type or Content-Encoding it does not take;
- 400 with the reason for a body that does not parse, which is kept in `dead_letters` (subject
  `otlp /v1/<signal>`; a protobuf body as `base64:` text);
- 401 without the bearer token, when AGENTWATCH_OTLP_TOKEN is set; a receiver bound beyond
  loopback refuses to start without one (Claude Code sends it with
  `OTEL_EXPORTER_OTLP_HEADERS=Authorization=Bearer <token>`);
- a client silent for 5 s (between requests, in its headers or its body) is disconnected, at most
  64 connections are served at once (503 beyond), and a client that closes before its whole body
  arrived is one line at INFO, nothing stored and no dead letter (consumers/http_doors.py).

The standard library's threading HTTP server, in its own threads, with its own ClickHouse client
(one insert at a time): the collector's event loop is never touched.
"""

from __future__ import annotations

import base64
import hmac
import logging
import threading
import zlib
from collections.abc import Mapping
from http.server import BaseHTTPRequestHandler, HTTPServer
from typing import TYPE_CHECKING, Any

from agentwatch import config
from agentwatch.consumers.http_doors import Bounded
from agentwatch.consumers.otlp_decode import SIGNALS, BadBody, decode
from agentwatch.store.otel import insert_otel
from agentwatch.store.writes import insert_dead_letters

if TYPE_CHECKING:
    from clickhouse_connect.driver.client import Client

    from agentwatch.consumers.metrics import Metrics

log = logging.getLogger("agentwatch.otlp")

DEFAULT_ADDR = "127.0.0.1:4318"
DEFAULT_MAX_BYTES = 8 * 1024 * 1024
DEAD_LETTER_MAX_BYTES = 1024 * 1024
_JSON = "application/json"
_PROTOBUF = ("application/x-protobuf", "application/protobuf")


class Answer:
    """What the receiver says to one request."""

    __slots__ = ("body", "close", "status")

    def __init__(self, status: int, body: bytes = b"", close: bool = False) -> None:
        self.status, self.body, self.close = status, body, close


def _refusal(status: int, message: str, close: bool = False) -> Answer:
    import orjson

    return Answer(status, orjson.dumps({"code": status, "message": message}), close)


class OtlpReceiver:
    """The receiver: `listen` binds it, `handle` answers one request, `close` ends it."""

    def __init__(
        self,
        host: str,
        port: int,
        clickhouse_url: str,
        *,
        token: str = "",
        max_bytes: int = DEFAULT_MAX_BYTES,
        metrics: Metrics | None = None,
    ) -> None:
        if not token and not config.is_loopback(host):
            raise ValueError(
                f"AGENTWATCH_OTLP_ADDR={host}:{port} is beyond loopback: set AGENTWATCH_OTLP_TOKEN, and "
                "OTEL_EXPORTER_OTLP_HEADERS=Authorization=Bearer <token> where Claude Code runs"
            )
        self.host, self.port = host, port
        self.clickhouse_url = clickhouse_url
        self.max_bytes = max_bytes
        self.metrics = metrics
        self._token = token
        self._client: Client | None = None
        self._lock = threading.Lock()  # one insert at a time on the receiver's client
        self._server: _Server | None = None
        self.stored = dict.fromkeys(SIGNALS, 0)

    @classmethod
    def from_settings(
        cls, environ: Mapping[str, str], clickhouse_url: str, metrics: Metrics | None = None
    ) -> OtlpReceiver | None:
        where = config.listen_address(environ, "AGENTWATCH_OTLP_ADDR", DEFAULT_ADDR)
        if where is None:
            return None
        token = environ.get("AGENTWATCH_OTLP_TOKEN", "").strip()
        max_bytes = config.number(environ, "AGENTWATCH_OTLP_MAX_BYTES", DEFAULT_MAX_BYTES)
        return cls(*where, clickhouse_url, token=token, max_bytes=max_bytes, metrics=metrics)

    @property
    def url(self) -> str:
        shown = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{shown}:{self.port}"

    def listen(self) -> str:
        """Bind (OSError when the address is taken), open the receiver's ClickHouse client, serve
        in a thread; the base URL."""
        self._server = _Server((self.host, self.port), _handler(self))
        self.port = int(self._server.server_address[1])
        from agentwatch.store.client import connect

        self._client = connect(self.clickhouse_url)
        threading.Thread(target=self._server.serve_forever, name="agentwatch-otlp", daemon=True).start()
        return self.url

    def close(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
        with self._lock:
            if self._client is not None:
                self._client.close()
                self._client = None

    # -- one request -----------------------------------------------------------------------------

    def authorized(self, header: str) -> bool:
        return not self._token or hmac.compare_digest(header.strip(), f"Bearer {self._token}")

    def handle(self, path: str, content_type: str, encoding: str, body: bytes) -> Answer:
        """The answer to a POST of `body` (as sent) to `path`; stores what it holds."""
        signal = _signal(path)
        if signal is None:
            return _refusal(
                404, f"no OTLP endpoint at {path[:100]}: POST /v1/logs, /v1/metrics or /v1/traces"
            )
        kind = content_type.split(";", 1)[0].strip().lower()
        if kind != _JSON and kind not in _PROTOBUF:
            return self._count(
                signal, _refusal(415, f"Content-Type {kind or 'none'}: send {_JSON} or {_PROTOBUF[0]}")
            )
        protobuf = kind in _PROTOBUF
        try:
            data = self._unzip(body, encoding.strip().lower())
            rows = decode(signal, data, protobuf)
        except _TooLarge as exc:
            return self._count(signal, _refusal(413, str(exc), close=True))
        except _Unsupported as exc:
            return self._count(signal, _refusal(415, str(exc)))
        except BadBody as exc:
            self._dead_letter(signal, str(exc), body, protobuf)
            return self._count(signal, _refusal(400, str(exc)))
        try:
            with self._lock:
                if self._client is None:
                    raise RuntimeError("the receiver is closed")
                stored = insert_otel(self._client, signal, rows)
        except Exception as exc:
            log.warning("OTLP %s: insert failed (%s); the exporter may retry", signal, str(exc)[:200])
            return self._count(signal, _refusal(503, "the store cannot take it now; retry"))
        self.stored[signal] += stored
        if self.metrics is not None:
            self.metrics.otlp_records.labels(signal).inc(stored)
        return self._count(signal, Answer(200, b"" if protobuf else b"{}"))

    def _unzip(self, body: bytes, encoding: str) -> bytes:
        if encoding in ("", "identity"):
            return body
        if encoding != "gzip":
            raise _Unsupported(f"Content-Encoding {encoding}: send gzip or none")
        inflater = zlib.decompressobj(wbits=31)
        try:
            data = inflater.decompress(body, self.max_bytes + 1)
        except zlib.error as exc:
            raise BadBody(f"not gzip: {exc}") from None
        if len(data) > self.max_bytes or inflater.unconsumed_tail:
            raise _TooLarge(f"over {self.max_bytes} bytes once unzipped (AGENTWATCH_OTLP_MAX_BYTES)")
        if not inflater.eof:
            raise BadBody("gzip body cut short")
        return data

    def _dead_letter(self, signal: str, reason: str, body: bytes, protobuf: bool) -> None:
        kept = body[:DEAD_LETTER_MAX_BYTES]
        text = b"base64:" + base64.b64encode(kept) if protobuf else kept
        try:
            with self._lock:
                if self._client is not None:
                    insert_dead_letters(self._client, [(f"otlp /v1/{signal}", 0, 0, reason, text)])
        except Exception as exc:
            log.warning("OTLP %s: the dead letter could not be stored either (%s)", signal, str(exc)[:200])
        log.warning("OTLP %s: refused a body: %s", signal, reason[:200])

    def _count(self, signal: str, answer: Answer) -> Answer:
        if self.metrics is not None:
            self.metrics.otlp_requests.labels(signal, str(answer.status)).inc()
        return answer


class _Server(Bounded, HTTPServer):
    door = "OTLP"
    log = log


class _TooLarge(Exception):
    pass


class _Unsupported(Exception):
    pass


def _signal(path: str) -> str | None:
    name = path.split("?", 1)[0].rstrip("/")
    for signal in SIGNALS:
        if name == f"/v1/{signal}":
            return signal
    return None


def _handler(receiver: OtlpReceiver) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"  # keep-alive, as the exporter asks
        server_version = "agentwatch-otlp"

        def do_POST(self) -> None:
            if not receiver.authorized(self.headers.get("Authorization", "")):
                self._send(_refusal(401, "a bearer token is required (AGENTWATCH_OTLP_TOKEN)", close=True))
                return
            length = self.headers.get("Content-Length")
            if length is None or not length.strip().isdigit():
                self._send(_refusal(411, "a Content-Length is required", close=True))
                return
            if int(length) > receiver.max_bytes:
                what = f"{int(length)} bytes is over {receiver.max_bytes} (AGENTWATCH_OTLP_MAX_BYTES)"
                answer = _refusal(413, what, close=True)
                self._send(receiver._count(_signal(self.path) or "unknown", answer))
                return
            body = self.rfile.read(int(length))
            if len(body) < int(length):
                # The client closed before its body was all here: nothing to answer, nothing to
                # keep (a dead letter of half a request would be noise).
                log.info("OTLP %s: the client left after %d of %s bytes", self.path[:100], len(body), length)
                self.close_connection = True
                return
            self._send(receiver.handle(self.path, self.headers.get("Content-Type", ""),
                                       self.headers.get("Content-Encoding", ""), body))  # fmt: skip

        def do_GET(self) -> None:
            self._send(_refusal(405 if _signal(self.path) else 404, "POST an OTLP request to /v1/<signal>"))

        def _send(self, answer: Answer) -> None:
            self.send_response(answer.status)
            is_json = answer.body.startswith(b"{")
            self.send_header("Content-Type", _JSON if is_json else _PROTOBUF[0])
            self.send_header("Content-Length", str(len(answer.body)))
            if answer.close:
                self.send_header("Connection", "close")
                self.close_connection = True
            self.end_headers()
            self.wfile.write(answer.body)

        def log_message(self, format: str, *args: Any) -> None:
            log.debug("OTLP %s", format % args)

    return Handler
