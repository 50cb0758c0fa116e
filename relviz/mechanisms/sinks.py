"""Attention sinks (GPT-OSS): a learned logit per head joins each softmax row as an extra column and is
dropped after it, so a row of attention weights sums to 1 − (the sink's share)."""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import torch

from relviz.mechanisms.base import LayerContext, Mechanism

__all__ = ["Sinks"]


@dataclass(frozen=True, eq=False)
class Sinks(Mechanism):
    heads: int
    logits: torch.Tensor | None = None        # [H]

    needs_weights = True
    name = "sinks"
    role = "takes attention mass into a learned sink"
    order = 60
    legend = "sinks"

    @classmethod
    def read(cls, ctx: LayerContext, options: Mapping[str, Any]) -> Sinks:
        heads = ctx.config.int("num_attention_heads", minimum=1, maximum=1 << 14)
        logits = None
        if ctx.has_weights:
            name = options.get("tensor", "layers.{layer}.self_attn.sinks").format(layer=ctx.index)
            logits = ctx.tensor(name)
            if logits is None:
                raise ValueError(f"no {name} tensor in the safetensors")
            if tuple(logits.shape) != (heads,):
                raise ValueError(f"{name} has shape {tuple(logits.shape)}; expected [num_attention_heads] = [{heads}]")
        return cls(heads=heads, logits=logits)

    def share(self, row_logits: torch.Tensor) -> torch.Tensor:
        """[H, ...] the sink's share of each row's softmax, given the row's logits [H, ..., keys]."""
        if self.logits is None:
            raise ValueError("the sink logits live in the weights: inspect a model directory")
        sink = self.logits.float().reshape(-1, *([1] * (row_logits.ndim - 1)))
        combined = torch.cat([row_logits.float(), sink.expand(*row_logits.shape[:-1], 1)], dim=-1)
        return torch.softmax(combined, dim=-1)[..., -1]

    def label(self) -> str:
        return "sinks"

    def describe(self) -> str:
        return f"learned sink logit per head ({self.heads}): an extra softmax column, dropped after"

    def settings(self) -> dict[str, Any]:
        return {"heads": self.heads}
