"""The data and config directories, worked out without `os` on the hook's path, are the ones
os.path gives."""

from __future__ import annotations

import os
import posix
import subprocess
import sys

import pytest

from agentwatch import config

PATHS = [
    "/tmp/a",
    "/tmp/a/",
    "/",
    "//srv/x",
    "/tmp/./a",
    "/tmp/../a",
    "/tmp/a/..",
    "rel/dir",
    "~/x",
    "~",
    ".",
]


@pytest.mark.parametrize("path", PATHS)
def test_an_explicit_directory_is_what_os_path_makes_of_it(path: str) -> None:
    environ = {"AGENTWATCH_DATA_DIR": path, "AGENTWATCH_CONFIG_DIR": path}
    expected = os.path.abspath(os.path.expanduser(path))
    assert config.data_dir(environ) == expected
    assert config.config_dir(environ) == expected


@pytest.mark.parametrize("home", ["/home/dev", "/home/dev/", "/"])
def test_the_default_directories_follow_home_as_os_path_does(
    home: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(posix, "environ", {**posix.environ, b"HOME": home.encode()})  # what config reads
    expected_home = home.rstrip("/") or "/"
    assert config.data_dir({}) == os.path.join(expected_home, ".local", "share", "agentwatch")
    assert config.config_dir({}) == os.path.join(expected_home, ".config", "agentwatch")
    assert config.data_dir({"XDG_DATA_HOME": "/x/"}) == os.path.join("/x/", "agentwatch")


def test_the_environment_is_os_environ_once_os_is_loaded() -> None:
    assert config.environ_now() is os.environ


def test_without_os_the_environment_is_decoded_as_os_would() -> None:
    code = (
        "import sys; sys.path[:0] = sys.argv[1:]; from agentwatch import config; "
        "env = dict(config.environ_now()); assert 'os' not in sys.modules, 'os was loaded'; "
        "import os; assert env == dict(os.environ), (env, dict(os.environ)); print('same')"
    )
    src = os.path.dirname(os.path.dirname(config.__file__))
    env = {"AW_TEST": "caf\u00e9", "AW_BYTES": "\udcff", "PATH": os.environ.get("PATH", "")}
    done = subprocess.run(
        [sys.executable, "-I", "-S", "-c", code, src], env=env, capture_output=True, text=True, check=False
    )
    assert done.stdout.strip() == "same", done.stderr


LOOPBACK = ["127.0.0.1", "127.0.0.2", "127.255.255.254", "::1", "[::1]", "localhost", "LocalHost",
            "::ffff:127.0.0.1", "0:0:0:0:0:0:0:1"]  # fmt: skip
NOT_LOOPBACK = [
    "127.evil.example",  # a host name anyone's DNS may answer for, not an address
    "127.0.0.1.evil.example",
    "127.attacker",
    "127.",
    "127",
    "localhost.evil.example",
    "evil-localhost",
    "0.0.0.0",
    "::",
    "",
    "10.0.0.2",
    "128.0.0.1",
    "::2",
    "::ffff:10.0.0.1",
    "[127.0.0.1",
]


@pytest.mark.parametrize("host", LOOPBACK)
def test_loopback_is_localhost_or_an_address_of_the_loopback_nets(host: str) -> None:
    assert config.is_loopback(host)


@pytest.mark.parametrize("host", NOT_LOOPBACK)
def test_a_name_that_starts_like_a_loopback_address_is_not_loopback(host: str) -> None:
    assert not config.is_loopback(host)
