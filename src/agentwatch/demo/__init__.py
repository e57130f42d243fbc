"""`agentwatch demo`: simulated agent-team traffic on the bus, so a new user sees the pipeline work.

A seeded simulator plays a Claude Code session with agent teams: a lead (the main session) with
teammates (researcher, implementer, reviewer, tester, ...) that share its session id, foreground and
background subagents, and now and then a second, short session on the same host. Each agent runs
realistic turns: prompts, parallel tool calls (PreToolUse, sometimes a PermissionRequest that is
granted or denied, then PostToolUse with `duration_ms` or PostToolUseFailure), PostToolBatch, tasks,
SendMessage between teammates and to the lead, Stop, SubagentStop, TeammateIdle, notifications and
compaction. The firing order per tool call is the one the reference documents for Claude Code
2.1.330, and the payload shapes follow the captures in tests/fixtures.

Every simulated hook payload goes through the hook's own contract code (`envelopes_from_stdin`,
`encode_envelope`), so subjects, ids, redaction and the SendMessage companion on `genie.msg.*` are
exactly what the hook would publish. The simulator keeps simulated time only to order events; an
envelope's timestamp is when it is published, at the chosen rate.

The modules, from the bottom up:

- `scenario`: the story's static data (files, commands, tasks, prompts, messages);
- `world`: the clock that merges every agent's events, the task list and the mailboxes;
- `agent`: an agent's identity, its hook payloads, and how a batch of tool calls fires hooks;
- `tools`, `teamwork`, `subagents`: the tool calls an agent makes, on the code base, on the team
  (tasks and messages) and with the Agent tool;
- `lead`, `teammate`: what the lead and each teammate do, turn after turn;
- `simulator`: `TeamSimulator` and `encode_event`; `publisher`: `run_demo`, onto the bus.

Importing this package is cheap: nats-py is imported only by the code that publishes.
"""

from agentwatch.demo.publisher import DEFAULT_RATE, DemoError, run_demo
from agentwatch.demo.simulator import (
    DEFAULT_TEAM,
    DEFAULT_TEAMMATES,
    DEMO_HOST,
    MAX_TEAMMATES,
    TeamSimulator,
    encode_event,
)

__all__ = [
    "DEFAULT_RATE",
    "DEFAULT_TEAM",
    "DEFAULT_TEAMMATES",
    "DEMO_HOST",
    "MAX_TEAMMATES",
    "DemoError",
    "TeamSimulator",
    "encode_event",
    "run_demo",
]
