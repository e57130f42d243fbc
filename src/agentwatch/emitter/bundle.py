"""The hook's common modules compiled into one file, which its script loads instead of importing
each from its own `.pyc`.

Every hook run loads the same sixteen modules. Imported one by one, the import system looks for
each along `sys.path`, checks its `.pyc` against its source and reads it: about 1.4 ms of CPU per
run here, a third of what `site` costs the bare interpreter the hook is compared with. From one
file of code objects, checked against the sources' times and sizes as a `.pyc` is, they load in
a third of that, still through the import system (a finder in `sys.meta_path`, in the script), so
`-X importtime`, `-v` and `__spec__` see them as usual. The standard library's one-file importer,
`zipimport`, is pure Python that reads the archive again for every module: slower here than the
files themselves (5.2 ms against 4.2 ms for these modules, CPU, measured the same way).

The file goes in the `__pycache__` of the `site-packages` beside the script (its
installation's: `bin/../lib/pythonX.Y/site-packages`, a place the script finds without a search),
one per interpreter version, and names the directory that holds the package (an editable
install's `src/` too), so the script needs neither `site` nor code of its own to find it: every
line of the script is compiled on every run (Python keeps no bytecode for a script), and its
search for the package cost 0.25 ms of that. It is written by the first hook run that found it
missing or out of date, after the run's work (the hook's script names it `stale`), when that
directory can be written; until then the script puts `site-packages` on `sys.path` (and runs
`site` for an editable install's `.pth` file) and the hook imports its modules as before.
Compiled with docstrings left out (`optimize=2`: none of these modules asserts or reads a
docstring), which makes it 13% smaller and 0.1 ms quicker to load.

The run that writes the file also writes the installed script compiled beside it, as a `.pyc`
(`compiled_script_path`), which the command `hooks install` registers runs while it is newer than
the script (settings.hook_command): Python compiles a script on every run, a `.pyc` not (0.4 ms
to 0.8 ms here). The script is one of the file's checked entries, so a new one (an upgrade) makes
its run write both anew.

Standard library only. Its code runs in every hook run (from the file, before the hook's modules):
`install` and the finder; the rest only in a run that writes the file.
"""

from __future__ import annotations

import marshal
import posix
import sys

# The modules every hook run loads (tests/integration/test_emit_bundle.py checks that a run loads
# all of them, and no other of agentwatch's, from this file), and the C extensions among them:
# found by the import system, each costs a search of sys.path that takes longer than loading it
# (0.25 ms for the two), so the file names their places too.
MODULES = (
    "agentwatch",
    "agentwatch.config",
    "agentwatch.ids",
    "agentwatch.harnesses",
    "agentwatch.jsonfast",
    "agentwatch.redact",
    "agentwatch.envsecrets",
    "agentwatch.summaries",
    "agentwatch.contract",
    "agentwatch.emitter",
    "agentwatch.emitter.spool",
    "agentwatch.emitter.spoolformat",
    "agentwatch.emitter.hook",
    "agentwatch.emitter.wire",
    "agentwatch.emitter.sequence",
    "agentwatch.emitter.attribution",
)
EXTENSIONS = ("_json", "_socket")
# The layout of the file: marshal of (FORMAT, this module's code, sys.version, [directory put on
# sys.path], [(name, path, kind, mtime_ns, size)], {name: code}), kind one of PACKAGE, MODULE,
# EXTENSION. The script reads it, checks FORMAT, and runs this module's code from it, whose
# `install` checks the rest.
FORMAT = 4
PACKAGE, MODULE, EXTENSION, SCRIPT = "package", "module", "extension", "script"

TYPE_CHECKING = False
if TYPE_CHECKING:
    from types import CodeType, ModuleType
    from typing import Any

    Entry = tuple[str, str, str, int, int]

# importlib.machinery's ModuleSpec and ExtensionFileLoader: importlib itself costs the hook 0.6 ms.
ModuleSpec: Any = sys.modules["_frozen_importlib"].ModuleSpec
ExtensionFileLoader: Any = sys.modules["_frozen_importlib_external"].ExtensionFileLoader


