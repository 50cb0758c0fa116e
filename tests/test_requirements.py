"""Everything the app and the library import at run time is pinned in requirements.txt.

A venv made from ``pip install -r requirements.txt`` alone must run every page, every
``python -m relviz`` command and every library function. This test reads every module of
``relviz/``, ``pages/`` and ``app.py`` with ``ast`` (imports at top level and inside functions,
plus ``importlib.import_module("...")`` with a literal name) and maps each imported top-level
name to its distribution with ``importlib.metadata.packages_distributions``.

The rule:

1. Standard-library modules and the project's own packages are always fine.
2. Any other import must come from a distribution named *directly* in requirements.txt.
   Being in the dependency closure of a pin is not enough: a transitive dependency is another
   package's choice (pandas arrives with streamlit today) and can vanish on that package's
   upgrade, so whatever relviz itself imports, relviz itself pins.
3. Optional extras (``OPTIONAL`` below: real-model inspection with transformers,
   huggingface_hub and tokenizers; ray for clusters; the dev tools playwright, kaleido and websockets
   that a benchmark or an export may use) are the only exception. Such an import must sit inside a
   function (never at module level, where it would break ``import relviz`` for everyone
   without the extra) and inside a ``try`` whose ``except ImportError`` (or
   ``ModuleNotFoundError``) handler deals with the absence: either it raises, and then its
   message says ``pip install ...``, or it skips the feature (returns a reason, sets a
   fallback). A handler that only ``pass``-es hides the problem and does not count.
   ``if TYPE_CHECKING:`` imports never run and are ignored.
"""
from __future__ import annotations

import ast
import importlib.metadata
import re
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PROJECT = {"relviz", "pages", "app"}

#: import name -> distribution, for the optional extras (they need not be installed here).
OPTIONAL = {
    "transformers": "transformers",
    "huggingface_hub": "huggingface-hub",
    "tokenizers": "tokenizers",
    "ray": "ray",
    "playwright": "playwright",
    "kaleido": "kaleido",
    "websockets": "websockets",
}


def canonical(name: str) -> str:
    """PEP 503 normalised distribution name."""
    return re.sub(r"[-_.]+", "-", name).lower()


def read_requirements(path: Path) -> dict[str, str]:
    """``name -> pinned version`` from a requirements file, following ``-r`` includes."""
    pins: dict[str, str] = {}
    for raw in path.read_text().splitlines():
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        if line.startswith(("-r ", "--requirement ")):
            pins.update(read_requirements(path.parent / line.split(None, 1)[1]))
            continue
        if line.startswith("-"):
            continue  # index options
        match = re.fullmatch(r"([A-Za-z0-9][A-Za-z0-9._-]*)(\[[^\]]*\])?\s*==\s*([^\s;]+)", line)
        assert match, f"{path.name}: {raw!r} is not an exact pin (name==version)"
        pins[canonical(match.group(1))] = match.group(3)
    return pins


@dataclass(frozen=True)
class Import:
    file: str
    line: int
    top: str          # top-level module name, e.g. "plotly"
    in_function: bool
    guarded: bool     # inside try/except ImportError whose handler deals with the absence


def _module_strings(tree: ast.Module) -> dict[str, str]:
    """Module-level ``NAME = "..."`` constants (an install message may live in one)."""
    out = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant) \
                and isinstance(node.value.value, str):
            for target in node.targets:
                if isinstance(target, ast.Name):
                    out[target.id] = node.value.value
    return out


def _handles_absence(handler: ast.ExceptHandler, constants: dict[str, str]) -> bool:
    """Not a bare ``pass``; and if the handler raises, a string in it (or a module constant it
    names) says pip install."""
    if all(isinstance(n, ast.Pass) for n in handler.body):
        return False
    if not any(isinstance(n, ast.Raise) for n in ast.walk(handler)):
        return True  # the feature is skipped (a reason returned, a fallback set)
    for node in ast.walk(handler):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and "pip install" in node.value:
            return True
        if isinstance(node, ast.Name) and "pip install" in constants.get(node.id, ""):
            return True
    return False


def _catches_import_error(handler: ast.ExceptHandler) -> bool:
    names = handler.type.elts if isinstance(handler.type, ast.Tuple) else [handler.type]
    return any(isinstance(n, ast.Name) and n.id in {"ImportError", "ModuleNotFoundError"} for n in names)


def imports_of(path: Path, root: Path = ROOT) -> list[Import]:
    tree = ast.parse(path.read_text(), filename=str(path))
    constants = _module_strings(tree)
    found: list[Import] = []
    rel = str(path.relative_to(root))

    def visit(node: ast.AST, in_function: bool, guarded: bool) -> None:
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module]
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
                and node.func.attr == "import_module" and node.args \
                and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str):
            names = [node.args[0].value]
        for name in names:
            found.append(Import(rel, node.lineno, name.split(".")[0], in_function, guarded))
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            for child in node.orelse:  # the TYPE_CHECKING body never runs
                visit(child, in_function, guarded)
            return
        if isinstance(node, ast.Try):
            guards = any(_catches_import_error(h) and _handles_absence(h, constants)
                         for h in node.handlers)
            for child in node.body:
                visit(child, in_function, guarded or guards)
            for child in node.handlers + node.orelse + node.finalbody:
                visit(child, in_function, guarded)
            return
        inner = in_function or isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
        for child in ast.iter_child_nodes(node):
            visit(child, inner, guarded)

    visit(tree, False, False)
    return found


