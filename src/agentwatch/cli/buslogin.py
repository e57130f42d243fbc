"""The logins of `agentwatch up`'s bus: one nats-server account, one user per role.

`up` starts nats-server with a config file written here, never with credentials on its command
line. The account AGENTWATCH has JetStream; its users mirror deploy/nats/accounts.conf (the fleet's
least-privilege users), with the few subjects more that `up`'s own parts use:

- hook: publish genie.> (and ask which streams exist), receive the stream's acks: no reading
  events, no queries, no alerts. `agentwatch-emit`, `agentwatch demo`, `import`, `spool`.
- store: the GENIE and ALERTS streams and the store's and watchdog's consumers, alerts on
  agentwatch.alert.>, answers on agentwatch.query. The collector (`up`, `alerts run`).
- dashboard: watch genie.> and agentwatch.alert.>, ask agentwatch.query, read the stream's and
  consumers' state. The dashboards, `agentwatch sql`, `status`, `doctor`, `mcp`.

Each password is made once (`secrets`) into <data dir>/bus/<role>.password (mode 0600, the
directory 0700) and never made again; the server's config beside them is written on every start
from them, so a newer version's permissions take effect at the next `up`. Every command reads its
role's password from there (config.use_local_login).
"""

from __future__ import annotations

import json
import os
import secrets
from collections.abc import Mapping
from pathlib import Path

from agentwatch import config

ACCOUNT = "AGENTWATCH"
CONFIG_NAME = "nats-server.conf"
# nats-server keeps an account's JetStream data in <store dir>/jetstream/<account>; a server run
# without accounts (agentwatch before its bus had logins) kept it in the global account's.
GLOBAL_ACCOUNT = "$G"

_STORE_PUBLISH = [
    "$JS.API.INFO",
    "$JS.API.STREAM.NAMES",
    "$JS.API.STREAM.INFO.GENIE",
    "$JS.API.STREAM.CREATE.GENIE",
    "$JS.API.STREAM.UPDATE.GENIE",
    # The store's dead letters read back what JetStream gave up on; the watchdog its replay.
    "$JS.API.STREAM.MSG.GET.GENIE",
    # Its durables (agentwatch-store, agentwatch-alerts) and the watchdog's short-lived replay
    # consumers, which it deletes when done (never a durable: see the deny list).
    "$JS.API.CONSUMER.INFO.GENIE.*",
    "$JS.API.CONSUMER.CREATE.GENIE",  # an unnamed one (the server names it)
    "$JS.API.CONSUMER.CREATE.GENIE.>",
    "$JS.API.CONSUMER.DURABLE.CREATE.GENIE.*",
    "$JS.API.CONSUMER.MSG.NEXT.GENIE.*",
    "$JS.API.CONSUMER.DELETE.GENIE.*",
    "$JS.ACK.GENIE.>",
    "$JS.API.STREAM.INFO.ALERTS",
    "$JS.API.STREAM.CREATE.ALERTS",
    "$JS.API.STREAM.UPDATE.ALERTS",
    "agentwatch.alert.>",
    # A fleet (bus/fleet.py): the hub's HOSTS stream of announcements, which the hub's collector
    # reads to source each host (and `hosts forget` purges); a host's `up` announces itself.
    "$JS.API.STREAM.INFO.HOSTS",
    "$JS.API.STREAM.CREATE.HOSTS",
    "$JS.API.STREAM.MSG.GET.HOSTS",
    "$JS.API.STREAM.PURGE.HOSTS",
    "agentwatch.hosts.*",
    # The hub's word to each host of how far into its stream it has reached.
    "agentwatch.fleet.reached.*",
]
_STORE_DENY = [
    "$JS.API.CONSUMER.DELETE.GENIE.agentwatch-store",
    "$JS.API.CONSUMER.DELETE.GENIE.agentwatch-alerts",
]

