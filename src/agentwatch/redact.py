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
_JSON_KEY = (
    r"(?:[A-Za-z0-9_\-]*(?:password|passwd|passphrase|secret|token|api[_-]?key|access[_-]?key|private[_-]?key"
    r"|cookie|authorization|credentials?)|(?:[A-Za-z0-9_\-]*[_\-])?(?:auth|pass|pwd))"
)
# Names of a `name: value` line (YAML, INI, an HTTP header) whose value is a secret: the same words,
# and `.` in the name (`spring.datasource.password`). `auth`, `pass` and `pwd` only as a whole word
# of the name (`x-auth`, `db_pass`), never inside one (`oauth`, `compass`).
_LINE_KEY = (
    r"(?:[A-Za-z0-9_.\-]*(?:password|passwd|passphrase|secret|token|api[_-]?key|access[_-]?key"
    r"|private[_-]?key|account[_-]?key|auth[_-]?key|authorization|credentials?)"
    r"|(?:[A-Za-z0-9_.\-]*[_.\-])?(?:auth|pass|pwd))"
)
_NAME_CHARS = r"A-Za-z0-9_.\-"
# Middle of a variable name (SECRET_KEY_BASE): these endings say the value is about a secret, not one.
_META_SUFFIX = (
    "_file", "_path", "_dir", "_url", "_uri", "_endpoint", "_name", "_id", "_length", "_len", "_count",
    "_size", "_ttl", "_timeout", "_expiry", "_expires", "_expiration", "_header", "_type", "_env", "_var",
    "_limit", "_min", "_max", "_enabled", "_required", "_policy", "_provider", "_region", "_version",
    "_prefix", "_format", "_mode", "_arn", "_ref", "_source", "_location", "_kind", "_hint", "_reset",
)  # fmt: skip
# A value on the command line, in an assignment or after a key: quoted with ' or an escaped ", or bare.
_VALUE = r"('(?:[^'\"\\])*'|\\\"(?:[^\"\\]|\\[^\"])*?\\\"|[^\s\"\\'|&;<>]+)"


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


def _value_after(name: str) -> Callable[[re.Match[str]], str]:
    """Group 1 kept, group 2 (a value, perhaps quoted) marked unless plainly not a secret."""

    def repl(m: re.Match[str]) -> str:
        value = m.group(2)
        bare = value.strip("'").removeprefix('\\"').removesuffix('\\"')
        if not bare or bare.startswith("[REDACTED") or _benign(bare):
            return m.group(0)
        return m.group(1) + _mark(name)

    return repl


def _secret_name(m: re.Match[str]) -> str:
    """NAME=value where NAME holds a secret word before other words (SECRET_KEY_BASE), unless its
    ending says it is about a secret (PASSWORD_FILE, TOKEN_URL, SECRET_NAME)."""
    if m.group(1).lower().endswith(_META_SUFFIX):
        return m.group(0)
    out = _assignment(m)
    return out if out == m.group(0) else m.group(1) + m.group(2) + _mark("secret_name")


def _at_line_start(text: str, start: int) -> bool:
    """Whether `start` begins a line of the JSON text's strings, past its indentation and a YAML
    list's `- `: the start of the text or of a string, after an escaped line break, or after a
    quote or `>`/`<` (a header in `-H '...'`, curl -v's `> ` lines)."""
    i = start
    while i > 0 and (text[i - 1] == " " or text[i - 2 : i] == "\\t" or text[i - 2 : i] == "- "):
        i -= 2 if text[i - 2 : i] in ("\\t", "- ") else 1
    return i == 0 or text[i - 1] in "\"'<>" or text[i - 2 : i] in ("\\n", "\\r")


def _line_value(name: str) -> Callable[[re.Match[str]], str]:
    inner = _value_after(name)

    def repl(m: re.Match[str]) -> str:
        return inner(m) if _at_line_start(m.string, m.start()) else m.group(0)

    return repl


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


def _curl_user(text: str, low: str) -> bool:
    return "curl" in low and ("-u" in text or "--user" in low)


_FLAG_WORDS = ("password", "passwd", "token", "secret", "api-key", "apikey", "access-key")
_LINE_WORDS = ("password", "passwd", "passphrase", "secret", "token", "key", "authorization", "credential",
               "credentials", "auth", "pass", "pwd")  # fmt: skip
