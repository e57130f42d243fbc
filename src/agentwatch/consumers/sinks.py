"""Alert sinks: the generic JSON webhook, signed, and any chat tool, pager or mail through Apprise.

Every alert change the watchdog publishes on the bus is also offered here. Delivery never holds up
the rule engine: `send` queues a background task per sink and returns. Each delivery is one
request with a timeout, retried with backoff while it fails (the webhook: when the receiver answers
5xx or 429 or cannot be reached; an Apprise URL: any failure, since Apprise reports no status), and
given up (one log line) after the last try or on any other 4xx of the webhook.

- `AGENTWATCH_ALERT_WEBHOOK_URL`: POSTs the alert's public fields as JSON. With
  `AGENTWATCH_ALERT_WEBHOOK_SECRET` each request carries `X-Agentwatch-Timestamp` and
  `X-Agentwatch-Signature: sha256=<hex HMAC-SHA256 of "<timestamp>.<body>">`, so a receiver that
  knows the secret can trust it and refuse replays. Written with the standard library's
  `urllib.request`, run in worker threads.
- `AGENTWATCH_ALERT_URLS`: Apprise URLs (slack://, discord://, msteams://, tgram://, pagerduty://,
  ntfy://, mailto://, json://, form:// and a hundred more), comma- or space-separated; each is one
  sink. A line of title (`[severity] rule agent`) and the summary.

What leaves the machine is the alert's identity and its one-line summary: never `details` (they may
quote a tool's input). No log line holds a sink's URL beyond its scheme and host (a webhook's path,
an Apprise URL's tokens and passwords are secrets), nor the signing secret; Apprise's own logger is
kept at WARNING, whose lines name no URL (its DEBUG lines print them whole).
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import json
import logging
import os
import re
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import Any

log = logging.getLogger("agentwatch.alerts.sinks")

# The alert fields a sink may carry: identity, state and the summary. `details` stays on the bus.
FIELDS = ("id", "rule", "severity", "state", "agent", "team", "session_id", "host", "summary", "since", "at")
MAX_PENDING = 256  # deliveries queued at once; beyond that new ones are dropped, each logged
SIGNATURE_HEADER = "X-Agentwatch-Signature"
TIMESTAMP_HEADER = "X-Agentwatch-Timestamp"


def webhook_body(alert: Mapping[str, Any]) -> dict[str, Any]:
    """The generic webhook's JSON: the alert's public fields."""
    return {k: alert[k] for k in FIELDS if k in alert}


def headline(alert: Mapping[str, Any]) -> str:
    """`[warning] loop builder`: the state (or severity while firing), the rule and who."""
    state = "resolved" if alert.get("state") == "resolved" else str(alert.get("severity", "alert"))
    who = alert.get("agent") or alert.get("host") or ""
    return f"[{state}] {alert.get('rule', '?')}" + (f" {who}" if who else "")


def signature(secret: str, timestamp: str, body: bytes) -> str:
    """The signature header's value: sha256=<hex HMAC-SHA256 of `<timestamp>.<body>`>."""
    mac = hmac.new(secret.encode(), timestamp.encode() + b"." + body, hashlib.sha256)
    return "sha256=" + mac.hexdigest()


def split_urls(text: str) -> list[str]:
    """URLs separated by commas or spaces; a comma inside one (`?to=a,b`) stays in it."""
    return [u for u in _URL_GAP.split(text.strip()) if u]


_URL_GAP = re.compile(r"[\s,]+(?=[A-Za-z][A-Za-z0-9+.-]*://)|\s+")


def _where(url: str) -> str:
    """Scheme and host of a URL, for log lines: its path, query and user part carry its secrets."""
    scheme, _, rest = url.partition("://")
    host = rest.split("/", 1)[0].split("?", 1)[0].rpartition("@")[2]
    return f"{scheme}://{host}"


