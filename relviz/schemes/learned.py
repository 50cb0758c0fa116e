"""``learned``: one learned vector per absolute position 0..max_len − 1 (GPT-2, BERT)."""
from __future__ import annotations

import numpy as np
import torch
from torch import nn

from relviz.mechanisms.absolute import LearnedAbsolute
from relviz.schemes.base import MAX_LENGTH, Param, Scheme, SchemeConfig
from relviz.schemes.view_kinds import PositionStructure, norms_and_cosine


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

    def _cosine(self) -> np.ndarray:
        _, cosine = norms_and_cosine([self.table])
        return cosine[0].astype(np.float32)                                      # [max_len, max_len]

    def structure(self, length: int) -> PositionStructure:
        self.check_length(length)
        cosine = self._cosine()[:length, :length]
        return PositionStructure(
            self.name, "learned absolute: cos(p_i, p_j) of the learned position vectors", "cos(p_i, p_j)",
            np.ascontiguousarray(cosine)[None], None, self.config.causal, False,
            facts={"max_len": self.config.max_len})

    @classmethod
    def structure_text(cls, structure: PositionStructure) -> str:
        return (f"One learned vector per absolute position (0…{structure.facts['max_len'] - 1}). Their similarity "
                "is not forced to depend on j − i; if it looks banded, training made it so.")
