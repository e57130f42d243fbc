"""`otel-export` against a real OTLP backend: Arize Phoenix's server (PyPI `arize-phoenix`, 20.x),
run here as a subprocess on a free loopback port with its working directory in the test's tmp, its
spans read back through its own client (`phoenix.client.Client().spans.get_spans`).

What it checks: the demo team, the Codex and Gemini captures through their installed hooks and the
shared Claude Code transcripts' usage (as the hook sends it) arrive as traces; per session the span
tree (lead, sub-agents and teammates, tools) is the store's agents and tool calls, the chat spans'
tokens are the store's usage; every attribute name is a GenAI convention's or under `agentwatch.`;
no prompt or tool output is in any attribute (content is off); and an exporter killed mid-export
and started again leaves each span once, none missing, none without its parent.

Phoenix takes traces only (no OTLP metrics): the exporter runs with AGENTWATCH_OTLP_EXPORT_METRICS_S=0.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import threading
import time
import urllib.request
from collections import defaultdict
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import SimpleNamespace
from typing import Any, ClassVar, cast

import nats
import pytest

from agentwatch.consumers.otel_spans import Tracer
from tests.conftest import HOOK_INBOX, bus_login, clean_env, free_port, run_cli
from tests.integration.test_cost_store import SESSIONS, session_bodies
from tests.integration.test_harnesses import installed, play
from tests.integration.test_store import Service, sql_rows
from tests.services import NatsServer
from tests.unit.test_otel_names import CONVENTION

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]
_ = installed  # the module fixture: both CLIs' homes and the hooks `hooks install` registered

Json = dict[str, Any]
# What Phoenix adds of its own when it stores a span (its OpenInference view of the GenAI names).
PHOENIX_OWN = ("llm.", "openinference.", "session.", "input.", "output.", "tool.", "tool_call.", "metadata")


@pytest.fixture(scope="module", autouse=True)
def phoenix(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """Phoenix's server, started and not waited for: it takes tens of seconds to come up, which the
    tests spend starting the pipeline and playing the sessions (the exporter retries until the
    backend takes its spans); `backend_spans` waits for it when a test first reads."""
    work = tmp_path_factory.mktemp("phoenix")
    port = free_port()
    env = clean_env(
        PHOENIX_WORKING_DIR=str(work),
        PHOENIX_HOST="127.0.0.1",
        PHOENIX_PORT=str(port),
        PHOENIX_GRPC_PORT=str(free_port()),
        PHOENIX_TELEMETRY_ENABLED="false",
    )
    log = (work / "phoenix.log").open("w")
    proc = subprocess.Popen(
        [sys.executable, "-m", "phoenix.server.main", "serve"], env=env, cwd=work, stdout=log, stderr=log
    )
    url = f"http://127.0.0.1:{port}"
    STARTING[url] = (proc, work / "phoenix.log")
    try:
        yield url
    finally:
        STARTING.pop(url, None)
        proc.terminate()
        proc.wait(30)
        log.close()


# Phoenix servers not yet seen healthy: url -> (process, log).
STARTING: dict[str, tuple[subprocess.Popen[bytes], Path]] = {}


def healthy(url: str, timeout: float = 240) -> None:
    """Once Phoenix at `url` answers its health check (at once after the first time)."""
    if url not in STARTING:
        return
    proc, log = STARTING[url]
    deadline = time.monotonic() + timeout
    while True:
        try:
            with urllib.request.urlopen(f"{url}/healthz", timeout=2):  # noqa: S310 (http, loopback)
                break
        except OSError:
            assert proc.poll() is None, log.read_text()[-3000:]
            assert time.monotonic() < deadline, "Phoenix did not start"
            time.sleep(0.25)
    del STARTING[url]


def backend_spans(url: str) -> list[Json]:
    from phoenix.client import Client

    healthy(url)
    spans = Client(base_url=url).spans.get_spans(project_identifier="default", limit=1_000_000, timeout=60)
    return [cast(Json, s) for s in spans]


def by_conversation(spans: list[Json]) -> dict[str, list[Json]]:
    out: dict[str, list[Json]] = defaultdict(list)
    for s in spans:
        out[str(s["attributes"].get("gen_ai.conversation.id", ""))].append(s)
    return out


def wait_roots(url: str, sessions: set[str], timeout: float = 150) -> list[Json]:
    """The backend's spans once every session of `sessions` has its root (ended, or lost)."""
    deadline = time.monotonic() + timeout
    while True:
        spans = backend_spans(url)
        roots = {str(s["attributes"].get("gen_ai.conversation.id")) for s in spans if not s.get("parent_id")}
        if sessions <= roots or time.monotonic() > deadline:
            assert sessions <= roots, f"sessions without their root span: {sorted(sessions - roots)[:5]}"
            return spans
        time.sleep(1)


