"""``kerple``: KERPLE, logarithmic variant (Chi et al. 2022, "KERPLE: Kernelized Relative
Positional Embedding for Length Extrapolation").

Each head adds −r1 · log(1 + r2 · |j − i|) to its attention logits, with r1, r2 > 0 learned per
head (a conditionally positive definite kernel of the distance, shifted into a bias). ALiBi is
the fixed straight-line cousin; the logarithm penalises far keys less and less.
"""
from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from relviz.mechanisms.kerple import KerpleBias
from relviz.schemes.base import Scheme, SchemeConfig


#: softplus⁻¹(1): the raw value whose softplus is 1 (r1 and r2 start at 1 in every head).
_ONE = float(np.log(np.expm1(1.0)))


class Kerple(Scheme):
    """Per-head r1, r2 (kept positive through a softplus), one pair shared by every layer."""

    name = "kerple"
    concept = KerpleBias
    summary = "KERPLE (log): a learned per-head bias −r1 · log(1 + r2 · |j − i|), r1, r2 > 0"
    order = 8
    # Like ALiBi, the bias only falls with distance, so no head singles out offset −5 by position
    # alone: the model composes it over layers. The same settings as ALiBi's (6 narrow layers).
    training_defaults = {"model": {"n_layers": 6, "d_ff": 64}, "training": {"lr": 1e-2}}
    shape_note = "KERPLE 6 (its bias, too, only falls with distance)"

    def __init__(self, config: SchemeConfig) -> None:
        super().__init__(config)
        self.raw_r1 = nn.Parameter(torch.full((config.n_heads,), _ONE))   # [H]
        self.raw_r2 = nn.Parameter(torch.full((config.n_heads,), _ONE))   # [H]

    @classmethod
    def num_parameters(cls, config: SchemeConfig) -> int:
        return 2 * config.n_heads

    def coefficients(self) -> tuple[torch.Tensor, torch.Tensor]:
        """(r1, r2), each [H], both > 0."""
        return F.softplus(self.raw_r1), F.softplus(self.raw_r2)

    def mechanism(self, layer: int) -> KerpleBias:
        """Every layer shares r1 and r2."""
        return KerpleBias(*self.coefficients(), causal=self.config.causal)

