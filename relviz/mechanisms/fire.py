"""FIRE (Li et al. 2023): a learned MLP of the distance normalised by the query's own position,
f_θ(ψ(i − j) / ψ(max(L, i))) with ψ(x) = log(c·x + 1), one function per layer. No model in the family table
applies it (``read`` finds it in no config): relviz's toy model hands it out (relviz.toy_plan), so a FIRE
checkpoint draws on the Your model page. Its function and its curve are relviz.schemes.fire's."""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import torch

from relviz.mechanisms.base import ToyMechanism
from relviz.mechanisms.view_kinds import LayerView
from relviz.schemes.fire import Fire, FireBias, fire_curve

__all__ = ["FireFunction"]


@dataclass(frozen=True, eq=False)
class FireFunction(ToyMechanism):
    """``function``: the layer's FIRE module (c, L and the MLP); ``layer``: its index."""

    function: FireBias
    layer: int

    name = "fire"
    role = "adds a learned function of the normalised distance"
    order = 13
    scheme = "fire"

    def bias(self, length: int) -> torch.Tensor:
        """[H, L, L] what the layer adds to its logits (future keys: distance 0, masked by the pattern)."""
        with torch.no_grad():
            return self.function(length)

    def label(self) -> str:
        return f"FIRE L {self.function.threshold.item():.3g}"

    def describe(self) -> str:
        return (f"FIRE: a learned MLP of ψ(i − j) / ψ(max(L, i)), ψ(x) = log(c·x + 1), this layer's own "
                f"(c = {self.function.c.item():.3g}, L = {self.function.threshold.item():.3g})")

    def settings(self) -> dict[str, Any]:
        return {"c": self.function.c.item(), "threshold": self.function.threshold.item(),
                "hidden": self.function.mlp[0].out_features}

    def views(self, length: int, layer: Any) -> list[LayerView]:
        curve = fire_curve(self.function, self.layer, length)
        return [replace(curve, caption=Fire.parameter_caption(curve))]
