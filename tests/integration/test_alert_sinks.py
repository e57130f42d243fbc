"""The alert sinks against a real local HTTP server: what they send, when they retry, when they give up."""

from __future__ import annotations

import asyncio
import json
import logging
import socket
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from agentwatch.consumers.sinks import Sink, Sinks, slack_body, webhook_body

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
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers["Content-Length"]))
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


def test_webhook_and_slack_receive_the_summary_and_never_the_details(receiver_factory: Any) -> None:
    hook, slack = receiver_factory([200]), receiver_factory([200])
    env = {"AGENTWATCH_ALERT_WEBHOOK_URL": hook.url, "AGENTWATCH_ALERT_SLACK_URL": slack.url}
    sinks = Sinks.from_settings(env)
    deliver(sinks, ALERT)
    assert sinks.delivered == 2 and sinks.failed == 0
    [(_, body)] = hook.requests
    assert body == {k: v for k, v in ALERT.items() if k != "details"}
    [(_, text)] = slack.requests
    assert text == {"text": "[warning] loop builder: builder ran the same Bash call 8 times in a row"}
    for _, sent in hook.requests + slack.requests:
        assert "sk-secret" not in json.dumps(sent)


def test_a_resolved_alert_says_so_on_slack() -> None:
    assert slack_body({**ALERT, "state": "resolved"})["text"].startswith("[resolved] loop builder")
    assert webhook_body({"rule": "x", "details": {"a": 1}}) == {"rule": "x"}


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
            Sink("slack", f"http://127.0.0.1:{closed_port}/x", slack_body),
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
        Sinks.from_settings({"AGENTWATCH_ALERT_SLACK_URL": "https://example.invalid/x",
                             "AGENTWATCH_ALERT_SINK_TIMEOUT": "soon"})  # fmt: skip
