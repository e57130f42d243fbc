"""The hook events Claude Code sent while it wrote a fixture transcript, played back from it.

The fixture transcripts (tests/fixtures/transcripts) hold each session's prompts (with their
`promptId`), tool uses and tool results with their times; the store's usage comes from the same
files (`agentwatch import`, or the hook's usage reader). This rebuilds the hook payloads of those
moments, as Claude Code 2.1.330 shapes them: SessionStart, UserPromptSubmit (with prompt_id),
PreToolUse / PostToolUse / PostToolUseFailure (duration_ms: result time minus use time), Stop at
the end of each turn, SessionEnd; a subagent's tool calls carry its agent_id and agent_type, and
are framed by SubagentStart and SubagentStop. Standard library only.
"""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path
from typing import Any

Payload = dict[str, Any]


def _at(value: str) -> float:
    return dt.datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()


def _lines(path: Path) -> list[dict[str, Any]]:
    out = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.strip():
            record = json.loads(line)
            if isinstance(record, dict) and record.get("timestamp"):
                out.append(record)
    return out


def _content(record: dict[str, Any]) -> Any:
    message = record.get("message")
    return message.get("content") if isinstance(message, dict) else None


def _calls(records: list[dict[str, Any]], base: Payload, prompt_of: Any) -> list[tuple[float, Payload]]:
    """PreToolUse at each tool use, and its result at its tool_result."""
    out: list[tuple[float, Payload]] = []
    started: dict[str, tuple[float, str, Any]] = {}
    for record in records:
        at = _at(record["timestamp"])
        content = _content(record)
        if not isinstance(content, list):
            continue
        for part in content:
            if not isinstance(part, dict):
                continue
            if record.get("type") == "assistant" and part.get("type") == "tool_use":
                use_id, tool, tool_input = str(part["id"]), str(part["name"]), part.get("input") or {}
                started[use_id] = (at, tool, tool_input)
                call = {"tool_name": tool, "tool_input": tool_input, "tool_use_id": use_id}
                out.append(
                    (at, {**base, "prompt_id": prompt_of(at), "hook_event_name": "PreToolUse", **call})
                )
            elif record.get("type") == "user" and part.get("type") == "tool_result":
                use_id = str(part.get("tool_use_id"))
                if use_id not in started:
                    continue
                began, tool, tool_input = started.pop(use_id)
                result: Payload = {
                    **base, "prompt_id": prompt_of(began), "tool_name": tool, "tool_input": tool_input,
                    "tool_use_id": use_id, "duration_ms": max(0, round((at - began) * 1000)),
                }  # fmt: skip
                if part.get("is_error"):
                    text = part.get("content")
                    result |= {"hook_event_name": "PostToolUseFailure", "error": str(text)[:200]}
                else:
                    result |= {"hook_event_name": "PostToolUse", "tool_response": {"content": "ok"}}
                out.append((at, result))
    return out


def hook_events(
    main: Path, subagents: list[Path], cwd: str = "/home/dev/lab/proj"
) -> list[tuple[float, Payload]]:
    """(time, hook payload) of every event of the session of `main`, in time order."""
    session = main.stem
    base: Payload = {"session_id": session, "transcript_path": str(main), "cwd": cwd}
    records = _lines(main)
    prompts: list[tuple[float, str, str]] = []  # (time, prompt_id, prompt)
    for record in records:
        content = _content(record)
        if record.get("type") == "user" and isinstance(content, str) and record.get("promptId"):
            prompts.append((_at(record["timestamp"]), str(record["promptId"]), content))

    def prompt_of(at: float) -> str:
        current = ""
        for began, prompt_id, _ in prompts:
            if began <= at:
                current = prompt_id
        return current

    first, last = _at(records[0]["timestamp"]), _at(records[-1]["timestamp"])
    events: list[tuple[float, Payload]] = [
        (first - 0.5, {**base, "hook_event_name": "SessionStart", "source": "startup"})
    ]
    for began, prompt_id, prompt in prompts:
        events.append(
            (began, {**base, "prompt_id": prompt_id, "hook_event_name": "UserPromptSubmit", "prompt": prompt})
        )
    events += _calls(records, base, prompt_of)
    for sub in subagents:
        sub_records = _lines(sub)
        if not sub_records:
            continue
        agent_id = sub.stem.removeprefix("agent-")
        who = {**base, "agent_id": agent_id, "agent_type": "general-purpose"}
        start, end = _at(sub_records[0]["timestamp"]), _at(sub_records[-1]["timestamp"])
        events.append(
            (start - 0.01, {**who, "prompt_id": prompt_of(start), "hook_event_name": "SubagentStart"})
        )
        events += _calls(sub_records, who, prompt_of)
        events.append(
            (end + 0.01, {**who, "prompt_id": prompt_of(start), "hook_event_name": "SubagentStop",
                          "last_assistant_message": "done"})
        )  # fmt: skip
    for i, (_, prompt_id, _) in enumerate(prompts):
        ends = prompts[i + 1][0] if i + 1 < len(prompts) else last + 1
        inside = [at for at, p in events if p.get("prompt_id") == prompt_id and at < ends]
        events.append(
            (max(inside) + 0.05, {**base, "prompt_id": prompt_id, "hook_event_name": "Stop",
                                  "last_assistant_message": "done"})
        )  # fmt: skip
    events.append((last + 1.0, {**base, "hook_event_name": "SessionEnd", "reason": "other"}))
    return sorted(events, key=lambda e: e[0])
