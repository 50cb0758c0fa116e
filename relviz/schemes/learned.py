"""``learned``: one learned vector per absolute position 0..max_len − 1 (GPT-2, BERT)."""
from __future__ import annotations

import numpy as np
import torch
from torch import nn

from relviz.mechanisms.absolute import LearnedAbsolute
from relviz.schemes.base import MAX_LENGTH, Param, Scheme, SchemeConfig
from relviz.schemes.view_kinds import PositionStructure, SimilarityMatrix, View, norms_and_cosine, relative_share


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

    def parameter_views(self, *, length: int, train_length: int, layer: int) -> list[View]:
        max_len = self.config.max_len
        cosine = self._cosine()
        trained = min(train_length, max_len)
        # relative_share: how much of the similarity among the trained positions depends on j − i alone
        share = relative_share(cosine, trained) if trained >= 3 else None
        return [SimilarityMatrix("learned absolute: cosine between position vectors p_i, p_j", "position",
                                 np.arange(max_len), cosine, outline=train_length if train_length < max_len else None,
                                 outline_label=" trained positions",
                                 facts={"max_len": max_len, "relative_share": share})]

    @classmethod
    def structure_text(cls, structure: PositionStructure) -> str:
        return (f"One learned vector per absolute position (0…{structure.facts['max_len'] - 1}). Their similarity "
                "is not forced to depend on j − i; if it looks banded, training made it so.")

    @classmethod
    def parameter_caption(cls, view: View) -> str:
        share = view.facts["relative_share"]
        return (f"**Cosine between the learned absolute position vectors** (all {view.facts['max_len']}). Nothing "
                "forces their similarity to depend on j − i only"
                + ("" if share is None else
                   f". Inside the outlined trained positions **{share:.0%}** of its variation is explained by "
                   "j − i alone (stripes parallel to the diagonal)"
                   + (": an absolute table that learned a relative habit" if share >= 0.5 else
                      ": the relative part is there, but the table stays largely absolute"))
                + ". Beyond the training length nothing was trained (random), and beyond max_len there is no "
                  "vector at all.")
