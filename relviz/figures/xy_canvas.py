"""Bars, lines and ranges against x, in panels side by side, described for the browser to draw.

Why: Streamlit's element id for a plotly chart includes its spec, so a slider that changes a plotly figure mounts
a new chart, which plotly.js draws from scratch: the Absolute page's shift figure (512 bars, a 1,023-point line
and 1,023 markers with their min … max bars, ~2,500 SVG elements) took 100-400 ms in Chromium on each move.
relviz/components/xy_canvas.js draws an :class:`XYImage` on a canvas, in place, and computes the hover there.
Arrays travel as plotly sends them ({"dtype", "bdata"}: base64 of the little-endian bytes, float64 kept float64),
so a test reads both with the same decoder and compares them bit for bit with the plotly twin's.
"""
from __future__ import annotations

import base64
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from relviz.figures.heatmap import READABLE_FONT

#: plotly's typed-array names for the dtypes the canvas reads.
_DTYPES = {np.dtype("float64"): "f8", np.dtype("float32"): "f4", np.dtype("int32"): "i4"}
#: What a trace may draw (the component's three ways of drawing a series).
TRACE_KINDS = ("bar", "line", "markers")
#: Subplot titles, as the plotly twins write them (figure.update_annotations(font_size=16)).
PANEL_TITLE_PX = 16


def typed_array(values: np.ndarray) -> dict:
    """``values`` as plotly's typed-array JSON: float64 and float32 as they are, integers as int32 (every x here is a
    position or an offset, far below 2^31)."""
    values = np.asarray(values)
    if np.issubdtype(values.dtype, np.integer):
        if values.size and (values.min() < -2**31 or values.max() >= 2**31):
            raise ValueError("typed_array: integers must fit int32")
        values = values.astype(np.int32)
    dtype = _DTYPES.get(values.dtype)
    if dtype is None:
        raise ValueError(f"typed_array: values must be float64, float32 or integers; got {values.dtype}")
    data = np.ascontiguousarray(values, dtype=values.dtype.newbyteorder("<"))
    return {"dtype": dtype, "bdata": base64.b64encode(data.tobytes()).decode("ascii")}


@dataclass(frozen=True)
class XYTrace:
    """One series: ``kind`` "bar" (a bar from 0 to y at each x), "line" or "markers" (a dot at each (x, y), with
    ``below``/``above``: a bar from y − below to y + above, plotly's error_y arrayminus/array)."""

    kind: str
    x: np.ndarray
    y: np.ndarray
    colour: str
    name: str
    hover: tuple[str, ...]                 # lines: {x}, {y} or {y:.4f} (a d3 fixed-point format, as plotly's)
    size: float = 2.0                      # line width or marker diameter (px)
    below: np.ndarray | None = None
    above: np.ndarray | None = None

    def payload(self) -> dict:
        out = {"kind": self.kind, "x": typed_array(self.x), "y": typed_array(self.y), "colour": self.colour,
               "name": self.name, "hover": list(self.hover), "size": self.size}
        if self.below is not None:
            out["below"], out["above"] = typed_array(self.below), typed_array(self.above)
        return out


@dataclass(frozen=True)
class XYPanel:
    """One panel: its share of the width, titles, and whether its y axis starts at 0 (plotly's rangemode tozero)."""

    traces: tuple[XYTrace, ...]
    share: float
    title: str = ""
    x_title: str = ""
    y_title: str = ""
    y_from_zero: bool = False

    def payload(self) -> dict:
        return {"traces": [t.payload() for t in self.traces], "share": self.share, "title": self.title,
                "x_title": self.x_title, "y_title": self.y_title, "y_from_zero": self.y_from_zero}


@dataclass(frozen=True)
class XYImage:
    """Panels side by side and one legend under them (every trace, in order), for the canvas component's kind
    "xy"; ``height``: the panels' height in px, the legend's rows below it."""

    panels: tuple[XYPanel, ...]
    height: int = 420
    title: str = ""

    def payload(self) -> dict:
        return {"kind": "xy", "panels": [p.payload() for p in self.panels], "height": self.height,
                "title": self.title, "font": READABLE_FONT, "panel_title_font": PANEL_TITLE_PX}


def xy_image(panels: Sequence[XYPanel], *, height: int = 420, title: str = "") -> XYImage:
    """An :class:`XYImage`; ValueError when a panel's arrays disagree in length or its shares do not add to 1."""
    for panel in panels:
        for t in panel.traces:
            sizes = {len(t.x), len(t.y)} | ({len(t.below), len(t.above)} if t.below is not None else set())
            if len(sizes) != 1:
                raise ValueError(f"xy_image: trace {t.name!r} has arrays of lengths {sorted(sizes)}; must be equal")
            if t.kind not in TRACE_KINDS:
                raise ValueError(f"xy_image: a trace's kind must be one of {', '.join(TRACE_KINDS)}; got {t.kind!r}")
    if abs(sum(p.share for p in panels) - 1) > 1e-9:
        raise ValueError("xy_image: the panels' shares must add up to 1")
    return XYImage(tuple(panels), height, title)