def publish(url: str, bodies: list[tuple[str, bytes]]) -> None:
    async def send() -> None:
        nc = await nats.connect(url, inbox_prefix=HOOK_INBOX)  # the hook's login takes acks there
        js = nc.jetstream()
        for subject, body in bodies:
            await js.publish(subject, body)
        await nc.close()

    asyncio.run(send())


def exporter_env(tmp_path: Path, url: str, nats_url: str, **extra: str) -> dict[str, str]:
    settings = {
        "AGENTWATCH_DATA_DIR": str(tmp_path / "data"),
        "AGENTWATCH_NATS_URL": nats_url,
        "AGENTWATCH_OTLP_EXPORT_URL": url,
        "AGENTWATCH_OTLP_EXPORT_METRICS_S": "0",
        "AGENTWATCH_LOST_AFTER_S": "8",
    }
    return clean_env(**{**settings, **extra})


def wait_stored(env: dict[str, str], timeout: float = 90) -> int:
    """The store's event count once it stops growing."""
    deadline, last = time.monotonic() + timeout, -1
    while time.monotonic() < deadline:
        n = int(sql_rows(env, "SELECT count() AS n FROM events")[0]["n"])
        if n == last and n > 0:
            return n
        last = n
        time.sleep(1)
    raise AssertionError("the store did not settle")


class Refusing(BaseHTTPRequestHandler):
    """An OTLP/HTTP backend away for its first requests (503), then taking spans."""

    refuse = 3
    span_ids: ClassVar[list[bytes]] = []

    def do_POST(self) -> None:
        from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        if Refusing.refuse > 0:
            Refusing.refuse -= 1
            self.send_response(503)
        else:
            request = ExportTraceServiceRequest.FromString(body)
            for rs in request.resource_spans:
                for ss in rs.scope_spans:
                    Refusing.span_ids.extend(s.span_id for s in ss.spans)
            self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *_args: Any) -> None:
        pass


def test_a_backend_away_gets_every_span_once_when_it_is_back(tmp_path: Path) -> None:
    """(First: Phoenix comes up meanwhile for the tests after, which read it.)"""
    backend = ThreadingHTTPServer(("127.0.0.1", free_port()), Refusing)
    threading.Thread(target=backend.serve_forever, daemon=True).start()
    server = NatsServer(tmp_path / "nats").start()
    url = f"http://127.0.0.1:{backend.server_address[1]}"
    exporter = Service(
        ["otel-export"], exporter_env(tmp_path, url, server.url, AGENTWATCH_ACK_WAIT_SECONDS="3")
    )
    try:
        exporter.wait_ready(60)
        result = run_cli("demo", "--rate", "0", "--count", "300", "--seed", "7", env=exporter.env)
        assert result.returncode == 0, result.stderr
        deadline = time.monotonic() + 90
        while not Refusing.span_ids or Refusing.refuse > 0:
            assert time.monotonic() < deadline, "nothing exported"
            time.sleep(0.5)
        wait_acked(server.url)  # every batch acknowledged: none can come again
        time.sleep(1.5)  # (a copy already fetched would be taken within a fetch window)
        ids = list(Refusing.span_ids)
        assert ids and len(ids) == len(set(ids)), "a span sent twice"
        envelopes = stream_envelopes(server.url)
        tracer = Tracer(lost_after_s=8)
        finished = {s.span_id.to_bytes(8, "big") for e in envelopes for s in tracer.take(e)}
        assert finished <= set(ids)
    finally:
        exporter.stop()
        server.stop()
        backend.shutdown()
        backend.server_close()


def test_every_harness_arrives_as_the_stores_trees_and_tokens(
    phoenix: str, installed: Json, tmp_path: Path
) -> None:
    env = exporter_env(tmp_path, phoenix, f"nats://127.0.0.1:{free_port()}")
    up = Service(["up"], env)
    try:
        up.wait_ready(60)
        assert any("otel export:" in line for line in up.lines)
        result = run_cli("demo", "--rate", "0", "--count", "600", "--seed", "39", env=env)
        assert result.returncode == 0, result.stderr
        bus = cast(NatsServer, SimpleNamespace(url=bus_login(env)))  # hooks with data dirs of their own
        played = {h: play(installed, h, bus, tmp_path / f"hook-{h}") for h in ("codex", "gemini")}
        publish(
            bus_login(env),
            [b for s, main, subs, _ in SESSIONS for b in session_bodies(s, main, subs)],
        )
        wait_stored(env)
        sessions = {
            r["s"]
            for r in sql_rows(env, "SELECT DISTINCT session_id AS s FROM events WHERE session_id != ''")
        }
        sessions |= {r["s"] for r in sql_rows(env, "SELECT DISTINCT session_id AS s FROM usage")}
        spans = wait_roots(phoenix, sessions)
        assert_trees(env, by_conversation(spans), sessions)
        assert_tokens(env, by_conversation(spans))
        assert_names_and_no_content(spans, played)
        reasons: dict[str, list[list[str]]] = defaultdict(list)  # provider: each chat span's
        for s in spans:
            a = s["attributes"]
            if a["gen_ai.operation.name"] == "chat":
                reasons[a["gen_ai.provider.name"]].append(list(a.get("gen_ai.response.finish_reasons") or ()))
        gemini = reasons["gcp.gemini"]
        assert gemini and all("STOP" in r for r in gemini), gemini
        # Claude Code's transcripts say each message's stop reason (the demo's usage says none)
        claude = {r for rs in reasons["anthropic"] for r in rs}
        assert {"end_turn", "tool_use"} <= claude, claude
    finally:
        up.stop()


