"""AppTest helper shared by the page tests: run one page with URL query parameters."""
from __future__ import annotations

from pathlib import Path

from streamlit.testing.v1 import AppTest

REPO = Path(__file__).resolve().parents[1]


def run_page(name: str, *, timeout: float = 30, **params: object) -> AppTest:
    """Open pages/<name>.py once, through app.py as a deep link does, with ``params`` as query parameters;
    any exception fails the test."""
    at = AppTest.from_file(str(REPO / "app.py"), default_timeout=timeout)
    at.switch_page(f"pages/{name}.py")
    for key, value in params.items():
        at.query_params[key] = str(value)
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    return at
