"""Every setting agentwatch reads from the environment, declared once; bus and store URLs and
how they are shown to a person.

Standard library only: the hook reads its configuration through this module, so it imports
nothing and builds nothing costly at import time (no dataclasses, no enum, no re, and not even
`os`, whose import builds the collections ABCs: a tenth of the interpreter's own start-up; the
`posix` functions behind it are built in, and `os` is imported only off the hook's path).
Each `AGENTWATCH_*` / `GENIE_*` variable the code reads is a `Setting` in SETTINGS; a test keeps
docs/configuration.md's tables and the code's reads in step with it.
"""

from __future__ import annotations

import posix
import sys

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Any

DEFAULT_NATS_URL = "nats://127.0.0.1:4222"
DEFAULT_NATS_PORT = 4222
LOCAL_HOSTS = ("127.0.0.1", "localhost", "::1")  # the hosts `agentwatch up` starts its bus on
DEFAULT_DEADLINE_MS = 400
DEFAULT_CONNECT_TIMEOUT = 5
TRUTHY = frozenset({"1", "true", "yes", "on"})
MASK = "***"


class Setting:
    """One environment variable: its name, its default as a person reads it, and what it does."""

    __slots__ = ("default", "doc", "name", "side")

    def __init__(self, name: str, default: str, side: str, doc: str) -> None:
        self.name = name
        self.default = default
        self.side = side  # hook, collector, dashboard, or all
        self.doc = doc

    def get(self, environ: Mapping[str, str]) -> str:
        """The variable's value, stripped; '' when unset."""
        return environ.get(self.name, "").strip()


