"""The values of the hook's own secret variables, kept off the bus wherever a payload shows them.

A variable whose name says it holds a secret (GEMINI_API_KEY, which Gemini CLI passes to every
hook; whatever Codex was started with) has its value replaced by a marker naming the variable, in
the payload's JSON text, after the pattern rules of redact.py. Standard library only: on the
hook's path (emitter/bundle.py loads it with the others).
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping

# A variable whose name holds one of these is a secret: its value never leaves the host, wherever it
# shows up in a payload (a tool's output that printed it, a prompt that quotes it). Gemini CLI
# passes its GEMINI_API_KEY to every hook; Codex's hooks inherit whatever Codex was started with.
SECRET_NAME_PARTS = ("KEY", "TOKEN", "SECRET", "PASSWORD", "PASSWD", "CREDENTIAL", "AUTH", "PRIVATE")
# Shorter values would be found by chance in any text (and are no secret worth the name).
MIN_SECRET_CHARS = 8
ENV_MARK = "[REDACTED:env:{}]"


def environment_secrets(environ: Mapping[str, str]) -> list[tuple[str, str]]:
    """(name, value) of the variables in `environ` whose name says they hold a secret, longest
    value first (so a value that contains another is replaced whole)."""
    found = []
    for name, value in environ.items():
        if len(value) >= MIN_SECRET_CHARS:
            upper = name.upper()
            if any(part in upper for part in SECRET_NAME_PARTS):
                found.append((name, value))
    found.sort(key=lambda item: -len(item[1]))
    return found


def redact_environment(text: str, count: int, environ: Mapping[str, str]) -> tuple[str, int]:
    """`text` (JSON text, with `count` redactions made already) with the value of every secret
    variable of `environ` replaced by a marker that names the variable; and the new count."""
    for name, value in environment_secrets(environ):
        # As a JSON string holds it (the writers of hook payloads, all JavaScript, escape quotes,
        # backslashes and control characters, not other characters): never a quote of the syntax.
        form = value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n").replace("\t", "\\t")
        if form in text:
            count += text.count(form)
            text = text.replace(form, ENV_MARK.format(name))
    return text, count
