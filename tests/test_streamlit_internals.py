"""Where relviz reaches below Streamlit's (and plotly's) public API: only relviz/app/internals.py.

The link check, the deep-link routing and everything else use public API. What is left is one
adapter (relviz/app/internals.py), each piece with why and what would replace it:

- ``release_url_bindings``: ``QueryParams.get_binding_for_param(key).widget_id`` and
  ``unbind_widget`` (a tour step sets a key bound to a control on screen);
- ``keep_undrawn_params``: the same binding calls and ``ctx.shared.widget_ids_this_run`` (a closed tab's values stay
  in the link);
- ``xsrf_token``: the format of Streamlit's XSRF cookie (the run quota's per-browser key);
- ``safe_plotly_lookups``: plotly's ``_plotly_utils.optional_imports.get_module``.
- ``cache_entry_sizes``: Streamlit's cache statistics providers (test tooling: tests/cache_sizes.py).
- ``prepared_figure``, ``prepared_spec``: plotly's ``convert_to_base64`` (with a fast path that follows its rules:
  ``plotlyjsShortTypes``, ``is_skipped_key``) and st.plotly_chart taking a BaseFigure's ``to_dict()`` unvalidated
  (a cached figure encoded once, sent as it is).

The first test keeps it that way (in tests/ too); the second pins the Streamlit behaviour the adapter relies on, so a
release that moves it fails here, by name (not only on a symptom in the tour tests).
"""
from __future__ import annotations

import re
from pathlib import Path

from streamlit.testing.v1 import AppTest

REPO = Path(__file__).resolve().parents[1]
ADAPTER = REPO / "relviz" / "app" / "internals.py"
#: A streamlit.runtime path, a _-prefixed Streamlit or plotly name, Streamlit's own cookie or a private
#: attribute of st / a QueryParams object.
INTERNAL = re.compile(r"streamlit\.runtime|_plotly_utils|(?<!\w)_streamlit_\w+|\bst\._\w+|\bqp\._\w+|"
                      r"PagesManager|get_script_run_ctx|get_session_state")


def test_only_the_adapter_names_a_streamlit_or_plotly_internal():
    """The app, the library and the tests' own tooling; this file alone is left out (it pins what the adapter
    relies on, so it names the same internals)."""
    sources = [REPO / "app.py", *sorted((REPO / "pages").glob("*.py")), *sorted((REPO / "relviz").rglob("*.py")),
               *sorted((REPO / "tests").glob("*.py"))]
    found = [f"{path.relative_to(REPO)}:{n}: {line.strip()[:100]}"
             for path in sources if path not in (ADAPTER, Path(__file__).resolve())
             for n, line in enumerate(path.read_text().splitlines(), start=1) if INTERNAL.search(line)]
    assert sources and not found, "\n".join(found)
    assert INTERNAL.search(ADAPTER.read_text())  # the pattern does find what the adapter holds
    assert INTERNAL.search('cookies.get("_streamlit_xsrf")') and not INTERNAL.search("is_a_streamlit_option")


SCRIPT = '''
import streamlit as st
from streamlit.runtime.state.session_state_proxy import get_session_state

found = {}
value = st.slider("n", 0, 10, 2, key="x_n", bind="query-params")
with get_session_state().query_params() as qp:
    binding = qp.get_binding_for_param("x_n")
    found["binding_widget_id"] = binding.widget_id if binding is not None else None
try:
    st.query_params["x_n"] = "5"
    found["set_while_bound"] = "allowed"
except st.errors.StreamlitAPIException:
    found["set_while_bound"] = "refused"
from relviz.app.internals import release_url_bindings
release_url_bindings(["x_n", "absent"])
with get_session_state().query_params() as qp:
    found["bound_after_release"] = qp.get_binding_for_param("x_n") is not None
st.query_params["x_n"] = "5"  # what st.switch_page's query_params does for a tour step
found["value"] = value
st.session_state["found"] = found
'''


def test_the_url_binding_internals_behave_as_the_adapter_expects():
    at = AppTest.from_string(SCRIPT, default_timeout=30)
    at.query_params["x_n"] = "7"
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    found = at.session_state["found"]
    assert found["value"] == 7, found  # seeded from the link
    assert found["binding_widget_id"] and found["binding_widget_id"].endswith("x_n"), found
    assert found["set_while_bound"] == "refused", found  # why the adapter exists
    assert found["bound_after_release"] is False, found


PLOTLY_SCRIPT = '''
import copy
import numpy as np
import plotly.graph_objects as go
import streamlit as st
from relviz.app import display
from relviz.figures.attention import attention_grid_parts

weights = np.random.default_rng(0).random((2, 3, 5, 5)).astype(np.float32)
data, layout = attention_grid_parts(weights)
st.plotly_chart(go.Figure({"data": copy.deepcopy(data), "layout": copy.deepcopy(layout)}), key="built")
st.plotly_chart(display.prepared(data, layout), key="prepared")
strip = go.Figure(go.Bar(x=[0, 1, 2], y=[1, 1, 1]), layout=dict(yaxis=dict(ticktext=["a"], tickvals=[0]))).to_dict()
strip["layout"]["shapes"] = [dict(type="rect", x0=0.5, x1=1.5, y0=0, y1=1, line=dict(color="#111", width=2))]
st.plotly_chart(copy.deepcopy(strip), key="dict")                       # a dict: Streamlit validates it
st.plotly_chart(display.prepared_spec(copy.deepcopy(strip)), key="spec")
'''


