"""Figure-level checks of the display defects a teacher found on a projector (issue 26); the browser test
test_chart_texts_do_not_collide_at_1280x720 sees the same charts drawn."""
from __future__ import annotations

import numpy as np
import pytest

from relviz.experiments import SHAW_TABLE2
from relviz.figures.dict_figures import HEAD_COLOURS
from relviz.figures.parameters import bias_curve_figure
from relviz.figures.experiments import shaw_reference_figure
from relviz.figures.heatmap import AXIS_BELOW_PX, legend_below_axis
from relviz.figures.skew import DROPPED, GARBAGE, causal_steps, demo_inputs, step_figure
from relviz.figures.t5 import bucket_budget_figure
from relviz.schemes.view_kinds import BiasCurve


def test_table_2_labels_alternate_sides_and_its_title_fits_a_third_of_the_page():
    """Defect 2: side by side the labels ran together ("25.825.925.8"), the title was cut at 1280 px."""
    figure = shaw_reference_figure(SHAW_TABLE2)
    positions = list(figure.data[0].textposition)
    assert len(positions) == len(SHAW_TABLE2)
    assert all(a.split()[0] != b.split()[0] for a, b in zip(positions, positions[1:]))  # above, below, above…
    assert len(figure.layout.title.text) <= 24


def curve(heads: int) -> BiasCurve:
    offsets = np.arange(-31, 1)
    slopes = 2.0 ** -np.arange(1, heads + 1)
    return BiasCurve(title="ALiBi", caption="", offsets=offsets,
                     bias=(slopes[:, None] * offsets[None, :]).astype(np.float32), learned=False)


def test_many_heads_get_one_colour_each_and_a_colour_bar_instead_of_a_legend():
    """Defect 5: 32 heads in 8 colours (head 1 looked like head 9) and a 32-entry legend over the axis title."""
    lines = [t for t in bias_curve_figure(curve(32)).data if t.mode == "lines"]
    assert len(lines) == 32 and len({t.line.color for t in lines}) == 32
    assert not any(t.showlegend for t in lines)
    bars = [t for t in bias_curve_figure(curve(32)).data if t.mode == "markers"]
    assert len(bars) == 1 and bars[0].marker.showscale and bars[0].marker.cmax == 32
    few = [t for t in bias_curve_figure(curve(4)).data if t.mode == "lines"]
    assert [t.line.color for t in few] == HEAD_COLOURS[:4] and all(t.showlegend is not False for t in few)


@pytest.mark.parametrize("rows", [1, 4, 10])
def test_a_legend_below_the_axis_starts_under_the_axis_title(rows):
    layout = legend_below_axis(dict(height=400, margin=dict(t=40, b=40)), rows=rows)
    plot_px = layout["height"] - 40 - layout["margin"]["b"]
    assert plot_px == 400 - 40 - 40                                           # the plot keeps its height
    assert -layout["legend"]["y"] * plot_px == pytest.approx(AXIS_BELOW_PX)   # in px below the plot


@pytest.mark.parametrize("length", [4, 6, 9])
def test_every_skew_cell_label_is_drawn_once(length):
    """Defect 6: a hatched cell's label was drawn by the heatmap and again above the hatching, a pixel apart
    (cell (3, 5) at L = 6 read "=5"); a pad cell's "pad" twice."""
    cells = causal_steps(demo_inputs(length, seed=0))
    for step in cells.values():
        figure = step_figure(step, length=length)
        base = np.asarray(figure.data[0].text, dtype=object).reshape(step.labels.shape)
        overlaid = (step.source_row < 0) | np.isin(step.kinds, (GARBAGE, DROPPED))
        assert all(v == "" for v in base[overlaid])
        assert all(v != "" for v in base[~overlaid])


def test_t5_budget_unidirectional_says_one_direction_and_its_segments_differ():
    """Defect 7: unidirectional, both segments read "past and j − i ≥ 0" and the title said "per direction"."""
    figure = bucket_budget_figure(32, 128, False)
    texts = [t.text[0] for t in figure.data]
    assert texts == ["exact: j − i ≥ 0, then past<br>0…15", "past logarithmic<br>16…31"]
    assert "per direction" not in figure.layout.title.text and "one direction" in figure.layout.title.text


