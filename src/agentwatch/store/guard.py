"""What a reader may run: one read statement, as ClickHouse's own parser sees it.

`readonly=1` keeps a reader from writing tables, DDL and settings changes, but not from
`INTO OUTFILE` (the embedded engine writes the file from the store's process, as the store's
user) nor from `KILL QUERY`. So before a reader's statement runs, the engine parses it
(`EXPLAIN AST`, which executes nothing) and it is refused unless it is a single SELECT (or WITH,
UNION, INTERSECT), SHOW, DESCRIBE, EXISTS or EXPLAIN of a SELECT, with no output clause, format
or settings of its own.

Two things are settled on the text before the engine sees it, because the parse itself would
act on them: a `;` (the embedded engine runs every statement of a text it is given, so a second
one would run during the parse) and the word OUTFILE (text that ends in a FORMAT clause leaves
an `INTO OUTFILE` after it to the EXPLAIN, which then writes its own output to that file). Both
are refused wherever they stand, even inside a string: `char(59)` writes a literal `;`.

Everything else is read from the tree, failing closed: a node this module does not know at the
top is refused.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any, NamedTuple

if TYPE_CHECKING:
    from collections.abc import Mapping

    from clickhouse_connect.driver.client import Client

READS = "readers run one SELECT, WITH, SHOW, DESCRIBE, EXISTS or EXPLAIN"
FORMAT_REFUSED = "refused: a FORMAT clause; `agentwatch sql --format table|csv|json|jsonl` chooses the output"
SETTINGS_REFUSED = "refused: SETTINGS; readers run with the store's own limits"

_OUTFILE = re.compile(r"outfile", re.IGNORECASE)
_FORMAT = re.compile(r"\bformat\b", re.IGNORECASE)

# The top nodes of EXPLAIN AST that only read. SHOW's many forms (tables, databases, columns,
# create, dictionaries, settings, grants, processlist) are all named Show...; EXISTS is Exists...
_SELECT = "SelectWithUnionQuery"
_READ_NODES = frozenset({_SELECT, "DescribeQuery"})
_READ_PREFIXES = ("Show", "Exists")
_EXPLAIN = "Explain"

# Spoken names for what a person most often tries, for the refusal's first words.
_SPOKEN = {
    "KillQueryQuery": "KILL QUERY",
    "SYSTEM": "SYSTEM",
    "Set": "SET",
    "UseQuery": "USE",
    "InsertQuery": "INSERT",
    "CreateQuery": "CREATE",
    "DropQuery": "DROP",
    "AlterQuery": "ALTER",
    "OptimizeQuery": "OPTIMIZE",
    "CheckQuery": "CHECK TABLE",
    "DeleteQuery": "DELETE",
    "UndropQuery": "UNDROP",
    "RenameQuery": "RENAME",
}


class Node(NamedTuple):
    depth: int
    name: str


class Refused(Exception):
    """The statement is not one a reader may run: the message says why and what to do."""


def parse_tree(text: str) -> list[Node]:
    """EXPLAIN AST's lines as (depth, node name). A name or alias holding a newline adds lines
    of its own: they can only add nodes, so every check below stays a refusal when in doubt."""
    nodes = []
    for line in text.split("\n"):
        name = line.lstrip(" ")
        if name.strip():
            nodes.append(Node(len(line) - len(name), name.split(" ", 1)[0]))
    return nodes


def statements(sql: str) -> list[str]:
    """The statements of `sql`, split at semicolons outside quotes and comments; empty ones dropped.

    Hand-written because ClickHouse has no client-side splitter and this must not execute
    anything to find out: a few lines of quote and comment tracking are enough.
    """
    parts: list[str] = []
    start = i = 0
    quote = ""
    while i < len(sql):
        ch = sql[i]
        if quote:
            if ch == "\\":
                i += 1
            elif ch == quote:
                quote = ""
        elif ch in "'\"`":
            quote = ch
        elif sql.startswith("--", i) or ch == "#":
            end = sql.find("\n", i)
            i = len(sql) if end < 0 else end
            continue
        elif sql.startswith("/*", i):
            end = sql.find("*/", i + 2)
            i = len(sql) if end < 0 else end + 2
            continue
        elif ch == ";":
            parts.append(sql[start:i])
            start = i + 1
        i += 1
    parts.append(sql[start:])
    return [p.strip() for p in parts if _has_code(p)]


def _has_code(text: str) -> bool:
    lines = [line.split("--", 1)[0].strip() for line in text.splitlines()]
    return any(line and not line.startswith(("#", "/*")) for line in lines)


def text_refusal(sql: str) -> str | None:
    """What the text alone says against `sql` (one statement, its trailing `;` already gone)."""
    if ";" in sql:
        return (
            "refused: a ';' inside the statement; readers run one statement at a time "
            "(write char(59) for a literal ';')"
        )
    if _OUTFILE.search(sql):
        return (
            "refused: INTO OUTFILE writes a file; readers only read "
            "(`agentwatch sql --format csv ... > FILE`, or `agentwatch export`, write files on your side)"
        )
    return None


def tree_refusal(nodes: list[Node]) -> str | None:
    """What the parse tree says against the statement; None when it only reads."""
    roots = [n for n in nodes if n.depth == 0]
    if not nodes or len(roots) != 1 or nodes[0].depth != 0:
        return f"refused: the statement could not be read as one statement; {READS}"
    return _statement(nodes, 0)


def _statement(nodes: list[Node], base: int) -> str | None:
    root = nodes[0].name
    children = [i for i, n in enumerate(nodes) if n.depth == base + 1]
    if root == _EXPLAIN:
        # EXPLAIN's own options (`EXPLAIN indexes = 1 ...`) come first as a Set; then the
        # statement explained, which must be a SELECT; nothing may follow it.
        rest = children[1:] if children and nodes[children[0]].name == "Set" else children
        if not rest:
            return f"refused: EXPLAIN of nothing; {READS}"
        first = rest[0]
        end = rest[1] if len(rest) > 1 else len(nodes)
        if nodes[first].name != _SELECT:
            return f"refused: EXPLAIN of {_spoken(nodes[first].name)}; EXPLAIN reads only a SELECT"
        inner = _statement(nodes[first:end], base + 1)
        if inner is not None:
            return inner
        return _clauses([nodes[i] for i in rest[1:]])
    if root not in _READ_NODES and not root.startswith(_READ_PREFIXES):
        return f"refused: {_spoken(root)} is not a read; {READS}"
    if any(n.name == "Set" for n in nodes[1:]):
        return SETTINGS_REFUSED
    if root == _SELECT:
        return _clauses([nodes[i] for i in children[1:]])
    return None


def _clauses(after: list[Node]) -> str | None:
    """The nodes after a SELECT's body: its output clause, format and settings, if any."""
    for node in after:
        if node.name == "Literal":
            return text_refusal("outfile")
        if node.name == "Identifier":
            return FORMAT_REFUSED
        if node.name == "Set":
            return SETTINGS_REFUSED
        return f"refused: a clause {node.name} after the statement; {READS}"
    return None


