"""relviz.inspection: mean attention by offset, the scheme's value per cell, learned parameters."""
from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from relviz.mechanisms.vectors import vector_table_caption
from relviz.inspection import parameter_caption
from relviz.attention import skew_attention
from relviz.absolute import sinusoidal_encoding
from relviz.inspection import (
    column_attention,
    mean_attention_by_offset,
    offset_findings,
    parameter_views,
    peak_offsets,
    position_structure,
    random_text,
    resize_text,
    run_view,
)
from relviz.model import SCHEMES, ModelConfig, build_model
from relviz.mechanisms.skew import skew_rows
from relviz.schemes.view_kinds import BiasCurve, SimilarityMatrix, VectorNorms, most_distinct, relative_share
from relviz.mechanisms.view_kinds import Note, Wavelengths
from relviz.positions import alibi_bias, alibi_slopes, shaw_clip_index, t5_bucket, t5_bucket_map
from relviz.t5_notes import curve_caption
from relviz.tasks import make_task
from relviz.training import load_checkpoint


def naive_mean_by_offset(w: np.ndarray) -> dict[int, float]:
    length = w.shape[-1]
    sums: dict[int, float] = {}
    counts: dict[int, int] = {}
    for i in range(length):
        for j in range(length):
            sums[j - i] = sums.get(j - i, 0.0) + float(w[i, j])
            counts[j - i] = counts.get(j - i, 0) + 1
    return {d: sums[d] / counts[d] for d in sums}


@pytest.mark.parametrize("length", [1, 2, 7, 16])
def test_mean_attention_by_offset_matches_a_naive_loop(length):
    rng = np.random.default_rng(length)
    weights = rng.random((2, 3, length, length)).astype(np.float32)
    profile = mean_attention_by_offset(weights)
    assert profile.offsets.tolist() == list(range(-(length - 1), length))
    assert profile.counts.tolist() == [length - abs(d) for d in profile.offsets]
    assert profile.mean.shape == (2, 3, 2 * length - 1)
    for layer in range(2):
        for head in range(3):
            expected = naive_mean_by_offset(weights[layer, head])
            got = dict(zip(profile.offsets.tolist(), profile.mean[layer, head].tolist()))
            for d, value in expected.items():
                assert got[d] == value  # float64 sums in row-major order: the loop's, to the last bit


def test_mean_attention_by_offset_takes_tensors_and_refuses_bad_shapes():
    w = torch.rand(4, 4)
    assert mean_attention_by_offset(w).mean.shape == (7,)
    with pytest.raises(ValueError, match=r"\[\.\.\., L, L\]"):
        mean_attention_by_offset(np.zeros((3, 4)))
    with pytest.raises(ValueError, match="floating"):
        mean_attention_by_offset(torch.zeros(3, 3, dtype=torch.long))


def test_peak_offsets_ignore_future_and_thin_corners():
    length = 16
    w = np.zeros((1, 2, length, length))
    for i in range(length):
        w[0, 0, i, max(i - 3, 0)] = 1.0           # head 0: offset −3
    w[0, 1] = np.tril(np.ones((length, length))) / np.arange(1, length + 1)[:, None]
    w[0, 1, length - 1, 0] = 50.0                # one far corner cell: not a pattern
    w[0, 1, 0, length - 1] = 50.0                # a future cell of a causal model: ignored
    profile = mean_attention_by_offset(w)
    peaks = peak_offsets(profile, causal=True)
    assert peaks[0, 0] == -3
    assert peaks[0, 1] != -(length - 1) and peaks[0, 1] <= 0


def test_column_attention():
    w = np.zeros((3, 3))
    w[1:, 1] = [0.5, 1.0]
    assert column_attention(w, 1) == pytest.approx(0.75)


def test_random_text_is_seeded_and_resize_keeps_the_start():
    a = random_text(40, 7)
    assert a == random_text(40, 7) and a != random_text(40, 8)
    assert len(a) == 40 and set(a) <= set("0123456789")
    assert resize_text("12345", 3, 0) == "123"
    longer = resize_text("12345", 9, 4)
    assert longer[:5] == "12345" and longer[5:] == random_text(9, 4)[5:]
    with pytest.raises(ValueError, match="length"):
        random_text(0, 1)


# ---------------------------------------------------------------------------------------
# The scheme's value of every cell


def model(scheme: str, **changes):
    return build_model(ModelConfig(scheme=scheme, **changes), seed=1).eval()


def test_structure_t5_is_the_bucket_map_and_the_learned_bias():
    m = model("t5", num_buckets=16, max_distance=40)
    s = position_structure(m, 50)
    expected = t5_bucket_map(50, num_buckets=16, max_distance=40, bidirectional=False, device="cpu").numpy()
    assert np.array_equal(s.values[0], expected)
    assert s.discrete == (0, 15) and s.masked_future and s.toeplitz and not s.per_head
    table = m.position.bias.detach().numpy()
    bias = s.hover_fields(2)["learned bias (this head)"]
    assert np.allclose(bias, table[expected, 2])