def project_files() -> list[Path]:
    files = [ROOT / "app.py", *sorted((ROOT / "relviz").rglob("*.py")), *sorted((ROOT / "pages").rglob("*.py"))]
    return [f for f in files if f.exists()]


def violations(imports: list[Import], pinned: set[str],
               dists: dict[str, list[str]]) -> list[str]:
    """What breaks the module docstring's rule, one readable line each."""
    bad = []
    for imp in imports:
        where = f"{imp.file}:{imp.line}: import {imp.top}"
        if imp.top in sys.stdlib_module_names or imp.top in PROJECT or imp.top == "__future__":
            continue
        if imp.top in OPTIONAL:
            if not imp.in_function:
                bad.append(f"{where} at module level: an optional extra must be imported inside "
                           "the function that needs it")
            elif not imp.guarded:
                bad.append(f"{where} is an optional extra: wrap it in try/except ImportError that "
                           "raises with a 'pip install ...' message or skips the feature")
            continue
        candidates = {canonical(d) for d in dists.get(imp.top, [])}
        if not candidates:
            bad.append(f"{where}: no installed distribution provides it, and requirements.txt "
                       "does not pin one")
        elif not candidates & pinned:
            bad.append(f"{where}: comes from {sorted(candidates)}, which requirements.txt does "
                       "not pin directly (add an exact pin)")
    return bad


def test_every_runtime_import_is_pinned_in_requirements_txt():
    pinned = set(read_requirements(ROOT / "requirements.txt"))
    dists = importlib.metadata.packages_distributions()
    imports = [imp for path in project_files() for imp in imports_of(path)]
    assert any(imp.top == "torch" for imp in imports), "the scan found no imports at all"
    assert violations(imports, pinned, dists) == []


def test_psutil_is_a_runtime_pin_not_only_a_test_tool():
    """bench, experiments and the Experiments page's Measure button import psutil."""
    assert "psutil" in read_requirements(ROOT / "requirements.txt")


def test_requirements_pins_are_what_this_venv_runs():
    """The pins are the versions the tests run against (else the pins are untested)."""
    for name, version in read_requirements(ROOT / "requirements-dev.txt").items():
        installed = importlib.metadata.version(name)
        assert installed.split("+")[0] == version, f"{name}: pinned {version}, installed {installed}"


# The checker itself: each branch of the rule fires on a small synthetic module.

def _check(tmp_path: Path, source: str, pinned: set[str]) -> list[str]:
    module = tmp_path / "relviz" / "m.py"
    module.parent.mkdir(exist_ok=True)
    module.write_text(source)
    return violations(imports_of(module, tmp_path), pinned, {"yaml": ["PyYAML"], "psutil": ["psutil"],
                                        "pandas": ["pandas"], "np": []})


@pytest.mark.parametrize("source, pinned, expect", [
    ("import os, json\nfrom relviz import x\nfrom . import y\n", set(), []),
    ("import yaml\n", {"pyyaml"}, []),
    ("import yaml\n", set(), ["not pin directly"]),
    ("def f():\n    import psutil\n", set(), ["not pin directly"]),
    ("def f():\n    return importlib.import_module('pandas')\n", set(), ["not pin directly"]),
    ("import nosuchpackage_xyz\n", set(), ["no installed distribution"]),
    ("import transformers\n", set(), ["at module level"]),
    ("def f():\n    import transformers\n", set(), ["wrap it in try/except ImportError"]),
    ("def f():\n    try:\n        import transformers\n    except ImportError:\n        pass\n",
     set(), ["wrap it in try/except ImportError"]),
    ("def f():\n    try:\n        import transformers\n    except ImportError as e:\n"
     "        raise RuntimeError('no transformers') from e\n", set(), ["wrap it in try/except ImportError"]),
    ("def f():\n    try:\n        import playwright\n    except ImportError:\n        return 'skipped'\n",
     set(), []),
    ("def f():\n    try:\n        import transformers\n    except ImportError as e:\n"
     "        raise ImportError('pip install relviz[hf]') from e\n", set(), []),
    ("MSG = 'real models need: pip install transformers'\n"
     "def f():\n    try:\n        import ray\n    except ModuleNotFoundError as e:\n"
     "        raise RuntimeError(MSG) from e\n", set(), []),
    ("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import transformers\n", set(), []),
])
def test_checker_applies_the_rule(tmp_path, source, pinned, expect):
    found = _check(tmp_path, source, pinned)
    assert len(found) == len(expect), found
    for line, fragment in zip(found, expect):
        assert fragment in line


def test_requirements_install_relviz_itself_so_python_m_relviz_works_from_any_folder():
    """Issue 33: after the README's app command (pip install -r requirements.txt), `python -m relviz` must work
    outside the checkout: requirements.txt installs the checkout itself (editable), and .ci/run runs it from /."""
    lines = [line.split("#", 1)[0].strip() for line in (ROOT / "requirements.txt").read_text().splitlines()]
    assert "-e ." in lines
    ci = (ROOT / ".ci" / "run").read_text()
    assert '(cd / && "$OLDPWD/.venv/bin/python" -m relviz --version)' in ci
    assert ci.index("-r requirements-dev.txt") < ci.index('-m relviz --version)')
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert "-r requirements.txt && .venv/bin/streamlit run app.py" in readme and "from any folder" in readme