# The value of a `name: value` line: one word after an optional scheme (`token ghp_...`), or quoted
# after a space up to the end of the line (`grep \"password:\" x`, `rg \"key: \" x` hold no value).
_LINE_VALUE = r"(?:(?:token|bearer|basic|bot|apikey|api-key|key|digest|sso-key)[ \t]+)?"
_LINE_END = r"(?=[ \t]*(?:\\[nr]|\"|$))"
_LINE_WORD = (
    r"((?<=[ \t])'(?:[^'\"\\])*'"
    + _LINE_END
    + r"|(?<=[ \t])\\\"(?:[^\"\\]|\\[^\"])*?\\\""
    + _LINE_END
    + r"|[^\s\"\\']+)"
)
# Text of one shell command before a flag: no JSON quote, no line break, no pipe or `;` or `&`.
_SAME_COMMAND = r"(?:[^\"\\|;&]|\\[^n]){0,300}?"

_KEYQ = ("key", "token", "secret", "password", "passwd", "passphrase", "cookie", "authorization",
         "credential", "credentials", "auth", "pass", "pwd")  # fmt: skip
# The words the rules' start finders look for, by the word each begins with: one pass over the text
# finds every occurrence of the first (password, passwd and passphrase begin with pass).
_FAMILIES = {
    "key": ("key",), "token": ("token",), "secret": ("secret",), "pwd": ("pwd",), "cookie": ("cookie",),
    "pass": ("pass", "passwd", "password", "passphrase"), "auth": ("auth", "authorization"),
    "credential": ("credential", "credentials"),
}  # fmt: skip

# Above this many characters, the word rules' triggers read where the words end (_ends: one scan
# of the text per word family, shared with the rules' start finders) instead of one scan per
# needle; below it, `in` is cheaper than loading `re`.
_LARGE = 32768


def _followed(words: tuple[str, ...], *afters: str) -> Callable[[str, str], bool]:
    """Trigger: one of `words` followed by one of `afters` in the lower-cased text."""
    needles = tuple(w + a for w in words for a in afters)
    ends: list[tuple[str, ...]] = []  # worked out on the first large text, not at import

    def triggered(text: str, low: str) -> bool:
        if len(text) >= _LARGE and not ends:
            # Each word's family word it ends with (api-key: key): where that one is followed by
            # an `after`, perhaps the word is; where it is not, the word is not.
            known = tuple(w for family in _FAMILIES.values() for w in family)
            found = {max((k for k in known if w.endswith(k)), key=len, default="") for w in words}
            ends.append(() if "" in found else tuple(found))
        if len(text) < _LARGE or not ends[0]:
            return any(n in low for n in needles)
        return any(low.startswith(a, e) for e in _ends(text, ends[0]) for a in afters)

    return triggered


