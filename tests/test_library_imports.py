"""Importing the library changes nothing global, and its import graph has no cycle.

A fresh app server runs its first sessions' pages at once, each in its own thread, each importing
relviz modules. Python's per-module import locks make that safe exactly when the import graph
(tests/import_graph.py: top-level imports, each module's wait on its parent package, the scheme
registry's imports) has no cycle; with a cycle, two threads entering it from different ends
deadlock or meet a half-initialised module. So the library needs no import hook, and has none.
"""
from __future__ import annotations

import subprocess
import sys
import textwrap

from import_graph import ROOT, cycles, import_graph, module_files

#: The app's support modules that import streamlit at top level (relviz/app/ is the app's package).
APP_SUPPORT = {f"relviz.app.{name}" for name in (
    "navigation", "links", "display", "downloads", "quotas", "controls", "lecture_mode")}
#: Where streamlit may be imported at all: the app's package, and the benchmarks that drive the app
#: (AppTest, a server) to measure it, inside the functions that do.
STREAMLIT_PACKAGES = ("relviz.app.", "relviz.bench.")


def test_importing_every_library_module_patches_nothing_and_loads_no_streamlit():
    library = sorted(set(module_files()) - APP_SUPPORT)
    script = textwrap.dedent(f"""
        import builtins, importlib, sys
        before = (builtins.__import__, list(sys.meta_path), list(sys.path_hooks))
        for name in {library!r}:
            importlib.import_module(name)
        after = (builtins.__import__, list(sys.meta_path), list(sys.path_hooks))
        print("import", builtins.__import__ is before[0])
        print("meta_path", after[1] == before[1], "path_hooks", after[2] == before[2])
        print("streamlit", sorted(m for m in sys.modules if m.split(".")[0] == "streamlit"))
    """)
    result = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-2000:]
    assert len(library) > 50  # every module was imported, not an empty list
    assert result.stdout.splitlines()[-3:] == ["import True", "meta_path True path_hooks True", "streamlit []"], \
        result.stdout


def test_the_import_graph_has_no_cycle():
    graph = import_graph()
    assert "relviz.model" in graph["relviz.training.loop"]  # the graph reads real edges
    assert cycles(graph) == []


def test_the_cycle_finder_finds_a_package_that_imports_its_own_modules():
    """What the scheme registry in relviz/schemes/__init__.py made (the package body imported every
    scheme; each scheme module's lock is held while the package loads)."""
    graph = {"p": {"p.a"}, "p.a": {"p", "p.base"}, "p.base": {"p"}}
    assert cycles(graph) == [["p", "p.a", "p.base"]]
    assert cycles({"p": set(), "p.a": {"p", "p.base"}, "p.base": {"p"}}) == []


def _imported_names(path) -> list[tuple[int, str]]:
    """(line, dotted name) of every import in a file, in function bodies too; ``from a import b``
    gives both ``a`` and ``a.b``."""
    import ast

    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        names = ([alias.name for alias in node.names] if isinstance(node, ast.Import) else
                 [node.module or ""] + [f"{node.module}.{a.name}" for a in node.names]
                 if isinstance(node, ast.ImportFrom) else [])
        found += [(node.lineno, name) for name in names]
    return found


def test_no_library_module_imports_the_benchmarks():
    """The benchmarks (relviz/bench/) measure the library; the library, core maths and the
    experiments included, never imports them (in a function body either). Only the benchmarks
    themselves and the command line's ``bench`` (relviz/cli/) do."""
    found = [f"{module}:{line} {name}" for module, path in module_files().items()
             if not module.startswith(("relviz.bench", "relviz.cli."))
             for line, name in _imported_names(path)
             if name == "relviz.bench" or name.startswith("relviz.bench.")]
    assert found == []
    graph_names = {name for path in module_files().values() for _, name in _imported_names(path)}
    assert "relviz.bench.report" in graph_names                       # the scan sees the benchmarks' own imports


def test_only_the_app_package_imports_streamlit():
    """relviz/app/ is the app's support code and the only package that imports streamlit; the
    benchmarks that drive the app to measure it (relviz/bench/) import it inside their functions."""
    found = {module for module, path in module_files().items()
             for _, name in _imported_names(path) if name.split(".")[0] == "streamlit"}
    assert found and all(module.startswith(STREAMLIT_PACKAGES) for module in found), sorted(found)
    assert APP_SUPPORT <= found