def assert_trees(
    env: dict[str, str],
    traces: dict[str, list[Json]],
    sessions: set[str],
    harnesses: frozenset[str] | set[str] = frozenset({"claude-code", "codex", "gemini-cli"}),
) -> None:
    tools: dict[str, set[str]] = defaultdict(set)
    for r in sql_rows(env, "SELECT session_id, tool_use_id FROM tool_calls WHERE status != 'orphan'"):
        tools[r["session_id"]].add(r["tool_use_id"])
    agents: dict[str, set[str]] = defaultdict(set)
    for r in sql_rows(env, "SELECT session_id, agent FROM agents WHERE agent_id != ''"):
        agents[r["session_id"]].add(r["agent"])
    nested: dict[str, int] = defaultdict(int)  # sub-agents and teammates under their lead, by harness
    for session in sessions:
        spans = traces[session]
        ids = {s["context"]["span_id"] for s in spans}
        assert len(ids) == len(spans), f"{session}: a span twice"
        assert all(not s.get("parent_id") or s["parent_id"] in ids for s in spans), (
            f"{session}: an orphan span"
        )
        (root,) = [s for s in spans if not s.get("parent_id")]
        assert root["attributes"]["gen_ai.operation.name"] == "invoke_agent"
        op = defaultdict(list)
        for s in spans:
            op[s["attributes"]["gen_ai.operation.name"]].append(s)
        assert {s["attributes"]["gen_ai.tool.call.id"] for s in op["execute_tool"]} == tools[session], session
        children = [s for s in op["invoke_agent"] if s.get("parent_id")]
        nested[root["attributes"]["agentwatch.harness"]] += len(children)
        assert all(s["parent_id"] == root["context"]["span_id"] for s in children)
        assert {s["attributes"]["gen_ai.agent.name"] for s in children} >= agents[session], session
        agent_ids = {s["context"]["span_id"] for s in children} | {root["context"]["span_id"]}
        assert all(s["parent_id"] in agent_ids for s in op["execute_tool"] + op["chat"])
    assert set(nested) == harnesses and min(nested.values()) > 0, nested


def assert_tokens(env: dict[str, str], traces: dict[str, list[Json]]) -> None:
    rows = sql_rows(
        env,
        "SELECT session_id, sum(input_tokens + cache_read_tokens + cache_write_tokens) AS i, "
        "sum(output_tokens) AS o, sum(cache_read_tokens) AS r, sum(cache_write_tokens) AS w "
        "FROM usage FINAL GROUP BY session_id",
    )
    assert rows
    keys = {
        "i": "gen_ai.usage.input_tokens",
        "o": "gen_ai.usage.output_tokens",
        "r": "gen_ai.usage.cache_read.input_tokens",
        "w": "gen_ai.usage.cache_write.input_tokens",
    }
    for row in rows:
        chats = [s for s in traces[row["session_id"]] if s["attributes"]["gen_ai.operation.name"] == "chat"]
        for col, key in keys.items():
            assert sum(int(s["attributes"].get(key, 0)) for s in chats) == int(row[col]), (row, key)


def assert_names_and_no_content(spans: list[Json], played: dict[str, list[Json]]) -> None:
    for s in spans:
        for name in s["attributes"]:
            if name.startswith(PHOENIX_OWN):
                continue
            assert name in CONVENTION or name.startswith("agentwatch."), name
    text = json.dumps([s["attributes"] for s in spans], ensure_ascii=False)
    secrets = set()
    for records in played.values():
        for rec in records:
            p = rec["payload"]
            for key in ("prompt", "tool_response", "tool_input", "prompt_response", "last_assistant_message"):
                value = p.get(key)
                flat = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
                if value and len(flat) >= 16:
                    secrets.add(flat[:60])
    assert secrets
    leaked = [x for x in secrets if x in text]
    assert not leaked, leaked[:3]