class BundledModules:
    """The finder of the modules the file names, and the loader of those it holds the code of (in
    `sys.meta_path`, ahead of the rest)."""

    def __init__(self, entries: list[Entry], codes: dict[str, CodeType]) -> None:
        self.places = {name: (path, kind) for name, path, kind, _, _ in entries}
        self.codes = codes

    def find_spec(self, name: str, _path: object = None, _target: object = None) -> Any:
        place = self.places.get(name)
        if place is None:
            return None
        origin, kind = place
        if kind == EXTENSION:
            spec = ModuleSpec(name, ExtensionFileLoader(name, origin), origin=origin)
        elif name in self.codes:
            spec = ModuleSpec(name, self, origin=origin, is_package=kind == PACKAGE)
            if kind == PACKAGE:
                spec.submodule_search_locations.append(origin.rpartition("/")[0])
        else:
            return None  # this module's own entry: checked with the rest, not served
        spec.has_location = True  # __file__ is the source's, as when imported from it
        return spec

    def create_module(self, _spec: Any) -> None:
        return None

    def exec_module(self, module: ModuleType) -> None:
        exec(self.codes[module.__name__], module.__dict__)  # noqa: S102 - the sources' own code


def install(bundle: tuple[Any, ...]) -> bool:
    """Put the modules of `bundle` (the file, read) first in line for importing; False, and
    nothing put, when another Python made it or a file changed since."""
    _format, _code, version, paths, entries, codes = bundle
    if version != sys.version:
        return False
    for _name, path, _kind, mtime_ns, size in entries:
        try:
            stat = posix.stat(path)
        except OSError:
            return False
        if stat.st_mtime_ns != mtime_ns or stat.st_size != size:
            return False
    sys.path += paths
    sys.meta_path.insert(0, BundledModules(entries, codes))
    return True


def bundle_path(site: str) -> str:
    """The file in the installation whose `site-packages` is `site` (see the module's doc)."""
    return f"{site}/__pycache__/agentwatch-emit.{sys.implementation.cache_tag}.bundle"


def script_of(site: str) -> str:
    """The installed script of the installation whose `site-packages` is `site`."""
    return f"{site.rpartition('/')[0].rpartition('/')[0].rpartition('/')[0]}/bin/agentwatch-emit"


def compiled_script_path(site: str) -> str:
    """The script compiled, beside the file (settings.compiled_script names it in the command
    `hooks install` registers, which runs it while it is newer than the script)."""
    return f"{site}/__pycache__/agentwatch-emit.{sys.implementation.cache_tag}.pyc"


def source_of(home: str, name: str) -> tuple[str, str]:
    """The source file of module `name` under `home`, and its kind (PACKAGE or MODULE)."""
    parts = name.split(".")
    package = "/".join([home, *parts])
    if posix.access(f"{package}/__init__.py", posix.F_OK):
        return f"{package}/__init__.py", PACKAGE
    return f"{package}.py", MODULE


def compiled(source: bytes, path: str) -> CodeType:
    """The code of a module, without docstrings (none of the hook's modules asserts or reads
    one), without the annotations of its functions and of the names its module body and its
    functions assign (nothing on the hook's path reads them: with `from __future__ import
    annotations` they are strings, kept for the type checker; a class body's are kept, for
    what reads a class's fields), and with its `from __future__` statement made a flag of the
    compiler: run, the statement imports `__future__` (0.19 ms); as a flag, it changes the code
    the same way. The annotations are a constant tuple per function that the run builds into a
    dict as it defines the function: 5% of the file, and 0.15 ms of loading it."""
    import __future__

    import ast

    tree = ast.parse(source, path)
    flags = 0
    for node in list(tree.body):
        if isinstance(node, ast.ImportFrom) and node.module == "__future__":
            flags |= sum(getattr(__future__, alias.name).compiler_flag for alias in node.names)
            tree.body.remove(node)
    _unannotated()().visit(tree)
    code: CodeType = compile(tree, path, "exec", flags=flags, dont_inherit=True, optimize=2)
    return code