SETTINGS: tuple[Setting, ...] = (
    Setting("AGENTWATCH_NATS_URL", "GENIE_NATS_URL, else nats://127.0.0.1:4222", "all",
            "the bus: nats:// or tls:// URLs, comma-separated for a cluster"),
    Setting("GENIE_NATS_URL", "unset", "all",
            "genie's name for the bus, used when AGENTWATCH_NATS_URL is unset"),
    Setting("AGENTWATCH_NATS_CA", "unset", "all", "CA file for tls:// buses with a private CA"),
    Setting("AGENTWATCH_NATS_CERT", "unset", "all", "client certificate file for TLS client auth"),
    Setting("AGENTWATCH_NATS_KEY", "unset", "all", "client key file for AGENTWATCH_NATS_CERT"),
    Setting("AGENTWATCH_NATS_NKEY", "unset", "all", "NKEY seed file (the hook falls back to nats-py for it)"),
    Setting("AGENTWATCH_NATS_CREDS", "unset", "all", "creds file (the hook falls back to nats-py for it)"),
    Setting("AGENTWATCH_DATA_DIR", "$XDG_DATA_HOME/agentwatch, else ~/.local/share/agentwatch", "all",
            "spool, crash log, embedded ClickHouse and NATS data"),
    Setting("AGENTWATCH_DEADLINE_MS", "400", "hook", "the hook's whole-run deadline"),
    Setting("AGENTWATCH_SPOOL_MAX_BYTES", "67108864 (64 MiB)", "hook",
            "the spool's cap; a full spool refuses new events and logs each one"),
    Setting("AGENTWATCH_DISABLED", "unset", "hook", "1 turns the hook into a no-op"),
    Setting("AGENTWATCH_USAGE", "1", "hook",
            "0 stops the hook reading transcripts for token usage (Stop, SubagentStop, SessionEnd, ...)"),
    Setting("AGENTWATCH_PERSON", "git's user.email, else the OS user", "hook",
            "the person every event of this host's sessions names"),
    Setting("AGENTWATCH_PERSON_MODE", "name", "hook",
            "name: the person as found; hash: a stable salted hash of it; off: no person"),
    Setting("GENIE_AGENT_NAME", "unset", "hook", "the session's main agent name (genie's convention)"),
    Setting("GENIE_TEAM", "unset", "hook", "the team name (genie's convention)"),
    Setting("AGENTWATCH_CLICKHOUSE_URL", "chdb://<data dir>/clickhouse", "collector",
            "embedded chDB, or http(s)://user:password@host:8123/db"),
    Setting("AGENTWATCH_RETENTION_DAYS", "0 (keep all)", "collector", "TTL of events and messages"),
    Setting("AGENTWATCH_STORE_FIELD_MAX_BYTES", "16384", "collector",
            "a payload string longer than this is stored as its head and tail, the cut noted (0: keep all)"),
    Setting("AGENTWATCH_STORE_INSERT_MS", "1000", "collector",
            "under a steady flow the store inserts at most once in this many ms (an insert costs ClickHouse "
            "about 0.1 s of CPU however small); an event after a quiet spell is written at once"),
    Setting("AGENTWATCH_QUERY_READERS", "3", "collector",
            "read-only queries the query service runs at once; one more waits up to 5 s, then is told "
            "the store is busy"),
    Setting("AGENTWATCH_QUERY_MAX_MEMORY", "1073741824 (1 GiB)", "collector",
            "memory one read-only query may take; a larger one is stopped with ClickHouse's message"),
    Setting("AGENTWATCH_STREAM_MAX_AGE_DAYS", "7", "collector", "how long JetStream keeps events"),
    Setting("AGENTWATCH_STREAM_MAX_BYTES", "8 GiB", "collector",
            "JetStream's byte limit for the stream (oldest dropped first)"),
    Setting("AGENTWATCH_STREAM_REPLICAS", "1", "collector", "stream replicas (3 on a NATS cluster)"),
    Setting("AGENTWATCH_ACK_WAIT_SECONDS", "30", "collector",
            "before JetStream redelivers an unacknowledged message"),
    Setting("AGENTWATCH_MAX_DELIVER", "10", "collector",
            "deliveries before JetStream gives up on a message (it is then dead-lettered)"),
    Setting("AGENTWATCH_ALERT_WEBHOOK_URL", "unset", "collector",
            "POST each alert change as JSON to this URL"),
    Setting("AGENTWATCH_ALERT_WEBHOOK_SECRET", "unset", "collector",
            "sign the webhook's requests with this secret (HMAC-SHA256 in X-Agentwatch-Signature)"),
    Setting("AGENTWATCH_ALERT_URLS", "unset", "collector",
            "Apprise URLs (slack://, discord://, ntfy://, mailto://, ...): each alert change to each"),
    Setting("AGENTWATCH_ALERT_SLACK_URL", "unset", "collector",
            "an older setting: one more of AGENTWATCH_ALERT_URLS (Slack's webhook URL works as it is)"),
    Setting("AGENTWATCH_ALERT_SINK_TIMEOUT", "5", "collector", "seconds a sink's POST may take"),
    Setting("AGENTWATCH_ALERT_SINK_ATTEMPTS", "4", "collector",
            "tries per delivery when a sink answers 5xx or 429 or cannot be reached"),
    Setting("AGENTWATCH_METRICS_ADDR", "127.0.0.1:9464", "collector",
            "where /metrics (Prometheus) listens: host:port, or off"),
    Setting("AGENTWATCH_METRICS_TOP_REPOS", "20", "collector",
            "/metrics counts per repository for this many, the most active by events; the rest as other"),
    Setting("AGENTWATCH_OTLP_ADDR", "127.0.0.1:4318", "collector",
            "where the OTLP/HTTP receiver for Claude Code's telemetry listens: host:port, or off"),
    Setting("AGENTWATCH_OTLP_TOKEN", "unset", "collector",
            "the bearer token OTLP requests must carry; required when the receiver is beyond loopback"),
    Setting("AGENTWATCH_OTLP_MAX_BYTES", "8388608 (8 MiB)", "collector",
            "an OTLP request body larger than this (sent or unzipped) is refused with 413"),
    Setting("AGENTWATCH_OTLP_EXPORT_URL", "unset", "collector",
            "the OTLP/HTTP endpoint `otel-export` sends GenAI spans and metrics to (`/v1/traces` and "
            "`/v1/metrics` are added); set, `agentwatch up` runs the exporter beside the store"),
    Setting("AGENTWATCH_OTLP_EXPORT_HEADERS", "unset", "collector",
            "headers of every export request, as OTEL_EXPORTER_OTLP_HEADERS has them: `k=v,k2=v2`"),
    Setting("AGENTWATCH_OTLP_EXPORT_CONTENT", "0", "collector",
            "1: tool call arguments and results on the exported spans (redacted as on the bus)"),
    Setting("AGENTWATCH_OTLP_EXPORT_METRICS_S", "30", "collector",
            "seconds between two metric exports; 0: no metrics (a backend that takes traces only)"),
    Setting("AGENTWATCH_ALERTS_FILE", "<data dir>/alerts.toml", "collector",
            "the alert rules (TOML; a commented default is written on first start)"),
    Setting("AGENTWATCH_ALERTS_REPLAY_SECONDS", "3600", "collector",
            "how much stored history the watchdog replays on start to rebuild its state"),
    Setting("AGENTWATCH_ALERTS_BUDGET_POLL_SECONDS", "30", "collector",
            "how often the budget rule reads the costs from the store"),
    Setting("AGENTWATCH_THEME", "textual-dark", "dashboard", "the dashboard's Textual theme"),
    Setting("AGENTWATCH_LOST_AFTER_S", "agents.LOST_AFTER_S (ten minutes)", "dashboard",
            "seconds without an event in its session or team after which an agent shows as lost"),
    Setting("AGENTWATCH_CONFIG_DIR", "$XDG_CONFIG_HOME/agentwatch, else ~/.config/agentwatch", "dashboard",
            "the web dashboard's sign-in token (and other settings files)"),
    Setting("AGENTWATCH_WEB_MAX_SESSIONS", "4", "dashboard",
            "browser tabs `agentwatch web` serves at once (each runs its own dashboard)"),
    Setting("AGENTWATCH_CONNECT_TIMEOUT", "5", "dashboard",
            "seconds the commands, the dashboard and the collector wait for the bus or a ClickHouse server "
            "to answer a new connection"),
    Setting("AGENTWATCH_ALERT_BELL", "1", "dashboard",
            "ring the terminal bell on a new firing alert (0: never)"),
)  # fmt: skip
NAMES = frozenset(s.name for s in SETTINGS)


