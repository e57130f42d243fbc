"""The store: every event from the GENIE stream into ClickHouse, exactly once per hook invocation.

A FastStream JetStream pull subscriber (durable, manual acks) hands raw batches to a StoreWriter.
The writer gathers them into large inserts (size and time bounds), runs each insert in a worker
thread (chDB releases the GIL, so the next batch is fetched meanwhile), and acknowledges messages
only after ClickHouse took them. Every body is parsed once, by `screen` (for the watchdog too);
what it finds nothing to say about goes to ClickHouse as JSONEachRow, the bytes as published.

One write path (`StoreWriter.write`): the batch is sorted once (`classify`: usage records, what
`screen` found no envelope, the envelopes to insert with their bodies); every ClickHouse call goes
through one retrying call (`_retrying`) that holds the batch in progress while it waits.

Failure handling:
- ClickHouse unavailable: the batch is kept, retried with exponential backoff, and its messages are
  marked in progress so JetStream does not redeliver them elsewhere meanwhile.
- A body that is not an agentwatch envelope is dead-lettered with the reason, without an insert;
  a time or number out of range is corrected, the values it came with kept in its `data`
  (`screen`). So ClickHouse never sees what it would refuse a whole batch for.
- What ClickHouse refuses all the same (a field given twice): found by one read of the batch into
  a table that keeps nothing, else by bisecting; dead-lettered (once) with ClickHouse's reason. A
  batch slow to write is kept in progress (+WPI every third of the ack wait).
- Redelivery after a crash: ReplacingMergeTree keyed by event id keeps one row (read with FINAL).

Usage envelopes (genie.agent.{agent}.usage: token usage and cost-state records read from
transcripts) take their own path: decoded and priced in a worker thread (store/usage.py) and
inserted into `usage` and `cost_states`, keyed so that a message read or sent twice is one row.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import os
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import TYPE_CHECKING, Any, TypeVar

import orjson
from faststream.middlewares import AckPolicy
from faststream.nats import JStream, NatsRouter, PullSub
from faststream.nats.annotations import JsClient, NatsMessage
from nats.aio.msg import Msg

from agentwatch import config
from agentwatch.bus import streams as bus
from agentwatch.bus.fastpull import ack_all, in_progress_all, keep_in_progress, nak_all
from agentwatch.consumers.batch import batch_as_is, raw_batch
from agentwatch.consumers.screen import Fixes, screen
from agentwatch.contract import ALL_SUBJECTS, MESSAGE_SUBJECT_PREFIX, is_usage_subject
from agentwatch.store.usage import UsageRows, insert_usage, usage_rows
from agentwatch.store.writes import (
    EVENTS_TABLE,
    MESSAGE_ENVELOPES_TABLE,
    DeadLetter,
    envelope_id,
    insert_batch,
    insert_dead_letters,
    refused_rows,
    stored_ids,
)

if TYPE_CHECKING:
    from clickhouse_connect.driver.client import Client

log = logging.getLogger("agentwatch.store")

T = TypeVar("T")
# ClickHouse error codes that mean "this data", not "this server": parse and format errors (not
# 75, 76 and 252, a file that cannot be written or opened and too many parts: the server's state,
# which a retry outlives; CANNOT_PARSE_BOOL, 467, and VALUE_IS_OUT_OF_RANGE_OF_DATA_TYPE, 321, are
# the data's).
_DATA_ERROR_CODES = frozenset(
    {6, 25, 26, 27, 32, 33, 38, 41, 53, 62, 69, 70, 72, 73, 117, 130, 131, 134, 135, 321, 349, 467, 488}
)
# Messages the store's pull subscriber asks for at a time.
FETCH_BATCH = 5000
# How long a fetch waits for its batch to fill (without the watchdog reading its fetches).
STORE_FETCH_S = 0.2
# Messages in one insert at most. Each insert costs ClickHouse a fixed 60 to 130 ms of CPU (a part
# per table, every materialized view planned and run) beside its cost per row: under a backlog,
# batches of 50,000 took 0.5 s less CPU per 100,000 events than batches of 20,000 (fewer parts to
# write and merge). A batch gathers only while the fetches say more is waiting in the stream; the
# fetch that found nothing more waiting is written at once, so a quiet bus is stored without delay.
BATCH_ROWS = 50_000
# How long a batch may gather at most while a backlog is there (its first messages wait that long).
GATHER_SECONDS = 1.0
# Under a steady flow (each fetch ends with nothing more waiting, and the next comes soon) the
# inserts are this far apart at least (AGENTWATCH_STORE_INSERT_MS): a fetch ends every 0.2 s, and
# each insert costs ClickHouse a fixed 0.1 s of CPU or more however few its rows (a part for every
# table and view it reaches), so a small fleet's 50 events/s written twice a second kept a fifth of
# a core busy; once a second (ClickHouse's own advice for inserts) halves that, and SQL sees an
# event at most a second after it arrived. An event after a quiet spell is written at once.
INSERT_SPACING_S = 1.0
INSERT_SPACING_SETTING = "AGENTWATCH_STORE_INSERT_MS"


def insert_spacing(environ: Mapping[str, str]) -> float:
    """The least seconds between two inserts under a steady flow: INSERT_SPACING_S, or the
    setting's milliseconds when it is a positive whole number."""
    return config.number(environ, INSERT_SPACING_SETTING, round(INSERT_SPACING_S * 1000)) / 1000


