"""The one adapter where the app reaches below Streamlit's and plotly's public API (issue 23).

Everything else in relviz and pages/ uses public API only. Each piece below names the internal it
uses, why no public route does the job (tried: see each docstring), and what would replace it.
tests/test_streamlit_internals.py pins the Streamlit behaviour these rely on, by name, so a Streamlit
release that moves them fails there. Imported only by relviz.app's page-support modules (navigation, quotas,
lecture_mode, display, links) and by test tooling (tests/cache_sizes.py, tests/test_config.py); never by the library.
"""
from __future__ import annotations

import sys
from collections.abc import Callable, Iterable

#: Streamlit's XSRF cookie (set by its server on the first visit when server.enableXsrfProtection is on).
XSRF_COOKIE = "_streamlit_xsrf"


def release_url_bindings(keys: Iterable[str]) -> None:
    """Unbind the controls on screen that hold ``keys`` in the URL, so st.switch_page may set them.

    Internal: ``QueryParams.get_binding_for_param(key).widget_id`` and ``unbind_widget`` (through
    ``streamlit.runtime.state.session_state_proxy.get_session_state``). Why: a control stays bound to
    its key until the next run, and st.switch_page(query_params=...) refuses a bound key; a tour step
    on the page already on screen sets exactly such keys. Tried (Streamlit 1.67): passing those keys
    through st.session_state and the rest through query_params works in AppTest and in one browser
    test, but in tests/test_browser_tools.py::test_the_presenter_view_follows_the_tour_in_a_second_tab
    the address bar kept the old step's URL (Streamlit's sync of a programmatic value to the URL did
    not fire). Looked again (issue 23, Streamlit 1.67 and its docs): no public call releases a binding;
    Streamlit drops a control's binding only when a run completes without drawing it, and a run that ends
    in st.rerun or st.switch_page skips that clean-up, so no sequence of public calls frees the key within
    the click. Replace with: a public way to release or override a URL binding in st.switch_page.
    """
    from streamlit.runtime.state.session_state_proxy import get_session_state

    with get_session_state().query_params() as qp:
        for key in keys:
            binding = qp.get_binding_for_param(key)
            if binding is not None:
                qp.unbind_widget(binding.widget_id)


def keep_undrawn_params(keys: Iterable[str]) -> list[str]:
    """Of ``keys``, those bound to a control this run did not draw: release their URL bindings, so their values
    stay in the URL after the run. Returns the keys released. Call once every control of the run is drawn.

    Internal: ``ctx.shared.widget_ids_this_run`` (through ``get_script_run_ctx``), and the QueryParams binding
    calls of :func:`release_url_bindings`. Why: st.tabs runs only the open tab's code (``tab.open``), and at the end
    of a run Streamlit deletes from the URL every bound key whose control was not drawn
    (``QueryParams.remove_stale_bindings``), while the session keeps its value; so a link copied on T5's Precision
    tab lost the window (t5_ws, t5_r0, t5_c0) that the Buckets tab shows, and opened on another one. A key the run
    did draw (the window controls of T5's Compare tab) keeps its binding. No public call keeps a closed tab's value
    in the URL; setting it through st.query_params is refused while the key is bound. Replace with: a Streamlit
    that keeps a lazily run tab's bound values in the URL.
    """
    from streamlit.runtime.scriptrunner_utils.script_run_context import get_script_run_ctx
    from streamlit.runtime.state.session_state_proxy import get_session_state

    ctx = get_script_run_ctx()
    if ctx is None:
        return []
    released = []
    with get_session_state().query_params() as qp:
        for key in keys:
            binding = qp.get_binding_for_param(key)
            if binding is not None and binding.widget_id not in ctx.shared.widget_ids_this_run:
                qp.unbind_widget(binding.widget_id)
                released.append(key)
    return released


def xsrf_token(cookie: str) -> str:
    """The token inside Streamlit's XSRF cookie (read through the public st.context.cookies).

    Internal: the cookie's format, "2|mask|token xor mask|time" (re-masked on every page load; the
    token under the mask stays the same for the browser). Why: the run quota needs a per-browser key
    that survives a reload and a new tab; Streamlit offers no way to set a cookie of the app's own,
    and st.context.ip_address alone would make a class behind one NAT one visitor. An unknown format
    is returned as it is (then every load is a new visitor; the address budget still holds).
    Replace with: an app cookie set through a public Streamlit API, once one exists.
    """
    parts = cookie.strip("\"'").split("|")
    try:
        if len(parts) == 4 and parts[0] == "2":
            mask, masked = bytes.fromhex(parts[1]), bytes.fromhex(parts[2])
            if mask:
                return bytes(byte ^ mask[i % len(mask)] for i, byte in enumerate(masked)).hex()
    except ValueError:
        pass
    return cookie


_PLOTLY_GET_MODULE: Callable | None = None  # plotly's own lookup, once safe_plotly_lookups replaced it


