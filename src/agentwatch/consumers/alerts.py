"""The watchdog: a consumer of the live stream that raises alerts (rules in consumers/rules.py).

Beside the store (`agentwatch up`, `agentwatch store`) it reads what the store's subscriber fetched
(`Watchdog.see`): one delivery, one parse and one acknowledgement per event for both, the store's
(acknowledged once stored). Alone (`agentwatch alerts run`) it follows GENIE with its own durable
pull consumer (`alerts_router`). It feeds every envelope to the rule engine and evaluates the
time-based rules every `TICK_S`. Every alert change is published on
`agentwatch.alert.{severity}.{rule}` (the ALERTS stream, de-duplicated by `{id}.{state}`), kept
in the `alerts` table and offered to the webhook sinks.

On start it rebuilds its state from the store: the alerts open when it stopped (open_alerts) are
taken as firing, so they are not fired again, and the last `AGENTWATCH_ALERTS_REPLAY_SECONDS` of
events are replayed into the engine without publishing: the stored ones, and the ones the durable
it reads had been delivered that the store had not acknowledged (killed, stopped before it fetched them,
or behind), read back from the GENIE stream; live events wait until the replay is done. The
first tick then resolves what cleared meanwhile. An alert fired again after a crash between
publishing and storing has the same id and state, so the bus and the table keep one copy.

The rules come from a TOML file (AGENTWATCH_ALERTS_FILE, default `alerts.toml` in the data dir,
written with every default commented on first start), read again when it changes; a file that
cannot be used is logged with its line and the rules in force stay.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import time
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson
from faststream.middlewares import AckPolicy
from faststream.nats import JStream, NatsBroker, NatsRouter, PullSub
from nats.aio.msg import Msg

from agentwatch import config
from agentwatch.bus import fastpull
from agentwatch.bus import streams as bus
from agentwatch.bus.fastpull import ack_all
from agentwatch.consumers.batch import batch_as_is, raw_batch
from agentwatch.consumers.rulebook import Rules, RulesError, default_file_text, parse_rules
from agentwatch.consumers.rules import Engine, Json, parse_time
from agentwatch.consumers.screen import Fixes, screen
from agentwatch.consumers.sinks import Sinks
from agentwatch.contract import ALL_SUBJECTS, MSG_ID_HEADER, is_usage_subject
from agentwatch.store import answer, queries
from agentwatch.store.writes import insert_alerts

if TYPE_CHECKING:
    from clickhouse_connect.driver.client import Client

log = logging.getLogger("agentwatch.alerts")

TICK_S = 0.25
BUDGET_POLL_S = 30.0
# Seconds a fetched batch may wait for more messages before the rules see it. FastStream's batch
# pull hands a batch over when it is full or this window ends, so an event waits up to this long
# before it can fire its alert: at 0.1 s the window was most of the rule-to-alert latency (median
# 56-77 ms on a quiet bus, p95 170-460 ms under 2,000 events/s). Idle, each window is one pull
# request to the server: 33 a second, about 1% of a core for the collector and nats-server each.
FETCH_WINDOW_S = 0.03


def rules_path(environ: Mapping[str, str] = os.environ) -> Path:
    return Path(
        environ.get("AGENTWATCH_ALERTS_FILE") or os.path.join(config.data_dir(environ), "alerts.toml")
    )


class Watchdog:
    """The rule engine between the bus and the store."""

    def __init__(
        self, client: Client, environ: Mapping[str, str] = os.environ, *, durable: str = bus.ALERTS_DURABLE
    ) -> None:
        self.client = client
        self.durable = durable  # the durable whose deliveries it sees (the store's, beside it)
        self.environ = environ
        self.engine = Engine()
        self.path = rules_path(environ)
        self.rules_error = ""
        self._mtime = -1.0
        self._broker: NatsBroker | None = None
        self._sinks: Sinks | None = None
        self._unsent: list[Json] = []
        self._task: asyncio.Task[None] | None = None
        self._rebuilt = asyncio.Event()  # live events wait for the rebuild (it replays older ones)
        self._early: list[list[Msg]] = []  # batches `see` was handed before the rebuild was done
        self._publishing: set[asyncio.Task[None]] = set()
        self.published = 0
        self.observed = 0

    # -- rules ---------------------------------------------------------------------------------

    def load_rules(self) -> Rules | None:
        """Read the rules file when it changed; on a bad file, log it and keep the rules in force."""
        try:
            if not self.path.exists():
                self.path.parent.mkdir(parents=True, exist_ok=True)
                self.path.write_text(default_file_text())
            mtime = self.path.stat().st_mtime
            if mtime == self._mtime:
                return None
            self._mtime = mtime
            rules = parse_rules(self.path.read_text(), str(self.path))
        except (OSError, UnicodeDecodeError, RulesError) as exc:
            self.rules_error = str(exc)
            log.error("alert rules not changed: %s", exc)
            return None
        self.rules_error = ""
        self.engine.set_rules(rules)
        return rules

    # -- lifecycle -----------------------------------------------------------------------------

    async def start(self, broker: NatsBroker) -> None:
        self._broker = broker
        self._sinks = Sinks.from_settings()
        self.load_rules()
        try:
            await self._restore()
        finally:
            self._rebuilt.set()
            early, self._early = self._early, []
            for msgs in early:
                self.see(msgs)
        self._task = asyncio.create_task(self._ticker(), name="agentwatch-alerts")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        if self._publishing:
            await asyncio.gather(*self._publishing, return_exceptions=True)
        if self._sinks is not None:
            await self._sinks.aclose()

    async def _restore(self) -> None:
        seconds = config.number(self.environ, "AGENTWATCH_ALERTS_REPLAY_SECONDS", 3600)
        try:
            open_rows = await asyncio.to_thread(
                _rows, self.client, queries.alerts(open_only=True, limit=100_000)
            )
            events = await asyncio.to_thread(_rows, self.client, queries.replay_events(seconds))
        except Exception as exc:  # a store that is not there yet: start empty
            log.warning("alerts: could not rebuild from the store (%s)", exc)
            return
        for row in open_rows:
            row["details"] = _object(row.get("details"))
            row["key"] = row["details"].get("key", "")
        self.engine.restore(open_rows)
        for env in events:
            env["data"] = _object(env.get("data"))
            # Seconds, converted once: the sort and the engine read them as they are.
            env["timestamp"] = parse_time(env.get("timestamp"))
        events.extend(await self._seen_not_stored(time.time() - seconds))
        events.sort(key=lambda env: (env["timestamp"], str(env.get("id", ""))))
        for env in events:
            self.engine.observe(env)  # (an event in both lists is taken once: the engine knows its id)
        await self._poll_costs()

    async def _seen_not_stored(self, since: float) -> list[Json]:
        """The envelopes of the window this watchdog's durable was delivered and the store had not
        acknowledged when they last ran (stopped at once, killed, or the store behind): the stream
        still holds them, the store's query does not have them yet."""
        try:
            js: Any = self._broker.config.connection_state.stream if self._broker else None
            first, last = await bus.seen_not_stored(js, self.durable)
            # What this process was handed already (`see`, while the rebuild runs) it takes after
            # the rebuild: read back only what was delivered before it.
            last = min(last, self._first_early_seq() - 1)
            msgs = await bus.read_range(js, first, last, since=since)
        except Exception as exc:  # the bus busy or away: the rebuild has the store's events only
            log.warning("alerts: could not read back from the stream (%s)", exc)
            return []
        out: list[Json] = []

        def keep(msg: Msg, env: Json) -> None:  # (times corrected as the store stores them)
            if not is_usage_subject(msg.subject) and (at := parse_time(env.get("timestamp"))) >= since:
                out.append({**env, "timestamp": at})  # seconds, as the stored events have them

        screen(msgs, each=keep)
        return out

    async def _poll_costs(self) -> None:
        if not self.engine.rules.budget.enabled:
            return
        try:
            rows = await asyncio.to_thread(_rows, self.client, queries.BUDGET_COSTS)
        except Exception as exc:  # the store busy or away: the rule waits for the next poll
            log.warning("alerts: could not read the costs (%s)", exc)
            return
        self.engine.observe_costs((str(r["scope"]), str(r["name"]), r["cost_usd"]) for r in rows)

    async def _ticker(self) -> None:
        last_costs = time.monotonic()
        budget_poll = float(
            config.number(self.environ, "AGENTWATCH_ALERTS_BUDGET_POLL_SECONDS", int(BUDGET_POLL_S))
        )
        while True:
            await asyncio.sleep(TICK_S)
            try:
                self.load_rules()
                if time.monotonic() - last_costs >= budget_poll:
                    last_costs = time.monotonic()
                    await self._poll_costs()
                await self.publish(self.engine.tick(time.time()))
            except Exception:  # never let the watchdog die on one bad tick
                log.exception("alerts: tick failed")

    # -- intake and output ---------------------------------------------------------------------

    async def take(self, msgs: list[Msg]) -> None:
        """A fetched batch of envelopes: into the engine (once its state is rebuilt: the replay
        of older events comes first), then acknowledged; the alerts an event completed (a loop, a
        failure burst) are published at once, not at the next tick."""
        if not self._rebuilt.is_set():
            await self._rebuilt.wait()
        fired, _ = self._rules(msgs)
        await ack_all(msgs)
        if fired:
            await self.publish(fired)

    def see(self, msgs: list[Msg]) -> Fixes:
        """A batch the store's subscriber fetched (the store acknowledges it once stored): into the
        engine at once, or after the rebuild while it runs; what an event completed is published
        without waiting for the store's insert or the next tick. Each body is parsed once for
        both: returns what screening it found for the store (`screen`)."""
        if not self._rebuilt.is_set():
            self._early.append(msgs)
            return screen(msgs)
        fired, fixes = self._rules(msgs)
        if fired:
            task = asyncio.create_task(self.publish(fired), name="agentwatch-alerts-publish")
            self._publishing.add(task)
            task.add_done_callback(self._publishing.discard)
        return fixes

    def _first_early_seq(self) -> int:
        """The lowest stream sequence of the batches `see` holds for after the rebuild (a large
        number when it holds none): a batch comes in stream order, its first message lowest."""
        seqs = []
        for msgs in self._early:
            with contextlib.suppress(Exception):  # not a JetStream delivery: no sequence
                seqs.append(int(msgs[0].metadata.sequence.stream))
        return min(seqs, default=2**63)

    def _rules(self, msgs: list[Msg]) -> tuple[list[Json], Fixes]:
        """Every envelope of `msgs` through the rules, as the store stores it (`screen`: what is no
        envelope the store dead-letters, nothing to watch): the alerts they fired, and what
        screening found."""
        fired: list[Json] = []
        now = time.time()
        take = self.engine.take
        observed = 0

        def each(_msg: Msg, env: Json) -> None:
            nonlocal observed
            observed += 1
            fired.extend(take(env, now))

        fixes = screen(msgs, now, each)
        self.observed += observed
        return fired, fixes

    async def publish(self, changes: list[Json]) -> None:
        """On the bus (retried next tick while it fails), then in the table and to the sinks."""
        pending, self._unsent = [*self._unsent, *changes], []
        stored: list[bytes] = []
        for alert in pending:
            body = orjson.dumps(alert)
            try:
                assert self._broker is not None
                await self._broker.publish(
                    body,
                    bus.alert_subject(alert["severity"], alert["rule"]),
                    headers={MSG_ID_HEADER: f"{alert['id']}.{alert['state']}"},
                    stream=bus.ALERTS_STREAM,
                )
            except Exception as exc:
                log.warning("alerts: publish failed (%s); retrying", exc)
                self._unsent.append(alert)
                continue
            self.published += 1
            stored.append(orjson.dumps({**alert, "details": orjson.dumps(alert["details"]).decode()}))
            if self._sinks is not None:
                self._sinks.send(alert)
        if stored:
            try:
                await asyncio.to_thread(insert_alerts, self.client, stored)
            except Exception as exc:  # the bus has them; the next start re-derives the open ones
                log.warning("alerts: store insert failed (%s)", exc)


