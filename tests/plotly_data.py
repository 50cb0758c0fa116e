"""Decode the data inside plotly figures as tests see them (AppTest protos or figure JSON).

plotly sends numpy arrays as ``{"dtype": "u1", "bdata": <base64>, "shape": "r, c"}``;
``decode`` turns those (and plain lists) back into numpy arrays.
"""
from __future__ import annotations

import base64
import json

import numpy as np

_DTYPES = {"i1": np.int8, "u1": np.uint8, "i2": np.int16, "u2": np.uint16, "i4": np.int32, "u4": np.uint32,
           "f4": np.float32, "f8": np.float64}


def decode(value) -> np.ndarray:
    """A plotly data array (typed base64 dict or nested list) as a numpy array."""
    if isinstance(value, dict) and "bdata" in value:
        array = np.frombuffer(base64.b64decode(value["bdata"]), dtype=_DTYPES[value["dtype"]])
        shape = value.get("shape")
        if shape:
            array = array.reshape([int(s) for s in str(shape).split(",")])
        return array
    return np.asarray(value)


def figure_json(figure) -> dict:
    """The figure as plotly's JSON dict, from a go.Figure, a JSON string or an AppTest element."""
    if hasattr(figure, "proto"):
        return json.loads(figure.proto.spec)
    if isinstance(figure, str):
        return json.loads(figure)
    return json.loads(figure.to_json())


CANVAS = "relviz_toeplitz_canvas"


def canvas_data(text: str) -> dict:
    """A canvas component's data as its script reads it: a payload sent as its JSON ({"json": ..., the other
    fields beside it}: relviz.app.display.show_canvas) unwrapped, as the component's ``unwrapped`` does."""
    data = json.loads(text)
    if isinstance(data.get("json"), str):
        rest = {key: value for key, value in data.items() if key != "json"}
        data = json.loads(data["json"]) | rest
    return data


def canvases(at) -> list[dict]:
    """Every picture relviz's canvas component draws (relviz.app.display.show_toeplitz), as the JSON it receives."""
    return [canvas_data(element.proto.json) for element in at.get("bidi_component")
            if element.proto.component_name == CANVAS]


def charts(at) -> list[dict]:
    """Every plotly chart of an AppTest run, as JSON dicts, in page order, then every canvas picture's data
    (:func:`canvases`: large Toeplitz windows, drawn in the browser; the helpers below read both)."""
    return [figure_json(element) for element in at.get("plotly_chart")] + canvases(at)


def is_canvas(figure) -> bool:
    return isinstance(figure, dict) and "kind" in figure and "data" not in figure


def trace(figure, n: int = 0) -> dict:
    if is_canvas(figure):  # its geometry where a plotly trace keeps it (meta), and its kind as the type
        meta = {key: figure.get(key) for key in ("row0", "col0", "q_offset", "block")}
        meta["customdata"] = ["j − i"] + [f["label"] for f in figure.get("fields", [])]
        return {"type": "canvas", "meta": meta}
    spec = figure if isinstance(figure, dict) else figure_json(figure)
    return spec["data"][n]


def canvas_field(payload: dict, label: str) -> np.ndarray:
    """A canvas window's field as a [rows, cols] matrix: cell (r, c) holds entry c − r + rows − 1 of the
    per-offset slice. "j − i" comes from the geometry (the browser computes it the same way)."""
    rows, cols = payload["rows"], payload["cols"]
    r, c = np.arange(rows)[:, None], np.arange(cols)[None, :]
    if label == "j − i" and all(f["label"] != label for f in payload["fields"]):
        return (payload["col0"] + c) - (payload["q_offset"] + payload["row0"] + r)
    field = next(f for f in payload["fields"] if f["label"] == label)
    return np.asarray(field["values"])[c - r + rows - 1]


