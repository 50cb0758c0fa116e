"""The README's pictures are made by scripts/readme_pictures.py (issue 33): every page has one, the README shows
each, and each file it names exists."""
from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path

from relviz.app.navigation import PAGES

ROOT = Path(__file__).resolve().parents[1]


def _pictures():
    spec = importlib.util.spec_from_file_location("readme_pictures", ROOT / "scripts" / "readme_pictures.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclass looks its module up there
    spec.loader.exec_module(module)
    return module.PICTURES


def test_every_page_has_a_picture_and_the_readme_leads_with_your_models_strip():
    pictures = _pictures()
    pages = {picture.path.split("?")[0] or "home" for picture in pictures}
    assert {Path(page.path).stem for page in PAGES} <= pages
    assert pictures[0].path.startswith("your_model?") and "Gemma 3" in pictures[0].path.replace("+", " ")
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    shown = re.findall(r"\]\((docs/screenshots/[^)]+\.png)\)", readme)
    assert shown[0] == f"docs/screenshots/{pictures[0].name}.png"
    assert {f"docs/screenshots/{picture.name}.png" for picture in pictures} == set(shown)
    assert all((ROOT / path).is_file() for path in shown)
