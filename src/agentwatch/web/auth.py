"""The web dashboard's secret and who may talk to it: the token, the cookie, the Host and Origin
a request may carry. Standard library only: the command checks all of this before it loads the
web server."""

from __future__ import annotations

import hashlib
import hmac
import os
import secrets
import stat
from urllib.parse import urlsplit

from agentwatch import config

TOKEN_FILE = "web-token"  # noqa: S105 - a file name, not a secret
MIN_TOKEN_CHARS = 16
COOKIE = "agentwatch_web"


class TokenError(Exception):
    """The token file cannot be used; the message says what to do."""


def load_token(path: str, *, create: bool) -> tuple[str, bool]:
    """The token kept in `path`, and whether it was made now. With `create`, a missing file is made
    (mode 0600, in a directory of mode 0700) holding a new random token; a file others may read,
    or one that holds too short a secret, is refused."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        if not create:
            raise TokenError(f"{path}: no such file (give --token-file an existing file)") from None
        return _create(path), True
    if st.st_mode & (stat.S_IRWXG | stat.S_IRWXO):
        raise TokenError(f"{path} may be read by others: chmod 600 {path}")
    with open(path, encoding="utf-8") as f:
        token = f.read().strip()
    if len(token) < MIN_TOKEN_CHARS:
        raise TokenError(
            f"{path} holds no token of {MIN_TOKEN_CHARS} characters or more: put a random secret in it"
        )
    return token, False


def _create(path: str) -> str:
    os.makedirs(os.path.dirname(path) or ".", mode=0o700, exist_ok=True)
    token = secrets.token_urlsafe(32)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write(token + "\n")
    return token


def token_matches(given: str, token: str) -> bool:
    return hmac.compare_digest(given.encode(), token.encode())


def cookie_value(token: str) -> str:
    """What the browser keeps after signing in: derived from the token, never the token itself."""
    return hmac.new(token.encode(), b"agentwatch web session", hashlib.sha256).hexdigest()


def cookie_matches(given: str, token: str) -> bool:
    return hmac.compare_digest(given.encode(), cookie_value(token).encode())


def is_loopback(host: str) -> bool:
    """The same fact as for every listener of agentwatch (config.is_loopback)."""
    return config.is_loopback(host)


def public_url(host: str, port: int, tls: bool, hostname: str) -> str:
    """The address browsers use: the bound one, or this machine's name when bound to every address."""
    name = hostname if host in ("0.0.0.0", "::", "") else host  # noqa: S104 - compared, not bound
    if ":" in name:
        name = f"[{name}]"
    return f"{'https' if tls else 'http'}://{name}:{port}"


def allowed(url: str) -> tuple[frozenset[str], frozenset[str]]:
    """The Host headers and Origin headers a request to `url` may carry: its own, nothing else
    (another name for the same server, or a page of another site, is refused)."""
    parts = urlsplit(url)
    scheme, host = parts.scheme, parts.hostname or ""
    port = parts.port or (443 if scheme == "https" else 80)
    name = f"[{host}]" if ":" in host else host
    hosts = {f"{name}:{port}"}
    if port == (443 if scheme == "https" else 80):
        hosts.add(name)
    return frozenset(hosts), frozenset(f"{scheme}://{h}" for h in hosts)
