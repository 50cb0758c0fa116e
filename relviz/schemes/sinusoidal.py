"""``sinusoidal``: Vaswani et al.'s fixed sin/cos vectors added to the token embeddings."""
from __future__ import annotations

from typing import Any

import numpy as np
import torch

from relviz.absolute import sinusoidal_encoding
from relviz.mechanisms.sinusoidal import SinusoidalAbsolute
from relviz.schemes.base import Scheme, SchemeConfig, expand_offsets
from relviz.schemes.view_kinds import PositionStructure


class Sinusoidal(Scheme):
    """Fixed absolute vectors, computed for any length (no parameters)."""

    name = "sinusoidal"
    concept = SinusoidalAbsolute
    summary = "fixed sin/cos vectors added to the token embeddings (absolute)"
    order = 1
    family = "absolute"

    @classmethod
    def check_config(cls, config: SchemeConfig, active: bool) -> dict[str, Any]:
        if active and config.d_model % 2:
            raise ValueError(f"scheme 'sinusoidal' pairs sin and cos: d_model must be even; got {config.d_model}")
        return {}

    def mechanism(self, layer: int) -> SinusoidalAbsolute:
        return SinusoidalAbsolute(self.config.d_model)

    def structure(self, length: int) -> PositionStructure:
        dim = self.config.d_model
        table = sinusoidal_encoding(length, dim, dtype=torch.float64, device="cpu").numpy()    # [L, D]
        offsets = np.abs(np.arange(-(length - 1), length))
        per_offset = (table[offsets] @ table[0]) / (dim / 2)
        return PositionStructure(
            self.name, "sinusoidal: p_i · p_j / (d/2)", "p_i·p_j/(d/2)",
            expand_offsets(per_offset, length)[None].astype(np.float32), None, self.config.causal, True)

    @classmethod
    def structure_text(cls, structure: PositionStructure) -> str:
        return ("Absolute vectors, yet their dot product depends only on j − i (a sum of cos(ω · (j − i))). "
                "Nothing learned: the model has to turn this into the offset it needs.")
