"""The attention pattern: which keys a query may see at all (causal or full, a window, a chunk).

A window or a chunk is position structure too: a sliding-window layer never sees a key more than
w − 1 tokens back, however long the context (Mistral, Gemma 2/3, GPT-OSS, Cohere 2); a chunked layer
sees only its own chunk (Llama 4); ModernBERT's local layers and LongT5's encoder see ±w around each
query. Exactly as transformers 5.23's ``masking_utils`` builds them: sliding ``kv_idx > q_idx − w`` on
top of causal; bidirectional sliding ``|q_idx − kv_idx| ≤ w``; chunked ``kv_idx // c == q_idx // c``.
"""
from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import torch

from relviz._words import counted, minus
from relviz._checks import check_int
from relviz.mechanisms.base import MAX_POSITIONS, LayerContext, Mechanism
from relviz.mechanisms.view_kinds import KeysSeen, LayerView, keys_seen

__all__ = ["AttentionPattern", "MAX_MASK_LENGTH"]

#: attention_pattern builds L × L booleans: past this, ask per offset (allowed) instead
MAX_MASK_LENGTH = 1 << 14
#: float32's exp(x) rounds to exactly 0 below x = ln(2⁻¹⁵⁰) ≈ −103.97 (half the smallest subnormal)
UNDERFLOW = math.log(torch.finfo(torch.float32).smallest_normal * torch.finfo(torch.float32).eps / 2)


