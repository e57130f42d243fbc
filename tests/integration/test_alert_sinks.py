"""The alert sinks against a real local HTTP server: what they send, when they retry, when they give up.
The generic webhook is signed when it has a secret; Apprise URLs (its json:// and form:// schemes here)
reach the same receiver; no log line ever holds a URL's secret part or the signing secret."""

from __future__ import annotations

import asyncio
import json
import logging
import socket
import threading
import time
import urllib.parse
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from agentwatch.consumers.sinks import (
    SIGNATURE_HEADER,
    TIMESTAMP_HEADER,
    AppriseSink,
    Sink,
    Sinks,
    headline,
    signature,
    webhook_body,
)

ALERT: dict[str, Any] = {
    "id": "a1b2",
    "rule": "loop",
    "severity": "warning",
    "state": "firing",
    "agent": "builder",
    "team": "alpha",
    "session_id": "s-1",
    "host": "laptop",
    "summary": "builder ran the same Bash call 8 times in a row",
    "details": {"tool_input": {"command": "curl -H 'Authorization: Bearer sk-secret' ..."}},
    "since": "2026-11-23T10:00:00Z",
    "at": "2026-11-23T10:04:00Z",
}


class Receiver:
    """An HTTP server that records each POST and answers from a script of status codes."""

    def __init__(self, statuses: list[int], delay: float = 0.0) -> None:
        self.statuses = statuses
        self.delay = delay
        self.requests: list[tuple[str, dict[str, Any]]] = []
        self.headers: list[dict[str, str]] = []
        self.raw: list[bytes] = []
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers["Content-Length"]))
                receiver.raw.append(body)
                receiver.headers.append(dict(self.headers.items()))
                if self.headers.get("Content-Type", "").startswith("application/x-www-form-urlencoded"):
                    form = urllib.parse.parse_qs(body.decode())
                    receiver.requests.append((self.path, {k: v[0] for k, v in form.items()}))
                else:
                    receiver.requests.append((self.path, json.loads(body)))
                time.sleep(receiver.delay)
                n = len(receiver.requests) - 1
                status = receiver.statuses[min(n, len(receiver.statuses) - 1)]
                try:
                    self.send_response(status)
                    self.send_header("Content-Length", "2")
                    self.end_headers()
                    self.wfile.write(b"ok")
                except OSError:  # the sink timed out and hung up first
                    pass

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hooks/T000/SECRETPATH"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def receiver_factory() -> Iterator[Any]:
    made: list[Receiver] = []

    def make(statuses: list[int], delay: float = 0.0) -> Receiver:
        made.append(Receiver(statuses, delay))
        return made[-1]

    yield make
    for r in made:
        r.close()


def deliver(sinks: Sinks, *alerts: dict[str, Any], wait: float = 10.0) -> None:
    async def run() -> None:
        for alert in alerts:
            sinks.send(alert)
        await sinks.aclose(wait=wait)

    asyncio.run(run())


def apprise_url(receiver: Any, scheme: str = "json") -> str:
    """The receiver as an Apprise URL (json:// posts JSON, form:// a form), a password and a
    secret path in it."""
    host_port, path = receiver.url.removeprefix("http://").split("/", 1)
    return f"{scheme}://bot:PASSWORD-S3CRET@{host_port}/{path}"


def test_the_webhook_and_apprise_receive_the_summary_and_never_the_details(receiver_factory: Any) -> None:
    hook, chat, form = receiver_factory([200]), receiver_factory([200]), receiver_factory([200])
    env = {
        "AGENTWATCH_ALERT_WEBHOOK_URL": hook.url,
        "AGENTWATCH_ALERT_URLS": f"{apprise_url(chat)}, {apprise_url(form, 'form')}",
    }
    sinks = Sinks.from_settings(env)
    assert [type(s).__name__ for s in sinks.sinks] == ["Sink", "AppriseSink", "AppriseSink"]
    deliver(sinks, ALERT)
    assert sinks.delivered == 3 and sinks.failed == 0
    [(_, body)] = hook.requests
    assert body == {k: v for k, v in ALERT.items() if k != "details"}
    assert SIGNATURE_HEADER not in hook.headers[0], "no secret, no signature"
    for receiver in (chat, form):
        [(path, sent)] = receiver.requests
        assert path.endswith("/SECRETPATH")
        assert sent["title"] == "[warning] loop builder" and sent["type"] == "warning"
        assert sent["message"] == "builder ran the same Bash call 8 times in a row"
        assert receiver.headers[0]["Authorization"].startswith("Basic ")
    for _, sent in hook.requests + chat.requests + form.requests:
        assert "sk-secret" not in json.dumps(sent)


def test_the_webhook_is_signed_so_a_receiver_can_trust_it(receiver_factory: Any) -> None:
    hook = receiver_factory([200])
    env = {"AGENTWATCH_ALERT_WEBHOOK_URL": hook.url, "AGENTWATCH_ALERT_WEBHOOK_SECRET": "whsec-42"}
    deliver(Sinks.from_settings(env), ALERT)
    [headers], [raw] = hook.headers, hook.raw
    stamp = headers[TIMESTAMP_HEADER]
    assert abs(int(stamp) - time.time()) < 60
    assert headers[SIGNATURE_HEADER] == signature("whsec-42", stamp, raw)
    assert headers[SIGNATURE_HEADER] != signature("another", stamp, raw)
    assert headers[SIGNATURE_HEADER] != signature("whsec-42", str(int(stamp) + 1), raw), (
        "a replay is told apart"
    )


