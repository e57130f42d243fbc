"""Who an agent is and what state it is in: defined once, here, as data.

Identity: an agent is its name where it lives: its session (its lead's, for the subagents and
in-process teammates that share the lead's session id) on its host. Two agents called `researcher`
in two sessions are two agents, whatever team each belongs to: a team (GENIE_TEAM, or Claude Code's
implicit `session-<8 hex>`) is shown beside the name, and groups sessions in the team view and the
cost by team, but two runs of a team are two runs, not one agent that grew. An event with no
session (a genie tool that sends none) lives in its team.

State: the state of an agent is what the latest of its state events (by time, then id) makes of
it, by the table below; other events leave it as it is. An agent whose scope (its session or team)
sent nothing for LOST_AFTER_S while not stopped is `lost`: a killed terminal, a crashed agent.

The dashboard's Python (tui/model.py), the store's SQL (store/agents_sql.py generates the
`agents` view and its rollup from this table) and the watchdog's rules all read it; a test plays
every fixture session through the Python and the SQL and requires the same state after every event.
Standard library only: the hook's core.
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Any

# States, in the order a person scans for trouble first.
FAILED, WAITING, WORKING, THINKING, IDLE, LOST, STOPPED = (
    "failed",
    "waiting",
    "working",
    "thinking",
    "idle",
    "lost",
    "stopped",
)
STATES: tuple[str, ...] = (FAILED, WAITING, WORKING, THINKING, IDLE, LOST, STOPPED)
STATE_ORDER: dict[str, int] = {state: rank for rank, state in enumerate(STATES)}
# States with no turn in progress: the agent is done, or nobody hears from it.
DONE: frozenset[str] = frozenset({STOPPED, LOST})
# The state an agent has before any state event of its own (it was seen, but did nothing yet).
INITIAL = THINKING
# Seconds without an event in an agent's scope after which it is lost: the default of the one
# setting AGENTWATCH_LOST_AFTER_S (config.lost_after_s), which the dashboard's questions to the store
# pass as a parameter; the `agents` and `agents_since` views are generated with this value.
LOST_AFTER_S = 600

# The field of a Notification that decides what it means for its agent.
NOTE_FIELD = "notification_type"
# Hook input that is no hook payload (not JSON, not an object: InvalidPayload) or names no event
# (Unknown): kept in the store with its reason (its text), never an agent of the roster or rules.
INVALID_INPUT_EVENTS = ("InvalidPayload", "Unknown")


def is_invalid_input(env: Mapping[str, Any]) -> bool:
    """The envelope of hook input that names no event: it makes no agent."""
    return env.get("event") in INVALID_INPUT_EVENTS


# The state machine: (hook event, the notification types it applies to or () for any, state).
# The first row that matches an event wins; an event no row matches changes nothing.
TRANSITIONS: tuple[tuple[str, tuple[str, ...], str], ...] = (
    ("PreToolUse", (), WORKING),
    ("PermissionRequest", (), WAITING),
    ("Elicitation", (), WAITING),
    ("Notification", ("permission_prompt", "elicitation_dialog"), WAITING),
    ("Notification", ("idle_prompt",), IDLE),
    ("PostToolUse", (), THINKING),
    ("PostToolUseFailure", (), THINKING),
    ("PermissionDenied", (), THINKING),
    ("PostToolBatch", (), THINKING),
    ("ElicitationResult", (), THINKING),
    ("UserPromptSubmit", (), THINKING),
    ("UserPromptExpansion", (), THINKING),
    ("SubagentStart", (), THINKING),
    ("PreCompact", (), THINKING),
    ("PostCompact", (), THINKING),
    ("SessionStart", (), IDLE),
    ("Stop", (), IDLE),
    ("SubagentStop", (), IDLE),
    ("TeammateIdle", (), IDLE),
    ("StopFailure", (), FAILED),
    ("SessionEnd", (), STOPPED),
)
# Events that count as one of an agent's errors (the roster's and the `agents` view's `errors`):
# a tool call that failed, a turn that ended on an API error.
ERROR_EVENTS: tuple[str, ...] = ("PostToolUseFailure", "StopFailure")
# States whose agent is inside a tool (or asking for one): the state event names the tool.
TOOL_STATES: frozenset[str] = frozenset({WORKING, WAITING})

# A tool call's outcome. A PreToolUse opens a call (running); the first of these events that ends
# it says how (CALL_ENDS; a PostToolUseFailure whose payload says `is_interrupt` was interrupted).
# The store's tool_calls views name an outcome by these words (store/calls_sql.py generates them
# from here), and call_rollup keeps it as its position in CALL_OUTCOMES; a result whose call was
# never seen is an orphan there.
CALL_RUNNING, CALL_OK, CALL_ERROR, CALL_INTERRUPTED, CALL_DENIED = (
    "running",
    "ok",
    "error",
    "interrupted",
    "denied",
)
CALL_OUTCOMES: tuple[str, ...] = (CALL_RUNNING, CALL_OK, CALL_ERROR, CALL_INTERRUPTED, CALL_DENIED)
CALL_ENDS: dict[str, str] = {
    "PostToolUse": CALL_OK,
    "PostToolUseFailure": CALL_ERROR,
    "PermissionDenied": CALL_DENIED,
}
# How an agent's screen says an outcome where its word differs: a failed call, interrupted or not.
CALL_SHOWN: dict[str, str] = {CALL_ERROR: "failed", CALL_INTERRUPTED: "failed"}

_BY_EVENT: dict[str, list[tuple[tuple[str, ...], str]]] = {}
for _event, _notes, _state in TRANSITIONS:
    _BY_EVENT.setdefault(_event, []).append((_notes, _state))
STATE_EVENTS: frozenset[str] = frozenset(_BY_EVENT)


def state_after(event: str, note: str = "") -> str | None:
    """The state `event` (a Notification: of type `note`) puts its agent in; None: no change."""
    for notes, state in _BY_EVENT.get(event, ()):
        if not notes or note in notes:
            return state
    return None


def note_of(event: str, data: object) -> str:
    """The part of a payload the table looks at beside the event (a Notification's type)."""
    if event == "Notification" and isinstance(data, dict):
        value = data.get(NOTE_FIELD)
        return value if isinstance(value, str) else ""
    return ""


def shown_outcome(outcome: str) -> str:
    """A tool call's outcome (CALL_OUTCOMES) as an agent's screen says it."""
    return CALL_SHOWN.get(outcome, outcome)


def shown_state(state: str, silent_s: float, lost_after_s: float = LOST_AFTER_S) -> str:
    """The state as shown: `lost` once the agent's scope has been silent too long, unless stopped."""
    if state != STOPPED and silent_s > lost_after_s:
        return LOST
    return state


# --- identity ---------------------------------------------------------------------------------

# (host, scope, name): a tuple, so it is a dictionary key and its parts are columns in SQL.
AgentKey = tuple[str, str, str]


def scope(team: str, session_id: str) -> str:
    """Where an agent lives: its session, else (no session) its team."""
    return session_id or team


def agent_key(host: str, team: str, session_id: str, agent: str) -> AgentKey:
    """One agent's key: its host, its scope and its name."""
    return (host, scope(team, session_id), agent)


def key_of(env: Mapping[str, Any]) -> AgentKey:
    """The key of the agent an envelope (or a row with the same field names) is about."""
    return agent_key(
        str(env.get("host") or ""),
        str(env.get("team") or ""),
        str(env.get("session_id") or ""),
        str(env.get("agent") or ""),
    )


def parent_key(key: AgentKey, parent: str) -> AgentKey:
    """The key of an agent's lead: the same host and scope, the parent's name."""
    return (key[0], key[1], parent)
