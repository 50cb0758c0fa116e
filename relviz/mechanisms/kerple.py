"""KERPLE (Chi et al. 2022, log variant): a learned bias −r1_h · log(1 + r2_h · |j − i|) per head, one pair
(r1, r2) shared by every layer. No model in the family table applies it (``read`` finds it in no config):
relviz's toy model hands it out (relviz.toy_plan), so a KERPLE checkpoint draws on the Your model page. Its
formula and its curve are relviz.schemes.kerple's, written once there."""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import torch

from relviz._words import counted
from relviz.mechanisms.base import ToyMechanism
from relviz.mechanisms.view_kinds import LayerView
from relviz.schemes.kerple import Kerple, kerple_bias, kerple_curve

__all__ = ["KerpleBias"]


@dataclass(frozen=True, eq=False)
class KerpleBias(ToyMechanism):
    """``r1``, ``r2``: [H], both > 0 (the softplus of the learned values)."""

    r1: torch.Tensor
    r2: torch.Tensor

    name = "kerple"
    role = "adds a learned logarithmic bias per head"
    order = 12
    scheme = "kerple"

    def bias_per_offset(self, offsets: torch.Tensor) -> torch.Tensor:
        """[H, n] the bias at ``offsets`` [n]."""
        return kerple_bias(self.r1, self.r2, offsets)

    def label(self) -> str:
        return f"KERPLE {counted(len(self.r1), 'head')}"

    def describe(self) -> str:
        return (f"KERPLE (log): bias −r1·log(1 + r2·|j − i|) per head, learned, shared by every layer; "
                f"r1 {self.r1.min().item():.3g}–{self.r1.max().item():.3g}")

    def settings(self) -> dict[str, Any]:
        return {"heads": len(self.r1), "r1": self.r1.tolist(), "r2": self.r2.tolist()}

    def views(self, length: int, layer: Any) -> list[LayerView]:
        offsets = np.arange(-(length - 1), 1)
        with torch.no_grad():
            per_offset = self.bias_per_offset(torch.from_numpy(offsets)).numpy()          # [H, L]
        curve = kerple_curve(self.r1.numpy(), self.r2.numpy(), offsets, per_offset)
        return [replace(curve, caption=Kerple.parameter_caption(curve))]
