"""app.py: the navigation lists every page in learning order, and each page is wired the same way."""
from __future__ import annotations

import ast
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from relviz.app.navigation import PAGES

ROOT = Path(__file__).resolve().parents[1]


def test_every_registered_page_exists_and_every_page_file_is_registered():
    registered = {page.path for page in PAGES}
    on_disk = {f"pages/{path.name}" for path in (ROOT / "pages").glob("*.py")}
    assert registered == on_disk
    assert sum(page.default for page in PAGES) == 1 and PAGES[0].default


@pytest.mark.parametrize("page", PAGES, ids=[Path(p.path).stem for p in PAGES])
def test_page_routes_deep_links_through_app_py(page):
    """Each page calls navigation.ensure_app_navigation() at module level, before drawing anything."""
    tree = ast.parse((ROOT / page.path).read_text())
    calls = [node for node in tree.body if isinstance(node, ast.Expr) and isinstance(node.value, ast.Call)]
    first_call = calls[0].value if calls else None
    assert first_call is not None and ast.unparse(first_call.func) == "navigation.ensure_app_navigation", \
        f"{page.path}: the first statement that does something must be navigation.ensure_app_navigation()"


def test_app_opens_on_the_landing_page_without_errors():
    app = AppTest.from_file(str(ROOT / "app.py"), default_timeout=60).run()
    assert not app.exception
    assert app.title and "relviz" in app.title[0].value


def test_no_page_calls_st_stop():
    """app.py draws the sidebar after the page, and Streamlit draws nothing after st.stop(): a page ends
    early with navigation.end_page(), which app.py catches."""
    for page in PAGES:
        tree = ast.parse((ROOT / page.path).read_text())
        stops = [node.lineno for node in ast.walk(tree) if isinstance(node, ast.Call)
                 and ast.unparse(node.func) in ("st.stop", "streamlit.stop")]
        assert not stops, f"{page.path} calls st.stop() on line(s) {stops}; use navigation.end_page()"


def _sidebar_links(at: AppTest) -> list[str]:
    return [link.proto.page for link in at.sidebar.get("page_link")]


def test_the_sidebar_is_drawn_after_a_page_that_ends_early(monkeypatch, tmp_path):
    """The experiments page without results shows its error and ends (navigation.end_page); the sidebar, which
    app.py fills after the page, still holds every page link, the convention and the export control."""
    monkeypatch.setenv("RELVIZ_EXPERIMENTS_RESULTS", str(tmp_path / "missing.json"))
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=60)
    at.switch_page("pages/experiments.py").run()
    assert not at.exception, at.exception
    assert at.error and "does not exist" in at.error[0].value and not at.get("plotly_chart")
    home = AppTest.from_file(str(ROOT / "app.py"), default_timeout=60).run()
    assert len(_sidebar_links(at)) == len(PAGES) and _sidebar_links(at) == _sidebar_links(home)
    assert any("relative position = j − i" in caption.value for caption in at.sidebar.caption)
    assert at.sidebar.button_group, "the export format control is missing"


def test_the_sidebar_is_drawn_after_a_page_that_fails(monkeypatch):
    """An uncaught error in a page shows Streamlit's error, and the sidebar is still drawn after it."""
    import relviz.snippets

    def broken(*args, **kwargs):
        raise RuntimeError("a page broke")

    monkeypatch.setattr(relviz.snippets, "home_snippet", broken)
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=60).run()
    assert at.exception  # its message is redacted (config.toml: client.showErrorDetails = "type")
    assert len(_sidebar_links(at)) == len(PAGES)