def overview_stats(payload: dict) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A canvas overview's block mean, min and max as [rows, cols] grids, read from its per-class statistics
    the way the browser reads them (relviz/components/toeplitz_canvas.js, blockStats)."""
    block = payload["block"]
    rows, cols = -(-payload["q_len"] // block), -(-payload["k_len"] // block)
    R, C = np.arange(rows)[:, None], np.arange(cols)[None, :]
    k = ((C - R + rows - 1) * 2 + (R == rows - 1)) * 2 + (C == cols - 1)
    return tuple(np.asarray(payload["pooled"][name], dtype=np.float64)[k] for name in ("mean", "min", "max"))


def block_stats(full: np.ndarray, block: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Mean, min and max of every block × block block of a full matrix (the reference for an overview)."""
    rows, cols = -(-full.shape[0] // block), -(-full.shape[1] // block)
    out = np.empty((3, rows, cols))
    for a in range(rows):
        for b in range(cols):
            cells = full[a * block:(a + 1) * block, b * block:(b + 1) * block]
            out[:, a, b] = cells.mean(), cells.min(), cells.max()
    return out[0], out[1], out[2]


def canvas_values(payload: dict) -> np.ndarray:
    """The values a canvas window shows (field 0), checked against its colours (pixel = value − lo for
    discrete values, the 256-level index for continuous ones), so a picture that does not show its values
    fails every caller. A grid (any map: kind "grid") carries one base64 value and colour index per cell."""
    rows, cols = payload["rows"], payload["cols"]
    if payload["kind"] == "grid":
        import base64

        values = np.frombuffer(base64.b64decode(payload["values"]), dtype="<f4").reshape(rows, cols)
        values = values.astype(np.int64) if payload["format"] == "d" else values
        pixels = np.frombuffer(base64.b64decode(payload["pixels"]), dtype=np.uint8).reshape(rows, cols)
    else:
        values = canvas_field(payload, payload["fields"][0]["label"])
        r, c = np.arange(rows)[:, None], np.arange(cols)[None, :]
        pixels = np.asarray(payload["pixels"])[c - r + rows - 1]
    colour = payload["colour"]
    if colour["kind"] == "discrete":
        assert np.array_equal(pixels, values - colour["lo"]), "the picture's colours do not match its values"
        return values
    span = colour["zmax"] - colour["zmin"]
    expected = np.rint((values.astype(np.float64) - colour["zmin"]) / span * 255) if span > 0 else 0 * values
    assert np.array_equal(pixels, np.clip(expected, 0, 255)), "the picture's colours do not match its values"
    return values


def title(figure) -> str:
    """The figure's title as a reader takes it in: a line break (a title wrapped to a narrow column) reads as the
    space it replaced."""
    if is_canvas(figure):
        return figure.get("title", "")
    spec = figure if isinstance(figure, dict) else figure_json(figure)
    text = spec.get("layout", {}).get("title")
    text = (text or {}).get("text", "") if isinstance(text, dict) else str(text or "")
    return text.replace("<br>", " ")


def find(figures: list[dict], title_part: str) -> dict:
    """The one figure whose title contains title_part."""
    hits = [f for f in figures if title_part in title(f)]
    assert len(hits) == 1, f"expected one figure titled *{title_part}*, got {[title(f) for f in figures]}"
    return hits[0]


def heatmap_values(figure, n: int = 0) -> np.ndarray:
    """The true values of a heatmap: undoes a discrete shift (z sent as value − lo). A large window
    drawn as an image trace: see :func:`image_values`.

    A discrete heatmap's colour range is [−0.5, count − 0.5] when z was shifted to start at 0;
    its colorbar ticktext carries the true labels, so lo = int(ticktext[0]) − tickvals[0].
    """
    if is_canvas(figure):
        return canvas_values(figure)
    t = trace(figure, n)
    if t.get("type") == "image":
        return image_values(t)
    z = decode(t["z"]).astype(np.int64) if np.issubdtype(decode(t["z"]).dtype, np.integer) else decode(t["z"])
    bar = t.get("colorbar", {})
    if "ticktext" in bar and "tickvals" in bar and bar["ticktext"]:
        lo = int(str(bar["ticktext"][0]).replace("−", "-")) - int(round(bar["tickvals"][0]))
        return z + lo
    return z


def customdata_field(figure, label: str, n: int = 0) -> np.ndarray:
    """One hover field of a heatmap, by label (the trace's meta lists customdata's fields in order)."""
    if is_canvas(figure):
        return canvas_field(figure, label)
    t = trace(figure, n)
    order = t["meta"]["customdata"]
    data = decode(t["customdata"])
    return data[..., order.index(label)].astype(np.int64) if np.issubdtype(data.dtype, np.integer) \
        else data[..., order.index(label)]


def image_values(t: dict) -> np.ndarray:
    """The true values of an image trace (a large window drawn as a palette PNG).

    Discrete values are in the picture itself, exactly: value = palette index + lo. Continuous
    values travel in the hover data; the picture holds their 256-level colour index, checked here
    against those values (so a picture that does not show its values fails every caller).
    """
    from relviz.figures.toeplitz_colours import decode_image_indices

    indices = decode_image_indices(t["source"]).astype(np.int64)
    info = t["meta"]["image"]
    label = info["value"]                       # the hover field that holds the value the picture shows
    if info["kind"] == "discrete":
        return indices + info["lo"]
    order = t["meta"]["customdata"]
    values = decode(t["customdata"])[..., order.index(label)].astype(np.float64)
    span = info["zmax"] - info["zmin"]
    expected = np.rint((values - info["zmin"]) / span * 255) if span > 0 else np.zeros(values.shape)
    assert np.array_equal(indices, np.clip(expected, 0, 255)), "the picture's colours do not match its values"
    return values


def cell_positions(figure, axis: str, n: int = 0) -> np.ndarray:
    """The x (columns) or y (rows) coordinate of every cell of a heatmap, image trace or canvas window."""
    if is_canvas(figure):
        return figure["col0"] + np.arange(figure["cols"]) if axis == "x" else \
            figure["q_offset"] + figure["row0"] + np.arange(figure["rows"])
    t = trace(figure, n)
    if t.get("type") != "image":
        return decode(t[axis])
    from relviz.figures.toeplitz_colours import decode_image_indices

    rows, cols = decode_image_indices(t["source"]).shape
    return t[f"{axis}0"] + t.get(f"d{axis}", 1) * np.arange(cols if axis == "x" else rows)
