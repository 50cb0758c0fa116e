"""The Streamlit internals relviz relies on, pinned: an upgrade that changes them fails here, by name.

relviz.ui reaches below Streamlit's public API in three places:

- the link check (``checked_link_values``) reads and edits the query string Streamlit seeds
  URL-bound widgets from: ``get_session_state().query_params()``, its ``_initial_query_params``
  (key -> list of values), ``_query_params``, ``remove_param`` and ``is_bound``;
- the tour bar (``_switch_page``) releases a binding before ``st.switch_page`` sets that key:
  ``get_binding_for_param(key).widget_id`` and ``unbind_widget``;
- ``ensure_app_navigation`` reads ``get_script_run_ctx().pages_manager.main_script_path`` and
  clears ``PagesManager.uses_pages_directory``.

The behaviour tests (tests/test_controls.py, the tour tests) would fail too, but on a symptom; this
file names the internal that moved. Streamlit is pinned in requirements.txt; the first test fails
on any other installed version, so an upgrade is a deliberate step that re-runs this file.
"""
from __future__ import annotations

import re
from pathlib import Path

import streamlit
from streamlit.testing.v1 import AppTest

REPO = Path(__file__).resolve().parents[1]

SCRIPT = '''
import streamlit as st
from streamlit.runtime.scriptrunner import get_script_run_ctx
from streamlit.runtime.pages_manager import PagesManager
from streamlit.runtime.state.session_state_proxy import get_session_state

found = {}
with get_session_state().query_params() as qp:
    found["initial"] = {k: list(v) for k, v in qp._initial_query_params.items()}
    found["bound_before"] = qp.is_bound("x_n")
value = st.slider("n", 0, 10, 2, key="x_n", bind="query-params")
with get_session_state().query_params() as qp:
    found["bound_after"] = qp.is_bound("x_n")
    binding = qp.get_binding_for_param("x_n")
    found["binding_widget_id"] = binding.widget_id if binding is not None else None
    found["current"] = dict(qp._query_params)
    found["removed_other"] = qp.remove_param("other")
    found["other_after"] = "other" in qp._query_params
    if binding is not None:
        qp.unbind_widget(binding.widget_id)
    found["bound_after_unbind"] = qp.is_bound("x_n")
found["main_script_path"] = str(get_script_run_ctx().pages_manager.main_script_path)
found["uses_pages_directory"] = hasattr(PagesManager, "uses_pages_directory")
found["value"] = value
st.session_state["found"] = found
'''


def test_the_installed_streamlit_is_the_pinned_one():
    pin = re.search(r"^streamlit==(\S+)", (REPO / "requirements.txt").read_text(), re.MULTILINE)
    assert pin, "requirements.txt no longer pins streamlit exactly: relviz.ui relies on its internals"
    assert streamlit.__version__ == pin.group(1), (
        f"Streamlit {streamlit.__version__} is installed, {pin.group(1)} is pinned: relviz.ui uses its "
        "QueryParams and PagesManager internals (this file lists them); re-check them before moving the pin")


def test_query_params_internals_behave_as_relviz_expects():
    at = AppTest.from_string(SCRIPT, default_timeout=30)
    at.query_params["x_n"] = "7"
    at.query_params["other"] = "1"
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    found = at.session_state["found"]
    # the link's values, as lists, before any widget exists: what the link check filters
    assert found["initial"] == {"x_n": ["7"], "other": ["1"]}, found
    assert found["bound_before"] is False and found["bound_after"] is True, found
    # the widget was seeded from the link (so a value dropped from _initial_query_params is not seeded)
    assert found["value"] == 7, found
    assert found["binding_widget_id"] and found["binding_widget_id"].endswith("x_n"), found
    assert "x_n" in found["current"], found
    assert found["removed_other"] is True and found["other_after"] is False, found
    assert found["bound_after_unbind"] is False, found
    assert found["uses_pages_directory"] is True, found
    assert found["main_script_path"], found


def test_a_value_removed_from_the_initial_query_is_not_seeded():
    """The link check's mechanism itself: pop a key from _initial_query_params before the widget exists."""
    script = '''
import streamlit as st
from streamlit.runtime.state.session_state_proxy import get_session_state
with get_session_state().query_params() as qp:
    qp._initial_query_params.pop("x_n", None)
    qp.remove_param("x_n")
st.session_state["value"] = st.slider("n", 0, 10, 2, key="x_n", bind="query-params")
'''
    at = AppTest.from_string(script, default_timeout=30)
    at.query_params["x_n"] = "7"
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    assert at.session_state["value"] == 2
