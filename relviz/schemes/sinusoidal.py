"""``sinusoidal``: Vaswani et al.'s fixed sin/cos vectors added to the token embeddings."""
from __future__ import annotations

from typing import Any

from relviz.mechanisms.sinusoidal import SinusoidalAbsolute
from relviz.schemes.base import Scheme, SchemeConfig


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
