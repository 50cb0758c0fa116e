"""Tests for relviz.model: shapes and attention rows for every scheme, config round trips,
the errors a user can trigger, and that forward keeps no state on the module."""
from __future__ import annotations

import threading

import pytest
import torch
import torch.nn.functional as F

from relviz.model import MAX_LENGTH, SCHEMES, ModelConfig, RelvizTransformer, build_model
from relviz.schemes.base import dot_product_attention
from relviz.schemes import get_scheme

BIDIRECTIONAL = [s for s in SCHEMES if not get_scheme(s).causal_only]
SMALL = dict(d_model=16, n_heads=2, d_ff=32)


def _tokens(batch: int, length: int, seed: int = 0) -> torch.Tensor:
    return torch.randint(0, 10, (batch, length), generator=torch.Generator().manual_seed(seed))


@pytest.mark.parametrize("scheme, causal", [(s, True) for s in SCHEMES] + [(s, False) for s in BIDIRECTIONAL])
def test_forward_shapes_and_attention_rows(scheme, causal):
    model = build_model(ModelConfig(scheme=scheme, causal=causal, n_layers=3, **SMALL), seed=0).eval()
    tokens = _tokens(3, 11)
    with torch.inference_mode():
        logits, attentions = model(tokens, need_weights=True)
    assert logits.shape == (3, 11, 10)
    assert len(attentions) == 3
    for weights in attentions:
        assert weights.shape == (3, 2, 11, 11)
        assert torch.allclose(weights.sum(-1), torch.ones(3, 2, 11), atol=1e-5)
        assert (weights >= 0).all()
        upper = weights.triu(1)
        if causal:
            assert torch.count_nonzero(upper) == 0  # exactly zero, not just small
        else:
            assert torch.count_nonzero(upper) > 0


@pytest.mark.parametrize("scheme", list(SCHEMES))
def test_causal_logits_ignore_the_future(scheme):
    model = build_model(ModelConfig(scheme=scheme, **SMALL), seed=1).eval()
    tokens = _tokens(2, 12)
    changed = tokens.clone()
    changed[:, 8:] = (changed[:, 8:] + 1) % 10
    with torch.inference_mode():
        a, _ = model(tokens)
        b, _ = model(changed)
    assert torch.allclose(a[:, :8], b[:, :8], atol=1e-5)
    assert not torch.allclose(a[:, 8:], b[:, 8:])


def test_position_parameters_per_scheme():
    def names(scheme):
        state = build_model(ModelConfig(scheme=scheme, n_layers=2)).state_dict()
        return {k for k in state if k.startswith("position.")}
    assert names("none") == names("sinusoidal") == names("alibi") == names("rope") == set()
    assert names("learned") == {"position.table"}
    assert names("shaw") == {"position.rel_k.0", "position.rel_k.1", "position.rel_v.0", "position.rel_v.1"}
    assert names("t5") == {"position.bias"}  # one table shared by every layer, as in T5
    assert names("skew") == {"position.e_r.0", "position.e_r.1"}
    sd = build_model(ModelConfig(scheme="shaw", clip=3)).state_dict()
    assert sd["position.rel_k.0"].shape == (7, 16)  # 2k + 1 rows of D_head, shared by heads
    assert build_model(ModelConfig(scheme="t5")).state_dict()["position.bias"].shape == (32, 4)


def test_skew_is_causal_only():
    with pytest.raises(ValueError, match="scheme 'skew' is causal only"):
        ModelConfig(scheme="skew", causal=False)


def test_learned_refuses_lengths_beyond_max_len():
    model = build_model(ModelConfig(scheme="learned", max_len=8, **SMALL))
    model(_tokens(1, 8))
    with pytest.raises(ValueError, match=r"positions 0..7 only \(max_len=8\); a sequence of length 9"):
        model(_tokens(1, 9))
    for scheme in ("sinusoidal", "shaw", "t5", "skew", "alibi", "rope", "none"):
        build_model(ModelConfig(scheme=scheme, max_len=8, skew_distances=4, clip=2, **SMALL))(_tokens(1, 20))


