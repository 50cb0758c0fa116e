"""Several finished figures as the panels of one figure (for a notebook or a paper).

The app lays figures side by side with page columns; a notebook or a PDF wants one figure.
``panel_grid`` copies each panel's traces, axis settings, shapes and annotations into one
``make_subplots`` grid, remapping axis references (``x`` -> ``x3``, ``scaleanchor``...), so the
panels keep exactly the data and look the builders gave them.
"""
from __future__ import annotations

import math
from collections.abc import Sequence

import plotly.graph_objects as go
from plotly.subplots import make_subplots

#: Axis properties that place an axis in the grid: the grid sets them, not the panel.
_PLACEMENT = {"domain", "anchor", "position", "overlaying", "matches"}


def _remap(ref: str, axes: dict[str, str]) -> str:
    """'x' -> 'x3', 'x domain' -> 'x3 domain'; 'paper' and unknown refs stay."""
    name, _, rest = ref.partition(" ")
    return axes.get(name, name) + (f" {rest}" if rest else "")


def panel_grid(panels: Sequence[tuple[str, go.Figure]], *, cols: int, row_height: int | None = None,
               horizontal_spacing: float = 0.06, vertical_spacing: float = 0.12) -> go.Figure:
    """One figure with ``panels`` (title, single-axes figure) in a grid of ``cols`` columns.

    Only the first panel's colour bars are kept (a grid of panels shares one colour range, as the
    skew steps do); the height is the tallest panel of each row, summed (or ``row_height`` per row).
    """
    if not panels:
        raise ValueError("panels must hold at least one (title, figure)")
    cols = max(1, min(int(cols), len(panels)))
    rows = math.ceil(len(panels) / cols)
    grid = make_subplots(rows=rows, cols=cols, subplot_titles=[title for title, _ in panels],
                         horizontal_spacing=horizontal_spacing, vertical_spacing=vertical_spacing)
    heights = [0] * rows
    for n, (_, panel) in enumerate(panels):
        row, col = divmod(n, cols)
        subplot = grid.get_subplot(row + 1, col + 1)
        x_name, y_name = subplot.xaxis.plotly_name, subplot.yaxis.plotly_name  # "xaxis3", "yaxis3"
        axes = {"x": x_name.replace("axis", ""), "y": y_name.replace("axis", "")}
        for trace in panel.data:
            if n > 0 and "showscale" in trace:
                trace = go.Figure(trace).data[0]  # a copy: the panel's own figure stays as built
                trace.showscale = False
            grid.add_trace(trace, row=row + 1, col=col + 1)
        layout = panel.layout
        for source, target in ((layout.xaxis, x_name), (layout.yaxis, y_name)):
            settings = {k: v for k, v in source.to_plotly_json().items() if k not in _PLACEMENT}
            if "scaleanchor" in settings:
                settings["scaleanchor"] = _remap(settings["scaleanchor"], axes)
            grid.layout[target].update(settings)
        for shape in layout.shapes or ():
            shape = shape.to_plotly_json()
            shape.update({k: _remap(shape[k], axes) for k in ("xref", "yref") if k in shape})
            grid.add_shape(shape)
        for note in layout.annotations or ():
            note = note.to_plotly_json()
            note.update({k: _remap(note[k], axes) for k in ("xref", "yref") if k in note})
            grid.add_annotation(note)
        heights[row] = max(heights[row], row_height or layout.height or 400)
    grid.update_layout(height=sum(heights) + 40 * rows, showlegend=False,
                       plot_bgcolor=panels[0][1].layout.plot_bgcolor,
                       margin=dict(l=50, r=20, t=60, b=45))
    return grid