@dataclass(frozen=True)
class AttentionPattern(Mechanism):
    """causal or full; ``window``: keys j with i − w < j ≤ i (causal) or |i − j| ≤ w (bidirectional);
    ``chunk``: keys in the query's own chunk of c positions."""

    causal: bool = True
    window: int | None = None
    chunk: int | None = None
    fill: float | None = None       # the finite value masked scores are set to instead of −inf (OpenAI GPT: −1e4)

    name = "pattern"
    option_types = {"window_field": str, "window_layer_type": str, "window_on_all_layers": bool,
                    "window_switch": str, "window_by_layer_types": bool,
                    "window_mask": frozenset({"layer_types", "every_layer", "never"}), "window_is_width": bool, "chunk_field": str,
                    "chunk_layer_type": str,
                    "local_radius_field": str, "fill": float}
    role = "decides which keys a query sees"
    order = 50
    legend = "pattern"

    @classmethod
    def read(cls, ctx: LayerContext, options: Mapping[str, Any]) -> AttentionPattern:
        cfg = ctx.config
        # how the family's modeling builds its window mask (families.WINDOW_MASK): per layer type (the default), on
        # every layer whenever the window is set (its modeling never reads layer_types), or never (the window
        # fields reach no mask: an eager forward masks causally whatever they say)
        mask_by = options.get("window_mask", "layer_types")
        has_types = cfg.has("layer_types") and mask_by != "every_layer"
        window = chunk = None
        window_field = options.get("window_field", "sliding_window")
        named = has_types and ctx.layer_type == options.get("window_layer_type", "sliding_attention")
        on_window = mask_by != "never" and (named or (not has_types and options.get("window_on_all_layers", True)))
        switch = options.get("window_switch", "use_sliding_window")
        switched = cfg.bool(switch, True)
        if on_window and named and not switched and not options.get("window_by_layer_types"):
            # transformers' families read this disagreement three ways: the mask built from layer_types alone
            # (SmolLM3: the option window_by_layer_types), the window cleared by the config class so the mask cannot
            # be built (Qwen2, Qwen3), or set to 0 so every key is masked (Qwen2-MoE)
            raise ValueError(f"config field {cfg.name('layer_types')} makes layer {ctx.index} "
                             f"{ctx.layer_type!r} while {cfg.name(switch)} is false: transformers' families read that "
                             "differently (a window from layer_types alone; the window cleared, so the mask cannot "
                             "be built; or a window of 0, which masks every key), and relviz's family table does not "
                             f"say which this family does; set {cfg.name(switch)} true, or name the layer "
                             "'full_attention'")
        if on_window and cfg.has(window_field) and (switched or named):
            window = cfg.int(window_field, minimum=1, maximum=MAX_POSITIONS)
            if options.get("window_is_width"):          # ModernBERT: local_attention = 2·half-width
                window //= 2
        chunk_field = options.get("chunk_field", "attention_chunk_size")
        if ctx.layer_type == options.get("chunk_layer_type", "chunked_attention") and cfg.has(chunk_field):
            chunk = cfg.int(chunk_field, minimum=1, maximum=MAX_POSITIONS)
        if options.get("local_radius_field") and ctx.stack == "encoder":
            window = cfg.int(options["local_radius_field"], 127, minimum=0, maximum=MAX_POSITIONS)
        return cls(causal=ctx.causal, window=window, chunk=chunk, fill=options.get("fill"))

    def allowed(self, offsets: torch.Tensor) -> torch.Tensor:
        """bool per offset j − i, for the patterns that depend on the offset alone (not a chunk)."""
        if self.chunk is not None:
            raise ValueError("a chunked pattern depends on where the query sits, not on j − i alone: "
                             "use attention_pattern(length)")
        ok = offsets <= 0 if self.causal else torch.ones_like(offsets, dtype=torch.bool)
        if self.window is not None:
            ok &= (offsets > -self.window) if self.causal else (offsets.abs() <= self.window)
        return ok

    def mask(self, length: int) -> torch.Tensor:
        """bool [length, length]: True where query i may attend key j."""
        length = check_int("length", length, minimum=1, maximum=MAX_MASK_LENGTH)
        i = torch.arange(length)[:, None]
        j = torch.arange(length)[None, :]
        ok = j <= i if self.causal else torch.ones(length, length, dtype=torch.bool)
        if self.window is not None:
            ok = ok & ((j > i - self.window) if self.causal else ((i - j).abs() <= self.window))
        if self.chunk is not None:
            ok = ok & (j // self.chunk == i // self.chunk)
        return ok

    @property
    def cap(self) -> int | None:
        """The most keys a query attends whatever its band allows (None: every key of the band; DeepSeek sparse
        attention's index_topk, relviz.mechanisms.indexer)."""
        return None

    def agrees(self, allowed: torch.Tensor) -> str | None:
        """None when ``allowed`` bool [L, L] (the keys transformers let each query see) is this pattern's mask,
        else what differs (relviz.observe holds each layer's mask against it)."""
        return None if torch.equal(self.mask(allowed.shape[-1]), allowed) else "the mask differs"

    def reach(self) -> int | None:
        """The farthest offset back a query can see (None: the whole context)."""
        if self.window is not None:
            return self.window - 1 if self.causal else self.window
        return None if self.chunk is None else self.chunk - 1

    def label(self) -> str:
        return self._kind() + (f", masked with {minus(self.fill, ',.0f')}" if self.fill is not None else "")

    def _kind(self) -> str:
        if self.window is not None:
            return f"window {self.window}" if self.causal else f"local ±{self.window}"
        if self.chunk is not None:
            return f"chunk {self.chunk}"
        return "causal" if self.causal else "full"

    def describe(self) -> str:
        base = "causal: each query sees itself and earlier keys" if self.causal else \
            "bidirectional: each query sees every key"
        if self.window is not None:
            base += (f"; sliding window: only the last {counted(self.window, 'key')} (j > i − {self.window})" if self.causal
                     else f"; local window: only keys with |j − i| ≤ {self.window}")
        if self.chunk is not None:
            base += f"; chunked: only keys in the query's own chunk of {counted(self.chunk, 'position')}"
        if self.fill is not None:
            fill = minus(self.fill, ",.0f")
            base += (f"; masked with {fill}, not −inf: in float32 exp({fill} − m) is exactly "
                     f"0 while a query's largest score m stays above {minus(self.fill - UNDERFLOW, ',.0f')}, so the weights are "
                     "exactly the mask's (below that, masked keys would get weight)")
        return base

    def settings(self) -> dict[str, Any]:
        out: dict[str, Any] = {"causal": self.causal}
        if self.window is not None:
            out["window"] = self.window
        if self.chunk is not None:
            out["chunk"] = self.chunk
        if self.fill is not None:
            out["mask_fill"] = self.fill
        return out

    def views(self, length: int, layer: Any) -> list[LayerView]:
        positions, back, ahead, sampled = keys_seen(length, causal=self.causal, window=self.window,
                                                    chunk=self.chunk)
        reach = self.reach()
        if self.window is not None:
            limit = f"window {self.window}" if self.causal else f"±{self.window}"
            what = (f"A query sees at most {counted(self.window, 'key')} (itself and the {self.window - 1:,} before it), "
                    f"however long the context: past position {self.window - 1:,} the band stops growing. "
                    "Information from further back reaches it only through other layers."
                    if self.causal else
                    f"Each token sees the {counted(self.window, 'token')} on either side of it, never more.")
        elif self.chunk is not None:
            limit = f"chunk {self.chunk}"
            what = (f"Queries see only their own chunk of {counted(self.chunk, 'position')}: the first token of a chunk "
                    "sees itself alone, the last sees the whole chunk. The band is a saw, not a stripe.")
        else:
            limit = ""
            what = ("Causal: query i sees all i + 1 keys up to itself; the band widens with position."
                    if self.causal else "Bidirectional: every token sees every other.")
        note = " (Chunks sampled: each tooth drawn is exact.)" if sampled else ""
        return [KeysSeen(f"Which keys each query sees over {length:,} positions", what + note, length,
                         positions, back, ahead, reach, limit, sampled)]