# Messages the writer holds (fetched, not yet acknowledged): with the one pull request open,
# below the consumer's max_ack_pending, so JetStream never holds the store at its limit.
MAX_HELD = bus.MAX_ACK_PENDING - 2 * FETCH_BATCH


@dataclass
class StoreStats:
    received: int = 0
    stored: int = 0
    messages: int = 0
    usage: int = 0  # usage and cost-state records
    dead_letters: int = 0
    insert_failures: int = 0
    batches: int = 0
    last_error: str = ""
    started: float = field(default_factory=time.monotonic)


def _error_code(exc: BaseException) -> int | None:
    text = str(exc)
    marker = "Code: "
    at = text.find(marker)
    if at < 0:
        return None
    digits = ""
    for ch in text[at + len(marker) :]:
        if not ch.isdigit():
            break
        digits += ch
    return int(digits) if digits else None


def _reason(exc: BaseException) -> str:
    """ClickHouse's own message, without the stack trace the server may append."""
    text = str(exc).strip()
    return text.split("Stack trace", 1)[0].strip()[:2000]


class Poison(Exception):
    """One message that ClickHouse rejected on its own."""


class StoreWriter:
    """Gathers raw messages into ClickHouse inserts and acknowledges each message once it is
    stored or dead-lettered: a message is never acknowledged unwritten (`stop` hands back to
    JetStream what it could not write). `insert` (events, messages) and `insert_usage_rows` are
    the ClickHouse writes, replaceable in tests."""

    def __init__(
        self,
        client: Client,
        *,
        batch_rows: int = BATCH_ROWS,
        flush_seconds: float = GATHER_SECONDS,
        spacing_seconds: float = INSERT_SPACING_S,
        max_held: int = MAX_HELD,
        insert: Callable[..., None] = insert_batch,
        insert_usage_rows: Callable[..., None] = insert_usage,
        retry_max_seconds: float = 30.0,
    ) -> None:
        self.client = client
        self.batch_rows = batch_rows
        self.flush_seconds = flush_seconds
        self.spacing_seconds = spacing_seconds
        self._last_insert = -math.inf  # when the last batch began to be written (monotonic)
        self.max_held = max_held
        self.stats = StoreStats()
        self._insert_batch = insert
        self._insert_usage = insert_usage_rows
        self._retry_max = retry_max_seconds
        # Fetched batches, each with whether its fetch left more waiting (bounded by `max_held`).
        self._queue: asyncio.Queue[tuple[list[Msg], bool, Fixes]] = asyncio.Queue()
        self._held = 0  # messages submitted and not yet acknowledged (or given up on)
        self._room = asyncio.Event()
        self._writing: list[Msg] = []
        self._stopping = False
        self._task: asyncio.Task[None] | None = None
        self._watcher: asyncio.Task[None] | None = None

    # -- intake ------------------------------------------------------------------------------

    async def submit(self, msgs: Sequence[Msg], fixes: Fixes | None = None) -> None:
        """Queue a fetched batch with what screening found in it (`screen`, run here when not
        given); waits while the writer holds `max_held` messages (bounded memory, and the
        consumer's ack-pending count stays below its limit)."""
        if not msgs:
            return
        if fixes is None:
            fixes = screen(msgs)
        self.stats.received += len(msgs)
        while self._held and self._held + len(msgs) > self.max_held:
            self._room.clear()
            await self._room.wait()
        self._held += len(msgs)
        self._queue.put_nowait((list(msgs), _more_waiting(msgs[-1]), fixes))

    @property
    def backlog(self) -> int:
        waiting: Any = self._queue._queue  # type: ignore[attr-defined]
        return sum(len(b) for b, _, _ in waiting)

    # -- lifecycle ---------------------------------------------------------------------------

    def start(self, stream: Callable[[], Any] | None = None, environ: Mapping[str, str] = os.environ) -> None:
        """Write what is submitted; with `stream` (the JetStreamContext of the store's connection),
        also recreate its stream and durable when they are gone (streams.watch_stream)."""
        self._task = asyncio.create_task(self._run(), name="agentwatch-store-writer")
        if stream is not None:
            self._watcher = asyncio.create_task(bus.watch_stream(stream, environ), name="agentwatch-stream")

    async def stop(self, timeout: float | None = None) -> bool:
        """Write and acknowledge what was queued, then end. After `timeout` seconds (ClickHouse
        away) what is still unwritten is handed back to JetStream (a nak: delivered again at
        once to the next store) and the writer ends. True when everything was written."""
        self._stopping = True
        if self._watcher is not None:
            self._watcher.cancel()
        self._queue.put_nowait(([], False, {}))  # wake the writer
        if self._task is None:
            return True
        try:
            await asyncio.wait_for(asyncio.shield(self._task), timeout)
        except TimeoutError:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            left = [*self._writing, *(m for batch, _, _ in self._queue._queue for m in batch)]  # type: ignore[attr-defined]
            log.warning("store stopped with %d messages unwritten; JetStream delivers them again", len(left))
            with contextlib.suppress(Exception):  # the bus away too: redelivered after the ack wait
                await nak_all(left)
            return False
        return True

    async def _run(self) -> None:
        while True:
            batch, fixes = await self._gather()
            if batch:
                self._writing = batch
                keeper = asyncio.create_task(
                    keep_in_progress(batch, bus.ack_wait() / 3), name="agentwatch-store-wpi"
                )
                try:
                    await self.write(batch, fixes)
                except Exception as exc:  # never let the writer die: the messages stay unacked
                    log.exception("store batch failed; its messages will be redelivered")
                    self.stats.last_error = str(exc)[:300]
                finally:
                    keeper.cancel()
                self._writing = []
                self._held -= len(batch)
                self._room.set()
            if self._stopping and self._queue.empty():
                return

    async def _gather(self) -> tuple[list[Msg], Fixes]:
        """The next batch: what is queued, and while the last fetch left more waiting in the
        stream (a backlog), what the next fetches bring, up to `batch_rows` and `flush_seconds`;
        under a steady flow, until `spacing_seconds` after the last batch began."""
        first, more, fixes = await self._queue.get()
        batch = list(first)
        fixes = dict(fixes)
        now = time.monotonic()
        deadline = now + self.flush_seconds
        spaced = self._last_insert + self.spacing_seconds
        while len(batch) < self.batch_rows:
            if not self._queue.empty():
                msgs, more, found = self._queue.get_nowait()
                batch.extend(msgs)
                fixes.update(found)
                continue
            until = deadline if more else spaced
            left = until - time.monotonic()
            if left <= 0 or self._stopping:
                break
            try:
                msgs, more, found = await asyncio.wait_for(self._queue.get(), left)
            except TimeoutError:
                break
            batch.extend(msgs)
            fixes.update(found)
        self._last_insert = time.monotonic()
        return batch, fixes

    # -- writing -----------------------------------------------------------------------------

    async def write(self, msgs: list[Msg], fixes: Fixes | None = None) -> None:
        """Store one batch and acknowledge it: usage records priced into their tables, envelopes
        inserted (screening's corrected bodies in place of their own), and what can never be
        stored dead-lettered with its reason; acks only after all of that succeeded."""
        batch = classify(msgs, screen(msgs) if fixes is None else fixes)
        dead = batch.dead
        usage = await self._store_usage(batch.usage, dead, hold=msgs) if batch.usage else []
        known = await self._stored_already(batch.entries)
        stored = await self._insert_all(batch.entries, dead)
        # Rows counted once, as their message is acknowledged, if the store did not have them
        # before: not per insert (a retry after a write, a bisected batch), nor a redelivery.
        messages = events = 0
        for msg, _, message in stored:
            if id(msg) not in known:
                if message:
                    messages += 1
                else:
                    events += 1
        self.stats.stored += events
        self.stats.messages += messages
        if dead:
            await self._dead_letter(dead)
        await ack_all([msg for msg, _, _ in stored] + usage)
        await ack_all([m for m, _ in dead])

    async def _retrying(self, what: str, call: Callable[[], T], hold: Sequence[Msg], *, refusable: bool) -> T:
        """`call`'s result, run in a worker thread until it succeeds: each failure counted and
        logged, then a wait (0.25 s, doubling up to `retry_max_seconds`) holding `hold` in progress
        so JetStream does not deliver them elsewhere meanwhile. With `refusable`, an error that is
        the data's and not the server's (_DATA_ERROR_CODES) raises Poison at once: never retried."""
        delay = 0.25
        while True:
            try:
                return await asyncio.to_thread(call)
            except Exception as exc:
                if refusable and _error_code(exc) in _DATA_ERROR_CODES:
                    raise Poison(_reason(exc)) from None
                self.stats.insert_failures += 1
                self.stats.last_error = _reason(exc)[:300]
                log.warning("%s failed (%s); retrying in %.1fs", what, self.stats.last_error, delay)
            await self._hold(hold, delay)
            delay = min(delay * 2, self._retry_max)

    async def _stored_already(self, entries: list[Entry]) -> set[int]:
        """The messages (by id()) that add no row: their envelope id is stored already (a
        redelivery) or came earlier in `entries`. None when ClickHouse cannot say now (the insert
        waits for it anyway)."""

        def find() -> set[int]:
            ids = [envelope_id(body) for _, body, _ in entries]
            taken = stored_ids(self.client, ids)
            again: set[int] = set()
            for (msg, _, _), key in zip(entries, ids, strict=True):
                if key in taken:
                    again.add(id(msg))
                elif key:
                    taken.add(key)
            return again

        try:
            return await asyncio.to_thread(find)
        except Exception:
            return set()

    async def _store_usage(
        self, msgs: list[Msg], dead: list[tuple[Msg, str]], hold: Sequence[Msg]
    ) -> list[Msg]:
        """Price and insert usage envelopes (holding `hold`, the whole batch, while ClickHouse is
        away); the ones that are not usage envelopes, or that ClickHouse refuses, go to `dead`.
        Returns the ones stored."""
        rows: UsageRows = await asyncio.to_thread(usage_rows, [m.data for m in msgs])
        bad = {i for i, _ in rows.bad}
        dead.extend((msgs[i], reason) for i, reason in rows.bad)
        kept = [m for i, m in enumerate(msgs) if i not in bad]
        if not kept:
            return []
        try:
            await self._retrying(
                "usage insert", partial(self._insert_usage, self.client, rows), hold, refusable=True
            )
        except Poison as exc:  # these rows, not the server
            dead.extend((m, f"rejected by ClickHouse: {exc}") for m in kept)
            return []
        self.stats.usage += len(kept)
        return kept

    async def _insert_all(self, entries: list[Entry], dead: list[tuple[Msg, str]]) -> list[Entry]:
        """Insert `entries`, retrying while ClickHouse is away. When ClickHouse refuses a part for
        its data, the rows it names on one read of the part (`_refused`) go to `dead` and the rest
        is inserted again; when it names none (a view refused them, say), the part is halved until
        each refused message is alone. Returns the entries stored."""
        refused: set[int] = set()
        pending: list[tuple[list[Entry], bool]] = (
            [(entries, False)] if entries else []
        )  # (part, read already)
        while pending:
            part, read = pending.pop()
            try:
                await self._insert(part)
            except Poison as exc:
                if len(part) == 1:
                    named = [(part[0][0], str(exc))]
                else:
                    named = [] if read else await self._refused(part)
                for msg, reason in named:
                    dead.append((msg, f"rejected by ClickHouse: {reason}"))
                    refused.add(id(msg))
                if len(part) > 1 and named:
                    rest = [e for e in part if id(e[0]) not in refused]
                    pending.extend([(rest, True)] if rest else [])
                elif len(part) > 1:
                    half = len(part) // 2
                    pending.extend(((part[half:], True), (part[:half], True)))
        return [e for e in entries if id(e[0]) not in refused] if refused else entries

    async def _refused(self, part: list[Entry]) -> list[tuple[Msg, str]]:
        """The messages of `part` ClickHouse cannot read, with its reasons (refused_rows: one
        read of the part into a table that keeps nothing); none when it names no row."""
        found: list[tuple[Msg, str]] = []
        for table, message in ((EVENTS_TABLE, False), (MESSAGE_ENVELOPES_TABLE, True)):
            group = [entry for entry in part if entry[2] is message]
            if not group:
                continue
            try:
                rows = await asyncio.to_thread(
                    refused_rows, self.client, table, [body for _, body, _ in group]
                )
            except Exception:  # no row named (or ClickHouse away): bisecting finds them
                return []
            found += [(group[at][0], _reason(Exception(text))) for at, text in rows]
        return found

    async def _insert(self, part: list[Entry]) -> None:
        """One insert of `part` (`_retrying`): its events and its messages, each in their table."""
        events = [body for _, body, message in part if not message]
        messages = [body for _, body, message in part if message]
        started = time.monotonic()
        # No subject column per row: splicing it into every body cost the event loop's thread
        # measurable time; the contract derives it from event and agent.
        insert = partial(self._insert_batch, self.client, events, messages)
        await self._retrying("ClickHouse insert", insert, [msg for msg, _, _ in part], refusable=True)
        self.stats.batches += 1
        self.stats.last_error = ""
        log.debug("stored %d events, %d messages in %.0f ms", len(events), len(messages),
                  (time.monotonic() - started) * 1000)  # fmt: skip

    async def _hold(self, msgs: Sequence[Msg], seconds: float) -> None:
        """Wait, keeping JetStream from redelivering `msgs` elsewhere (in-progress acks)."""
        end = time.monotonic() + seconds
        while True:
            with contextlib.suppress(Exception):  # the bus may be away too; redelivery is then fine
                await in_progress_all(list(msgs))
            left = end - time.monotonic()
            if left <= 0:
                return
            await asyncio.sleep(min(left, bus.ack_wait() / 3))

    async def _dead_letter(self, dead: list[tuple[Msg, str]]) -> None:
        rows = []
        for msg, reason in dead:
            seq, deliveries = _delivery(msg)
            rows.append((msg.subject, seq, deliveries, reason, msg.data))
        await self.dead_letter_rows(rows, [m for m, _ in dead])

    async def dead_letter_rows(self, rows: list[DeadLetter], hold: Sequence[Msg] = ()) -> None:
        """Write dead-letter rows (each message once: insert_dead_letters), retrying while
        ClickHouse is away (holding `hold` meanwhile)."""
        write = partial(insert_dead_letters, self.client, rows)
        kept = await self._retrying("dead-letter insert", write, hold, refusable=False)
        self.stats.dead_letters += len(kept)
        for row in kept:
            log.warning("dead letter: %s", row[3][:200])