def test_t5_budget_one_bucket_part_is_labelled_above_the_bar_not_squeezed_inside():
    """Defect 7: "16: unused" was shrunk and turned to fit a one-bucket bar."""
    figure = bucket_budget_figure(32, 128, True)
    narrow = [t for t in figure.data if t.x[0] == 1]
    assert narrow and all(t.textposition == "none" for t in narrow)
    assert [a.text for a in figure.layout.annotations] == ["16: unused"]
    odd = bucket_budget_figure(33, 128, True)
    assert sorted(a.text for a in odd.layout.annotations) == ["16: unused", "odd: unused"]


@pytest.mark.parametrize("bidirectional", ["true", "false"])
def test_t5_bucket_kinds_fit_their_column(bidirectional):
    """Defect 8: the grid sized "kind" by its header and cut bucket 0's kind ("0 and every f") at 1280 px."""
    import json

    from page_support import run_page

    at = run_page("t5", t5_bi=bidirectional)
    (table,) = [df for df in at.dataframe if "kind" in df.value.columns]
    width = json.loads(table.proto.columns)["kind"]["width"]
    assert width >= 7 * max(len(kind) for kind in table.value["kind"]) + 16


def test_your_model_says_what_needs_weights_and_how_an_operator_adds_models(monkeypatch):
    """Defect 9: the intro promised T5 biases and learned tables, which a visitor gets only when the operator
    lists models."""
    from page_support import run_page

    monkeypatch.setenv("RELVIZ_MODELS", "")
    at = run_page("your_model")
    intro = " ".join(m.value for m in at.markdown)
    assert "RELVIZ_MODELS" in intro and "need no weights" in intro and "operator" in intro


def test_readme_gives_the_cpu_index_install_first_and_names_relviz_models():
    """The plain install on Linux pulls several GB of CUDA packages: the CPU-index command comes first."""
    from pathlib import Path

    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text(encoding="utf-8")
    start = readme[readme.index("## Start the app"):readme.index("## Run the tests")]
    first = next(line for line in start.splitlines() if "pip install" in line and line.startswith("python3"))
    assert "--extra-index-url https://download.pytorch.org/whl/cpu" in first
    assert "RELVIZ_MODELS=" in start


# ---------------------------------------------------------------------------------------
# Issue 33: the defects a teacher found presenting both tours at 1280 × 720


@pytest.mark.parametrize("k", [0, 3, 64])
def test_shaw_panel_titles_fit_a_third_of_an_819_page(k):
    """At 1024 × 768 the third title read "lookup index: clipped +" (cut), and at 819 px (a projector at 125 %)
    "relative position j − i" ran 4 px off its third: every line of each title holds at most THIRD_TITLE_CHARS, and
    the three hang at one height (their plots level), for every k the slider takes (0 … 64)."""
    from relviz.figures.heatmap import THIRD_TITLE_CHARS
    from relviz.figures.shaw import shaw_matrices, shaw_offsets

    layouts = [view.figure.layout for view in shaw_matrices(shaw_offsets(10, 10, k=k), 10, 10)]
    titles = [layout.title.text for layout in layouts]
    assert titles[0] == "relative position<br>j − i", titles
    assert all(len(line) <= THIRD_TITLE_CHARS for title in titles for line in title.split("<br>")), titles
    assert "clip(j − i, " in titles[1] and titles[2] == f"index: clipped + {k}"
    assert len({(layout.margin.t, layout.title.y, layout.title.yref) for layout in layouts}) == 1


@pytest.mark.parametrize("k, length", [(3, 10), (64, 10), (9, 20), (12, 24)])
def test_a_flat_colour_bar_labels_fit_under_a_narrow_matrix(k, length):
    """The clipped offset's seven labels −3 … 3 overlapped (drawn upright, bar-1024x768.png) on a bar ~87 px wide
    under a 10 × 10 matrix in a third of 1024 px: the labels kept fit NARROW_BAR_PX at TICK_CHAR_PX a character
    and a character's gap, they are evenly spaced, and each still names the value its position stands for."""
    from relviz.figures.heatmap import NARROW_BAR_PX, TICK_CHAR_PX
    from relviz.figures.shaw import shaw_matrices, shaw_offsets

    values = shaw_offsets(length, length, k=k)
    for view, shown in zip(shaw_matrices(values, length, length)[1:], (values.clipped, values.index)):
        trace = view.figure.data[0]
        vals, text = list(trace.colorbar.tickvals), [int(t.replace("−", "-")) for t in trace.colorbar.ticktext]
        assert sum((len(t) + 1) * TICK_CHAR_PX for t in trace.colorbar.ticktext) <= NARROW_BAR_PX, text
        assert len(vals) >= 2 and len(set(np.diff(vals))) == 1                     # evenly spaced
        lo = int(shown.min())
        shift = lo if trace.zmin == -0.5 else 0              # z holds value − lo, or the value itself (int8)
        assert [v + shift for v in vals] == text and lo <= text[0] and text[-1] <= int(shown.max())
    assert k != 3 or text == [0, 3, 6] or text == [0, 2, 4, 6]


