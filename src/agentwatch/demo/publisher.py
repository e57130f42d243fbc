"""`run_demo`: the simulator's messages onto the bus at a steady rate, with progress lines.

nats-py and asyncio are imported only when publishing starts, so importing the demo stays cheap.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable, Iterator, Mapping
from typing import TYPE_CHECKING, Any, TextIO

from agentwatch import config
from agentwatch.config import display_urls
from agentwatch.contract import DEFAULT_MAX_PAYLOAD, MSG_ID_HEADER
from agentwatch.demo.simulator import DEFAULT_TEAM, DEFAULT_TEAMMATES, DEMO_HOST, TeamSimulator, encode_event
from agentwatch.demo.usage import usage_messages
from agentwatch.demo.world import Event
from agentwatch.summaries import one_line

CALLS_TIMED = 10_000  # open calls remembered for their duration

if TYPE_CHECKING:
    import asyncio

DEFAULT_RATE = 20.0
REPORT_EVERY = 2.0


class DemoError(Exception):
    """The demo cannot publish; `code` is the exit status the command returns."""

    def __init__(self, message: str, code: int = 2) -> None:
        super().__init__(message)
        self.code = code


async def run_demo(
    url: str | None = None,
    *,
    rate: float = DEFAULT_RATE,
    count: int | None = None,
    duration: float | None = None,
    seed: int | None = None,
    agents: int = DEFAULT_TEAMMATES,
    team: str | None = DEFAULT_TEAM,
    host: str = DEMO_HOST,
    out: TextIO | None = None,
    report_every: float = REPORT_EVERY,
    stop: asyncio.Event | None = None,
    environ: Mapping[str, str] | None = None,
) -> int:
    """Publish simulated hook events to the bus at `rate` per second (0: as fast as possible) until
    `count` events were sent, `duration` seconds passed or `stop` is set; returns the events sent
    (SendMessage companions on genie.msg.* come on top). Progress goes to `out`.

    Raises DemoError when the bus cannot be reached or goes away.
    """
    import asyncio

    environ = os.environ if environ is None else environ
    url = url or config.nats_url(environ)
    sim = TeamSimulator(seed, agents, team)
    stop = stop if stop is not None else asyncio.Event()
    nc = await _connect(url, environ)
    limit = []
    if count is not None:
        limit.append(f"{count:,} events")
    if duration is not None:
        limit.append(f"{duration:g}s")
    pace = f"{rate:g} events/s" if rate > 0 else "full speed"
    _say(
        out,
        f"agentwatch demo: publishing to {display_urls(url)} at {pace}"
        f"{' for ' + ' or '.join(limit) if limit else ', Ctrl-C to stop'}; "
        f"team {sim.team_name}: lead + {agents} teammate(s), seed {sim.seed}",
    )
    run = _Publishing(nc, sim, host, asyncio.get_running_loop().time, out, report_every)
    try:
        await run.until(stop, _Pace(rate, run.started), count, duration)
        await nc.flush(timeout=10)
    except Exception as exc:
        reason = one_line(str(exc)) or type(exc).__name__
        raise DemoError(f"publishing stopped after {run.sent:,} events: {reason}", code=1) from None
    finally:
        with contextlib.suppress(Exception):  # the connection is going away either way
            await nc.close()
    elapsed = max(run.clock() - run.started, 1e-9)
    _say(
        out,
        f"done: {run.sent:,} events + {run.companions:,} messages in {elapsed:.2f}s, "
        f"{run.sent / elapsed:,.0f} events/s (target {pace}); {run.usage:,} usage records (token counts)",
    )
    return run.sent


async def _connect(url: str, environ: Mapping[str, str]) -> Any:
    from agentwatch.bus.connect import BusUnreachable, connect

    try:
        return await connect(url, environ, name="agentwatch-demo", role=config.HOOK, timeout=2)
    except (BusUnreachable, ValueError) as exc:
        raise DemoError(f"{exc}: start it with `agentwatch up` or set AGENTWATCH_NATS_URL") from None


def _say(out: TextIO | None, text: str) -> None:
    if out is not None:
        print(text, file=out, flush=True)


class _Pace:
    """How many events are due, and how long until the next: `rate` per second (0: no limit), in
    bursts of at most a tenth of a second's worth; more than a second behind, it starts over
    rather than racing to catch up."""

    def __init__(self, rate: float, started: float) -> None:
        self.rate = rate
        self.base_t, self.base_n = started, 0
        self.min_sleep = 0.004 if rate > 250 else 0.0
        self.max_burst = max(1, int(rate * 0.1)) if rate > 0 else 512

    def burst(self, now: float, sent: int) -> int:
        if self.rate <= 0:
            return self.max_burst
        due = self.base_n + int((now - self.base_t) * self.rate) + 1
        if due - sent > self.rate:
            self.base_t, self.base_n = now, sent
            due = sent + 1
        return min(due - sent, self.max_burst)

    def delay(self, now: float, sent: int) -> float:
        return max(self.base_t + (sent - self.base_n) / self.rate - now, self.min_sleep)


class _Publishing:
    """One run: the simulator's events onto the connection, counted, with a progress line to `out`
    every `report_every` seconds."""

    def __init__(
        self,
        nc: Any,
        sim: TeamSimulator,
        host: str,
        clock: Callable[[], float],
        out: TextIO | None,
        report_every: float,
    ) -> None:
        self.nc = nc
        self.environ = sim.environ
        self.events: Iterator[Event] = sim.events()
        self.host = host
        self.max_payload = int(nc.max_payload or DEFAULT_MAX_PAYLOAD)
        self.clock = clock
        self.out = out
        self.report_every = report_every
        self.sent = self.companions = self.usage = 0
        self.called: dict[tuple[str, str], float] = {}  # (session, tool_use_id) -> its PreToolUse sent
        self.started = clock()
        self.report_t, self.report_n = self.started, 0

    async def until(
        self, stop: asyncio.Event, pace: _Pace, count: int | None, duration: float | None
    ) -> None:
        """Publish at `pace` until `count` events were sent, `duration` passed or `stop` is set."""
        import asyncio

        while not stop.is_set():
            now = self.clock()
            if count is not None and self.sent >= count:
                break
            if duration is not None and now - self.started >= duration:
                break
            burst = pace.burst(now, self.sent)
            if count is not None:
                burst = min(burst, count - self.sent)
            await self.publish(burst)
            now = self.clock()
            self.report(now)
            if pace.rate > 0:
                delay = pace.delay(now, self.sent)
                if duration is not None:
                    delay = min(delay, max(0.0, self.started + duration - now))
                if delay > 0:
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(stop.wait(), delay)
                    continue
            await asyncio.sleep(0)

    async def publish(self, n: int) -> None:
        """The next `n` events, each with its companion messages."""
        for _ in range(n):
            _, payload = next(self.events)
            now = time.time()
            self.timed(payload, now)
            messages = encode_event(
                payload, self.environ, host=self.host, max_payload=self.max_payload, now=now
            )
            usage = usage_messages(payload, self.environ, host=self.host, max_payload=self.max_payload)
            for subject, msg_id, body in messages + usage:
                await self.nc.publish(subject, body, headers={MSG_ID_HEADER: msg_id})
            self.sent += 1
            self.companions += len(messages) - 1
            self.usage += len(usage)

    def timed(self, payload: dict[str, Any], now: float) -> None:
        """A call's `duration_ms` as this run's clock shows it: events go out at the run's pace,
        not at the simulated times, so a result says how long after its PreToolUse it was sent
        (a simulated 140 s build is not said to end 17 s after it began)."""
        event = payload.get("hook_event_name")
        key = (str(payload.get("session_id", "")), str(payload.get("tool_use_id", "")))
        if event == "PreToolUse":
            if len(self.called) >= CALLS_TIMED:  # calls that never ended (a denied permission)
                self.called.pop(next(iter(self.called)))
            self.called[key] = now
        elif event in ("PostToolUse", "PostToolUseFailure") and "duration_ms" in payload:
            began = self.called.pop(key, None)
            if began is not None:
                payload["duration_ms"] = max(1, int((now - began) * 1000))

    def report(self, now: float) -> None:
        if now - self.report_t >= self.report_every:
            _say(
                self.out,
                f"  {now - self.started:6.1f}s  {self.sent:,} events + {self.companions:,} messages  "
                f"{(self.sent - self.report_n) / (now - self.report_t):,.0f} events/s",
            )
            self.report_t, self.report_n = now, self.sent
