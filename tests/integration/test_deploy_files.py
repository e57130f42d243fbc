"""deploy/: the files are checked by parsing them, since no container engine runs here.

- compose-host.yaml: an agent host, `agentwatch up` in host mode (the hub's URL and the host's
  name from the environment), no store, on the machine's network and the user's data dir;
- compose.yaml: the services, two stores on one durable, a health check on each, exact image
  versions each with its reason, loopback-only ports, declared volumes, passwords only as ${VAR};
- Dockerfile: pinned base, non-root numeric USER, `.[consumers]` without dev, no secret in ARG/ENV;
- the systemd units: valid INI, restart and stop policy, hardening, credentials only from
  EnvironmentFile;
- clickhouse/schema-cluster.sql: in test_deploy_cluster_schema.py (it is generated from the
  migrations, and applied to an embedded chDB);
- clickhouse/users.d and config.d: valid XML, a read-only reader, a store without DROP (but of the
  views a migration replaces or drops, and of the copies it drops) or ALTER.
"""

from __future__ import annotations

import configparser
import re
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from agentwatch.store.migrations import migrations, split_statements
from tests.conftest import ROOT

DEPLOY = ROOT / "deploy"
COMPOSE = DEPLOY / "compose.yaml"
HOST_COMPOSE = DEPLOY / "compose-host.yaml"
DOCKERFILE = DEPLOY / "Dockerfile"
USERS_XML = DEPLOY / "clickhouse" / "users.d" / "agentwatch.xml"
CONFIG_XML = DEPLOY / "clickhouse" / "config.d" / "agentwatch.xml"
UP_UNIT = DEPLOY / "systemd" / "agentwatch-up.service"
STORE_UNIT = DEPLOY / "systemd" / "agentwatch-store.service"
HOST_UNIT = DEPLOY / "systemd" / "agentwatch-host.service"

# An exact release: 2.15.1, 25.8.30.16, 3.11.15; an optional variant suffix; an optional digest.
EXACT_TAG = re.compile(r"^[\w.\-/]+:\d+\.\d+\.\d+(?:\.\d+)?(?:-[a-z0-9.\-]+)?(?:@sha256:[0-9a-f]{64})?$")
VAR_REF = re.compile(r"^\$\{[A-Z][A-Z0-9_]*(?::\?[^}]*)?\}$")
SECRET_NAME = re.compile(r"PASSWORD|PASSWD|SECRET|TOKEN|CREDENTIAL|PRIVATE_KEY", re.IGNORECASE)
URL_USERINFO = re.compile(r"\b[a-z][a-z0-9+.\-]*://([^/@\s:]+):([^@\s]+)@")


# --- compose.yaml -----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def compose() -> dict[str, Any]:
    data = yaml.safe_load(COMPOSE.read_text(encoding="utf-8"))
    assert isinstance(data, dict)
    return data


def services(compose: dict[str, Any]) -> dict[str, dict[str, Any]]:
    found = compose["services"]
    assert isinstance(found, dict)
    return found


def test_compose_has_the_services(compose: dict[str, Any]) -> None:
    assert {"nats", "clickhouse"} <= set(services(compose))
    stores = [name for name in services(compose) if name.startswith("store")]
    assert stores, "no store service"


def test_compose_runs_two_stores_on_one_durable(compose: dict[str, Any]) -> None:
    stores = {name: svc for name, svc in services(compose).items() if name.startswith("store")}
    replicas = sum(int(svc.get("deploy", {}).get("replicas", 1)) for svc in stores.values())
    assert replicas >= 2
    for svc in stores.values():
        # The same bus for every replica: they share the durable consumer agentwatch-store.
        assert svc["environment"]["AGENTWATCH_NATS_URL"].startswith("nats://store:")
        assert "@nats:4222" in svc["environment"]["AGENTWATCH_NATS_URL"]
        ch_url = svc["environment"]["AGENTWATCH_CLICKHOUSE_URL"]
        assert ch_url.startswith("http://agentwatch_store:")
        assert ch_url.endswith("@clickhouse:8123/agentwatch")
        assert svc["build"] == {"context": "..", "dockerfile": "deploy/Dockerfile"}
        assert (DEPLOY / svc["build"]["context"] / svc["build"]["dockerfile"]).resolve() == DOCKERFILE
        conditions = {dep: spec["condition"] for dep, spec in svc["depends_on"].items()}
        assert conditions == {"nats": "service_healthy", "clickhouse": "service_healthy"}