def test_mrope_ids_title_keeps_its_token_count_on_a_short_first_line():
    """At 1024 × 768 the one-line title lost "(1,296 tokens)" (today-1024x768-13.png): the count is on a first line
    of at most 45 characters, what the sequence holds in a smaller subtitle."""
    from relviz import show

    figure = show.mrope_ids("qwen2_5_vl", 16, 16, 4)
    first, second = figure.layout.title.text, figure.layout.title.subtitle.text
    tokens = len(figure.data[0].y)
    assert tokens > 1000 and first.endswith(f" {tokens:,} tokens") and len(first) <= 45, first
    assert "16 × 16 image" in second and "4-frame video" in second and len(second) <= 60


def test_absolute_shift_right_panel_names_its_y_axis_in_its_title():
    """At 1024 × 768 the right panel's y-axis title ("PE_i · PE_j / (d/2)") sat over the left panel: the gap between
    the panels is ~50 px there. The panel title names the axis instead, and fits like the left one."""
    from relviz.absolute import shift_sequence
    from relviz.figures.absolute import shift_figure

    figure = shift_figure(shift_sequence(64, 128, 100))
    notes = [a.text for a in figure.layout.annotations if a.yref == "paper" and a.y == 1.0]
    assert not figure.layout.yaxis2.title.text and "PE_i · PE_j / (d/2)" in notes[1]
    assert len(notes[1]) <= 30 and figure.layout.yaxis.title.text


@pytest.mark.parametrize("k, length, span", [(64, 10, 9), (3, 10, 3), (0, 10, 0)])
def test_shaw_colour_scale_fits_the_values_shown(k, length, span):
    """Defect 2: at k = 64 on a 10 × 10 matrix the scale spanned ±64 while the offsets span ±9: one flat colour."""
    from relviz.figures.shaw import shaw_matrices, shaw_offsets

    _, clipped, lookup = shaw_matrices(shaw_offsets(length, length, k=k), length, length)
    assert (clipped.figure.data[0].zmin, clipped.figure.data[0].zmax) == (-span - 0.5, span + 0.5)
    assert (lookup.figure.data[0].zmin, lookup.figure.data[0].zmax) == (k - span - 0.5, k + span + 0.5)


def test_alibi_slope_labels_are_readable_and_never_shrunk():
    """Defect 12: the slope bars' labels were about 8 px ("2^-0.5" at 10 px, shrunk to fit a bar)."""
    from relviz.figures.absolute import SLOPE_LABEL_PX, alibi_slopes_figure
    from relviz.figures.heatmap import READABLE_FONT
    from relviz.positions import alibi_slopes

    bars = alibi_slopes_figure(alibi_slopes(12, device="cpu").numpy(), from_p=8).data[0]
    assert bars.textfont.size == SLOPE_LABEL_PX >= READABLE_FONT and bars.constraintext == "none"
    assert list(bars.text[:2]) == ["1", "2"] and bars.text[8] == "0.5"   # −log2 of 2^-1, 2^-2, ... 2^-0.5


def test_skew_panel_titles_fit_a_third_of_the_page_on_one_line():
    """Defect 19: panel 1's title ("… one score per query and distance") wrapped, so panel 1 sat lower than 2 and 3.
    A third of a 1024 px page (the sidebar open) holds ~26 bold characters ("3 · Reshape to (L + 1) × L" fits on
    one line there, test-artifacts/issue33/first-1024x768-07.png; "1 · Q E_rᵀ: query × distance" wrapped), so
    every title of the causal tab's three-column rows is at most 26 characters."""
    from page_support import run_page

    from plotly_data import canvas_data

    at = run_page("skew")
    # the causal tab's steps and its check are drawn by the steps component (relviz.figures.skew_canvas.steps_json),
    # one element a row of three
    rows = [canvas_data(e.proto.json) for e in at.get("bidi_component") if e.proto.id.endswith(("skew_fig_qer",
                                                                                                 "skew_fig_skewed"))]
    assert [row["columns"] for row in rows] == [[1, 1, 1]] * 2
    assert all(p["span"] == 1 for row in rows for p in row["panels"])
    titles = [p["title"] for row in rows for p in row["panels"]]
    causal = titles[:titles.index("Live check: naive gather") + 1]       # steps 1 … 5 and row 2's third heading
    assert [t[0] for t in causal] == ["1", "2", "3", "4", "5", "L"], causal
    assert all(len(t) <= 26 for t in causal), causal