def test_structure_t5_bidirectional_model():
    m = model("t5", causal=False)
    s = position_structure(m, 20)
    assert np.array_equal(s.values[0], t5_bucket_map(20, bidirectional=True, device="cpu").numpy())
    assert not s.masked_future


def test_structure_shaw_is_the_clip_index():
    s = position_structure(model("shaw", clip=3), 10)
    assert np.array_equal(s.values[0], shaw_clip_index(10, k=3, device="cpu").numpy())
    assert s.values[0][0].tolist() == [3, 4, 5, 6, 6, 6, 6, 6, 6, 6]  # FACTS.md example
    assert s.discrete == (0, 6)


def test_structure_alibi_is_the_bias_per_head():
    s = position_structure(model("alibi"), 12)
    assert s.per_head and s.values.shape == (4, 12, 12)
    assert np.allclose(s.values, alibi_bias(12, num_heads=4, device="cpu").numpy())
    assert np.allclose(s.head_values(1), s.values[1])


@pytest.mark.parametrize("length, distances", [(6, 10), (10, 4), (5, 5)])
def test_skew_rows_are_the_rows_skew_attention_uses(length, distances):
    rows = skew_rows(length, distances)
    for i in range(length):
        for j in range(length):
            expected = max(j - i + distances - 1, 0) if j <= i else -1
            assert rows[i, j] == expected
    # the attention the model computes equals softmax(q·k + q·E_r[row]) with those rows
    gen = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(1, 2, length, 8, generator=gen) for _ in range(3))
    e_r = torch.randn(distances, 8, generator=gen)
    _, weights = skew_attention(q, k, v, e_r, need_weights=True)
    scale = 1 / math.sqrt(8)
    index = torch.from_numpy(np.maximum(rows, 0))
    relative = torch.einsum("bhid,ijd->bhij", q, e_r[index])
    logits = scale * (q @ k.transpose(-1, -2) + relative)
    logits = logits.masked_fill(torch.from_numpy(rows < 0), float("-inf"))
    assert torch.allclose(weights, logits.softmax(-1), atol=1e-6)


def test_structure_skew_marks_future_cells():
    s = position_structure(model("skew", skew_distances=8), 12)
    assert np.array_equal(s.values[0], skew_rows(12, 8))
    assert s.discrete == (-1, 7)


def test_structure_sinusoidal_is_the_dot_product_of_the_position_vectors():
    s = position_structure(model("sinusoidal"), 20)
    table = sinusoidal_encoding(20, 64, dtype=torch.float64, device="cpu")
    expected = (table @ table.T / 32).numpy()
    assert np.allclose(s.values[0], expected, atol=1e-5)
    assert s.toeplitz


def test_structure_rope_is_the_mean_cosine_of_the_relative_turn():
    s = position_structure(model("rope", rope_base=100.0), 9)
    theta = 100.0 ** (-np.arange(8) * 2 / 16)
    for i, j in [(0, 0), (3, 1), (2, 8), (8, 0)]:
        assert s.values[0, i, j] == pytest.approx(np.cos((j - i) * theta).mean(), abs=1e-6)


def test_structure_learned_is_the_cosine_of_the_learned_vectors():
    m = model("learned", max_len=16)
    s = position_structure(m, 10)
    t = m.position.table.detach().double()[:10]
    t = t / t.norm(dim=1, keepdim=True)
    assert np.allclose(s.values[0], (t @ t.T).numpy(), atol=1e-6)
    assert not s.toeplitz
    with pytest.raises(ValueError, match="max_len=16"):
        position_structure(m, 17)


def test_structure_none_and_every_scheme_runs():
    assert position_structure(model("none"), 5) is None
    for scheme in SCHEMES:
        s = position_structure(model(scheme), 7)
        if s is not None:
            assert s.values.shape[-2:] == (7, 7)
            assert set(s.hover_fields(0)) >= {s.label}


# ---------------------------------------------------------------------------------------
# Learned parameters


def test_t5_bias_curve_follows_the_buckets_and_marks_the_edges():
    m = model("t5")
    curve = m.position.mechanism(0).curve(140)
    assert curve.offsets[0] == -140 and curve.offsets[-1] == 0 and curve.steps and curve.learned
    buckets = t5_bucket(torch.from_numpy(curve.offsets), bidirectional=False).numpy()
    assert np.array_equal(curve.hover["bucket"], buckets)
    table = m.position.bias.detach().numpy()
    assert np.allclose(curve.bias, table[buckets].T)
    assert curve.facts["last_bucket_start"] == 113  # unidirectional 32/128: the last bucket starts at 113
    assert "begins at distance 113" in curve_caption(32, 128, False)
    changes = {int(e + 0.5) for e in curve.edges}
    assert all(buckets[list(curve.offsets).index(c)] != buckets[list(curve.offsets).index(c - 1)] for c in changes)
    assert len(changes) == len(set(buckets)) - 1
    bi = model("t5", causal=False).position.mechanism(0).curve(140)
    assert bi.facts["last_bucket_start"] == 91 and bi.offsets[-1] == 140


