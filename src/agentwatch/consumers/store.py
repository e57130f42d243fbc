"""The store: every event from the GENIE stream into ClickHouse, exactly once per hook invocation.

A FastStream JetStream pull subscriber (durable, manual acks) hands raw batches to a StoreWriter.
The writer gathers them into large inserts (size and time bounds), runs each insert in a worker
thread (chDB releases the GIL, so the next batch is fetched meanwhile), and acknowledges messages
only after ClickHouse took them. Envelope bodies go to ClickHouse as JSONEachRow untouched: no
per-event decoding in Python on the normal path.

Failure handling:
- ClickHouse unavailable: the batch is kept, retried with exponential backoff, and its messages are
  marked in progress so JetStream does not redeliver them elsewhere meanwhile.
- Every body is parsed once (for the watchdog too) and checked against the contract before the
  insert (`screen`): a body that is not an agentwatch envelope is dead-lettered with the reason,
  without an insert; a time or number out of range is corrected, the values it came with kept in
  its `data`. So ClickHouse never sees what it would refuse a whole batch for.
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
from typing import TYPE_CHECKING, Any

import orjson
from faststream.middlewares import AckPolicy
from faststream.nats import JStream, NatsRouter, PullSub
from faststream.nats.annotations import JsClient, NatsMessage
from faststream.nats.message import NatsBatchMessage
from nats.aio.msg import Msg

from agentwatch import config
from agentwatch.bus import streams as bus
from agentwatch.bus.fastpull import ack_all, in_progress_all, keep_in_progress, nak_all
from agentwatch.consumers.screen import Fixes, screen
from agentwatch.contract import (
    ALL_SUBJECTS,
    MESSAGE_SUBJECTS,
    is_usage_subject,
)
from agentwatch.store.usage import UsageRows, insert_usage, usage_rows
from agentwatch.store.writes import (
    EVENTS_TABLE,
    MESSAGE_ENVELOPES_TABLE,
    envelope_id,
    insert_batch,
    insert_dead_letters,
    refused_rows,
    stored_ids,
)

if TYPE_CHECKING:
    from clickhouse_connect.driver.client import Client

log = logging.getLogger("agentwatch.store")

_MSG_PREFIX = MESSAGE_SUBJECTS[:-1]  # "genie.msg."
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
    """Gathers raw messages into ClickHouse inserts; acks after success; never loses a message."""

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
        self._insert = insert
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
        """Insert one batch with what `screen` found (run here when not given): corrected bodies
        in place of their own, what is no envelope dead-lettered without an insert; ack all."""
        if fixes is None:
            fixes = screen(msgs)
        usage = [m for m in msgs if m.subject.endswith(".usage") and is_usage_subject(m.subject)]
        dead: list[tuple[Msg, str]] = []
        if usage:
            msgs = [m for m in msgs if not (m.subject.endswith(".usage") and is_usage_subject(m.subject))]
            usage = await self._store_usage(usage, dead, others=msgs)
        bodies: dict[int, bytes] = {}
        good = list(msgs)
        if fixes:
            good = []
            for msg in msgs:
                fix = fixes.get(id(msg))
                if fix is None:
                    good.append(msg)
                elif type(fix) is str:
                    dead.append((msg, fix))
                else:
                    bodies[id(msg)] = fix  # type: ignore[assignment]  # (bytes: not a str)
                    good.append(msg)
        known = await self._stored_already(good, bodies)
        await self._insert_all(good, bodies, dead)
        # Rows counted once, as their message is acknowledged, if the store did not have them
        # before: not per insert (a retry after a write, a bisected batch), nor a redelivery.
        messages = events = 0
        for msg in good:
            if id(msg) not in known:
                if msg.subject.startswith(_MSG_PREFIX):
                    messages += 1
                else:
                    events += 1
        self.stats.stored += events
        self.stats.messages += messages
        if dead:
            await self._dead_letter(dead)
        await ack_all(good + usage)
        await ack_all([m for m, _ in dead])

    async def _stored_already(self, msgs: list[Msg], bodies: dict[int, bytes]) -> set[int]:
        """The messages (by id()) that add no row: their envelope id is stored already (a
        redelivery) or came earlier in `msgs`. None when ClickHouse cannot say now (the insert
        waits for it anyway)."""

        def find() -> set[int]:
            ids = [envelope_id(bodies.get(id(m), m.data)) for m in msgs]
            taken = stored_ids(self.client, ids)
            again: set[int] = set()
            for msg, key in zip(msgs, ids, strict=True):
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
        self, msgs: list[Msg], dead: list[tuple[Msg, str]], others: Sequence[Msg] = ()
    ) -> list[Msg]:
        """Price and insert usage envelopes (retrying while ClickHouse is away, holding `others`,
        the rest of the batch, in progress too); the ones that are not usage envelopes go to
        `dead`. Returns the ones stored."""
        rows: UsageRows = await asyncio.to_thread(usage_rows, [m.data for m in msgs])
        bad = {i for i, _ in rows.bad}
        dead.extend((msgs[i], reason) for i, reason in rows.bad)
        kept = [m for i, m in enumerate(msgs) if i not in bad]
        delay = 0.25
        while kept:
            try:
                await asyncio.to_thread(self._insert_usage, self.client, rows)
            except Exception as exc:
                if _error_code(exc) in _DATA_ERROR_CODES:  # these rows, not the server: never retried
                    dead.extend((m, f"rejected by ClickHouse: {_reason(exc)}") for m in kept)
                    return []
                self.stats.insert_failures += 1
                self.stats.last_error = _reason(exc)[:300]
                log.warning("usage insert failed (%s); retrying in %.1fs", self.stats.last_error, delay)
                await self._hold([*kept, *others], delay)
                delay = min(delay * 2, self._retry_max)
                continue
            self.stats.usage += len(kept)
            break
        return kept

    async def _insert_all(
        self, msgs: list[Msg], bodies: dict[int, bytes], dead: list[tuple[Msg, str]]
    ) -> None:
        """Insert `msgs`; messages ClickHouse rejects move from `msgs` to `dead`."""
        if not msgs:
            return
        pending: list[tuple[list[Msg], bool]] = [(msgs, False)]  # (part, read row by row already)
        while pending:
            part, read = pending.pop()
            try:
                await self._insert_retrying(part, bodies)
            except Poison as exc:
                if len(part) == 1:
                    dead.append((part[0], f"rejected by ClickHouse: {exc}"))
                    msgs.remove(part[0])
                    continue
                refused = [] if read else await self._refused(part, bodies)
                if refused:
                    for msg, reason in refused:
                        dead.append((msg, f"rejected by ClickHouse: {reason}"))
                        msgs.remove(msg)
                    gone = {id(m) for m, _ in refused}
                    pending.append(([m for m in part if id(m) not in gone], True))
                else:  # refused by what ClickHouse does with rows it read (a view, say)
                    half = len(part) // 2
                    pending.extend(((part[half:], True), (part[:half], True)))

    async def _refused(self, part: list[Msg], bodies: dict[int, bytes]) -> list[tuple[Msg, str]]:
        """The messages of `part` ClickHouse cannot read, with its reasons (refused_rows: one
        read of the part into a table that keeps nothing); none when it names no row."""
        found: list[tuple[Msg, str]] = []
        for table, group in (
            (EVENTS_TABLE, [m for m in part if not m.subject.startswith(_MSG_PREFIX)]),
            (MESSAGE_ENVELOPES_TABLE, [m for m in part if m.subject.startswith(_MSG_PREFIX)]),
        ):
            if not group:
                continue
            try:
                rows = await asyncio.to_thread(
                    refused_rows, self.client, table, [bodies.get(id(m), m.data) for m in group]
                )
            except Exception:  # no row named (or ClickHouse away): bisecting finds them
                return []
            found += [(group[at], _reason(Exception(text))) for at, text in rows]
        return found

    async def _insert_retrying(self, msgs: list[Msg], bodies: dict[int, bytes]) -> None:
        if bodies:
            events = [bodies.get(id(m), m.data) for m in msgs if not m.subject.startswith(_MSG_PREFIX)]
            messages = [bodies.get(id(m), m.data) for m in msgs if m.subject.startswith(_MSG_PREFIX)]
        else:
            messages = [m.data for m in msgs if m.subject.startswith(_MSG_PREFIX)]
            events = (
                [m.data for m in msgs if not m.subject.startswith(_MSG_PREFIX)]
                if messages
                else [m.data for m in msgs]
            )
        delay = 0.25
        while True:
            started = time.monotonic()
            try:
                # No subject column per row: splicing it into every body cost the event loop's
                # thread measurable time; the contract derives it from event and agent.
                await asyncio.to_thread(self._insert, self.client, events, messages)
            except Exception as exc:
                code = _error_code(exc)
                if code in _DATA_ERROR_CODES:
                    raise Poison(_reason(exc)) from None
                self.stats.insert_failures += 1
                self.stats.last_error = _reason(exc)[:300]
                log.warning("ClickHouse insert failed (%s); retrying in %.1fs", self.stats.last_error, delay)
                await self._hold(msgs, delay)
                delay = min(delay * 2, self._retry_max)
                continue
            self.stats.batches += 1
            self.stats.last_error = ""
            log.debug("stored %d events, %d messages in %.0f ms", len(events), len(messages),
                      (time.monotonic() - started) * 1000)  # fmt: skip
            return

    async def _hold(self, msgs: list[Msg], seconds: float) -> None:
        """Wait, keeping JetStream from redelivering `msgs` elsewhere (in-progress acks)."""
        end = time.monotonic() + seconds
        while True:
            with contextlib.suppress(Exception):  # the bus may be away too; redelivery is then fine
                await in_progress_all(msgs)
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

    async def dead_letter_rows(
        self, rows: list[tuple[str, int, int, str, bytes]], hold: Sequence[Msg] = ()
    ) -> None:
        """Write dead-letter rows, retrying while ClickHouse is away (holding `hold` meanwhile)."""
        delay = 0.25
        while True:
            try:
                kept = await asyncio.to_thread(insert_dead_letters, self.client, rows)
            except Exception as exc:
                self.stats.insert_failures += 1
                self.stats.last_error = _reason(exc)[:300]
                await self._hold(list(hold), delay)
                delay = min(delay * 2, self._retry_max)
                continue
            self.stats.dead_letters += len(kept)
            for row in kept:
                log.warning("dead letter: %s", row[3][:200])
            return


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


async def _batch_as_is(msgs: list[Msg]) -> NatsBatchMessage:
    """The fetched messages as the batch's body. FastStream's batch parser copies every body
    into a list and reads every message's headers, which makes `fastparse` parse them all; the
    store's handler needs the nats-py messages themselves."""
    return NatsBatchMessage(raw_message=msgs, body=msgs)


async def _raw_batch(msg: Any) -> Any:
    """The batch's body as `_batch_as_is` left it: FastStream's default decoder parses every
    message of a batch into its own StreamMessage (a uuid4 each) to JSON-decode bodies this
    handler never reads; that was a quarter of the store's time."""
    return msg.body


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
        parser=_batch_as_is,
        decoder=_raw_batch,
        title="store",
        description="Every envelope on genie.> into ClickHouse; acked after the insert.",
    )
    async def store_events(batch: Any) -> None:
        # The fetched nats-py messages themselves (see _batch_as_is). Not `msg: NatsMessage`:
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
