"""``t5``: Raffel et al. 2020: a learned scalar per (bucket of j − i, head), one table shared
by every layer, added to the attention logit. Buckets: exact for small |j − i|, then
logarithmic up to max_distance (Hugging Face ``T5Attention._relative_position_bucket``)."""
from __future__ import annotations

from typing import Any

import torch
from torch import nn

from relviz.mechanisms.t5_bias import T5Bias
from relviz.positions import T5_LIMITS, t5_bucket, t5_config
from relviz.schemes.base import Param, Scheme, SchemeConfig


class T5(Scheme):
    """One bias table [num_buckets, H] computed once and reused by every layer.

    The bucketing is bidirectional exactly when the model is (as in T5's encoder/decoder).
    The scores keep relviz's 1/sqrt(D_head) scale; the bias is added unscaled.
    """

    name = "t5"
    concept = T5Bias
    summary = "T5: a learned scalar per (bucket of j − i, head), one table shared by all layers"
    order = 4
    params = (Param("num_buckets", int, 32, "t5: number of buckets", minimum=1, maximum=T5_LIMITS.trained_num_buckets, app_min=2,
                    app_max=64, label="T5 num_buckets"),
              Param("max_distance", int, 128, "t5: max_distance", minimum=1, maximum=T5_LIMITS.max_distance, app_max=512,
                    label="T5 max_distance"))

    def __init__(self, config: SchemeConfig) -> None:
        super().__init__(config)
        #: The buckets, checked once with the model's config; the forward builds its bias from it unchecked.
        self.buckets = t5_config(config.num_buckets, config.max_distance, not config.causal)
        self.bias = nn.Parameter(torch.randn(config.num_buckets, config.n_heads) * 0.02)   # [buckets, H]

    @classmethod
    def check_config(cls, config: SchemeConfig, active: bool) -> dict[str, Any]:
        t5 = t5_config(config.num_buckets, config.max_distance, not config.causal)
        return {"num_buckets": t5.num_buckets, "max_distance": t5.max_distance}

    @classmethod
    def num_parameters(cls, config: SchemeConfig) -> int:
        return config.num_buckets * config.n_heads

    @classmethod
    def describe_params(cls, values: dict) -> str:
        return f"{values['num_buckets']} buckets, max_distance {values['max_distance']}"

    bucketed = True

    @classmethod
    def offset_segments(cls, params: dict, max_s: int) -> list[tuple[int, int, str]]:
        """One segment per (causal, unidirectional) bucket."""
        nb, md = params["num_buckets"], params["max_distance"]
        buckets = t5_bucket(-torch.arange(1, max_s + 1), num_buckets=nb, max_distance=md,
                            bidirectional=False).tolist()
        segments, start = [], 1
        for s in range(2, max_s + 2):
            if s == max_s + 1 or buckets[s - 1] != buckets[start - 1]:
                b = buckets[start - 1]
                rng = f"−{start}" if start == s - 1 else f"−{s - 1}…−{start}"
                segments.append((start, s - 1, f"bucket {b}: offsets {rng}"))
                start = s
        return segments

    @classmethod
    def bucket_width(cls, params: dict, s: int) -> int:
        """How many offsets share offset −s's bucket (causal model: unidirectional buckets)."""
        md = params["max_distance"]
        causal = t5_config(params["num_buckets"], md, False)
        lo, hi = max(1, s - 4 * md), s + 4 * md
        buckets = t5_bucket(torch.arange(-hi, -lo + 1), num_buckets=causal.num_buckets, max_distance=md,
                            bidirectional=False)
        own = int(causal.bucket(torch.tensor(-s)))
        return int((buckets == own).sum())

    @classmethod
    def exact_shifts(cls, params: dict, shifts: list[int]) -> list[int]:
        """s alone in its bucket."""
        return [s for s in shifts if cls.bucket_width(params, s) == 1]

    def mechanism(self, layer: int) -> T5Bias:
        """One table, block 0's, shared by every layer; bidirectional exactly when the model is."""
        config = self.config
        return T5Bias(config.num_buckets, config.max_distance, not config.causal, config.n_heads, 0, table=self.bias,
                      buckets=self.buckets)

    @classmethod
    def exact_range_words(cls, params: dict[str, Any], exact: list[int], first_out: int) -> tuple[str, str]:
        return f"where −s has a bucket of its own (s ≤ {max(exact)})", "where it shares one"
