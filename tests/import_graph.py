"""relviz's import graph, read from the source (ast): what a module's import lock waits on.

Edges, module → module whose import it starts while its own lock is held:
- every top-level ``import`` / ``from ... import`` (not under ``if TYPE_CHECKING``), to the module
  named and to each package above it (importing ``a.b.c`` imports ``a`` and ``a.b`` first);
- each module to its parent package (Python holds a module's lock while it imports the parent);
- ``from package import name`` of a lazily exported name (relviz/_lazy.py) to the module that defines it;
- a registry (a module that lists its package with ``pkgutil.iter_modules``, itself or through
  relviz._registry.discover_subclasses) to every module of its package: it imports them with importlib.
Imports inside functions run when called, not while a module initialises, and are left out.
"""
from __future__ import annotations

import ast
import importlib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def module_files() -> dict[str, Path]:
    """Dotted name -> file, for every module under relviz/."""
    found = {}
    for path in sorted((ROOT / "relviz").rglob("*.py")):
        parts = path.relative_to(ROOT).with_suffix("").parts
        found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return found


def _lazy_exports(known: dict[str, Path]) -> dict[str, str]:
    """package.name -> the module that defines it, for every name a package exports lazily
    (relviz/_lazy.py). Importing such a package is cheap: its body imports nothing."""
    found = {}
    for module, path in known.items():
        if path.name == "__init__.py" and "lazy_exports(" in path.read_text():
            exports = importlib.import_module(module).__dict__["__getattr__"].exports
            found |= {f"{module}.{name}": owner for name, owner in exports.items()}
    return found


def _targets(name: str, known: dict[str, Path], lazy: dict[str, str]) -> set[str]:
    """``name`` cut to the longest module prefix relviz has, and the packages above it. A name a
    package exports lazily counts as its module: the package imports it when the name is read."""
    parts = lazy.get(name, name).split(".")
    while parts and ".".join(parts) not in known:
        parts.pop()
    return {".".join(parts[:n]) for n in range(1, len(parts) + 1)}


def _top_level_imports(tree: ast.AST, module: str, is_package: bool) -> list[str]:
    names: list[str] = []

    def visit(node: ast.AST) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
                continue
            if isinstance(child, ast.If) and "TYPE_CHECKING" in ast.unparse(child.test):
                continue
            if isinstance(child, ast.Import):
                names.extend(alias.name for alias in child.names)
            elif isinstance(child, ast.ImportFrom):
                base = child.module or ""
                if child.level:
                    here = module.split(".") if is_package else module.split(".")[:-1]
                    here = here[:len(here) - (child.level - 1)]
                    base = ".".join(here + ([child.module] if child.module else []))
                names.append(base)
                names.extend(f"{base}.{alias.name}" for alias in child.names)
            visit(child)

    visit(tree)
    return names


def import_graph() -> dict[str, set[str]]:
    known = module_files()
    lazy = _lazy_exports(known)
    graph: dict[str, set[str]] = {}
    for module, path in known.items():
        edges: set[str] = set()
        for name in _top_level_imports(ast.parse(path.read_text()), module, path.name == "__init__.py"):
            edges |= _targets(name, known, lazy)
        if "." in module:
            edges.add(module.rsplit(".", 1)[0])
        text = path.read_text()
        if ("pkgutil.iter_modules(" in text and module != "relviz._registry") or "discover_subclasses(_package" in text:
            package = module if path.name == "__init__.py" else module.rsplit(".", 1)[0]
            edges |= {m for m in known if m.rsplit(".", 1)[0] == package}
        graph[module] = edges - {module}
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def connect(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(graph.get(node, ())):
            if nxt not in index:
                connect(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            connect(node)
    return found
