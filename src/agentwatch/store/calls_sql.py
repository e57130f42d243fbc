"""The store's side of a tool call's outcome (agentwatch.agents.CALL_OUTCOMES), as SQL.

    python -m agentwatch.store.calls_sql > src/agentwatch/store/schema/022_call_outcomes.sql

call_rollup keeps a call's outcome as a number, its position in agents.CALL_OUTCOMES; the
`tool_calls` and `tool_calls_since` views name it (`status`). This module writes the migration
that defines both views again: each query as the migration that last defined it has it (SOURCES,
which say how a call is paired with its result), its outcome names written from agents.py.
tests/unit/test_call_outcomes.py fails when the file is not what this prints. An applied
migration never changes: a later change of the names goes into a new file made the same way
(point OUTPUT at it).
"""

from __future__ import annotations

import re
import sys

from agentwatch import agents
from agentwatch.store.agents_sql import quote
from agentwatch.store.migrations import SCHEMA_DIR, split_statements

OUTPUT = "src/agentwatch/store/schema/022_call_outcomes.sql"
COMMAND = f"python -m agentwatch.store.calls_sql > {OUTPUT}"
# Each view that names an outcome, and the migration that last defined its query.
SOURCES = (("tool_calls", "018_time_windows.sql"), ("tool_calls_since", "010_call_rollup.sql"))
# A list of names indexed by an outcome number: `['running', ...][outcome + 1]`.
_NAMES = re.compile(r"\[(?:'[a-z_]+', )*'[a-z_]+'\]\[(?P<outcome>[^\[\]]+) \+ 1\]")


def status_sql(outcome: str) -> str:
    """A call's status in SQL from its outcome number (an SQL expression): agents.CALL_OUTCOMES."""
    names = ", ".join(quote(name) for name in agents.CALL_OUTCOMES)
    return f"[{names}][{outcome} + 1]"


def view_sql(view: str, source: str) -> str:
    """`CREATE OR REPLACE VIEW view` as `source` writes it, without its comments, each outcome
    named from agents.CALL_OUTCOMES."""
    head = f"CREATE OR REPLACE VIEW {view} AS"
    for statement in split_statements(SCHEMA_DIR.joinpath(source).read_text(encoding="utf-8")):
        code = "\n".join(line for line in statement.splitlines() if not line.startswith("--"))
        if code.startswith(head + "\n"):
            return _NAMES.sub(lambda found: status_sql(found.group("outcome")), code)
    raise LookupError(f"{source} defines no view {view}")


def render() -> str:
    """The whole migration file."""
    lines = [
        "-- GENERATED from agentwatch/agents.py (CALL_OUTCOMES: a tool call's outcome by its number in",
        "-- call_rollup) by",
        f"--     {COMMAND}",
        "-- Edit that table, not this file, and regenerate; a test fails when this is not current.",
        "--",
        "-- The views that name an outcome, each query as the migration that last defined it has it",
        f"-- ({', '.join(f'{v}: {s}' for v, s in SOURCES)}),",
        f"-- with the names written from that table: {', '.join(agents.CALL_OUTCOMES)}.",
    ]
    views = [view_sql(view, source) + ";" for view, source in SOURCES]
    return "\n".join(lines) + "\n\n" + "\n\n".join(views) + "\n"


if __name__ == "__main__":
    sys.stdout.write(render())
