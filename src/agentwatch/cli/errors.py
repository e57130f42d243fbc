"""The one error a command raises to stop with a message, and the missing-extra message."""

from __future__ import annotations

from collections.abc import Mapping

# Which extra brings which top-level module.
EXTRAS: dict[str, str] = {
    "faststream": "consumers",
    "chdb": "consumers",
    "textual": "tui",
    "rich": "tui",
    "nats": "tui",
    "orjson": "tui",
    "clickhouse_connect": "tui",
    "textual_serve": "web",
    "aiohttp": "web",
    "mcp": "mcp",
}


class CliError(Exception):
    """Stops a command: `message` says what went wrong and what to do; `code` is the exit status."""

    def __init__(self, message: str, code: int = 2) -> None:
        super().__init__(message)
        self.code = code


def missing_extra(exc: ImportError, command: str, extra: str | None = None) -> CliError:
    """The error for a command whose optional dependency is not installed."""
    module = (exc.name or "").split(".")[0]
    wanted = extra or EXTRAS.get(module, "consumers")
    what = f"{module} is not installed" if module else str(exc)
    return CliError(
        f"`agentwatch {command}` needs the [{wanted}] extra ({what}): pip install 'agentwatch[{wanted}]'"
    )


def require(command: str, extra: str, *modules: str) -> None:
    """Stop with the missing-extra message unless every module of `modules` can be imported."""
    import importlib.util

    for module in modules:
        if importlib.util.find_spec(module) is None:
            raise missing_extra(ModuleNotFoundError(name=module), command, extra)


def usable_data_dir(environ: Mapping[str, str]) -> str:
    """The data dir, made if it is missing; CliError naming AGENTWATCH_DATA_DIR when it cannot be
    made or written (a path under a file, a read-only disk)."""
    import os

    from agentwatch import config

    path = config.data_dir(environ)
    try:
        config.ensure_dir(path)
        if not os.access(path, os.W_OK | os.X_OK):
            raise PermissionError(13, "not writable")
    except OSError as exc:
        where = "AGENTWATCH_DATA_DIR" if environ.get("AGENTWATCH_DATA_DIR") else "the default"
        raise CliError(
            f"cannot use the data dir {path} (from {where}): {exc.strerror or exc}; "
            "set AGENTWATCH_DATA_DIR to a directory you can write",
            1,
        ) from None
    return path
