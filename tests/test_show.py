"""relviz.show, the notebook API: every function runs its documented example, returns plain
Plotly figures, and draws the library's exact numbers (it wraps relviz.figures, like the pages)."""
from __future__ import annotations

import inspect
import re

import numpy as np
import plotly.colors
import plotly.graph_objects as go
import pytest
import torch

import relviz
import relviz.show as show
import relviz.show_experiments
import relviz.show_layers
import relviz.show_live
import relviz.show_vision
from plotly_data import figure_json, heatmap_values
from relviz.absolute import diagonal_range, toeplitz_deviation
from relviz.figures import skew as skew_figures
from relviz.positions import alibi_slopes, alibi_slopes_geometric, shaw_clip_index, t5_bucket_map

EXAMPLE = re.compile(r"Example: ``(show\.[^`]+)``")


#: relviz.show and the modules whose pictures it re-exports.
SHOW_MODULES = (show, relviz.show_live, relviz.show_experiments, relviz.show_layers, relviz.show_vision)
#: pictures a page draws from its settings, defined beside their figures and re-exported by relviz.show
PAGE_PICTURES = {"relviz.figures.absolute": ("sinusoidal_encoding_map", "sinusoidal_similarity_map",
                                             "sinusoidal_offset_curve", "sinusoidal_shift", "alibi_bias", "alibi_slopes",
                                             "alibi_lines")}


def test_every_function_is_exported_and_documented_with_one_example():
    public = {name for module in SHOW_MODULES for name, f in inspect.getmembers(module, inspect.isfunction)
              if f.__module__ == module.__name__ and not name.startswith("_")}
    public |= {name for module, names in PAGE_PICTURES.items() for name in names
               if getattr(show, name).__module__ == module}
    assert public == set(show.__all__)
    for name in show.__all__:
        doc = getattr(show, name).__doc__ or ""
        assert len(EXAMPLE.findall(doc)) == 1, f"show.{name}: its docstring needs one 'Example: ``show.…``'"


@pytest.fixture(scope="module")
def examples() -> dict[str, object]:
    """What each function's documented example returns (run once, shared by the tests below)."""
    out = {}
    for name in show.__all__:
        code = EXAMPLE.search(getattr(show, name).__doc__).group(1)
        assert code.startswith(f"show.{name}("), code
        out[name] = eval(code, {"show": show})  # noqa: S307 (our own docstring)
    return out


@pytest.mark.parametrize("name", show.__all__)
def test_the_documented_example_returns_plotly_figures(examples, name):
    result = examples[name]
    figures = result if isinstance(result, list) else [result]
    assert figures and all(type(f) is go.Figure for f in figures), name
    assert all(f.data for f in figures), f"show.{name}: an empty figure"


def test_show_is_reachable_from_a_plain_import():
    assert relviz.show is show


def test_t5_buckets_draws_the_reference_buckets():
    fig = show.t5_buckets(num_buckets=16, max_distance=40, bidirectional=False, length=24, k_len=30, q_offset=3)
    expected = t5_bucket_map(24, 30, num_buckets=16, max_distance=40, bidirectional=False, q_offset=3, device="cpu")
    np.testing.assert_array_equal(heatmap_values(figure_json(fig)), expected.numpy())


def test_shaw_index_draws_the_reference_index():
    fig = show.shaw_index(12, 9, k=2, q_offset=1)
    np.testing.assert_array_equal(heatmap_values(figure_json(fig)),
                                  shaw_clip_index(12, 9, k=2, q_offset=1, device="cpu").numpy())


def test_skew_steps_has_one_panel_per_step_with_the_steps_numbers():
    causal = show.skew_steps(L=5, seed=3)
    demo = skew_figures.demo_inputs(5, 3)
    steps = skew_figures.causal_steps(demo)
    titles = [a.text for a in causal.layout.annotations]
    assert len(titles) == 5 and titles[0].startswith("1 ·") and titles[-1].startswith("5 ·")
    values = [t for t in causal.data if t.type == "heatmap" and t.name == "values"]
    assert len(values) == 5
    for trace, name in zip(values, ("qer", "padded", "reshaped", "skewed", "masked")):
        np.testing.assert_array_equal(np.asarray(trace.z, dtype=np.float32), steps[name].values)
    assert sum(bool(t.showscale) for t in values) == 1  # one shared colour bar
    assert {t.xaxis for t in values} == {"x", "x2", "x3", "x4", "x5"}
    bidirectional = show.skew_steps(L=5, seed=3, bidirectional=True)
    assert len(bidirectional.layout.annotations) == 3
    with pytest.raises(ValueError, match="colour_by"):
        show.skew_steps(L=5, colour_by="rainbow")


