"""A skew step for the browser to draw: relviz's step canvas (relviz/components/step_canvas.js) draws the cells,
their labels, the pad, the hatched garbage, the dropped columns and the hover from this description.

Why: Streamlit's id of a plotly chart includes its spec, so every move of the Skew page's L mounted five new
charts that plotly.js drew from scratch (~60 % of the browser's work for a move, issue 34); the canvas component
redraws in place. The description is made from :func:`relviz.figures.skew.step_parts`, the plotly twin's own
traces and layout, so both show the same values, labels, hover and geometry (tests compare the two).
"""
from __future__ import annotations

import base64
import json

import numpy as np

from relviz.figures.heatmap import COLOUR_BAR_BELOW, READABLE_FONT
from relviz.figures.skew import DROPPED, GARBAGE, StepCells, step_parts
from relviz.figures.toeplitz_colours import hex_palette, levels_256, palette_256

#: A cell's look, one byte each: its colour hidden (NaN: the plot's background shows), the grey pad, hatched
#: garbage, the veiled columns about to be dropped, and a dark label (black; else white).
HIDDEN, PAD, HATCHED, VEILED, DARK_LABEL = 1, 2, 4, 8, 16

#: Black labels on cells lighter than this (relative luminance 0..1), white on darker ones: the rule the plotly
#: twin's garbage labels follow (relviz.figures.skew._contrast_colours).
LIGHT = 0.55


def _b64(array: np.ndarray, dtype: str) -> str:
    return base64.b64encode(np.ascontiguousarray(array, dtype=dtype).tobytes()).decode("ascii")


def step_payload(cells: StepCells, *, name: str = "skew_step", **options) -> dict:
    """The JSON the step canvas reads for one step: ``options`` as :func:`relviz.figures.skew.step_parts` takes
    them (a colour bar is always drawn below the plot). Per cell, row-major: what the colour shows (``z``, float32,
    NaN where no colour, as the twin's trace 0), its colour level and look (base64), its label (drawn where
    ``labels_on``) and its hover text."""
    data, layout = step_parts(cells, **options, scale_below=True)
    values_trace = data[0]
    z = np.asarray(values_trace["z"], dtype=np.float32)                     # [R, C] what the colour shows
    rows, cols = z.shape
    zmin, zmax = float(values_trace["zmin"]), float(values_trace["zmax"])
    palette = palette_256([list(stop) for stop in values_trace["colorscale"]])
    hidden = np.isnan(z)
    levels = levels_256(np.where(hidden, zmin, z), zmin, zmax)              # [R, C] uint8
    rgb = np.asarray(palette, dtype=np.float64)[levels] / 255.0             # [R, C, 3]
    light = rgb @ np.array([0.299, 0.587, 0.114]) > LIGHT
    pad = cells.source_row < 0
    looks = (hidden * HIDDEN) | (pad * PAD) | ((cells.kinds == GARBAGE) * HATCHED) \
        | ((cells.kinds == DROPPED) * VEILED) | ((hidden | pad | (cells.kinds == DROPPED) | light) * DARK_LABEL)
    labels_on = bool(layout["meta"]["labels"])
    bar = values_trace["showscale"]
    return {
        "kind": "skew_step", "rows": rows, "cols": cols, "name": name,
        "z": _b64(z, "<f4"), "levels": _b64(levels, "u1"), "looks": _b64(looks, "u1"),
        "palette": hex_palette(palette), "zmin": zmin, "zmax": zmax,
        "bar": layout["annotations"][0]["text"] if bar else None,
        "labels": np.where(pad, "pad", cells.labels.astype(str)).reshape(-1).tolist(),
        "hover": values_trace["customdata"].reshape(-1).tolist(), "labels_on": labels_on,
        "text_size": values_trace["textfont"]["size"], "height": layout["height"],
        "margin": {side: layout["margin"][side] for side in "lrtb"}, "bar_below": COLOUR_BAR_BELOW if bar else 0,
        "x_title": layout["xaxis"]["title"]["text"], "y_title": layout["yaxis"]["title"]["text"],
        "dtick": [layout["xaxis"]["dtick"], layout["yaxis"]["dtick"]], "background": layout["plot_bgcolor"],
        "font": READABLE_FONT, "tick_font": READABLE_FONT - 1,
    }


# ---- the steps of a tab as one picture: one component call, where each step was a title, a canvas and a caption --

#: The inline marks :func:`inline_runs` reads ("**bold**", "*italic*", "`code`"): the only ones the Skew page's
#: sentences use. Anything else stays text, shown as it is written.
_MARKS = (("**", "b"), ("`", "code"), ("*", "i"))


def inline_runs(text: str) -> list[list[str]]:
    """``text``'s inline markdown as runs ``[text, mark]`` (mark "" plain, "b", "i" or "code"), for the steps
    component, which sets each run's text with textContent and never parses HTML. An unclosed mark, or one whose
    text starts or ends with a space, stays text."""
    runs: list[list[str]] = []
    plain, k = [], 0
    while k < len(text):
        for token, mark in _MARKS:
            end = text.find(token, k + len(token)) if text.startswith(token, k) else -1
            inner = text[k + len(token):end] if end > 0 else ""
            if inner.strip() == inner != "":   # as markdown: "2 * 3 * 4" marks nothing
                if plain:
                    runs.append(["".join(plain), ""])
                    plain = []
                runs.append([text[k + len(token):end], mark])
                k = end + len(token)
                break
        else:
            plain.append(text[k])
            k += 1
    if plain:
        runs.append(["".join(plain), ""])
    return runs


def step_panel(title: str, caption: str, picture: str) -> dict:
    """A step as the steps component draws it: its title, its picture (:func:`step_payload`'s JSON, as a page's
    cache keeps it) and its caption under it."""
    return {"kind": "step", "title": title, "caption": caption, "picture": picture}


#: The looks of a check panel's lines: as Streamlit's st.success, st.warning, st.caption and st.markdown.
CHECK_STYLES = ("success", "warning", "caption", "text")


def check_panel(title: str, lines: list[tuple[str, str]]) -> dict:
    """A panel of text beside the steps (the live check): its title, and ``lines`` of (look, markdown) with the
    look one of :data:`CHECK_STYLES`."""
    for style, _ in lines:
        if style not in CHECK_STYLES:
            raise ValueError(f"a check line's look must be one of {', '.join(CHECK_STYLES)}; got {style!r}")
    return {"kind": "check", "title": title, "lines": [{"style": style, "runs": inline_runs(text)}
                                                        for style, text in lines]}


def steps_json(panels: list[dict], columns: list[float], spans: dict[int, int] | None = None) -> str:
    """The steps component's data as JSON: ``panels`` laid out in a grid of ``columns`` (their widths' weights, as
    st.columns takes them), row by row; ``spans``: panel index -> the columns it spans. Each step's picture is put
    in as the JSON it already is, so a move encodes only the titles and captions anew."""
    spans = spans or {}
    parts = []
    for k, panel in enumerate(panels):
        fields = {key: value for key, value in panel.items() if key != "picture"} | {"span": spans.get(k, 1)}
        head = json.dumps(fields, separators=(",", ":"), ensure_ascii=False)
        parts.append(head[:-1] + ',"picture":' + panel["picture"] + "}" if "picture" in panel else head)
    return '{"kind":"skew_steps","columns":' + json.dumps(list(columns)) + ',"panels":[' + ",".join(parts) + "]}"
