"""A learned absolute position table added to the input embeddings (GPT-2 ``wpe``, BERT, DeBERTa-v2
with ``position_biased_input``, OPT): position is in the input, before the first layer.

``offset``: position p reads row p + offset of the table (OPT and BioGPT keep two rows before position 0,
RoBERTa-likes start after their padding index); the observer finds it from the rows the model's embedding
module returns (relviz.observe_position), never from the family's name."""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from relviz.mechanisms.base import LayerContext, Mechanism
from relviz.mechanisms.view_kinds import LayerView, Note
from relviz.schemes.view_kinds import PositionStructure, SimilarityMatrix, norms_and_cosine, relative_share

__all__ = ["LearnedAbsolute", "similarity_caption", "structure_caption", "TOEPLITZ_SHARE", "LEARNED_COSINE"]

#: What relative_share measures of a learned table's similarity.
TOEPLITZ_SHARE = ("Share of the similarity's variance (off the diagonal) that depends on j − i alone: 100% means the "
                  "learned table acts exactly like a relative one.")
#: What the cosine of a real model's learned position vectors shows, and what a relative scheme would show.
LEARNED_COSINE = ("Cosine between the learned position vectors p_i and p_j. A relative scheme would be constant along "
                  "every diagonal.")


@dataclass(frozen=True, eq=False)
class LearnedAbsolute(Mechanism):
    tensor_name: str
    table: torch.Tensor | None = None     # [max_positions + offset, d] as the checkpoint holds it
    offset: int = 0                       # position p reads row p + offset

    positional = True
    needs_weights = True
    name = "learned_absolute"
    option_types = {"tensor": str, "switch_field": str, "offset": int}
    role = "adds a learned vector per position to the input"
    order = 20
    legend = "absolute"

    @classmethod
    def read(cls, ctx: LayerContext, options: Mapping[str, Any]) -> LearnedAbsolute | None:
        if options.get("switch_field") and not ctx.config.bool(options["switch_field"], True):
            return None
        suffix, offset = options["tensor"], options.get("offset", 0)
        if not ctx.has_weights:
            return cls(tensor_name=suffix, offset=offset)
        if "absolute" not in ctx.shared:
            table = ctx.tensor(suffix)
            if table is None:
                raise ValueError(f"no {suffix} tensor found in the safetensors")
            ctx.shared["absolute"] = table
        return cls(tensor_name=suffix, table=ctx.shared["absolute"], offset=offset)

    def positions(self) -> torch.Tensor:
        """[max_positions, d]: row p is position p's vector (the table from row ``offset`` on)."""
        if self.table is None:
            raise ValueError("learned positions live in the weights: inspect a model directory, not a config alone")
        return self.table[self.offset:]

    def embed(self, x: torch.Tensor) -> torch.Tensor:
        """x [B, L, D] + the table's first L rows [L, D] (the toy model checked L against the table's size)."""
        return x + self.positions()[: x.shape[1]]

    def structure(self, length: int, causal: bool) -> PositionStructure | None:
        """cos(p_i, p_j) of the learned vectors of positions 0 … L − 1 [1, L, L]; None from a config alone (the table
        lives in the weights). ValueError where the table has no vector for a position below ``length``."""
        if self.table is None:
            return None
        positions = self.positions()
        if length > positions.shape[0]:
            raise ValueError(f"length {length} needs positions up to {length - 1}, but the learned table has vectors "
                             f"for positions 0..{positions.shape[0] - 1} only")
        _, cosine = norms_and_cosine([positions[:length]])
        cosine = cosine[0].astype(np.float32)                                         # [L, L]
        return PositionStructure(
            "learned absolute: cos(p_i, p_j) of the learned position vectors", "cos(p_i, p_j)",
            np.ascontiguousarray(cosine)[None], None, causal, False, facts={"max_len": positions.shape[0]},
            caption=structure_caption(positions.shape[0]))

    def label(self) -> str:
        return "learned abs"

    def describe(self) -> str:
        shape = f" {list(self.table.shape)}" if self.table is not None else ""
        rows = f"; position p reads row p + {self.offset}" if self.offset else ""
        return f"learned absolute positions ({self.tensor_name}{shape}{rows}) added to the input embeddings"

    def settings(self) -> dict[str, Any]:
        out: dict[str, Any] = {"tensor": self.tensor_name}
        if self.offset:
            out["offset"] = self.offset
        if self.table is not None:
            out["max_positions"], out["d_model"] = int(self.table.shape[0]) - self.offset, int(self.table.shape[1])
        return out

    def views(self, length: int, layer: Any) -> list[LayerView]:
        return [Note("Learned absolute positions (in the input, before the first layer)",
                     self.describe() + ". Every layer sees them only through the hidden states; the similarity "
                     "of the learned vectors is drawn beside it when the weights are read.")]

    def trained_views(self, length: int, layer: Any, train_length: int) -> list[LayerView]:
        """:meth:`views` and, with the weights, the cosine between every two position vectors, the positions
        training reached (0 … ``train_length`` − 1) outlined, with how much of their similarity j − i alone
        explains (its facts: ``max_len``, ``relative_share``)."""
        views = self.views(length, layer)
        if self.table is None:
            return views
        _, cosine = norms_and_cosine([self.positions()])
        cosine = cosine[0].astype(np.float32)                                     # [max_len, max_len]
        max_len = cosine.shape[0]
        trained = min(train_length, max_len)
        # relative_share: how much of the similarity among the trained positions depends on j − i alone
        share = relative_share(cosine, trained) if trained >= 3 else None
        matrix = SimilarityMatrix("learned absolute: cosine between position vectors p_i, p_j", "position",
                                  np.arange(max_len), cosine, outline=train_length if train_length < max_len else None,
                                  outline_label=" trained positions", facts={"max_len": max_len, "relative_share": share},
                                  caption=similarity_caption(max_len, share))
        return [*views, matrix]


def similarity_caption(max_len: int, share: float | None) -> str:
    """The words under the learned table's similarity: what ``share`` (None: fewer than 3 trained positions) says."""
    return (f"**Cosine between the learned absolute position vectors** (all {max_len}). Nothing forces their "
            "similarity to depend on j − i only"
            + ("" if share is None else
               f". Inside the outlined trained positions **{share:.0%}** of its variation is explained by j − i alone "
               "(stripes parallel to the diagonal)"
               + (": an absolute table that learned a relative habit" if share >= 0.5 else
                  ": the relative part is there, but the table stays largely absolute"))
            + ". Beyond the training length nothing was trained (random), and beyond max_len there is no vector at "
              "all.")


def structure_caption(max_len: int) -> str:
    """The words beside :meth:`LearnedAbsolute.structure`, for a table of ``max_len`` positions."""
    return (f"One learned vector per absolute position (0…{max_len - 1}). Their similarity is not forced to depend "
            "on j − i; if it looks banded, training made it so.")
