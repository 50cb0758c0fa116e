"""Every class name in the library is defined once: a reader who greps ``class Alibi`` finds one class.

Scans the source of every module under relviz/ (module-level classes, by ast; nothing is imported).
"""
from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent / "relviz"

#: Names still defined twice, with whose code each sits in: each is to be renamed by its owner. The test
#: fails for a name that is no longer defined twice, so this list only shrinks.
PENDING: dict[str, str] = {}


def class_definitions() -> dict[str, list[str]]:
    """class name -> the modules (paths under relviz/) that define it at module level."""
    found: dict[str, list[str]] = defaultdict(list)
    for path in sorted(ROOT.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        for node in tree.body:
            if isinstance(node, ast.ClassDef):
                found[node.name].append(str(path.relative_to(ROOT.parent)))
    return found


def test_every_class_name_is_defined_once():
    twice = {name: places for name, places in class_definitions().items() if len(places) > 1}
    new = {name: places for name, places in twice.items() if name not in PENDING}
    assert not new, f"class names defined more than once (rename one): {new}"
    fixed = sorted(set(PENDING) - set(twice))
    assert not fixed, f"no longer defined twice, remove from PENDING: {fixed}"


def test_the_scan_finds_classes():
    found = class_definitions()
    assert found["AlibiScheme"] == ["relviz/schemes/alibi.py"] and found["Alibi"] == ["relviz/mechanisms/alibi.py"]
