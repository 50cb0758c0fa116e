"""Shaw et al. (2018): learned vectors a^K, a^V per offset j − i clipped to ±k, added to the keys and the
values; one pair of tables per layer, shared by the heads. No model in the family table applies it
(``read`` finds it in no config): relviz's toy model's ``shaw`` scheme hands it out holding its learned tables,
and runs it. Its attention is relviz.attention's shaw_attention; its views and words are written once, here."""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import torch

from relviz.attention import shaw_attention
from relviz.attention_steps import Attention
from relviz.mechanisms.base import ToyMechanism
from relviz.mechanisms.vectors import vector_table_caption, vector_table_views
from relviz.mechanisms.view_kinds import LayerView
from relviz.positions import shaw_clip_index
from relviz.schemes.view_kinds import PositionStructure, View, norms_and_cosine

__all__ = ["ShawTables", "table_caption", "structure_caption"]

#: what the caption under the tables' views says about Shaw's table
ABOUT = ("Shaw's table has 2k + 1 rows per layer (a^K added to keys, a^V to values), shared by the heads; in a "
         "causal model the rows for future offsets are never read, so they stay at their random start (shrunk "
         "by weight decay).")


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

    def label(self) -> str:
        return f"Shaw k {self.clip}"

    def describe(self) -> str:
        return (f"Shaw et al.: learned a^K and a^V per offset j − i clipped to ±{self.clip} "
                f"({2 * self.clip + 1} vectors each), this layer's own tables")

    def settings(self) -> dict[str, Any]:
        return {"clip": self.clip, "rows": 2 * self.clip + 1, "head_dim": int(self.rel_k[0].shape[1])}

    def attend(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, *, causal: bool, shared: Any = None,
               need_weights: bool = False) -> Attention:
        """Shaw's attention with this layer's a^K and a^V (relviz.attention.shaw_attention, unchecked)."""
        return shaw_attention(q, k, v, self.rel_k[self.layer], self.rel_v[self.layer], clip=self.clip, causal=causal,
                              need_weights=need_weights, validate=False)

    def structure(self, length: int, causal: bool) -> PositionStructure:
        """Which row of the tables each cell reads, clip(j − i, −k, k) + k [1, L, L]."""
        k = self.clip
        index = shaw_clip_index(length, k=k, device="cpu").numpy()                          # [L, L]
        return PositionStructure(f"Shaw clip index clip(j − i, −{k}, {k}) + {k}", "clip index", index[None], (0, 2 * k),
                                 causal, True, facts={"k": k}, caption=structure_caption(k, causal=causal))

    def table_views(self) -> list[View]:
        """Every layer's a^K and a^V norms per offset, and this layer's cosine between its a^K vectors."""
        offsets = np.arange(-self.clip, self.clip + 1)
        used = offsets <= 0 if self.causal else np.ones_like(offsets, dtype=bool)
        norms, cosine = norms_and_cosine(list(self.rel_k))
        value_norms, _ = norms_and_cosine(list(self.rel_v))
        return vector_table_views(
            name="a^K", what="Shaw: norm of a^K (solid) and a^V (dashed)", offsets=offsets, norms=norms,
            cosine=cosine, used=used, layer=self.layer, second=("a^V", value_norms))

    def views(self, length: int, layer: Any) -> list[LayerView]:
        return [replace(view, caption=table_caption(view)) for view in self.table_views()]


def table_caption(view: View) -> str:
    """The caption under one of :meth:`ShawTables.table_views`' views."""
    return vector_table_caption(view, ABOUT)


def structure_caption(k: int, *, causal: bool) -> str:
    """The words beside :meth:`ShawTables.structure` for clipping distance ``k``; ``causal``: no key ahead is read."""
    return (f"Offset j − i, clipped to ±{k}, picks one of {2 * k + 1} learned vectors a^K (added to the key) and a^V "
            f"(added to the value); one table per layer, shared by the heads. Every key {k} or more back reads the same "
            "vector" + ("." if causal else f" (every key {k} or more ahead, the other end's)."))
