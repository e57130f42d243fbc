"""How emitter/bundle.py compiles a hook module: docstrings left out, `from __future__` made a
compiler flag (the code runs without importing `__future__`), the annotations of functions and of
module-level names left out (nothing on the hook's path reads them), a class's fields kept."""

from __future__ import annotations

from typing import Any

from agentwatch.emitter import bundle

SOURCE = b'''"""A module."""
from __future__ import annotations

def f(x: NotDefinedAnywhere) -> None:
    """A function."""

LIMIT: int = 3
name: str

class Row:
    size: int
    kind: str = "x"

    def grow(self, by: int = LIMIT) -> int:
        width: int = by
        return width
'''


def test_a_module_compiles_without_its_future_statement_or_docstrings() -> None:
    code = bundle.compiled(SOURCE, "/m.py")
    assert "__future__" not in code.co_names, "running it imports nothing"
    space: dict[str, object] = {}
    exec(code, space)  # noqa: S102 - the test's own source
    f = space["f"]
    assert callable(f)
    assert f.__annotations__ == {}, "a function's annotations are left out"
    assert f.__doc__ is None and space.get("__doc__") is None
    assert space["LIMIT"] == 3 and "name" not in space and "__annotations__" not in space
    row: Any = space["Row"]
    assert row.__annotations__ == {"size": "int", "kind": "str"}, "a class's fields are kept"
    assert row().grow() == 3 and row.grow.__annotations__ == {} and row.kind == "x"