@pytest.mark.parametrize("num_buckets", [32, 128])
def test_t5_band_labels_do_not_share_a_row_where_a_band_is_narrower_than_its_label(num_buckets):
    """Defect 1: at 128 buckets "exact n < 32" and "logarithmic" overlapped (the exact band was 12 % of the axis)."""
    from relviz.figures.t5 import bucket_curve

    notes = [a for a in bucket_curve(num_buckets, 128, True).layout.annotations
             if a.yref == "paper" and a.y == 1.0]
    assert [a.text for a in notes][:2] == [f"exact n < {num_buckets // 4}", "logarithmic"]
    assert notes[0].yshift != notes[1].yshift                     # one row up: they cannot overlap


def test_gpt_oss_sink_legend_sits_under_the_axis_title_at_a_readable_size():
    """Defect 18: the sink chart's four-entry legend (10 px, above the plot) crowded it."""
    from relviz.figures.heatmap import READABLE_FONT
    from relviz.figures.layers import view_figure
    from relviz.mechanisms.view_kinds import SinkShare

    positions = np.arange(0, 1000, 10)
    view = SinkShare(title="sinks", caption="", positions=positions, keys=positions + 1,
                     logits=np.zeros(4), share=np.full((4, len(positions)), 0.5),
                     labels=("a", "b", "c", "d"), illustrative=True)
    layout = view_figure(view).layout
    assert layout.legend.y < 0 and layout.legend.orientation == "h"          # below the plot
    assert (layout.legend.font.size or layout.font.size) >= READABLE_FONT - 1


@pytest.mark.parametrize("value", ["inf", "500"])
def test_a_refused_link_value_says_the_range_its_control_takes(value):
    """Issue 33: a refused link value says the range the control takes, not only that it was ignored."""
    from page_support import run_page

    at = run_page("shaw", sh_clip=value)
    (notice,) = [w.value for w in at.warning if "Ignored in the link" in w.value]
    assert f"sh_clip={value}" in notice and "from 0 to 64" in notice
    assert at.slider(key="sh_clip").value == 3


def test_absolute_pages_three_maps_keep_their_width_with_the_colour_bar_below():
    """Defect 13: in a third of the page each map was 100–180 px wide (a colour bar on the right took ~70 px) and
    the titles above wrapped; the bars now sit under the maps (seen at 1280 × 720: three plot areas 171 px wide,
    test-artifacts/defects/d13-absolute-after.png) and the titles are short."""
    from page_support import run_page

    at = run_page("absolute")
    import json

    from plotly_data import canvas_data

    # the page draws them on the canvas, its colour bar below (labels level in a third of a 1024 px page)
    for key in ("abs_fig_pe", "abs_fig_sim", "abs_fig_rel"):
        (chart,) = [c for c in at.get("bidi_component") if c.proto.id.endswith(key)]
        assert canvas_data(chart.proto.json)["bar_below"], key
    # and their plotly twins (relviz.show) put theirs below too
    from relviz import show

    for figure in (show.sinusoidal_encoding_map(), show.sinusoidal_similarity_map()):
        bar = figure.data[0].colorbar
        assert bar.orientation == "h" and bar.y < 0
    titles = [m.value for m in at.markdown if m.value.startswith("**") and m.value.endswith("**")][:3]
    assert titles and all(len(t) <= 32 for t in titles), titles


