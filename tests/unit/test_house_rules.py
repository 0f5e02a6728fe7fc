"""The layout rules of the package (DESIGN.md, "Rules of the house"), held by reading its source.

- No import circle among the package's modules, counting late (function-level)
  imports and leaving out ``if TYPE_CHECKING:`` ones, which never run.
- At most ten modules at the top level: every other concern has a package.
- No module over 800 lines: a module that grows past that is two concerns.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import streamtape

PACKAGE = Path(streamtape.__file__).parent
MAX_TOP_LEVEL_MODULES = 10
MAX_LINES = 800


def _module_name(path: Path) -> tuple[str, bool]:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    is_package = parts[-1] == "__init__"
    return ".".join(parts[:-1] if is_package else parts), is_package


MODULES: dict[str, tuple[Path, bool]] = {}
for _p in sorted(PACKAGE.rglob("*.py")):
    _name, _is_pkg = _module_name(_p)
    MODULES[_name] = (_p, _is_pkg)


def _is_type_checking(node: ast.If) -> bool:
    t = node.test
    return (isinstance(t, ast.Name) and t.id == "TYPE_CHECKING") or (
        isinstance(t, ast.Attribute) and t.attr == "TYPE_CHECKING"
    )


def _known(name: str) -> str | None:
    """The package module an import of ``name`` loads (itself, or the nearest package above it)."""
    while name and name not in MODULES:
        name = name.rpartition(".")[0]
    return name or None


def _imports(tree: ast.AST) -> Iterator[ast.Import | ast.ImportFrom]:
    """Every import statement that can run: any depth, ``if TYPE_CHECKING:`` bodies left out."""
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, ast.If) and _is_type_checking(node):
            for other in node.orelse:
                yield from _imports_of(other)
            continue
        yield from _imports_of(node)


def _imports_of(node: ast.AST) -> Iterator[ast.Import | ast.ImportFrom]:
    if isinstance(node, ast.Import | ast.ImportFrom):
        yield node
    yield from _imports(node)


def _absolute(module: str, is_package: bool, node: ast.ImportFrom) -> str:
    if not node.level:
        return node.module or ""
    base = module.split(".") if is_package else module.split(".")[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join([*base, *([node.module] if node.module else [])])


def import_graph() -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {m: set() for m in MODULES}
    for module, (path, is_package) in MODULES.items():
        for node in _imports(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                targets = [_known(a.name) for a in node.names if a.name.startswith("streamtape")]
            else:
                base = _absolute(module, is_package, node)
                if not base.startswith("streamtape"):
                    continue
                targets = [_known(f"{base}.{a.name}") for a in node.names]
            graph[module].update(t for t in targets if t is not None and t != module)
    return graph


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_no_module_of_the_package_imports_itself_back_through_a_circle() -> None:
    assert circles(import_graph()) == []


def test_the_circle_finder_sees_a_late_import_and_ignores_a_type_checking_one() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": set()}
    assert circles(graph) == [["a", "b", "c"]]
    late = ast.parse("def f():\n    from . import x\nif TYPE_CHECKING:\n    from . import y\n")
    assert [ast.unparse(n) for n in _imports(late)] == ["from . import x"]


def test_the_graph_holds_the_package_s_known_edges() -> None:
    graph = import_graph()
    assert "streamtape.cassette.model" in graph["streamtape.cassette.writer"]
    assert "streamtape.cassette.digest" in graph["streamtape.cassette.writer"]
    # a late import, inside a function
    assert "streamtape.mitm.proxy" in graph["streamtape.commands.serve"]


def test_the_top_level_holds_at_most_ten_modules() -> None:
    top = sorted(p.name for p in PACKAGE.glob("*.py"))
    assert len(top) <= MAX_TOP_LEVEL_MODULES, top


def test_no_module_is_over_eight_hundred_lines() -> None:
    long = {
        name: n
        for name, (path, _) in MODULES.items()
        if (n := len(path.read_text(encoding="utf-8").splitlines())) > MAX_LINES
    }
    assert long == {}
