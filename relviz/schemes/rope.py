"""``rope``: Su et al., RoFormer: q and k rotated by angles proportional to their positions,
so q_i · k_j depends on i and j only through j − i ("rotate half" layout of GPT-NeoX/Llama)."""
from __future__ import annotations

from typing import Any

import numpy as np
import torch

from relviz.rope.math import default_inv_freq, half_cos_sin, rotate_half_by
from relviz.schemes.base import Attention, Param, Scheme, SchemeConfig, dot_product_attention, expand_offsets
from relviz.schemes.view_kinds import PositionStructure


def rope_angles(length: int, dim: int, *, base: float = 10000.0, device: torch.device | str = "cpu",
                dtype: torch.dtype = torch.float32) -> tuple[torch.Tensor, torch.Tensor]:
    """(cos, sin) [L, D] of position t < length, pair (p, p + D/2) turned by t · θ_p, θ_p = 1 / base^(2p/D):
    transformers' arithmetic (relviz.rope.math), computed once per forward as its rotary module does."""
    inv_freq = default_inv_freq(dim, base, device)                                      # [D/2]
    freqs = torch.arange(length, device=device, dtype=torch.float32)[:, None] * inv_freq[None, :]   # [L, D/2]
    return half_cos_sin(freqs, 1.0, dtype)


def rope_rotate(x: torch.Tensor, *, base: float = 10000.0,
                angles: tuple[torch.Tensor, torch.Tensor] | None = None) -> torch.Tensor:
    """Rotary embedding of x [B, H, L, D] (D even) at positions 0 … L − 1, Llama's rotate_half pairs
    (``angles``: :func:`rope_angles`, when already computed).

    Then q_i · k_j depends on i and j only through j − i: the rotation by t_i on one side and
    t_j on the other leaves a rotation by (j − i).
    """
    length, dim = x.shape[-2], x.shape[-1]
    cos, sin = rope_angles(length, dim, base=base, device=x.device, dtype=x.dtype) if angles is None else angles
    return rotate_half_by(x, cos, sin)


class Rope(Scheme):
    """No parameters: fixed rotation angles θ_p = base^(−2p/d) per pair of dimensions, in transformers'
    arithmetic and layout (relviz.rope.math: the same θ and the same rotate_half as Llama's)."""

    name = "rope"
    summary = "RoPE: q and k rotated by angles proportional to position, so q · k sees only j − i"
    order = 7
    params = (Param("rope_base", float, 10000.0, "rope: base of the rotation frequencies", minimum=1,
                    exclusive_minimum=True),)

    @classmethod
    def check_config(cls, config: SchemeConfig, active: bool) -> dict[str, Any]:
        if active and config.head_dim % 2:
            raise ValueError(f"scheme 'rope' rotates pairs of dimensions: d_model / n_heads must "
                             f"be even; got {config.head_dim}")
        return {}

    def prepare(self, length: int, like: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """The rotation's (cos, sin) [L, D_head], once per forward (the same for every layer)."""
        return rope_angles(length, self.config.head_dim, base=self.config.rope_base, device=like.device,
                           dtype=like.dtype)

    def attend(self, layer: int, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, *,
               shared: tuple[torch.Tensor, torch.Tensor] | None = None, need_weights: bool = False) -> Attention:
        angles = self.prepare(q.shape[-2], q) if shared is None else shared
        return dot_product_attention(rope_rotate(q, angles=angles), rope_rotate(k, angles=angles), v,
                                     causal=self.config.causal, need_weights=need_weights)

    def structure(self, length: int) -> PositionStructure:
        theta = default_inv_freq(self.config.head_dim, self.config.rope_base).double().numpy()   # [D/2]
        offsets = np.arange(-(length - 1), length)
        per_offset = np.cos(offsets[:, None] * theta[None, :]).mean(axis=1)                  # [2L − 1]
        return PositionStructure(
            self.name, "RoPE: mean cos((j − i) · θ_p) over the rotation pairs", "mean cos((j−i)θ)",
            expand_offsets(per_offset, length)[None].astype(np.float32), None, self.config.causal, True)

    no_parameters = ("RoPE has no position parameters: fixed rotation angles θ_p = base^(−2p/d) per pair of "
                     "dimensions. The structure beside the close-up shows what the rotation does to q · k.")

    @classmethod
    def structure_text(cls, structure: PositionStructure) -> str:
        return ("q and k are rotated by angles proportional to their positions, so q_i · k_j sees only the "
                "difference: pair p turns by (j − i) · θ_p. Shown: how much an unchanged vector still agrees with "
                "itself after that relative turn, averaged over the pairs. Nothing learned.")
