"""Sinusoidal absolute positions (Vaswani et al. 2017): PE[p, 2k] = sin(p·ω_k), PE[p, 2k + 1] = cos(p·ω_k),
ω_k = 10000^(−2k/d), added to the input before the first layer; nothing learned. No model in the family
table applies it (``read`` finds it in no config): relviz's toy model hands it out (relviz.toy_plan). The
encoding is relviz.absolute's, its words relviz.schemes.sinusoidal's."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from relviz.mechanisms.base import ToyMechanism
from relviz.mechanisms.view_kinds import LayerView, Note
from relviz.schemes.sinusoidal import Sinusoidal

__all__ = ["SinusoidalAbsolute"]


@dataclass(frozen=True)
class SinusoidalAbsolute(ToyMechanism):
    d_model: int

    needs_weights = False           # fixed: nothing learned
    name = "sinusoidal"
    role = "adds a fixed sin/cos vector per position to the input"
    order = 21
    scheme = "sinusoidal"
    legend = "absolute"

    def label(self) -> str:
        return "sinusoidal abs"

    def describe(self) -> str:
        return f"sinusoidal absolute positions (d = {self.d_model}) added to the input, fixed"

    def settings(self) -> dict[str, Any]:
        return {"d_model": self.d_model}

    def views(self, length: int, layer: Any) -> list[LayerView]:
        return [Note("Sinusoidal positions (in the input, before the first layer)", Sinusoidal.no_parameters)]