def test_vector_table_views_shaw_and_skew():
    m = model("shaw", clip=4)
    norms, cosine = parameter_views(m, length=20, train_length=8, layer=1)
    assert isinstance(norms, VectorNorms) and isinstance(cosine, SimilarityMatrix)
    assert norms.offsets.tolist() == list(range(-4, 5))
    assert np.allclose(norms.norms[1], m.position.rel_k[1].detach().norm(dim=1).numpy())
    assert norms.second[0] == "a^V"
    assert np.allclose(norms.second[1][0], m.position.rel_v[0].detach().norm(dim=1).numpy())
    assert norms.used.tolist() == [True] * 5 + [False] * 4
    assert np.allclose(np.diagonal(cosine.cosine), 1.0, atol=1e-6) and cosine.facts["layer"] == 1
    assert "this layer" in cosine.title and "layer 2" not in cosine.title + vector_table_caption(cosine, "")
    skew, _ = parameter_views(model("skew", skew_distances=6), length=20, train_length=8, layer=0)
    assert skew.offsets.tolist() == [-5, -4, -3, -2, -1, 0] and skew.second is None


def test_alibi_and_learned_views():
    alibi, = parameter_views(model("alibi", n_heads=8, d_model=64), length=10, train_length=8)
    slopes = alibi_slopes(8, device="cpu").numpy()
    assert isinstance(alibi, BiasCurve) and not alibi.learned
    assert np.allclose(alibi.bias, -slopes[:, None] * np.abs(alibi.offsets)[None, :])
    assert alibi.head_labels[0] == f"head 1: slope {slopes[0]:.4g}"
    note, learned = parameter_views(model("learned", max_len=12), length=10, train_length=8)
    assert isinstance(note, Note) and "position.table [12, " in note.text         # the mechanism's note, then
    assert isinstance(learned, SimilarityMatrix) and learned.cosine.shape == (12, 12) and learned.outline == 8
    rope, = parameter_views(model("rope"), length=10, train_length=8)           # fixed angles: their wavelengths
    assert isinstance(rope, Wavelengths) and rope.length == 10


# ---------------------------------------------------------------------------------------
# Findings and a real checkpoint


def test_findings_name_the_head_that_looks_s_back():
    task = make_task("shift", s=3)
    length = 20
    w = np.zeros((2, 2, length, length))
    w[..., :, :] = np.tril(np.ones((length, length))) / np.arange(1, length + 1)[:, None]
    for i in range(3, length):
        w[1, 0, i] = 0
        w[1, 0, i, i - 3] = 1.0
    profile = mean_attention_by_offset(w)
    findings = offset_findings(task, profile, w, causal=True, scheme="t5")
    assert findings[0].good and "layer 2, head 1 (100%)" in findings[0].text and "−3" in findings[0].text
    flat = np.tril(np.ones((length, length))) / np.arange(1, length + 1)[:, None]
    flat = np.broadcast_to(flat, (1, 1, length, length)).copy()
    none = offset_findings(task, mean_attention_by_offset(flat), flat, causal=True, scheme="none")
    assert not none[0].good and "No head peaks" in none[0].text


def test_findings_for_the_absolute_task_point_at_the_column():
    task = make_task("absolute", p=2)
    length = 8
    w = np.zeros((1, 1, length, length))
    w[0, 0, :, 0] = 1.0
    w[0, 0, 2:, 0] = 0.0
    w[0, 0, 2:, 2] = 1.0
    found = offset_findings(task, mean_attention_by_offset(w), w, causal=True)
    assert found[0].good and "key 2" in found[0].text


def test_run_view_equals_the_checkpoint_run():
    checkpoint = load_checkpoint("t5-shift")
    text = random_text(40, 3)
    view = run_view(checkpoint.model, checkpoint.task, text)
    run = checkpoint.run(text)
    assert view.weights.shape == (2, 4, 40, 40)
    assert np.array_equal(view.weights, torch.stack(run.attentions).numpy())
    assert view.predicted_text == run.predicted_text and view.accuracy == run.accuracy
    assert view.accuracy_between(0, 32) is not None
    profile = mean_attention_by_offset(view.weights)
    found = offset_findings(checkpoint.task, profile, view.weights, causal=True, scheme="t5")
    assert found[0].good and "−5" in found[0].text
    with pytest.raises(ValueError, match="'a'"):
        run_view(checkpoint.model, checkpoint.task, "12a4")