def environ_now() -> Mapping[str, str]:
    """os.environ where os is loaded (it may have changed since the start); else the environment
    the process started with, decoded as os.environ decodes it, without loading os."""
    loaded = sys.modules.get("os")
    if loaded is not None:
        return loaded.environ  # type: ignore[no-any-return]
    encoding = sys.getfilesystemencoding()
    return {
        k.decode(encoding, "surrogateescape"): v.decode(encoding, "surrogateescape")
        for k, v in posix.environ.items()
    }


def _environ(environ: Mapping[str, str] | None) -> Mapping[str, str]:
    if environ is not None:
        return environ
    import os

    return os.environ


def _join(head: str, tail: str) -> str:
    """os.path.join for a relative `tail`."""
    return head + tail if not head or head.endswith("/") else f"{head}/{tail}"


def _absolute(path: str) -> str:
    """os.path.abspath(os.path.expanduser(path)); os is loaded only for a path that is not
    already absolute and normal (the hook's is)."""
    dotted = f"{path}/"
    if path.startswith("/") and "//" not in path and "/./" not in dotted and "/../" not in dotted:
        return path.rstrip("/") or "/"
    import os

    return os.path.abspath(os.path.expanduser(path))


def _home() -> str:
    """os.path.expanduser("~"): $HOME, else the password database (through os)."""
    home = posix.environ.get(b"HOME")
    if home:
        return home.decode(sys.getfilesystemencoding(), "surrogateescape").rstrip("/") or "/"
    import os

    return os.path.expanduser("~")


def data_dir(environ: Mapping[str, str] | None = None) -> str:
    """AGENTWATCH_DATA_DIR, else $XDG_DATA_HOME/agentwatch, else ~/.local/share/agentwatch."""
    environ = _environ(environ)
    explicit = environ.get("AGENTWATCH_DATA_DIR")
    if explicit:
        return _absolute(explicit)
    xdg = environ.get("XDG_DATA_HOME") or _join(_join(_home(), ".local"), "share")
    return _join(xdg, "agentwatch")


