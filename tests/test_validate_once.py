"""Arguments are checked once, at the public function a caller called; what that function calls
inside relviz does not check them again. A T5Config is the proof that a bucket setting was checked
(relviz.positions): counting its checks counts the validations."""
from __future__ import annotations

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

import relviz.model as model_module
from relviz import positions
from relviz.attention import alibi_attention, offset_bias_attention, shaw_attention, skew_attention, t5_attention
from relviz.model import ModelConfig, build_model
from relviz.schemes import REGISTRY


@pytest.fixture
def t5_checks(monkeypatch) -> list[tuple[int, int, bool]]:
    """Every check of a T5 setting, as (num_buckets, max_distance, bidirectional)."""
    seen: list[tuple[int, int, bool]] = []
    check = positions.T5Config.__post_init__

    def counted(self) -> None:
        seen.append((self.num_buckets, self.max_distance, self.bidirectional))
        check(self)
    monkeypatch.setattr(positions.T5Config, "__post_init__", counted)
    return seen


@pytest.mark.parametrize("call", [
    lambda: positions.t5_bucket(torch.arange(-5, 6)),
    lambda: positions.t5_bucket_map(9, device="cpu"),
    lambda: positions.t5_bias_offsets(torch.zeros(32, 2), 9),
    lambda: positions.t5_bias(torch.zeros(32, 2), 9),
    lambda: positions.t5_bucket_ranges(),
    lambda: t5_attention(*(torch.randn(1, 2, 9, 4) for _ in range(3)), torch.zeros(32, 2), num_buckets=32,
                         max_distance=128, bidirectional=True),
], ids=["t5_bucket", "t5_bucket_map", "t5_bias_offsets", "t5_bias", "t5_bucket_ranges", "t5_attention"])
def test_a_public_t5_function_checks_its_setting_once(t5_checks, call):
    call()
    assert t5_checks == [(32, 128, True)]


def test_the_models_forward_checks_no_bucket_setting(t5_checks):
    """The T5 scheme checks its setting when the model is built; each forward reuses it."""
    model = build_model(ModelConfig(scheme="t5"), seed=0)
    built = len(t5_checks)
    assert built >= 1
    model(torch.zeros(2, 16, dtype=torch.long))
    model(torch.zeros(2, 16, dtype=torch.long), need_weights=True)
    assert len(t5_checks) == built


def test_the_public_functions_keep_their_errors():
    with pytest.raises(ValueError, match="max_distance must be greater than max_exact"):
        positions.t5_bucket_map(8, num_buckets=32, max_distance=8, device="cpu")
    with pytest.raises(ValueError, match="num_buckets must be at least 4"):
        positions.t5_bias(torch.zeros(2, 1), 4, num_buckets=2)
    with pytest.raises(ValueError, match="bias_table must have shape"):
        positions.t5_bias_offsets(torch.zeros(31, 2), 4)
    with pytest.raises(ValueError, match="relative_position values must lie within"):
        positions.t5_bucket(torch.tensor([2**40]))


def test_the_forward_refuses_token_ids_outside_the_vocabulary_on_the_host():
    model = build_model(ModelConfig(scheme="none", vocab_size=10), seed=0)
    with pytest.raises(ValueError, match="tokens must be ids from 0 to 9; got values from 0 to 10"):
        model(torch.tensor([[0, 10]]))
    with pytest.raises(ValueError, match="tokens must be ids from 0 to 9; got values from -1 to 3"):
        model(torch.tensor([[3, -1]]))


# ---------------------------------------------------------------------------------------
# No host sync in the model's forward


class HostReads(TorchDispatchMode):
    """Counts, by op name, what reads a tensor's values back to the host or sizes an output by them.

    ``.item()``, ``int(t)``, ``float(t)`` and ``bool(t)`` all run ``aten::_local_scalar_dense``;
    nonzero, masked_select and unique size their output by the values. On a GPU each makes the host
    wait for the device. (``tolist`` and ``numpy`` read without an op: :func:`host_reads` patches them.)"""

    READS = ("aten::_local_scalar_dense", "aten::nonzero", "aten::masked_select", "aten::_unique", "aten::unique")

    def __init__(self) -> None:
        super().__init__()
        self.paused = False
        self.seen: list[str] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        name = func.name()
        if not self.paused and name.startswith(self.READS):
            self.seen.append(name)
        return func(*args, **(kwargs or {}))


@pytest.fixture
def host_reads(monkeypatch):
    """A :class:`HostReads` to enter around a forward; the boundary's token check (check_token_ids,
    which the forward runs on host-memory tokens only, by design) is not counted but recorded as
    'boundary check'."""
    reads = HostReads()
    for method in ("tolist", "numpy"):
        original = getattr(torch.Tensor, method)

        def counted(self, *args, _original=original, _method=method, **kwargs):
            if not reads.paused:
                reads.seen.append(f"Tensor.{_method}")
            return _original(self, *args, **kwargs)
        monkeypatch.setattr(torch.Tensor, method, counted)
    boundary = model_module.check_token_ids

    def at_the_boundary(tokens, vocab_size):
        reads.paused = True
        try:
            boundary(tokens, vocab_size)
        finally:
            reads.paused = False
        reads.seen.append("boundary check")
    monkeypatch.setattr(model_module, "check_token_ids", at_the_boundary)
    return reads


