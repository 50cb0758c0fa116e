"""Arguments are checked once, at the public function a caller called; what that function calls
inside relviz does not check them again. A T5Config is the proof that a bucket setting was checked
(relviz.positions): counting its checks counts the validations."""
from __future__ import annotations

import pytest
import torch

from relviz import positions
from relviz.attention import t5_attention
from relviz.model import ModelConfig, build_model


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
