"""The Live attention page's structure is the layer's mechanism's (``Mechanism.structure``), equal bit for bit to what
each toy scheme drew before the structures moved into the mechanisms, and it agrees with what the forward computes.

``tests/data/toy_structures.json`` holds, per shipped checkpoint and length, the structure each scheme's own
``structure(length)`` gave at commit e6021c4 (main before the move), fingerprinted: every array by dtype, shape and
SHA-256 of its bytes, the labels and facts exactly (floats by repr), and the words beside it. Then the structure had
no layer: layer 0's for FIRE, whose other layers are recorded from that commit's per-layer bias (``_bias(layer, L)``),
and the same for every layer of the other schemes. Bidirectional toy models (seed 0, ModelConfig's defaults) are
recorded too, since a structure depends on the direction.
"""
from __future__ import annotations

import hashlib
import json
import math
from pathlib import Path

import numpy as np
import pytest
import torch

from relviz.inspection import position_structure, structure_text
from relviz.mechanisms.absolute import LearnedAbsolute
from relviz.mechanisms.alibi import Alibi
from relviz.mechanisms.fire import FireFunction
from relviz.mechanisms.kerple import KerpleBias
from relviz.mechanisms.none import NoPosition
from relviz.mechanisms.rotation import Rotation
from relviz.mechanisms.shaw import ShawTables
from relviz.mechanisms.sinusoidal import SinusoidalAbsolute
from relviz.mechanisms.skew import SkewTable
from relviz.mechanisms.t5_bias import T5Bias
from relviz.model import ModelConfig, build_model
from relviz.positions import expand_toeplitz
from relviz.schemes import REGISTRY
from relviz.training.checkpoints import list_checkpoints, load_checkpoint

RECORDED = json.loads((Path(__file__).parent / "data" / "toy_structures.json").read_text(encoding="utf-8"))
LENGTHS = RECORDED["lengths"]


def _array(a: np.ndarray) -> dict:
    a = np.ascontiguousarray(a)
    return {"dtype": str(a.dtype), "shape": list(a.shape), "sha256": hashlib.sha256(a.tobytes()).hexdigest()}


def _plain(value):
    if isinstance(value, (tuple, list)):
        return [_plain(v) for v in value]
    return repr(value) if isinstance(value, float) else value


def fingerprint(s) -> dict:
    """What the recording holds of a structure (None: no structure)."""
    if s is None:
        return None
    return {"title": s.title, "label": s.label, "values": _array(s.values),
            "discrete": None if s.discrete is None else list(s.discrete), "masked_future": bool(s.masked_future),
            "toeplitz": bool(s.toeplitz), "extra": {k: _array(v) for k, v in s.extra.items()},
            "facts": {k: _plain(v) for k, v in s.facts.items()}, "text": structure_text(s)}


def test_the_recording_covers_the_ten_schemes_that_had_their_own_structure():
    """A scheme added later has no structure of its own to compare with (it is its mechanism's from the start): the
    recording keeps the ten that had one, each shipped checkpoint, and a bidirectional model of each that has one."""
    shipped = {info.name for info in list_checkpoints()}
    assert set(RECORDED["checkpoints"]) <= shipped and len(RECORDED["checkpoints"]) == 10
    assert len({load_checkpoint(name).model.config.scheme for name in RECORDED["checkpoints"]}) == 10
    assert set(RECORDED["bidirectional"]) == {name for name in RECORDED["bidirectional"] if name in REGISTRY
                                              and not REGISTRY[name].causal_only}
    assert len(RECORDED["bidirectional"]) == 8                        # the ten less FIRE and the skew (causal only)


@pytest.mark.parametrize("name", sorted(RECORDED["checkpoints"]))
def test_every_layers_structure_is_the_one_its_scheme_drew_bit_for_bit(name):
    model = load_checkpoint(name).model
    per_layer = RECORDED["per_layer"].get(name, {})
    for length in LENGTHS:
        old = RECORDED["checkpoints"][name][str(length)]
        assert fingerprint(position_structure(model, length)) == old       # the page's default: layer 0
        for layer in range(model.config.n_layers):
            new = fingerprint(model.position.structure(length, layer))
            if str(layer) in per_layer:   # a mechanism per layer (FIRE): that layer's values and facts then
                recorded = per_layer[str(layer)][str(length)]
                assert new["values"] == recorded["values"], (layer, length)
                assert new["facts"] == {"threshold": recorded["threshold"], "c": recorded["c"]}
                assert "this layer" in new["title"] and f"L = {float(recorded['threshold']):.3g}" in new["text"]
            else:
                assert new == old, (layer, length)


