"""The Music Transformer's relative attention (Huang et al. 2018): a learned row E_r[m] per distance, q_i·E_r
moved into place by the skew; one table per layer, shared by the heads. No model in the family table
applies it (``read`` finds it in no config): relviz's toy model hands it out (relviz.toy_plan). Its views
are relviz.schemes.skew's, written once there."""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import torch

from relviz.mechanisms.base import ToyMechanism
from relviz.mechanisms.view_kinds import LayerView
from relviz.schemes.skew import Skew, skew_views

__all__ = ["SkewTable"]


@dataclass(frozen=True, eq=False)
class SkewTable(ToyMechanism):
    """``e_r``: every layer's table [M, D_head] (the views compare the layers); ``layer``: this layer's index."""

    e_r: tuple[torch.Tensor, ...]
    layer: int

    name = "skew"
    role = "adds q·E_r per distance to the logits (the skew)"
    order = 15
    scheme = "skew"

    def label(self) -> str:
        return f"skew M {self.e_r[0].shape[0]}"

    def describe(self) -> str:
        return (f"Music Transformer: a learned row E_r per distance 0…{self.e_r[0].shape[0] - 1} back, q·E_r moved "
                "into place by the skew, this layer's own table")

    def settings(self) -> dict[str, Any]:
        return {"distances": int(self.e_r[0].shape[0]), "head_dim": int(self.e_r[0].shape[1])}

    def views(self, length: int, layer: Any) -> list[LayerView]:
        return [replace(view, caption=Skew.parameter_caption(view)) for view in skew_views(list(self.e_r),
                                                                                             layer=self.layer)]
