"""Why a bus or a ClickHouse server cannot be reached, in one line a person can act on.

The same words whichever client met the failure (nats-py, the hook's own wire client,
clickhouse-connect, Python's ssl) and whichever command or screen shows it. Standard library
only; off the hook's path (the hook says nothing to a person).
"""

from __future__ import annotations

from agentwatch.config import LOCAL_HOSTS, login_dir

# --- why a server cannot be reached -------------------------------------------------------------

# The four ways reaching the bus or a ClickHouse server fails. Each is told by words in what the
# client reported (its message and those of the exceptions behind it: nats-py's, the hook's own
# wire client's, clickhouse-connect's, Python's ssl), and each set of words has a short detail
# of its own, so the one line is the same whichever client met the failure and whichever command
# or screen shows it. An empty detail keeps the client's own words from the match to the end of
# their clause ("certificate verify failed: self-signed certificate").
CREDENTIALS, ABSENT, SILENT, TLS = "credentials", "absent", "silent", "tls"
NO_TLS = "the server does not speak TLS"
CLOSED_IN_HANDSHAKE = "the server closed the connection during the TLS handshake"
_PROBLEMS: tuple[tuple[str, tuple[tuple[str, str], ...]], ...] = (
    (CREDENTIALS, (
        ("authorization violation", "Authorization Violation"),  # nats-server, any client
        ("authentication expired", "User Authentication Expired"),
        ("code: 516", "ClickHouse code 516: Authentication failed"),
        ("authentication failed", "ClickHouse code 516: Authentication failed"),
        ("authentication_failed", "ClickHouse code 516: Authentication failed"),
        ("code: 194", "ClickHouse code 194: a password is required"),
        ("required_password", "ClickHouse code 194: a password is required"),
        ("code: 192", "ClickHouse code 192: unknown user"),
        ("code: 193", "ClickHouse code 193: wrong password"),
        ("http status 401", "HTTP 401"),
        ("401 unauthorized", "HTTP 401"),
        ("http status 403", "HTTP 403"),
        ("403 forbidden", "HTTP 403"),
    )),
    (TLS, (
        ("does not speak tls", NO_TLS),
        ("does not require tls", "the server offers TLS but does not require it: nats-py would not use it"),
        # A TLS client reading a plain server's greeting, as OpenSSL 3.0 and later versions say it.
        ("wrong version number", NO_TLS),
        ("record layer failure", NO_TLS),
        ("packet length too long", NO_TLS),
        ("certificate verify failed", ""),
        ("tlsv1 alert", ""),
        ("sslv3 alert", ""),
        ("[ssl", ""),
        ("ssleoferror", CLOSED_IN_HANDSHAKE),
        ("eof occurred in violation of protocol", CLOSED_IN_HANDSHAKE),
        ("_ssl.c", "the TLS handshake failed"),
        ("sslerror", "the TLS handshake failed"),
    )),
    (ABSENT, (
        ("connection refused", "connection refused"),
        ("connectionrefusederror", "connection refused"),
        ("errno 111", "connection refused"),
        ("errno 61", "connection refused"),
        ("name or service not known", "unknown host"),
        ("temporary failure in name resolution", "unknown host"),
        ("nodename nor servname", "unknown host"),
        ("no route to host", "no route to host"),
        ("network is unreachable", "network is unreachable"),
        ("cannot assign requested address", "cannot assign requested address"),
        ("no servers available", "no server available"),
    )),
    (SILENT, (
        ("timed out", "timed out"),
        ("timeouterror", "timed out"),
        ("timeout", "timed out"),
        ("deadline", "timed out"),
        ("did not answer", "timed out"),
    )),
)  # fmt: skip
_CLAUSE_ENDS = (" (", ")", ";", "'", '"', ",", " for url")


def _problem(reason: str) -> tuple[str, str]:
    """(kind, detail) of a client's error text; ('', '') when none of the four."""
    text = reason.lower()
    for kind, words in _PROBLEMS:
        for word, detail in words:
            at = text.find(word)
            if at < 0:
                continue
            if detail:
                return kind, detail
            # The client's own words, from the match to the end of their clause.
            clause = reason[at:]
            ends = [i for i in (clause.find(end) for end in _CLAUSE_ENDS) if i > 0]
            return kind, clause[: min(ends)].strip(" :]") if ends else clause.strip(" :]")
    return "", ""


def problem_kind(reason: str) -> str:
    """credentials, tls, absent or silent for a client's error text; '' when none of them."""
    return _problem(reason)[0]


def reason_chain(exc: BaseException) -> str:
    """The messages of an exception and of those behind it (`from`, or raised while handling)."""
    parts: list[str] = []
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        text = " ".join(str(current).split())
        parts.append(f"{type(current).__name__}: {text}" if text else type(current).__name__)
        current = current.__cause__ or current.__context__
    return "; ".join(parts)


def unreachable(system: str, where: str, reason: str) -> str:
    """One line for a bus or ClickHouse server that cannot be used, saying which setting to fix.

    `system` is "bus" or "clickhouse"; `where` the masked address; `reason` what the client said.
    The line ends with a short detail that depends on the kind of failure only, never on which
    client met it, so every command and the dashboard say the same line for the same failure."""
    bus = system == "bus"
    setting = "AGENTWATCH_NATS_URL" if bus else "AGENTWATCH_CLICKHOUSE_URL"
    name = "the NATS server" if bus else "the ClickHouse server"
    kind, detail = _problem(reason)
    if kind == CREDENTIALS:
        host = where.rpartition("://")[2].rpartition(":")[0].strip("[]")
        if bus and "@" not in where and host in LOCAL_HOSTS:
            # A local bus without credentials in the URL: `up`'s, which takes the logins it wrote.
            logins = login_dir()
            return (
                f"{name} at {where} refused the login: a bus `agentwatch up` started takes the logins "
                f"it wrote in {logins}; run this with the AGENTWATCH_DATA_DIR of that `up`, or give a "
                f"user and password in AGENTWATCH_NATS_URL ({detail})"
            )
        extra = " (or AGENTWATCH_NATS_CREDS / AGENTWATCH_NATS_NKEY)" if bus else ""
        fix = f"fix the user and password in {setting}{extra}"
        return f"{name} at {where} refused the credentials: {fix} ({detail})"
    if kind == TLS:
        files = (
            "AGENTWATCH_NATS_CA, AGENTWATCH_NATS_CERT, AGENTWATCH_NATS_KEY"
            if bus
            else "the server's certificate"
        )
        scheme = "tls:// or nats://" if bus else "https:// or http://"
        check = f"check {files} and the scheme ({scheme}) of {setting}"
        return f"TLS with {name} at {where} failed: {check} ({detail})"
    if kind == ABSENT:
        start = (
            "start one (`agentwatch up` does, for a local URL without credentials)"
            if bus
            else "start ClickHouse there"
        )
        return f"no server answers at {where}: {start}, or point {setting} at a running one ({detail})"
    if kind == SILENT:
        return (
            f"the server at {where} took the connection but sent nothing back: check that {setting} names "
            f"{name}'s host and port, and that it is not overloaded ({detail})"
        )
    short = reason if len(reason) <= 200 else reason[:197] + "..."
    return f"cannot use {name} at {where}: {short}; check {setting}"
