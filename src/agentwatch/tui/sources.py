"""Where the dashboard's data comes from: small Protocols, and their real implementations.

The app takes a LiveSource (envelopes as they happen) and a HistorySource (read-only SQL over the
store) through its constructor, so tests hand it deterministic fakes; the command that opens the
dashboard hands it the real ones (bus/live.py, and the history client of cli/sources.py). Nothing
here imports Textual.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Protocol

from agentwatch.store.answer import Answer

Envelope = dict[str, Any]
# An envelope, or its JSON as it came off the bus (decoded by the app when it applies it).
Deliver = Callable[[Envelope | bytes], None]
Status = Callable[[bool, str], None]


class LiveSource(Protocol):
    """Delivers every envelope on genie.> as it is published, and says when the bus comes and goes."""

    async def run(self, deliver: Deliver, status: Status) -> None:
        """Run until cancelled; reconnect by itself; never raise for a bus that is away."""


class HistorySource(Protocol):
    """Read-only SQL over the event history (`agentwatch sql`'s path), over one connection kept
    for its life. Called from worker threads."""

    def query(self, sql: str, params: Mapping[str, Any] | None = None) -> Answer:
        """The typed answer; raises HistoryError (QueryFailed, HistoryUnreachable) and nothing else.

        `params` fill the SQL's `{name:Type}` placeholders (bound by ClickHouse)."""


def answer_envelopes(answer: Answer) -> list[Envelope]:
    """Rows with envelope column names, as envelopes (data parsed back from its JSON text)."""
    import orjson

    out: list[Envelope] = []
    for env in answer.dicts():
        data = env.get("data")
        if isinstance(data, str):
            try:
                env["data"] = orjson.loads(data)
            except orjson.JSONDecodeError:
                env["data"] = {}
        out.append(env)
    return out