def test_keys_seen_panel_titles_start_at_their_panels_and_fit_half_a_page():
    """Defect 15 (part): in Your model's compare mode (half a page per model) the two panel titles, centred over
    their panels, ran into each other, and the right panel's axis title was cut."""
    from relviz import show

    figure = show.layer_pattern("models/llama-4-scout", 0)
    notes = [a for a in figure.layout.annotations if a.yref == "paper" and a.y == 1.0]
    assert [(a.x, a.xanchor) for a in notes] == [(0.0, "left"), (0.6, "left")]
    assert all(len(a.text) * 7 < 0.6 * 330 for a in notes)        # 13 px text inside the left panel of 330 px
    # at 1024 × 768 "query i (the first ones)" ran 15 px off each side and "allowed offsets j − i" 18 px off the
    # right: two lines of at most 16 characters, and a panel title of 13 (the right panel is ~95 px wide there)
    assert max(len(line) for line in figure.layout.xaxis2.title.text.split("<br>")) <= 16
    assert len(notes[1].text) <= 13
    assert not figure.layout.yaxis2.title.text and "j − i" in notes[1].text   # the panel title names the axis


def _layer(preset: str, layer: int) -> list:
    """[(view, figure)] of one layer of a published config at its own context length."""
    from relviz.figures.layers import view_figure
    from relviz.layer_strip import context_length, layer_views
    from relviz.model_presets import preset_config, preset_entry, preset_plan

    plan = preset_plan(preset)
    length = context_length(plan, preset_config(preset_entry(preset)))
    return [(v, view_figure(v)) for v in layer_views(plan.layer(layer), length)]


@pytest.mark.parametrize("first, second, kind", [
    (("rope/llama-3.1-8b", 0), ("models/gemma-3-27b", 5), "Wavelengths"),
    (("rope/llama-3.1-8b", 0), ("models/llama-4-scout", 0), "KeysSeen"),
])
def test_compare_mode_shares_the_y_axes_and_fits_half_a_page(first, second, kind):
    """Defect 15: in Your model's compare mode the two sides' y ranges differed (two models that could not be
    compared by eye), a legend above the plot ran out of half a page, and log axes labelled 2 and 5 between
    the powers of ten (crowded at half width)."""
    from relviz.figures.heatmap import LEGEND_ROW_PX
    from relviz.figures.layers import COMPARE_LEGEND_CHARS, log_decades, side_by_side

    left, right = _layer(*first), _layer(*second)
    new_left, new_right = side_by_side(left, right)
    (a,) = [f for v, f in new_left if type(v).__name__ == kind]
    (b,) = [f for v, f in new_right if type(v).__name__ == kind]
    (old_a,) = [f for v, f in left if type(v).__name__ == kind]
    assert old_a.layout.yaxis.range is None                        # the cached figure is not changed
    for axis in ("yaxis", "yaxis2") if kind == "KeysSeen" else ("yaxis",):
        ra, rb = a.layout[axis].range, b.layout[axis].range
        assert ra is not None and list(ra) == list(rb), axis
        for figure in (a, b):                                      # every point of both sides inside the range
            ys = np.concatenate([np.asarray(t.y, float) for t in figure.data if (t.yaxis or "y") == axis[0] + axis[5:]])
            ys = np.log10(ys[ys > 0]) if figure.layout[axis].type == "log" else ys
            assert ra[0] <= ys.min() and ys.max() <= ra[1], axis
    for figure in (a, b):
        for axis in [n for n in figure.layout.to_plotly_json() if n.startswith(("xaxis", "yaxis"))]:
            if figure.layout[axis].type == "log":                  # powers of ten only, at most 9 labels
                step = figure.layout[axis].dtick
                assert step in (1, 2) and log_decades(figure, axis) / step + 1 <= 9, axis
                assert figure.layout[axis].tickangle == 0, axis
        entries = [t for t in figure.data if t.name and t.showlegend is not False]
        if figure.layout.showlegend is not False and len(entries) > 1:
            legend, margin = figure.layout.legend, figure.layout.margin
            rows = sum(t.name.count("<br>") + 1 for t in entries)
            assert legend.yanchor == "top" and legend.y < 0           # under the plot, in its bottom margin
            assert margin.b >= AXIS_BELOW_PX + rows * LEGEND_ROW_PX
            assert all(len(line) <= COMPARE_LEGEND_CHARS for t in entries for line in t.name.split("<br>"))


