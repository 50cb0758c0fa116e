"""Shaw et al. (2018): learned vectors a^K, a^V per offset j − i clipped to ±k, added to the keys and the
values; one pair of tables per layer, shared by the heads. No model in the family table applies it
(``read`` finds it in no config): relviz's toy model hands it out (relviz.toy_plan). Its views are
relviz.schemes.shaw's, written once there."""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import torch

from relviz.mechanisms.base import ToyMechanism
from relviz.mechanisms.view_kinds import LayerView
from relviz.schemes.shaw import Shaw, shaw_views

__all__ = ["ShawTables"]


@dataclass(frozen=True, eq=False)
class ShawTables(ToyMechanism):
    """``rel_k``, ``rel_v``: every layer's tables [2·clip + 1, D_head] (the views compare the layers);
    ``layer``: this layer's index."""

    rel_k: tuple[torch.Tensor, ...]
    rel_v: tuple[torch.Tensor, ...]
    clip: int
    causal: bool
    layer: int

    name = "shaw"
    role = "adds learned vectors per clipped offset to keys and values"
    order = 14
    scheme = "shaw"

    def label(self) -> str:
        return f"Shaw k {self.clip}"

    def describe(self) -> str:
        return (f"Shaw et al.: learned a^K and a^V per offset j − i clipped to ±{self.clip} "
                f"({2 * self.clip + 1} vectors each), this layer's own tables")

    def settings(self) -> dict[str, Any]:
        return {"clip": self.clip, "rows": 2 * self.clip + 1, "head_dim": int(self.rel_k[0].shape[1])}

    def views(self, length: int, layer: Any) -> list[LayerView]:
        views = shaw_views(list(self.rel_k), list(self.rel_v), clip=self.clip, causal=self.causal, layer=self.layer)
        return [replace(view, caption=Shaw.parameter_caption(view)) for view in views]
