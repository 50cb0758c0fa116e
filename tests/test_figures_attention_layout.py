"""Live attention figures stay legible with 6 layers and at 1280 px: no side-by-side squeeze of six
panels (titles and labels overlapped), legends below the plot (at the top right they covered the title)."""
from __future__ import annotations

import numpy as np
import pytest

from relviz.figures.attention import offset_profile_figure
from relviz.inspection import OffsetProfile


def _profile(layers: int, heads: int = 4, length: int = 32) -> OffsetProfile:
    offsets = np.arange(-(length - 1), length)
    mean = np.random.default_rng(0).random((layers, heads, 2 * length - 1))
    return OffsetProfile(offsets=offsets, mean=mean, counts=length - np.abs(offsets))


@pytest.mark.parametrize("layers", [1, 2, 6])
def test_profile_panels_are_wide_enough_and_the_legend_sits_below(layers):
    figure = offset_profile_figure(_profile(layers), causal=True, answer_offset=-5, validate=True)
    layout = figure.to_plotly_json()["layout"]
    xaxes = [v for k, v in layout.items() if k.startswith("xaxis")]
    assert len(xaxes) == layers
    for axis in xaxes:
        assert axis["domain"][1] - axis["domain"][0] >= 0.25  # at most three panels side by side
        title = (axis.get("title") or {}).get("text") or ""
        assert len(title) <= 8  # "j − i" only; the layer names sit above each panel
    panel_titles = [a["text"] for a in layout["annotations"] if a["text"].startswith("layer")]
    assert panel_titles == [f"layer {n}" for n in range(1, layers + 1)]
    assert layout["legend"]["y"] < 0  # below the plot, never over the title
    answers = [a for a in layout["annotations"] if "answer" in a["text"]]
    assert len(answers) == 1  # once, not in every narrow panel