# One envelope of a batch as `classify` sorted it: its message, the body to insert (screening's
# correction, else the body as it came), and whether it is a message envelope (genie.msg.*).
Entry = tuple[Msg, bytes, bool]


@dataclass
class Classified:
    """A batch sorted once: envelopes to insert, usage records, and what can never be stored."""

    entries: list[Entry]
    usage: list[Msg]
    dead: list[tuple[Msg, str]]


def classify(msgs: Sequence[Msg], fixes: Fixes) -> Classified:
    """Sort `msgs` in one pass, with what `screen` found: a usage subject to the usage path; a
    reason (str) to the dead letters; else an entry with its body (the corrected one if any)."""
    out = Classified([], [], [])
    entries, prefix = out.entries, MESSAGE_SUBJECT_PREFIX
    for msg in msgs:
        subject = msg.subject
        if subject.endswith(".usage") and is_usage_subject(subject):
            out.usage.append(msg)
            continue
        fix = fixes.get(id(msg)) if fixes else None
        if fix is None:
            entries.append((msg, msg.data, subject.startswith(prefix)))
        elif type(fix) is str:
            out.dead.append((msg, fix))
        else:
            entries.append((msg, fix, subject.startswith(prefix)))  # type: ignore[arg-type]  # (bytes)
    return out


