"""``skew``: the Music Transformer (Huang et al. 2018): a learned vector per distance,
applied with the skew (pad, reshape, slice) instead of an L × L × D gather. Causal only."""
from __future__ import annotations

import torch
from torch import nn

from relviz.mechanisms.skew import SkewTable
from relviz.schemes.base import MAX_LENGTH, Param, Scheme, SchemeConfig


class Skew(Scheme):
    """Per layer, E_r [skew_distances, D_head] shared by heads; row m is distance m − (M − 1),
    distances beyond the table use its farthest row."""

    name = "skew"
    concept = SkewTable
    summary = "Music Transformer: a learned vector per distance, applied with the skew; causal only"
    order = 5
    causal_only = True
    causal_reason = ("the skew is exact only for keys j <= i (its upper triangle is garbage the causal mask "
                     "hides)")
    params = (Param("skew_distances", int, 32, "skew: rows of E_r (distances)", minimum=1, maximum=MAX_LENGTH,
                    app_max=128, label="skew: distances in E_r"),)

    def __init__(self, config: SchemeConfig) -> None:
        super().__init__(config)
        shape = (config.skew_distances, config.head_dim)
        self.e_r = nn.ParameterList(nn.Parameter(torch.randn(shape) * 0.02) for _ in range(config.n_layers))

    @classmethod
    def num_parameters(cls, config: SchemeConfig) -> int:
        return config.n_layers * config.skew_distances * config.head_dim

    @classmethod
    def describe_params(cls, values: dict) -> str:
        return f"{values['skew_distances']} distances"

    def mechanism(self, layer: int) -> SkewTable:
        """Layer ``layer``'s E_r, with every layer's (the views compare the layers)."""
        return SkewTable(tuple(self.e_r), layer)
