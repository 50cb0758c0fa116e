"""A learned absolute position table added to the input embeddings (GPT-2 ``wpe``, BERT, DeBERTa-v2
with ``position_biased_input``, OPT): position is in the input, before the first layer.

``offset``: position p reads row p + offset of the table (OPT and BioGPT keep two rows before position 0,
RoBERTa-likes start after their padding index); the observer finds it from the rows the model's embedding
module returns (relviz.observe_position), never from the family's name."""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import torch

from relviz.mechanisms.base import LayerContext, Mechanism
from relviz.mechanisms.view_kinds import LayerView, Note

__all__ = ["LearnedAbsolute"]


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
                     "of the learned vectors is drawn below when the weights are read.")]
