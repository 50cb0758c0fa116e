"""The Music Transformer's relative attention (Huang et al. 2018): a learned row E_r[m] per distance, q_i·E_r
moved into place by the skew; one table per layer, shared by the heads. No model in the family table
applies it (``read`` finds it in no config): relviz's toy model's ``skew`` scheme hands it out holding its
learned tables, and runs it. Its attention is relviz.attention's skew_attention; its views and words are
written once, here."""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import torch

from relviz.attention import skew_attention
from relviz.attention_steps import Attention
from relviz.mechanisms.base import ToyMechanism
from relviz.mechanisms.vectors import vector_table_caption, vector_table_views
from relviz._checks import check_int
from relviz.mechanisms.view_kinds import LayerView
from relviz.schemes.view_kinds import PositionStructure, View, expand_offsets, norms_and_cosine

__all__ = ["SkewTable", "table_caption", "skew_rows", "structure_caption"]

#: what the caption under the table's views says about E_r
ABOUT = ("E_r has one row per distance 0…M − 1 per layer, shared by the heads; the skew puts q_i · E_r[m] into "
         "every cell at that distance.")


@dataclass(frozen=True, eq=False)
class SkewTable(ToyMechanism):
    """``e_r``: every layer's table [M, D_head] (the views compare the layers); ``layer``: this layer's index."""

    e_r: tuple[torch.Tensor, ...]
    layer: int

    name = "skew"
    role = "adds q·E_r per distance to the logits (the skew)"
    order = 15

    def label(self) -> str:
        return f"skew M {self.e_r[0].shape[0]}"

    def describe(self) -> str:
        return (f"Music Transformer: a learned row E_r per distance 0…{self.e_r[0].shape[0] - 1} back, q·E_r moved "
                "into place by the skew, this layer's own table")

    def settings(self) -> dict[str, Any]:
        return {"distances": int(self.e_r[0].shape[0]), "head_dim": int(self.e_r[0].shape[1])}

    def attend(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, *, causal: bool, shared: Any = None,
               need_weights: bool = False) -> Attention:
        """The Music Transformer's attention with this layer's E_r (relviz.attention.skew_attention, unchecked;
        causal only, as the skew is)."""
        return skew_attention(q, k, v, self.e_r[self.layer], need_weights=need_weights, validate=False)

    def structure(self, length: int, causal: bool) -> PositionStructure:
        """The row of E_r each cell reads [1, L, L], −1 for the future cells (causal only, as the skew is)."""
        m = int(self.e_r[0].shape[0])
        return PositionStructure(f"Music Transformer: row of E_r ({m} distances)", "E_r row", skew_rows(length, m)[None],
                                 (-1, m - 1), True, True, facts={"distances": m}, caption=structure_caption(m))

    def table_views(self) -> list[View]:
        """Every layer's E_r row norms per distance, and this layer's cosine between its rows."""
        m = self.e_r[0].shape[0]
        offsets = np.arange(m) - (m - 1)
        norms, cosine = norms_and_cosine(list(self.e_r))
        return vector_table_views(
            name="E_r", what="Music Transformer: norm of each E_r row", offsets=offsets, norms=norms, cosine=cosine,
            used=np.ones(m, dtype=bool), layer=self.layer)

    def views(self, length: int, layer: Any) -> list[LayerView]:
        return [replace(view, caption=table_caption(view)) for view in self.table_views()]


def table_caption(view: View) -> str:
    """The caption under one of :meth:`SkewTable.table_views`' views."""
    return vector_table_caption(view, ABOUT)


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


def structure_caption(distances: int) -> str:
    """The words beside :meth:`SkewTable.structure` for a table of ``distances`` rows."""
    last = distances - 1
    return (f"Row m of E_r stands for distance m − {last}; the skew moves q_i · E_r[m] into cell (i, j) with j − i = "
            f"m − {last}. Farther keys share row 0. Future keys are masked (the skew leaves meaningless values there; the "
            "hover says −1).")
