"""T5's learned relative bias: a scalar per (bucket, head) added to the raw q·k logits (Raffel et al. 2020).

One table per stack in block 0, shared by every layer of that stack (T5, mT5, LongT5); one per layer
(UMT5). The encoder buckets both directions, the decoder only the past. LongT5's encoder attends
block-locally (``local_radius``), and its transient-global layers add a second table,
``global_relative_attention_bias``, looked up by the bucket of (global block − the token's block):
the side bias towards the per-block summary tokens.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import torch

from relviz._checks import check_int
from relviz.attention import offset_bias_attention
from relviz.attention_steps import Attention
from relviz.mechanisms.base import LayerContext, Mechanism
from relviz.mechanisms.view_kinds import LayerView, Note
from relviz.positions import T5_LIMITS, T5Config, t5_bias, t5_bias_offsets, t5_bucket, t5_bucket_map, t5_config
from relviz.schemes.view_kinds import BiasCurve, PositionStructure
from relviz.t5_notes import curve_caption, last_bucket_start, t5_training_coverage

__all__ = ["T5Bias", "bias_curve", "structure_caption"]

_KINDS = ("SelfAttention", "LocalSelfAttention", "TransientGlobalSelfAttention")


@dataclass(frozen=True, eq=False)
class T5Bias(Mechanism):
    """``table`` [num_buckets, heads] (None when read from a config alone); ``table_layer``: whose table;
    ``per_layer``: every layer has its own (UMT5), not block 0's shared by the stack."""

    num_buckets: int
    max_distance: int
    bidirectional: bool
    heads: int
    table_layer: int
    table: torch.Tensor | None = None
    global_table: torch.Tensor | None = None      # LongT5 transient-global side bias [num_buckets, heads]
    global_block_size: int | None = None
    per_layer: bool = False
    #: the buckets, checked once (the toy model passes its own, so a forward checks nothing); None: from the fields
    buckets: T5Config | None = field(default=None, compare=False, repr=False)

    positional = True
    needs_weights = True
    name = "t5_bias"
    option_types = {"per_layer": bool}
    role = "adds a learned bias per offset bucket"
    order = 10
    legend = "bias"

    @classmethod
    def read(cls, ctx: LayerContext, options: Mapping[str, Any]) -> T5Bias:
        cfg = ctx.config
        num_buckets = cfg.int("relative_attention_num_buckets", 32, minimum=1, maximum=T5_LIMITS.num_buckets)
        max_distance = cfg.int("relative_attention_max_distance", 128, minimum=1, maximum=T5_LIMITS.max_distance)
        bidirectional = not ctx.causal
        t5_config(num_buckets, max_distance, bidirectional)    # ValueError names what is wrong
        heads = cfg.int("num_heads", minimum=1, maximum=1 << 14)
        per_layer = bool(options.get("per_layer"))
        owner = ctx.index if per_layer else 0
        table = global_table = None
        if ctx.has_weights:
            key = f"t5:{ctx.stack}:{owner}"
            if key not in ctx.shared:
                ctx.shared[key] = _read_tables(ctx, owner, num_buckets, heads)
            table, global_table = ctx.shared[key]
        block = cfg.int("global_block_size", 16, minimum=1) if global_table is not None else None
        return cls(num_buckets, max_distance, bidirectional, heads, owner, table, global_table, block, per_layer)

    def bias(self, q_len: int, k_len: int, *, q_offset: int = 0) -> torch.Tensor:
        """[H, q_len, k_len] what the layer adds to its logits (transformers' compute_bias, no batch dim)."""
        return t5_bias(self._table().float(), q_len, k_len, num_buckets=self.num_buckets,
                       max_distance=self.max_distance, bidirectional=self.bidirectional, q_offset=q_offset)

    def bias_per_offset(self, q_len: int, k_len: int) -> torch.Tensor:
        """[H, q_len + k_len − 1] the bias per offset j − i from −(q_len − 1) (the layer's bias map, never L × L)."""
        return t5_bias_offsets(self._table().float(), q_len, k_len, num_buckets=self.num_buckets,
                               max_distance=self.max_distance, bidirectional=self.bidirectional)

    def prepare(self, length: int, like: torch.Tensor) -> torch.Tensor:
        """The bias per offset [H, 2L − 1] from the table (unchecked: the toy model checked its config), once per
        forward: every layer of the stack shares block 0's table."""
        buckets = self.buckets or t5_config(self.num_buckets, self.max_distance, self.bidirectional)
        return buckets.bias_offsets(self._table(), length, length).to(like.dtype)            # [H, 2L − 1]

    def attend(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, *, causal: bool,
               shared: torch.Tensor | None = None, need_weights: bool = False) -> Attention:
        per_offset = self.prepare(q.shape[-2], q) if shared is None else shared               # [H, 2L − 1]
        return offset_bias_attention(q, k, v, per_offset, causal=causal, need_weights=need_weights, validate=False)

    def curve(self, extent: int) -> BiasCurve:
        """Every head's learned bias against j − i for |j − i| ≤ ``extent``, with its caption."""
        extent = check_int("extent", extent, minimum=0, maximum=1 << 16)
        curve = bias_curve(self._table().detach().to("cpu", torch.float32).numpy(), num_buckets=self.num_buckets,
                           max_distance=self.max_distance, bidirectional=self.bidirectional, extent=extent)
        return replace(curve, caption=curve_caption(self.num_buckets, self.max_distance, self.bidirectional,
                                                    per_layer=self.per_layer))

    def structure(self, length: int, causal: bool) -> PositionStructure | None:
        """The bucket of every cell [1, L, L] (this layer's direction), the learned bias it looks up per head [H, L, L]
        in the hover; None from a config alone (the bias lives in the weights)."""
        if self.table is None:
            return None
        buckets = self.buckets or t5_config(self.num_buckets, self.max_distance, self.bidirectional)
        cells = t5_bucket_map(length, num_buckets=self.num_buckets, max_distance=self.max_distance,
                              bidirectional=self.bidirectional, device="cpu").numpy()          # [L, L]
        table = self.table.detach().to("cpu", torch.float32).numpy()                           # [buckets, H]
        bias = np.ascontiguousarray(table.T[:, cells])                                         # [H, L, L]
        facts = {"max_exact": buckets.max_exact}
        return PositionStructure(
            f"T5 bucket of j − i ({self.num_buckets} buckets, max_distance {self.max_distance})", "bucket", cells[None],
            (0, self.num_buckets - 1), causal, True, {"learned bias (this head)": bias}, facts=facts,
            caption=structure_caption(buckets.max_exact, past_only=not self.bidirectional,
                                      side_bias=self.global_table is not None))

    def map_caption(self, head: int, stack: str) -> str:
        """The words under one head's bias map (:meth:`bias_per_offset` drawn as a Toeplitz matrix)."""
        return (f"Head {head}'s bias map ({stack}, table of layer {self.table_layer}): exactly what the model adds to "
                "its logits (transformers' compute_bias), constant along each diagonal.")

    def global_side_bias(self, seq_len: int) -> torch.Tensor:
        """[H, seq_len, seq_len // global_block_size]: the bias of each token towards each block summary,
        by the bucket of (summary block − the token's block), for a sequence without padding (transformers'
        compute_side_bias; tokens past the last full block belong to it, as there)."""
        if self.global_table is None:
            raise ValueError("this layer has no transient-global side bias (LongT5 with "
                             "encoder_attention_type 'transient-global' has one)")
        seq_len = check_int("seq_len", seq_len, minimum=1, maximum=1 << 20)
        size = self.global_block_size
        step = torch.ones(1, seq_len) / size                                   # the same float steps as HF
        start = torch.cumsum(step, dim=1) - step
        block = torch.floor(1.0 + start - 1.0)[0]                             # [L] block of each token
        full = (torch.arange(seq_len) % size == size - 1).sum() - 1
        block = torch.where(block < full, block, full.to(block.dtype)).to(torch.int64)
        summaries = torch.arange(seq_len // size)
        buckets = t5_bucket(summaries[None, :] - block[:, None], bidirectional=self.bidirectional,
                            num_buckets=self.num_buckets, max_distance=self.max_distance)      # [L, G]
        return self.global_table.float()[buckets].permute(2, 0, 1)

    def _table(self) -> torch.Tensor:
        if self.table is None:
            raise ValueError("T5's bias lives in the weights: inspect a model directory, not a config alone")
        return self.table

    def label(self) -> str:
        return f"T5 bias {self.num_buckets}/{self.max_distance}" + (" +global" if self.global_table is not None else "")

    def describe(self) -> str:
        where = (f"layer {self.table_layer}'s own table" if self.per_layer
                 else "block 0's table, shared by the stack")
        side = "; plus a transient-global side bias towards block summaries" if self.global_table is not None else ""
        return (f"T5 relative bias: {self.num_buckets} buckets up to {self.max_distance}, "
                f"{'both directions' if self.bidirectional else 'past only'}, {where}{side}")

    def settings(self) -> dict[str, Any]:
        out = {"relative_attention_num_buckets": self.num_buckets,
               "relative_attention_max_distance": self.max_distance,
               "bidirectional": self.bidirectional, "num_heads": self.heads, "table_layer": self.table_layer}
        if self.global_block_size is not None:
            out["global_block_size"] = self.global_block_size
        return out

    def views(self, length: int, layer: Any) -> list[LayerView]:
        if self.table is None:
            return [Note("T5 bias: the learned table lives in the weights",
                         f"{self.describe()}. A config alone gives the buckets, not the bias values: list a model "
                         "directory (RELVIZ_MODELS) to see each head's learned bias.")]
        # up to 2 · max_distance where the length reaches it (beyond: all the last bucket), and always past
        # max_distance, so every bucket of the table shows at any length
        return [self.curve(max(min(length - 1, max(2 * self.max_distance, 64)), self.max_distance + 8))]

    def trained_views(self, length: int, layer: Any, train_length: int) -> list[LayerView]:
        """:meth:`views`, the curve's caption adding which buckets training at ``train_length`` reached (its facts:
        ``coverage``, relviz.t5_notes.TrainingCoverage)."""
        views = self.views(length, layer)
        if self.table is None:
            return views
        curve, = views
        coverage = t5_training_coverage(self.num_buckets, self.max_distance, self.bidirectional,
                                        train_length=train_length, extent=int(np.abs(curve.offsets).max()))
        return [replace(curve, caption=f"{curve.caption} {coverage.sentence()}",
                        facts={**curve.facts, "coverage": coverage})]


def structure_caption(max_exact: int, *, past_only: bool, side_bias: bool = False) -> str:
    """The words beside :meth:`T5Bias.structure`: the exact buckets below ``max_exact``; ``past_only``: the buckets of a
    causal layer; ``side_bias``: LongT5's transient-global bias, not drawn."""
    return (f"Each offset j − i falls into a bucket; the model learned one bias per bucket and head (in the hover: this "
            f"head's). Exact buckets for |j − i| < {max_exact}, then logarithmic bands."
            + (" Causal: every future offset falls in bucket 0 (and is masked anyway)." if past_only else "")
            + (" Not drawn: the transient-global side bias towards the block summaries." if side_bias else ""))


def _read_tables(ctx: LayerContext, layer: int, num_buckets: int,
                 heads: int) -> tuple[torch.Tensor | None, torch.Tensor | None]:
    found: dict[str, torch.Tensor] = {}
    for which in ("relative_attention_bias", "global_relative_attention_bias"):
        for kind in _KINDS:
            name = f"{ctx.stack}.block.{layer}.layer.0.{kind}.{which}.weight"
            table = ctx.tensor(name)
            if table is not None:
                if tuple(table.shape) != (num_buckets, heads):
                    raise ValueError(f"{name} has shape {tuple(table.shape)}; config.json says "
                                     f"[relative_attention_num_buckets, num_heads] = [{num_buckets}, {heads}]")
                found[which] = table
                break
    if "relative_attention_bias" not in found:
        raise ValueError(f"no relative_attention_bias tensor for {ctx.stack} layer {layer} in the safetensors "
                         f"(expected {ctx.stack}.block.{layer}.layer.0.SelfAttention.relative_attention_bias.weight)")
    return found["relative_attention_bias"], found.get("global_relative_attention_bias")


def bias_curve(table: np.ndarray, *, num_buckets: int, max_distance: int, bidirectional: bool,
               extent: int) -> BiasCurve:
    """A T5 bias table [num_buckets, H] as a curve per head against the offset j − i (−extent..0
    causal, −extent..extent bidirectional), with its bucket edges and exact band. What the
    mechanism draws for a real checkpoint's table, and the toy model's parameter view. Its facts: the setting (``num_buckets``,
    ``max_distance``, ``bidirectional``), ``max_exact`` and ``last_bucket_start`` (the distance the
    last bucket begins at, before max_distance)."""
    nb, md = num_buckets, max_distance
    config = t5_config(nb, md, bidirectional)
    exact = config.max_exact
    offsets = torch.arange(-extent, (extent if bidirectional else 0) + 1)
    b = config.bucket(offsets).numpy()
    edges = offsets.numpy()[np.flatnonzero(b[1:] != b[:-1])] + 0.5
    return BiasCurve(
        "T5: learned bias per head vs offset (dotted: bucket edges)", "", offsets.numpy(),
        np.ascontiguousarray(np.asarray(table, dtype=np.float32)[b].T), learned=True, steps=True,
        edges=edges, band=(-(exact - 0.5), (exact - 0.5) if bidirectional else 0.5),
        band_label=f"exact: |j − i| < {exact}", hover={"bucket": b},
        facts={"num_buckets": nb, "max_distance": md, "bidirectional": bidirectional, "max_exact": exact,
               "last_bucket_start": last_bucket_start(nb, md, bidirectional)})
