"""Heatmaps of labelled rows × labelled columns in panels, with a mark in chosen cells, described for the browser to
draw (relviz/components/grid_canvas.js, through relviz.app.display.show_grid_panels).

Why: a changed plotly figure is a new chart to Streamlit's frontend (its element id includes the spec), which
plotly.js mounts and draws from scratch. The Experiments page's threshold changes only the ✓ marks of its overview,
and that redraw was most of a move in the browser; the canvas redraws the same element in place. The builder that
fills it (relviz.figures.experiments.offset_overview_canvas) takes the values and hover texts its plotly twin shows
(tests compare the two).
"""
from __future__ import annotations

import base64
from dataclasses import dataclass

import numpy as np

from relviz.figures.heatmap import READABLE_FONT, READABLE_TITLE
from relviz.figures.toeplitz_colours import hex_palette, levels_256, palette_256


@dataclass(frozen=True)
class GridPanel:
    """One panel: its column labels, its [rows, cols] values, the cells that carry the mark, each cell's hover."""

    title: str
    columns: tuple[str, ...]
    values: np.ndarray                    # [rows, cols] the values shown (their colour)
    marks: np.ndarray                     # [rows, cols] bool: the cells that carry the mark
    hover: tuple[tuple[str, ...], ...]    # each cell's hover lines, row-major
    x_title: str = ""


@dataclass(frozen=True)
class GridPanels:
    """Panels side by side that share their row labels and one continuous colour scale over [zmin, zmax]."""

    rows: tuple[str, ...]
    panels: tuple[GridPanel, ...]
    zmin: float
    zmax: float
    colour_title: str
    tickvals: tuple[float, ...]
    ticktext: tuple[str, ...]
    colorscale: str = "Viridis"
    mark: str = "✓"
    title: str = ""
    height: int = 380
    name: str = "relviz"

    def __post_init__(self) -> None:
        for panel in self.panels:
            shape = (len(self.rows), len(panel.columns))
            if panel.values.shape != shape or panel.marks.shape != shape or len(panel.hover) != shape[0] * shape[1]:
                raise ValueError(f"panel {panel.title!r}: values, marks and hover must cover {shape[0]} rows × "
                                 f"{shape[1]} columns; got values {panel.values.shape}, marks {panel.marks.shape}, "
                                 f"{len(panel.hover)} hover texts")

    def payload(self) -> dict:
        """The JSON the component reads: a colour level (0-255 over [zmin, zmax]) and a mark flag per cell, base64."""
        def b64(array: np.ndarray) -> str:
            return base64.b64encode(np.ascontiguousarray(array, dtype=np.uint8).tobytes()).decode("ascii")

        return {
            "kind": "grid_panels", "rows": list(self.rows), "title": self.title, "height": self.height,
            "palette": hex_palette(palette_256(self.colorscale)), "mark": self.mark, "name": self.name,
            "colour": {"zmin": self.zmin, "zmax": self.zmax, "tickvals": list(self.tickvals),
                       "ticktext": list(self.ticktext), "title": self.colour_title},
            "panels": [{"title": p.title, "columns": list(p.columns), "x_title": p.x_title,
                        "levels": b64(levels_256(p.values, self.zmin, self.zmax)), "marks": b64(p.marks),
                        "hover": [list(lines) for lines in p.hover]} for p in self.panels],
            "font": READABLE_FONT, "title_font": READABLE_TITLE,
        }