def _unannotated() -> type:
    """The syntax-tree transformer behind `compiled` (a function, so that `ast` is imported only
    by a run that writes the file)."""
    import ast

    class Unannotated(ast.NodeTransformer):
        """Drops the annotations `compiled` leaves out; a class body's own stay."""

        def visit_FunctionDef(self, node: Any) -> Any:
            node.returns = None
            arguments = node.args
            for arg in (*arguments.posonlyargs, *arguments.args, arguments.vararg,
                        *arguments.kwonlyargs, arguments.kwarg):  # fmt: skip
                if arg is not None:
                    arg.annotation = None
            self.generic_visit(node)
            return node

        visit_AsyncFunctionDef = visit_FunctionDef

        def visit_ClassDef(self, node: Any) -> Any:
            for child in node.body:  # its methods, not its fields
                if not isinstance(child, ast.AnnAssign):
                    self.visit(child)
            return node

        def visit_AnnAssign(self, node: Any) -> Any:
            if node.value is None:
                return ast.copy_location(ast.Pass(), node)
            return ast.copy_location(ast.Assign(targets=[node.target], value=node.value), node)

    return Unannotated


def build(home: str, site: str) -> bytes:
    """The file's bytes for the sources under `home` and this interpreter's extensions, as they
    are now, for the installation whose `site-packages` is `site`."""
    import importlib.util

    entries, codes = [], {}
    for name in (*MODULES, __name__):
        path, kind = source_of(home, name)
        with open(path, "rb") as f:
            stat = posix.fstat(f.fileno())
            codes[name] = compiled(f.read(), path)
        entries.append((name, path, kind, stat.st_mtime_ns, stat.st_size))
    for name in EXTENSIONS:
        spec = importlib.util.find_spec(name)
        if spec is None or not spec.origin or not isinstance(spec.loader, ExtensionFileLoader):
            continue  # built into some interpreters
        stat = posix.stat(spec.origin)
        entries.append((name, spec.origin, EXTENSION, stat.st_mtime_ns, stat.st_size))
    script = script_of(site)
    if posix.access(script, posix.F_OK):  # changed (a new version), the file and the .pyc are made anew
        stat = posix.stat(script)
        entries.append(("agentwatch-emit", script, SCRIPT, stat.st_mtime_ns, stat.st_size))
    # This module's own code goes apart, for the script to run: its file is checked with the rest.
    paths = [home] if home == site else [home, site]  # site: an editable install's dependencies
    return marshal.dumps((FORMAT, codes.pop(__name__), sys.version, paths, entries, codes))


def refresh(site: str) -> bool:
    """Write the file anew for the installation whose `site-packages` is `site`, of the package
    this process imported (a temporary file renamed over it, so a run that reads it meanwhile
    reads a whole one); False when its directory cannot be written (it is not tried)."""
    import agentwatch

    home = agentwatch.__file__.rpartition("/")[0].rpartition("/")[0]
    path = bundle_path(site)
    folder = path.rpartition("/")[0]
    if not posix.access(folder, posix.W_OK):
        if posix.access(folder, posix.F_OK) or not posix.access(site, posix.W_OK):
            return False
        posix.mkdir(folder, 0o755)
    _write(path, build(home, site))
    script = script_of(site)
    if posix.access(script, posix.R_OK):
        with open(script, "rb") as f:
            code = compile(f.read(), script, "exec", dont_inherit=True)
        magic: bytes = sys.modules["_frozen_importlib_external"].MAGIC_NUMBER
        _write(compiled_script_path(site), magic + bytes(12) + marshal.dumps(code))  # a .pyc's layout
    return True


def _write(path: str, data: bytes) -> None:
    """`data` as the file `path`: a temporary file renamed over it, so a reader reads a whole one."""
    tmp = f"{path}.{posix.getpid()}"
    try:
        fd = posix.open(tmp, posix.O_WRONLY | posix.O_CREAT | posix.O_TRUNC, 0o644)
        try:
            view = memoryview(data)
            while view:
                view = view[posix.write(fd, view) :]
        finally:
            posix.close(fd)
        posix.replace(tmp, path)
    except BaseException:
        try:  # noqa: SIM105 - contextlib would cost every hook run an import: this code runs in each
            posix.unlink(tmp)
        except OSError:
            pass
        raise
