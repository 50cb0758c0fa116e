"""Plotly figure builders. Pages call these; they hold no Streamlit code."""
from relviz.figures.heatmap import KEY_AXIS, QUERY_AXIS, compact_ints, discrete_colorscale, matrix_heatmap

__all__ = ["KEY_AXIS", "QUERY_AXIS", "compact_ints", "discrete_colorscale", "matrix_heatmap"]