def _more_waiting(msg: Msg) -> bool:
    """Whether the stream held more messages for the consumer when `msg` was delivered (the
    pending count JetStream puts in every delivery's reply subject)."""
    try:
        return bool(msg.metadata.num_pending)
    except Exception:  # not a JetStream delivery (a test's own message): nothing known to wait
        return False


def _delivery(msg: Msg) -> tuple[int, int]:
    try:
        meta = msg.metadata
    except Exception:
        return 0, 0
    return int(meta.sequence.stream), int(meta.num_delivered)


MAX_DELIVERIES_ADVISORY = f"$JS.EVENT.ADVISORY.CONSUMER.MAX_DELIVERIES.{bus.STREAM_NAME}.{bus.STORE_DURABLE}"


def advisory_router(writer: StoreWriter) -> NatsRouter:
    """Dead-letters what JetStream gave up on after max_deliver, so nothing leaves silently."""
    router = NatsRouter()

    @router.subscriber(
        MAX_DELIVERIES_ADVISORY,
        queue="agentwatch-store-advisories",
        title="store max deliveries",
        description="A message JetStream stopped delivering goes to dead_letters with its body.",
    )
    async def gave_up(msg: NatsMessage, js: JsClient) -> None:
        try:
            advisory = orjson.loads(msg.body)
            seq, deliveries = int(advisory["stream_seq"]), int(advisory.get("deliveries", 0))
        except (orjson.JSONDecodeError, KeyError, TypeError, ValueError):
            log.warning("unreadable max-deliveries advisory: %r", msg.body[:200])
            return
        reason = f"JetStream gave up after {deliveries} deliveries (AGENTWATCH_MAX_DELIVER)"
        try:
            stored = await js.get_msg(bus.STREAM_NAME, seq)
            subject, body = str(stored.subject or ""), bytes(stored.data or b"")
        except Exception as exc:
            subject, body = "", b""
            reason += f"; the message is no longer in the stream ({exc})"
        await writer.dead_letter_rows([(subject, seq, deliveries, reason, body)])

    return router