def test_most_distinct_offset_and_relative_share():
    m = model("shaw", clip=3)
    with torch.no_grad():
        table = torch.ones(7, 16)
        table[1] = -1.0  # offset −2 points the other way
        m.position.rel_k[0].copy_(table + 0.01 * torch.randn(7, 16))
    norms, cosine = parameter_views(m, length=10, train_length=8, layer=0)
    assert most_distinct(cosine.cosine, cosine.labels, norms.used) == -2
    assert cosine.facts["most_distinct"] == -2
    assert "j − i = -2" in parameter_caption(cosine)
    learned = model("learned", max_len=12)
    with torch.no_grad():  # a table whose similarity depends on j − i only: rotating 2-d vectors
        angles = torch.arange(12.0)[:, None] * torch.tensor([0.3, 1.1])
        learned.position.table.copy_(torch.cat([angles.cos(), angles.sin()], dim=1).repeat(1, 16))
    cosine = parameter_views(learned, length=12, train_length=12)[-1].cosine
    assert relative_share(cosine, 12) == pytest.approx(1.0, abs=1e-6)
    random = parameter_views(model("learned", max_len=40), length=12, train_length=40)[-1].cosine
    assert relative_share(random, 40) < 0.5


def test_window_findings_compare_with_an_even_spread():
    task = make_task("window_max", w=3)
    length = 12
    sharp = np.zeros((1, 1, length, length))
    for i in range(length):
        sharp[0, 0, i, max(i - 1, 0)] = 1.0
    found = offset_findings(task, mean_attention_by_offset(sharp), sharp, causal=True)
    assert found[0].good and "100%" in found[0].text
    even = np.tril(np.ones((length, length))) / np.arange(1, length + 1)[:, None]
    even = even[None, None]
    found = offset_findings(task, mean_attention_by_offset(even), even, causal=True)
    assert not found[0].good


def _run(correct: list[bool], mask: list[bool]):
    from relviz.inspection import RunView
    m, c = np.array(mask), np.array(correct) & np.array(mask)
    counted = int(m.sum())
    return RunView(text="0" * len(mask), predicted_text="", target_text="", mask=m, correct=c,
                   accuracy=int(c.sum()) / counted if counted else None, weights=np.zeros((1, 1, 1, 1), np.float32))


def test_accuracy_line_counts_within_and_beyond_the_training_length():
    run = _run([True, True, True, False, True, False], [False, True, True, True, True, True])
    assert run.accuracy_line(3) == ("**60.0%** correct over the 5 positions that count · 100.0% within the training "
                                    "length 3 · **33.3% beyond it** (extrapolation) · wrong at positions 3, 5")
    assert run.accuracy_line(6) == "**60.0%** correct over the 5 positions that count · wrong at positions 3, 5"
    assert _run([True] * 3, [True] * 3).accuracy_line(3).endswith(" · no errors")
    assert _run([False] * 25, [True] * 25).accuracy_line(25).endswith("16, 17, 18, 19 …")
    assert _run([True], [False]).accuracy_line(1) is None


def test_live_model_description_names_scheme_task_and_shape():
    from relviz.inspection import LiveModel
    built = model("shaw", n_layers=3, n_heads=2)
    task = make_task("shift", s=2)
    live = LiveModel("k", "mine", built, task, 24, 0.875, 120, "trained in this session")
    text = live.description()
    assert text.startswith("**mine** (trained in this session) · scheme **shaw** (")
    assert f"Task **{task.describe()}**: {task.summary}" in text
    assert "3 layers × 2 heads, causal; trained 120 steps at length **24**" in text and "**87.5%**" in text
    assert live.headline() == f"**mine** · scheme **shaw** · task **{task.describe()}** · 87.5% at its training length 24"


def test_about_the_models_names_every_shipped_shape_that_departs_from_the_common_one():
    """The page's paragraph on the shipped models is built from data: the common shape is ModelConfig's default,
    and each shipped checkpoint with another layer count is named with that count (a scheme that changed its
    training_defaults without its shape_note would be missing here, or refused by the registry)."""
    from relviz.inspection import about_the_models
    from relviz.schemes import get_scheme
    from relviz.training import list_checkpoints

    text, common = about_the_models(), ModelConfig()
    assert text.startswith(f"A small transformer ({common.n_layers} layers, {common.n_heads} heads, "
                           f"d_model {common.d_model}, causal)")
    departing = [info for info in list_checkpoints() if info.model_config.n_layers != common.n_layers]
    assert {info.scheme for info in departing} == {"alibi", "kerple", "fire"}
    for info in departing:
        note = get_scheme(info.scheme).shape_note
        assert note in text and note.split(" (")[0].endswith(f" {info.model_config.n_layers}")
