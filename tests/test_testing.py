"""relviz.testing: the README's example runs, a deliberately correct implementation passes every helper,
and a planted mistake raises AssertionError with the verdict and the named cause."""
from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
import torch

from relviz.check import rope_causes as RC
from relviz.testing import (
    assert_alibi_slopes_match, assert_matches_model, assert_rope_cache, assert_rope_matches, assert_t5_buckets_match,
)

REPO = Path(__file__).resolve().parents[1]


def test_the_readmes_testing_example_runs():
    text = (REPO / "README.md").read_text(encoding="utf-8")
    code = text.split("<!-- readme-testing-example -->", 1)[1].split("```python", 1)[1].split("```", 1)[0]
    namespace: dict = {}
    exec(compile(code, "README.md", "exec"), namespace)  # the assert inside it passes
    with pytest.raises(AssertionError, match=RC.base_off(10000.0, 500000.0)):
        assert_rope_matches(namespace["my_rope"], head_dim=64, base=500000.0)


# A small, deliberately correct implementation, as a user's test suite would hold it ------------------

def rope(seq_len: int, head_dim: int, base: float = 10000.0):
    inv_freq = 1.0 / base ** (torch.arange(0, head_dim, 2).float() / head_dim)
    emb = torch.cat([torch.outer(torch.arange(seq_len).float(), inv_freq)] * 2, dim=-1)
    return emb.cos(), emb.sin()


def t5_bucket(relative_position, bidirectional=True, num_buckets=32, max_distance=128):
    n = relative_position
    bucket = torch.zeros_like(n)
    if bidirectional:
        num_buckets //= 2
        bucket += (n > 0).long() * num_buckets
        n = n.abs()
    else:
        n = (-n).clamp(min=0)
    max_exact = num_buckets // 2
    large = max_exact + (torch.log(n.float() / max_exact) / math.log(max_distance / max_exact)
                         * (num_buckets - max_exact)).long()
    return bucket + torch.where(n < max_exact, n, large.clamp(max=num_buckets - 1))


def alibi_slopes(num_heads: int):
    def power_of_2(n):
        start = 2 ** (-(2 ** -(math.log2(n) - 3)))
        return [start * start ** i for i in range(n)]
    if math.log2(num_heads).is_integer():
        return power_of_2(num_heads)
    closest = 2 ** math.floor(math.log2(num_heads))
    return power_of_2(closest) + alibi_slopes(2 * closest)[0::2][: num_heads - closest]


def test_a_correct_implementation_passes_every_helper():
    assert_rope_matches(rope, head_dim=64, seq_len=256)
    assert_rope_matches(lambda n, d: rope(n, d, base=500000.0), config={
        "model_type": "llama", "hidden_size": 2048, "num_attention_heads": 32, "num_hidden_layers": 16,
        "rope_theta": 500000.0})  # a config.json as Llama 3.2 1B ships it: read through the model's plan
    assert_rope_cache(rope(40, 32)[0].numpy(), head_dim=32)
    assert_t5_buckets_match(t5_bucket)
    assert_t5_buckets_match(t5_bucket, bidirectional=False, num_buckets=16, max_distance=64)
    for heads in (8, 12, 20):
        assert_alibi_slopes_match(alibi_slopes, num_heads=heads)
    assert_alibi_slopes_match(np.array(alibi_slopes(6)))


def test_a_mistake_raises_with_the_verdict_and_cause():
    with pytest.raises(AssertionError, match=r"(?s)differ from relviz's T5 bucket map.*likely cause: sign flipped"):
        assert_t5_buckets_match(lambda rp, *a: t5_bucket(-rp, *a))
    with pytest.raises(AssertionError, match="non-power-of-2 slopes: 2"):
        assert_alibi_slopes_match(lambda n: [2 ** (-8 * (h + 1) / n) for h in range(n)], num_heads=12)
    with pytest.raises(AssertionError, match=RC.FROM_1):
        assert_rope_cache(rope(41, 32)[0][1:].numpy(), head_dim=32)
    with pytest.raises(ValueError, match="num_heads is required"):
        assert_alibi_slopes_match(alibi_slopes)


SMOLLM3 = {"model_type": "smollm3", "num_hidden_layers": 4, "num_attention_heads": 4, "hidden_size": 256,
           "rope_theta": 2000000.0, "max_position_embeddings": 4096, "no_rope_layers": [1, 1, 1, 0]}


def test_assert_matches_model_per_layer_and_the_nope_layer():
    """SmolLM3: layers 0-2 rotate with θ 2·10^6, layer 3 has no position at all."""
    ours = lambda n, d: rope(n, d, base=2e6)  # noqa: E731
    assert_matches_model(SMOLLM3, ours, layer=0)
    with pytest.raises(AssertionError, match=RC.NO_ROTATION_LAYER):
        assert_matches_model(SMOLLM3, ours, layer=3)
    assert_matches_model(SMOLLM3, lambda n, d: (torch.ones(n, d), torch.zeros(n, d)), layer=3)


def test_cli_layer_flag(tmp_path, capsys):
    import json

    from relviz.__main__ import main

    config = tmp_path / "config.json"
    config.write_text(json.dumps(SMOLLM3))
    np.save(tmp_path / "cos.npy", rope(32, 64, base=2e6)[0].numpy())
    assert main(["check", str(tmp_path / "cos.npy"), "--kind", "rope_cos", "--config", str(config),
                 "--layer", "1"]) == 0
    assert main(["check", str(tmp_path / "cos.npy"), "--kind", "rope_cos", "--config", str(config),
                 "--layer", "3"]) == 1
    assert f"likely cause: {RC.NO_ROTATION_LAYER}" in capsys.readouterr().out
    assert main(["check", str(tmp_path / "cos.npy"), "--kind", "rope_cos", "--layer", "3"]) == 2