def test_forward_validates_tokens():
    model = build_model(ModelConfig(**SMALL))
    with pytest.raises(ValueError, match="tokens must be a LongTensor of shape"):
        model(torch.zeros(3, dtype=torch.long))
    with pytest.raises(ValueError, match="tokens must be ids from 0 to 9"):
        model(torch.tensor([[1, 10]]))
    with pytest.raises(ValueError, match=f"sequence length must be an integer from 1 to {MAX_LENGTH}"):
        model.check_length(MAX_LENGTH + 1)


def test_config_round_trip_and_validation():
    config = ModelConfig(scheme="t5", num_buckets=16, max_distance=64, causal=False, vocab_size=12)
    assert ModelConfig.from_json(config.to_json()) == config
    assert ModelConfig.from_dict(config.to_dict()) == config
    assert config.scheme_params() == {"num_buckets": 16, "max_distance": 64}
    assert ModelConfig(scheme="shaw", clip=3).scheme_params() == {"clip": 3}
    with pytest.raises(ValueError, match="unknown scheme 'xpos'; known schemes: none, sinusoidal"):
        ModelConfig(scheme="xpos")
    with pytest.raises(ValueError, match="unknown model config keys: dropout"):
        ModelConfig.from_dict({"dropout": 0.1})
    with pytest.raises(ValueError, match="d_model must be divisible by n_heads"):
        ModelConfig(d_model=10, n_heads=4)
    with pytest.raises(ValueError, match="max_distance must be greater than max_exact"):
        ModelConfig(num_buckets=32, max_distance=8)
    with pytest.raises(ValueError, match="n_layers must be an integer"):
        ModelConfig(n_layers="2")
    with pytest.raises(ValueError, match="scheme 'rope' rotates pairs of dimensions: d_model / n_heads "
                                         "must be even"):
        ModelConfig(scheme="rope", d_model=12, n_heads=4)


def test_build_model_is_seeded_and_leaves_global_rng_alone():
    torch.manual_seed(123)
    expected = torch.rand(3)
    torch.manual_seed(123)
    a = build_model(ModelConfig(scheme="shaw"), seed=7)
    assert torch.equal(torch.rand(3), expected)
    b = build_model(ModelConfig(scheme="shaw"), seed=7)
    for (ka, va), (kb, vb) in zip(a.state_dict().items(), b.state_dict().items()):
        assert ka == kb and torch.equal(va, vb)


def test_forward_stores_nothing_and_serves_threads():
    model = build_model(ModelConfig(scheme="t5", **SMALL), seed=0).eval()
    before = {k: set(v) if isinstance(v, dict) else v for k, v in vars(model).items()}
    inputs = [_tokens(1, 5 + i, seed=i) for i in range(6)]
    with torch.inference_mode():
        expected = [model(x, need_weights=True) for x in inputs]
    results: dict[int, tuple] = {}

    def worker(i: int) -> None:
        with torch.inference_mode():
            results[i] = model(inputs[i], need_weights=True)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for i, (logits, attentions) in enumerate(expected):
        assert torch.allclose(results[i][0], logits)
        assert all(torch.allclose(x, y) for x, y in zip(results[i][1], attentions))
    after = {k: set(v) if isinstance(v, dict) else v for k, v in vars(model).items()}
    assert before.keys() == after.keys()
    assert before["_buffers"] == after["_buffers"] and before["_parameters"] == after["_parameters"]


def test_dot_product_attention_matches_torch():
    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(2, 3, 7, 8, generator=g) for _ in range(3))
    bias = torch.randn(3, 7, 7, generator=g)
    for causal in (True, False):
        expected = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
        out, weights = dot_product_attention(q, k, v, causal=causal, need_weights=True)
        assert torch.allclose(out, expected, atol=1e-5) and weights.shape == (2, 3, 7, 7)
        fused, none = dot_product_attention(q, k, v, causal=causal)
        assert none is None and torch.allclose(fused, expected, atol=1e-5)
        # with a bias: the fused path folds the causal mask into it
        out, _ = dot_product_attention(q, k, v, causal=causal, bias=bias, need_weights=True)
        fused, _ = dot_product_attention(q, k, v, causal=causal, bias=bias)
        assert torch.allclose(fused, out, atol=1e-5)


