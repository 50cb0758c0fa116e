"""Every Streamlit cache in the app is bounded: a server that many classes use must not grow forever.

The source of app.py, pages/ and relviz/ is scanned (ast, nothing is imported or run) for
``st.cache_data`` and ``st.cache_resource``, used as decorators (``@st.cache_data``,
``@st.cache_data(...)``) or called on a function (``st.cache_data(max_entries=4)(f)``):

- every ``st.cache_data`` needs ``max_entries``: a positive integer, at most MAX_ENTRIES;
- every ``st.cache_resource`` needs it too, unless the function has no hashed parameter (all
  its parameters start with "_", or it has none): then it holds a single entry.

``max_entries`` may be written inline, as a module-level constant, or through ``**OPTIONS`` where
OPTIONS is a module-level ``dict(...)`` or ``{...}``. ``ttl`` alone does not bound memory.
The audit (every cache with its bound) is written to test-artifacts/cache_bounds.json.
"""
from __future__ import annotations

import ast
import json
import sys
from dataclasses import asdict, dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SOURCES = [REPO / "app.py", *sorted((REPO / "pages").glob("*.py")), *sorted((REPO / "relviz").rglob("*.py"))]
ARTIFACT = REPO / "test-artifacts" / "cache_bounds.json"
#: A cache with more entries than this is not meaningfully bounded for this app.
MAX_ENTRIES = 256
CACHES = ("cache_data", "cache_resource")


@dataclass
class Cache:
    file: str
    line: int
    kind: str
    function: str
    max_entries: int | str | None
    hashed_parameters: list[str]
    problem: str = ""


def _cache_kind(node: ast.AST) -> str | None:
    """'cache_data' / 'cache_resource' when node names one (st.cache_data, streamlit.cache_data, cache_data)."""
    if isinstance(node, ast.Attribute) and node.attr in CACHES:
        return node.attr
    if isinstance(node, ast.Name) and node.id in CACHES:
        return node.id
    return None


def _constants(tree: ast.Module) -> dict[str, ast.AST]:
    """Module-level NAME = value assignments (the last one wins)."""
    values: dict[str, ast.AST] = {}
    for statement in tree.body:
        if isinstance(statement, ast.Assign) and len(statement.targets) == 1 \
                and isinstance(statement.targets[0], ast.Name):
            values[statement.targets[0].id] = statement.value
        elif isinstance(statement, ast.AnnAssign) and isinstance(statement.target, ast.Name) and statement.value:
            values[statement.target.id] = statement.value
    return values


def _keywords(call: ast.Call, constants: dict[str, ast.AST]) -> dict[str, ast.AST]:
    """The call's keyword arguments, with **NAME expanded when NAME is a module-level dict literal."""
    found: dict[str, ast.AST] = {}
    for keyword in call.keywords:
        if keyword.arg is not None:
            found[keyword.arg] = keyword.value
            continue
        value = constants.get(keyword.value.id) if isinstance(keyword.value, ast.Name) else keyword.value
        if isinstance(value, ast.Call) and isinstance(value.func, ast.Name) and value.func.id == "dict":
            found.update({k.arg: k.value for k in value.keywords if k.arg})
        elif isinstance(value, ast.Dict):
            found.update({k.value: v for k, v in zip(value.keys, value.values)
                          if isinstance(k, ast.Constant) and isinstance(k.value, str)})
        else:
            found["**"] = keyword.value
    return found


def _evaluate(node: ast.AST | None, constants: dict[str, ast.AST], source: str):
    """An int when the expression is a literal, a module constant, or len() of a module-level literal."""
    if node is None:
        return None
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.Name) and node.id in constants:
        return _evaluate(constants[node.id], constants, source)
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "len" and node.args:
        target = node.args[0]
        target = constants.get(target.id, target) if isinstance(target, ast.Name) else target
        if isinstance(target, (ast.List, ast.Tuple, ast.Set, ast.Dict)):
            return len(target.keys if isinstance(target, ast.Dict) else target.elts)
    if isinstance(node, ast.BinOp):
        left, right = _evaluate(node.left, constants, source), _evaluate(node.right, constants, source)
        if isinstance(left, int) and isinstance(right, int):
            return {ast.Add: left + right, ast.Mult: left * right, ast.Sub: left - right}.get(type(node.op))
    return ast.get_source_segment(source, node)


def _hashed_parameters(function: ast.FunctionDef | ast.AsyncFunctionDef | None) -> list[str]:
    if function is None:
        return ["<unknown>"]
    arguments = function.args
    names = [a.arg for a in arguments.posonlyargs + arguments.args + arguments.kwonlyargs]
    names += [a.arg for a in (arguments.vararg, arguments.kwarg) if a is not None]
    return [name for name in names if not name.startswith("_")]


