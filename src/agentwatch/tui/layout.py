"""The live view's layout: widths at which it changes, its roster columns, and what the help
screen says of it. No Textual here."""

from __future__ import annotations

# Below this width the roster sits above the feed, not beside it; below COMPACT_WIDTH the roster
# keeps only the columns that say who is doing what.
SIDE_BY_SIDE_WIDTH = 190
COMPACT_WIDTH = 110
# `cost` is the agent's own; `+subs` its cost with its subagents', where they add something.
ROSTER_COLUMNS = (("agent", 26), ("team", 12), ("state", 8), ("tool", 12), ("for", 4), ("seen", 4),
                  ("calls", 5), ("err", 3), ("msg", 3), ("cost", 7), ("+subs", 7),
                  ("activity", 12))  # fmt: skip
# Hook names too long for a narrow feed, and what they are called there.
SHORT_EVENTS = {
    "PostToolUseFailure": "ToolFailure",
    "PermissionRequest": "Permission?",
    "PermissionDenied": "Denied",
    "UserPromptSubmit": "Prompt",
    "UserPromptExpansion": "Prompt+",
    "InstructionsLoaded": "Instructions",
}
COMPACT_ROSTER_COLUMNS = (("agent", 20), ("state", 8), ("tool", 10), ("for", 4), ("calls", 5), ("err", 3))


_COMPACT_NAMES = ", ".join(name for name, _ in COMPACT_ROSTER_COLUMNS)
# What the help screen says of the live view, a paragraph a line (wrapped to the screen); its keys
# come from the bindings themselves.
ABOUT = (
    "agentwatch: live activity of your agents",
    "",
    "Roster: one row per agent where it lives (its session), subagents and teammates under their lead;",
    "  live ones first, then quiet ones (their session silent 2 minutes), then stopped and lost",
    "  ones, folded away after 5 minutes (o shows them).",
    "  state  working (a tool is running) · waiting (for permission) · thinking",
    "         idle (turn over) · stopped (session ended) · failed (API error)",
    "         lost (nothing from its session for 10 minutes, and no end)",
    "Feed: one line per event, newest at the bottom. Its filter's agent:NAME,",
    "  person:, repo:, branch: (repo:api branch:main) narrow the roster too.",
    "Filter (/): Enter applies it and returns to the feed; Escape clears it, Escape again leaves it.",
    f"The roster sits beside the feed on terminals of {SIDE_BY_SIDE_WIDTH} columns or more, above it on "
    f"narrower ones; below {COMPACT_WIDTH} columns it shows only {_COMPACT_NAMES}.",
)
