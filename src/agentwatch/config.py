"""Where agentwatch keeps its files and which bus it talks to, from the environment.

Standard library only: the hook reads its configuration through this module.
"""

from __future__ import annotations

import os

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping

DEFAULT_NATS_URL = "nats://127.0.0.1:4222"
DEFAULT_DEADLINE_MS = 400
TRUTHY = frozenset({"1", "true", "yes", "on"})


def data_dir(environ: Mapping[str, str] = os.environ) -> str:
    """AGENTWATCH_DATA_DIR, else $XDG_DATA_HOME/agentwatch, else ~/.local/share/agentwatch."""
    explicit = environ.get("AGENTWATCH_DATA_DIR")
    if explicit:
        return os.path.abspath(os.path.expanduser(explicit))
    xdg = environ.get("XDG_DATA_HOME") or os.path.join(os.path.expanduser("~"), ".local", "share")
    return os.path.join(xdg, "agentwatch")


def ensure_dir(path: str) -> str:
    os.makedirs(path, mode=0o700, exist_ok=True)
    return path


def nats_url(environ: Mapping[str, str] = os.environ) -> str:
    """AGENTWATCH_NATS_URL, else genie's GENIE_NATS_URL, else the local default."""
    return (
        environ.get("AGENTWATCH_NATS_URL", "").strip()
        or environ.get("GENIE_NATS_URL", "").strip()
        or DEFAULT_NATS_URL
    )


def flag(environ: Mapping[str, str], name: str) -> bool:
    return environ.get(name, "").strip().lower() in TRUTHY


def number(environ: Mapping[str, str], name: str, default: int) -> int:
    try:
        value = int(environ.get(name, "") or default)
    except ValueError:
        return default
    return value if value > 0 else default
