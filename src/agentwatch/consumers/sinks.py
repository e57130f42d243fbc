"""Alert sinks: a generic JSON webhook and a Slack-compatible incoming webhook.

Every alert change the watchdog publishes on the bus is also offered here. Delivery never holds up
the rule engine: `send` queues a background task per sink and returns. Each delivery is one HTTP
POST with a timeout, retried with backoff when the receiver answers 5xx or 429 or cannot be
reached, and given up (one log line) after the last try or on any other 4xx.

What leaves the machine is the alert's identity and its one-line summary: never `details` (they may
quote a tool's input), and never the webhook URL in a log line (a Slack URL is itself a secret).

The POST is written with the standard library's `urllib.request`, run in worker threads: one small
request per alert change needs no HTTP client dependency in the collector's install.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import Any

log = logging.getLogger("agentwatch.alerts.sinks")

# The alert fields a sink may carry: identity, state and the summary. `details` stays on the bus.
FIELDS = ("id", "rule", "severity", "state", "agent", "team", "session_id", "host", "summary", "since", "at")
MAX_PENDING = 256  # deliveries queued at once; beyond that new ones are dropped, each logged


def webhook_body(alert: Mapping[str, Any]) -> dict[str, Any]:
    """The generic webhook's JSON: the alert's public fields."""
    return {k: alert[k] for k in FIELDS if k in alert}


def slack_body(alert: Mapping[str, Any]) -> dict[str, Any]:
    """A Slack incoming webhook's JSON: one line of text."""
    state = "resolved" if alert.get("state") == "resolved" else str(alert.get("severity", "alert"))
    who = alert.get("agent") or alert.get("host") or ""
    head = f"[{state}] {alert.get('rule', '?')}" + (f" {who}" if who else "")
    return {"text": f"{head}: {alert.get('summary', '')}"}


def _where(url: str) -> str:
    """Scheme and host of a URL, for log lines: the path and query of a webhook URL carry its secret."""
    scheme, _, rest = url.partition("://")
    host = rest.split("/", 1)[0].rpartition("@")[2]
    return f"{scheme}://{host}"


class Sink:
    """One receiver: a name for log lines, its URL, and how an alert becomes its request body."""

    def __init__(self, name: str, url: str, body: Callable[[Mapping[str, Any]], dict[str, Any]]) -> None:
        if not url.startswith(("http://", "https://")):
            raise ValueError(f"{name} sink: the URL must start with http:// or https:// (got {_where(url)})")
        self.name = name
        self.url = url
        self.body = body

    def __repr__(self) -> str:
        return f"Sink({self.name}, {_where(self.url)})"


class Sinks:
    """The configured sinks, delivering in the background."""

    def __init__(
        self,
        sinks: list[Sink],
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
        """The sinks AGENTWATCH_ALERT_WEBHOOK_URL and AGENTWATCH_ALERT_SLACK_URL name (either, both, none)."""
        sinks = []
        if url := environ.get("AGENTWATCH_ALERT_WEBHOOK_URL", "").strip():
            sinks.append(Sink("webhook", url, webhook_body))
        if url := environ.get("AGENTWATCH_ALERT_SLACK_URL", "").strip():
            sinks.append(Sink("slack", url, slack_body))
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

    async def _deliver(self, sink: Sink, alert: dict[str, Any]) -> bool:
        data = json.dumps(sink.body(alert), ensure_ascii=False).encode()
        why = ""
        for attempt in range(1, self.attempts + 1):
            loop = asyncio.get_running_loop()
            status, why = await loop.run_in_executor(self._pool, _post, sink.url, data, self.timeout)
            if 200 <= status < 300:
                self.delivered += 1
                return True
            if not _retryable(status) or attempt == self.attempts:
                break
            await asyncio.sleep(self.backoff * 2 ** (attempt - 1))
        self.failed += 1
        log.warning("alert sink %s (%s): gave up on alert %s after %d tries: %s", sink.name,
                    _where(sink.url), alert.get("id", "?"), attempt, why)  # fmt: skip
        return False


def _retryable(status: int) -> bool:
    """0 (no answer), 429 and 5xx are worth another try; any other answer will not change."""
    return status in {0, 429} or status >= 500


def _post(url: str, data: bytes, timeout: float) -> tuple[int, str]:
    """POST JSON; the status (0 when there was no HTTP answer) and a short reason without the URL."""
    headers = {"Content-Type": "application/json"}
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
