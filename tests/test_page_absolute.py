"""AppTest of pages/absolute.py: every heatmap holds exactly what relviz computes."""
from __future__ import annotations

import json
import re

import numpy as np
import plotly.graph_objects as go
import pytest
from page_support import run_page
from plotly_data import CANVAS, canvas_data, canvas_values, decode, is_canvas
from streamlit.testing.v1 import AppTest

from relviz.absolute import projected_similarity, sinusoidal_encoding, sinusoidal_similarity
from relviz.positions import alibi_bias, alibi_slopes, relative_positions


def _run(**params) -> AppTest:
    return run_page("absolute", **params)


FIGURES = ["pe", "sim", "rel", "curve", "alibi", "slopes", "lines"]   # the shift: see _shift_canvas
#: Drawn by the canvas component (relviz.figures.absolute's *_canvas; PE's map plotly when over twice as tall as wide)
MAPS = {"pe", "sim", "rel"}


def _shift_canvas(at: AppTest) -> dict:
    """The shift figure's data as the xy canvas component receives it (relviz.figures.xy_canvas)."""
    shown = [canvas_data(c.proto.json) for c in at.get("bidi_component") if c.proto.component_name == "relviz_xy_canvas"]
    assert len(shown) == 1
    return shown[0]


def _figures(at: AppTest) -> dict[str, dict]:
    """Each figure by its key (abs_fig_NAME): a plotly figure's JSON, or a map's canvas payload."""
    drawn = {chart.proto.id.rsplit("-abs_fig_", 1)[1]: json.loads(chart.proto.spec) for chart in at.get("plotly_chart")}
    drawn |= {chart.proto.id.rsplit("-abs_fig_", 1)[1]: canvas_data(chart.proto.json)
              for chart in at.get("bidi_component") if chart.proto.component_name == CANVAS}
    assert set(drawn) == set(FIGURES), sorted(drawn)
    return drawn


def _z(figure: dict) -> np.ndarray:
    """What a map shows: a canvas's values (checked against its colours) or a plotly heatmap's z."""
    if is_canvas(figure):
        return canvas_values(figure).astype(np.float64)
    return decode(figure["data"][0]["z"]).astype(np.float64)


def _check(at: AppTest, *, length: int, d_model: int, heads: int, head: int, causal: bool = True,
           projected: bool = False) -> dict[str, dict]:
    figures = _figures(at)
    np.testing.assert_array_equal(_z(figures["pe"]), sinusoidal_encoding(length, d_model, device="cpu").numpy())
    if projected:
        expected = projected_similarity(length, d_model, d_head=64, seed=0, device="cpu")
    else:
        expected = sinusoidal_similarity(length, d_model, normalize=True, device="cpu")
    np.testing.assert_array_equal(_z(figures["sim"]), expected.numpy())
    relative = relative_positions(length, device="cpu").numpy()
    np.testing.assert_array_equal(_z(figures["rel"]), relative)
    # hover of the similarity and the ALiBi bias carries the distance |j - i| (the canvas computes it: {a} = |x − y|)
    assert "|j − i| = {a}" in figures["sim"]["lines"] and figures["sim"]["x_first"] == figures["sim"]["y_first"] == 0
    for name in ("alibi",):
        hover = decode(figures[name]["data"][0]["customdata"])
        assert hover.dtype.kind == "u"  # unsigned: signed int16 nearly doubles the bytes sent
        np.testing.assert_array_equal(hover[..., 0], np.abs(relative))

    bias = alibi_bias(length, num_heads=heads, device="cpu")[head - 1].numpy()
    shown = _z(figures["alibi"])
    if causal:
        lower = relative <= 0
        np.testing.assert_array_equal(shown[lower], bias[lower])
        assert np.isnan(shown[~lower]).all()
    else:
        np.testing.assert_array_equal(shown, bias)

    slopes = alibi_slopes(heads, device="cpu").numpy()
    bars = decode(figures["slopes"]["data"][0]["y"]).astype(np.float64)
    np.testing.assert_allclose(bars, -np.log2(slopes), rtol=1e-6)
    selected = figures["lines"]["data"][1]
    np.testing.assert_allclose(decode(selected["y"]), -slopes[head - 1] * np.arange(length), rtol=1e-6)
    return figures


