"""``learned``: one learned vector per absolute position 0..max_len − 1 (GPT-2, BERT)."""
from __future__ import annotations

import torch
from torch import nn

from relviz.mechanisms.absolute import LearnedAbsolute
from relviz.schemes.base import MAX_LENGTH, Param, Scheme, SchemeConfig


class LearnedAbsoluteScheme(Scheme):
    """A table [max_len, D] added to the token embeddings; nothing exists beyond max_len."""

    name = "learned"
    concept = LearnedAbsolute
    summary = "one learned vector per absolute position, up to max_len (absolute)"
    order = 2
    family = "absolute"
    params = (Param("max_len", int, 64, "learned: number of absolute positions", minimum=1, maximum=MAX_LENGTH,
                    app_min=8, app_max=256, label="learned: max_len (positions with a vector)"),)

    def __init__(self, config: SchemeConfig) -> None:
        super().__init__(config)
        self.table = nn.Parameter(torch.randn(config.max_len, config.d_model) * 0.02)   # [max_len, D]

    @classmethod
    def num_parameters(cls, config: SchemeConfig) -> int:
        return config.max_len * config.d_model

    @classmethod
    def check_length_for(cls, config: SchemeConfig, length: int) -> None:
        if length > config.max_len:
            raise ValueError(
                f"scheme 'learned' has position embeddings for positions 0..{config.max_len - 1} "
                f"only (max_len={config.max_len}); a sequence of length {length} needs "
                f"positions up to {length - 1}, which have no embedding. Relative schemes have no "
                "such limit.")

    def mechanism(self, layer: int) -> LearnedAbsolute:
        return LearnedAbsolute("position.table", table=self.table)