def store_router(
    writer: StoreWriter,
    *,
    watch: Callable[[list[Msg]], Fixes] | None = None,
    fetch_batch: int = FETCH_BATCH,
    fetch_timeout: float = STORE_FETCH_S,
) -> NatsRouter:
    """The store's FastStream subscriber: a durable JetStream pull consumer with manual acks. With
    `watch` (the watchdog beside it), every fetched batch is shown to it before it is queued, and
    it returns what `screen` found."""
    from agentwatch.bus import fastpull

    fastpull.install()
    router = NatsRouter()

    @router.subscriber(
        ALL_SUBJECTS,
        stream=JStream(bus.STREAM_NAME, subjects=[ALL_SUBJECTS], declare=False),  # `up` declares it
        durable=bus.STORE_DURABLE,
        config=bus.store_consumer_config(),
        pull_sub=PullSub(batch_size=fetch_batch, timeout=fetch_timeout, batch=True),
        ack_policy=AckPolicy.MANUAL,
        parser=batch_as_is,
        decoder=raw_batch,
        title="store",
        description="Every envelope on genie.> into ClickHouse; acked after the insert.",
    )
    async def store_events(batch: Any) -> None:
        # The fetched nats-py messages themselves (see consumers/batch.py). Not `msg: NatsMessage`:
        # FastStream resolves that annotation in a worker thread, a thread handoff per batch.
        # Each body is parsed once, for both: the watchdog screens the batch (`screen`) and sees
        # the envelopes as they are stored.
        fixes = None
        if watch is not None:
            try:
                fixes = watch(batch)
            except Exception:  # the watchdog's fault must never keep an event from the store
                log.exception("the watchdog failed on a batch; the store goes on")
        await writer.submit(batch, screen(batch) if fixes is None else fixes)

    return router