def test_attention_draws_the_models_weights():
    from relviz.inspection import run_view
    from relviz.training import load_checkpoint

    text = "3141592653589793"
    checkpoint = load_checkpoint("t5-shift")
    weights = run_view(checkpoint.model, checkpoint.info.task, text).weights
    fig = show.attention_head("t5-shift", text=text, layer=2, head=3)
    np.testing.assert_allclose(np.asarray(heatmap_values(figure_json(fig)), dtype=np.float32), weights[1, 2],
                               atol=1e-6)
    assert show.attention("t5-shift", text=text).data


def test_position_structure_draws_the_layers_mechanisms():
    """FIRE's function is each layer's own: the structure drawn is the chosen layer's (layers count from 1)."""
    from relviz.training import load_checkpoint

    model = load_checkpoint("fire-shift").model
    for layer, fig in ((3, show.position_structure("fire-shift", 16, layer=3)),
                       (1, show.position_structure("fire-shift", 16))):
        expected = model.position.structure(16, layer - 1).values[0]                 # [L, L], head 1
        drawn = np.asarray(heatmap_values(figure_json(fig)), dtype=np.float32)
        assert np.allclose(drawn[np.tril_indices(16)], expected[np.tril_indices(16)]), layer
    assert not np.allclose(model.position.structure(16, 2).values, model.position.structure(16, 0).values)


@pytest.mark.parametrize("call, message", [
    (lambda: show.attention_head("t5-shift", layer=0), "layer must be an integer from 1 to 2"),
    (lambda: show.alibi_bias(16, heads=4, head=5), "head must be an integer from 1 to 4"),
    (lambda: show.relative_intro(["a", "b"], query=2), "query must be an integer from 0 to 1"),
    (lambda: show.t5_buckets(num_buckets=2, max_distance=8), "num_buckets"),
    (lambda: show.position_structure("none-shift"), "has no position structure"),
    (lambda: show.position_structure("fire-shift", layer=4), "layer must be an integer from 1 to 3"),
])
def test_bad_arguments_raise_value_error_naming_the_parameter(call, message):
    with pytest.raises(ValueError, match=message):
        call()


# Greyscale print (tests/test_export.py checks the app's SVG/PNG export button).

def _lightness(colour: str) -> float:
    """CIE L* (0 black .. 100 white) of an 'rgb(...)', 'rgba(...)' or '#rrggbb' colour."""
    if colour.startswith("#"):
        rgb = plotly.colors.hex_to_rgb(colour)
    else:
        rgb = [float(v) for v in re.findall(r"[\d.]+", colour)[:3]]
    linear = [(c / 255) / 12.92 if c / 255 <= 0.04045 else ((c / 255 + 0.055) / 1.055) ** 2.4 for c in rgb]
    y = 0.2126 * linear[0] + 0.7152 * linear[1] + 0.0722 * linear[2]
    return 116 * (y ** (1 / 3) if y > 216 / 24389 else (24389 / 27 * y + 16) / 116) - 16


def _scale_lightness(scale) -> np.ndarray:
    if isinstance(scale, str):
        scale = plotly.colors.get_colorscale(scale)
    return np.array([_lightness(colour) for _, colour in scale])


def _monotone(values: np.ndarray, tolerance: float = 1.0) -> bool:
    steps = np.diff(values)
    return bool((steps >= -tolerance).all() or (steps <= tolerance).all())


def _diverging(values: np.ndarray) -> bool:
    """Light in the middle, monotone towards both ends."""
    top = int(np.argmax(values))
    return 0 < top < len(values) - 1 and _monotone(values[: top + 1]) and _monotone(values[top:])


def _signed(figure, n: int) -> bool:
    """The heatmap's true values (a discrete map's shift undone) have both signs, or its colour
    range is centred on 0: the sign is what the diverging scale shows."""
    trace = figure.data[n]
    if trace.zmid == 0 or (trace.zmin is not None and trace.zmax is not None and trace.zmin == -trace.zmax):
        return True
    values = np.asarray(heatmap_values(figure_json(figure), n), dtype=float)
    return bool(np.nanmin(values) < 0 < np.nanmax(values))


#: Heatmaps whose colours are categories, not an ordered scale: figure name -> the z rows they colour.
CATEGORICAL = {"prediction[0]": slice(1, None)}  # rows 1-2 (target, predicted) carry the status


def _categories_apart(figure, n: int, rows: slice, gap: float = 10.0) -> bool:
    trace = figure.data[n]
    used = np.unique(np.asarray(heatmap_values(figure_json(figure), n))[rows])
    bands = len(trace.colorscale) // 2  # one solid band per category
    grey = sorted(_lightness(trace.colorscale[2 * int(v)][1]) for v in used if 0 <= v < bands)
    return len(grey) == len(used) and bool((np.diff(grey) >= gap).all())