def _complete_module(name: str, should_load: bool = True):
    """plotly's optional-import lookup (``_plotly_utils.optional_imports.get_module``), except that a
    module another thread is still importing counts as absent: Python marks it with
    ``__spec__._initializing`` (the flag behind its "partially initialized module" error)."""
    if should_load:
        return _PLOTLY_GET_MODULE(name, should_load)
    module = sys.modules.get(name)
    return None if getattr(getattr(module, "__spec__", None), "_initializing", False) else module


def safe_plotly_lookups() -> None:
    """Point every loaded plotly module's ``get_module`` at ``_complete_module`` (app start-up only).

    Internal: plotly's ``_plotly_utils.optional_imports.get_module``. Why: plotly looks pandas and
    numpy up in sys.modules without importing them (``get_module("pandas", should_load=False)``); while
    one session's page is still importing pandas, another session's figure meets a half-initialised
    module ("partially initialized module 'pandas' has no attribute 'Series'"). The public route,
    importing numpy and pandas in app.py before any page runs, costs every fresh server's first
    visitor ~0.7 s (numpy 0.19-0.22 s + pandas 0.51-0.59 s measured here) on a landing page that uses
    neither (tests/test_cold_start.py keeps them out of the first page). Tried again (issue 23): having
    the modules that build plotly figures import numpy and pandas at their top (a thread importing a
    module that another thread is importing waits on its module lock until it is complete). That
    protects every page but the landing page, which draws a plotly figure too (the intro picture) and
    may not import either: a thread that builds a figure without having imported pandas still meets
    another thread's half-imported pandas (a script that builds go.Figure in a loop while a second
    thread imports pandas fails 3 runs in 3 with "partially initialized module 'pandas' has no
    attribute 'Series'", and passes 2 in 2 with this lookup). Measured on a fresh server, 4 alternating
    rounds, navigation to the first drawn chart: with numpy and pandas imported first the landing page took
    2.69 s (median) against 2.28 s without, the skew page 4.61 s against 4.60 s. Replace with: that import,
    if the first paint can afford it, or a plotly that imports what it inspects.
    """
    import _plotly_utils.optional_imports as optional_imports

    global _PLOTLY_GET_MODULE
    if _PLOTLY_GET_MODULE is not None:
        return
    _PLOTLY_GET_MODULE = optional_imports.get_module
    # optional_imports itself included: plotly modules imported later bind the safe lookup
    for name, module in list(sys.modules.items()):
        if name.partition(".")[0] in ("plotly", "_plotly_utils") and \
                getattr(module, "get_module", None) is _PLOTLY_GET_MODULE:
            module.get_module = _complete_module


def cache_entry_sizes() -> dict[tuple[str, str], list[int]]:
    """(kind, function name) -> the size in bytes of each entry the st.cache_data ("cache_data") and
    st.cache_resource ("cache_resource") caches of this process hold now. Test tooling only: the app never
    calls it.

    Internal: ``streamlit.runtime.caching``'s ``get_data_cache_stats_provider`` and
    ``get_resource_cache_stats_provider`` (what a server's /_stcore/metrics reports). Why:
    tests/cache_sizes.py sizes every cache's entries in one AppTest process, with no server to ask;
    Streamlit's public API clears caches (st.cache_data.clear()) but reads no sizes. Replace with: a
    public cache-statistics API, or reading /_stcore/metrics from a test server.
    """
    from streamlit.runtime.caching import get_data_cache_stats_provider, get_resource_cache_stats_provider

    out: dict[tuple[str, str], list[int]] = {}
    for provider in (get_data_cache_stats_provider(), get_resource_cache_stats_provider()):
        for stats in provider.get_stats().values():
            for stat in stats:
                kind = "cache_data" if stat.category_name == "st_cache_data" else "cache_resource"
                out.setdefault((kind, stat.cache_name.rsplit(".", 1)[-1]), []).append(stat.byte_length)
    return out


def prepared_figure(data: list[dict], layout: dict):
    """A figure st.plotly_chart sends exactly as given, from plain trace and layout dicts: its arrays encoded
    once, here, and the default template (Streamlit's) attached as a go.Figure would attach it; no
    go.Figure is built and nothing is validated or copied when it is drawn. For figures a page caches
    (cache_resource) and draws on every run; the dicts must be fixed by the code (tests compare the result
    with the validated go.Figure's JSON).

    Internal: ``_plotly_utils.utils.convert_to_base64`` (what ``Figure.to_dict`` does to numpy arrays), and
    that st.plotly_chart takes ``to_dict()`` of any ``plotly.basedatatypes.BaseFigure`` as validated
    (``plotly.tools.return_figure_from_figure_or_data``) and only reads the dict after. Why: st.plotly_chart
    validates a plain dict property by property, and for a go.Figure it deep-copies and re-encodes every array
    on every run; go.Figure itself, even with ``_validate=False``, builds plotly's object tree (Live attention's
    grid of 8 heatmaps and 16 axes: ~12 ms of a ~60 ms move). No public route hands Streamlit a figure
    already encoded. Replace with: a Streamlit API that takes a figure's JSON (or plotly's own pre-encoded
    figure type, if one comes).
    """
    import plotly.io as pio

    spec = {"data": data, "layout": layout}
    if "template" not in layout and pio.templates.default is not None:
        layout["template"] = _template(pio.templates.default)
    _convert_to_base64(spec)
    return prepared_spec(spec)