def test_a_resolved_alert_says_so() -> None:
    assert headline({**ALERT, "state": "resolved"}) == "[resolved] loop builder"
    assert webhook_body({"rule": "x", "details": {"a": 1}}) == {"rule": "x"}


def test_apprise_is_retried_on_500_and_never_logs_a_secret(
    receiver_factory: Any, caplog: pytest.LogCaptureFixture
) -> None:
    flaky, broken = receiver_factory([500, 500, 200]), receiver_factory([500])
    sinks = Sinks(
        [AppriseSink(apprise_url(flaky)), AppriseSink(apprise_url(broken))], attempts=3, backoff=0.05
    )
    with caplog.at_level(logging.DEBUG):
        deliver(sinks, ALERT)
    assert len(flaky.requests) == 3 and len(broken.requests) == 3
    assert sinks.delivered == 1 and sinks.failed == 1
    assert "gave up on alert a1b2 after 3 tries" in caplog.text
    assert "error=500" in caplog.text, "Apprise's own warning says why"
    for secret in ("PASSWORD-S3CRET", "SECRETPATH", "T000"):
        assert secret not in caplog.text


def test_a_500_is_retried_until_the_receiver_accepts(receiver_factory: Any) -> None:
    hook = receiver_factory([500, 503, 200])
    sinks = Sinks([Sink("webhook", hook.url, webhook_body)], backoff=0.05)
    deliver(sinks, ALERT)
    assert len(hook.requests) == 3
    assert sinks.delivered == 1 and sinks.failed == 0


def test_a_receiver_that_always_fails_is_given_up_and_logged_without_its_url(
    receiver_factory: Any, caplog: pytest.LogCaptureFixture
) -> None:
    hook = receiver_factory([500])
    sinks = Sinks([Sink("webhook", hook.url, webhook_body)], attempts=3, backoff=0.05)
    with caplog.at_level(logging.WARNING, logger="agentwatch.alerts.sinks"):
        deliver(sinks, ALERT)
    assert len(hook.requests) == 3
    assert sinks.delivered == 0 and sinks.failed == 1
    assert "gave up on alert a1b2 after 3 tries: HTTP 500" in caplog.text
    assert "SECRETPATH" not in caplog.text


def test_a_client_error_is_not_retried(receiver_factory: Any) -> None:
    hook = receiver_factory([404])
    sinks = Sinks([Sink("webhook", hook.url, webhook_body)], attempts=4, backoff=0.05)
    deliver(sinks, ALERT)
    assert len(hook.requests) == 1 and sinks.failed == 1


def test_a_slow_receiver_times_out_and_an_absent_one_is_given_up(receiver_factory: Any) -> None:
    slow = receiver_factory([200], delay=2.0)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        closed_port = s.getsockname()[1]
    sinks = Sinks(
        [
            Sink("webhook", slow.url, webhook_body),
            AppriseSink(f"json://127.0.0.1:{closed_port}/x"),
        ],
        timeout=0.3,
        attempts=2,
        backoff=0.05,
    )
    started = time.monotonic()
    deliver(sinks, ALERT)
    assert time.monotonic() - started < 5.0
    assert sinks.delivered == 0 and sinks.failed == 2
    assert len(slow.requests) == 2


def test_shutdown_does_not_wait_past_its_limit(receiver_factory: Any) -> None:
    slow = receiver_factory([200], delay=3.0)
    sinks = Sinks([Sink("webhook", slow.url, webhook_body)], timeout=10.0)
    started = time.monotonic()
    deliver(sinks, ALERT, wait=0.3)
    assert time.monotonic() - started < 2.5
    assert sinks.failed == 1 and sinks.delivered == 0


def test_settings_are_checked() -> None:
    assert not Sinks.from_settings({})
    with pytest.raises(ValueError, match="must start with http"):
        Sinks.from_settings({"AGENTWATCH_ALERT_WEBHOOK_URL": "ftp://example.invalid/x"})
    with pytest.raises(ValueError, match="AGENTWATCH_ALERT_SINK_TIMEOUT='soon' is not a number"):
        Sinks.from_settings({"AGENTWATCH_ALERT_URLS": "json://example.invalid/x",
                             "AGENTWATCH_ALERT_SINK_TIMEOUT": "soon"})  # fmt: skip
    with pytest.raises(ValueError, match=r"Apprise does not know the URL nosuch://example\.invalid$"):
        Sinks.from_settings({"AGENTWATCH_ALERT_URLS": "nosuch://example.invalid/token-S3CRET"})
    slack = Sinks.from_settings({"AGENTWATCH_ALERT_URLS": "https://hooks.slack.com/services/T0/B0/XYZ"})
    assert [s.name for s in slack.sinks] == ["apprise https"], "Slack's own webhook URL, as Slack gives it"