def test_every_service_has_a_health_check(compose: dict[str, Any]) -> None:
    for name, svc in services(compose).items():
        test = svc.get("healthcheck", {}).get("test")
        assert isinstance(test, list), f"{name}: no health check"
        assert test[0] in {"CMD", "CMD-SHELL"}
        assert svc["healthcheck"].get("disable") is not True
    checks = {name: " ".join(svc["healthcheck"]["test"]) for name, svc in services(compose).items()}
    assert "http://127.0.0.1:8222/healthz?js-enabled-only=true" in checks["nats"]
    assert "http://127.0.0.1:8123/ping" in checks["clickhouse"]
    for name, check in checks.items():
        if name.startswith("store"):
            assert check == "CMD agentwatch status"


def test_images_are_pinned_with_a_reason(compose: dict[str, Any]) -> None:
    lines = COMPOSE.read_text(encoding="utf-8").splitlines()
    for name, svc in services(compose).items():
        if "image" not in svc:
            assert "build" in svc, f"{name}: neither image nor build"
            continue
        image = svc["image"]
        assert EXACT_TAG.match(image), f"{name}: {image} is not an exact version"
        assert ":latest" not in image
        # The comment block right above the image line says why this version.
        at = next(i for i, line in enumerate(lines) if line.strip() == f"image: {image}")
        comment = []
        for line in reversed(lines[:at]):
            if not line.strip().startswith("#"):
                break
            comment.append(line)
        assert any("pinned" in c.lower() for c in comment), f"{name}: no reason next to {image}"


def test_nats_runs_jetstream_with_the_mounted_config(compose: dict[str, Any]) -> None:
    nats = services(compose)["nats"]
    assert nats["image"].startswith("nats:2.")
    assert "--jetstream" in nats["command"]
    assert nats["command"][nats["command"].index("--config") + 1] == "/etc/nats/agentwatch/single.conf"
    # The whole directory: single.conf includes accounts.conf.
    assert "./nats:/etc/nats/agentwatch:ro" in nats["volumes"]
    # The store's bus user, whose password accounts.conf reads from the same variable.
    for name in ("AGENTWATCH_HOOK_PASSWORD", "AGENTWATCH_STORE_PASSWORD"):
        assert nats["environment"][name].startswith("${" + name + ":?")


def test_clickhouse_mounts_the_agentwatch_files(compose: dict[str, Any]) -> None:
    ch = services(compose)["clickhouse"]
    assert ch["image"].startswith("clickhouse/clickhouse-server:")
    mounts = {v.split(":")[0]: v.split(":")[1] for v in ch["volumes"]}
    assert mounts["./clickhouse/config.d/agentwatch.xml"] == "/etc/clickhouse-server/config.d/agentwatch.xml"
    assert mounts["./clickhouse/users.d/agentwatch.xml"] == "/etc/clickhouse-server/users.d/agentwatch.xml"
    for source in mounts:
        if source.startswith("./"):
            assert (DEPLOY / source).is_file(), source
    assert ch["environment"]["CLICKHOUSE_DB"] == "agentwatch"


def test_ports_are_bound_to_loopback(compose: dict[str, Any]) -> None:
    for name, svc in services(compose).items():
        for port in svc.get("ports", []):
            assert isinstance(port, str), f"{name}: long-form port {port!r}"
            assert port.startswith("127.0.0.1:"), f"{name}: {port} is not bound to 127.0.0.1"


