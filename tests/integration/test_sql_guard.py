"""Readers only read: what `readonly=1` lets through (INTO OUTFILE, KILL QUERY) is refused before
it runs, through `agentwatch sql`, any client of the query subject and the guard itself; readers
have a memory limit and run side by side, and say "busy" rather than queue without end."""

from __future__ import annotations

import asyncio
import concurrent.futures
import json
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import clickhouse_connect
import pytest

from agentwatch.bus.query import request
from agentwatch.store import guard
from agentwatch.store.client import connect_readonly
from agentwatch.store.queries import run_query
from tests.conftest import clean_env, free_port, run_cli
from tests.integration.test_store import Service

READERS = 2


def writes(target: Path) -> list[str]:
    """Statements that, run, would write `target` or act on the store."""
    return [
        f"SELECT 'x' AS x INTO OUTFILE '{target}' APPEND",
        f"SELECT 'x' AS x INTO OUTFILE '{target}' TRUNCATE",
        f"SELECT 'x' AS x INTO OUTFILE '{target}' AND STDOUT",
        f"SELECT 1 FORMAT CSV INTO OUTFILE '{target}'",
        f"SELECT 1 INTO OUTFILE '{target}' FORMAT CSV",
        f"EXPLAIN SELECT 1 INTO OUTFILE '{target}'",
        f"SHOW TABLES INTO OUTFILE '{target}'",
        f"SELECT 1 -- '\n INTO OUTFILE '{target}'",
        f"select 'x' into outfile '{target}'",
    ]


REFUSED = {
    "KILL QUERY WHERE 1": "KILL QUERY is not a read",
    "KILL QUERY WHERE 1 SYNC": "KILL QUERY is not a read",
    "SELECT 1 SETTINGS readonly = 0": "SETTINGS",
    "SELECT * FROM (SELECT 1 SETTINGS max_threads = 1)": "SETTINGS",
    "SELECT 1 FORMAT CSV": "FORMAT",
    "SELECT 1 FORMAT JSONEachRow": "FORMAT",
    "EXPLAIN SELECT 1 FORMAT TSV": "FORMAT",
    "SYSTEM FLUSH LOGS": "SYSTEM is not a read",
    "SET max_memory_usage = 0": "SET is not a read",
    "USE system": "USE is not a read",
    "EXPLAIN AST KILL QUERY WHERE 1": "EXPLAIN reads only a SELECT",
    "SELECT 'a;b'": "';' inside the statement",
    "OPTIMIZE TABLE events FINAL": "OPTIMIZE is not a read",
    "INSERT INTO events (id) VALUES ('x')": "INSERT is not a read",
}

READS = {
    "SELECT 1 AS one": [[1]],
    "WITH 2 AS two SELECT two": [[2]],
    "SELECT 1 AS n UNION ALL SELECT 2": [[1], [2]],
    "(SELECT 1 AS n) INTERSECT (SELECT 1)": [[1]],
    "SELECT 1 AS one;": [[1]],
    "EXISTS TABLE system.one": [[1]],
    "SELECT 'outside' AS place /* a comment, as the engine reads it */": [["outside"]],
}


# --- the guard on an embedded engine ----------------------------------------------------------