def test_compare_mode_page_draws_both_sides_on_one_y_range(monkeypatch):
    """Defect 15 on the page: the two keys-seen charts of a comparison carry the same y ranges."""
    from page_support import run_page
    from plotly_data import figure_json

    from relviz.model_presets import model_presets

    label = {key: entry["label"] + " (published config)" for key, entry in model_presets().items()}
    monkeypatch.setenv("RELVIZ_MODELS", "")
    at = run_page("your_model", ym_model=label["rope/llama-3.1-8b"], ym_vs=label["models/llama-4-scout"],
                  ym_view="pattern")
    assert not at.exception and not at.error
    seen = [c["layout"] for c in map(figure_json, at.get("plotly_chart")) if "yaxis2" in c["layout"]]
    assert len(seen) == 2
    for axis in ("yaxis", "yaxis2"):
        assert seen[0][axis].get("range") is not None and seen[0][axis]["range"] == seen[1][axis]["range"]


#: Every page with a number input, with the link values that bring out the ones a setting hides (Check's kinds).
NUMBER_PAGES = [("shaw", {}), ("t5", {}), ("absolute", {}), ("rope", {}), ("attention", {}), ("skew", {}),
                ("check", {}), ("check", {"ck_kind": "alibi"}), ("check", {"ck_kind": "rope_cos"}), ("tour", {}),
                ("experiments", {})]


def _page_state(at) -> tuple:
    """What a page shows: every widget's value but the number inputs', and every chart's spec (plotly's, and the
    data of every canvas component)."""
    widgets = sorted((str(w.key), repr(w.value)) for w in at.main if hasattr(w, "value") and w.key
                     and w.type != "number_input")
    return widgets, [c.proto.spec for c in at.get("plotly_chart")] + [c.proto.json for c in at.get("bidi_component")]


@pytest.mark.parametrize("page, params", NUMBER_PAGES, ids=[f"{p}{''.join(v.values())}" for p, v in NUMBER_PAGES])
def test_every_number_input_shows_its_range_and_refuses_a_value_outside_it_visibly(page, params):
    """Defect 16: a typed out-of-range number was refused only in Streamlit's tooltip (the page never heard of
    it), and "Press Enter to apply" covered the value. Now every number input shows its range in its label; a
    value outside it gets an st.error naming the range, the input goes back to its value and nothing else on
    the page changes; the hint is hidden by a style block."""
    from page_support import run_page

    from relviz.app.controls import NUMBER_INPUT_CSS, label_range

    at = run_page(page, timeout=120, **params)
    keys = [w.key for w in at.number_input]
    assert keys, page
    assert NUMBER_INPUT_CSS in [h.proto.body for h in at.get("html")]
    for key in keys:
        widget = at.number_input(key=key)
        bounds = label_range(widget.label)
        assert bounds is not None, (page, key, widget.label)
        lo, hi = bounds
        before, value = _page_state(at), widget.value
        for outside in (hi + 1, lo - 1):
            at.number_input(key=key).set_value(outside).run()
            assert not at.exception, [e.value for e in at.exception]
            errors = [e.value for e in at.error if f"takes {lo:,} to {hi:,}" in e.value]
            assert len(errors) == 1 and f"{outside:,} was not applied" in errors[0], (page, key, errors)
            assert at.number_input(key=key).value == value, (page, key)
            assert _page_state(at) == before, (page, key, outside)
        at.run()  # the message is for the refused value only
        assert not [e for e in at.error if "was not applied" in e.value], (page, key)


def test_no_page_draws_a_number_input_of_its_own():
    """Every number input goes through controls.number_control (its range on screen, a visible refusal)."""
    import re
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    own = [f"{path.relative_to(root)}:{n}" for path in [*root.glob("pages/*.py"), *root.glob("relviz/app/*.py"),
                                                        root / "app.py"]
           if path.name != "controls.py"
           for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
           if re.search(r"\.number_input\(", line)]
    assert not own, own


def test_keys_seen_log_axes_label_powers_of_ten_only_at_a_short_context():
    """Seen at 1280 × 720 on a 64-position model: the log axes labelled 2 … 9 between 1 and 10, labels on each
    other by 1 ('1 9 8')."""
    from relviz.figures.layers import view_figure
    from relviz.layer_strip import layer_views
    from relviz import hf
    from relviz.mechanisms.view_kinds import KeysSeen

    plan = hf.from_config({"model_type": "llama", "hidden_size": 64, "num_attention_heads": 4, "num_hidden_layers": 1,
                           "max_position_embeddings": 64})
    (figure,) = [view_figure(v) for v in layer_views(plan.layer(0), 64) if isinstance(v, KeysSeen)]
    assert figure.layout.xaxis.type == figure.layout.yaxis.type == "log"
    assert figure.layout.xaxis.dtick == figure.layout.yaxis.dtick == 1
    long = hf.from_config({"model_type": "llama", "hidden_size": 64, "num_attention_heads": 4, "num_hidden_layers": 1,
                           "max_position_embeddings": 1 << 20})
    (figure,) = [view_figure(v) for v in layer_views(long.layer(0), 1 << 20) if isinstance(v, KeysSeen)]
    assert figure.layout.xaxis.dtick == 2 and figure.layout.yaxis.dtick == 1   # every hundredfold across


