"""relviz.precision: the Mesh-TensorFlow variant of T5's buckets and T5 buckets in low precision.

The references: Hugging Face's T5 (``_relative_position_bucket``) divides in float32; Mesh
TensorFlow's ``mtf.divide`` by a Python number multiplies by its reciprocal. Both are written out
here independently of relviz, so the tests compare relviz with the formulas, not with itself.
"""
from __future__ import annotations

import math
from fractions import Fraction

import pytest
import torch

import relviz.positions
from test_positions import reference_t5_bucket as hf_reference
from relviz.positions import t5_bucket
from relviz.precision import (
    PRECISIONS,
    mesh_tf_edges,
    precision_changes,
    t5_bucket_exact,
    t5_bucket_in_dtype,
    t5_bucket_mesh_tf,
)


def mesh_tf_reference(n: torch.Tensor, bidirectional: bool, num_buckets: int, max_distance: int) -> torch.Tensor:
    """Mesh TensorFlow's _relative_position_bucket: x / python_number is x * float32(1 / number)."""
    ret = 0
    m = -n
    if bidirectional:
        num_buckets //= 2
        ret += (m < 0).to(torch.long) * num_buckets
        m = m.abs()
    else:
        m = m.clamp(min=0)
    max_exact = num_buckets // 2
    is_small = m < max_exact
    x = torch.log(m.to(torch.float32) * torch.tensor(1.0 / max_exact, dtype=torch.float32))
    x = x * torch.tensor(1.0 / math.log(max_distance / max_exact), dtype=torch.float32)
    x = x * torch.tensor(float(num_buckets - max_exact), dtype=torch.float32)
    large = (max_exact + x.to(torch.long)).clamp(max=num_buckets - 1)
    return ret + torch.where(is_small, m, large)


def test_facts_examples_hf_vs_mesh_tf():
    # num_buckets 34, max_distance 27, bidirectional, j - i = -18: HF 13, Mesh TF 14, exact 14
    n = torch.tensor([-18])
    assert int(t5_bucket(n, num_buckets=34, max_distance=27)) == 13
    assert int(t5_bucket_mesh_tf(n, num_buckets=34, max_distance=27)) == 14
    assert t5_bucket_exact(-18, num_buckets=34, max_distance=27) == 14
    # num_buckets 6, max_distance 81, unidirectional, -27: HF 5, Mesh TF 4, exact 5
    n = torch.tensor([-27])
    assert int(t5_bucket(n, num_buckets=6, max_distance=81, bidirectional=False)) == 5
    assert int(t5_bucket_mesh_tf(n, num_buckets=6, max_distance=81, bidirectional=False)) == 4
    assert t5_bucket_exact(-27, num_buckets=6, max_distance=81, bidirectional=False) == 5


@pytest.mark.parametrize("nb,md,bidir", [(34, 27, True), (6, 81, False), (32, 128, True), (32, 128, False),
                                         (64, 300, True), (10, 1000, False)])
def test_mesh_tf_matches_its_formula_and_edges_list_every_difference(nb, md, bidir):
    n = torch.arange(-2 * md, 2 * md + 1)
    mtf = t5_bucket_mesh_tf(n, num_buckets=nb, max_distance=md, bidirectional=bidir)
    assert torch.equal(mtf, mesh_tf_reference(n, bidir, nb, md))
    hf = hf_reference(n, bidir, nb, md)
    assert torch.equal(t5_bucket(n, num_buckets=nb, max_distance=md, bidirectional=bidir), hf)
    edges = mesh_tf_edges(num_buckets=nb, max_distance=md, bidirectional=bidir)
    differ = n[hf != mtf].tolist()
    assert [e.offset for e in edges] == differ
    for e in edges:
        assert e.hf == int(hf[n == e.offset]) and e.mesh_tf == int(mtf[n == e.offset])
        assert e.exact == t5_bucket_exact(e.offset, num_buckets=nb, max_distance=md, bidirectional=bidir)


def test_textbook_setting_has_no_mesh_tf_edges():
    assert mesh_tf_edges(num_buckets=32, max_distance=128, bidirectional=True) == []
    assert mesh_tf_edges(num_buckets=32, max_distance=128, bidirectional=False) == []


