"""Plotly figure builders. Pages call these; they hold no Streamlit code."""
from relviz._lazy import lazy_exports

__all__, __getattr__, __dir__ = lazy_exports(__name__, {
    "heatmap": ("KEY_AXIS", "QUERY_AXIS", "compact_ints", "discrete_colorscale", "matrix_heatmap"),
})