def test_the_wavelength_axis_labels_powers_of_ten_only():
    """Seen at 1280 × 720 on a 64-position model: 2 and 5 between the powers of ten crowded the log axis."""
    from relviz import hf
    from relviz.figures.layers import view_figure
    from relviz.layer_strip import layer_views
    from relviz.mechanisms.view_kinds import Wavelengths

    plan = hf.from_config({"model_type": "llama", "hidden_size": 64, "num_attention_heads": 4, "num_hidden_layers": 1,
                           "max_position_embeddings": 64})
    (figure,) = [view_figure(v) for v in layer_views(plan.layer(0), 64) if isinstance(v, Wavelengths)]
    assert figure.layout.yaxis.type == "log" and figure.layout.yaxis.dtick == 1


def test_the_toeplitz_canvas_draws_in_the_font_streamlit_serves():
    """Defect 8: T5's map at 128 × 128 (the canvas) was drawn in Arial beside the app's charts: its font list named
    'Source Sans Pro' and 'Source Sans 3', and Streamlit serves its web font as 'Source Sans' (screenshot
    d08-t5-128-page.png in the closing note)."""
    import re
    from pathlib import Path

    import streamlit

    from relviz.components import toeplitz_canvas_js

    static = Path(streamlit.__file__).parent / "static"
    served = {name for css in static.rglob("*.css") for name in
              re.findall(r"font-family:\s*\"?(Source Sans[^\";,}]*)", css.read_text(encoding="utf-8", errors="ignore"))}
    assert served, "Streamlit's CSS names no Source Sans font face"
    first = re.search(r"const FONT = \"'([^']+)'", toeplitz_canvas_js()).group(1)
    assert first in served, (first, served)


# Where nobody looked: a projector at 1024 × 768 with the laptop scaled to 125 % (819 CSS px wide)


def test_a_narrow_title_wraps_at_spaces_keeps_its_words_and_the_plot_keeps_its_size():
    from relviz.figures.heatmap import NARROW_TITLE_CHARS, narrow_title

    text = "FIRE bias f(ψ(i − j) / ψ(max(L, i))) of this layer — head 4"
    layout = narrow_title({"title": {"text": text, "font": {"size": 17}}, "height": 470, "margin": {"t": 40, "b": 50}})
    lines = layout["title"]["text"].split("<br>")
    assert len(lines) == 3 and all(len(line) <= NARROW_TITLE_CHARS for line in lines), lines
    assert " ".join(lines) == text and layout["title"]["font"] == {"size": 17}
    assert layout["height"] - layout["margin"]["t"] == 470 - 40          # the plot keeps its height
    two = narrow_title({"title": {"text": "T5 bucket of j − i (32 buckets, max_distance 128)"}, "margin": {"t": 40}})
    one = narrow_title({"title": {"text": "short"}, "margin": {"t": 40}})
    assert two["title"]["text"].count("<br>") == 1 and one["margin"]["t"] == two["margin"]["t"]  # side by side: level
    assert layout["margin"]["t"] > two["margin"]["t"]                     # a third line gets its room
    kept = narrow_title({"title": {"text": "a<br><sup>a note in small type that is longer than thirty</sup>"}})
    assert kept["title"]["text"] == "a<br><sup>a note in small type that is longer than thirty</sup>"


