"""The simulator's public face: a seeded team's hook payloads, and the messages the hook makes of them."""

from __future__ import annotations

import random
from collections.abc import Iterator, Mapping

from agentwatch.contract import DEFAULT_MAX_PAYLOAD, encode_envelope, envelopes_from_stdin
from agentwatch.demo.lead import play_lead
from agentwatch.demo.world import Event, Json, World
from agentwatch.jsonfast import dumpb

# (subject, event id, body): one NATS message, as the hook publishes it.
Message = tuple[str, str, bytes]

DEFAULT_TEAMMATES = 4
DEFAULT_TEAM = "demo"
# The envelopes' `host`: demo traffic is easy to tell from (and to delete next to) real traffic.
DEMO_HOST = "agentwatch-demo"
MAX_TEAMMATES = 16


def encode_event(
    payload: Json,
    environ: Mapping[str, str],
    *,
    host: str = DEMO_HOST,
    max_payload: int = DEFAULT_MAX_PAYLOAD,
    now: float | None = None,
) -> list[Message]:
    """The messages the hook would publish for `payload`, exactly: its event envelope first, then a
    `genie.msg.*` companion for a delivered SendMessage. Stamped `now` (default: the current time)."""
    raw = dumpb(payload)
    return [
        (subject, env["id"], encode_envelope(env, max_payload))
        for subject, env in envelopes_from_stdin(raw, environ, host=host, now=now)
    ]


class TeamSimulator:
    """Seeded simulator of a Claude Code agent team: a lead with `teammates` teammates and subagents.

    `events()` yields (simulated seconds since the start, hook payload) in time order, without end;
    the same seed gives the same payloads. `team` becomes GENIE_TEAM for the envelopes (None: the
    session's implicit team, `session-<8 hex>`).
    """

    def __init__(
        self, seed: int | None = None, teammates: int = DEFAULT_TEAMMATES, team: str | None = DEFAULT_TEAM
    ) -> None:
        if not 0 <= teammates <= MAX_TEAMMATES:
            raise ValueError(f"teammates must be between 0 and {MAX_TEAMMATES}, not {teammates}")
        self.seed = seed if seed is not None else random.SystemRandom().randrange(1, 1 << 31)
        self.teammates = teammates
        self.team = team or None
        self.environ: dict[str, str] = {"GENIE_TEAM": self.team} if self.team else {}

    @property
    def team_name(self) -> str:
        """The `team` of the envelopes: the given team, else the lead session's implicit one."""
        return self.team or World(self.seed, self.teammates).team_name

    def events(self) -> Iterator[Event]:
        world = World(self.seed, self.teammates)
        world.spawn(play_lead(world))
        return world.run()

    def messages(self, *, host: str = DEMO_HOST, max_payload: int = DEFAULT_MAX_PAYLOAD) -> Iterator[Message]:
        """(subject, id, body) of every message the hook would publish for events(), in order;
        each envelope is stamped when this iterator produces it."""
        for _, payload in self.events():
            yield from encode_event(payload, self.environ, host=host, max_payload=max_payload)
