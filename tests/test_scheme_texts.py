"""The words about each scheme live with their concept, and every registered scheme has them.

One rule: the concept's module owns its sentences. What the Live attention page shows beside a structure and under
each parameter view is the layer's mechanism's (relviz.mechanisms: functions of the view's facts, carried in the
view), and so is the notice where a layer has no structure to draw; a scheme's module says the offset study's words
for its exact range. A scheme added without its words fails here.
"""
from __future__ import annotations

import re

import numpy as np
import pytest
import torch

from relviz.experiments.plan import Setting
from relviz.experiments.readings import exact_range_words
from relviz.inspection import no_structure_text, parameter_caption, parameter_views, position_structure, structure_text
from relviz.model import ModelConfig, build_model
from relviz.schemes import REGISTRY
from relviz.mechanisms.view_kinds import Note


def _model(scheme: str, **fields):
    return build_model(ModelConfig(scheme=scheme, **fields), seed=0).eval()


@pytest.mark.parametrize("scheme", list(REGISTRY))
def test_every_scheme_has_the_words_for_what_it_shows(scheme):
    """Whatever the scheme shows (a structure, parameter views, or neither), the page has words for it,
    filled from the view's facts (a fact the words cite and the scheme does not give fails here)."""
    model = _model(scheme)
    structure = position_structure(model, 24)
    if structure is None:
        text = no_structure_text(model, 1)
        assert text == model.position.mechanism(1).no_structure and len(text) > 40
    else:
        text = structure_text(structure)
        assert len(text) > 40 and "{" not in text
    views = parameter_views(model, length=40, train_length=32, layer=1)
    assert views                     # the mechanism's, or its label and description (Scheme.parameter_views)
    for view in views:
        caption = parameter_caption(view)
        assert len(caption) > 40 and "{" not in caption


def test_every_schemes_words_are_its_mechanisms():
    """No table of words keyed by scheme name: what the page says beside a structure and under a parameter view is
    carried by the view, written by the mechanism's module; no scheme writes its own."""
    for scheme, cls in REGISTRY.items():
        model = _model(scheme)
        structure = position_structure(model, 8)
        if structure is not None:
            own = model.position.mechanism(0).structure(8, model.config.causal)
            assert structure_text(structure) == structure.caption == own.caption != ""
        for words in ("structure", "structure_text", "parameter_views", "parameter_caption"):
            assert words not in vars(cls), (scheme, words)
        for view in parameter_views(model, length=8, train_length=8, layer=0):
            assert parameter_caption(view) == (view.text if isinstance(view, Note) else view.caption) != ""
        if cls.exact_shifts({p.name: p.default for p in cls.params}, [1, 2]) is not None:
            assert "exact_range_words" in vars(cls), scheme


def test_a_mechanism_without_views_is_named_in_its_own_words():
    """Scheme.parameter_views never leaves the page's parameter panel empty: a mechanism with no view of its own is
    shown as a note of its label and description (the base Mechanism has none)."""
    from relviz.mechanisms.base import ToyMechanism
    from relviz.schemes.base import Scheme

    class Bare(ToyMechanism):
        name = "bare_for_test"

        def describe(self):
            return "a bare mechanism with no views"

    class BareScheme(Scheme):
        name = "bare_for_test"

        def mechanism(self, layer):
            return Bare()

    views = BareScheme(ModelConfig()).parameter_views(length=8, train_length=8, layer=0)
    assert views == [Note("bare_for_test", "a bare mechanism with no views")]


@pytest.mark.parametrize("scheme", list(REGISTRY))
def test_every_scheme_with_a_per_offset_table_has_its_exact_range_words(scheme):
    cls = REGISTRY[scheme]
    params = {p.name: p.default for p in cls.params}
    shifts = list(range(1, 41))
    exact = cls.exact_shifts(params, shifts)
    if exact is None:
        return
    first_out = min(s for s in shifts if s not in exact)
    where, beyond = exact_range_words(Setting(scheme, scheme, scheme, params), exact, first_out)
    assert str(max(exact)) in where and beyond


def test_the_numbers_in_the_words_are_the_schemes():
    """The facts a view carries are what its words quote (the sentences were moved, not rewritten)."""
    shaw = position_structure(_model("shaw", clip=4), 12)
    assert "clipped to ±4, picks one of 9 learned vectors" in structure_text(shaw)
    assert "Every key 4 or more back reads the same vector." in structure_text(shaw)
    both = position_structure(_model("shaw", clip=4, causal=False), 12)
    assert "every key 4 or more ahead, the other end's" in structure_text(both)
    t5 = position_structure(_model("t5"), 12)
    assert "|j − i| < 16" in structure_text(t5) and "bucket 0" in structure_text(t5)
    alibi = position_structure(_model("alibi"), 12)
    assert "(slopes 0.25, 0.0625, 0.01562, 0.003906)" in structure_text(alibi)   # 4 heads: 2^-2, 2^-4, ...
    kerple = _model("kerple")
    with torch.no_grad():
        kerple.position.raw_r1[1] = 3.0
    curve, = parameter_views(kerple, length=30, train_length=16, layer=0)
    caption = parameter_caption(curve)
    r1 = float(torch.nn.functional.softplus(torch.tensor(3.0)))
    assert f"Steepest here: head 2 (r1 = {r1:.3g}, r2 = 1)" in caption
    assert f"{float(curve.bias[1, 0]):.2f} at j − i = -29" in caption
    fire = _model("fire")
    curve, = parameter_views(fire, length=30, train_length=16, layer=5)   # 2 layers: the last one's
    assert curve.facts["layer"] == 1 and re.search(r"in this layer .* the query i = 29 looking back",
                                                   parameter_caption(curve))


def test_kerple_caption_says_the_penalty_is_concave_not_the_curve():
    """−r1·log(1 + r2·d) is convex in d; the penalty r1·log(1 + r2·d) is the concave one."""
    curve, = parameter_views(_model("kerple"), length=30, train_length=16, layer=0)
    bias = curve.bias[0, ::-1]                                       # distance 0, 1, 2, ...
    assert (np.diff(bias, 2) > 0).all()                              # the drawn curve: convex
    caption = parameter_caption(curve)
    assert "The penalty is concave in the distance" in caption and "curves are concave" not in caption


def test_alibi_caption_names_the_slopes_rule_for_any_head_count():
    power, = parameter_views(_model("alibi", n_heads=4), length=10, train_length=8, layer=0)
    assert "4 slopes from 0.25" in parameter_caption(power)                    # 2^(−8/4)
    other, = parameter_views(_model("alibi", n_heads=6, d_model=48), length=10, train_length=8, layer=0)
    caption = parameter_caption(other)
    assert "6 slopes from 0.25" in caption and "every other slope of 2p beyond a power of 2" in caption   # p = 4
    assert "No head can prefer offset −s over −s + 1" in caption