def test_the_counter_sees_a_host_read(host_reads):
    x = torch.ones(3)
    with host_reads:
        float(x.sum())
        bool(x.max() > 0)
        x.tolist()
    assert host_reads.seen == ["aten::_local_scalar_dense", "aten::_local_scalar_dense", "Tensor.tolist"]


@pytest.mark.parametrize("scheme", sorted(REGISTRY))
@pytest.mark.parametrize("need_weights", [False, True], ids=["fused", "weights"])
def test_the_models_forward_reads_nothing_back_from_the_device(host_reads, scheme, need_weights):
    """Every layer's attention runs without reading a value back to the host (on a GPU each read is
    a host-device sync): the model's schemes call relviz.attention with validate=False. The only
    read is the documented boundary check of host-memory token ids."""
    model = build_model(ModelConfig(scheme=scheme, n_layers=3), seed=0)
    tokens = torch.randint(0, 10, (2, 24), generator=torch.Generator().manual_seed(0))
    with host_reads:
        logits, _ = model(tokens, need_weights=need_weights)
    assert host_reads.seen == ["boundary check"]
    assert torch.isfinite(logits).all()


def _attention_calls(q, k, v, need_weights: bool):
    """One call of each relviz.attention function the model's schemes use, on these q, k, v."""
    g = torch.Generator().manual_seed(1)
    per_offset = torch.randn(2, 2 * 9 - 1, generator=g)                  # [H, 2L − 1]
    table = torch.randn(7, 4, generator=g)                               # [2·clip + 1, D]
    e_r = torch.randn(5, 4, generator=g)                                 # [M, D]
    mode = {"need_weights": need_weights}
    return {
        "offset_bias": lambda **kw: offset_bias_attention(q, k, v, per_offset, causal=True, **mode, **kw),
        "shaw": lambda **kw: shaw_attention(q, k, v, table, table.flip(0), clip=3, causal=True, **mode, **kw),
        "shaw_key_only": lambda **kw: shaw_attention(q, k, v, table, clip=3, **mode, **kw),
        "skew": lambda **kw: skew_attention(q, k, v, e_r, **mode, **kw),
    }


@pytest.mark.parametrize("need_weights", [False, True], ids=["fused", "weights"])
def test_validate_false_computes_the_same_numbers(need_weights):
    q, k, v = torch.randn(3, 2, 2, 9, 4, generator=torch.Generator().manual_seed(0))   # [B, H, L, D] each
    for name, call in _attention_calls(q, k, v, need_weights).items():
        checked, unchecked = call(), call(validate=False)
        assert torch.equal(checked[0], unchecked[0]), name
        assert (checked[1] is None and unchecked[1] is None) or torch.equal(checked[1], unchecked[1]), name


@pytest.mark.parametrize("need_weights", [False, True], ids=["fused", "weights"])
def test_a_caller_gets_the_value_error_and_the_model_gets_nan_without_a_host_read(host_reads, need_weights):
    """The public boundary refuses non-finite q; validate=False (the model's schemes) lets NaN through
    as torch's own layers do, and reads nothing back to check it."""
    q, k, v = torch.randn(3, 2, 2, 9, 4, generator=torch.Generator().manual_seed(0))
    q[0, 1, 4, 2] = float("nan")
    for name, call in _attention_calls(q, k, v, need_weights).items():
        with pytest.raises(ValueError, match="finite"):
            call()
        with host_reads:
            output, _ = call(validate=False)
        assert torch.isnan(output[0, 1, 4]).all(), name
    assert host_reads.seen == []



@pytest.mark.parametrize("call", [
    lambda q, k, v, w: t5_attention(q, k, v, torch.zeros(32, 2), num_buckets=32, max_distance=128,
                                    bidirectional=True, need_weights=w),
    lambda q, k, v, w: alibi_attention(q, k, v, need_weights=w),
    lambda q, k, v, w: offset_bias_attention(q, k, v, torch.zeros(2, 17), need_weights=w),
], ids=["t5_attention", "alibi_attention", "offset_bias_attention"])
@pytest.mark.parametrize("need_weights", [False, True])
def test_an_offset_bias_function_checks_q_k_v_and_its_options_once(monkeypatch, call, need_weights):
    """t5_attention and alibi_attention build the per-offset bias and compute what offset_bias_attention
    computes, without handing their checked arguments to it to be checked again."""
    import relviz.attention as attention

    counts = {"check_qkv": 0, "check_mode": 0}
    for name in counts:
        def counted(*args, _original=getattr(attention, name), _name=name, **kwargs):
            counts[_name] += 1
            return _original(*args, **kwargs)
        monkeypatch.setattr(attention, name, counted)
    q, k, v = (torch.randn(1, 2, 9, 4) for _ in range(3))
    output, weights = call(q, k, v, need_weights)
    assert counts == {"check_qkv": 1, "check_mode": 1}
    assert output.shape == (1, 2, 9, 4) and torch.isfinite(output).all()
    assert (weights is not None) == need_weights
