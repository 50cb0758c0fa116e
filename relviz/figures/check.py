"""The check-my-implementation picture: which cells of an uploaded matrix differ from the reference."""
from __future__ import annotations

import numpy as np
import plotly.graph_objects as go

from relviz.figures.heatmap import KEY_AXIS, QUERY_AXIS

#: Cell states, drawn in these colours: equal, different, not compared (the masked triangle).
STATES = ("matches", "differs", "not compared")
COLOURS = ("#dfe9f3", "#d62728", "#ffffff")


def diff_heatmap(expected: np.ndarray, got: np.ndarray, mismatch: np.ndarray, compared: np.ndarray, *,
                 q_offset: int = 0, title: str = "", height: int = 460, third: np.ndarray | None = None,
                 labels: tuple[str, str, str] = ("i", "j", "j − i"),
                 axes: tuple[str, str] = (QUERY_AXIS, KEY_AXIS)) -> go.Figure:
    """Red where the upload differs from the reference, pale blue where it matches, white where the
    check ignores the cell; hover on every cell gives its row, column, ``third`` (default j − i − q_offset;
    a RoPE cache: the column's frequency pair), expected and got, named by ``labels``."""
    expected, got = np.atleast_2d(expected), np.atleast_2d(got)
    mismatch, compared = np.atleast_2d(mismatch), np.atleast_2d(compared)
    rows, cols = got.shape
    state = np.where(~compared, 2, np.where(mismatch, 1, 0)).astype(np.uint8)
    offset = ((np.arange(cols)[None, :] - np.arange(rows)[:, None] - q_offset) if third is None
              else np.atleast_2d(third)).astype(np.float32)
    custom = np.stack([np.broadcast_to(offset, got.shape), expected.astype(np.float32), got.astype(np.float32)],
                      axis=-1)
    scale = []
    for k, colour in enumerate(COLOURS):
        scale += [[k / 3, colour], [(k + 1) / 3, colour]]
    trace = go.Heatmap(
        z=state, customdata=custom, zmin=-0.5, zmax=2.5, colorscale=scale, xgap=1 if cols <= 64 else 0,
        ygap=1 if rows <= 64 else 0,
        colorbar=dict(tickvals=[0, 1, 2], ticktext=list(STATES), thickness=14, len=0.6),
        hovertemplate=(f"{labels[0]} = %{{y}}<br>{labels[1]} = %{{x}}<br>{labels[2]} = %{{customdata[0]}}"
                       "<br>expected = %{customdata[1]:.6g}<br>got = %{customdata[2]:.6g}<extra></extra>"))
    figure = go.Figure(trace)
    figure.update_layout(
        height=height, margin=dict(l=60, r=10, t=40 if title else 10, b=50),
        title=dict(text=title) if title else None,
        xaxis=dict(title=dict(text=axes[1]), constrain="domain"),
        yaxis=dict(title=dict(text=axes[0]), autorange="reversed"),
        font=dict(size=14))
    return figure
