"""`run_demo`: the simulator's messages onto the bus at a steady rate, with progress lines.

nats-py and asyncio are imported only when publishing starts, so importing the demo stays cheap.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, TextIO

from agentwatch import config
from agentwatch.config import display_urls
from agentwatch.contract import DEFAULT_MAX_PAYLOAD, MSG_ID_HEADER, one_line
from agentwatch.demo.simulator import DEFAULT_TEAM, DEFAULT_TEAMMATES, DEMO_HOST, TeamSimulator, encode_event

if TYPE_CHECKING:
    import asyncio

DEFAULT_RATE = 20.0
REPORT_EVERY = 2.0


class DemoError(Exception):
    """The demo cannot publish; `code` is the exit status the command returns."""

    def __init__(self, message: str, code: int = 2) -> None:
        super().__init__(message)
        self.code = code


async def _connect(url: str, environ: Mapping[str, str]) -> Any:
    from agentwatch.bus.connect import BusUnreachable, connect

    try:
        return await connect(url, environ, name="agentwatch-demo", timeout=2)
    except (BusUnreachable, ValueError) as exc:
        raise DemoError(f"{exc}: start it with `agentwatch up` or set AGENTWATCH_NATS_URL") from None


def _say(out: TextIO | None, text: str) -> None:
    if out is not None:
        print(text, file=out, flush=True)


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
    loop = asyncio.get_running_loop()
    clock = loop.time
    events = sim.events()
    max_payload = int(nc.max_payload or DEFAULT_MAX_PAYLOAD)
    sent = companions = 0
    started = clock()
    base_t, base_n = started, 0
    report_t, report_n = started, 0
    min_sleep = 0.004 if rate > 250 else 0.0
    max_burst = max(1, int(rate * 0.1)) if rate > 0 else 512
    try:
        while not stop.is_set():
            now = clock()
            if count is not None and sent >= count:
                break
            if duration is not None and now - started >= duration:
                break
            if rate > 0:
                due = base_n + int((now - base_t) * rate) + 1
                if due - sent > rate:  # more than a second behind: don't burst to catch up
                    base_t, base_n = now, sent
                    due = sent + 1
                burst = min(due - sent, max_burst)
            else:
                burst = max_burst
            if count is not None:
                burst = min(burst, count - sent)
            for _ in range(burst):
                _, payload = next(events)
                messages = encode_event(payload, sim.environ, host=host, max_payload=max_payload)
                for subject, msg_id, body in messages:
                    await nc.publish(subject, body, headers={MSG_ID_HEADER: msg_id})
                sent += 1
                companions += len(messages) - 1
            now = clock()
            if now - report_t >= report_every:
                _say(
                    out,
                    f"  {now - started:6.1f}s  {sent:,} events + {companions:,} messages  "
                    f"{(sent - report_n) / (now - report_t):,.0f} events/s",
                )
                report_t, report_n = now, sent
            if rate > 0:
                delay = max(base_t + (sent - base_n) / rate - now, min_sleep)
                if duration is not None:
                    delay = min(delay, max(0.0, started + duration - now))
                if delay > 0:
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(stop.wait(), delay)
                    continue
            await asyncio.sleep(0)
        await nc.flush(timeout=10)
    except Exception as exc:
        reason = one_line(str(exc)) or type(exc).__name__
        raise DemoError(f"publishing stopped after {sent:,} events: {reason}", code=1) from None
    finally:
        with contextlib.suppress(Exception):  # the connection is going away either way
            await nc.close()
    elapsed = max(clock() - started, 1e-9)
    _say(
        out,
        f"done: {sent:,} events + {companions:,} messages in {elapsed:.2f}s, "
        f"{sent / elapsed:,.0f} events/s (target {pace})",
    )
    return sent
