"""The read side's statement splitting and error cleaning, without ClickHouse."""

from __future__ import annotations

import pytest

from agentwatch.store import queries
from agentwatch.store.queries import statements


@pytest.mark.parametrize(
    ("sql", "expected"),
    [
        ("SELECT 1", ["SELECT 1"]),
        ("SELECT 1;", ["SELECT 1"]),
        ("SELECT 1; DROP TABLE events", ["SELECT 1", "DROP TABLE events"]),
        ("SELECT 1; SELECT 2", ["SELECT 1", "SELECT 2"]),
        ("SELECT 'a;b', \"c;d\", `e;f`", ["SELECT 'a;b', \"c;d\", `e;f`"]),
        ("SELECT 'it\\'s; fine'", ["SELECT 'it\\'s; fine'"]),
        ("SELECT 1 -- a; comment\n", ["SELECT 1 -- a; comment"]),
        ("SELECT 1 /* ; */", ["SELECT 1 /* ; */"]),
        ("SELECT 1; -- trailing comment", ["SELECT 1"]),
        ("  ;  ; ", []),
        ("", []),
    ],
)
def test_statements_split_only_outside_quotes_and_comments(sql: str, expected: list[str]) -> None:
    assert statements(sql) == expected


class FakeClient:
    """Records what would reach ClickHouse; nothing should for a refused request."""

    def __init__(self) -> None:
        self.sent: list[str] = []

    def query(self, sql: str, parameters: object = None) -> object:  # noqa: ARG002
        self.sent.append(sql)
        raise RuntimeError(
            "Code: 62. DB::Exception: Syntax error: failed at position 7 (1): 1 FORMAT Native. Expected"
        )


@pytest.mark.parametrize("sql", ["SELECT 1; DROP TABLE events", "SELECT 1; SELECT 2"])
def test_more_than_one_statement_is_refused_before_it_reaches_clickhouse(sql: str) -> None:
    client = FakeClient()
    reply = queries.run_query(client, sql)  # type: ignore[arg-type]
    assert reply == {"error": "one statement at a time: this has 2; run them one by one"}
    assert client.sent == []


def test_errors_never_quote_the_format_clause_the_user_did_not_type() -> None:
    reply = queries.run_query(FakeClient(), "SELEC 1")  # type: ignore[arg-type]
    assert "Syntax error" in reply["error"] and "FORMAT" not in reply["error"]