@pytest.fixture(scope="module")
def engine(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """One embedded engine for the module (chDB allows one path per process)."""
    dsn = f"chdb://{tmp_path_factory.mktemp('guard')}"
    root = clickhouse_connect.get_client(dsn=dsn)
    yield dsn
    root.close()


@pytest.fixture(scope="module")
def reader(engine: str) -> Iterator[Any]:
    client = connect_readonly(engine, {})
    yield client
    client.close()


def test_nothing_that_writes_a_file_runs_and_no_file_appears(
    reader: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)  # a relative path would land here
    target = tmp_path / "written.txt"
    for sql in [*writes(target), *writes(Path("relative.txt"))]:
        reply = run_query(reader, sql)
        assert reply.get("refused") and "INTO OUTFILE writes a file" in reply["error"], (sql, reply)
    assert os.listdir(tmp_path) == []


@pytest.mark.parametrize(("sql", "why"), REFUSED.items())
def test_what_is_not_a_read_is_refused_with_what_to_do(reader: Any, sql: str, why: str) -> None:
    reply = run_query(reader, sql)
    assert "rows" not in reply, reply
    assert reply["error"].startswith("refused:") and why in reply["error"], reply


@pytest.mark.parametrize(("sql", "rows"), READS.items())
def test_reads_run_as_they_did(reader: Any, sql: str, rows: list[list[Any]]) -> None:
    reply = run_query(reader, sql)
    # UNION ALL's branches run in parallel and may come back in either order
    assert sorted(reply.get("rows") or []) == rows, reply


def test_show_and_describe_and_parameters_run(reader: Any) -> None:
    assert run_query(reader, "SHOW DATABASES")["rows"]
    assert run_query(reader, "DESCRIBE TABLE system.one")["rows"][0][0] == "dummy"
    assert run_query(reader, "EXPLAIN SELECT 1")["rows"]
    assert run_query(reader, "SELECT {who:String} AS who", {"who": "me"})["rows"] == [["me"]]


def test_the_engine_still_refuses_files_read_through_table_functions(reader: Any) -> None:
    reply = run_query(reader, "SELECT * FROM file('/etc/hostname', 'LineAsString')")
    assert "readonly" in reply["error"].lower(), reply


def test_a_query_over_the_memory_limit_is_stopped(engine: str) -> None:
    limited = connect_readonly(engine, {"AGENTWATCH_QUERY_MAX_MEMORY": str(100 << 20)})
    try:
        reply = run_query(limited, "SELECT groupArray(randomString(1000)) FROM numbers(10000000)")
        assert "MEMORY_LIMIT_EXCEEDED" in reply["error"], reply
        assert run_query(limited, "SELECT 1 AS one")["rows"] == [[1]]
    finally:
        limited.close()


def test_the_tree_check_fails_closed() -> None:
    assert guard.tree_refusal([]) is not None
    two_roots = guard.parse_tree("SelectWithUnionQuery (children 1)\n ExpressionList\nKillQueryQuery\n")
    assert guard.tree_refusal(two_roots) is not None
    unknown = guard.parse_tree("SomethingNewQuery (children 1)\n Identifier x\n")
    assert "is not a read" in (guard.tree_refusal(unknown) or "")


# --- through the bus and the command ------------------------------------------------------------


@pytest.fixture(scope="module")
def pipeline(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    root = tmp_path_factory.mktemp("guarded")
    env = clean_env(
        AGENTWATCH_DATA_DIR=str(root / "up"),
        AGENTWATCH_NATS_URL=f"nats://127.0.0.1:{free_port()}",
        AGENTWATCH_QUERY_READERS=str(READERS),
        AGENTWATCH_QUERY_MAX_MEMORY=str(200 << 20),
        AGENTWATCH_ALERT_BELL="0",
    )
    up = Service(["up"], env)
    try:
        up.wait_ready(60)  # printed once the query service is subscribed: asked at once, it answers
        yield env
    finally:
        code, output = up.stop()
        assert code == 0, output
        assert "Traceback" not in output, output


def ask(env: dict[str, str], sql: str, timeout: float = 40) -> dict[str, Any]:
    """One question on the query subject, as any NATS client would ask it."""
    return asyncio.run(request(env["AGENTWATCH_NATS_URL"], sql, max_rows=100, timeout=timeout, environ=env))


def test_sql_refuses_writes_and_kills_and_prints_no_traceback(
    pipeline: dict[str, str], tmp_path: Path
) -> None:
    target = tmp_path / "bashrc"
    others = ["KILL QUERY WHERE 1", "SELECT 1 SETTINGS readonly = 0", "SELECT 1 FORMAT CSV"]
    for sql in [*writes(target), *others]:
        result = run_cli("sql", sql, env=pipeline)
        assert result.returncode == 1, (sql, result.stdout, result.stderr)
        assert "refused:" in result.stderr and "Traceback" not in result.stderr, (sql, result.stderr)
        assert "ClickHouse:" not in result.stderr, "the refusal is agentwatch's own, said once"
    assert not target.exists()
    plain = run_cli("sql", "SELECT 1 AS one", "--format", "csv", env=pipeline)
    assert (plain.returncode, plain.stdout) == (0, "one\n1\n"), plain.stderr


def test_a_client_of_the_query_subject_is_refused_the_same(pipeline: dict[str, str], tmp_path: Path) -> None:
    target = tmp_path / "from-the-bus"
    for sql in [*writes(target), "KILL QUERY WHERE 1"]:
        reply = ask(pipeline, sql)
        assert reply.get("refused") and "rows" not in reply, (sql, reply)
    assert not target.exists()


def test_a_huge_query_is_stopped_while_one_and_ingest_go_on(pipeline: dict[str, str]) -> None:
    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        huge = pool.submit(ask, pipeline, "SELECT groupArray(randomString(1000)) FROM numbers(50000000)")
        demo = pool.submit(run_cli, "demo", "--rate", "0", "--count", "200", "--seed", "5", env=pipeline)
        time.sleep(0.3)
        started = time.monotonic()
        one = ask(pipeline, "SELECT 1 AS one")
        answered = time.monotonic() - started
        stopped = huge.result(60)
        assert demo.result(60).returncode == 0
    assert one["rows"] == [[1]] and answered < 1.0, (one, answered)
    assert "MEMORY_LIMIT_EXCEEDED" in stopped["error"], stopped
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        stored = ask(pipeline, "SELECT count() AS n FROM events WHERE host = 'agentwatch-demo'")["rows"][0][0]
        if stored >= 200:
            break
        time.sleep(0.5)
    assert stored >= 200, "the store went on ingesting"


def test_a_slow_reader_holds_no_one_back_and_a_flood_is_told_busy(pipeline: dict[str, str]) -> None:
    slow = "SELECT sum(sleepEachRow(0.5)) AS s FROM numbers(5)"  # 2.5 s asleep, no CPU
    flood = READERS + READERS * 4 + 3  # running, waiting, and more
    with concurrent.futures.ThreadPoolExecutor(flood + 1) as pool:
        sleepers = [pool.submit(ask, pipeline, slow) for _ in range(READERS - 1)]
        time.sleep(0.5)
        started = time.monotonic()
        assert ask(pipeline, "SELECT 1 AS one")["rows"] == [[1]]
        assert time.monotonic() - started < 1.0, "a free reader answered at once"
        for s in sleepers:
            assert s.result(30)["rows"] == [[0]]

        def timed() -> tuple[float, dict[str, Any]]:
            at = time.monotonic()
            reply = ask(pipeline, slow)
            return time.monotonic() - at, reply

        replies = [f.result(60) for f in [pool.submit(timed) for _ in range(flood)]]
    busy = [(took, r) for took, r in replies if r.get("busy")]
    answered = [r for _, r in replies if r.get("rows") == [[0]]]
    assert len(answered) >= READERS and len(busy) >= 3, replies
    assert all("the store is busy" in r["error"] for _, r in busy)
    assert min(took for took, _ in busy) < 1.0, "past the waiting room, busy at once"
    assert max(took for took, _ in busy) < 7.0, "no one waits without end"


def test_a_result_cut_to_fit_the_bus_is_said_and_fails_for_programs(pipeline: dict[str, str]) -> None:
    big = "SELECT number, repeat('x', 2000) AS s FROM numbers(1000)"  # about 2 MB: over one message
    for fmt in ("csv", "json", "jsonl"):
        result = run_cli("sql", big, "--format", fmt, env=pipeline)
        assert result.returncode == 1 and "to fit one NATS message" in result.stderr, (fmt, result.stderr)
        assert 0 < result.stdout.count("x" * 2000) < 1000, "what fits is printed"
    table = run_cli("sql", big, env=pipeline)
    assert table.returncode == 0 and "to fit one NATS message" in table.stdout
    hundred = "SELECT number FROM numbers(100)"
    capped = run_cli("sql", hundred, "--format", "csv", "--max-rows", "5", env=pipeline)
    assert capped.returncode == 0 and capped.stdout.splitlines()[1:] == ["0", "1", "2", "3", "4"]
    assert "cut at 5 rows" in capped.stderr
    whole = run_cli("sql", "SELECT number FROM numbers(3)", "--format", "csv", env=pipeline)
    assert (whole.returncode, whole.stderr) == (0, "")


def test_every_type_comes_back_in_json_form(reader: Any) -> None:
    """Strings and integers pass as they are; every other type is converted (store/plain.py)."""
    sql = (
        "SELECT 'a' AS s, toLowCardinality(toNullable('b')) AS lc, CAST(NULL, 'Nullable(String)') AS none, "
        "toUInt64(18446744073709551615) AS big, toInt8(-3) AS small, true AS yes, "
        "CAST('x', 'Enum8(\\'x\\' = 1)') AS enum, toDateTime64('2026-11-29 04:05:06.789', 3, 'UTC') AS at, "
        "toDate('2026-11-29') AS day, nan AS missing, toDecimal64(1.25, 2) AS price, "
        "toUUID('00000000-0000-0000-0000-000000000001') AS uid, toFixedString('abc', 3) AS fixed, "
        "[toDateTime('2026-11-29 00:00:00', 'UTC')] AS times, map('k', toDate('2026-01-02')) AS days, "
        "tuple(1, 'z') AS pair"
    )
    reply = run_query(reader, sql)
    assert dict(zip(reply["columns"], reply["rows"][0], strict=True)) == {
        "s": "a", "lc": "b", "none": None, "big": 18446744073709551615, "small": -3, "yes": True,
        "enum": "x", "at": "2026-11-29T04:05:06.789Z", "day": "2026-11-29", "missing": None,
        "price": 1.25, "uid": "00000000-0000-0000-0000-000000000001", "fixed": "abc",
        "times": ["2026-11-29T00:00:00Z"], "days": {"k": "2026-01-02"}, "pair": [1, "z"],
    }  # fmt: skip
    json.dumps(reply, allow_nan=False)
