"""The store's ClickHouse schema: numbered SQL migrations and retention.

The schema lives in `schema/NNN_name.sql` next to this module (shipped in the wheel), applied in
version order and recorded in `schema_migrations`. Every statement is idempotent (`IF NOT
EXISTS`) and names its tables unqualified, so it lands in the client's current database: the
same code serves embedded chDB (`clickhouse_connect.get_client(dsn="chdb:///dir")`) and a
ClickHouse server over HTTP.

A file holds one or more statements, each ending with a semicolon at the end of a line; a
semicolon anywhere else (inside a line, in a string, in a comment) does not split. A change to
an applied file is never re-applied: add a new file (`CREATE OR REPLACE VIEW ...`, `ALTER ...`).
"""

from __future__ import annotations

import re
from importlib.resources import files
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Mapping
    from importlib.resources.abc import Traversable

    from clickhouse_connect.driver.client import Client

SCHEMA_DIR: Traversable = files("agentwatch.store").joinpath("schema")

MIGRATIONS_TABLE = "schema_migrations"
# Tables whose rows expire after the retention period (apply_migrations / set_retention), each
# with the time column its TTL counts from: the raw events and messages, call_rollup (010), one
# row per tool call, and loose_calls (017), the calls not paired in one hour. The other rollups
# hold a few rows per hour, agent or session: kept.
RETENTION_TABLES: Mapping[str, str] = {
    "events": "timestamp",
    "messages": "timestamp",
    "call_rollup": "hour",
    "loose_calls": "hour",
}

# Created before anything else: it records which files were applied. ReplacingMergeTree on
# version, so two processes applying the same file at once still leave one row per version.
_MIGRATIONS_DDL = f"""CREATE TABLE IF NOT EXISTS {MIGRATIONS_TABLE}
(
    version UInt32,
    name String,
    applied_at DateTime DEFAULT now()
)
ENGINE = ReplacingMergeTree
ORDER BY version"""

_FILE_RE = re.compile(r"^(\d+)_([A-Za-z0-9_]+)\.sql$")
_TTL_RE = re.compile(r"\bTTL\s+(.*?)(?:\s+SETTINGS\s|$)", re.DOTALL)


def split_statements(sql: str) -> list[str]:
    """The statements of one migration file: split at a `;` that ends a line (outside a `--`
    comment line); comment-only and empty chunks are dropped."""
    statements: list[str] = []
    current: list[str] = []
    for line in sql.splitlines():
        current.append(line)
        stripped = line.rstrip()
        if stripped.endswith(";") and not stripped.lstrip().startswith("--"):
            current[-1] = stripped[:-1]
            _keep(statements, current)
            current = []
    _keep(statements, current)
    return statements


def _keep(statements: list[str], lines: list[str]) -> None:
    code = [line for line in lines if line.strip() and not line.strip().startswith("--")]
    if code:
        statements.append("\n".join(lines).strip())


def migrations() -> list[tuple[int, str, str]]:
    """(version, name, SQL text) of every schema file, in version order; the name is the file's
    stem (`001_events`)."""
    found: list[tuple[int, str, str]] = []
    for entry in SCHEMA_DIR.iterdir():
        match = _FILE_RE.match(entry.name)
        if match is None or not entry.is_file():
            continue
        found.append((int(match.group(1)), entry.name[:-4], entry.read_text(encoding="utf-8")))
    found.sort()
    versions = [v for v, _, _ in found]
    if len(set(versions)) != len(versions):
        raise RuntimeError(f"two schema files share a version: {sorted(versions)}")
    return found


def applied_versions(client: Client) -> set[int]:
    """Versions recorded in schema_migrations (which must exist)."""
    rows = client.query("SELECT DISTINCT version FROM schema_migrations").result_rows
    return {int(row[0]) for row in rows}


def apply_migrations(client: Client, retention_days: int = 0) -> list[str]:
    """Apply every schema file not yet recorded in schema_migrations, in order, record each, and
    set the retention of events and messages (0: keep forever). Returns the names applied.

    Safe on every start, and when two stores start at once: each statement is idempotent and a
    file recorded twice is still one version.
    """
    if retention_days < 0:
        raise ValueError(f"retention_days must be 0 (forever) or positive, not {retention_days}")
    client.command(_MIGRATIONS_DDL)
    done = applied_versions(client)
    applied: list[str] = []
    for version, name, sql in migrations():
        if version in done:
            continue
        for statement in split_statements(sql):
            client.command(statement)
        client.insert(
            MIGRATIONS_TABLE,
            [[version, name]],
            column_names=["version", "name"],
            column_type_names=["UInt32", "String"],
        )
        applied.append(name)
    set_retention(client, retention_days)
    return applied


def table_ttl(client: Client, table: str) -> str:
    """The table's TTL expression as ClickHouse formats it, '' when it has none."""
    rows = client.query(
        "SELECT engine_full FROM system.tables WHERE database = currentDatabase() AND name = {t:String}",
        parameters={"t": table},
    ).result_rows
    if not rows:
        raise LookupError(f"no table {table!r} in the current database")
    match = _TTL_RE.search(str(rows[0][0]))
    return match.group(1).strip() if match else ""


def set_retention(client: Client, days: int) -> None:
    """Rows of events and messages (and of call_rollup) expire `days` days after their timestamp;
    0 removes the TTL.

    A table whose TTL already says so is left alone: changing a TTL rewrites the table's parts.
    """
    for table, column in RETENTION_TABLES.items():
        current = table_ttl(client, table)
        if days > 0:
            if current.replace(" ", "") == f"toDateTime({column})+toIntervalDay({days})":
                continue
            client.command(f"ALTER TABLE {table} MODIFY TTL toDateTime({column}) + INTERVAL {int(days)} DAY")
        elif current:
            client.command(f"ALTER TABLE {table} REMOVE TTL")
