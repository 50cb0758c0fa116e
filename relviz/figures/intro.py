"""The landing page's picture: j − i for a short sentence, every cell labelled, one query row outlined.

Built from plain lists (49 cells for seven tokens) through the shared heatmap helpers, so the landing
page imports no numpy: a fresh server's first visitor would otherwise wait for that import (~0.2 s).
Nothing here imports streamlit.
"""
from __future__ import annotations

import plotly.graph_objects as go

from relviz._words import signed
from relviz.figures.heatmap import discrete_colour_args, heatmap_figure, readable


@readable
def relative_intro_figure(tokens: list[str], *, query: int, height: int = 400) -> go.Figure:
    """The landing page's picture: j − i for a short sentence, every cell labelled, one query row outlined."""
    n = len(tokens)
    rel = [[j - i for j in range(n)] for i in range(n)]  # [i][j] = j − i
    lo = -(n - 1)
    trace = dict(
        type="heatmap", z=[[offset - lo for offset in row] for row in rel],  # discrete colours start at 0
        x=list(range(n)), y=list(range(n)),
        hovertemplate="i = %{y}<br>j = %{x}<br>j − i = %{customdata[0]}<extra></extra>",
        customdata=[[[offset] for offset in row] for row in rel],
        text=[[signed(offset) for offset in row] for row in rel], texttemplate="%{text}",
        textfont=dict(size=15), **discrete_colour_args((lo, n - 1), "PuOr", "j − i"))
    figure = heatmap_figure(trace, height=height)
    ticks = [f"{k}: {t}" for k, t in enumerate(tokens)]
    figure.update_xaxes(tickvals=list(range(n)), ticktext=ticks, side="top", title_text="key j",
                        tickfont=dict(size=13))
    figure.update_yaxes(tickvals=list(range(n)), ticktext=ticks, title_text="query i", tickfont=dict(size=13))
    # The outline is a trace, not a layout shape, so moving the query changes the figure's data.
    figure.add_trace(go.Scatter(
        x=[-0.5, n - 0.5, n - 0.5, -0.5, -0.5], y=[query - 0.5, query - 0.5, query + 0.5, query + 0.5, query - 0.5],
        mode="lines", line=dict(color="black", width=3), hoverinfo="skip", showlegend=False, name="query row"))
    figure.update_layout(margin=dict(l=80, r=10, t=60, b=10))
    figure.data[0].update(xgap=1, ygap=1, showscale=False)  # every cell carries its number
    return figure