def scan(path: Path) -> list[Cache]:
    source = path.read_text(encoding="utf-8")
    tree = ast.parse(source, filename=str(path))
    constants = _constants(tree)
    functions = {node.name: node for node in ast.walk(tree) if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))}
    found: list[Cache] = []
    decorator_nodes: set[int] = set()

    def record(kind: str, call: ast.Call | None, function, line: int, name: str) -> None:
        keywords = _keywords(call, constants) if call is not None else {}
        max_entries = _evaluate(keywords.get("max_entries"), constants, source)
        cache = Cache(str(path.relative_to(REPO)), line, kind, name, max_entries, _hashed_parameters(function))
        single_entry = kind == "cache_resource" and not cache.hashed_parameters
        if "**" in keywords and "max_entries" not in keywords:
            cache.problem = "max_entries hidden behind ** of something that is not a module-level dict literal"
        elif max_entries is None and not single_entry:
            cache.problem = ("no max_entries" + (" (ttl alone does not bound memory)" if "ttl" in keywords else "")
                             + f": one entry per distinct {', '.join(cache.hashed_parameters) or 'call'}, forever")
        elif max_entries is not None and not (isinstance(max_entries, int) and not isinstance(max_entries, bool)):
            cache.problem = f"max_entries is not a constant the scan can read: {max_entries!r}"
        elif isinstance(max_entries, int) and not 1 <= max_entries <= MAX_ENTRIES:
            cache.problem = f"max_entries={max_entries}: must be from 1 to {MAX_ENTRIES}"
        found.append(cache)

    for function in functions.values():
        for decorator in function.decorator_list:
            decorator_nodes.add(id(decorator))
            call = decorator if isinstance(decorator, ast.Call) else None
            kind = _cache_kind(call.func if call else decorator)
            if kind:
                if call is not None:
                    decorator_nodes.add(id(call.func))
                record(kind, call, function, decorator.lineno, function.name)
    # st.cache_data(f), st.cache_data(max_entries=...)(f): not decorators
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call) or id(node) in decorator_nodes:
            continue
        if _cache_kind(node.func) and node.args:  # st.cache_data(f, ...)
            target = node.args[0]
            name = target.id if isinstance(target, ast.Name) else ast.get_source_segment(source, target)
            record(_cache_kind(node.func), node, functions.get(name), node.lineno, str(name))
        elif isinstance(node.func, ast.Call) and _cache_kind(node.func.func) and node.args:  # st.cache_data(...)(f)
            decorator_nodes.add(id(node.func))
            target = node.args[0]
            name = target.id if isinstance(target, ast.Name) else ast.get_source_segment(source, target)
            record(_cache_kind(node.func.func), node.func, functions.get(name), node.lineno, str(name))
    return found


def all_caches() -> list[Cache]:
    return [cache for path in SOURCES for cache in scan(path)]


def test_every_cache_is_bounded():
    caches = all_caches()
    ARTIFACT.parent.mkdir(parents=True, exist_ok=True)
    ARTIFACT.write_text(json.dumps([asdict(c) for c in caches], indent=2) + "\n", encoding="utf-8")
    print(f"\n[cache bounds] {len(caches)} caches in {len({c.file for c in caches})} files; "
          f"{sum(c.kind == 'cache_data' for c in caches)} cache_data, "
          f"{sum(c.kind == 'cache_resource' for c in caches)} cache_resource")
    assert caches, "found no Streamlit cache at all: is the scan still looking at the right files?"
    unbounded = [c for c in caches if c.problem]
    assert not unbounded, "unbounded caches:\n" + "\n".join(
        f"  {c.file}:{c.line} {c.kind} {c.function}: {c.problem}" for c in unbounded)


# ---------------------------------------------------------------------------------------
# The scan itself: it must catch every way of writing an unbounded cache.

CASES = {
    "bare decorator": ("import streamlit as st\n@st.cache_data\ndef f(x):\n    return x\n", True),
    "no max_entries": ("import streamlit as st\n@st.cache_data(show_spinner=False)\ndef f(x):\n    return x\n", True),
    "ttl only": ("import streamlit as st\n@st.cache_data(ttl=60)\ndef f(x):\n    return x\n", True),
    "max_entries None": ("import streamlit as st\n@st.cache_data(max_entries=None)\ndef f(x):\n    return x\n", True),
    "huge max_entries": ("import streamlit as st\n@st.cache_data(max_entries=10**9)\ndef f(x):\n    return x\n", True),
    "called on a function": ("import streamlit as st\ndef f(x):\n    return x\ng = st.cache_data(f)\n", True),
    "factory then call": ("import streamlit as st\ndef f(x):\n    return x\ng = st.cache_data(ttl=5)(f)\n", True),
    "imported name": ("from streamlit import cache_data\n@cache_data\ndef f(x):\n    return x\n", True),
    "resource with a key": ("import streamlit as st\n@st.cache_resource\ndef f(name):\n    return name\n", True),
    "unknown ** options": ("import streamlit as st\n@st.cache_data(**make())\ndef f(x):\n    return x\n", True),
    "bounded": ("import streamlit as st\n@st.cache_data(max_entries=8)\ndef f(x):\n    return x\n", False),
    "bounded by a constant": ("import streamlit as st\nN = 4\n@st.cache_data(max_entries=N)\ndef f(x):\n"
                              "    return x\n", False),
    "bounded through **": ("import streamlit as st\nO = dict(max_entries=8)\n@st.cache_resource(**O)\ndef f(x):\n"
                           "    return x\n", False),
    "single resource": ("import streamlit as st\n@st.cache_resource\ndef model():\n    return 1\n", False),
    "unhashed parameters only": ("import streamlit as st\n@st.cache_resource\ndef model(_m):\n    return 1\n", False),
    "bounded factory call": ("import streamlit as st\ndef f(x):\n    return x\ng = st.cache_data(max_entries=2)(f)\n",
                             False),
}


@pytest.mark.parametrize("name", list(CASES))
def test_the_scan_catches_unbounded_caches(tmp_path, monkeypatch, name):
    source, unbounded = CASES[name]
    monkeypatch.setattr(sys.modules[__name__], "REPO", tmp_path)
    path = tmp_path / "page.py"
    path.write_text(source, encoding="utf-8")
    caches = scan(path)
    assert caches, f"{name}: the scan found no cache"
    assert any(c.problem for c in caches) == unbounded, [asdict(c) for c in caches]
