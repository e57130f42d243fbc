"""The store's schema for a ClickHouse cluster, generated from the single-node migrations.

    python -m agentwatch.store.cluster > deploy/clickhouse/schema-cluster.sql

The migrations (`schema/NNN_name.sql`) stay the one source of every table and view. Each of their
statements (migrations.split_statements) goes through one of a few explicit rules; a statement
that fits none raises ClusterSchemaError naming it, rather than emitting something wrong:

- `CREATE TABLE IF NOT EXISTS t (...) ENGINE = <X>MergeTree[(args)] ...` becomes the replicated
  local table `t_local` (`Replicated<X>MergeTree('/clickhouse/tables/{shard}/{database}/t',
  '{replica}'[, args])`, the rest of the statement as it is) and a Distributed table `t` over it,
  so the store and every query keep the single-node names. The sharding key is SHARDING_KEYS[t]:
  required for an engine that collapses the rows of one sorting key (Replacing, Summing, ...),
  whose copies must meet on one shard; `rand()` for a plain MergeTree.
- `CREATE TABLE IF NOT EXISTS t (...) ENGINE = Null`: the same table on every node.
- `CREATE VIEW IF NOT EXISTS v` and `CREATE OR REPLACE VIEW v`: the same view on every node; it
  reads the Distributed tables, which carry the single-node names.
- `CREATE MATERIALIZED VIEW IF NOT EXISTS v TO t` reading only Null tables: the same view on every
  node; it writes through the Distributed `t`, so each row lands on the shard of its key.
- `CREATE MATERIALIZED VIEW IF NOT EXISTS v TO t` reading only sharded tables (a rollup of
  `events`): on every node, reading the local tables (`FROM events_local`) and writing into the
  local `t_local`, so each shard rolls up its own rows; the views over a rollup merge its states
  (`-Merge`, GROUP BY), so a key present on several shards still gives one answer.
- `INSERT INTO t SELECT ...` (a backfill of rows stored before a rollup existed): left out. A new
  cluster has nothing to backfill; on one with history, run the migration's INSERT by hand.
- `EXCHANGE TABLES t AND u` (a table rebuilt in a new order: `u` made with t's columns, filled
  from `t FINAL`, exchanged, then dropped; 018 rebuilds `usage`): left out with its backfill, so
  a cluster keeps the order its tables were created with (its queries answer the same, only a
  window of them reads more). To rebuild one with its history, run the migration's INSERT into
  `u` and an `EXCHANGE TABLES t_local AND u_local ON CLUSTER` by hand before the DROP.
- `ALTER TABLE t ADD COLUMN ...[, ADD COLUMN ...]`: on `t_local` and on the Distributed `t` (on
  `t` alone for a Null table), each `ADD COLUMN` made `IF NOT EXISTS`.
- `ALTER TABLE v MODIFY QUERY SELECT ...` of a materialized view that reads Null tables: the same
  on every node.
- `ALTER TABLE t ADD INDEX IF NOT EXISTS ...` and `ADD PROJECTION IF NOT EXISTS ...`: on `t_local`
  alone (a Distributed table holds no rows to index). `ALTER TABLE t MATERIALIZE INDEX|PROJECTION
  ...` (building it for the rows stored before) is left out like a backfill: on a cluster with
  history, run it by hand on `t_local`. `ALTER TABLE t MODIFY SETTING ...`: on `t_local` alone
  (the merge settings are the local table's).

Every statement gets `ON CLUSTER '{cluster}'` and is idempotent, so the whole file can be applied
again after a new migration. Keywords are matched as the migrations write them: upper case.
"""

from __future__ import annotations

import argparse
import itertools
import re
import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from agentwatch.store.migrations import RETENTION_TABLES, migrations, split_statements

OUTPUT = "deploy/clickhouse/schema-cluster.sql"
COMMAND = f"python -m agentwatch.store.cluster > {OUTPUT}"
DEFAULT_DATABASE = "agentwatch"
ON_CLUSTER = "ON CLUSTER '{cluster}'"
LOCAL_SUFFIX = "_local"

