"""The web dashboard's token file and the Host/Origin it allows (standard library only)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from agentwatch.web.auth import (
    TokenError,
    allowed,
    cookie_matches,
    cookie_value,
    is_loopback,
    load_token,
    public_url,
    token_matches,
)
from tests.unit.test_config import LOOPBACK, NOT_LOOPBACK


def test_a_token_is_made_once_private_and_then_kept(tmp_path: Path) -> None:
    path = tmp_path / "config" / "web-token"
    token, made = load_token(str(path), create=True)
    assert made and len(token) >= 40
    assert path.stat().st_mode & 0o777 == 0o600
    assert path.parent.stat().st_mode & 0o777 == 0o700
    assert load_token(str(path), create=True) == (token, False)


def test_a_token_file_others_can_read_or_too_short_or_missing_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "token"
    path.write_text("a-long-enough-fleet-secret\n")
    os.chmod(path, 0o644)
    with pytest.raises(TokenError, match="chmod 600"):
        load_token(str(path), create=False)
    os.chmod(path, 0o600)
    assert load_token(str(path), create=False) == ("a-long-enough-fleet-secret", False)
    path.write_text("short\n")
    with pytest.raises(TokenError, match="16 characters"):
        load_token(str(path), create=False)
    with pytest.raises(TokenError, match="no such file"):
        load_token(str(tmp_path / "absent"), create=False)


def test_the_cookie_is_derived_from_the_token_not_the_token() -> None:
    assert cookie_value("t" * 20) != "t" * 20
    assert cookie_matches(cookie_value("t" * 20), "t" * 20)
    assert not cookie_matches(cookie_value("u" * 20), "t" * 20)
    assert token_matches("t" * 20, "t" * 20) and not token_matches("", "t" * 20)


def test_only_the_servers_own_address_is_allowed() -> None:
    hosts, origins = allowed("http://127.0.0.1:8765")
    assert hosts == {"127.0.0.1:8765"} and origins == {"http://127.0.0.1:8765"}
    hosts, origins = allowed("https://watch.example.org")
    assert hosts == {"watch.example.org:443", "watch.example.org"}
    assert "https://watch.example.org" in origins and "http://watch.example.org" not in origins
    assert allowed("http://[::1]:9000")[0] == {"[::1]:9000"}


def test_the_address_browsers_use() -> None:
    assert public_url("127.0.0.1", 8765, False, "box") == "http://127.0.0.1:8765"
    assert public_url("0.0.0.0", 8765, True, "box") == "https://box:8765"
    assert public_url("::1", 1, False, "box") == "http://[::1]:1"
    assert is_loopback("127.0.0.1") and is_loopback("localhost") and not is_loopback("10.0.0.2")


@pytest.mark.parametrize("host", [*LOOPBACK, *NOT_LOOPBACK])
def test_the_dashboard_asks_the_same_loopback_question_as_every_listener(host: str) -> None:
    # `--host 127.evil.example` is a name, not the loopback address: it needs --public.
    assert is_loopback(host) == (host in LOOPBACK)