PERMISSIONS: dict[str, dict[str, object]] = {
    config.HOOK: {
        "publish": {"allow": ["genie.>", "$JS.API.STREAM.NAMES"]},
        "subscribe": {"allow": ["_AW_ACK.>"]},
    },
    config.STORE: {
        "publish": {"allow": _STORE_PUBLISH, "deny": _STORE_DENY},
        "subscribe": {
            "allow": [
                "_INBOX.>",
                "agentwatch.query",
                # What JetStream gave up on (the store dead-letters it).
                "$JS.EVENT.ADVISORY.CONSUMER.MAX_DELIVERIES.GENIE.*",
                # A host's `up`: the hub's word of how far into its stream it has reached.
                "agentwatch.fleet.reached.*",
            ]
        },
        # Replies to the requests it received (agentwatch.query), and only those.
        "allow_responses": True,
    },
    config.DASHBOARD: {
        "publish": {
            "allow": [
                "agentwatch.query",
                # `agentwatch status`: how full the stream is, how far behind the consumers are.
                "$JS.API.STREAM.INFO.GENIE",
                "$JS.API.CONSUMER.INFO.GENIE.*",
                # `agentwatch hosts`: the hosts' announcements, and each host's own stream (its
                # last sequence, its oldest message not yet at the hub) through its domain.
                "$JS.API.STREAM.INFO.HOSTS",
                "$JS.API.STREAM.MSG.GET.HOSTS",
                "$JS.*.API.STREAM.INFO.GENIE",
                "$JS.*.API.STREAM.MSG.GET.GENIE",
                # The same on a host's own bus (the server checks the API subject the domain's
                # maps to): its backlog's oldest message, its last (bus/fleet.py own_view).
                "$JS.API.STREAM.MSG.GET.GENIE",
            ]
        },
        "subscribe": {"allow": ["genie.>", "agentwatch.alert.>", "_INBOX.>", "_AW_FLEET.>"]},
    },
}


# A host's leaf connection (`agentwatch up --hub`), as the hub sees it: each host logs in as its
# own user, `leaf-<domain>` (`agentwatch hosts add NAME` on the hub makes it). Into the hub it may
# send only what sourcing its stream takes: the deliveries of the sourcing consumer ($JS.S.>), the
# answers to the hub's JetStream requests ($JSC.R.>) and to `agentwatch hosts` (_AW_FLEET.>), and
# its own announcements; out of the hub it receives the JetStream requests for its own domain
# ($JS.<domain>.API.>), the flow control of the deliveries ($JS.FC.>) and the hub's word of how
# far it has reached into its own stream. It may neither publish nor receive genie.> (events
# cross the link only by sourcing, never twice by core NATS), nor ask any JetStream API through
# the hub, nor hear (and so answer) the hub's requests for another host's domain: a host reads no
# other host's stream and speaks for no other host.
LEAF_PREFIX = "leaf-"


def leaf_user(domain: str) -> str:
    return f"{LEAF_PREFIX}{domain}"


def leaf_permissions(domain: str) -> dict[str, object]:
    return {
        "publish": {"allow": ["$JS.S.>", "$JSC.R.>", "_AW_FLEET.>", f"agentwatch.hosts.{domain}"]},
        "subscribe": {"allow": [f"$JS.{domain}.API.>", "$JS.FC.>", f"agentwatch.fleet.reached.{domain}"]},
    }


def host_logins(environ: Mapping[str, str]) -> dict[str, str]:
    """Each host's leaf password, by domain (<data dir>/bus/leaf-<domain>.password)."""
    folder = Path(config.login_dir(environ))
    found = {}
    for path in sorted(folder.glob(f"{LEAF_PREFIX}*.password")):
        password = path.read_text().strip()
        if password:
            found[path.name[len(LEAF_PREFIX) : -len(".password")]] = password
    return found


def add_host_login(environ: Mapping[str, str], domain: str) -> str:
    """Host `domain`'s leaf password, made (mode 0600) if it has none yet."""
    return ensure_logins(environ, (leaf_user(domain),), roles=())[leaf_user(domain)]


def drop_host_login(environ: Mapping[str, str], domain: str) -> bool:
    """Remove host `domain`'s leaf password; False when it had none."""
    try:
        os.unlink(config.login_path(environ, leaf_user(domain)))
    except FileNotFoundError:
        return False
    return True


def _leaf_users(environ: Mapping[str, str]) -> list[dict[str, object]]:
    return [
        {"user": leaf_user(d), "password": pw, "permissions": leaf_permissions(d)}
        for d, pw in host_logins(environ).items()
    ]


def reload_host_logins(environ: Mapping[str, str]) -> str:
    """Write the hosts' leaf users into the hub's server config and have its running nats-server
    read it again (SIGHUP): how it went, in words. The config's other parts stay as `up` wrote
    them."""
    import signal

    path = Path(config.login_dir(environ)) / CONFIG_NAME
    try:
        text = path.read_text()
        body = json.loads(text[text.index("{") :])
    except (OSError, ValueError):
        return "the hub's bus takes it at its next `agentwatch up` (no server config yet)"
    if "listen" not in body.get("leafnodes", {}):
        return "this bus takes no hosts: start the hub's `agentwatch up` with AGENTWATCH_LEAF_ADDR"
    users = body["accounts"][ACCOUNT]["users"]
    users[:] = [u for u in users if not str(u.get("user", "")).startswith(LEAF_PREFIX)] + _leaf_users(environ)
    _write_private(path, text[: text.index("{")] + json.dumps(body, indent=2) + "\n")
    try:
        pid = int(Path(server_pid_path(environ)).read_text().strip())
        os.kill(pid, signal.SIGHUP)
    except (OSError, ValueError):
        return "the hub's bus takes it at its next `agentwatch up` (its nats-server is not running)"
    return "the hub's running bus took it"


