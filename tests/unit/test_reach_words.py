"""reach.unreachable: the line for a server that cannot be used depends on the failure, not on the
client that met it. The texts below are what nats-py (through bus.connect's reason chain), the
hook's own wire client (emitter/wire.py) and clickhouse-connect said for each failure against real
servers and the stand-ins of tests/e2e/test_reach_errors.py, which checks the whole path."""

from __future__ import annotations

import pytest

from agentwatch import reach

WHERE = "nats://alice:***@127.0.0.1:4222"

# failure -> (what one client said, what another said, the kind, the detail the line ends with)
SAME_FAILURE = {
    "credentials": (
        "Error: nats: 'Authorization Violation'",
        "BusError: nats://alice:***@127.0.0.1:4222 refused: 'Authorization Violation'",
        reach.CREDENTIALS,
        "(Authorization Violation)",
    ),
    "no server": (
        "ConnectionRefusedError: [Errno 111] Connect call failed ('127.0.0.1', 4222)",
        "BusError: cannot connect to nats://127.0.0.1:4222: [Errno 111] Connection refused",
        reach.ABSENT,
        "(connection refused)",
    ),
    "silent": (
        "TimeoutError; CancelledError",
        "BusError: nats://127.0.0.1:4222: timed out",
        reach.SILENT,
        "(timed out)",
    ),
    "tls to a plain server": (
        "SSLError: the server does not speak TLS (it greeted in clear, without tls_required)",
        "BusError: tls://127.0.0.1:4222: [SSL: WRONG_VERSION_NUMBER] wrong version number (_ssl.c:1006)",
        reach.TLS,
        "(the server does not speak TLS)",
    ),
    "untrusted certificate": (
        "SSLCertVerificationError: [SSL: CERTIFICATE_VERIFY_FAILED] certificate verify failed: "
        "self-signed certificate (_ssl.c:1006)",
        "BusError: tls://127.0.0.1:4222: [SSL: CERTIFICATE_VERIFY_FAILED] certificate verify failed: "
        "self-signed certificate (_ssl.c:1006)",
        reach.TLS,
        "(certificate verify failed: self-signed certificate)",
    ),
}


@pytest.mark.parametrize("failure", list(SAME_FAILURE))
def test_two_clients_meeting_one_failure_give_one_line(failure: str) -> None:
    one, other, kind, detail = SAME_FAILURE[failure]
    assert reach.problem_kind(one) == reach.problem_kind(other) == kind
    line = reach.unreachable("bus", WHERE, one)
    assert line == reach.unreachable("bus", WHERE, other)
    assert line.endswith(detail) and "AGENTWATCH_NATS_URL" in line


def test_the_four_lines_differ_and_name_the_setting() -> None:
    lines = {
        kind: reach.unreachable("clickhouse", "http://u:***@h:8123/db", one)
        for one, _, kind, _ in SAME_FAILURE.values()
    }
    assert len(set(lines.values())) == 4
    assert all("AGENTWATCH_CLICKHOUSE_URL" in line for line in lines.values())


@pytest.mark.parametrize(
    ("said", "kind", "detail"),
    [
        # clickhouse-connect, a server refusing the password (403 and ClickHouse's exception code)
        ("DatabaseError: Received ClickHouse exception, code: 516, server response: "
         "Code: 516. DB::Exception: alice: Authentication failed: password is incorrect "
         "(AUTHENTICATION_FAILED)",
         reach.CREDENTIALS, "ClickHouse code 516: Authentication failed"),
        ("DatabaseError: HTTP driver received HTTP status 401, server response: Unauthorized",
         reach.CREDENTIALS, "HTTP 401"),
        # urllib3 under clickhouse-connect: no server, a silent one, TLS spoken to a plain one
        ("OperationalError: Error HTTPConnectionPool(host='127.0.0.1', port=1): Max retries exceeded "
         "with url: /?query_id=0 (Caused by NewConnectionError(\"...: Failed to establish a new "
         "connection: [Errno 111] Connection refused\"))", reach.ABSENT, "connection refused"),
        ("OperationalError: Error HTTPConnectionPool(host='127.0.0.1', port=1): Read timed out. "
         "(read timeout=1)",
         reach.SILENT, "timed out"),
        # OpenSSL after 3.0 says a plain server's greeting otherwise
        ("SSLError: [SSL] record layer failure (_ssl.c:1000)", reach.TLS, "the server does not speak TLS"),
        ("SSLCertVerificationError: [SSL: CERTIFICATE_VERIFY_FAILED] certificate verify failed: IP address "
         "mismatch, certificate is not valid for '127.0.0.1'. (_ssl.c:1006)",
         reach.TLS, "certificate verify failed: IP address mismatch"),
        ("OSError: [Errno -2] Name or service not known", reach.ABSENT, "unknown host"),
        # A host name is no verdict: a tls:// URL in a wire client's message is not a TLS failure.
        ("BusError: cannot connect to tls://127.0.0.1:4222: [Errno 111] Connection refused",
         reach.ABSENT, "connection refused"),
    ],
)  # fmt: skip
def test_what_clients_say_is_told_apart(said: str, kind: str, detail: str) -> None:
    assert reach.problem_kind(said) == kind
    assert reach.unreachable("clickhouse", "h", said).endswith(f"({detail})")


def test_anything_else_keeps_the_clients_words_and_the_setting() -> None:
    line = reach.unreachable("bus", WHERE, "Error: nats: unexpected")
    assert reach.problem_kind("Error: nats: unexpected") == ""
    assert (
        line == f"cannot use the NATS server at {WHERE}: Error: nats: unexpected; check AGENTWATCH_NATS_URL"
    )