class Sink:
    """The generic JSON webhook: a name for log lines, its URL, how an alert becomes its body, and
    the secret that signs it ('' for none)."""

    retry_any_failure = False

    def __init__(
        self, name: str, url: str, body: Callable[[Mapping[str, Any]], dict[str, Any]], secret: str = ""
    ) -> None:
        if not url.startswith(("http://", "https://")):
            raise ValueError(f"{name} sink: the URL must start with http:// or https:// (got {_where(url)})")
        self.name = name
        self.url = url
        self.body = body
        self._secret = secret

    @property
    def where(self) -> str:
        return _where(self.url)

    def __repr__(self) -> str:
        return f"Sink({self.name}, {self.where})"

    def deliver(self, alert: Mapping[str, Any], timeout: float) -> tuple[int, str]:
        """One POST: (HTTP status, 0 for no answer; a short reason without the URL)."""
        data = json.dumps(self.body(alert), ensure_ascii=False).encode()
        headers = {"Content-Type": "application/json"}
        if self._secret:
            stamp = str(int(time.time()))
            headers[TIMESTAMP_HEADER] = stamp
            headers[SIGNATURE_HEADER] = signature(self._secret, stamp, data)
        return _post(self.url, data, headers, timeout)


class AppriseSink:
    """One Apprise URL: any service Apprise speaks to."""

    retry_any_failure = True  # Apprise says only whether it worked

    def __init__(self, url: str) -> None:
        import apprise

        plugin = apprise.Apprise.instantiate(url)
        if plugin is None:
            raise ValueError(f"AGENTWATCH_ALERT_URLS: Apprise does not know the URL {_where(url)}")
        self.plugin = plugin
        self.name = f"apprise {url.partition('://')[0]}"
        self.url = url

    @property
    def where(self) -> str:
        return _where(self.url)

    def __repr__(self) -> str:
        return f"AppriseSink({self.where})"

    def deliver(self, alert: Mapping[str, Any], timeout: float) -> tuple[int, str]:
        from apprise import NotifyType

        kinds = {"critical": NotifyType.FAILURE, "warning": NotifyType.WARNING}
        kind = NotifyType.SUCCESS if alert.get("state") == "resolved" else kinds.get(
            str(alert.get("severity")), NotifyType.INFO
        )  # fmt: skip
        self.plugin.socket_connect_timeout = self.plugin.socket_read_timeout = timeout
        try:
            sent = self.plugin.notify(
                body=str(alert.get("summary", "")), title=headline(alert), notify_type=kind
            )
        except Exception as exc:  # a plugin's own failure: one log line, not the watchdog's
            return 0, type(exc).__name__
        return (200, "sent") if sent else (0, "Apprise could not deliver it (its warning says why)")


AnySink = Sink | AppriseSink