def test_a_prepared_figure_is_sent_as_the_figure_plotly_would_send():
    """relviz.app.internals.prepared_figure / prepared_spec rely on st.plotly_chart taking a BaseFigure's to_dict()
    as it is: the JSON sent equals that of the go.Figure built (and validated) from the same dicts, and that of
    the plain dict Streamlit validates itself."""
    import json

    at = AppTest.from_string(PLOTLY_SCRIPT, default_timeout=30)
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    charts = at.get("plotly_chart")
    sent = [json.loads(chart.proto.spec) for chart in charts]
    assert len(sent) == 4, len(sent)
    assert sent[1] == sent[0] and sent[0]["layout"]["template"], "a prepared figure differs from go.Figure's"
    assert sent[3] == sent[2] and sent[2]["layout"]["shapes"], "a prepared spec differs from the validated dict"


def test_the_fast_array_encoding_is_plotlys():
    """internals._convert_to_base64 (prepared_figure's) gives what plotly's convert_to_base64 gives, for every kind of
    value a figure's dicts may hold: each int64 range (narrowed to int8/16/32, or left alone), uint64, float32/64,
    2-D and non-contiguous arrays, a big-endian one, bool, strings, empty and 0-d arrays, arrays in lists and tuples
    (plotly leaves those), under a skipped key ('range'), and a list of numbers; its tables are still plotly's."""
    import copy

    import numpy as np
    from _plotly_utils.utils import convert_to_base64, is_skipped_key, plotlyjsShortTypes

    from relviz.app import internals

    assert internals._SHORT_TYPES == plotlyjsShortTypes
    assert all(is_skipped_key(k) for k in internals._SKIPPED_KEYS) and not is_skipped_key("z")
    grid = np.arange(12, dtype=np.float64).reshape(3, 4)
    values = {f"int64_{n}": np.array([-n, n], dtype=np.int64) for n in (5, 300, 70_000, 2**40)}
    values |= {f"uint64_{n}": np.array([0, n], dtype=np.uint64) for n in (5, 300, 70_000, 2**40)}
    values |= {"f4": grid.astype(np.float32), "f8": grid, "columns": grid[:, 1::2], "fortran": np.asfortranarray(grid),
               "big_endian": grid.astype(">f8"), "bool": np.array([True, False]), "text": np.array(["a", "b"]),
               "empty": np.zeros(0), "scalar_array": np.array(3.5), "numpy_scalar": np.float32(2.0),
               "in_list": [np.arange(3), {"z": np.arange(3, dtype=np.int64)}], "in_tuple": (np.arange(2),),
               "range": np.arange(2), "numbers": [1, 2.5, "x", None, True], "nested": {"range": [np.arange(2)]}}
    theirs, ours = {"data": [copy.deepcopy(values)]}, {"data": [copy.deepcopy(values)]}
    convert_to_base64(theirs)
    internals._convert_to_base64(ours)

    def same(a, b) -> bool:
        if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
            return type(a) is type(b) and a.dtype == b.dtype and a.shape == b.shape and np.array_equal(a, b)
        if isinstance(a, dict):
            return isinstance(b, dict) and a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
        if isinstance(a, (list, tuple)):
            return type(a) is type(b) and len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
        return type(a) is type(b) and a == b

    for key in values:
        assert same(ours["data"][0][key], theirs["data"][0][key]), key
    assert isinstance(ours["data"][0]["int64_300"], dict) and ours["data"][0]["int64_300"]["dtype"] == "i2"


KEEP_SCRIPT = '''
import streamlit as st
from relviz.app.internals import keep_undrawn_params

if st.session_state.get("draw", True):
    st.slider("n", 0, 10, 2, key="y_n", bind="query-params")
st.slider("m", 0, 10, 2, key="y_m", bind="query-params")
st.session_state["kept"] = keep_undrawn_params(["y_n", "y_m", "absent"])
'''


def test_a_control_not_drawn_keeps_its_link_value_only_when_released():
    """keep_undrawn_params: ctx.shared.widget_ids_this_run tells a control drawn this run (y_m keeps its binding)
    from one not drawn (y_n, released); Streamlit's end-of-run clean-up deletes a bound, undrawn key from the URL."""
    at = AppTest.from_string(KEEP_SCRIPT, default_timeout=30)
    at.query_params["y_n"], at.query_params["y_m"] = "7", "8"
    at.run()
    assert at.session_state["kept"] == []       # both drawn: both stay bound
    at.session_state["draw"] = False
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    assert at.session_state["kept"] == ["y_n"]
    assert at.query_params.get("y_n") == ["7"] or at.query_params.get("y_n") == "7", dict(at.query_params)
    assert at.session_state["y_n"] == 7         # the session keeps the value (what a reopened tab draws)
