"""Sinusoidal absolute positions (Vaswani et al. 2017): PE[p, 2k] = sin(p·ω_k), PE[p, 2k + 1] = cos(p·ω_k),
ω_k = 10000^(−2k/d), added to the input before the first layer; nothing learned. No model in the family
table applies it (``read`` finds it in no config): relviz's toy model's ``sinusoidal`` scheme hands it out and
runs it. The encoding is relviz.absolute's."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from relviz.absolute import sinusoidal_encoding
from relviz.mechanisms.base import ToyMechanism
from relviz.mechanisms.view_kinds import LayerView, Note

__all__ = ["SinusoidalAbsolute", "NOTHING_LEARNED"]

#: what the pages say about its parameters: there are none
NOTHING_LEARNED = ("Sinusoidal positions are fixed sin/cos vectors: nothing about position is learned. "
                   "Their dot product (the structure beside the close-up) depends only on j − i.")


@dataclass(frozen=True)
class SinusoidalAbsolute(ToyMechanism):
    d_model: int

    needs_weights = False           # fixed: nothing learned
    name = "sinusoidal"
    role = "adds a fixed sin/cos vector per position to the input"
    order = 21
    legend = "absolute"

    def embed(self, x: torch.Tensor) -> torch.Tensor:
        """x [B, L, D] + PE [L, D], computed for this length in x's dtype."""
        table = sinusoidal_encoding(x.shape[1], x.shape[2], dtype=x.dtype, device=x.device)   # [L, D]
        return x + table

    def label(self) -> str:
        return "sinusoidal abs"

    def describe(self) -> str:
        return f"sinusoidal absolute positions (d = {self.d_model}) added to the input, fixed"

    def settings(self) -> dict[str, Any]:
        return {"d_model": self.d_model}

    def views(self, length: int, layer: Any) -> list[LayerView]:
        return [Note("Sinusoidal positions (in the input, before the first layer)", NOTHING_LEARNED)]