@pytest.mark.parametrize("nb,md,bidir", [(32, 128, True), (34, 27, True), (12, 50, False), (128, 1024, True)])
def test_exact_bucket_agrees_with_fractions(nb, md, bidir):
    """The exact bucket, checked against a Fraction-bounded float64 evaluation away from edges."""
    per_dir = nb // 2 if bidir else nb
    me = per_dir // 2
    for offset in range(-3 * md, 3 * md + 1, 7):
        n = abs(offset) if bidir else max(-offset, 0)
        base = per_dir if (bidir and offset > 0) else 0
        if n < me:
            expected = base + n
        else:
            v = me + math.log(n / me) / math.log(md / me) * (per_dir - me)
            if abs(v - round(v)) < 1e-9:
                continue  # an edge: float64 cannot decide it; the integer comparison in relviz can
            expected = base + min(per_dir - 1, int(v))
        assert t5_bucket_exact(offset, num_buckets=nb, max_distance=md, bidirectional=bidir) == expected


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
@pytest.mark.parametrize("nb,md,bidir", [(32, 128, True), (32, 128, False), (64, 512, True), (8, 20, False)])
def test_low_precision_buckets_match_the_reference_formula_in_that_dtype(dtype, nb, md, bidir):
    n = torch.arange(-3 * md, 3 * md + 1)
    got = t5_bucket_in_dtype(n, dtype, num_buckets=nb, max_distance=md, bidirectional=bidir)
    assert torch.equal(got, hf_reference(n, bidir, nb, md, dtype))


def test_bfloat16_moves_the_facts_offsets():
    changes = precision_changes(num_buckets=32, max_distance=128, bidirectional=True, max_offset=200)
    moved = {abs(c.offset) for c in changes if c.dtype == "bfloat16"}
    assert {16, 32, 90} <= moved
    float32 = {c.offset: c.float32 for c in changes}
    for c in changes:
        assert c.got != c.float32 and c.float32 == float32[c.offset]
        assert c.got == int(t5_bucket_in_dtype(torch.tensor([c.offset]), PRECISIONS[c.dtype]))


def test_positions_docstring_names_hugging_face_and_the_mesh_tf_difference():
    doc = relviz.positions.t5_bucket.__doc__
    assert "Hugging Face" in doc and "Mesh TensorFlow" in doc
    assert "same float32 operations as Mesh TensorFlow" not in doc
    assert "reciprocal" in doc


def test_bad_arguments_name_the_parameter():
    with pytest.raises(ValueError, match="dtype"):
        t5_bucket_in_dtype(torch.tensor([1]), torch.int32)
    with pytest.raises(ValueError, match="max_distance"):
        mesh_tf_edges(num_buckets=32, max_distance=8, bidirectional=True)
    with pytest.raises(ValueError, match="relative_position"):
        t5_bucket_mesh_tf(torch.tensor([1.5]))
    with pytest.raises(ValueError, match="offset"):
        t5_bucket_exact(2**40)


def test_precision_tables_and_snippet_agree_with_the_computation():
    from relviz.precision import (CHANGE_COLUMNS, EDGE_COLUMNS, change_rows, edge_rows, mesh_tf_edges,
                                  precision_changes, precision_window)
    from relviz.snippets import t5_precision_snippet
    assert precision_window(27) == 54 and precision_window(1024) == 2048 and precision_window(5000) == 2048
    settings = dict(num_buckets=34, max_distance=27, bidirectional=True)
    edges = mesh_tf_edges(**settings)
    rows = edge_rows(edges)
    assert [tuple(r) for r in rows] == [EDGE_COLUMNS] * len(edges)
    assert {"j − i": -18, "Hugging Face (relviz)": 13, "Mesh TensorFlow": 14} == \
        {k: v for k, v in next(r for r in rows if r["j − i"] == -18).items() if k != "exact arithmetic"}
    changes = precision_changes(**settings, max_offset=54)
    assert [(r["j − i"], r["precision"]) for r in change_rows(changes)] == [(c.offset, c.dtype) for c in changes]
    assert all(tuple(r) == CHANGE_COLUMNS for r in change_rows(changes))
    namespace: dict = {}
    exec(compile(t5_precision_snippet(34, 27, True, 54), "<snippet>", "exec"), namespace)  # noqa: S102
    shown = {name: sorted(o.tolist()) for name, o in namespace["result"].items()}
    assert shown == {name: sorted(c.offset for c in changes if c.dtype == name) for name in ("bfloat16", "float16")}
    assert [(e.offset, e.hf, e.mesh_tf) for e in namespace["edges"]] == [(e.offset, e.hf, e.mesh_tf) for e in edges]
