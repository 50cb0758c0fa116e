"""``skew``: the Music Transformer (Huang et al. 2018): a learned vector per distance,
applied with the skew (pad, reshape, slice) instead of an L × L × D gather. Causal only."""
from __future__ import annotations

import numpy as np
import torch
from torch import nn

from relviz._checks import check_int
from relviz.mechanisms.skew import SkewTable
from relviz.schemes.base import MAX_LENGTH, Param, Scheme, SchemeConfig, expand_offsets
from relviz.schemes.view_kinds import PositionStructure


def skew_rows(length: int, distances: int) -> np.ndarray:
    """The row of E_r [distances, D] that cell (i, j) uses, −1 for j > i: [L, L] int64.

    Row m stands for distance m − (M − 1); distances beyond the table use row 0 (what
    relviz.attention.skew_attention does). Computed per offset, then expanded.
    """
    length = check_int("length", length, minimum=1)
    distances = check_int("distances", distances, minimum=1)
    offsets = np.arange(-(length - 1), length)
    per_offset = np.where(offsets <= 0, np.maximum(offsets + distances - 1, 0), -1)
    return expand_offsets(per_offset, length)


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

    def structure(self, length: int) -> PositionStructure:
        m = self.config.skew_distances
        return PositionStructure(
            self.name, f"Music Transformer: row of E_r ({m} distances)", "E_r row",
            skew_rows(length, m)[None], (-1, m - 1), True, True, facts={"distances": m})

    @classmethod
    def structure_text(cls, structure: PositionStructure) -> str:
        last = structure.facts["distances"] - 1
        return (f"Row m of E_r stands for distance m − {last}; the skew moves q_i · E_r[m] into cell (i, j) with "
                f"j − i = m − {last}. Farther keys share row 0. Future keys are masked (the skew leaves meaningless "
                "values there; the hover says −1).")
