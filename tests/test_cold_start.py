"""A freshly started server under a class arriving at once, and what a first visit imports.

The cold-start test starts its own server (loopback, a free port) and opens 13 sessions over two
seconds, spread over every page, over Streamlit's websocket (tests/cold_start_support.py: no
browser, so 13 sessions cost one server's CPU). It fails on any exception box, any server
traceback, any session that does not finish, and any sidebar that lists file names instead of
the page titles. Before the fix, some sessions met "partially initialized module 'pandas' has
no attribute 'Series'" (plotly peeks at sys.modules while another session imports pandas), and
every early session listed "app, absolute, attention, …" in the sidebar.
"""
from __future__ import annotations

import asyncio
import subprocess
import sys
import textwrap
from pathlib import Path

from browser_support import REPO, app_server
from cold_start_support import class_arriving, open_at_once

from relviz.app.navigation import PAGES

SESSIONS = 13
TITLES = [page.title for page in PAGES]


def test_a_class_arriving_at_a_fresh_server(tmp_path):
    with app_server() as base:
        sessions = asyncio.run(open_at_once(base, class_arriving(SESSIONS), spread_s=2.0))
        port = base.rsplit(":", 1)[1]
    log_path = REPO / "test-artifacts" / f"server-{port}.log"
    log = log_path.read_text() if log_path.exists() else ""
    problems = []
    for session in sessions:
        where = f"/{session.page}"
        if session.failure or session.finished != "FINISHED_SUCCESSFULLY":
            problems.append(f"{where}: did not finish ({session.finished or session.failure})")
        problems += [f"{where}: exception box {text}" for text in session.exceptions]
        if not session.titles:
            problems.append(f"{where}: no page title drawn")
        if session.navigation:
            problems.append(f"{where}: a navigation from the pages/ folder was shown: {session.navigation}")
        if session.page_links[:len(TITLES)] != TITLES:
            problems.append(f"{where}: the sidebar's page links are {session.page_links}, not {TITLES}")
    if "Traceback" in log:
        problems.append("server log has a traceback:\n" + log[log.index("Traceback"):][:1500])
    assert not problems, "\n".join(problems)


def test_the_first_page_imports_neither_numpy_nor_pandas_nor_torch():  # nor transformers (requirements.txt)
    """A fresh process renders the landing page through app.py: torch, pandas and numpy stay unloaded
    (no page that needs them ran), so the server's first visitor does not wait for their imports
    (numpy alone is ~0.2 s; a minimal Streamlit + Plotly app imports none of them)."""
    script = textwrap.dedent(f"""
        import sys
        from streamlit.testing.v1 import AppTest
        at = AppTest.from_file({str(REPO / "app.py")!r}, default_timeout=120).run()
        assert not at.exception, at.exception
        assert at.title, "no title"
        print("torch" in sys.modules, "pandas" in sys.modules, "numpy" in sys.modules, "transformers" in sys.modules)
    """)
    result = subprocess.run([sys.executable, "-c", script], cwd=REPO, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.split()[-4:] == ["False", "False", "False", "False"], result.stdout   # nor transformers


def test_a_figure_drawn_while_another_session_is_still_importing_pandas():
    """What the class-arriving test met, made deterministic: pandas in sys.modules but still being
    imported (Python's __spec__._initializing, as another thread's import leaves it). Plotly's own
    lookup breaks on it, building and serialising a figure; after app.py's preload_shared_modules
    plotly treats it as absent and both work."""
    script = textwrap.dedent("""
        import importlib.machinery, sys, types
        import numpy as np
        import plotly.graph_objects as go
        import plotly.io as pio
        from relviz.app.navigation import preload_shared_modules

        half = types.ModuleType("pandas")
        half.__spec__ = importlib.machinery.ModuleSpec("pandas", None)
        half.__spec__._initializing = True
        sys.modules["pandas"] = half

        def draw():
            try:
                figure = go.Figure(go.Heatmap(z=np.arange(9.0).reshape(3, 3)))
                return str(len(pio.to_json(figure, validate=False)) > 0)
            except AttributeError as error:
                return "AttributeError" if "partially initialized" in str(error) else repr(error)

        before = draw()
        preload_shared_modules()
        print(before, draw())
    """)
    result = subprocess.run([sys.executable, "-c", script], cwd=REPO, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.split()[-2:] == ["AttributeError", "True"], result.stdout


def test_sidebar_navigation_from_the_folder_is_off():
    config = (Path(REPO) / ".streamlit" / "config.toml").read_text()
    assert "showSidebarNavigation = false" in config
