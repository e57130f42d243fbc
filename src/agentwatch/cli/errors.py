"""The one error a command raises to stop with a message, and the missing-extra message."""

from __future__ import annotations

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
