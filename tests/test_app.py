"""app.py: the navigation lists every page in learning order, and each page is wired the same way."""
from __future__ import annotations

import ast
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from relviz.ui import PAGES

ROOT = Path(__file__).resolve().parents[1]


def test_every_registered_page_exists_and_every_page_file_is_registered():
    registered = {page.path for page in PAGES}
    on_disk = {f"pages/{path.name}" for path in (ROOT / "pages").glob("*.py")}
    assert registered == on_disk
    assert sum(page.default for page in PAGES) == 1 and PAGES[0].default


@pytest.mark.parametrize("page", PAGES, ids=[Path(p.path).stem for p in PAGES])
def test_page_routes_deep_links_through_app_py(page):
    """Each page calls ui.ensure_app_navigation() at module level, before drawing anything."""
    tree = ast.parse((ROOT / page.path).read_text())
    calls = [node for node in tree.body if isinstance(node, ast.Expr) and isinstance(node.value, ast.Call)]
    first_call = calls[0].value if calls else None
    assert first_call is not None and ast.unparse(first_call.func) == "ui.ensure_app_navigation", \
        f"{page.path}: the first statement that does something must be ui.ensure_app_navigation()"


def test_app_opens_on_the_landing_page_without_errors():
    app = AppTest.from_file(str(ROOT / "app.py"), default_timeout=60).run()
    assert not app.exception
    assert app.title and "relviz" in app.title[0].value