def test_an_exporter_killed_mid_export_leaves_each_span_once(phoenix: str, tmp_path: Path) -> None:
    server = NatsServer(tmp_path / "nats").start()
    exporters: list[Service] = []  # stopped whatever the test finds: none outlives it
    try:
        # (lost after 8 s of event time: the exporters and this tracer end the same sessions, even
        # when a busy machine slows the demo, the exporters or the restart)
        env = exporter_env(tmp_path, phoenix, server.url, AGENTWATCH_ACK_WAIT_SECONDS="3")
        first = Service(["otel-export"], env)
        exporters.append(first)
        first.wait_ready(60)
        result = run_cli("demo", "--rate", "0", "--count", "3000", "--seed", "3939", env=env)
        assert result.returncode == 0, result.stderr
        deadline = time.monotonic() + 60
        while not any(s["attributes"].get("gen_ai.conversation.id") for s in backend_spans(phoenix)):
            assert time.monotonic() < deadline
            time.sleep(0.5)
        first.kill()
        second = Service(["otel-export"], env)
        exporters.append(second)
        second.wait_ready(60)
        envelopes = stream_envelopes(server.url)
        tracer = Tracer(lost_after_s=8)
        expected = [s for env_ in envelopes for s in tracer.take(env_)] + tracer.close_all(time.time_ns())
        sessions = {s.attributes["gen_ai.conversation.id"] for s in expected}
        spans = [s for s in wait_roots(phoenix, {str(x) for x in sessions}) if s["attributes"].get(
            "gen_ai.conversation.id") in sessions]  # fmt: skip
        got = [s["context"]["span_id"] for s in spans]
        assert len(got) == len(set(got))
        want = {f"{s.span_id:016x}": s for s in expected}
        assert set(got) == set(want), differences(spans, want)
        assert all(not s.get("parent_id") or s["parent_id"] in set(got) for s in spans)
    finally:
        for exporter in exporters:
            if exporter.proc.poll() is None:
                exporter.kill()
        server.stop()


def differences(spans: list[Json], want: dict[str, Any]) -> str:
    """What the backend holds that the tracer did not make, and the reverse (a failure's message)."""
    held = {s["context"]["span_id"]: s for s in spans}
    extra = [(held[i]["name"], held[i]["attributes"]) for i in sorted(set(held) - set(want))]
    missing = [(want[i].name, want[i].attributes, want[i].end_ns) for i in sorted(set(want) - set(held))]
    return f"in the backend only: {extra[:5]}; not in the backend: {missing[:8]}"


def wait_acked(url: str, timeout: float = 90) -> None:
    """Once the exporter's durable has acknowledged every message of the stream."""
    from agentwatch.bus import streams
    from agentwatch.consumers.otel_export import DURABLE

    async def pending() -> int:
        nc = await nats.connect(url)
        try:
            info = await nc.jetstream().consumer_info(streams.STREAM_NAME, DURABLE)
        finally:
            await nc.close()
        return int(info.num_pending or 0) + int(info.num_ack_pending or 0)

    deadline = time.monotonic() + timeout
    while asyncio.run(pending()):
        assert time.monotonic() < deadline, "the exporter did not acknowledge its batches"
        time.sleep(0.25)


def stream_envelopes(url: str) -> list[Json]:
    from agentwatch.bus import streams

    async def read() -> list[Json]:
        nc = await nats.connect(url)
        try:
            msgs = await streams.read_range(nc.jetstream(), 1, 2**62)
        finally:
            await nc.close()
        return [json.loads(m.data) for m in msgs]

    return asyncio.run(read())


def test_backfill_sends_the_stored_history_as_the_same_trees(phoenix: str, tmp_path: Path) -> None:
    env = exporter_env(tmp_path, phoenix, f"nats://127.0.0.1:{free_port()}")
    store_env = {k: v for k, v in env.items() if k != "AGENTWATCH_OTLP_EXPORT_URL"}
    up = Service(["up"], store_env)
    try:
        up.wait_ready(60)
        assert not any("otel export:" in line for line in up.lines)
        result = run_cli("demo", "--rate", "0", "--count", "500", "--seed", "4242", env=store_env)
        assert result.returncode == 0, result.stderr
        wait_stored(store_env)
        result = run_cli("otel-export", "--since", "30d", "--rate", "5000", env=env, timeout=300)
        assert result.returncode == 0, result.stderr
        assert "events," in result.stderr and "spans sent" in result.stdout
        sessions = {
            r["s"]
            for r in sql_rows(env, "SELECT DISTINCT session_id AS s FROM events WHERE session_id != ''")
        }
        spans = wait_roots(phoenix, sessions, timeout=120)  # (a loaded Phoenix stores late)
        assert_trees(env, by_conversation(spans), sessions, harnesses={"claude-code"})
        assert_tokens(env, by_conversation(spans))
    finally:
        up.stop()
