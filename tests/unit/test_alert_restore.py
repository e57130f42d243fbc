"""An alert restored from the store (its times aware datetimes, as store.answer gives them)
resolves with its times as the bus carries an alert's, as when it fired."""

from __future__ import annotations

from datetime import UTC, datetime

from agentwatch.consumers.rules import Engine, iso, parse_rules


def test_a_restored_alert_resolves_with_its_times_as_it_fired() -> None:
    engine = Engine(parse_rules("[hook_health]\nspool_bytes = 10\n"))
    engine.observe({"id": "e1", "timestamp": iso(100.0), "event": "Stop", "host": "h", "spool_bytes": 50})
    fired = engine.tick(101.0)
    assert [a["since"] for a in fired] == [iso(101.0)]
    stored = {
        **fired[0],
        "since": datetime.fromtimestamp(101.0, UTC),
        "at": datetime(1970, 1, 1, 0, 1, 41, 500_000, tzinfo=UTC),
    }
    restarted = Engine(parse_rules("[hook_health]\nspool_bytes = 10\n"))
    restarted.restore([stored])
    restarted.observe({"id": "e1", "timestamp": iso(100.0), "event": "Stop", "host": "h", "spool_bytes": 50})
    assert restarted.tick(102.0) == []  # the replayed condition still holds: not fired again
    restarted.observe({"id": "e2", "timestamp": iso(103.0), "event": "Stop", "host": "h", "spool_bytes": 0})
    resolved = restarted.tick(104.0)
    assert [(a["state"], a["id"], a["since"]) for a in resolved] == [("resolved", fired[0]["id"], iso(101.0))]
