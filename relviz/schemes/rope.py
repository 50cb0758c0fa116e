"""``rope``: Su et al., RoFormer: q and k rotated by angles proportional to their positions,
so q_i · k_j depends on i and j only through j − i ("rotate half" layout of GPT-NeoX/Llama)."""
from __future__ import annotations

from typing import Any


from relviz.mechanisms.rotation import Rotation
from relviz.rope.config import RopeConfig
from relviz.schemes.base import Param, Scheme, SchemeConfig


class Rope(Scheme):
    """No parameters: fixed rotation angles θ_p = base^(−2p/d) per pair of dimensions, turned by
    relviz.mechanisms.rotation's Rotation in Llama's rotate_half layout (relviz.rope.math)."""

    name = "rope"
    concept = Rotation
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

    def mechanism(self, layer: int) -> Rotation:
        """Every layer turns q and k with the same θ, in the arithmetic the shipped checkpoint was trained with,
        base^(−2i/d) (relviz.rope.math.default_inv_freq; transformers' 1 / base^(2i/d) is at most one ulp away)."""
        config = self.config
        return Rotation(rope=RopeConfig(head_dim=config.head_dim, base=config.rope_base,
                                        max_position_embeddings=config.max_len), reciprocal=False)