# How each sharded table spreads over the shards. A redelivered event or message has the same id,
# so both copies land on one shard and its ReplacingMergeTree collapses them there: `FINAL` (which
# the views use) is applied per shard, which is therefore exact. Do not shard these by anything
# else. A plain MergeTree table (dead_letters) has nothing to collapse and needs no entry: rand().
SHARDING_KEYS: Mapping[str, str] = {
    "events": "cityHash64(id)",
    "messages": "cityHash64(id)",
    # The copies of one API message (read again, sent again, imported) share its session, and a
    # session's cost-state records their session: one shard each.
    "usage": "cityHash64(session_id)",
    "usage_by_hour": "cityHash64(session_id)",  # usage rebuilt in time order (018)
    # The firing and resolved rows of one alert share its id.
    "alerts": "cityHash64(id)",
    "cost_states": "cityHash64(session_id)",
    # Claude Code's OpenTelemetry records (014): a record posted twice has the same id.
    "otel_logs": "cityHash64(id)",
    "otel_metrics": "cityHash64(id)",
    "otel_spans": "cityHash64(id)",
    # Rollups (009): written per shard by their materialized views and read with -Merge over all
    # shards, so the key only spreads the rows the backfill inserts through the Distributed table.
    "event_ids": "cityHash64(id)",
    "tool_hourly": "cityHash64(tool)",
    "tool_daily": "cityHash64(tool)",
    "session_rollup": "cityHash64(session_id)",
    "session_seq_rollup": "cityHash64(session_id)",
    "agent_rollup": "cityHash64(agent)",
    "edge_hourly": "cityHash64(from_agent)",
    "call_events": "cityHash64(id)",
    # Its view writes each shard's events to that shard, so a call and its result may be on two
    # shards: tool_calls_since then pairs the two halves over the Distributed table (exact, but
    # not folded in advance).
    "call_rollup": "cityHash64(session_id, tool_use_id)",
    # 017: the same. Its view too writes each shard's events to that shard: a call and its result
    # cancel only where both are, so on a cluster it keeps most calls (tool_calls stays exact, but
    # reads them all).
    "loose_calls": "cityHash64(session_id, tool_use_id)",
    # Filled through their Distributed tables (their views read the Null usage_in).
    "cost_hourly": "cityHash64(agent)",
    "session_cost": "cityHash64(session_id)",
    # 021: cost_by_owner from usage_in (Distributed), activity_by_owner per shard from events.
    "cost_by_owner": "cityHash64(repo)",
    "activity_by_owner": "cityHash64(repo)",
    "session_owner": "cityHash64(session_id)",
    # 019: fed by usage_in (through the Distributed table) and by cost_states (on the shard of
    # its session): one session's rows meet on one shard, where FINAL folds them.
    "session_totals": "cityHash64(session_id)",
    "cost_by_agent": "cityHash64(agent)",
    "cost_by_day": "cityHash64(team)",
    "cost_by_harness": "cityHash64(harness)",  # 013
    # 012: per agent (host, scope, name); the events' view writes per shard, messages and usage
    # through the Distributed tables.
    "agent_key_rollup": "cityHash64(host, scope, agent)",
    "agent_cost_rollup": "cityHash64(host, scope, agent)",
    # 020: the live window's scopes per hour; events' view writes per shard, the others through
    # the Distributed table, and every question reads it with max() per scope.
    "scope_hours": "cityHash64(host, scope)",
}

# MergeTree engines the generator replicates. All but MergeTree merge the rows of one sorting key
# into one, which only works when they are on one shard: those need a SHARDING_KEYS entry.
MERGE_TREES = frozenset(
    {
        "MergeTree",
        "ReplacingMergeTree",
        "SummingMergeTree",
        "AggregatingMergeTree",
        "CollapsingMergeTree",
        "VersionedCollapsingMergeTree",
    }
)
# What may follow the engine of a MergeTree table (carried over to the local table as it is).
TABLE_CLAUSES = ("PARTITION BY", "ORDER BY", "PRIMARY KEY", "SAMPLE BY", "TTL", "SETTINGS", "COMMENT")