def _rows(client: Client, query: queries.Query) -> list[dict[str, Any]]:
    """`query`'s rows as the read side's typed answer gives them (answer.from_rows): a time is an
    aware UTC datetime, decoded once, in one place."""
    result = client.query(query.sql, parameters=query.params or {})
    types = [t.name for t in result.column_types]
    return answer.from_rows(result.column_names, types, result.result_rows).dicts()


def _object(value: object) -> Json:
    if isinstance(value, dict):
        return value
    try:
        parsed = orjson.loads(str(value or "{}"))
    except orjson.JSONDecodeError:
        return {}
    return parsed if isinstance(parsed, dict) else {}


def alerts_router(
    watchdog: Watchdog, *, fetch_batch: int = 2000, fetch_timeout: float = FETCH_WINDOW_S
) -> NatsRouter:
    """The watchdog's FastStream subscriber: its own durable pull consumer of GENIE, read with the
    store's fast pull and parser (bus/fastpull.py) also when it runs alone (`agentwatch alerts
    run`): nats-py's own fetch and parser took four times its CPU per event."""
    fastpull.install()
    router = NatsRouter()

    @router.subscriber(
        ALL_SUBJECTS,
        stream=JStream(bus.STREAM_NAME, subjects=[ALL_SUBJECTS], declare=False),
        durable=bus.ALERTS_DURABLE,
        config=bus.alerts_consumer_config(),
        pull_sub=PullSub(batch_size=fetch_batch, timeout=fetch_timeout, batch=True),
        ack_policy=AckPolicy.MANUAL,
        parser=batch_as_is,
        decoder=raw_batch,
        title="alerts",
        description="The watchdog: every envelope into the alert rules; alerts on agentwatch.alert.>.",
    )
    async def watch(batch: Any) -> None:
        # The fetched nats-py messages themselves, as the store takes them (consumers/store.py).
        await watchdog.take(batch)

    return router
