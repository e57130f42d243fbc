"""What the text of hook input that cannot be taken as it is still says: not a hook payload
(invalid), too large to parse, or nested deeper than the parser goes. contract.py makes each an
event with it, so nothing is dropped silently.

The hook's rare paths: contract.py imports this module only when it meets such input, so a normal
run never loads it. Standard library only.
"""

from __future__ import annotations

from agentwatch.envsecrets import redact_environment
from agentwatch.jsonfast import dumpb, loads
from agentwatch.redact import redact_text

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Any

    Json = dict[str, Any]

_SCALARS = (
    "hook_event_name", "session_id", "cwd", "agent_id", "agent_type", "tool_name", "tool_use_id",
    "permission_mode", "prompt_id", "transcript_path", "teammate_name", "team_name", "prompt",
)  # fmt: skip
# Fields of tool_input worth keeping from an oversized payload: they make its feed line.
_INPUT_SCALARS = ("command", "file_path", "pattern", "url", "description", "to", "summary")


def headline_fields(text: str) -> Json:
    """Top-level scalar fields (and a few tool_input ones) found in the head and tail of `text`."""
    import re

    found: Json = {}
    tool_input: Json = {}
    window = text[:65536] + "\n" + text[-65536:]
    keys = "|".join(_SCALARS + _INPUT_SCALARS)
    for m in re.finditer(r'"(' + keys + r')"\s*:\s*"((?:[^"\\]|\\.){0,512})"', window):
        key = m.group(1)
        target = found if key in _SCALARS else tool_input
        if key not in target:
            try:
                target[key] = loads(f'"{m.group(2)}"')
            except ValueError:
                continue
    if tool_input and "tool_name" in found:
        found["tool_input"] = tool_input
    return found


def unparsed_payload(text: str, size: int, reason: str, environ: Mapping[str, str]) -> tuple[Json, int]:
    """The payload of text that is not parsed (too large, nested too deep): its top-level fields
    found in the text, a redacted preview of its head, and why, with its size; and the count of
    redactions made."""
    head, n_head = redact_environment(*redact_text(text[:16384]), environ)
    fields_text, n_fields = redact_environment(*redact_text(dumpb(headline_fields(text)).decode()), environ)
    partial: Json = dict(loads(fields_text))
    partial["agentwatch_truncated"] = {"original_bytes": size, "reason": reason}
    partial["preview"] = head
    return partial, n_head + n_fields