def test_live_attention_s_head_and_structure_titles_fit_half_a_scaled_projector_page():
    """At 1024 × 768 the structure's title was cut to "T5 bucket of j − i (32 buckets, max_d", at 819 px the head's
    too: every shipped model's pair of titles is wrapped to the half page, and both plots start level."""
    from relviz.figures.attention import attention_heatmap_parts, structure_heatmap_parts
    from relviz.figures.heatmap import NARROW_TITLE_CHARS
    from relviz.inspection import position_structure
    from relviz.training import load_checkpoint, scan_checkpoints

    drawn = 0
    for info in scan_checkpoints().checkpoints:
        model = load_checkpoint(info.name).model
        for layer in range(model.config.n_layers):
            structure = position_structure(model, 12, layer)
            if structure is None:
                continue
            head = structure_heatmap_parts(structure, head=3)[1]
            weights = attention_heatmap_parts(np.full((12, 12), 1 / 12, np.float32), layer=layer, head=3)[1]
            for layout in (head, weights):
                lines = layout["title"]["text"].split("<br>")
                assert all(len(line) <= NARROW_TITLE_CHARS for line in lines), (info.name, lines)
            assert " ".join(head["title"]["text"].split("<br>")) == structure.title + (
                " — head 4" if structure.per_head else "")
            drawn += 1
            if len(head["title"]["text"].split("<br>")) <= 2:
                assert head["margin"]["t"] == weights["margin"]["t"], info.name
    assert drawn >= 8


def test_the_images_pages_pair_matrices_side_by_side_wrap_their_titles():
    """At 1024 × 768 "Δh of every patch pair (16 × 16 patches, 65,536 pairs)" ran off its half of the page."""
    from relviz import show_vision
    from relviz.figures.heatmap import NARROW_TITLE_CHARS

    for axis in "hw":
        text = show_vision.patch_pairs(16, 16, query_row=5, query_col=5, axis=axis).layout.title.text
        lines = text.split("<br>")
        assert len(lines) >= 2 and all(len(line) <= NARROW_TITLE_CHARS for line in lines), lines
        assert " ".join(lines) == f"Δ{axis} of every patch pair (16 × 16 patches, 65,536 pairs)"
        assert any("16 × 16" in line for line in lines), lines     # never "16 ×" on one line and "16" on the next


def test_the_wavelength_chart_s_legend_fits_its_column():
    """At 1024 × 768 the RoPE page's legend ran off the chart ("…in 8,192 positions, rec"): each entry is wrapped to
    the width its 3/5 of a projector's page holds."""
    from relviz.figures.rope import LEGEND_CHARS, wavelength_figure

    inv_freq = 10000.0 ** (-np.arange(64) / 64)
    figure = wavelength_figure(inv_freq / 4, inv_freq, length=1_048_576, original=4096, rule="dynamic")
    names = [trace.name for trace in figure.data if trace.name]
    assert len(names) == 2 and any("1,048,576 positions" in name.replace("<br>", " ") for name in names)
    assert all(len(line) <= LEGEND_CHARS for name in names for line in name.split("<br>")), names


def test_the_cost_charts_legend_names_wrap_to_their_columns_and_keep_every_word():
    """At 1024 px and at 819 px the memory wall's and the forward time's legend names ran 24–83 px past their charts
    (one a row, unwrapped): each is wrapped to its column's budget, reads the same with its breaks as spaces, and
    the bottom margin holds every line (the plot keeps its height)."""
    import json

    from relviz.experiments import IMPLEMENTATIONS
    from relviz.figures.experiments import TIME_CHARS, WALL_CHARS, memory_wall_figure, time_figure
    from test_figures_experiments_colours import RESULTS

    section = json.loads(RESULTS.read_text())["experiments"]["cost"]
    for figure, chars in ((memory_wall_figure(section), WALL_CHARS), (time_figure(section), TIME_CHARS)):
        names = [t.name for t in figure.data if t.showlegend is not False]
        lines = [line for name in names for line in name.split("<br>")]
        assert all(len(line) <= chars for line in lines), [line for line in lines if len(line) > chars]
        assert any("<br>" in name for name in names)                    # the long ones did wrap
        plain = {name.replace("<br>", " ") for name in names}
        assert {label for label in IMPLEMENTATIONS.values()} <= {n.removeprefix("measured: ") for n in plain}
        margin = figure.layout.margin
        assert margin.b >= 64 + 31 * len(lines)                         # the axis and every legend line
        assert figure.layout.height - margin.t - margin.b >= 300        # the plot kept its room


def test_table_2_title_hangs_inside_its_chart():
    """Its title sat 2 px above the chart at every size: hung from the figure's top edge, in a margin that holds it."""
    figure = shaw_reference_figure(SHAW_TABLE2)
    title = figure.layout.title
    assert (title.yref, title.y, title.yanchor, title.x, title.xanchor) == ("container", 1, "top", 0, "left")
    assert title.text == "Shaw et al., Table 2"
    assert figure.layout.height - figure.layout.margin.t == 260 - 30     # the plot keeps its height