def _spoken(name: str) -> str:
    if name in _SPOKEN:
        return _SPOKEN[name]
    words = re.sub(r"(?<!^)(?=[A-Z])", " ", name.removesuffix("Query")).upper()
    return words or "this statement"


def check(client: Client, sql: str, params: Mapping[str, Any] | None) -> None:
    """Raise Refused unless `sql` (one statement, no trailing `;`) only reads; raise the engine's
    own error when it cannot parse it."""
    said = text_refusal(sql)
    if said is not None:
        raise Refused(said)
    raw = client.raw_query(f"EXPLAIN AST {sql}", parameters=dict(params) if params else None)
    said = tree_refusal(parse_tree(raw.decode("utf-8", "replace")))
    if said is not None:
        raise Refused(said)


def hint(sql: str, message: str) -> str:
    """The engine's message, with what a person meant when a FORMAT of theirs broke the syntax
    (SHOW ... FORMAT CSV parses; the client's own FORMAT after it then does not)."""
    if "Cannot modify" in message and "readonly mode" in message:
        return SETTINGS_REFUSED
    if "Syntax error" in message and _FORMAT.search(sql):
        return f"{message} ({FORMAT_REFUSED})"
    return message


def is_refusal(message: str) -> bool:
    """The message is this module's refusal, not the engine's."""
    return message.startswith("refused:")