#: plotly's typed-array names (``_plotly_utils.utils.plotlyjsShortTypes``) and the keys its walk skips
#: (``is_skipped_key``); tests/test_streamlit_internals.py checks that both are still plotly's.
_SHORT_TYPES = {"int8": "i1", "uint8": "u1", "int16": "i2", "uint16": "u2", "int32": "i4", "uint32": "u4",
                "float32": "f4", "float64": "f8"}
_SKIPPED_KEYS = frozenset({"geojson", "layer", "layers", "range"})
_SCALARS = (str, int, float, bool, type(None))


def _convert_to_base64(obj) -> None:
    """``_plotly_utils.utils.convert_to_base64`` (what ``Figure.to_dict`` does to arrays), with a fast path: a
    plain numeric numpy array is encoded here by plotly's rules (int64 narrowed to the smallest int that holds
    it, base64 of the C-ordered bytes, the shape of a 2-D one), a Python scalar is passed over; anything else
    goes to plotly's own functions. plotly's walk asks numpy/pandas/narwhals about every value it meets and
    copies each array through narwhals: ~4 ms of a Live attention move's ~80 arrays.
    tests/test_figures_unvalidated.py compares the result with plotly's own, array by array."""
    from _plotly_utils.basevalidators import is_homogeneous_array
    from _plotly_utils.utils import to_typed_array_spec

    if isinstance(obj, dict):
        for key, value in obj.items():
            if isinstance(value, _SCALARS) or key in _SKIPPED_KEYS:
                continue
            encoded = _typed_array(value)
            if encoded is not None:
                obj[key] = encoded
            elif is_homogeneous_array(value):
                obj[key] = to_typed_array_spec(value)
            else:
                _convert_to_base64(value)
    elif isinstance(obj, (list, tuple)):
        for value in obj:
            if not isinstance(value, _SCALARS):
                _convert_to_base64(value)


def _typed_array(value) -> dict | None:
    """plotly's typed-array spec of a non-empty numeric numpy array in native byte order; None for anything else."""
    import base64

    import numpy as np

    if type(value) is not np.ndarray or value.size == 0 or not value.dtype.isnative:
        return None
    name = str(value.dtype)
    if name in ("int64", "uint64"):
        low, high = int(value.min()), int(value.max())
        for narrow in (("int8", "int16", "int32") if name == "int64" else ("uint8", "uint16", "uint32")):
            limits = np.iinfo(narrow)
            if limits.min <= low and high <= limits.max:
                value, name = value.astype(narrow), narrow
                break
        else:
            return None
    if name not in _SHORT_TYPES:
        return None
    spec = {"dtype": _SHORT_TYPES[name], "bdata": base64.b64encode(np.ascontiguousarray(value)).decode("ascii")}
    if value.ndim > 1:
        spec["shape"] = str(value.shape)[1:-1]
    return spec


_TEMPLATES: dict[str, dict] = {}


def _template(name: str) -> dict:
    """The named default template as a figure's dict holds it (shared, read-only: a spec is only serialised)."""
    if name not in _TEMPLATES:
        import plotly.graph_objects as go

        _TEMPLATES[name] = go.Figure().to_dict()["layout"].get("template", {})
    return _TEMPLATES[name]


def prepared_spec(spec: dict):
    """A figure dict that is already what plotly.js reads (``Figure.to_dict()``'s output, arrays encoded) as a
    figure st.plotly_chart sends unchanged (see :func:`prepared_figure`): a shallow-edited copy of a cached
    figure's dict (Your model's strip with another layer outlined) then costs no validation."""
    return _Prepared(spec)


def _prepared_class():
    from plotly.basedatatypes import BaseFigure

    class Prepared(BaseFigure):
        """Holds a ready figure dict; BaseFigure.__init__ is deliberately not run (no object tree)."""

        def __init__(self, spec: dict) -> None:  # noqa: super().__init__ is what this class avoids
            object.__setattr__(self, "_spec", spec)

        def to_dict(self) -> dict:
            return self._spec

        to_plotly_json = to_dict

        def __repr__(self) -> str:
            return f"prepared figure ({len(self._spec.get('data', []))} traces)"

    return Prepared


class _LazyPrepared:
    """Builds the BaseFigure subclass on first use, so importing this module does not import plotly."""

    cls = None

    def __call__(self, spec: dict):
        if _LazyPrepared.cls is None:
            _LazyPrepared.cls = _prepared_class()
        return _LazyPrepared.cls(spec)


_Prepared = _LazyPrepared()