def config_dir(environ: Mapping[str, str] | None = None) -> str:
    """AGENTWATCH_CONFIG_DIR, else $XDG_CONFIG_HOME/agentwatch, else ~/.config/agentwatch."""
    environ = _environ(environ)
    explicit = environ.get("AGENTWATCH_CONFIG_DIR")
    if explicit:
        return _absolute(explicit)
    xdg = environ.get("XDG_CONFIG_HOME") or _join(_home(), ".config")
    return _join(xdg, "agentwatch")


def ensure_dir(path: str) -> str:
    import os

    os.makedirs(path, mode=0o700, exist_ok=True)
    return path


def nats_url(environ: Mapping[str, str] | None = None) -> str:
    """AGENTWATCH_NATS_URL, else genie's GENIE_NATS_URL, else the local default."""
    environ = _environ(environ)
    source = nats_url_source(environ)
    return DEFAULT_NATS_URL if source == "default" else environ[source].strip()


def nats_url_source(environ: Mapping[str, str] | None = None) -> str:
    """Which variable nats_url() took its value from, or 'default'."""
    environ = _environ(environ)
    for name in ("AGENTWATCH_NATS_URL", "GENIE_NATS_URL"):
        if environ.get(name, "").strip():
            return name
    return "default"


def clickhouse_url(environ: Mapping[str, str] | None = None) -> str:
    """AGENTWATCH_CLICKHOUSE_URL, else `chdb://<data dir>/clickhouse`."""
    environ = _environ(environ)
    url = environ.get("AGENTWATCH_CLICKHOUSE_URL", "").strip()
    if url:
        return url
    return "chdb://" + _join(data_dir(environ), "clickhouse")


def is_embedded(clickhouse: str) -> bool:
    """An embedded (chDB) ClickHouse URL, which only one process may open."""
    return clickhouse.startswith("chdb:")


def connect_timeout(environ: Mapping[str, str] | None = None) -> int:
    """AGENTWATCH_CONNECT_TIMEOUT: how long a new connection to the bus or a ClickHouse server may
    take to answer before it counts as a server that does not answer (whole seconds)."""
    return number(_environ(environ), "AGENTWATCH_CONNECT_TIMEOUT", DEFAULT_CONNECT_TIMEOUT)


def flag(environ: Mapping[str, str], name: str) -> bool:
    return environ.get(name, "").strip().lower() in TRUTHY


def usage_enabled(environ: Mapping[str, str]) -> bool:
    """AGENTWATCH_USAGE: on unless 0, false, no or off."""
    return environ.get("AGENTWATCH_USAGE", "").strip().lower() not in ("0", "false", "no", "off")


def number(environ: Mapping[str, str], name: str, default: int) -> int:
    try:
        value = int(environ.get(name, "") or default)
    except ValueError:
        return default
    return value if value > 0 else default


def lost_after_s(environ: Mapping[str, str]) -> int:
    """AGENTWATCH_LOST_AFTER_S: the silence after which an agent not stopped is lost, for the
    dashboard and the spans alike (agents.LOST_AFTER_S by default, as the store's views have it)."""
    from agentwatch.agents import LOST_AFTER_S  # (not on the hook's path, which never asks)

    return number(environ, "AGENTWATCH_LOST_AFTER_S", LOST_AFTER_S)


def listen_address(environ: Mapping[str, str], name: str, default: str) -> tuple[str, int] | None:
    """A listener's `host:port` setting (`[::1]:9464`; `:9464` for every interface) as (host,
    port); None for `off`. ValueError names the setting when it cannot be read."""
    text = environ.get(name, "").strip()
    value = text or default
    if value.lower() in ("off", "0", "none"):
        return None
    host, sep, port = value.rpartition(":")
    if not sep or not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError(f"{name}={text!r}: give host:port ({default}), or off")
    return host.strip("[]") or "0.0.0.0", int(port)  # noqa: S104 - only when asked for (`:port`)


