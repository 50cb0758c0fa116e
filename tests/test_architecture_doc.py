"""docs/ARCHITECTURE.md and the layout agree: every package and module under relviz/ is named there.

A module someone adds without saying where it sits and what it owns fails here; so does a row left
behind for a module that moved (its path no longer exists)."""
from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DOC = (ROOT / "docs" / "ARCHITECTURE.md").read_text(encoding="utf-8")


def _named(path: Path) -> bool:
    """A module is named by its path, or within its package's row by its file name or stem in backticks."""
    rel = path.relative_to(ROOT).as_posix()
    return rel in DOC or f"`{path.name}`" in DOC or f"`{path.stem}`" in DOC or f"{path.stem}.py" in DOC


def test_every_package_and_module_is_named():
    modules = [p for p in sorted((ROOT / "relviz").rglob("*.py")) if "__pycache__" not in p.parts]
    packages = sorted({p.parent for p in modules if p.name == "__init__.py" and p.parent != ROOT / "relviz"})
    missing = [f"{p.relative_to(ROOT).as_posix()}/" for p in packages if f"{p.relative_to(ROOT).as_posix()}/" not in DOC]
    missing += [p.relative_to(ROOT).as_posix() for p in modules if p.name not in ("__init__.py", "__main__.py")
                and not _named(p)]
    assert len(modules) > 100 and missing == []


def test_every_path_the_doc_names_exists():
    # a path followed by "<" is a placeholder (relviz/schemes/<name>.py), not a file
    named = {m.group(0).rstrip(".") for m in re.finditer(r"(?:relviz|pages|tests|docs|scripts)/[\w/.]*+", DOC)
             if DOC[m.end():m.end() + 1] != "<"}
    gone = sorted(path for path in named if not (ROOT / path.rstrip("/")).exists())
    assert named and gone == []