def _figures(examples: dict[str, object]):
    for name, result in examples.items():
        for n, figure in enumerate(result if isinstance(result, list) else [result]):
            yield f"{name}[{n}]", figure
    yield "skew_steps(distance)", show.skew_steps(L=5, colour_by="distance")
    yield "skew_steps(source row)", show.skew_steps(L=5, colour_by="source row")
    yield "position_structure(t5)", show.position_structure("t5-shift")


def test_heatmaps_are_legible_in_greyscale(examples):
    """Every heatmap's colour scale has monotone lightness (CIE L*), so a greyscale print keeps the
    order of the values; or it is diverging (light in the middle) on data whose sign matters; or
    it colours categories whose greys stay apart."""
    checked, problems = 0, []
    for name, figure in _figures(examples):
        for n, trace in enumerate(figure.data):
            if trace.type != "heatmap" or trace.colorscale is None:
                continue
            lightness = _scale_lightness(trace.colorscale)
            checked += 1
            if _monotone(lightness):
                continue
            if _diverging(lightness) and _signed(figure, n):
                continue
            if name in CATEGORICAL and _categories_apart(figure, n, CATEGORICAL[name]):
                continue
            problems.append(f"{name} trace {trace.name!r}: lightness {np.round(lightness, 0).tolist()}")
    assert checked >= 20
    assert problems == []



# The two library helpers the pages and relviz.show now share.

def test_diagonal_range_is_min_and_max_per_diagonal():
    matrix = torch.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
    lo, hi = diagonal_range(matrix)   # diagonals j − i = −1, 0, 1, 2
    assert lo.tolist() == [4.0, 1.0, 2.0, 3.0] and hi.tolist() == [4.0, 5.0, 6.0, 3.0]
    assert toeplitz_deviation(matrix) == 4.0
    assert toeplitz_deviation(torch.zeros(0, 3)) == 0.0


def test_geometric_slopes_match_the_reference_only_for_powers_of_two():
    for heads in (1, 2, 8, 16):
        torch.testing.assert_close(alibi_slopes_geometric(heads), alibi_slopes(heads))
    for heads in (3, 6, 12):
        assert not torch.allclose(alibi_slopes_geometric(heads), alibi_slopes(heads))
    with pytest.raises(ValueError, match="num_heads"):
        alibi_slopes_geometric(0)


def test_unknown_experiment_settings_are_refused():
    with pytest.raises(ValueError, match="settings must be ids from"):
        show.offset_resolution_detail(("shaw-k99",))


def test_rope_scores_and_decay_draw_the_library_numbers():
    from relviz.rope import content_scores, decay_curves, rope_presets

    config = rope_presets()["phi-3-mini-128k"][1]
    fig = show.rope_scores("phi-3-mini-128k", length=131072, window=16, same=False, seed=2)
    expected = content_scores(config, 131072, 16, same=False, seed=2).matrix().numpy().astype(np.float32)
    np.testing.assert_array_equal(heatmap_values(figure_json(fig)), expected)
    decay = show.rope_decay("phi-3-mini-128k", length=65536)
    curves = decay_curves(config, 65536)
    np.testing.assert_array_equal(np.asarray(decay.data[0].x), curves.distances.numpy())
    np.testing.assert_array_equal(np.asarray(decay.data[0].y), curves.bound.numpy())
    assert [t.name for t in decay.data][1] == "RoFormer bound / its value at 0, unscaled θ"
    # On a log axis plotly reads annotation x as log10(x): the context labels sit at their lines and the
    # axis ends at the context (a vline annotation at x = 65536 once stretched it to 10^65536).
    import math
    assert decay.layout.xaxis.range[1] == pytest.approx(math.log10(65536) + 0.02)
    assert sorted(a.x for a in decay.layout.annotations) == pytest.approx([math.log10(4096), math.log10(65536)])
    assert sorted(a.text.strip() for a in decay.layout.annotations) == ["context 65,536", "original 4,096"]
    with pytest.raises(ValueError, match="preset must be one of"):
        show.rope_scores("gpt-5")


def test_the_rope_decay_axis_labels_decades_only():
    """Over 2-4 decades plotly labelled 2 and 5 between the decades at 9 px (3/4 of the tick font): unreadable on a
    projector (tests/browser_sweep.py at 1440 x 900, the RoPE page)."""
    for length in (256, 8192, 2 ** 20):
        assert show.rope_decay("llama-3.1-8b", length=length).layout.xaxis.dtick == 1
    # the Images page's pairs (10.5 px there), 2-D RoPE's and M-RoPE's
    assert show.rope2d_pairs(64, 16, 16).layout.xaxis.dtick == 1
    assert show.mrope_pairs().layout.xaxis.dtick == 1
