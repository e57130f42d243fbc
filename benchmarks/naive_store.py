"""The naive reference store for benchmarks/store_bench.py (not part of agentwatch).

What a straightforward FastStream consumer looks like: a JetStream batch pull subscriber that
decodes every message into a pydantic-validated model, builds row dicts and inserts the batch
with clickhouse-connect. It gets the same consumer limits as agentwatch's store, so the
comparison measures the per-event work, not a smaller ack window.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from datetime import datetime
from pathlib import Path
from typing import Any

import clickhouse_connect
from faststream import FastStream
from faststream.middlewares import AckPolicy
from faststream.nats import JStream, NatsBroker, PullSub
from nats.js.api import ConsumerConfig
from pydantic import BaseModel

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "src"))

from agentwatch.store.migrations import apply_migrations


class Envelope(BaseModel):
    v: int
    id: str
    timestamp: datetime
    event: str
    kind: str
    agent: str
    team: str = ""
    direction: str = ""
    peer: str = ""
    text: str = ""
    source: str = ""
    session_id: str = ""
    agent_id: str = ""
    agent_type: str = ""
    parent_agent: str = ""
    tool_name: str = ""
    tool_use_id: str = ""
    host: str = ""
    cwd: str = ""
    redacted: int = 0
    truncated: bool = False
    data: dict[str, Any] = {}


COLUMNS = list(Envelope.model_fields)
client = clickhouse_connect.get_client(dsn="chdb://" + os.environ["NAIVE_CLICKHOUSE_DIR"])
apply_migrations(client)
broker = NatsBroker(os.environ["NAIVE_NATS_URL"], logger=None)
app = FastStream(broker, logger=None)


@broker.subscriber(
    "genie.>",
    stream=JStream("GENIE", declare=False),
    durable="naive-store",
    config=ConsumerConfig(max_ack_pending=40_000, ack_wait=60),
    pull_sub=PullSub(batch_size=5000, timeout=0.2, batch=True),
    ack_policy=AckPolicy.NACK_ON_ERROR,
)
async def store(batch: list[dict[str, Any]]) -> None:
    rows = []
    for item in batch:
        env = Envelope.model_validate(item).model_dump()
        env["data"] = json.dumps(env["data"])
        rows.append([env[c] for c in COLUMNS])
    await asyncio.to_thread(client.insert, "events", rows, column_names=COLUMNS)


if __name__ == "__main__":
    asyncio.run(app.run())
