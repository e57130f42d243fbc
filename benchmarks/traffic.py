"""The live benchmarks' traffic: the demo team's messages, encoded before a run and published
at a steady rate (alert_bench, tui_bench and screen_bench share it, so each measures the same
2,000 events/s; the demo command alone cannot keep that pace on a loaded machine)."""

from __future__ import annotations

import asyncio
import time
from typing import Any

from agentwatch.demo.simulator import TeamSimulator


def demo_messages(count: int, seed: int = 7) -> list[tuple[str, bytes]]:
    """The first `count` messages (subject, body) of the demo team with this seed."""
    out: list[tuple[str, bytes]] = []
    for subject, _, body in TeamSimulator(seed=seed).messages():
        out.append((subject, body))
        if len(out) >= count:
            return out
    return out


async def publish_paced(nc: Any, messages: list[tuple[str, bytes]], rate: float) -> tuple[int, float]:
    """`messages` at `rate` a second, in 10 ms slices; (sent, seconds taken)."""
    start = time.perf_counter()
    sent = 0
    while sent < len(messages):
        due = min(len(messages), int((time.perf_counter() - start) * rate) + 1)
        for subject, body in messages[sent:due]:
            await nc.publish(subject, body)
        sent = max(sent, due)
        await asyncio.sleep(0.01)
    await nc.flush()
    return sent, time.perf_counter() - start
