"""DeBERTa-v2/v3's disentangled relative attention (He et al. 2021), as transformers builds it.

Relative positions are query − key (DeBERTa's sign, the opposite of relviz's j − i), kept exact within
±position_buckets/2 and log-bucketed beyond, up to max_relative_positions (``make_log_bucket_position``).
One table of relative embeddings (``encoder.rel_embeddings``, layer-normed when ``norm_rel_ebd`` says so)
serves every layer; the terms in ``pos_att_type`` (c2p: content→position, p2c: position→content) add to
the content logit, all divided by √(d·(1 + number of terms)).
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from relviz._checks import check_int
from relviz.mechanisms.base import MAX_POSITIONS, LayerContext, Mechanism
from relviz.mechanisms.view_kinds import LayerView
from relviz.schemes.view_kinds import BiasCurve

__all__ = ["DisentangledRelative", "log_bucket_position"]


def log_bucket_position(relative: torch.Tensor, bucket_size: int, max_position: int) -> torch.Tensor:
    """transformers' make_log_bucket_position, operation for operation (relative = query − key)."""
    sign = torch.sign(relative)
    mid = bucket_size // 2
    abs_pos = torch.where((relative < mid) & (relative > -mid), torch.tensor(mid - 1).type_as(relative),
                          torch.abs(relative))
    log_pos = torch.ceil(torch.log(abs_pos / mid) / torch.log(torch.tensor((max_position - 1) / mid)) * (mid - 1)) + mid
    return torch.where(abs_pos <= mid, relative.type_as(log_pos), log_pos * sign)


@dataclass(frozen=True, eq=False)
class DisentangledRelative(Mechanism):
    position_buckets: int
    max_relative_positions: int
    pos_att_type: tuple[str, ...]
    share_att_key: bool
    layer_norm: bool
    embeddings: torch.Tensor | None = None     # [2·span, d] as the layers use them (after the LayerNorm)

    positional = True
    needs_weights = True
    name = "deberta"
    role = "adds disentangled content–position terms"
    order = 12
    legend = "bias"

    @classmethod
    def read(cls, ctx: LayerContext, options: Mapping[str, Any]) -> DisentangledRelative | None:
        cfg = ctx.config
        if not cfg.bool("relative_attention"):
            return None
        buckets = cfg.int("position_buckets", -1, minimum=-1, maximum=MAX_POSITIONS)
        max_rel = cfg.int("max_relative_positions", -1, minimum=-1, maximum=MAX_POSITIONS)
        if max_rel < 1:
            max_rel = cfg.int("max_position_embeddings", 512, minimum=1)
        terms = cfg.raw("pos_att_type") or []
        if isinstance(terms, str):
            terms = [t.strip() for t in terms.lower().split("|")]
        if not isinstance(terms, list) or any(t not in ("c2p", "p2c") for t in terms):
            raise ValueError(f"config field {cfg.name('pos_att_type')} must list 'c2p' and/or 'p2c'; got {terms!r}")
        norm = cfg.raw("norm_rel_ebd", "none")
        if not isinstance(norm, str):
            raise ValueError(f"config field {cfg.name('norm_rel_ebd')} must be a string; got {norm!r}")
        layer_norm = "layer_norm" in [x.strip() for x in norm.lower().split("|")]
        embeddings = None
        if ctx.has_weights:
            if "deberta" not in ctx.shared:
                ctx.shared["deberta"] = _embeddings(ctx, layer_norm)
            embeddings = ctx.shared["deberta"]
        return cls(buckets, max_rel, tuple(terms), cfg.bool("share_att_key"), layer_norm, embeddings)

    @property
    def span(self) -> int:
        """att_span: how many relative embeddings each direction uses."""
        return self.position_buckets if self.position_buckets > 0 else self.max_relative_positions

    def relative_positions(self, q_len: int, k_len: int) -> torch.Tensor:
        """LongTensor [q_len, k_len]: bucketed query − key, exactly transformers' build_relative_position."""
        q_len = check_int("q_len", q_len, minimum=1, maximum=1 << 15)
        k_len = check_int("k_len", k_len, minimum=1, maximum=1 << 15)
        rel = torch.arange(q_len, dtype=torch.long)[:, None] - torch.arange(k_len, dtype=torch.long)[None, :]
        if self.position_buckets > 0 and self.max_relative_positions > 0:
            rel = log_bucket_position(rel, self.position_buckets, self.max_relative_positions)
        return rel.to(torch.long)

    def relative_embeddings(self) -> torch.Tensor:
        if self.embeddings is None:
            raise ValueError("DeBERTa's relative embeddings live in the weights: inspect a model directory")
        return self.embeddings

    def label(self) -> str:
        return f"DeBERTa {'+'.join(self.pos_att_type) or 'rel'} ±{self.span}"

    def describe(self) -> str:
        logs = (f"exact within ±{self.position_buckets // 2}, log buckets up to {self.max_relative_positions}"
                if self.position_buckets > 0 else f"clipped at ±{self.max_relative_positions}")
        return (f"DeBERTa disentangled attention ({', '.join(self.pos_att_type) or 'no position terms'}); "
                f"relative positions {logs}; scale 1/√(d·{1 + len(self.pos_att_type)})")

    def settings(self) -> dict[str, Any]:
        return {"position_buckets": self.position_buckets, "max_relative_positions": self.max_relative_positions,
                "pos_att_type": list(self.pos_att_type), "share_att_key": self.share_att_key,
                "norm_rel_ebd_layer_norm": self.layer_norm}

    def views(self, length: int, layer: Any) -> list[LayerView]:
        extent = min(length - 1, max(4 * self.span, 64), 4096)
        rel = self.relative_positions(1, extent + 1)[0].numpy()          # query 0 − key j, j = 0..extent
        offsets = -np.arange(extent + 1)[::-1]                            # j − i ≤ 0 (mirrors for j − i > 0)
        bucket = rel[::-1].astype(np.float32)                            # i − j = −(j − i) ≥ 0, bucketed
        offsets = np.concatenate([offsets, -offsets[-2::-1]])
        bucket = np.concatenate([bucket, -bucket[-2::-1]])
        edges = offsets[np.flatnonzero(bucket[1:] != bucket[:-1])] + 0.5
        return [BiasCurve("DeBERTa: which relative embedding each offset j − i reads",
                          f"{self.describe()}. Not a bias: the offset picks a relative embedding (its index as "
                          "drawn, j − i exactly near 0, log buckets further out), whose dot products with the "
                          "content (c2p, p2c) are added to the logits.",
                          offsets.astype(np.int64), bucket[None, :], learned=False, steps=True,
                          edges=edges if len(edges) < 400 else None, head_labels=("bucketed j − i",),
                          value_label="relative embedding read (bucketed j − i)", value_name="embedding")]


def _embeddings(ctx: LayerContext, layer_norm: bool) -> torch.Tensor:
    table = ctx.tensor("encoder.rel_embeddings.weight")
    if table is None:
        raise ValueError("no encoder.rel_embeddings.weight tensor in the safetensors")
    table = table.float()
    if layer_norm:
        weight, bias = ctx.tensor("encoder.LayerNorm.weight"), ctx.tensor("encoder.LayerNorm.bias")
        if weight is None or bias is None:
            raise ValueError("norm_rel_ebd says layer_norm but encoder.LayerNorm weights are missing")
        eps = ctx.config.float("layer_norm_eps", 1e-7, minimum=0.0, maximum=1.0)
        table = torch.nn.functional.layer_norm(table, (table.shape[-1],), weight.float(), bias.float(), eps)
    return table
