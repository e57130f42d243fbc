"""How emitter/bundle.py compiles a hook module: docstrings left out, `from __future__` made a
compiler flag (the code runs without importing `__future__`, its annotations still postponed)."""

from __future__ import annotations

from agentwatch.emitter import bundle

SOURCE = b'''"""A module."""
from __future__ import annotations

def f(x: NotDefinedAnywhere) -> None:
    """A function."""
'''


def test_a_module_compiles_without_its_future_statement_or_docstrings() -> None:
    code = bundle.compiled(SOURCE, "/m.py")
    assert "__future__" not in code.co_names, "running it imports nothing"
    space: dict[str, object] = {}
    exec(code, space)  # noqa: S102 - the test's own source
    f = space["f"]
    assert callable(f)
    assert f.__annotations__ == {"x": "NotDefinedAnywhere", "return": "None"}, "postponed, as before"
    assert f.__doc__ is None and space.get("__doc__") is None