def server_pid_path(environ: Mapping[str, str]) -> str:
    """Where `up`'s nats-server writes its pid (nats-server -P)."""
    return os.path.join(config.data_dir(environ), "nats-server.pid")


class Fleet:
    """What `up` adds to its bus in a fleet: as the hub, a leaf port for the hosts (and their
    login, `leaf`); as a host, its JetStream domain and its leaf connection to the hub."""

    def __init__(self, *, leaf_listen: str = "", hub: str = "", domain: str = "") -> None:
        self.leaf_listen = leaf_listen  # host:port (the hub)
        self.hub = hub  # nats-leaf://leaf-<domain>:password@hub:7422 (a host)
        self.domain = domain


def _write_private(path: Path, text: str) -> None:
    """Write `text` to `path` with mode 0600 from the start (a temporary file renamed over it)."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        os.write(fd, text.encode())
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)


def ensure_logins(
    environ: Mapping[str, str], more: tuple[str, ...] = (), roles: tuple[str, ...] = config.ROLES
) -> dict[str, str]:
    """Each role's password (and each of `more`'s), made (and written, mode 0600) for those that
    have none yet."""
    folder = Path(config.ensure_dir(config.login_dir(environ)))
    folder.chmod(0o700)
    passwords = {}
    for role in (*roles, *more):
        path = Path(config.login_path(environ, role))
        try:
            password = path.read_text().strip()
        except FileNotFoundError:
            password = ""
        if not password:
            password = secrets.token_urlsafe(24)
            _write_private(path, password + "\n")
        elif path.stat().st_mode & 0o077:
            path.chmod(0o600)
        passwords[role] = password
    return passwords


def server_config(
    passwords: dict[str, str],
    fleet: Fleet | None = None,
    store_dir: str = "",
    leaf_users: list[dict[str, object]] | None = None,
    server_name: str = "",
) -> str:
    """nats-server's config: the account, JetStream enabled in it, a user per role; in a fleet
    the hub's leaf port and each host's leaf user, or a host's domain and leaf connection. JSON
    is valid in nats-server's config syntax, and quotes every password and subject as it is."""
    users: list[dict[str, object]] = [
        {"user": role, "password": passwords[role], "permissions": PERMISSIONS[role]} for role in config.ROLES
    ]
    accounts: dict[str, object] = {"accounts": {ACCOUNT: {"jetstream": "enabled", "users": users}}}
    if server_name:  # as on the command line (-n): a reload (SIGHUP) reads the name from here
        accounts["server_name"] = server_name
    if fleet is not None and fleet.leaf_listen:
        users.extend(leaf_users or [])
        # Hosts reach the hub at the URL they were given (a proxy, a load balancer, a NAT): the
        # hub does not tell them its own addresses to reconnect to instead.
        accounts["leafnodes"] = {"listen": fleet.leaf_listen, "no_advertise": True}
    if fleet is not None and fleet.hub:
        accounts["jetstream"] = {"store_dir": store_dir, "domain": fleet.domain}
        accounts["leafnodes"] = {"remotes": [{"urls": [fleet.hub], "account": ACCOUNT}]}
    head = (
        "# Written by `agentwatch up` on every start, from the passwords beside it (<role>.password):\n"
        "# change a password there, not here. See docs/deploy.md.\n"
    )
    return head + json.dumps(accounts, indent=2) + "\n"


def write_server_config(
    environ: Mapping[str, str], fleet: Fleet | None = None, store_dir: str = "", server_name: str = ""
) -> str:
    """The logins made if need be, the server's config written (mode 0600); its path."""
    path = Path(config.login_dir(environ)) / CONFIG_NAME
    passwords = ensure_logins(environ)
    _write_private(path, server_config(passwords, fleet, store_dir, _leaf_users(environ), server_name))
    return str(path)


def adopt_global_streams(store_dir: str) -> bool:
    """Move the streams of a bus run without accounts (an older `up`: the global account) into
    the account's own JetStream directory, once, before the server starts: the GENIE stream, what
    it holds and the store's consumer with its acknowledgements carry over, so what was published
    and not yet stored is delivered to the store as before. True when it moved them."""
    jetstream = Path(store_dir) / "jetstream"
    old, new = jetstream / GLOBAL_ACCOUNT, jetstream / ACCOUNT
    if not old.is_dir() or new.exists():
        return False
    old.rename(new)
    return True
