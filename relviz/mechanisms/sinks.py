"""Attention sinks (GPT-OSS): a learned logit per head joins each softmax row as an extra column and is
dropped after it, so a row of attention weights sums to 1 − (the sink's share)."""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from relviz._words import counted
from relviz.mechanisms.base import LayerContext, Mechanism
from relviz.mechanisms.pattern import AttentionPattern
from relviz.mechanisms.view_kinds import LayerView, SinkShare, keys_at, keys_seen

__all__ = ["Sinks"]


@dataclass(frozen=True, eq=False)
class Sinks(Mechanism):
    heads: int
    logits: torch.Tensor | None = None        # [H]

    needs_weights = True
    name = "sinks"
    option_types = {"tensor": str, "layer_types": (list, tuple)}
    role = "takes attention mass into a learned sink"
    order = 60
    legend = "sinks"

    @classmethod
    def read(cls, ctx: LayerContext, options: Mapping[str, Any]) -> Sinks | None:
        if "layer_types" in options and ctx.layer_type not in options["layer_types"]:
            return None                          # MiMo-V2-Flash: sinks on its sliding layers only
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

    def views(self, length: int, layer: Any) -> list[LayerView]:
        pattern = layer.find(AttentionPattern) if layer is not None else None
        causal = pattern.causal if pattern is not None else True
        window = pattern.window if pattern is not None else None
        chunk = pattern.chunk if pattern is not None else None
        positions, _, _, _ = keys_seen(length, causal=causal, window=window, chunk=chunk)
        grid = np.unique(np.geomspace(1, length, 200).astype(np.int64) - 1)   # smooth on a log axis
        positions = np.unique(np.concatenate([positions, grid]))
        keys = keys_at(positions, length, causal=causal, window=window, chunk=chunk).astype(np.float64)
        cap = pattern.cap if pattern is not None else None          # DSA: at most index_topk keys attended
        if cap is not None:
            keys = np.minimum(keys, cap)
        if self.logits is not None:
            logits = self.logits.double().numpy()
            labels = tuple(f"head {h + 1}: sink logit {s:.3g}" for h, s in enumerate(logits))
        else:
            logits = np.array([0.0, 2.0, 4.0, 6.0])
            labels = tuple(f"sink logit − key logit = {s:g} (illustrative)" for s in logits)
        # softmax over n equal key logits z and the sink s: the sink's share is e^s / (e^s + n·e^z)
        share = 1.0 / (1.0 + keys[None, :] * np.exp(-logits[:, None]))                     # [S, n]
        where = (f"on this layer's window of {counted(window, 'key')} it never falls below its value at {counted(window, 'key')}"
                 if window else f"it fades as 1/n with the keys seen up to the {cap:,} the indexer keeps (index_topk), "
                 f"then stays at its value at {cap:,} keys" if cap else
                 "on a full-attention layer it fades as 1/n with the keys seen")
        source = ("the sink logits are this checkpoint's" if self.logits is not None else
                  "a config alone has no sink logits (they are learned weights): the curves use illustrative values")
        caption = (f"{self.describe()}. If every key's logit were equal, the sink would take 1/(1 + n·e^(z − s)) "
                   f"of the row with n keys seen: {where}. Here {source}. The weights shown per key then sum to "
                   "1 − that share.")
        return [SinkShare(f"Share of attention the sink takes, over {length:,} positions", caption, positions,
                          keys, logits, share, labels, self.logits is None)]