def test_defaults():
    at = _run()
    figures = _check(at, length=128, d_model=128, heads=12, head=1)
    # the Toeplitz check is live and tiny
    message = at.success[0].value
    spread = float(re.search(r"spread along any diagonal is ([0-9]+(?:\.[0-9]+)?(?:e[+-]?[0-9]+)?)", message).group(1))
    assert spread < 1e-5
    # 12 heads: 8 blue slopes of the 8-head sequence, then every other slope of 16 heads
    colours = figures["slopes"]["data"][0]["marker"]["color"]
    assert colours[:8] == ["#1f77b4"] * 8 and colours[8:] == ["#ff7f0e"] * 4
    np.testing.assert_allclose(alibi_slopes(12, device="cpu").numpy()[8:], 2.0 ** -np.array([0.5, 1.5, 2.5, 3.5]), rtol=1e-6)
    text = " ".join(m.value for m in at.markdown)
    assert "12 heads is not a power of 2" in text and "every other one" in text
    assert any("j − i" in el.value for el in at.info)  # the sign convention


def test_power_of_two_heads_explains_the_geometric_sequence():
    at = _run(abs_heads="8", abs_head="3")
    _check(at, length=128, d_model=128, heads=8, head=3)
    text = " ".join(m.value for m in at.markdown)
    assert "8 heads is a power of 2" in text and "1/2, 1/4, …, 1/256" in text
    assert len(_figures(at)["slopes"]["data"]) == 1  # no "naive" comparison needed


@pytest.mark.parametrize("key,value", [("abs_L", 8), ("abs_L", 512), ("abs_d", 4), ("abs_d", 512),
                                       ("abs_heads", 1), ("abs_heads", 32)])
def test_each_slider_at_its_limits(key, value):
    at = _run()
    at.slider(key=key).set_value(value).run()
    assert not at.exception
    settings = dict(length=128, d_model=128, heads=12, head=1)
    settings[{"abs_L": "length", "abs_d": "d_model", "abs_heads": "heads"}[key]] = value
    _check(at, **settings)


def test_head_slider_at_its_maximum_and_no_mask():
    at = _run(abs_heads="32")
    at.slider(key="abs_head").set_value(32).run()
    at.toggle(key="abs_causal").set_value(False).run()
    assert not at.exception
    _check(at, length=128, d_model=128, heads=32, head=32, causal=False)


def test_random_head_is_not_toeplitz_and_the_page_says_so():
    at = _run(abs_L="64", abs_proj="true")
    _check(at, length=64, d_model=128, heads=12, head=1, projected=True)
    warning = at.warning[0].value
    assert "No: along one diagonal" in warning
    assert float(re.search(r"varies by up to ([0-9]+(?:\.[0-9]+)?(?:e[+-]?[0-9]+)?)", warning).group(1)) > 0.1


def test_invalid_url_values_are_ignored():
    at = _run(abs_L="100000", abs_d="abc", abs_heads="0")
    assert not at.error
    _check(at, length=128, d_model=128, heads=12, head=1)


def test_every_figure_is_valid_and_under_3_mb_at_the_largest_settings():
    at = _run(abs_L="512", abs_d="512", abs_heads="32", abs_head="32", abs_proj="true", abs_causal="false")
    for chart in at.get("plotly_chart"):
        assert len(chart.proto.spec) < 3_000_000  # the bytes the browser gets
        go.Figure(json.loads(chart.proto.spec))  # plotly's validation (the page builds without it)
    at = _run(abs_L="512", abs_d="512")
    for chart in at.get("plotly_chart"):
        assert len(chart.proto.spec) < 3_000_000
        go.Figure(json.loads(chart.proto.spec))


def test_slope_axis_says_bigger_is_flatter():
    """A larger −log2 m is a smaller slope m: a flatter penalty, not a steeper one."""
    at = _run()
    axis = _figures(at)["slopes"]["layout"]["yaxis"]["title"]["text"]
    assert "flatter" in axis and "steeper" not in axis


