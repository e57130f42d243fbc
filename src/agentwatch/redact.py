"""Secret redaction over JSON text, before anything leaves the hook process.

The rules run on the raw JSON text of a hook payload, so a secret is found wherever it sits
(tool input, tool output, a prompt, a key's value) and the result is still valid JSON: no
replacement ever consumes a quote or a backslash that belongs to the JSON syntax.

Each rule has a trigger: substrings without which it cannot match. Most payloads contain none of
them, so most hook runs import no `re` and compile nothing: that keeps the hook fast.

Standard library only: this module is on the hook's import path.
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    import re
    from collections.abc import Callable

MARK = "[REDACTED:{}]"
_compiled: dict[str, re.Pattern[str]] = {}
# Start of a token: a word boundary, or right after a JSON escape such as \n or \t, where `\b`
# fails because the escape's letter counts as part of a word.
_B = r"(?:(?<=\\[nrtbf])|(?<![A-Za-z0-9_]))"

# Values of NAME=value assignments that are plainly not secrets: leaving them keeps code readable.
_BENIGN = (
    r"(?i)(?:true|false|none|null|nil|yes|no|\d{1,6}|\$.*|%.*%|<.*>|\*+|\.\.\.|=.*"
    r"|[A-Za-z_$][\w$]*(?:\.[A-Za-z_$][\w$]*)+(?:\(\))?)"
)
# Secret-looking JSON keys; usage counters such as input_tokens end in "s" and hold numbers anyway.
_JSON_KEY = r"[A-Za-z0-9_\-]*(?:password|passwd|secret|token|api[_-]?key|access[_-]?key|private[_-]?key)"


def _compile(name: str, pattern: str) -> re.Pattern[str]:
    """Compile on first use; `re` itself is imported only when some rule is triggered."""
    rx = _compiled.get(name)
    if rx is None:
        import re

        rx = _compiled[name] = re.compile(pattern)
    return rx


def _benign(value: str) -> bool:
    return _compile("_benign", _BENIGN).fullmatch(value) is not None


def _mark(name: str) -> str:
    return MARK.format(name)


def _assignment(m: re.Match[str]) -> str:
    value = m.group(3)
    bare = value.strip("'").removeprefix('\\"').removesuffix('\\"')
    if not bare or bare.startswith("[REDACTED") or _benign(bare):
        return m.group(0)
    return m.group(1) + m.group(2) + _mark("assignment")


def _json_value(m: re.Match[str]) -> str:
    base = 1 if m.group(1) is not None else 4
    value = m.group(base + 1)
    if not value or value.startswith("[REDACTED") or _benign(value):
        return m.group(0)
    return m.group(base) + _mark("json_key") + m.group(base + 2)


def _keep_prefix(name: str) -> Callable[[re.Match[str]], str]:
    def repl(m: re.Match[str]) -> str:
        return m.group(1) + _mark(name)

    return repl


def _any(*needles: str) -> Callable[[str, str], bool]:
    """Trigger: one of `needles` (lower case) occurs in the lower-cased text."""
    return lambda text, low: any(n in low for n in needles)


def _cased(*needles: str) -> Callable[[str, str], bool]:
    """Trigger: one of `needles` occurs as written (for case-sensitive token prefixes)."""
    return lambda text, low: any(n in text for n in needles)


_ASSIGN = tuple(
    f"{w}{sep}" for w in ("key", "token", "secret", "password", "passwd", "pwd") for sep in ("=", " =")
)
_KEYQ = ("key", "token", "secret", "password", "passwd")
_JSON_KEY_TRIGGER = tuple(f'{w}"' for w in _KEYQ) + tuple(f'{w}\\"' for w in _KEYQ)

# (name, trigger, pattern, replacement). A rule whose trigger is false cannot match, and is
# skipped without compiling anything. Order matters: specific token formats first, so that the
# generic rules see an already-marked value and leave it alone.
_RULES: tuple[tuple[str, Callable[[str, str], bool], str, str | Callable[[re.Match[str]], str]], ...] = (
    (
        "private_key",
        _cased("PRIVATE KEY-----"),
        r"-----BEGIN[A-Z0-9 ]*PRIVATE KEY-----(?:[^\"\\-]|\\[^\"]|-(?!----END))*"
        r"(?:-----END[A-Z0-9 ]*PRIVATE KEY-----)?",
        _mark("private_key"),
    ),
    ("anthropic_key", _cased("sk-ant-"), r"sk-ant-[A-Za-z0-9_\-]{20,}", _mark("anthropic_key")),
    (
        "openai_key",
        _cased("sk-proj-", "sk-svcacct-", "sk-admin-", "sk-None-", "T3BlbkFJ"),
        _B
        + r"sk-(?:proj|svcacct|admin|None)-[A-Za-z0-9_\-]{20,}|"
        + _B
        + r"sk-[A-Za-z0-9_\-]*T3BlbkFJ[A-Za-z0-9_\-]*",
        _mark("openai_key"),
    ),
    (
        "aws_access_key",
        _cased("AKIA", "ASIA", "ABIA", "ACCA"),
        _B + r"(?:AKIA|ASIA|ABIA|ACCA)[A-Z0-9]{16}\b",
        _mark("aws_access_key"),
    ),
    (
        "github_token",
        _cased("ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_"),
        _B + r"(?:gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{22,})",
        _mark("github_token"),
    ),
    (
        "slack_token",
        _cased("xoxa-", "xoxb-", "xoxe-", "xoxo-", "xoxp-", "xoxr-", "xoxs-"),
        _B + r"xox[abposre]-[A-Za-z0-9\-]{10,}",
        _mark("slack_token"),
    ),
    (
        "slack_webhook",
        _any("hooks.slack.com/"),
        r"hooks\.slack\.com/(?:services|workflows|triggers)/[A-Za-z0-9/_\-]+",
        "hooks.slack.com/" + _mark("slack_webhook"),
    ),
    ("google_api_key", _cased("AIza"), _B + r"AIza[0-9A-Za-z_\-]{35}", _mark("google_api_key")),
    ("google_oauth", _cased("ya29."), _B + r"ya29\.[0-9A-Za-z_\-]{20,}", _mark("google_oauth")),
    (
        "jwt",
        _cased("eyJ"),
        _B + r"eyJ[A-Za-z0-9_\-]{8,}\.eyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}",
        _mark("jwt"),
    ),
    (
        "bearer",
        _any("bearer "),
        r"(?i)(" + _B + r"bearer\s+)[A-Za-z0-9_\-.=+/~]{12,}",
        _keep_prefix("bearer"),
    ),
    (
        "basic_auth",
        _any("basic "),
        r"(?i)(" + _B + r"authorization:\s*basic\s+)[A-Za-z0-9+/=]{8,}",
        _keep_prefix("basic_auth"),
    ),
    (
        "url_password",
        lambda text, low: "://" in text and "@" in text,
        r"(\b[A-Za-z][A-Za-z0-9+.\-]*://[^\s:/@\"\\\[\]]+:)[^\s@/\"\\\[\]]+(?=@)",
        _keep_prefix("url_password"),
    ),
    (
        "json_key",
        _any(*_JSON_KEY_TRIGGER),
        # "key": "value" in the payload itself, or \"key\": \"value\" inside a string (a file
        # or a command's output that is itself JSON).
        r'(?i)(?:("' + _JSON_KEY + r'"\s*:\s*")((?:[^"\\]|\\.)*)(")'
        r'|(\\"' + _JSON_KEY + r'\\"\s*:\s*\\")((?:[^"\\]|\\[^"])*)(\\"))',
        _json_value,
    ),
    (
        "assignment",
        _any(*_ASSIGN),
        r"(?i)(\b[A-Za-z0-9_]*(?:_key|_token|_secret|_pwd|password|passwd|secret|token|apikey))"
        r"(\s*=\s*)('(?:[^'\"\\]|\\[^\"])*'|'(?:[^'\"\\]|\\[^\"])+|\\\"(?:[^\"\\]|\\[^\"])*?\\\"|[^\s\"\\'&;|,)}]+)",
        _assignment,
    ),
)


def redact_text(text: str) -> tuple[str, int]:
    """Return `text` with every secret replaced by a `[REDACTED:rule]` marker, and the count."""
    low = text.lower()
    total = 0
    for name, triggered, pattern, repl in _RULES:
        if not triggered(text, low):
            continue
        rx = _compile(name, pattern)
        if isinstance(repl, str):
            text, n = rx.subn(repl, text)
            total += n
            continue
        changed = 0

        def counted(m: re.Match[str], fn: Callable[[re.Match[str]], str] = repl) -> str:
            nonlocal changed
            out = fn(m)
            changed += out != m.group(0)
            return out

        text = rx.sub(counted, text)
        total += changed
    return text, total


RULE_NAMES = tuple(rule[0] for rule in _RULES)