def is_loopback(host: str) -> bool:
    """Whether `host` can only be this machine's loopback: `localhost`, or an IP literal in
    127.0.0.0/8 or ::1 (brackets allowed). A host name that only starts with `127.`
    (`127.evil.example`) is a name anyone's DNS may answer for: not loopback."""
    name = host.strip()
    if name.startswith("[") and name.endswith("]"):
        name = name[1:-1]
    if name.lower() == "localhost":
        return True
    import ipaddress  # off the hook's path: only listeners ask

    try:
        ip = ipaddress.ip_address(name)
    except ValueError:
        return False
    mapped = ip.ipv4_mapped if isinstance(ip, ipaddress.IPv6Address) else None
    return (mapped or ip).is_loopback


# --- URLs ---------------------------------------------------------------------------------------


class ServerURL:
    """One NATS server of a bus URL, its credentials parsed out."""

    __slots__ = ("host", "password", "port", "scheme", "token", "user")

    def __init__(self, scheme: str, host: str, port: int, user: str, password: str, token: str) -> None:
        self.scheme = scheme
        self.host = host
        self.port = port
        self.user = user
        self.password = password
        self.token = token

    @property
    def tls(self) -> bool:
        return self.scheme in ("tls", "wss")

    def display(self) -> str:
        """The URL with its secret part masked, for messages a person reads."""
        auth = ""
        if self.user:
            auth = f"{self.user}:{MASK}@"
        elif self.token:
            auth = f"{MASK}@"
        return f"{self.scheme}://{auth}{self.host}:{self.port}"

    def plain(self) -> str:
        """The URL without credentials (they travel as options, never in a string that may be shown)."""
        return f"{self.scheme}://{self.host}:{self.port}"


def _unquote(text: str) -> str:
    # urllib.parse.unquote would cost the hook urllib's import (and re): percent-decoding is short.
    if "%" not in text:
        return text
    out = bytearray()
    i = 0
    raw = text.encode()
    while i < len(raw):
        if raw[i] == 0x25 and i + 2 < len(raw):
            try:
                out.append(int(raw[i + 1 : i + 3], 16))
                i += 3
                continue
            except ValueError:
                pass
        out.append(raw[i])
        i += 1
    return out.decode("utf-8", "replace")


def parse_urls(value: str) -> list[ServerURL]:
    """Parse `nats://[user[:pass]@|token@]host[:port]`, comma-separated for a cluster."""
    urls = []
    for item in value.split(","):
        part = item.strip()
        if not part:
            continue
        scheme, sep, rest = part.partition("://")
        if not sep:
            scheme, rest = "nats", part
        scheme = scheme.lower()
        if scheme not in ("nats", "tls"):
            raise ValueError(f"unsupported NATS URL scheme {scheme!r}: use nats:// or tls://")
        rest = rest.split("/", 1)[0]
        user = password = token = ""
        if "@" in rest:
            auth, rest = rest.rsplit("@", 1)
            if ":" in auth:
                user, password = auth.split(":", 1)
                user, password = _unquote(user), _unquote(password)
            else:
                token = _unquote(auth)
        host, port = rest, DEFAULT_NATS_PORT
        try:
            if rest.startswith("["):
                host, _, tail = rest[1:].partition("]")
                if tail.startswith(":"):
                    port = int(tail[1:])
            elif rest.count(":") == 1:
                host, port_text = rest.split(":")
                port = int(port_text)
        except ValueError:
            raise ValueError(
                f"bad port in NATS URL {ServerURL(scheme, host, 0, user, '', token).display()}"
            ) from None
        urls.append(ServerURL(scheme, host or "127.0.0.1", port, user, password, token))
    if not urls:
        raise ValueError("no NATS server URL given")
    return urls


# --- the logins of `agentwatch up`'s bus ---------------------------------------------------------

# `agentwatch up` starts nats-server with one user per role (cli/buslogin.py writes them): the hook
# publishes events, the dashboard reads, the store consumes. Each role's password is a file of its
# own in <data dir>/bus/, and every command that talks to a local bus without credentials of its
# own logs in with its role's password from there.
HOOK, STORE, DASHBOARD = "hook", "store", "dashboard"
ROLES = (HOOK, STORE, DASHBOARD)
LOGIN_DIR = "bus"


