"""Live attention: a shared link to a model that is not here (trained in another session) says so."""
from __future__ import annotations

from page_support import run_page


def test_link_to_a_model_from_another_session_says_it_is_gone():
    at = run_page("attention", at_ck="t5-mine-3")
    warnings = " ".join(w.value for w in at.warning)
    assert "t5-mine-3" in warnings and "another browser session" in warnings and "t5-shift" in warnings
    assert at.selectbox(key="at_ck").value == "t5-shift"


def test_a_link_to_a_shipped_model_shows_no_such_warning():
    at = run_page("attention", at_ck="alibi-shift")
    assert not any("another browser session" in w.value for w in at.warning)
