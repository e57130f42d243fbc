"""The one line a person reads for each event: `$ git status`, `Edit src/app.py`, `→ researcher:
Findings ready`, `task #3 completed: ...`. It becomes the envelope's `text`.

Standard library only: it is on the hook's path.
"""

from __future__ import annotations

from agentwatch.jsonfast import dumpb

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Any

TEXT_MAX = 200


def _str(value: object) -> str:
    return value if isinstance(value, str) else ""


def one_line(value: object, limit: int = TEXT_MAX) -> str:
    """First non-empty line of `value`, control characters dropped, at most `limit` characters."""
    if not isinstance(value, str):
        value = "" if value is None else dumpb(value)[: limit * 8].decode("utf-8", "replace")
    line = ""
    for candidate in value[: limit * 8].splitlines():
        if candidate.strip():
            line = candidate.strip()
            break
    line = "".join(ch if ch.isprintable() else " " for ch in line[: limit * 2])
    return line if len(line) <= limit else line[: limit - 1] + "…"


def _short_path(path: str, cwd: str) -> str:
    if cwd and path.startswith(cwd.rstrip("/\\") + ("/" if "/" in cwd else "\\")):
        return path[len(cwd.rstrip("/\\")) + 1 :]
    return path


def tool_summary(tool: str, tool_input: object, cwd: str = "") -> str:
    """`$ git status`, `Edit src/app.py`, `→ researcher: Findings ready`, ..."""
    inp = tool_input if isinstance(tool_input, dict) else {}
    if tool in _SHELL_TOOLS:
        return "$ " + one_line(inp.get("command"))
    path = inp.get("file_path") or inp.get("notebook_path") or inp.get("path")
    if tool in _FILE_TOOLS and isinstance(path, str):
        return f"{tool} {_short_path(path, cwd)}"
    if tool == "apply_patch":
        return one_line(f"apply_patch {', '.join(_patched(inp.get('command')))}")
    if tool == "invoke_agent":
        return f"invoke_agent {one_line(inp.get('agent_name')) or 'agent'}: {one_line(inp.get('prompt'))}"
    if tool == "SendMessage":
        recipient, _, summary, message = message_parts(inp)
        return f"→ {recipient}: {one_line(summary or message)}"
    if tool in ("Agent", "Task"):
        who = inp.get("name") or inp.get("subagent_type") or "agent"
        return f"{tool} {who}: {one_line(inp.get('description') or inp.get('prompt'))}"
    if tool == "TaskCreate":
        return f"TaskCreate {one_line(inp.get('subject'))}"
    if tool == "TaskUpdate":
        status = inp.get("status")
        return f"TaskUpdate #{one_line(inp.get('taskId'))}" + (f" {status}" if status else "")
    for key in ("pattern", "url", "query", "skill", "command", "description", "prompt", "message"):
        if isinstance(inp.get(key), str):
            return f"{tool} {one_line(inp[key])}"
    if tool.startswith("mcp__"):
        return tool.replace("__", " ", 2).replace("mcp ", "mcp:", 1)
    return tool or "tool"


# Tools by what they do, whichever agent calls them: Claude Code's, Codex's (its shell is `Bash`
# too), Gemini CLI's.
_SHELL_TOOLS = ("Bash", "PowerShell", "run_shell_command")
_FILE_TOOLS = (
    "Read", "Write", "Edit", "MultiEdit", "NotebookEdit", "LS", "read_file", "write_file", "replace",
    "list_directory",
)  # fmt: skip


def _patched(patch: object) -> list[str]:
    """The files a Codex `apply_patch` adds, updates or deletes (`*** Add File: x`, ...)."""
    names = []
    for line in (patch if isinstance(patch, str) else "").splitlines()[:400]:
        for verb in ("*** Add File: ", "*** Update File: ", "*** Delete File: "):
            if line.startswith(verb):
                names.append(line[len(verb) :].strip())
    return names or ["(patch)"]