def test_named_volumes_are_declared(compose: dict[str, Any]) -> None:
    declared = set(compose.get("volumes") or {})
    used = set()
    for svc in services(compose).values():
        for volume in svc.get("volumes", []):
            source = volume.split(":")[0]
            if not source.startswith((".", "/", "~", "$")):
                used.add(source)
    assert used
    assert used <= declared, f"undeclared volumes: {used - declared}"


def _strings(node: Any, path: str = "") -> Iterator[tuple[str, str]]:
    if isinstance(node, dict):
        for key, value in node.items():
            yield from _strings(value, f"{path}.{key}")
    elif isinstance(node, list):
        for i, value in enumerate(node):
            yield from _strings(value, f"{path}[{i}]")
    elif node is not None:
        yield path, str(node)


def test_compose_has_no_secret_in_clear(compose: dict[str, Any]) -> None:
    checked = 0
    for path, value in _strings(compose):
        key = path.rsplit(".", 1)[-1]
        if SECRET_NAME.search(key):
            assert VAR_REF.match(value), f"{path} holds a literal secret"
            checked += 1
        for match in URL_USERINFO.finditer(value):
            assert VAR_REF.match(match.group(2)), f"{path}: a literal password in a URL"
            checked += 1
    assert checked >= 5


# --- compose-host.yaml ------------------------------------------------------------------------


@pytest.fixture(scope="module")
def host_compose() -> dict[str, Any]:
    data = yaml.safe_load(HOST_COMPOSE.read_text(encoding="utf-8"))
    assert isinstance(data, dict)
    return data


def test_host_compose_runs_host_mode_from_the_environment(host_compose: dict[str, Any]) -> None:
    found = services(host_compose)
    assert set(found) == {"host"}  # no store, no ClickHouse, no bus of its own but up's
    host = found["host"]
    assert host["command"] == ["up"]  # host mode by AGENTWATCH_HUB_URL, the password off the command line
    env = host["environment"]
    for name in ("AGENTWATCH_HUB_URL", "AGENTWATCH_HOST"):
        assert env[name].startswith("${" + name + ":?"), name
        assert VAR_REF.match(env[name]), name
    assert "AGENTWATCH_NATS_URL" not in env  # the bundled bus on its default local URL
    assert "AGENTWATCH_CLICKHOUSE_URL" not in env
    assert host["build"] == {"context": "..", "dockerfile": "deploy/Dockerfile"}
    assert (DEPLOY / host["build"]["context"] / host["build"]["dockerfile"]).resolve() == DOCKERFILE


def test_host_compose_shares_the_hooks_bus_and_data_dir(host_compose: dict[str, Any]) -> None:
    host = services(host_compose)["host"]
    # The hook runs outside the container: it reaches the bus at 127.0.0.1:4222 and reads its
    # login from the user's data dir, as that user.
    assert host["network_mode"] == "host"
    assert "ports" not in host
    mounts = {v.rsplit(":", 1)[1]: v.rsplit(":", 1)[0] for v in host["volumes"]}
    assert host["environment"]["AGENTWATCH_DATA_DIR"] in mounts
    assert mounts[host["environment"]["AGENTWATCH_DATA_DIR"]].endswith(".local/share/agentwatch}")
    user = re.fullmatch(r"(\$\{[^}]*\}):(\$\{[^}]*\})", host["user"])  # the data dir's owner
    assert user, host["user"]
    assert all(VAR_REF.match(part) for part in user.groups())
    assert " ".join(host["healthcheck"]["test"]).count("4222") == 1
    assert host["stop_signal"] == "SIGTERM"
    assert host["read_only"] is True
    assert host["cap_drop"] == ["ALL"]


def test_host_compose_has_no_secret_in_clear(host_compose: dict[str, Any]) -> None:
    text = HOST_COMPOSE.read_text(encoding="utf-8")
    for path, value in _strings(host_compose):
        assert not URL_USERINFO.search(value), f"{path}: a literal password in a URL"
        assert "nats-leaf://" not in value, f"{path}: the hub's URL belongs in the environment"
    assert "AGENTWATCH_HUB_URL=nats-leaf://leaf-<host>:<" in text  # the comment says what to set, no password