_TABLE = re.compile(
    r"CREATE TABLE IF NOT EXISTS (?P<name>\w+)\s*\((?P<columns>.*)\)\s*"
    r"ENGINE\s*=\s*(?P<spec>(?P<engine>\w+)(?:\((?P<args>[^()]*)\))?)(?P<rest>(?:\s.*)?)",
    re.DOTALL,
)
_VIEW = re.compile(
    r"CREATE (?:VIEW IF NOT EXISTS|OR REPLACE VIEW) (?P<name>\w+)(?P<rest>\s+AS\s.*)", re.DOTALL
)
_MATERIALIZED = re.compile(
    r"CREATE MATERIALIZED VIEW IF NOT EXISTS (?P<name>\w+) TO (?P<target>\w+)(?P<rest>\s+AS\s.*)",
    re.DOTALL,
)
_ALTER = re.compile(r"ALTER TABLE (?P<name>\w+)(?P<actions>\s.*)", re.DOTALL)
_DROP = re.compile(r"DROP (?P<kind>TABLE|VIEW) IF EXISTS (?P<name>\w+)")
_ADD_INDEX = re.compile(r"\s*ADD (?:INDEX|PROJECTION) IF NOT EXISTS\s")
_MATERIALIZE_INDEX = re.compile(r"\s*MATERIALIZE (?:INDEX|PROJECTION)\s")
_MODIFY_SETTING = re.compile(r"\s*MODIFY SETTING\s")
_ADD_COLUMN = re.compile(r"ADD COLUMN\s+(?P<exists>IF NOT EXISTS\s+)?\S")
_SOURCE = re.compile(r"\b(?:FROM|JOIN)\s+(\S+)")
_NOT_A_DEFINITION = re.compile(r"\bAS\s+SELECT\b|\bEMPTY\b|\bPOPULATE\b")
_IDENTIFIER = re.compile(r"\w+")


class ClusterSchemaError(ValueError):
    """A migration statement the generator has no rule for (or a rule refuses)."""


@dataclass(frozen=True)
class Statement:
    """One statement of the cluster schema: its comment lines, then its SQL (no semicolon)."""

    sql: str
    comment: str = ""

    def text(self) -> str:
        return f"{self.comment}\n{self.sql};" if self.comment else f"{self.sql};"


