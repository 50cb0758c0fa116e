"""KERPLE and FIRE (relviz/schemes/kerple.py, fire.py) against independent transcriptions of the
papers' formulas, and their shipped checkpoints."""
from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from relviz.model import ModelConfig, build_model
from relviz.schemes.view_kinds import BiasCurve

SMALL = dict(d_model=16, n_heads=2, d_ff=16, n_layers=2)




def _attention_with_bias(q, k, v, bias, causal=True):
    logits = q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1]) + bias
    if causal:
        logits = logits.masked_fill(torch.ones_like(logits, dtype=torch.bool).triu(1), float("-inf"))
    weights = logits.softmax(-1)
    return weights @ v, weights


@pytest.mark.parametrize("causal", [True, False])
def test_kerple_adds_minus_r1_log_one_plus_r2_distance(causal):
    model = build_model(ModelConfig(scheme="kerple", causal=causal, **SMALL), seed=0)
    position = model.position
    with torch.no_grad():
        position.raw_r1.copy_(torch.tensor([0.3, -1.0]))
        position.raw_r2.copy_(torch.tensor([2.0, 0.1]))
    r1, r2 = torch.log1p(torch.exp(torch.tensor([0.3, -1.0]))), torch.log1p(torch.exp(torch.tensor([2.0, 0.1])))
    length = 9
    bias = torch.empty(2, length, length)
    for h in range(2):
        for i in range(length):
            for j in range(length):
                bias[h, i, j] = -r1[h] * math.log(1 + r2[h] * abs(j - i))
    gen = torch.Generator().manual_seed(1)
    q, k, v = (torch.randn(1, 2, length, 8, generator=gen) for _ in range(3))
    out, weights = position.attend(0, q, k, v, need_weights=True)
    ref_out, ref_weights = _attention_with_bias(q, k, v, bias, causal)
    assert torch.allclose(weights, ref_weights, atol=1e-6) and torch.allclose(out, ref_out, atol=1e-6)
    structure = position.structure(length)
    assert np.allclose(structure.values, bias.numpy(), atol=1e-6) and structure.toeplitz
    curve, = position.parameter_views(length=length, train_length=5, layer=0)
    assert isinstance(curve, BiasCurve) and curve.learned
    assert np.allclose(curve.bias[:, curve.offsets == -8][:, 0], bias[:, 8, 0].numpy(), atol=1e-6)


def test_fire_is_an_mlp_of_the_normalised_distance():
    model = build_model(ModelConfig(scheme="fire", fire_hidden=5, **SMALL), seed=3)
    fire = model.position.layers[1]
    c, threshold = float(fire.c.detach()), float(fire.threshold.detach())
    length = 24      # beyond the initial threshold 16: later rows are normalised by their own position
    bias = torch.zeros(2, length, length)
    for i in range(length):
        for j in range(i + 1):
            x = math.log(c * (i - j) + 1) / math.log(c * max(threshold, i) + 1)
            with torch.no_grad():
                bias[:, i, j] = fire.mlp(torch.tensor([x]))
    gen = torch.Generator().manual_seed(2)
    q, k, v = (torch.randn(1, 2, length, 8, generator=gen) for _ in range(3))
    out, weights = model.position.attend(1, q, k, v, need_weights=True)
    ref_out, ref_weights = _attention_with_bias(q, k, v, bias)
    assert torch.allclose(weights, ref_weights, atol=1e-5) and torch.allclose(out, ref_out, atol=1e-5)
    curve, = model.position.parameter_views(length=length, train_length=16, layer=1)
    assert np.allclose(curve.bias, bias[:, length - 1, :].numpy(), atol=1e-5)
    assert not model.position.structure(length).toeplitz
    with pytest.raises(ValueError, match="scheme 'fire' is causal only"):
        ModelConfig(scheme="fire", causal=False)


def test_fire_words_number_no_layer():
    """The pages count layers differently (Live attention from 1, Your model from 0): FIRE's titles and captions,
    drawn on both, say "this layer" (Your model once showed "layer 3" beside its "decoder layer 2")."""
    model = build_model(ModelConfig(scheme="fire", fire_hidden=5, n_layers=3, **{k: v for k, v in SMALL.items()
                                                                                if k != "n_layers"}), seed=3)
    fire = model.position.mechanism(2)
    assert fire.layer == 2
    structure = fire.structure(20, causal=True)
    curve, = fire.views(20, None)
    words = " ".join([structure.title, structure.label, structure.caption, curve.title, curve.caption])
    assert "this layer" in words and not any(f"layer {n}" in words for n in range(4))


def test_kerple_and_fire_train_and_their_gradients_reach_every_parameter():
    for scheme in ("kerple", "fire"):
        model = build_model(ModelConfig(scheme=scheme, **SMALL), seed=0)
        logits, _ = model(torch.randint(0, 10, (2, 20), generator=torch.Generator().manual_seed(0)))
        logits.sum().backward()
        for name, parameter in model.position.named_parameters():
            assert parameter.grad is not None and parameter.grad.abs().sum() > 0, (scheme, name)


@pytest.mark.parametrize("scheme", ["kerple", "fire"])
def test_shipped_kerple_and_fire_checkpoints_learned_the_task(scheme):
    from relviz.training import load_checkpoint, shipped_name

    checkpoint = load_checkpoint(shipped_name(scheme))
    assert checkpoint.info.scheme == scheme
    run = checkpoint.run("31415926535897932384626433832795")
    assert run.accuracy is not None and run.accuracy >= 0.9