_FLAG_TRIGGER = _followed(_FLAG_WORDS, "=", " ", "\t")
_MIDDLE_TRIGGER = _followed(("secret", "password", "passwd", "token"), "_")

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
    (
        "stripe_key",
        _cased("sk_live_", "rk_live_", "sk_test_", "rk_test_"),
        _after("[rs]k_") + r"(?:live|test)_[A-Za-z0-9]{16,}",
        _mark("stripe_key"),
    ),
    ("huggingface_token", _cased("hf_"), _after("hf_") + r"[A-Za-z0-9]{30,}", _mark("huggingface_token")),
    ("gitlab_token", _cased("glpat-"), _after("glpat-") + r"[A-Za-z0-9_\-]{20,}", _mark("gitlab_token")),
    ("npm_token", _cased("npm_"), _after("npm_") + r"[A-Za-z0-9]{36}(?![A-Za-z0-9])", _mark("npm_token")),
    ("pypi_token", _cased("pypi-AgE"), _after("pypi-AgE") + r"[A-Za-z0-9_\-]{40,}", _mark("pypi_token")),
    (
        "azure_key",
        _cased("AccountKey=", "SharedAccessKey="),
        r"((?:Account|SharedAccess)Key=)[A-Za-z0-9+/]{20,}={0,2}",
        _keep_prefix("azure_key"),
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
        "password_flag",
        lambda text, low: "--" in text and _FLAG_TRIGGER(text, low),
        # --password X, --db-password=X, --token X; not --password-file X, nor a next flag.
        r"(?i)(--[A-Za-z0-9\-]*(?:password|passwd|token|secret|api-?key|access-key)(?:=|[ \t]+))(?!-)"
        + _VALUE,
        _value_after("password_flag"),
    ),
    (
        "cli_password",
        _any("mysql", "mariadb", "sshpass"),
        # mysql -pX (a bare -p asks for it), sshpass -p X.
        r"(\b(?:mysql|mysqldump|mysqladmin|mysqlimport|mysqlsh|mariadb|mariadb-dump)\b"
        + _SAME_COMMAND
        + r"[ \t]-p|\bsshpass\b"
        + _SAME_COMMAND
        + r"[ \t]-p[ \t]*)(?!-)"
        + _VALUE,
        _value_after("cli_password"),
    ),
    (
        "curl_user",
        _curl_user,
        r"(\bcurl\b" + _SAME_COMMAND + r"[ \t](?:-u[ \t]*|--user(?:=|[ \t]+))'?(?:\\\")?[^\s:'\"\\\[\]]*:)"
        r"([^\s'\"\\]+)",
        _value_after("curl_user"),
    ),
    (
        "url_password",
        lambda text, low: "://" in text and "@" in text,
        r"(\b[A-Za-z][A-Za-z0-9+.\-]*://[^\s:/@\"\\\[\]]*:)[^\s@/\"\\\[\]]+(?=@)",
        _keep_prefix("url_password"),
    ),
    (
        "json_key",
        _followed(_KEYQ, '"', '\\"'),
        # "key": "value" in the payload itself, or \"key\": \"value\" inside a string (a file
        # or a command's output that is itself JSON).
        r'(?i)(?:("' + _JSON_KEY + r'"\s*:\s*")((?:[^"\\]|\\.)*)(")'
        r'|(\\"' + _JSON_KEY + r'\\"\s*:\s*\\")((?:[^"\\]|\\[^"])*)(\\"))',
        _json_value,
    ),
    (
        "assignment",
        _followed(("key", "token", "secret", "password", "passwd", "pwd"), "=", " ="),
        r"(?i)(\b[A-Za-z0-9_]*(?:_key|_token|_secret|_pwd|password|passwd|secret|token|apikey))"
        r"(\s*=\s*)('(?:[^'\"\\]|\\[^\"])*'|'(?:[^'\"\\]|\\[^\"])+|\\\"(?:[^\"\\]|\\[^\"])*?\\\"|[^\s\"\\'&;|,)}]+)",
        _assignment,
    ),
    (
        "secret_name",
        lambda text, low: "=" in text and _MIDDLE_TRIGGER(text, low),
        r"(?i)(\b[A-Za-z0-9_]*(?:secret|password|passwd|token)_[A-Za-z0-9_]+)(\s*=\s*)"
        r"('(?:[^'\"\\]|\\[^\"])*'|'(?:[^'\"\\]|\\[^\"])+|\\\"(?:[^\"\\]|\\[^\"])*?\\\"|[^\s\"\\'&;|,)}]+)",
        _secret_name,
    ),
    (
        "cookie",
        _followed(("cookie",), ":"),
        r"(?i)((?<![" + _NAME_CHARS + r"])(?:set-)?cookie:[ \t]*)([^\"'\\]+)",
        _line_value("cookie"),
    ),
    (
        "secret_line",
        _followed(_LINE_WORDS, ":"),
        # YAML `password: x`, `api_key: x`, an HTTP header `X-Api-Key: x` or `Authorization: token x`,
        # at the start of a line.
        r"(?i)((?<![" + _NAME_CHARS + r"])" + _LINE_KEY + r":[ \t]*" + _LINE_VALUE + r")" + _LINE_WORD,
        _line_value("secret_line"),
    ),
    (
        "netrc",
        lambda text, low: "login" in text and "password" in text,
        r"(login(?<![A-Za-z0-9_]login)(?:[ \t]|\\[nt])+[^\s\"\\]+(?:[ \t]|\\[nt])+"
        r"password(?:[ \t]|\\[nt])+)([^\s\"\\]+)",
        _value_after("netrc"),
    ),
)


_seen: list[str] = ["", "", ""]  # the text last asked about, its lower case, its reverse
_seen_found: dict[str, list[int]] = {}  # and where needles occur in it (_found)
_seen_words: dict[str, dict[str, list[int]]] = {}  # and where words of _FAMILIES end in it (_ends)


def _lower(text: str) -> str:
    """`text.lower()`, made once for the rules that look at the same text (most rules change
    nothing, and each would lower hundreds of kilobytes again)."""
    if _seen[0] is not text:
        _seen[:] = [text, text.lower(), ""]
        _seen_found.clear()
        _seen_words.clear()
    return _seen[1]


def _reversed(text: str) -> str:
    """`text[::-1]`, made once for the rules that look at the same text."""
    _lower(text)
    if not _seen[2]:
        _seen[2] = text[::-1]
    return _seen[2]


def _run_start(rev: str, end: int, run: re.Pattern[str]) -> int:
    """Where the run of `run`'s characters that ends at `end` starts, in the text `rev` reverses
    (a match on the reversed text, at C speed, where a loop back over the text would not be)."""
    match = run.match(rev, len(rev) - end)
    return end - (match.end() - match.start()) if match else end


def _found(text: str, needle: str, cased: bool = False) -> list[int]:
    """Where `needle` occurs in the lower-cased text (in `text` itself when `cased`), made once per
    text: one scan by `re` (a loop of str.find over a large text costs microseconds per hit)."""
    _lower(text)
    key = needle + ("\0" if cased else "")
    hits = _seen_found.get(key)
    if hits is None:
        import re

        rx = _compile("_find " + needle, re.escape(needle))
        hits = _seen_found[key] = [m.start() for m in rx.finditer(text if cased else _seen[1])]
    return hits