@dataclass
class ClusterSchema:
    """The tables and views seen so far, and how each became cluster statements."""

    database: str = DEFAULT_DATABASE
    sharding_keys: Mapping[str, str] = field(default_factory=lambda: dict(SHARDING_KEYS))
    sharded: dict[str, str] = field(default_factory=dict)  # table -> its replicated engine
    everywhere: set[str] = field(default_factory=set)  # tables on every node (Null)
    views: dict[str, str] = field(default_factory=dict)  # view -> "view" / "materialized view to t"
    dropped: set[str] = field(default_factory=set)  # sharded tables a later migration dropped

    def names(self) -> set[str]:
        local = {table + LOCAL_SUFFIX for table in self.sharded}
        return set(self.sharded) | local | self.everywhere | set(self.views)

    def transform(self, code: str) -> list[Statement]:
        """The cluster statements of one migration statement (without its leading comments)."""
        if code.startswith("CREATE TABLE "):
            return self._table(code)
        if code.startswith(("CREATE VIEW ", "CREATE OR REPLACE VIEW ")):
            return self._view(code)
        if code.startswith("CREATE MATERIALIZED VIEW "):
            return self._materialized_view(code)
        if code.startswith("ALTER TABLE "):
            return self._alter(code)
        if code.startswith(("INSERT INTO ", "EXCHANGE TABLES ")):
            return []  # a backfill, a rebuild: see the module's docstring
        if code.startswith("DROP "):
            return self._drop(code)
        raise ClusterSchemaError("no rule for this kind of statement")

    def _new_name(self, name: str, *also: str) -> None:
        for taken in (name, *also):
            if taken in self.names():
                raise ClusterSchemaError(f"{taken} already exists (from an earlier statement)")

    def _table(self, code: str) -> list[Statement]:
        match = _TABLE.fullmatch(code)
        if match is None:
            raise ClusterSchemaError(
                "a CREATE TABLE the generator knows is `CREATE TABLE IF NOT EXISTS name (columns) "
                "ENGINE = engine[(args)] [clauses]`"
            )
        name, engine, rest = match["name"], match["engine"], match["rest"]
        if _NOT_A_DEFINITION.search(rest):
            raise ClusterSchemaError("a table filled from a SELECT has no rule")
        if engine == "Null":
            if rest.strip() or match["args"] is not None:
                raise ClusterSchemaError("a Null table takes no engine arguments or clauses")
            self._new_name(name)
            self.everywhere.add(name)
            comment = (
                f"-- {name}: on every node (Null keeps nothing); the store inserts into the node it\n"
                "-- talks to, and the materialized views over it write through the Distributed tables."
            )
            return [Statement(_on_cluster(code, match.end("name")), comment)]
        if engine not in MERGE_TREES:
            raise ClusterSchemaError(f"no rule for ENGINE = {engine}: known are Null, {_known_engines()}")
        if rest.strip() and not rest.lstrip().startswith(TABLE_CLAUSES):
            raise ClusterSchemaError(f"after the engine, only {', '.join(TABLE_CLAUSES)}")
        return self._sharded_table(match, code)

    def _sharded_table(self, match: re.Match[str], code: str) -> list[Statement]:
        name, engine, args = match["name"], match["engine"], (match["args"] or "").strip()
        local = name + LOCAL_SUFFIX
        self._new_name(name, local)
        key = self.sharding_keys.get(name)
        if key is None and engine != "MergeTree":
            raise ClusterSchemaError(
                f"{name} is a {engine}, which collapses the rows of one key only on one shard: "
                f"give its sharding key in SHARDING_KEYS (agentwatch.store.cluster)"
            )
        key = key or "rand()"
        replicated = f"Replicated{engine}('/clickhouse/tables/{{shard}}/{{database}}/{name}', '{{replica}}'"
        replicated += f", {args})" if args else ")"
        local_sql = (
            f"{code[: match.start('name')]}{local} {ON_CLUSTER}"
            f"{code[match.end('name') : match.start('spec')]}{replicated}{code[match.end('spec') :]}"
        )
        distributed = (
            f"CREATE TABLE IF NOT EXISTS {name} {ON_CLUSTER} AS {local}\n"
            f"ENGINE = Distributed('{{cluster}}', '{self.database}', '{local}', {key})"
        )
        why = (
            f"the rows a {engine} collapses meet on one shard"
            if engine != "MergeTree"
            else "nothing to collapse, so any shard will do"
        )
        self.sharded[name] = f"Replicated{engine}"
        comment = f"-- {name}: Distributed over {local}, under the single-node name.\n-- By {key}: {why}."
        return [Statement(local_sql), Statement(distributed, comment)]

    def _view(self, code: str) -> list[Statement]:
        match = _VIEW.fullmatch(code)
        if match is None:
            raise ClusterSchemaError("a view the generator knows is `CREATE VIEW IF NOT EXISTS name AS ...`")
        name = match["name"]
        if code.startswith("CREATE OR REPLACE VIEW "):
            if name in self.names() and self.views.get(name) != "view":
                raise ClusterSchemaError(f"{name} exists and is not a plain view")
        else:
            self._new_name(name)
        self.views[name] = "view"
        return [Statement(_on_cluster(code, match.end("name")))]

    def _materialized_view(self, code: str) -> list[Statement]:
        match = _MATERIALIZED.fullmatch(code)
        if match is None:
            raise ClusterSchemaError(
                "a materialized view the generator knows is "
                "`CREATE MATERIALIZED VIEW IF NOT EXISTS name TO table AS SELECT ...`"
            )
        name, target = match["name"], match["target"]
        if target not in self.sharded and target not in self.everywhere:
            raise ClusterSchemaError(f"its target {target} is not a table created before it")
        sources = [source for source in _SOURCE.findall(match["rest"]) if source != "("]  # not subqueries
        if sources and all(source in self.sharded for source in sources) and target in self.sharded:
            return self._local_materialized_view(name, target, match["rest"])
        unknown = [source for source in sources if source not in self.everywhere]
        if not sources or unknown:
            raise ClusterSchemaError(
                "a materialized view must read only tables on every node (Null), which the store "
                f"inserts into on the node it talks to; it reads {', '.join(unknown) or 'nothing known'}"
            )
        self._new_name(name)
        self.views[name] = f"materialized view to {target}"
        return [Statement(_on_cluster(code, match.end("name")))]

    def _local_materialized_view(self, name: str, target: str, rest: str) -> list[Statement]:
        self._new_name(name)
        self.views[name] = f"materialized view to {target}{LOCAL_SUFFIX}, per shard"
        body = _SOURCE.sub(
            lambda m: m.group(0) + LOCAL_SUFFIX if m.group(1) in self.sharded else m.group(0), rest
        )
        sql = f"CREATE MATERIALIZED VIEW IF NOT EXISTS {name} {ON_CLUSTER} TO {target}{LOCAL_SUFFIX}{body}"
        comment = f"-- {name}: each shard rolls up its own rows into {target}{LOCAL_SUFFIX}."
        return [Statement(sql, comment)]

    def _alter(self, code: str) -> list[Statement]:
        match = _ALTER.fullmatch(code)
        if match is None:
            raise ClusterSchemaError("an ALTER the generator knows is `ALTER TABLE name ADD COLUMN ...`")
        name, actions = match["name"], match["actions"]
        if actions.lstrip().startswith("MODIFY QUERY"):
            return self._modify_query(name, actions)
        if name not in self.sharded and name not in self.everywhere:
            raise ClusterSchemaError(f"{name} is not a table created by an earlier statement")
        if _MATERIALIZE_INDEX.match(actions):
            return []  # a backfill: see the module's docstring
        if _ADD_INDEX.match(actions) or _MODIFY_SETTING.match(actions):
            if name not in self.sharded:
                raise ClusterSchemaError(f"an index or setting on {name}, which holds no rows of its own")
            return [Statement(f"ALTER TABLE {name}{LOCAL_SUFFIX} {ON_CLUSTER}{actions}")]
        actions = _columns_if_not_exists(actions)
        if name in self.everywhere:
            return [Statement(f"ALTER TABLE {name} {ON_CLUSTER}{actions}")]
        local = name + LOCAL_SUFFIX
        return [
            Statement(f"ALTER TABLE {local} {ON_CLUSTER}{actions}"),
            Statement(
                f"ALTER TABLE {name} {ON_CLUSTER}{actions}",
                f"-- The same column on the Distributed {name}, whose columns are {local}'s.",
            ),
        ]

    def _modify_query(self, name: str, actions: str) -> list[Statement]:
        """A new query for a materialized view on every node (one that reads Null tables)."""
        kind = self.views.get(name, "")
        if not kind.startswith("materialized view to ") or kind.endswith("per shard"):
            raise ClusterSchemaError(f"{name} is not a materialized view that reads tables on every node")
        sources = [source for source in _SOURCE.findall(actions) if source != "("]
        if not sources or any(source not in self.everywhere for source in sources):
            raise ClusterSchemaError(f"the new query of {name} must read only tables on every node (Null)")
        return [Statement(f"ALTER TABLE {name} {ON_CLUSTER}{actions}")]

    def _drop(self, code: str) -> list[Statement]:
        match = _DROP.fullmatch(code)
        if match is None:
            raise ClusterSchemaError("a drop the generator knows is `DROP TABLE|VIEW IF EXISTS name`")
        kind, name = match["kind"], match["name"]
        if kind == "VIEW":
            if name not in self.views:
                raise ClusterSchemaError(f"{name} is not a view created by an earlier statement")
            del self.views[name]
            return [Statement(f"DROP VIEW IF EXISTS {name} {ON_CLUSTER}")]
        if name in self.everywhere:
            self.everywhere.discard(name)
            return [Statement(f"DROP TABLE IF EXISTS {name} {ON_CLUSTER}")]
        if name not in self.sharded:
            raise ClusterSchemaError(f"{name} is not a table created by an earlier statement")
        del self.sharded[name]
        self.dropped.add(name)
        # SYNC: the replicas' coordination paths go with the tables, so that applying the whole
        # file again (which creates the table, then drops it here) finds them free.
        return [
            Statement(f"DROP TABLE IF EXISTS {name} {ON_CLUSTER} SYNC"),
            Statement(f"DROP TABLE IF EXISTS {name}{LOCAL_SUFFIX} {ON_CLUSTER} SYNC"),
        ]


