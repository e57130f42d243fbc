"""The store's write path without ClickHouse or NATS: a fake `insert` and fake messages show how
StoreWriter sorts a batch, finds what ClickHouse refuses (bisecting), backs off while ClickHouse
is away, and acknowledges each message once it is stored or dead-lettered."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from agentwatch.consumers.store import StoreWriter, classify

# Errors as ClickHouse words them: the data's (never retried) and the server's (retried).
REFUSED = "Code: 27. DB::Exception: Cannot parse input: expected '\"' before: 'bad'"
AWAY = "Code: 210. DB::NetException: Connection refused"


class FakeMsg:
    """What the writer uses of a nats-py message; no reply subject, so acks go one by one."""

    def __init__(self, subject: str, data: bytes) -> None:
        self.subject, self.data, self.reply = subject, data, ""
        self._client: Any = None
        self._ackd = False
        self.acks = 0
        self.in_progress_count = 0

    @property
    def metadata(self) -> Any:
        raise ValueError("not a JetStream delivery")

    async def ack(self) -> None:
        self.acks += 1
        self._ackd = True

    async def nak(self) -> None:
        raise AssertionError("the writer gave a message back")

    async def in_progress(self) -> None:
        self.in_progress_count += 1


class FakeClient:
    """Answers the writer's lookups with nothing stored and keeps the dead letters it is given.
    A read into the `null` table names the first refused row as ClickHouse does ("(at row N)")
    with `names_rows`, else no row (so a refused part is bisected)."""

    def __init__(self, dead_letter_failures: int = 0, *, names_rows: bool = False) -> None:
        self.dead_letters: list[list[Any]] = []
        self.dead_letter_failures = dead_letter_failures
        self.names_rows = names_rows
        self.reads = 0

    def query(self, *_: Any, **__: Any) -> Any:
        return type("Result", (), {"result_rows": []})()

    def raw_insert(self, _table: str, insert_block: bytes = b"", **_: Any) -> None:
        self.reads += 1
        if not self.names_rows:
            raise RuntimeError("no row named")
        for at, body in enumerate(insert_block.split(b"\n"), 1):
            if b"bad" in body:
                raise RuntimeError(f"{REFUSED} (at row {at})")

    def insert(self, _table: str, data: list[list[Any]], **_: Any) -> None:
        if self.dead_letter_failures:
            self.dead_letter_failures -= 1
            raise RuntimeError(AWAY)
        self.dead_letters.append(data)


class FakeInsert:
    """Refuses any insert holding a body with b"bad" (as ClickHouse does: the whole insert), fails
    the first `away` calls as a server would, and keeps what it stored."""

    def __init__(self, away: int = 0) -> None:
        self.away = away
        self.calls = 0
        self.stored: list[bytes] = []

    def __call__(self, _client: Any, events: Sequence[bytes], messages: Sequence[bytes]) -> None:
        self.calls += 1
        if self.away:
            self.away -= 1
            raise RuntimeError(AWAY)
        if any(b"bad" in body for body in (*events, *messages)):
            raise RuntimeError(REFUSED)
        self.stored += [*events, *messages]


def envelopes(*names: str) -> list[FakeMsg]:
    return [
        FakeMsg(f"genie.tool.a{i}.call", f'{{"v":1,"id":"{name}"}}'.encode()) for i, name in enumerate(names)
    ]


def writer_with(
    insert: FakeInsert, client: FakeClient | None = None, **options: Any
) -> tuple[StoreWriter, list[float]]:
    """A writer over `insert`, its waits while ClickHouse is away recorded instead of slept."""
    writer = StoreWriter(client or FakeClient(), insert=insert, **options)  # type: ignore[arg-type]
    waits: list[float] = []

    async def hold(msgs: Sequence[Any], seconds: float) -> None:
        waits.append(seconds)
        for msg in msgs:
            await msg.in_progress()

    writer._hold = hold  # type: ignore[method-assign]
    return writer, waits


async def test_a_good_batch_is_one_insert_then_acknowledged() -> None:
    insert = FakeInsert()
    writer, waits = writer_with(insert)
    msgs = envelopes("a", "b", "c")
    await writer.write(msgs, {})  # type: ignore[arg-type]
    assert insert.calls == 1
    assert insert.stored == [m.data for m in msgs]
    assert [m.acks for m in msgs] == [1, 1, 1]
    assert (writer.stats.stored, writer.stats.batches, waits) == (3, 1, [])


async def test_bisection_dead_letters_each_refused_message_and_stores_the_rest() -> None:
    insert = FakeInsert()
    client = FakeClient()
    writer, waits = writer_with(insert, client)
    msgs = envelopes("a", "bad1", "c", "d", "e", "bad2", "g", "h")
    await writer.write(msgs, {})  # type: ignore[arg-type]
    good = [m.data for m in msgs if b"bad" not in m.data]
    assert sorted(insert.stored) == sorted(good)  # each good body stored once
    [rows] = client.dead_letters
    _, _, _, reasons, bodies = rows
    assert sorted(bodies) == ['{"v":1,"id":"bad1"}', '{"v":1,"id":"bad2"}']
    assert all(r.startswith("rejected by ClickHouse: Code: 27.") for r in reasons)
    assert [m.acks for m in msgs] == [1] * 8
    assert (writer.stats.stored, writer.stats.dead_letters, writer.stats.insert_failures) == (6, 2, 0)
    assert waits == []  # the data's fault: never retried


async def test_rows_clickhouse_names_are_dead_lettered_without_bisecting() -> None:
    insert = FakeInsert()
    client = FakeClient(names_rows=True)
    writer, _ = writer_with(insert, client)
    msgs = envelopes("a", "bad1", "c", "bad2")
    await writer.write(msgs, {})  # type: ignore[arg-type]
    assert insert.calls == 2  # the batch refused, then the rest stored
    assert insert.stored == [msgs[0].data, msgs[2].data]
    assert client.reads == 2  # one read of the batch, resumed after the first row it named
    assert sorted(client.dead_letters[0][4]) == ['{"v":1,"id":"bad1"}', '{"v":1,"id":"bad2"}']


async def test_a_single_refused_message_is_dead_lettered_without_a_retry() -> None:
    insert = FakeInsert()
    client = FakeClient()
    writer, waits = writer_with(insert, client)
    [msg] = envelopes("bad")
    await writer.write([msg], {})  # type: ignore[list-item]
    assert (insert.calls, waits, msg.acks, writer.stats.dead_letters) == (1, [], 1, 1)


async def test_backoff_doubles_up_to_the_most_holding_the_batch_in_progress() -> None:
    insert = FakeInsert(away=5)
    writer, waits = writer_with(insert, retry_max_seconds=1.0)
    msgs = envelopes("a", "b")
    await writer.write(msgs, {})  # type: ignore[arg-type]
    assert waits == [0.25, 0.5, 1.0, 1.0, 1.0]
    assert [m.in_progress_count for m in msgs] == [5, 5]
    assert [m.acks for m in msgs] == [1, 1]  # acknowledged once stored, not before
    assert (insert.calls, writer.stats.insert_failures, writer.stats.last_error) == (6, 5, "")


async def test_dead_letters_are_retried_while_clickhouse_is_away() -> None:
    client = FakeClient(dead_letter_failures=2)
    writer, waits = writer_with(FakeInsert(), client)
    msgs = envelopes("a", "b")
    await writer.write(msgs, {id(msgs[1]): "not an agentwatch envelope: no id"})  # type: ignore[arg-type]
    assert waits == [0.25, 0.5]
    assert len(client.dead_letters) == 1
    assert [m.acks for m in msgs] == [1, 1]


def test_classify_sorts_a_batch_once() -> None:
    batch: list[Any] = [
        FakeMsg("genie.tool.a.call", b"e"),
        FakeMsg("genie.msg.lead", b"m"),
        FakeMsg("genie.agent.a.usage", b"u"),
        FakeMsg("genie.tool.a.call", b"old"),
        FakeMsg("genie.tool.a.call", b"junk"),
    ]
    event, message, usage, corrected, junk = batch
    found = classify(batch, {id(corrected): b"new", id(junk): "not JSON"})
    assert found.entries == [(event, b"e", False), (message, b"m", True), (corrected, b"new", False)]
    assert found.usage == [usage]
    assert found.dead == [(junk, "not JSON")]