class Sinks:
    """The configured sinks, delivering in the background."""

    def __init__(
        self,
        sinks: list[AnySink],
        *,
        timeout: float = 5.0,
        attempts: int = 4,
        backoff: float = 0.5,
    ) -> None:
        self.sinks = sinks
        self.timeout = timeout
        self.attempts = max(1, attempts)
        self.backoff = backoff
        self._tasks: set[asyncio.Task[bool]] = set()
        # Its own threads, not the loop's default executor: a POST stuck until its timeout must not hold
        # up the service's shutdown (asyncio.run waits for the default executor's threads).
        self._pool = ThreadPoolExecutor(max_workers=4, thread_name_prefix="alert-sink")
        self.delivered = 0
        self.failed = 0
        self.dropped = 0

    @classmethod
    def from_settings(cls, environ: Mapping[str, str] = os.environ) -> Sinks:
        """The sinks AGENTWATCH_ALERT_WEBHOOK_URL and AGENTWATCH_ALERT_URLS name (either, both, none)."""
        sinks: list[AnySink] = []
        if url := environ.get("AGENTWATCH_ALERT_WEBHOOK_URL", "").strip():
            secret = environ.get("AGENTWATCH_ALERT_WEBHOOK_SECRET", "").strip()
            sinks.append(Sink("webhook", url, webhook_body, secret))
        urls = " ".join(
            environ.get(name, "") for name in ("AGENTWATCH_ALERT_URLS", "AGENTWATCH_ALERT_SLACK_URL")
        )
        if urls.strip():
            logging.getLogger("apprise").setLevel(logging.WARNING)  # its DEBUG lines print URLs whole
            sinks.extend(AppriseSink(u) for u in split_urls(urls))
        timeout = _number(environ, "AGENTWATCH_ALERT_SINK_TIMEOUT", 5.0)
        attempts = int(_number(environ, "AGENTWATCH_ALERT_SINK_ATTEMPTS", 4))
        return cls(sinks, timeout=timeout, attempts=attempts)

    def __bool__(self) -> bool:
        return bool(self.sinks)

    def send(self, alert: Mapping[str, Any]) -> None:
        """Queue the alert for every sink and return at once (call it from the event loop)."""
        for sink in self.sinks:
            if len(self._tasks) >= MAX_PENDING:
                self.dropped += 1
                log.warning("alert sink %s: %d deliveries pending, dropped alert %s", sink.name,
                            len(self._tasks), alert.get("id", "?"))  # fmt: skip
                continue
            task = asyncio.get_running_loop().create_task(self._deliver(sink, dict(alert)))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    async def aclose(self, wait: float = 5.0) -> None:
        """Give queued deliveries up to `wait` seconds, then cancel what is left."""
        if not self._tasks:
            self._pool.shutdown(wait=False)
            return
        _done, pending = await asyncio.wait(set(self._tasks), timeout=wait)
        for task in pending:
            task.cancel()
        if pending:
            self.failed += len(pending)
            log.warning("alert sinks: %d deliveries still pending at shutdown, given up", len(pending))
            await asyncio.gather(*pending, return_exceptions=True)
        self._pool.shutdown(wait=False, cancel_futures=True)

    async def _deliver(self, sink: AnySink, alert: dict[str, Any]) -> bool:
        why = ""
        for attempt in range(1, self.attempts + 1):
            loop = asyncio.get_running_loop()
            status, why = await loop.run_in_executor(self._pool, sink.deliver, alert, self.timeout)
            if 200 <= status < 300:
                self.delivered += 1
                return True
            if not (sink.retry_any_failure or _retryable(status)) or attempt == self.attempts:
                break
            await asyncio.sleep(self.backoff * 2 ** (attempt - 1))
        self.failed += 1
        log.warning("alert sink %s (%s): gave up on alert %s after %d tries: %s", sink.name,
                    sink.where, alert.get("id", "?"), attempt, why)  # fmt: skip
        return False


def _retryable(status: int) -> bool:
    """0 (no answer), 429 and 5xx are worth another try; any other answer will not change."""
    return status in {0, 429} or status >= 500


def _post(url: str, data: bytes, headers: dict[str, str], timeout: float) -> tuple[int, str]:
    """POST; the status (0 when there was no HTTP answer) and a short reason without the URL."""
    req = urllib.request.Request(url, data=data, method="POST", headers=headers)  # noqa: S310 (Sink checks the scheme)
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:  # noqa: S310 (Sink checks the scheme)
            resp.read(65536)
            return int(resp.status), f"HTTP {resp.status}"
    except urllib.error.HTTPError as exc:
        return int(exc.code), f"HTTP {exc.code}"
    except (urllib.error.URLError, OSError, ValueError) as exc:
        reason = exc.reason if isinstance(exc, urllib.error.URLError) else exc
        return 0, type(reason).__name__ if not str(reason) else str(reason).replace(url, _where(url))


def _number(environ: Mapping[str, str], name: str, default: float) -> float:
    raw = environ.get(name, "").strip()
    if not raw:
        return default
    try:
        value = float(raw)
    except ValueError:
        raise ValueError(f"{name}={raw!r} is not a number") from None
    if value <= 0:
        raise ValueError(f"{name}={raw!r} must be above 0")
    return value