def _known_engines() -> str:
    return ", ".join(sorted(MERGE_TREES))


def _on_cluster(code: str, at: int) -> str:
    """`code` with ON CLUSTER inserted at `at` (right after the table or view name)."""
    return f"{code[:at]} {ON_CLUSTER}{code[at:]}"


def _columns_if_not_exists(actions: str) -> str:
    """The actions of an ALTER TABLE, each an `ADD COLUMN` made `ADD COLUMN IF NOT EXISTS`."""
    bounds = [-1, *_top_level_commas(actions), len(actions)]
    out = actions
    for start, end in reversed(list(itertools.pairwise(bounds))):
        at = _skip_blanks_and_comments(actions, start + 1)
        found = _ADD_COLUMN.match(actions, at, end)
        if found is None:
            head = actions[at:end].strip().split("\n")[0]
            raise ClusterSchemaError(f"only ADD COLUMN has a rule in an ALTER TABLE, not `{head}`")
        if found["exists"] is None:
            insert = at + len("ADD COLUMN ")
            out = f"{out[:insert]}IF NOT EXISTS {out[insert:]}"
    return out


def _skip_blanks_and_comments(text: str, at: int) -> int:
    while at < len(text):
        if text[at].isspace():
            at += 1
        elif text.startswith("--", at):
            newline = text.find("\n", at)
            at = len(text) if newline < 0 else newline + 1
        else:
            break
    return at


