"""No code outside a scheme or mechanism module decides by comparing a name to a string literal.

A scheme, mechanism, family, kind, implementation, method or function is found in a table (a registry,
a dict of entries carrying their callables and flags) and asked; ``if scheme == "shaw": ...`` elsewhere
would be a second place that knows what only the entry should. Read from the source (ast): a
comparison (==, !=, in, not in) or a ``startswith``/``endswith`` between such a name and string
literals. relviz/schemes and relviz/mechanisms are the entries themselves and are not read.
"""
from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
#: The names that stand for what a table should dispatch on (a variable, attribute, dict key or .get key;
#: ``x.name`` counts as x's, so ``task.name == "shift"`` is a switch on a task).
NAMES = re.compile(r"^(scheme|family|kind|mechanism|impl|method|function|task)(_name)?$")
#: Where such comparisons remain, per file, with why they are left (none today; none may be added).
KNOWN: dict[str, int] = {}


def _named(node: ast.AST) -> str | None:
    """The identifier a node reads, when it is a name, an attribute, d["key"] or d.get("key")."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute) and node.attr == "name":   # task.name, _task.name: the task's name
        owner = _named(node.value)
        return owner.lstrip("_") if owner else None
    if isinstance(node, ast.Attribute):
        dtype = isinstance(node.value, (ast.Attribute, ast.Name)) and getattr(node.value, "attr",
                                                                              getattr(node.value, "id", "")) == "dtype"
        return None if dtype else node.attr                    # numpy's dtype.kind is a type code, not a name
    if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant) and isinstance(node.slice.value, str):
        return node.slice.value
    if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get" and node.args
            and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str)):
        return node.args[0].value
    return None


def _literal(node: ast.AST) -> bool:
    if isinstance(node, ast.Constant):
        return isinstance(node.value, str)
    return isinstance(node, (ast.Tuple, ast.List, ast.Set)) and bool(node.elts) and all(map(_literal, node.elts))


def name_switches(source: str) -> list[int]:
    """The line of each comparison between a dispatch name and string literals in ``source``."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Compare):
            sides = [node.left, *node.comparators]
            named = [s for s in sides if NAMES.match(_named(s) or "")]
            if named and any(_literal(s) for s in sides):
                found.append(node.lineno)
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
              and node.func.attr in ("startswith", "endswith") and NAMES.match(_named(node.func.value) or "")
              and node.args and _literal(node.args[0])):
            found.append(node.lineno)
    return found


def _sources() -> list[Path]:
    files = [ROOT / "app.py", *sorted((ROOT / "pages").glob("*.py")), *sorted((ROOT / "relviz").rglob("*.py"))]
    return [p for p in files if not p.relative_to(ROOT).as_posix().startswith(("relviz/schemes/", "relviz/mechanisms/"))]


def test_no_new_comparison_of_a_dispatch_name_with_a_string_literal():
    counts = {}
    for path in _sources():
        lines = name_switches(path.read_text())
        if lines:
            counts[path.relative_to(ROOT).as_posix()] = lines
    new = {f: lines for f, lines in counts.items() if len(lines) > KNOWN.get(f, 0)}
    assert new == {}, "dispatch on a table's entries instead (see the module docstring)"


def test_the_finder_sees_each_form():
    source = '''
if scheme == "shaw": pass
if spec["impl"] in ("relviz", "naive"): pass
if row.get("function") != "t5": pass
if self.kind == "multi": pass
if method.startswith("shaw"): pass
if name == "relviz": pass
if scheme == other: pass
if spec["impl"] in IMPLS: pass
if values.dtype.kind in "iu": pass
'''
    assert name_switches(source) == [2, 3, 4, 5, 6]
