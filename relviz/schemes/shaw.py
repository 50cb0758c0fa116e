"""``shaw``: Shaw et al. 2018, Self-Attention with Relative Position Representations.

e_ij = x_i W^Q (x_j W^K + a^K_ij)ᵀ / sqrt(d_z) and z_i = Σ_j α_ij (x_j W^V + a^V_ij), with
a^K_ij = w^K[clip(j − i, k)]: 2k + 1 learned vectors each, per layer, shared by the heads.
"""
from __future__ import annotations

from typing import Any

import numpy as np
import torch
from torch import nn

from relviz.attention import shaw_attention
from relviz.positions import shaw_clip_index
from relviz.schemes.base import Attention, MAX_LENGTH, Param, Scheme, SchemeConfig
from relviz.schemes.view_kinds import PositionStructure, View, norms_and_cosine
from relviz.mechanisms.vectors import vector_table_caption, vector_table_views


class Shaw(Scheme):
    """Per layer, a^K and a^V tables [2·clip + 1, D_head] shared by all heads."""

    name = "shaw"
    summary = "Shaw et al.: learned key/value vectors per offset j − i, clipped to ±clip; per layer"
    order = 3
    params = (Param("clip", int, 8, "shaw: clipping distance k", minimum=0, maximum=MAX_LENGTH, app_max=32,
                    label="Shaw clipping distance k"),)

    def __init__(self, config: SchemeConfig) -> None:
        super().__init__(config)
        shape = (2 * config.clip + 1, config.head_dim)
        self.rel_k = nn.ParameterList(nn.Parameter(torch.randn(shape) * 0.02) for _ in range(config.n_layers))
        self.rel_v = nn.ParameterList(nn.Parameter(torch.randn(shape) * 0.02) for _ in range(config.n_layers))

    @classmethod
    def num_parameters(cls, config: SchemeConfig) -> int:
        return 2 * config.n_layers * (2 * config.clip + 1) * config.head_dim

    @classmethod
    def describe_params(cls, values: dict) -> str:
        return f"k={values['clip']}"

    @classmethod
    def offset_segments(cls, params: dict, max_s: int) -> list[tuple[int, int, str]]:
        k = params["clip"]
        segments = [(s, s, f"offset −{s}: its own embedding") for s in range(1, min(k, max_s + 1))]
        if max_s >= k:
            segments.append((k, max_s, f"offsets ≤ −{k}: all read the end embedding −{k} (clipped)"))
        return segments

    @classmethod
    def exact_shifts(cls, params: dict, shifts: list[int]) -> list[int]:
        """s < k: offset −k is already the clipped end embedding, shared with every farther offset."""
        return [s for s in shifts if s < params["clip"]]

    def attend(self, layer: int, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, *, shared: None = None,
               need_weights: bool = False) -> Attention:
        return shaw_attention(q, k, v, self.rel_k[layer], self.rel_v[layer], clip=self.config.clip,
                              causal=self.config.causal, need_weights=need_weights, validate=False)

    def structure(self, length: int) -> PositionStructure:
        k = self.config.clip
        index = shaw_clip_index(length, k=k, device="cpu").numpy()              # [L, L]
        return PositionStructure(
            self.name, f"Shaw clip index clip(j − i, −{k}, {k}) + {k}", "clip index", index[None], (0, 2 * k),
            self.config.causal, True, facts={"k": k})

    def parameter_views(self, *, length: int, train_length: int, layer: int) -> list[View]:
        return shaw_views(list(self.rel_k), list(self.rel_v), clip=self.config.clip, causal=self.config.causal,
                          layer=layer)

    @classmethod
    def exact_range_words(cls, params: dict[str, Any], exact: list[int], first_out: int) -> tuple[str, str]:
        # quote the measured range, not the one k implies
        return (f"for s ≤ {max(exact)}",
                f"from s = {first_out} on (every offset from −{params['clip']} back shares the end embedding)")

    @classmethod
    def structure_text(cls, structure: PositionStructure) -> str:
        k = structure.facts["k"]
        return (f"Offset j − i, clipped to ±{k}, picks one of {2 * k + 1} learned vectors a^K (added to the key) "
                f"and a^V (added to the value); one table per layer, shared by the heads. Every key {k} or more "
                "back reads the same vector"
                + ("." if structure.masked_future else f" (every key {k} or more ahead, the other end's)."))

    @classmethod
    def parameter_caption(cls, view: View) -> str:
        return vector_table_caption(view, (
            "Shaw's table has 2k + 1 rows per layer (a^K added to keys, a^V to values), shared by the heads; in a "
            "causal model the rows for future offsets are never read, so they stay at their random start (shrunk "
            "by weight decay)."))


def shaw_views(rel_k: list[torch.Tensor], rel_v: list[torch.Tensor], *, clip: int, causal: bool,
               layer: int) -> list[View]:
    """The tables' views: every layer's a^K and a^V norms per offset, and ``layer``'s cosine between its
    a^K vectors (rel_k, rel_v: one [2·clip + 1, D_head] per layer). The toy model's parameter views, and
    what relviz.mechanisms.shaw draws."""
    offsets = np.arange(-clip, clip + 1)
    used = offsets <= 0 if causal else np.ones_like(offsets, dtype=bool)
    norms, cosine = norms_and_cosine(rel_k)
    value_norms, _ = norms_and_cosine(rel_v)
    return vector_table_views(
        name="a^K", what="Shaw: norm of a^K (solid) and a^V (dashed)", offsets=offsets, norms=norms,
        cosine=cosine, used=used, layer=layer, second=("a^V", value_norms))