def login_dir(environ: Mapping[str, str] | None = None) -> str:
    """Where `up` keeps its bus's passwords (one `<role>.password` file each) and config."""
    return _join(data_dir(environ), LOGIN_DIR)


def login_path(environ: Mapping[str, str] | None, role: str) -> str:
    return _join(login_dir(environ), f"{role}.password")


def is_plain_local(urls: list[ServerURL]) -> bool:
    """One loopback server without credentials or TLS: the bus `agentwatch up` starts (and logs
    into with the data dir's logins); anything else is the user's own."""
    if len(urls) != 1:
        return False
    url = urls[0]
    return url.host in LOCAL_HOSTS and not (url.user or url.token or url.tls)


def use_local_login(urls: list[ServerURL], environ: Mapping[str, str], role: str) -> bool:
    """Give a plain local bus URL (is_plain_local) the login of `role` that `up` wrote in the data
    dir, in place; True when it did. A URL with credentials of its own, AGENTWATCH_NATS_CREDS or
    AGENTWATCH_NATS_NKEY, or no login file (no `up` ran with this data dir) leaves it as it is.
    Standard library only and one small read: the hook calls it on every run."""
    if not is_plain_local(urls):
        return False
    if environ.get("AGENTWATCH_NATS_CREDS") or environ.get("AGENTWATCH_NATS_NKEY"):
        return False
    try:
        with open(login_path(environ, role), "rb") as f:
            password = f.read(256).strip().decode("ascii", "replace")
    except OSError:
        return False
    if not password:
        return False
    urls[0].user, urls[0].password = role, password
    return True


def bus_servers(url: str, environ: Mapping[str, str], role: str) -> list[ServerURL]:
    """parse_urls, with the data dir's login of `role` for a plain local bus (use_local_login)."""
    urls = parse_urls(url)
    use_local_login(urls, environ, role)
    return urls


def display_urls(url: str) -> str:
    """The bus URL(s) with passwords and tokens masked, for anything printed or logged; never the
    raw text of a URL that does not parse (it may hold a password)."""
    try:
        return ",".join(u.display() for u in parse_urls(url))
    except ValueError:
        return "<unparsable NATS URL>"


def nats_options(
    url: str, environ: Mapping[str, str] | None = None, *, name: str, role: str = DASHBOARD
) -> dict[str, Any]:
    """nats-py connect options (also what FastStream's NatsBroker takes) for the bus at `url`:
    every connection agentwatch makes with nats-py is built from these. A plain local URL gets
    the login `up` wrote for `role` (use_local_login)."""
    environ = _environ(environ)
    servers = bus_servers(url, environ, role)
    opts: dict[str, Any] = {"servers": [s.plain() for s in servers], "name": name}
    first = servers[0]
    if first.user:
        opts["user"], opts["password"] = first.user, first.password
    elif first.token:
        opts["token"] = first.token
    creds = environ.get("AGENTWATCH_NATS_CREDS", "").strip()
    if creds:
        opts["user_credentials"] = creds
    seed = environ.get("AGENTWATCH_NATS_NKEY", "").strip()
    if seed:
        opts["nkeys_seed"] = seed
    ca = environ.get("AGENTWATCH_NATS_CA", "").strip()
    cert = environ.get("AGENTWATCH_NATS_CERT", "").strip()
    if ca or cert or any(s.tls for s in servers):
        import ssl

        ctx = ssl.create_default_context(cafile=ca or None)
        if cert:
            ctx.load_cert_chain(cert, environ.get("AGENTWATCH_NATS_KEY", "").strip() or None)
        opts["tls"] = ctx
    return opts


def display_url(url: str) -> str:
    """Any other URL (ClickHouse's) with its password masked."""
    scheme, sep, rest = url.partition("://")
    authority, slash, path = rest.partition("/")
    if "@" in authority:
        auth, _, host = authority.rpartition("@")
        user = auth.split(":", 1)[0]
        return f"{scheme}{sep}{user}:{MASK}@{host}{slash}{path}"
    return url