def test_non_power_of_two_rule_says_the_range_widens():
    """12 heads: the first extra slope 2^−0.5 is steeper than every power-of-2 slope (the steepest is 2^−1)."""
    at = _run()
    text = " ".join(m.value for m in at.markdown)
    assert "halfway" not in text and "same range" not in text
    assert "2^−0.5" in text and "steeper than every" in text
    assert alibi_slopes(12).max() > alibi_slopes(8).max()


def test_one_head_is_singular():
    at = _run(abs_heads="1")
    text = " ".join(m.value for m in at.markdown)
    assert "1 heads" not in text and "1 head is a power of 2" in text


def test_alibi_at_a_million_positions_is_a_pooled_overview_and_an_exact_window():
    """ALiBi length 2^20 (the sinusoidal part keeps its 512): the bias of the shown head is drawn per offset,
    an exact window where the sliders put it and a pooled overview with exact block statistics; the lines
    figure stays small; the page says what the pooling hides and that this view does not grey the mask."""
    from plotly_data import canvas_values, find, charts, overview_stats
    from relviz.toeplitz_display import toeplitz_window
    n, heads, head = 2**20, 12, 3
    at = _run(abs_aL=str(n), abs_heads=str(heads), abs_head=str(head), abs_al_ws="256", abs_al_r0="700000",
              abs_al_c0="699900")
    assert not at.error, [e.value for e in at.error]
    slope = float(alibi_slopes(heads)[head - 1])
    window = find(charts(at), "full resolution")
    i = 700_000 + np.arange(256)[:, None]
    j = 699_900 + np.arange(256)[None, :]
    np.testing.assert_allclose(canvas_values(window), -slope * np.abs(j - i), rtol=1e-6)
    overview = find(charts(at), "overview")
    block = overview["block"]
    per_offset = (-slope * np.abs(np.arange(-(n - 1), n))).astype(np.float32)
    mean, low, high = overview_stats(overview)
    for a, b in ((0, 0), (10, 40), (127, 126)):
        cells = toeplitz_window(per_offset, n, n, row0=a * block, col0=b * block, rows=block, cols=block)
        assert mean[a, b] == pytest.approx(cells.mean(dtype=np.float64), rel=1e-6)
        assert (low[a, b], high[a, b]) == pytest.approx((cells.min(), cells.max()), rel=1e-6)
    for chart in at.get("plotly_chart"):
        assert len(chart.proto.spec) < 1_000_000
    assert any("What it hides" in m.value for m in at.markdown)
    assert any("does not grey out" in c.value for c in at.caption)
    # the download note reads its sizes with separators, as the rest of the page does (it said "1048576 × 1048576")
    assert any("The full 1,048,576 × 1,048,576 matrix is not built" in m.value and "(2,097,151 rows" in m.value
               for m in at.markdown)
    assert any("window rows 700,000…700,255" in c.value for c in at.caption)


def test_the_shifted_sequence_is_drawn_from_the_library_at_the_links_shift():
    """Issue 33: the tour's "Shift the whole sequence" step (abs_shift in the link)."""
    from relviz.absolute import shift_sequence

    at = _run(abs_L="64", abs_d="64", abs_shift="100")
    shown = _shift_canvas(at)
    expected = shift_sequence(64, 64, 100)
    bars, before, after = shown["panels"][0]["traces"][0], *shown["panels"][1]["traces"]
    np.testing.assert_array_equal(decode(bars["y"]), expected.change.numpy())
    assert [p["title"] for p in shown["panels"]] == ["absolute: PE(i + 100) − PE(i)", "relative: PE_i · PE_j / (d/2)"]
    assert "largest change" in after["name"]


@pytest.mark.parametrize("link", [dict(abs_L="64", abs_d="64", abs_shift="100"),
                                  dict(abs_L="40", abs_d="12", abs_shift="3"),
                                  dict(abs_L="512", abs_d="512", abs_shift="0")])