def test_rope_scores_depend_only_on_offset():
    g = torch.Generator().manual_seed(0)
    q = torch.randn(1, 1, 1, 8, generator=g, dtype=torch.float64).expand(1, 1, 12, 8)
    k = torch.randn(1, 1, 1, 8, generator=g, dtype=torch.float64).expand(1, 1, 12, 8)
    rotation = build_model(ModelConfig(scheme="rope", d_model=16, n_heads=2)).position.mechanism(0)
    positions = torch.arange(12)
    scores = rotation.rotate(q, positions) @ rotation.rotate(k, positions).transpose(-2, -1)   # same q, k everywhere
    scores = scores[0, 0]
    for offset in range(-11, 12):
        diagonal = torch.diagonal(scores, offset)
        assert torch.allclose(diagonal, diagonal[0].expand_as(diagonal), atol=1e-10)


def test_model_requires_a_config():
    with pytest.raises(ValueError, match="config must be a ModelConfig"):
        RelvizTransformer({"scheme": "t5"})


def test_every_scheme_has_a_summary():
    from relviz.model import SCHEME_SUMMARIES
    assert list(SCHEME_SUMMARIES) == list(SCHEMES)


@pytest.mark.parametrize("scheme", SCHEMES)
def test_num_parameters_is_known_before_building(scheme):
    small = ModelConfig(scheme=scheme, n_layers=3, d_model=48, n_heads=4, d_ff=20, vocab_size=7, clip=3,
                        max_len=17, num_buckets=12, max_distance=40, skew_distances=9)
    for config in (ModelConfig(scheme=scheme), small):
        assert config.num_parameters() == build_model(config).num_parameters()


def test_a_config_over_the_parameter_limit_is_refused_before_allocating():
    with pytest.raises(ValueError, match="parameters"):
        ModelConfig(d_model=4096, d_ff=8192, n_layers=2)   # ~270 M parameters
    ModelConfig(d_model=512, d_ff=2048, n_layers=8)          # ~25 M: allowed


@pytest.mark.parametrize("scheme, causal", [(s, True) for s in SCHEMES] + [(s, False) for s in BIDIRECTIONAL])
def test_fused_forward_equals_the_weights_path_gradients_included(scheme, causal):
    """Training and evaluation run the fused path (need_weights=False); the app draws the weights
    path. Same logits and the same gradient for every parameter, to float32 rounding."""
    model = build_model(ModelConfig(scheme=scheme, causal=causal, clip=3, skew_distances=5, **SMALL), seed=2)
    tokens = _tokens(2, 13, seed=4)
    grads = {}
    for need_weights in (False, True):
        model.zero_grad(set_to_none=True)
        logits, attentions = model(tokens, need_weights=need_weights)
        assert (attentions is None) != need_weights
        (logits * torch.linspace(-1, 1, logits.numel()).view_as(logits)).sum().backward()
        grads[need_weights] = (logits.detach(), {n: p.grad for n, p in model.named_parameters()})
    (fused, fused_grads), (exact, exact_grads) = grads[False], grads[True]
    assert torch.allclose(fused, exact, atol=1e-5, rtol=1e-5)
    for name, grad in exact_grads.items():
        assert grad is not None and torch.allclose(fused_grads[name], grad, atol=1e-5, rtol=1e-4), name


def test_a_shared_position_term_is_built_once_per_forward(monkeypatch):
    """T5's, ALiBi's and KERPLE's bias per offset (and RoPE's angles) serve every layer of one forward."""
    for scheme in ("t5", "alibi", "kerple", "rope"):
        model = build_model(ModelConfig(scheme=scheme, n_layers=3, **SMALL), seed=0)
        calls = []
        prepare = type(model.position).prepare
        monkeypatch.setattr(type(model.position), "prepare",
                            lambda self, length, like: calls.append(length) or prepare(self, length, like))
        model(_tokens(1, 9))
        model(_tokens(1, 9), need_weights=True)
        assert calls == [9, 9], scheme
