"""A shipped toy checkpoint as a plan of mechanisms (relviz.toy_plan): each mechanism computes exactly what
the toy scheme computes in the model's forward, and the Your model page's strip and views draw it."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from relviz.layer_strip import layer_views, strip
from relviz.mechanisms.absolute import LearnedAbsolute
from relviz.mechanisms.fire import FireFunction
from relviz.mechanisms.kerple import KerpleBias
from relviz.mechanisms.alibi import Alibi
from relviz.mechanisms.none import NoPosition
from relviz.mechanisms.pattern import AttentionPattern
from relviz.mechanisms.view_kinds import Note
from relviz.mechanisms.rotation import Rotation
from relviz.mechanisms.t5_bias import T5Bias
from relviz.inspection import parameter_caption, parameter_views, position_structure, structure_text
from relviz.schemes.view_kinds import PositionStructure
from relviz.model import ModelConfig, build_model
from relviz.positions import alibi_bias, expand_toeplitz, offset_range
from relviz.schemes import REGISTRY
from relviz.toy_plan import drawn_schemes, toy_plan
from relviz.training.checkpoints import load_checkpoint

LENGTH = 40


def plan_of(name: str):
    model = load_checkpoint(f"{name}-shift").model
    return model, toy_plan(model, source=name)


@pytest.mark.parametrize("name", list(REGISTRY))
def test_every_layer_applies_the_schemes_mechanism_and_the_strip_draws_it(name):
    model, plan = plan_of(name)
    layers = plan.all_layers()
    assert len(layers) == model.config.n_layers and plan.stack_names == ["decoder"]
    pattern = layers[0].find(AttentionPattern)
    assert pattern is not None and pattern.causal
    assert {cell.layer for cell in strip(plan).cells} == set(range(model.config.n_layers))
    assert layer_views(layers[0], LENGTH)


def test_rotation_turns_q_as_the_toy_rope_does_bit_for_bit():
    model, plan = plan_of("rope")
    rotation = plan.layer(1).find(Rotation)
    q = torch.randn(2, model.config.n_heads, LENGTH, model.config.head_dim, generator=torch.Generator().manual_seed(0))
    forward = model.position.mechanism(1)
    assert torch.equal(rotation.rotate(q, torch.arange(LENGTH)), forward.turn(q, forward.prepare(LENGTH, q)))
    assert not rotation.reciprocal            # the arithmetic it was trained with (tests/test_rope.py)


def test_alibi_slopes_and_curve_are_the_toy_models():
    model, plan = plan_of("alibi")
    alibi = plan.first(Alibi)
    assert np.array_equal(alibi.slopes().numpy(), model.position.mechanism(0).slopes().numpy())
    toy_curve, = model.position.parameter_views(length=LENGTH, train_length=32, layer=0)
    curve = alibi.views(LENGTH, 0)[0]
    common = np.intersect1d(curve.offsets, toy_curve.offsets)
    assert len(common) > 10
    assert np.array_equal(curve.bias[:, np.isin(curve.offsets, common)],
                          toy_curve.bias[:, np.isin(toy_curve.offsets, common)])


def test_alibi_structure_is_the_bias_the_forward_adds():
    """The Live attention page's ALiBi structure is the mechanism's bias, as the forward adds it, bit for bit (and
    the reference formula's values)."""
    model, _ = plan_of("alibi")
    x = torch.zeros(1, LENGTH, model.config.d_model)
    with torch.no_grad():
        added = expand_toeplitz(model.position.prepare(LENGTH, x), LENGTH, LENGTH)          # [H, L, L]
    structure = model.position.structure(LENGTH)
    assert np.array_equal(structure.values, added.numpy())
    assert np.array_equal(structure.values, alibi_bias(LENGTH, num_heads=model.config.n_heads, device="cpu").numpy())


def test_t5_bias_per_offset_is_the_toy_forwards():
    model, plan = plan_of("t5")
    t5 = plan.first(T5Bias)
    x = torch.zeros(1, LENGTH, model.config.d_model)
    with torch.no_grad():
        assert torch.equal(t5.bias_per_offset(LENGTH, LENGTH), model.position.prepare(LENGTH, x))
    assert torch.equal(t5.table, model.position.bias.detach())


def test_learned_table_and_no_position():
    model, plan = plan_of("learned")
    assert torch.equal(plan.first(LearnedAbsolute).table, model.position.table.detach())
    _, plan = plan_of("none")
    assert plan.first(NoPosition) is not None


def test_a_bidirectional_toy_is_an_encoder_and_every_scheme_draws():
    model = build_model(ModelConfig(scheme="t5", causal=False), seed=0)
    plan = toy_plan(model)
    assert plan.stack_names == ["encoder"] and plan.first(T5Bias).bidirectional
    assert set(drawn_schemes()) == set(REGISTRY)
    # its structure on Your model is the page's: both directions' buckets, nothing masked
    drawn, = [v for v in layer_views(plan.layer(1), LENGTH) if isinstance(v, PositionStructure)]
    page = position_structure(model, LENGTH, 1)
    assert not drawn.masked_future and np.array_equal(drawn.values, page.values) and drawn.caption == page.caption
    assert drawn.values[0, 0, -1] != drawn.values[0, -1, 0]          # j − i = ±(L − 1): buckets of their own


@pytest.mark.parametrize("name", list(REGISTRY))
def test_the_plan_draws_the_mechanisms_the_forward_runs(name):
    """Each layer of the plan holds the mechanism the scheme hands its forward (a frozen CPU copy of the same
    parameters), so what Your model draws is what ran."""
    config = ModelConfig(scheme=name, n_layers=2, d_model=16, n_heads=2, d_ff=16)
    model = build_model(config, seed=0)
    plan = toy_plan(model)
    for index in range(config.n_layers):
        ran = model.position.mechanism(index)
        drawn = plan.layer(index).mechanisms[0]
        assert type(drawn) is type(ran) and drawn.settings() == ran.settings()
        assert isinstance(ran, REGISTRY[name].concept)          # the concept the scheme declares, once
    assert plan.scheme == (name if ran.positional else None)


def test_a_scheme_that_runs_its_own_forward_is_refused():
    """A scheme computes its position only through the mechanism it hands out, so each concept has one
    implementation: the registry refuses a scheme that overrides the forward."""
    from relviz.schemes.base import Scheme
    from relviz.schemes.registry import check_scheme

    class OwnForward(Scheme):
        name = "own_forward"

        def attend(self, layer, q, k, v, *, shared=None, need_weights=False):
            return q, None

    with pytest.raises(RuntimeError, match="scheme 'own_forward' overrides attend"):
        check_scheme(OwnForward)


@pytest.mark.parametrize("name", list(REGISTRY))
def test_the_live_attention_pages_parameter_views_are_the_mechanism_views_your_model_draws(name):
    """Every scheme: the Live attention page (relviz.inspection) draws the views of the layer's mechanism, the ones
    Your model's layer shows, with the same words; knowing the training length, a view may say more (T5: the
    buckets training reached, after Your model's caption) and a mechanism may add one (the learned table's
    similarity), never replace one."""
    model, plan = plan_of(name)
    for index in range(model.config.n_layers):
        layer, position = plan.layer(index), plan.layer(index).mechanisms[0]
        drawn = position.views(LENGTH, layer)
        # what Your model draws for the layer: the position mechanism's views first (then the attention pattern's)
        assert [v.title for v in layer_views(layer, LENGTH)[:len(drawn)]] == [v.title for v in drawn]
        page = parameter_views(model, length=LENGTH, train_length=32, layer=index)
        assert drawn and len(page) >= len(drawn)
        assert [type(v) for v in position.trained_views(LENGTH, layer, 32)] == [type(v) for v in page]
        for view, own in zip(drawn, page):
            assert type(view) is type(own) and view.title == own.title
            words = parameter_caption(own)
            assert words == (own.text if isinstance(own, Note) else own.caption)
            assert words.startswith(view.text if isinstance(view, Note) else view.caption)
            for field in ("norms", "cosine", "bias", "offsets", "inv_freq"):
                if hasattr(own, field):
                    assert np.array_equal(getattr(view, field), getattr(own, field))


@pytest.mark.parametrize("name", list(REGISTRY))
def test_the_live_attention_pages_structure_is_the_one_your_model_draws(name):
    """Every shipped checkpoint and layer: the structure the Live attention page draws beside the attention
    (relviz.inspection.position_structure for that layer) is the one in Your model's views of the layer: same title,
    labels, arrays, facts and words (tests/test_toy_structures.py: equal to what the scheme drew before, bit for
    bit)."""
    model, plan = plan_of(name)
    for index in range(model.config.n_layers):
        page = position_structure(model, LENGTH, index)
        drawn = [v for v in layer_views(plan.layer(index), LENGTH) if isinstance(v, PositionStructure)]
        if page is None:
            assert drawn == [], index
            continue
        assert len(drawn) == 1, index
        own, = drawn
        for field in ("title", "label", "discrete", "masked_future", "toeplitz", "facts", "caption"):
            assert getattr(own, field) == getattr(page, field), (index, field)
        assert own.caption == structure_text(page) and len(own.caption) > 40
        assert own.values.dtype == page.values.dtype and np.array_equal(own.values, page.values)
        assert own.extra.keys() == page.extra.keys()
        assert all(np.array_equal(own.extra[k], page.extra[k]) for k in own.extra)


def test_your_model_draws_a_structure_only_at_a_short_length():
    """A layer's structure is L × L: Your model adds it up to STRUCTURE_MAX_LENGTH (a toy checkpoint's own 64)."""
    from relviz.layer_strip import STRUCTURE_MAX_LENGTH

    _, plan = plan_of("t5")
    kinds = [type(v) for v in layer_views(plan.layer(0), STRUCTURE_MAX_LENGTH)]
    assert PositionStructure in kinds
    assert PositionStructure not in [type(v) for v in layer_views(plan.layer(0), STRUCTURE_MAX_LENGTH + 1)]


def test_kerple_bias_and_curve_are_the_toy_models():
    model, plan = plan_of("kerple")
    kerple = plan.layer(2).find(KerpleBias)
    x = torch.zeros(1, LENGTH, model.config.d_model)
    with torch.no_grad():
        assert torch.equal(kerple.bias_per_offset(offset_range(LENGTH, device="cpu")), model.position.prepare(LENGTH, x))
    toy, = model.position.parameter_views(length=LENGTH, train_length=32, layer=0)
    curve, = kerple.views(LENGTH, 0)
    assert np.array_equal(curve.bias, toy.bias) and curve.caption == parameter_caption(toy)


def test_each_fire_layer_is_its_own_function_and_the_toy_models():
    model, plan = plan_of("fire")
    for index in range(model.config.n_layers):
        fire = plan.layer(index).find(FireFunction)
        with torch.no_grad():
            assert torch.equal(fire.bias(LENGTH), model.position.mechanism(index).bias(LENGTH))
        toy, = model.position.parameter_views(length=LENGTH, train_length=32, layer=index)
        curve, = fire.views(LENGTH, index)
        assert np.array_equal(curve.bias, toy.bias) and curve.caption == parameter_caption(toy)


def test_a_toy_plan_heads_its_notes_and_settings_as_a_toy_not_as_a_config_json():
    from relviz.model_plan import ModelPlan
    plan = toy_plan(load_checkpoint("t5-shift").model)
    assert "config.json" not in plan.config_title and "transformers" not in plan.notes_title
    assert "config.json" in ModelPlan.config_title and "transformers" in ModelPlan.notes_title