# --- Dockerfile -------------------------------------------------------------------------------


def dockerfile_instructions() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) with continuation lines joined and comments dropped."""
    out: list[tuple[str, str]] = []
    pending = ""
    for raw in DOCKERFILE.read_text(encoding="utf-8").splitlines():
        line = raw.strip()
        if not pending and (not line or line.startswith("#")):
            continue
        if line.startswith("#"):
            continue
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        full = pending + line
        pending = ""
        word, _, rest = full.partition(" ")
        out.append((word.upper(), rest.strip()))
    assert not pending
    return out


def test_dockerfile_base_is_pinned() -> None:
    froms = [args for word, args in dockerfile_instructions() if word == "FROM"]
    assert len(froms) >= 2, "not multi-stage"
    for args in froms:
        image = args.split()[0]
        assert EXACT_TAG.match(image), image
        assert re.match(r"^python:3\.11\.\d+-slim", image), image


def test_dockerfile_runs_the_store_as_a_numeric_non_root_user() -> None:
    instructions = dockerfile_instructions()
    last_from = max(i for i, (word, _) in enumerate(instructions) if word == "FROM")
    final = instructions[last_from:]
    users = [(i, args) for i, (word, args) in enumerate(final) if word == "USER"]
    assert users, "no USER in the final stage"
    at, user = users[-1]
    uid = user.split(":")[0]
    assert uid.isdigit()
    assert int(uid) != 0
    launch = [i for i, (word, _) in enumerate(final) if word in {"CMD", "ENTRYPOINT"}]
    assert launch
    assert min(launch) > at
    command = " ".join(args for word, args in final if word in {"ENTRYPOINT", "CMD"})
    assert '"agentwatch"' in command
    assert '"store"' in command


def test_dockerfile_installs_the_consumers_extra_only() -> None:
    runs = " ".join(args for word, args in dockerfile_instructions() if word == "RUN")
    assert '".[consumers]"' in runs
    assert "dev" not in re.findall(r"\.\[([^\]]*)\]", runs)[0]
    assert "[dev" not in runs
    assert ",dev" not in runs
    assert "python -m compileall" in runs
    text = " ".join(args for _, args in dockerfile_instructions())
    assert "PYTHONDONTWRITEBYTECODE" not in text


def test_dockerfile_bakes_in_no_secret() -> None:
    for word, args in dockerfile_instructions():
        if word in {"ARG", "ENV"}:
            names = re.findall(r"([A-Za-z_][A-Za-z0-9_]*)=", args) or [args.split()[0]]
            for name in names:
                assert not SECRET_NAME.search(name), f"{word} {name}"
            assert not URL_USERINFO.search(args)
        if word == "COPY":
            assert ".env" not in args


# --- systemd ----------------------------------------------------------------------------------


def unit(path: Path) -> configparser.ConfigParser:
    parser = configparser.ConfigParser(
        strict=True, interpolation=None, delimiters=("=",), comment_prefixes=("#", ";")
    )
    parser.optionxform = str  # type: ignore[assignment,method-assign]
    parser.read_string(path.read_text(encoding="utf-8"), source=str(path))
    return parser


@pytest.mark.parametrize("path", [UP_UNIT, STORE_UNIT, HOST_UNIT], ids=lambda p: p.name)
def test_unit_restarts_and_stops_gracefully(path: Path) -> None:
    u = unit(path)
    assert {"Unit", "Service", "Install"} <= set(u.sections())
    service = u["Service"]
    assert service["Restart"] == "on-failure"
    assert int(service["RestartSec"]) > 0
    assert service["KillSignal"] == "SIGTERM"
    assert int(service["TimeoutStopSec"]) >= 60
    assert service["NoNewPrivileges"] == "yes"
    assert "AF_INET" in service["RestrictAddressFamilies"]
    exec_start = service["ExecStart"]
    assert not URL_USERINFO.search(exec_start)
    assert not SECRET_NAME.search(exec_start)
    assert "://" not in exec_start
    for key, value in service.items():
        assert not URL_USERINFO.search(value), f"{key}: credentials in the unit"


def test_up_unit_is_a_user_unit() -> None:
    u = unit(UP_UNIT)
    service = u["Service"]
    assert service["ExecStart"].endswith("agentwatch up")
    assert service["KillMode"] == "mixed"
    assert u["Install"]["WantedBy"] == "default.target"
    # Options the user manager cannot apply.
    for key in ("User", "Group", "DynamicUser", "ProtectSystem", "ProtectHome", "PrivateTmp"):
        assert key not in service


def test_host_unit_runs_host_mode_with_the_hub_url_from_a_file() -> None:
    u = unit(HOST_UNIT)
    service = u["Service"]
    assert service["ExecStart"].endswith("agentwatch up")  # host mode by AGENTWATCH_HUB_URL
    assert service["EnvironmentFile"].endswith("/host.env")
    assert "AGENTWATCH_HUB_URL=" in HOST_UNIT.read_text()
    assert u["Install"]["WantedBy"] == "default.target"
    for key in ("User", "Group", "DynamicUser", "ProtectSystem", "ProtectHome", "PrivateTmp"):
        assert key not in service


def test_store_unit_is_hardened_and_reads_its_credentials_from_a_file() -> None:
    u = unit(STORE_UNIT)
    service = u["Service"]
    assert service["ExecStart"].endswith("agentwatch store")
    assert service["EnvironmentFile"] == "/etc/agentwatch/store.env"
    assert "AGENTWATCH_NATS_URL" not in service.get("Environment", "")
    assert "AGENTWATCH_CLICKHOUSE_URL" not in service.get("Environment", "")
    assert service.get("DynamicUser") == "yes" or service.get("User") not in {None, "root", "0"}
    expected = {
        "ProtectSystem": "strict",
        "ProtectHome": "yes",
        "PrivateTmp": "yes",
        "PrivateDevices": "yes",
        "ProtectKernelTunables": "yes",
        "ProtectControlGroups": "yes",
        "RestrictNamespaces": "yes",
        "CapabilityBoundingSet": "",
    }
    for key, value in expected.items():
        assert service[key] == value, key
    assert service["StateDirectory"] == "agentwatch"
    assert "AGENTWATCH_DATA_DIR=/var/lib/agentwatch" in service["Environment"]
    assert u["Install"]["WantedBy"] == "multi-user.target"


# --- ClickHouse users and server configuration ----------------------------------------------------


@pytest.fixture(scope="module")
def users() -> ET.Element:
    return ET.parse(USERS_XML).getroot()  # noqa: S314 (this repository's own file)


def grants(users: ET.Element, user: str) -> list[str]:
    node = users.find(f"users/{user}")
    assert node is not None, user
    return [q.text or "" for q in node.findall("grants/query")]


def privileges(grant: str) -> set[str]:
    match = re.fullmatch(r"GRANT (.+) ON agentwatch\.\*", grant.strip())
    assert match, f"not a grant on the agentwatch database: {grant}"
    return {p.strip().upper() for p in match.group(1).split(",")}


def test_users_have_no_clear_password(users: ET.Element) -> None:
    for user in ("agentwatch_store", "agentwatch_reader"):
        node = users.find(f"users/{user}")
        assert node is not None
        password = node.find("password")
        hashed = node.find("password_sha256_hex")
        if password is not None:
            assert password.get("from_env"), f"{user}: password not from the environment"
            assert not (password.text or "").strip()
        else:
            assert hashed is not None, f"{user}: no password"
            assert re.fullmatch(r"[0-9a-f]{64}", (hashed.text or "").strip()) or hashed.get("from_env")


def test_reader_is_read_only_and_bounded(users: ET.Element) -> None:
    node = users.find("users/agentwatch_reader")
    assert node is not None
    profile = users.find(f"profiles/{node.findtext('profile')}")
    assert profile is not None
    assert profile.findtext("readonly") == "1"
    assert profile.findtext("max_execution_time") == "30"
    assert profile.findtext("max_result_rows") == "10000"
    assert node.findtext("quota") == "agentwatch_reader"
    assert users.find("quotas/agentwatch_reader/interval") is not None
    assert [privileges(g) for g in grants(users, "agentwatch_reader")] == [{"SELECT"}]
    # What agentwatch's read-only client sets per query must stay allowed, within the bounds.
    constraints = profile.find("constraints")
    assert constraints is not None
    assert constraints.findtext("max_execution_time/max") == "30"
    assert constraints.findtext("max_memory_usage/max") == profile.findtext("max_memory_usage")
    for setting in ("max_execution_time", "max_result_rows", "result_overflow_mode", "max_memory_usage"):
        assert constraints.find(f"{setting}/changeable_in_readonly") is not None, setting


def test_store_can_migrate_and_insert_but_not_drop_or_alter(users: ET.Element) -> None:
    database_wide = [g for g in grants(users, "agentwatch_store") if g.strip().endswith("ON agentwatch.*")]
    granted = set().union(*(privileges(g) for g in database_wide))
    assert granted == {"SELECT", "INSERT", "CREATE TABLE", "CREATE VIEW", "ALTER ADD COLUMN"}
    for word in ("DROP", "TRUNCATE", "ALL", "OPTIMIZE", "SYSTEM", "ACCESS", "DELETE", "UPDATE", "MODIFY"):
        assert not any(word in p for p in granted), word
    # Besides: DROP VIEW on single views, the ones a migration replaces or drops (a view holds no
    # data), and DROP TABLE on single tables a migration drops, each a copy a materialized view
    # filled from the events (never the events, messages, usage or alerts themselves).
    grantable: dict[str, set[str]] = {"VIEW": set(), "TABLE": set()}
    indexed: set[str] = set()
    requeried: set[str] = set()
    projected: set[str] = set()
    for grant in grants(users, "agentwatch_store"):
        index = re.fullmatch(
            r"GRANT ALTER ADD INDEX, ALTER MATERIALIZE INDEX ON agentwatch\.(\w+)", grant.strip()
        )
        query = re.fullmatch(r"GRANT ALTER VIEW MODIFY QUERY ON agentwatch\.(\w+)", grant.strip())
        projection = re.fullmatch(
            r"GRANT ALTER ADD PROJECTION, ALTER MATERIALIZE PROJECTION, ALTER MODIFY SETTING "
            r"ON agentwatch\.(\w+)",
            grant.strip(),
        )
        if projection:
            projected.add(projection.group(1))
        elif index:
            indexed.add(index.group(1))
        elif query:
            requeried.add(query.group(1))
        elif grant not in database_wide:
            match = re.fullmatch(r"GRANT DROP (VIEW|TABLE) ON agentwatch\.(\w+)", grant.strip())
            assert match, f"only DROP VIEW or DROP TABLE on one name besides the database-wide grant: {grant}"
            grantable[match.group(1)].add(match.group(2))
    # Every statement the store's migrations run needs nothing more than CREATE TABLE or CREATE
    # VIEW, ALTER ... ADD COLUMN (a new column never destroys anything), INSERT (a backfill),
    # replacing or dropping one of those views, or dropping one of those copies.
    dropped: dict[str, set[str]] = {"VIEW": set(), "TABLE": set()}
    filled: set[str] = set()
    index_needed: set[str] = set()
    query_needed: set[str] = set()
    projection_needed: set[str] = set()
    copies: dict[str, str] = {}  # a table filled with every row of another (INSERT ... FROM t FINAL)
    rebuilt: set[str] = set()  # tables exchanged with such a copy: their rows kept, in a new order
    for _, name, sql in migrations():
        for statement in split_statements(sql):
            head = _body(statement).split("\n")[0]
            exchange = re.fullmatch(r"EXCHANGE TABLES (\w+) AND (\w+)", head)
            if exchange:  # needs DROP TABLE on both (ClickHouse's rule for EXCHANGE)
                table, copy = exchange.groups()
                assert copies.get(copy) == table, f"{name}: {head}: {copy} is not a copy of all of {table}"
                rebuilt.add(table)
                dropped["TABLE"] |= {table, copy}
                continue
            copy = re.fullmatch(r"INSERT INTO (\w+)", head)
            whole = re.search(r"\bFROM (\w+) FINAL;?\s*$", _body(statement))
            if copy and whole:
                copies[copy.group(1)] = whole.group(1)
            view = re.fullmatch(r"CREATE OR REPLACE VIEW (\w+) AS", head)
            drop = re.fullmatch(r"DROP (VIEW|TABLE) IF EXISTS (\w+)", head)
            if view:
                dropped["VIEW"].add(view.group(1))
                continue
            if drop:
                assert drop.group(1) == "VIEW" or drop.group(2) in filled | set(copies), (
                    f"{name}: {head} drops a table no materialized view filled"
                )
                dropped[drop.group(1)].add(drop.group(2))
                continue
            index = re.fullmatch(r"ALTER TABLE (\w+) (ADD INDEX IF NOT EXISTS|MATERIALIZE INDEX) .*", head)
            if index:  # an index is derived from the rows: adding or building one loses nothing
                index_needed.add(index.group(1))
                continue
            projection = re.fullmatch(
                r"ALTER TABLE (\w+) (ADD PROJECTION IF NOT EXISTS|MATERIALIZE PROJECTION|MODIFY SETTING) .*",
                head,
            )
            if projection:  # a projection is derived from the rows (and the setting it needs)
                assert "MODIFY SETTING deduplicate_merge_projection_mode" in head or "PROJECTION" in head, (
                    head
                )
                projection_needed.add(projection.group(1))
                continue
            modify = re.fullmatch(r"ALTER TABLE (\w+) MODIFY QUERY", head)
            if modify:  # a materialized view's query changed in place: it holds no rows
                assert modify.group(1).endswith("_mv"), f"{name}: {head} is not a materialized view's"
                query_needed.add(modify.group(1))
                continue
            mv = re.fullmatch(r"CREATE MATERIALIZED VIEW IF NOT EXISTS \w+ TO (\w+) AS", head)
            if mv:
                filled.add(mv.group(1))
            assert head.startswith(
                (
                    "CREATE TABLE IF NOT EXISTS",
                    "CREATE VIEW IF NOT EXISTS",
                    "CREATE MATERIALIZED VIEW IF NOT EXISTS",
                    "INSERT INTO ",
                )
            ) or re.fullmatch(r"ALTER TABLE \w+ ADD COLUMN IF NOT EXISTS .*", head), (
                f"{name}: {head} needs another privilege for agentwatch_store"
            )
    assert dropped == grantable
    assert index_needed == indexed == {"events", "call_rollup"}
    assert query_needed == requeried == {"usage_in_mv", "events_in_mv", "session_totals_usage_mv"}
    assert projection_needed == projected == {"call_rollup"}
    assert dropped["TABLE"] == {"call_events", "agent_rollup", "cost_by_agent", "usage", "usage_by_hour"}
    kept = {"events", "messages", "message_envelopes", "usage", "alerts", "dead_letters"}
    # usage is rebuilt in a new order (018), every row kept: never dropped otherwise.
    assert rebuilt == {"usage"}
    assert not (dropped["TABLE"] - rebuilt) & kept


def _body(statement: str) -> str:
    code = [line for line in statement.splitlines() if not line.lstrip().startswith("--")]
    text = "\n".join(code)
    heads = tuple(text.find(word) for word in ("CREATE", "ALTER", "INSERT", "DROP", "EXCHANGE"))
    return text[min(i for i in heads if i >= 0) :]


def test_server_config_has_the_cluster_macros() -> None:
    root = ET.parse(CONFIG_XML).getroot()  # noqa: S314 (this repository's own file)
    assert root.tag == "clickhouse"
    macros = root.find("macros")
    assert macros is not None
    assert {m.tag for m in macros} == {"cluster", "shard", "replica"}
    assert root.findtext("http_port") == "8123"
    assert "MODIFY TTL" in CONFIG_XML.read_text(encoding="utf-8")