def _ends(text: str, words: tuple[str, ...]) -> list[int]:
    """Where an occurrence of each of `words` ends in the lower-cased text: every word of a family
    found once per text, for all the rules that ask."""
    low = _lower(text)
    index = _seen_words.get("")
    if index is None:
        index = _seen_words[""] = {}
        for first, family in _FAMILIES.items():
            for p in _found(text, first):
                for w in family:
                    if low.startswith(w, p):
                        index.setdefault(w, []).append(p + len(w))
    return [end for w in words for end in index.get(w, ())]


def _starts_url(text: str) -> list[int] | None:
    """Where url_password can match: a scheme's letters before each `://`, where a word starts."""
    run = _compile("_scheme_run", r"[A-Za-z0-9+.\-]*")
    rev, out = _reversed(text), []
    for p in _found(text, "://", cased=True):
        r = _run_start(rev, p, run)
        out.append(r)
        out.extend(i + 1 for i in range(r, p - 1) if text[i] in "+.-")
    return out


def _starts_json_key(text: str) -> list[int] | None:
    """Where json_key can match: the quote (or escaped quote) before each key that ends in one of
    its secret words. None (scan it all) when lower-casing changed the text's length."""
    if len(_lower(text)) != len(text):
        return None
    run = _compile("_key_run", r"(?i)[A-Za-z0-9_\-]*")
    rev, out = _reversed(text), set()
    for end in _ends(text, _KEYQ):
        if text[end : end + 1] != '"' and text[end : end + 2] != '\\"':
            continue
        r = _run_start(rev, end, run)
        if text[r - 1 : r] == '"':
            out.add(r - 1)
        if text[r - 2 : r] == '\\"':
            out.add(r - 2)
    return sorted(out)


def _starts_assignment(text: str) -> list[int] | None:
    """Where assignment can match: the start of each name that ends in one of its secret words and
    is followed by `=`. None (scan it all) when lower-casing changed the text's length."""
    if len(_lower(text)) != len(text):
        return None
    run = _compile("_name_run", r"(?i)[A-Za-z0-9_]*")
    equals = _compile("_equals", r"\s*=")
    rev, out = _reversed(text), set()
    for end in _ends(text, ("key", "token", "secret", "pwd", "passwd", "password")):
        if equals.match(text, end):
            out.add(_run_start(rev, end, run))
    return sorted(out)


def _starts_bearer(text: str) -> list[int] | None:
    """Where bearer can match: each `bearer`, in any case (none of its letters has a case-folding
    look-alike outside ASCII, so lower-casing finds them all)."""
    if len(_lower(text)) != len(text):
        return None
    return list(_found(text, "bearer"))


def _starts_secret_name(text: str) -> list[int] | None:
    """Where secret_name can match: the start of each name that holds one of its words followed by
    `_` and more of the name, and is followed by `=`."""
    if len(_lower(text)) != len(text):
        return None
    run = _compile("_name_run", r"(?i)[A-Za-z0-9_]*")
    equals = _compile("_equals", r"\s*=")
    rev, out = _reversed(text), set()
    for end in _ends(text, ("secret", "password", "passwd", "token")):
        if text[end : end + 1] != "_":
            continue
        m = run.match(text, end + 1)
        after = m.end() if m else end + 1
        if after > end + 1 and equals.match(text, after):
            out.add(_run_start(rev, after, run))
    return sorted(out)


def _starts_cli_password(text: str) -> list[int] | None:
    """Where cli_password can match: each name of the commands it knows."""
    return sorted(p for name in ("mysql", "mariadb", "sshpass") for p in _found(text, name, cased=True))


def _line_starts(words: tuple[str, ...]) -> Callable[[str], list[int] | None]:
    """Where a `name: value` rule can match: the start of each name that ends in one of `words`
    right before a colon."""

    def starts(text: str) -> list[int] | None:
        if len(_lower(text)) != len(text):
            return None
        run = _compile("_line_run", r"(?i)[" + _NAME_CHARS + "]*")
        rev = _reversed(text)
        return sorted({_run_start(rev, end, run) for end in _ends(text, words) if text[end : end + 1] == ":"})

    return starts


_STARTS: dict[str, Callable[[str], list[int] | None]] = {
    "bearer": _starts_bearer,
    "url_password": _starts_url,
    "json_key": _starts_json_key,
    "assignment": _starts_assignment,
    "secret_name": _starts_secret_name,
    "cli_password": _starts_cli_password,
    "cookie": _line_starts(("cookie",)),
    "secret_line": _line_starts(_LINE_WORDS),
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
    low = _lower(text)
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