@pytest.mark.parametrize("scheme", sorted(RECORDED["bidirectional"]))
def test_a_bidirectional_models_structure_is_the_one_its_scheme_drew(scheme):
    model = build_model(ModelConfig(scheme=scheme, causal=False), seed=0).eval()
    for length in LENGTHS:
        assert fingerprint(position_structure(model, length)) == RECORDED["bidirectional"][scheme][str(length)], length


def _what_the_forward_computes(model, layer: int, length: int) -> tuple[np.ndarray, bool]:
    """The structure's values as the forward computes them for ``layer`` at ``length``, and whether they are the
    same operations (bit for bit) or the same quantity in the forward's float32 (to rounding)."""
    mechanism = model.position.mechanism(layer)
    x = torch.zeros(1, length, model.config.d_model)
    with torch.no_grad():
        if isinstance(mechanism, (Alibi, KerpleBias)):            # the bias added, per offset
            return expand_toeplitz(mechanism.prepare(length, x), length, length).numpy(), True
        if isinstance(mechanism, T5Bias):                          # the bucket of each cell: its bias, in the hover
            return expand_toeplitz(mechanism.prepare(length, x), length, length).numpy(), True
        if isinstance(mechanism, FireFunction):                    # the bias attend adds
            return mechanism.bias(length).numpy(), True
        if isinstance(mechanism, Rotation):                        # (R_i u) · (R_j u) for u of equal norm in each pair
            u = torch.ones(1, 1, length, model.config.head_dim) / model.config.head_dim ** 0.5
            turned = mechanism.turn(u, mechanism.prepare(length, u))[0, 0]                  # [L, D]
            return (turned @ turned.T).numpy()[None], False
        if isinstance(mechanism, (SinusoidalAbsolute, LearnedAbsolute)):   # the rows embed adds
            rows = mechanism.embed(x)[0].double()                                          # [L, D]
            if isinstance(mechanism, SinusoidalAbsolute):
                return (rows @ rows.T / (model.config.d_model / 2)).numpy()[None], False
            unit = rows / rows.norm(dim=-1, keepdim=True)
            return (unit @ unit.T).numpy()[None], False
        if isinstance(mechanism, (ShawTables, SkewTable)):         # an index: test_the_index_is_the_row_attend_reads
            return None, True
    assert isinstance(mechanism, NoPosition), type(mechanism)
    return None, True


@pytest.mark.parametrize("name", sorted(RECORDED["checkpoints"]))
def test_each_structure_agrees_with_what_the_forward_computes(name):
    model = load_checkpoint(name).model
    length = 40
    for layer in range(model.config.n_layers):
        structure = model.position.structure(length, layer)
        computed, same_operations = _what_the_forward_computes(model, layer, length)
        if computed is None:
            continue
        drawn = structure.extra["learned bias (this head)"] if "learned bias (this head)" in structure.extra \
            else structure.values
        if same_operations:
            assert np.array_equal(drawn, computed.astype(drawn.dtype)), (name, layer)
        else:
            assert np.allclose(drawn, computed, atol=2e-6, rtol=0), (name, layer, np.abs(drawn - computed).max())


@pytest.mark.parametrize("name", ["shaw-shift", "skew-shift"])
def test_the_index_is_the_row_attend_reads(name):
    """Shaw's clip index and the skew's E_r row are indices: the weights the layer's attend returns are
    softmax((q · k + q · table[index]) / √d) with the index the structure draws, future cells masked."""
    model = load_checkpoint(name).model
    length, d = 24, model.config.head_dim
    gen = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(1, 2, length, d, generator=gen) for _ in range(3))
    for layer in range(model.config.n_layers):
        mechanism = model.position.mechanism(layer)
        structure = model.position.structure(length, layer)
        index = torch.from_numpy(structure.values[0])                                      # [L, L]
        table = (mechanism.rel_k if isinstance(mechanism, ShawTables) else mechanism.e_r)[layer].detach()
        with torch.no_grad():
            _, weights = mechanism.attend(q, k, v, causal=True, need_weights=True)
        relative = torch.einsum("bhid,ijd->bhij", q, table[index.clamp(min=0)])
        logits = (q @ k.transpose(-1, -2) + relative) / math.sqrt(d)
        future = torch.ones(length, length, dtype=torch.bool).triu(1)
        assert torch.equal(index < 0, future) if structure.discrete[0] < 0 else bool((index >= 0).all())
        expected = logits.masked_fill(future, float("-inf")).softmax(-1)
        assert torch.allclose(weights, expected, atol=1e-6), (name, layer)
