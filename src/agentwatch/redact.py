"""Secret redaction over JSON text, before anything leaves the hook process.

The rules run on the raw JSON text of a hook payload, so a secret is found wherever it sits
(tool input, tool output, a prompt, a key's value) and the result is still valid JSON: no
replacement ever consumes a quote or a backslash that belongs to the JSON syntax.

Each rule has a trigger: substrings without which it cannot match. Most payloads contain none of
them, so most hook runs import no `re` and compile nothing: that keeps the hook fast.

A triggered rule must still be cheap on a payload of hundreds of kilobytes. Python's `re` scans
fast only for a pattern that starts with a literal, so a token's word boundary is checked by a
lookbehind placed after its literal prefix (`_after`), not before it; and the rules whose matches
start with a name of any length (a URL's scheme, a JSON key, an assigned variable) or ignore case
are tried only where a match can start: before each `://`, each key and each name before an `=`
that end in a secret word, each `bearer` (`_starts_*`). `tests/unit/test_redact.py` checks that
this finds exactly what a full scan finds.

Standard library only: this module is on the hook's import path.
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    import re
    from collections.abc import Callable, Mapping

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


def _after(prefix: str) -> str:
    """`prefix` (a fixed-width pattern) at the start of a token: the same as _B + prefix, written
    so that the pattern starts with the literal, which `re` finds with a fast scan."""
    return prefix + "(?<=" + _B + prefix + ")"


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
        _after("sk-")
        + r"(?:(?:proj|svcacct|admin|None)-[A-Za-z0-9_\-]{20,}|[A-Za-z0-9_\-]*T3BlbkFJ[A-Za-z0-9_\-]*)",
        _mark("openai_key"),
    ),
    (
        "aws_access_key",
        _cased("AKIA", "ASIA", "ABIA", "ACCA"),
        _after("(?:AKIA|ASIA|ABIA|ACCA)") + r"[A-Z0-9]{16}\b",
        _mark("aws_access_key"),
    ),
    (
        "github_token",
        _cased("ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_"),
        _after("g") + r"(?:h[pousr]_[A-Za-z0-9]{30,}|ithub_pat_[A-Za-z0-9_]{22,})",
        _mark("github_token"),
    ),
    (
        "slack_token",
        _cased("xoxa-", "xoxb-", "xoxe-", "xoxo-", "xoxp-", "xoxr-", "xoxs-"),
        _after("xox") + r"[abposre]-[A-Za-z0-9\-]{10,}",
        _mark("slack_token"),
    ),
    (
        "slack_webhook",
        _any("hooks.slack.com/"),
        r"hooks\.slack\.com/(?:services|workflows|triggers)/[A-Za-z0-9/_\-]+",
        "hooks.slack.com/" + _mark("slack_webhook"),
    ),
    ("google_api_key", _cased("AIza"), _after("AIza") + r"[0-9A-Za-z_\-]{35}", _mark("google_api_key")),
    ("google_oauth", _cased("ya29."), _after(r"ya29\.") + r"[0-9A-Za-z_\-]{20,}", _mark("google_oauth")),
    (
        "jwt",
        _cased("eyJ"),
        _after("eyJ") + r"[A-Za-z0-9_\-]{8,}\.eyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}",
        _mark("jwt"),
    ),
    (
        "bearer",
        _any("bearer "),
        r"(?i)(" + _after("bearer") + r"\s+)[A-Za-z0-9_\-.=+/~]{12,}",
        _keep_prefix("bearer"),
    ),
    (
        "basic_auth",
        _any("basic "),
        r"(?i)(" + _after("authorization:") + r"\s*basic\s+)[A-Za-z0-9+/=]{8,}",
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


def _run_start(rev: str, end: int, run: re.Pattern[str]) -> int:
    """Where the run of `run`'s characters that ends at `end` starts, in the text `rev` reverses
    (a match on the reversed text, at C speed, where a loop back over the text would not be)."""
    match = run.match(rev, len(rev) - end)
    return end - (match.end() - match.start()) if match else end


def _starts_url(text: str) -> list[int] | None:
    """Where url_password can match: a scheme's letters before each `://`, where a word starts."""
    run = _compile("_scheme_run", r"[A-Za-z0-9+.\-]*")
    rev, out, p = text[::-1], [], text.find("://")
    while p != -1:
        r = _run_start(rev, p, run)
        out.append(r)
        out.extend(i + 1 for i in range(r, p - 1) if text[i] in "+.-")
        p = text.find("://", p + 1)
    return out


def _starts_json_key(text: str) -> list[int] | None:
    """Where json_key can match: the quote (or escaped quote) before each key that ends in one of
    its secret words. None (scan it all) when lower-casing changed the text's length."""
    low = text.lower()
    if len(low) != len(text):
        return None
    run = _compile("_key_run", r"(?i)[A-Za-z0-9_\-]*")
    rev, out = text[::-1], set()
    for needle in _JSON_KEY_TRIGGER:
        p = low.find(needle)
        while p != -1:
            r = _run_start(rev, p + len(needle) - (2 if needle.endswith('\\"') else 1), run)
            if text[r - 1 : r] == '"':
                out.add(r - 1)
            if text[r - 2 : r] == '\\"':
                out.add(r - 2)
            p = low.find(needle, p + 1)
    return sorted(out)


def _starts_assignment(text: str) -> list[int] | None:
    """Where assignment can match: the start of each name that ends in one of its secret words and
    is followed by `=`. None (scan it all) when lower-casing changed the text's length."""
    low = text.lower()
    if len(low) != len(text):
        return None
    run = _compile("_name_run", r"(?i)[A-Za-z0-9_]*")
    equals = _compile("_equals", r"\s*=")
    rev, out = text[::-1], set()
    for word in ("key", "token", "secret", "pwd", "passwd", "password"):
        p = low.find(word)
        while p != -1:
            end = p + len(word)
            if equals.match(text, end):
                out.add(_run_start(rev, end, run))
            p = low.find(word, p + 1)
    return sorted(out)


def _starts_bearer(text: str) -> list[int] | None:
    """Where bearer can match: each `bearer`, in any case (none of its letters has a case-folding
    look-alike outside ASCII, so lower-casing finds them all)."""
    low = text.lower()
    if len(low) != len(text):
        return None
    out, p = [], low.find("bearer")
    while p != -1:
        out.append(p)
        p = low.find("bearer", p + 1)
    return out


_STARTS: dict[str, Callable[[str], list[int] | None]] = {
    "bearer": _starts_bearer,
    "url_password": _starts_url,
    "json_key": _starts_json_key,
    "assignment": _starts_assignment,
}


def _sub_at(rx: re.Pattern[str], repl: Callable[[re.Match[str]], str], text: str, starts: list[int]) -> str:
    """rx.sub(repl, text), given every position where a match can start (in order): the same
    result as the full scan when no match starts elsewhere."""
    out, last = [], 0
    for s in starts:
        if s < last:
            continue
        m = rx.match(text, s)
        if m is None:
            continue
        out.append(text[last:s])
        out.append(repl(m))
        last = m.end()
    out.append(text[last:])
    return "".join(out)


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

        starts = _STARTS[name](text) if name in _STARTS else None
        text = rx.sub(counted, text) if starts is None else _sub_at(rx, counted, text, starts)
        total += changed
    return text, total


RULE_NAMES = tuple(rule[0] for rule in _RULES)


# --- the values of the hook's own secret variables -------------------------------------------------

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