def model_summary(p: Mapping[str, Any]) -> str:
    """A model response with its tokens: Codex's `token_usage`, Gemini's last chunk's `usageMetadata`
    and the text the hook gathered from its chunks (`response_text`)."""
    request = p.get("llm_request")
    model = _str(p.get("model")) or (_str(request.get("model")) if isinstance(request, dict) else "")
    usage = p.get("token_usage")
    response = p.get("llm_response")
    text = _str(p.get("response_text")) or (_str(response.get("text")) if isinstance(response, dict) else "")
    figures = ""
    if isinstance(usage, dict):
        figures = f"{_n(usage.get('input_tokens')):,} in ({_n(usage.get('cached_input_tokens')):,} cached), "
        figures += f"{_n(usage.get('output_tokens')):,} out"
    elif isinstance(response, dict) and isinstance(response.get("usageMetadata"), dict):
        meta = response["usageMetadata"]
        figures = f"{_n(meta.get('promptTokenCount')):,} in, {_n(meta.get('candidatesTokenCount')):,} out"
    said = one_line(text, TEXT_MAX // 2)
    if said and figures:
        return one_line(f"{model or 'model'}: {said} ({figures})")
    return one_line(f"{model or 'model'}: {said or figures or 'response'}")


def _n(value: object) -> int:
    return value if type(value) is int and value > 0 else 0


def message_parts(tool_input: Mapping[str, Any]) -> tuple[str, str, str, object]:
    """(recipient, message type, summary, message) of a SendMessage input, current or legacy.

    Current: {to, summary?, message: str | {type: ...}}; legacy: {type, recipient?, content?,
    summary?}. A broadcast (`*` or legacy type "broadcast") has the recipient "broadcast".
    """
    recipient = _str(tool_input.get("to")) or _str(tool_input.get("recipient"))
    message = tool_input.get("message", tool_input.get("content", ""))
    mtype = _str(tool_input.get("type")) or "message"
    if isinstance(message, dict):
        mtype = _str(message.get("type")) or mtype
    if recipient.strip() == "*" or mtype == "broadcast":
        recipient = "broadcast"
    # Cross-session addresses may carry a reference: "name [ref]".
    recipient = recipient.split(" [", 1)[0].strip()
    summary = _str(tool_input.get("summary"))
    if not summary and isinstance(message, dict):
        summary = mtype + (f": {message['reason']}" if isinstance(message.get("reason"), str) else "")
    return recipient, mtype, summary, message


def summarize(event: str, p: Mapping[str, Any]) -> str:
    """The envelope's `text`: one line a person can read in a feed."""
    tool = _str(p.get("tool_name"))
    cwd = _str(p.get("cwd"))
    if event == "PreToolUse":
        return tool_summary(tool, p.get("tool_input"), cwd)
    if event == "PostToolUse":
        text = tool_summary(tool, p.get("tool_input"), cwd)
        ms = p.get("duration_ms")
        return f"{text} ({ms} ms)" if isinstance(ms, int) and tool != "SendMessage" else text
    if event == "PostToolUseFailure":
        verb = "interrupted" if p.get("is_interrupt") else "failed"
        return one_line(f"{tool_summary(tool, p.get('tool_input'), cwd)} {verb}: {one_line(p.get('error'))}")
    if event == "PermissionRequest":
        return "permission? " + tool_summary(tool, p.get("tool_input"), cwd)
    if event == "PermissionDenied":
        return one_line(f"denied {tool_summary(tool, p.get('tool_input'), cwd)}: {one_line(p.get('reason'))}")
    if event in ("UserPromptSubmit", "UserPromptExpansion"):
        return one_line(p.get("prompt")) or "(empty prompt)"
    if event in ("Stop", "SubagentStop"):
        last = one_line(p.get("last_assistant_message") or p.get("prompt_response"))
        prefix = "" if event == "Stop" else f"{_str(p.get('agent_type')) or 'subagent'} stopped: "
        return one_line(prefix + (last or "stopped"))
    if event == "StopFailure":
        return one_line(f"failed: {_str(p.get('error')) or 'unknown'} {one_line(p.get('error_details'))}")
    if event == "SessionStart":
        return f"session start ({_str(p.get('source')) or 'startup'})"
    if event == "SessionEnd":
        return f"session end ({_str(p.get('reason')) or 'other'})"
    if event == "SubagentStart":
        return f"{_str(p.get('agent_type')) or 'subagent'} started"
    if event == "TeammateIdle":
        return f"{_str(p.get('teammate_name')) or 'teammate'} idle"
    if event in ("TaskCreated", "TaskCompleted"):
        verb = "created" if event == "TaskCreated" else "completed"
        return one_line(f"task #{one_line(p.get('task_id'))} {verb}: {one_line(p.get('task_subject'))}")
    if event == "DirectoryAdded":
        source = _str(p.get("source"))
        return one_line(
            f"directory added: {one_line(p.get('directory'))}" + (f" ({source})" if source else "")
        )
    if event in ("PreModelSwitch", "PostModelSwitch"):
        verb = "switching model" if event == "PreModelSwitch" else "model switched"
        change = f"{_str(p.get('from_model')) or '?'} → {_str(p.get('to_model')) or '?'}"
        source = _str(p.get("source"))
        return one_line(f"{verb}: {change}" + (f" ({source})" if source else ""))
    if event == "Notification":
        return one_line(p.get("message")) or _str(p.get("notification_type")) or "notification"
    if event == "PostModelRequest":
        return model_summary(p)
    if event == "PreModelRequest":
        request = p.get("llm_request")
        model = _str(p.get("model")) or (_str(request.get("model")) if isinstance(request, dict) else "")
        return f"model request ({model})" if model else "model request"
    if event == "ModelResponseChunk":
        response = p.get("llm_response")
        return one_line(response.get("text") if isinstance(response, dict) else "") or "model response chunk"
    return _bookkeeping(event, p) or _other(event, p)


def _bookkeeping(event: str, p: Mapping[str, Any]) -> str:
    """The events that say how the work is kept (tui/model.BOOKKEEPING folds most of them away)."""
    if event == "PostToolBatch":
        calls = p.get("tool_calls")
        tools = (
            [_str(c.get("tool_name")) for c in calls if isinstance(c, dict)]
            if isinstance(calls, list)
            else []
        )
        counts: dict[str, int] = {}
        for tool in tools:
            counts[tool or "tool"] = counts.get(tool or "tool", 0) + 1
        named = ", ".join(f"{t} ×{n}" if n > 1 else t for t, n in counts.items())
        return one_line(
            f"{len(tools)} tool call{'s' if len(tools) != 1 else ''} done" + (f": {named}" if named else "")
        )
    if event == "InstructionsLoaded":
        why = _str(p.get("load_reason"))
        return one_line(
            f"instructions loaded: {_str(p.get('file_path')) or '?'}" + (f" ({why})" if why else "")
        )
    if event == "CwdChanged":
        return one_line(f"cd {_str(p.get('new_cwd')) or '?'}")
    if event == "FileChanged":
        return one_line(f"file changed: {_str(p.get('file_path')) or '?'}")
    if event == "ConfigChange":
        return one_line(f"settings changed: {_str(p.get('file_path')) or _str(p.get('source')) or '?'}")
    if event == "Setup":
        return f"setup ({_str(p.get('trigger')) or 'init'})"
    return ""


def _other(event: str, p: Mapping[str, Any]) -> str:
    """Compaction, worktrees, elicitations, message display, and events not invented yet."""
    if event in ("PreCompact", "PostCompact"):
        verb = "compacting the context" if event == "PreCompact" else "context compacted"
        return f"{verb} ({_str(p.get('trigger')) or 'auto'})"
    if event in ("WorktreeCreate", "WorktreeRemove"):
        verb = "worktree created" if event == "WorktreeCreate" else "worktree removed"
        return one_line(f"{verb}: {_str(p.get('worktree_path')) or _str(p.get('name')) or '?'}")
    if event == "Elicitation":
        return one_line(
            f"asks for input: {one_line(p.get('message')) or _str(p.get('mcp_server_name')) or '?'}"
        )
    if event == "ElicitationResult":
        return one_line(f"input {_str(p.get('action')) or 'answered'}")
    if event == "MessageDisplay":
        return one_line(p.get("message")) or "message shown"
    for key in ("file_path", "new_cwd", "directory", "worktree_path", "trigger", "source", "reason"):
        if isinstance(p.get(key), str):
            return one_line(f"{event} {p[key]}")
    return event or "event"