def _top_level_commas(text: str) -> list[int]:
    """Offsets of the commas of `text` outside brackets, quotes and `--` comments."""
    found: list[int] = []
    depth, at, quote = 0, 0, ""
    while at < len(text):
        char = text[at]
        if quote:
            if char == "\\":
                at += 1
            elif char == quote:
                quote = ""
        elif text.startswith("--", at):
            newline = text.find("\n", at)
            at = len(text) if newline < 0 else newline
            continue
        elif char in "'\"`":
            quote = char
        elif char in "([":
            depth += 1
        elif char in ")]":
            depth -= 1
        elif char == "," and depth == 0:
            found.append(at)
        at += 1
    return found


def _split_comments(statement: str) -> tuple[str, str]:
    """(the leading comment lines, the code from its first line on) of one migration statement."""
    lines = statement.splitlines()
    first = next(i for i, line in enumerate(lines) if line.strip() and not line.lstrip().startswith("--"))
    return "\n".join(lines[:first]).strip(), "\n".join(lines[first:]).strip()


def _section(name: str) -> str:
    return f"-- {name} ".ljust(100, "-")


def cluster_schema(
    source: Iterable[tuple[int, str, str]] | None = None,
    *,
    database: str = DEFAULT_DATABASE,
    sharding_keys: Mapping[str, str] = SHARDING_KEYS,
) -> str:
    """The cluster schema (the text of schema-cluster.sql) of the migrations: by default the
    store's own (migrations()), else `(version, name, SQL text)` in the order given."""
    if not _IDENTIFIER.fullmatch(database):
        raise ClusterSchemaError(f"database name {database!r}: letters, digits and _ only")
    schema = ClusterSchema(database=database, sharding_keys=sharding_keys)
    found = migrations() if source is None else list(source)
    sections: list[str] = []
    for _, name, sql in found:
        statements: list[str] = []
        for number, statement in enumerate(split_statements(sql), start=1):
            comment, code = _split_comments(statement)
            try:
                generated = schema.transform(code)
            except ClusterSchemaError as exc:
                head = code.split("\n")[0]
                raise ClusterSchemaError(f"{name}.sql, statement {number} (`{head}`): {exc}") from exc
            if not generated:
                continue
            first = generated[0]
            joined = f"{comment}\n{first.comment}".strip()
            generated[0] = Statement(first.sql, joined)
            statements.extend(s.text() for s in generated)
        sections.append(_section(name) + "\n" + "\n\n".join(statements))
    unused = sorted(set(sharding_keys) - set(schema.sharded) - schema.dropped)
    if unused:
        raise ClusterSchemaError(f"SHARDING_KEYS names {', '.join(unused)}, which no migration shards")
    names = [name for _, name, _ in found]
    return _header(schema, names) + "\n\n" + "\n\n".join(sections) + "\n"


def _inventory(schema: ClusterSchema) -> list[str]:
    rows: list[tuple[str, str]] = []
    for table, engine in schema.sharded.items():
        key = schema.sharding_keys.get(table, "rand()")
        rows.append((table + LOCAL_SUFFIX, f"{engine}, one copy per replica of a shard"))
        rows.append((table, f"Distributed over {table}{LOCAL_SUFFIX}, sharded by {key}"))
    rows += [(table, "Null, on every node (keeps nothing)") for table in sorted(schema.everywhere)]
    rows += list(schema.views.items())
    width = max(len(name) for name, _ in rows) + 2
    return [f"--   {name.ljust(width)}{what}" for name, what in rows]