def test_the_shift_canvas_draws_its_plotly_twins_values_bit_for_bit(link):
    """The page draws the shift on the xy canvas (redrawn in place on a move); every array it draws is the plotly
    figure's (relviz.show.sinusoidal_shift, the page's figure before), bit for bit, and so are titles and names."""
    from relviz.figures.absolute import sinusoidal_shift

    shown = _shift_canvas(_run(**link))
    twin = json.loads(sinusoidal_shift(int(link["abs_L"]), int(link["abs_d"]), int(link["abs_shift"])).to_json())
    traces = [t for panel in shown["panels"] for t in panel["traces"]]
    assert [t["name"] for t in traces] == [t["name"] for t in twin["data"]]
    assert [t["colour"] for t in traces] == [t["marker"]["color"] if "marker" in t and "color" in t["marker"]
                                             else t["line"]["color"] for t in twin["data"]]
    for drawn, plotted in zip(traces, twin["data"]):
        for mine, theirs in (("x", plotted["x"]), ("y", plotted["y"])):
            assert decode(drawn[mine]).dtype == decode(theirs).dtype or mine == "x"
            np.testing.assert_array_equal(decode(drawn[mine]), decode(theirs))
    after = traces[2]
    np.testing.assert_array_equal(decode(after["above"]), decode(twin["data"][2]["error_y"]["array"]))
    np.testing.assert_array_equal(decode(after["below"]), decode(twin["data"][2]["error_y"]["arrayminus"]))
    assert [p["title"] for p in shown["panels"]] == [a["text"] for a in twin["layout"]["annotations"]]


@pytest.mark.parametrize("length, d_model, projected", [(512, 512, False), (64, 64, True), (96, 64, False)])
def test_each_canvas_map_shows_its_plotly_twins_values_and_colours(length, d_model, projected):
    """The maps the page draws on the canvas (redrawn in place on an L or d_model move) hold exactly the values of
    their plotly twins (relviz.show's figures, the page's before), bit for bit, over the same colour scale and range."""
    from relviz.figures.absolute import relative_figure, sinusoidal_encoding_map, sinusoidal_similarity_map
    from relviz.figures.toeplitz_colours import hex_palette, palette_256

    figures = _figures(_run(abs_L=str(length), abs_d=str(d_model), abs_proj=str(projected).lower()))
    twins = {"pe": sinusoidal_encoding_map(length, d_model),
             "sim": sinusoidal_similarity_map(length, d_model, projected=projected),
             "rel": relative_figure(relative_positions(length, device="cpu").numpy().astype(np.int16))}
    for name, twin in twins.items():
        shown, spec = figures[name], json.loads(twin.to_json())
        assert is_canvas(shown), name
        trace = spec["data"][0]
        z = decode(trace["z"])
        values = canvas_values(shown)
        np.testing.assert_array_equal(values, z)
        # float32 stays float32; j − i is shown as the integer it is (plotly carries it as float32)
        assert values.dtype == z.dtype or (name == "rel" and values.dtype.kind == "i"), name
        if "zmin" in trace:
            assert (shown["colour"]["zmin"], shown["colour"]["zmax"]) == (trace["zmin"], trace["zmax"]), name
        elif "zmid" in trace:                                        # plotly: symmetric about zmid
            half = float(np.abs(z.astype(np.float64) - trace["zmid"]).max())
            assert (shown["colour"]["zmin"], shown["colour"]["zmax"]) == (trace["zmid"] - half, trace["zmid"] + half)
        else:
            assert (shown["colour"]["zmin"], shown["colour"]["zmax"]) == (float(z.min()), float(z.max())), name
        assert shown["palette"] == hex_palette(palette_256(trace["colorscale"])), name
        assert (shown["x_title"], shown["y_title"]) == (spec["layout"]["xaxis"]["title"]["text"],
                                                        spec["layout"]["yaxis"]["title"]["text"]), name
        assert shown["bar_below"], name                               # labels level in a third of a narrow page


def test_every_canvas_gets_its_picture_as_one_json_string():
    """Each canvas's data is {"json": the picture's JSON, its name and toolbar}: scalars only. A list or dict among
    them makes Streamlit ask pandas whether it is a dataframe, which imported pandas and pyarrow on a server's first
    Absolute page (~0.5-2 s of a cold first run) and walked the payload on every run."""
    at = _run(abs_L="96", abs_d="64")
    drawn = [json.loads(c.proto.json) for c in at.get("bidi_component")]
    assert len(drawn) == 4                                    # three maps and the shift
    for data in drawn:
        assert isinstance(data["json"], str)
        assert all(isinstance(value, (str, bool, int, float)) for value in data.values()), sorted(data)
