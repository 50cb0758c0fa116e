"""How a Toeplitz window's values become colours: at most 256 levels of a plotly colour scale.

Discrete values (indices, buckets) get one exact band each; continuous values 256 levels over
their range. The same palettes colour a plotly image trace (a palette PNG) and the browser's
canvas (relviz.figures.toeplitz_canvas), so both draw the same picture.
"""
from __future__ import annotations

import base64
import functools
import io
from collections.abc import Sequence

import numpy as np
import plotly.colors

from relviz._words import minus
from relviz.figures.heatmap import DISCRETE_PALETTE, _tick_step, discrete_colorscale


def hex_palette(colours: Sequence[tuple[int, int, int]]) -> str:
    """Colours as one string of 6-digit hex triples (the compact form the canvas component reads)."""
    return "".join(f"{r:02x}{g:02x}{b:02x}" for r, g, b in colours)


def continuous_range(values: np.ndarray, zmid: float | None) -> tuple[float, float]:
    """The colour range of continuous values: their min and max, made symmetric about ``zmid`` if given."""
    zmin, zmax = (float(values.min()), float(values.max())) if values.size else (0.0, 1.0)
    if zmid is not None:
        half = max(zmax - zmid, zmid - zmin)
        zmin, zmax = zmid - half, zmid + half
    return zmin, zmax


def palette_256(colorscale: str | Sequence) -> list[tuple[int, int, int]]:
    """256 colours sampled evenly along a plotly colour scale (a name or [[fraction, colour], ...])."""
    key = colorscale if isinstance(colorscale, str) else tuple((float(f), str(c)) for f, c in colorscale)
    return list(_sampled_palette(key))


@functools.lru_cache(maxsize=32)
def _sampled_palette(colorscale: str | tuple) -> tuple[tuple[int, int, int], ...]:
    """:func:`palette_256`, cached: plotly's sampling takes ~10-40 ms, a slider move pays it otherwise."""
    scale = plotly.colors.get_colorscale(colorscale) if isinstance(colorscale, str) else colorscale
    return tuple(_rgb(c) for c in plotly.colors.sample_colorscale([list(p) for p in scale],
                                                                  list(np.linspace(0.0, 1.0, 256))))


def band_colours(scale: Sequence, count: int) -> list[tuple[int, int, int]]:
    """The solid colour of each band of a discrete_colorscale of ``count`` values (the PNG's palette)."""
    return [_rgb(scale[2 * v][1]) for v in range(count)] if count > 1 else [_rgb(scale[0][1])]


def levels_256(values: np.ndarray, zmin: float, zmax: float) -> np.ndarray:
    """Continuous values as 256 colour levels over [zmin, zmax]: round((value − zmin) / (zmax − zmin) · 255)."""
    span = zmax - zmin
    levels = np.rint((values.astype(np.float64) - zmin) / span * 255) if span > 0 else np.zeros(values.shape)
    return np.clip(levels, 0, 255).astype(np.uint8)


def image_colours(strip: np.ndarray, discrete_range: tuple[int, int] | None, colorscale: str | list,
                   zmid: float | None) -> tuple[np.ndarray, list[tuple[int, int, int]], dict] | None:
    """(colour index per offset, palette, colour-bar description), as :func:`_image_figure` colours a
    window; None when a discrete range needs more than 256 colours."""
    if discrete_range is not None:
        lo, hi = discrete_range
        count = hi - lo + 1
        if count > 256:
            return None
        palette_name = colorscale if isinstance(colorscale, str) else DISCRETE_PALETTE
        palette = band_colours(discrete_colorscale(count, palette_name), count)
        step = _tick_step(count - 1)
        ticks = [v for v in range(lo, hi + 1) if v % step == 0]  # round numbers of the true values
        colour = {"kind": "discrete", "lo": int(lo), "hi": int(hi), "tickvals": ticks,
                  "ticktext": [minus(v) for v in ticks]}
        return (strip.astype(np.int64) - lo).astype(np.uint8), palette, colour
    zmin, zmax = continuous_range(strip, zmid)
    return levels_256(strip, zmin, zmax), palette_256(colorscale), {"kind": "continuous", "zmin": zmin, "zmax": zmax}


def _rgb(colour: str) -> tuple[int, int, int]:
    """'#rrggbb' or 'rgb(r, g, b)' (plotly's two spellings) as three 0..255 integers."""
    if colour.startswith("#"):
        return plotly.colors.hex_to_rgb(colour)
    return tuple(int(round(float(c))) for c in plotly.colors.unlabel_rgb(colour))


def palette_png(indices: np.ndarray, palette: list[tuple[int, int, int]]) -> str:
    """A palette PNG (one byte per cell, lossless) as a data URI."""
    from PIL import Image

    rows, cols = indices.shape
    picture = Image.frombytes("P", (cols, rows), np.ascontiguousarray(indices, dtype=np.uint8).tobytes())
    picture.putpalette([channel for colour in palette for channel in colour])
    out = io.BytesIO()
    picture.save(out, format="PNG", compress_level=6)
    return "data:image/png;base64," + base64.b64encode(out.getvalue()).decode("ascii")


def decode_image_indices(source: str) -> np.ndarray:
    """The palette indices of an image trace's ``source`` PNG, [rows, cols] (tests and downloads)."""
    from PIL import Image

    data = base64.b64decode(source.split(",", 1)[1])
    picture = Image.open(io.BytesIO(data))
    if picture.mode != "P":
        raise ValueError(f"source must be a palette PNG; got mode {picture.mode}")
    return np.asarray(picture)