def _header(schema: ClusterSchema, names: Sequence[str]) -> str:
    command = COMMAND if schema.database == DEFAULT_DATABASE else _command(schema.database)
    span = f"{names[0]} to {names[-1]}" if names else "none"
    ttl = [
        f"--   ALTER TABLE {table}{LOCAL_SUFFIX} {ON_CLUSTER} MODIFY TTL "
        f"toDateTime({column}) + INTERVAL 90 DAY;"
        for table, column in RETENTION_TABLES.items()
    ]
    lines = [
        "-- GENERATED from src/agentwatch/store/schema/*.sql by src/agentwatch/store/cluster.py: do not",
        "-- edit. Change the migrations (or the rules in cluster.py), then regenerate:",
        f"--   {command}",
        "--",
        f"-- agentwatch's schema for a ClickHouse cluster: the single-node migrations ({span}),",
        "-- with replicated local tables and Distributed tables over them under the single-node names, so",
        "-- the store and every query run unchanged: the store inserts into, and queries read, the names",
        "-- without _local.",
        "--",
        *_inventory(schema),
        "--",
        "-- Sharding (SHARDING_KEYS in cluster.py): events and messages by cityHash64(id). A redelivered",
        "-- event has the same id, so both copies land on the same shard and the ReplacingMergeTree",
        "-- collapses them there; `FINAL` (which the views use) is applied per shard, which is therefore",
        "-- exact. Do not shard them by anything else.",
        "--",
        "-- Columns are exactly the single-node ones: tests/integration/test_deploy_cluster_schema.py",
        "-- applies this file to an embedded engine, engines rewritten to their single-node forms, and",
        "-- compares system.columns; the views are the single-node views with ON CLUSTER added.",
        "--",
        "-- Needs: remote_servers with the cluster, ClickHouse Keeper (or ZooKeeper), and the macros",
        "-- {cluster}, {shard}, {replica} on every node (deploy/clickhouse/config.d/agentwatch.xml).",
        "-- Apply as an administrator, from any node:",
        "--",
        f'--   clickhouse-client --query "CREATE DATABASE IF NOT EXISTS {schema.database} {ON_CLUSTER}"',
        f"--   clickhouse-client --database {schema.database} --multiquery < {OUTPUT}",
        "--",
        "-- Every statement is idempotent (IF NOT EXISTS, OR REPLACE): after a new migration, regenerate",
        f"-- and apply the whole file again. The Distributed tables name the database `{schema.database}`:",
        "-- for another, regenerate with --database NAME.",
        "--",
        "-- The store still runs its migrations at start (apply_migrations): every CREATE is",
        "-- IF NOT EXISTS, so against this schema they find the tables and change nothing (they only",
        "-- create the small local `schema_migrations` table on the node the store talks to).",
        "--",
        "-- Retention: the store's AGENTWATCH_RETENTION_DAYS must stay 0 on a cluster (it would ALTER the",
        "-- Distributed tables, which have no TTL). Set the TTL on the local tables instead, once:",
        "--",
        *ttl,
        "--",
        "-- Statements end with a semicolon at the end of a line, and nowhere else (as in the migrations).",
    ]
    return "\n".join(lines)


def _command(database: str) -> str:
    return f"python -m agentwatch.store.cluster --database {database} > {OUTPUT}"


def main(argv: Sequence[str] | None = None) -> int:
    """Print the cluster schema; 1 with the reason on stderr when a migration has no rule."""
    parser = argparse.ArgumentParser(
        prog="python -m agentwatch.store.cluster",
        description=f"Print the ClickHouse cluster schema generated from the store's migrations "
        f"(regenerate the committed one with: {COMMAND}).",
    )
    parser.add_argument(
        "--database",
        default=DEFAULT_DATABASE,
        help=f"the database the Distributed tables point to (default: {DEFAULT_DATABASE})",
    )
    args = parser.parse_args(argv)
    try:
        text = cluster_schema(database=args.database)
    except ClusterSchemaError as exc:
        print(f"agentwatch.store.cluster: {exc}", file=sys.stderr)
        return 1
    sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
