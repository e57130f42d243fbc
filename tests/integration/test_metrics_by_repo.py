"""/metrics per repository (consumers/metrics.by_repository): the N repositories with the most
events counted one by one, every other one's figures under `repo="other"`, each figure what SQL
over the stored events and usage gives; the exposition parses with prometheus-client's parser."""

from __future__ import annotations

import json

from clickhouse_connect.driver.client import Client
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from agentwatch.consumers.metrics import by_repository
from agentwatch.contract import build_envelope, encode_envelope
from agentwatch.store.migrations import apply_migrations
from agentwatch.store.usage import insert_usage, usage_rows
from agentwatch.store.writes import insert_batch

# repository -> its events (one session each); two are below the top 2 and become `other`.
REPOS = {"github.com/a/busy": 6, "github.com/a/second": 4, "github.com/a/third": 2, "": 1}


def events() -> list[bytes]:
    bodies = []
    for n, (repo, count) in enumerate(REPOS.items()):
        for i in range(count):
            event = "PreToolUse" if i % 2 == 0 else "PostToolUseFailure"
            payload = {
                "hook_event_name": event,
                "session_id": f"s{n}",
                "tool_name": "Bash",
                "tool_use_id": f"t{i}",
            }
            _, env = build_envelope(payload, {}, host="h")
            env.update(person="p@example.com", repo=repo, branch="main")
            bodies.append(encode_envelope(env))
    return bodies


def usage(repo: str, session: str) -> bytes:
    return json.dumps(
        {
            "v": 1,
            "id": f"u-{session}",
            "timestamp": "2026-11-27T10:00:00.000Z",
            "event": "Usage",
            "kind": "usage",
            "agent": "main",
            "session_id": session,
            "model": "claude-sonnet-4-5",
            "message_id": f"m-{session}",
            "request_id": "r",
            "input_tokens": 1000,
            "output_tokens": 100,
            "cache_read_input_tokens": 0,
            "cache_creation_input_tokens": 0,
            "cache_creation_5m_input_tokens": 0,
            "cache_creation_1h_input_tokens": 0,
            "repo": repo,
        }
    ).encode()


def test_the_top_repositories_by_events_and_the_rest_as_other(chdb_database: Client) -> None:
    apply_migrations(chdb_database)
    insert_batch(chdb_database, events(), [])
    insert_usage(chdb_database, usage_rows([usage(r, f"s{n}") for n, r in enumerate(REPOS)]))
    registry = CollectorRegistry()
    figures = by_repository(chdb_database, top=2)

    class Figures:
        def collect(self) -> list[object]:
            return list(figures)

    registry.register(Figures())  # type: ignore[arg-type]
    text = generate_latest(registry).decode()
    samples = {
        (s.name, s.labels["repo"]): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
        if s.name.endswith("_total")
    }
    assert {repo for _, repo in samples} == {"github.com/a/busy", "github.com/a/second", "other"}
    want = {"github.com/a/busy": 6, "github.com/a/second": 4, "other": 3}
    assert {r: samples[("agentwatch_repo_events_total", r)] for r in want} == want
    calls = {r: samples[("agentwatch_repo_tool_calls_total", r)] for r in want}
    assert calls == {"github.com/a/busy": 3, "github.com/a/second": 2, "other": 2}
    failed = {r: samples[("agentwatch_repo_tool_errors_total", r)] for r in want}
    assert failed == {"github.com/a/busy": 3, "github.com/a/second": 2, "other": 1}
    assert {r: samples[("agentwatch_repo_api_calls_total", r)] for r in want} == {
        "github.com/a/busy": 1,
        "github.com/a/second": 1,
        "other": 2,
    }
    query = "SELECT repo, sum(cost_usd) FROM usage FINAL GROUP BY repo"
    usd: dict[str, float] = {str(r): float(v) for r, v in chdb_database.query(query).result_rows}
    other = usd["github.com/a/third"] + usd[""]
    assert samples[("agentwatch_repo_cost_usd_total", "other")] == other > 0
