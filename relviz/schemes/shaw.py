"""``shaw``: Shaw et al. 2018, Self-Attention with Relative Position Representations.

e_ij = x_i W^Q (x_j W^K + a^K_ij)ᵀ / sqrt(d_z) and z_i = Σ_j α_ij (x_j W^V + a^V_ij), with
a^K_ij = w^K[clip(j − i, k)]: 2k + 1 learned vectors each, per layer, shared by the heads.
"""
from __future__ import annotations

from typing import Any

import torch
from torch import nn

from relviz.mechanisms.shaw import ShawTables
from relviz.schemes.base import MAX_LENGTH, Param, Scheme, SchemeConfig


class Shaw(Scheme):
    """Per layer, a^K and a^V tables [2·clip + 1, D_head] shared by all heads."""

    name = "shaw"
    concept = ShawTables
    summary = "Shaw et al.: learned key/value vectors per offset j − i, clipped to ±clip; per layer"
    order = 3
    params = (Param("clip", int, 8, "shaw: clipping distance k", minimum=0, maximum=MAX_LENGTH, app_max=32,
                    label="Shaw clipping distance k"),)

    def __init__(self, config: SchemeConfig) -> None:
        super().__init__(config)
        shape = (2 * config.clip + 1, config.head_dim)
        self.rel_k = nn.ParameterList(nn.Parameter(torch.randn(shape) * 0.02) for _ in range(config.n_layers))
        self.rel_v = nn.ParameterList(nn.Parameter(torch.randn(shape) * 0.02) for _ in range(config.n_layers))

    @classmethod
    def num_parameters(cls, config: SchemeConfig) -> int:
        return 2 * config.n_layers * (2 * config.clip + 1) * config.head_dim

    @classmethod
    def describe_params(cls, values: dict) -> str:
        return f"k={values['clip']}"

    @classmethod
    def offset_segments(cls, params: dict, max_s: int) -> list[tuple[int, int, str]]:
        k = params["clip"]
        segments = [(s, s, f"offset −{s}: its own embedding") for s in range(1, min(k, max_s + 1))]
        if max_s >= k:
            segments.append((k, max_s, f"offsets ≤ −{k}: all read the end embedding −{k} (clipped)"))
        return segments

    @classmethod
    def exact_shifts(cls, params: dict, shifts: list[int]) -> list[int]:
        """s < k: offset −k is already the clipped end embedding, shared with every farther offset."""
        return [s for s in shifts if s < params["clip"]]

    def mechanism(self, layer: int) -> ShawTables:
        """Layer ``layer``'s tables, with every layer's (the views compare the layers)."""
        return ShawTables(tuple(self.rel_k), tuple(self.rel_v), self.config.clip, self.config.causal, layer)

    @classmethod
    def exact_range_words(cls, params: dict[str, Any], exact: list[int], first_out: int) -> tuple[str, str]:
        # quote the measured range, not the one k implies
        return (f"for s ≤ {max(exact)}",
                f"from s = {first_out} on (every offset from −{params['clip']} back shares the end embedding)")
