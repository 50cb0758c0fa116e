"""ALiBi (Press et al. 2022): a fixed bias −m_h·(i − j) per head, slopes built the way each family builds them.

The family table gives the options: ``heads_field`` (where the head count is), ``slopes`` ("press":
BLOOM and Falcon, powers of 2^(−8/n) then every other slope of 2n; "max": MPT, 2^(−max·h/n₂) over the
next power of two with odd ones first), ``dtype`` (Falcon rounds slopes to bfloat16), ``scale_by_head_dim``
(Falcon divides the bias by √head_dim), ``bias_max_field`` and ``bias_max_ignored`` (transformers' MPT
ignores the config's alibi_bias_max), ``twice_in_eager`` (Falcon's eager path adds the bias again).
"""
from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from relviz._words import counted, numbers_text
from relviz.attention import offset_bias_attention
from relviz.attention_steps import Attention
from relviz.mechanisms.base import LayerContext, Mechanism
from relviz.mechanisms.view_kinds import LayerView
from relviz.positions import alibi_slopes, mpt_alibi_slopes, offset_range
from relviz.schemes.view_kinds import BiasCurve, PositionStructure, expand_offsets

__all__ = ["Alibi", "bias_lines", "structure_caption", "NOTHING_LEARNED", "WHAT_ALIBI_ADDS", "bias_words"]

#: What ALiBi adds, and where it does not add anything.
WHAT_ALIBI_ADDS = (
    "ALiBi (Press et al., *Train Short, Test Long*) adds no position vectors at all. Each head adds "
    "**−m_h · (i − j)** to the logit of key j ≤ i: the further back, the larger the penalty; a steep head looks "
    "locally, a flat one far. The slopes are fixed, not learned.")


def bias_words(*, causal: bool, whole: bool) -> str:
    """What one head's bias matrix shows: ``whole``, the whole matrix drawn with its mask; else a window of a
    large one, exact, whose masked cells are not greyed out."""
    if not whole:
        return ("−m·|j − i| in every cell, as relviz.positions.alibi_bias returns it"
                + (": a causal model masks the cells above the diagonal (j > i), which this large view does not "
                   "grey out." if causal else "."))
    return ("Zero on the diagonal, falling linearly with distance into the past. Grey above the diagonal: masked by "
            "the causal mask." if causal else "Zero on the diagonal, falling linearly with |j − i| on both sides "
            "(no mask).")

#: what every ALiBi view says about its slopes: fixed, and what a straight line per head can and cannot do
NOTHING_LEARNED = ("Nothing about position is learned: each head subtracts a straight line from its logits; a steep "
                   "head looks only at the last few keys, a flat one far back. No head can prefer offset −s over "
                   "−s + 1, so a model that must find the key s back composes it from the content over its layers.")


@dataclass(frozen=True)
class Alibi(Mechanism):
    heads: int
    rule: str = "press"
    dtype: str = "float32"
    alibi_bias_max: float = 8.0
    config_bias_max: float | None = None     # what the config says, where transformers ignores it
    head_dim: int | None = None              # the bias is divided by √head_dim (Falcon)
    twice_in_eager: bool = False
    float32_powers: bool = True              # Press's rule as transformers' BLOOM/Falcon compute it (False: as the
                                             # reference code and relviz's toy model, in Python floats)

    positional = True
    name = "alibi"
    option_types = {"heads_fields": (str, tuple, list), "slopes": frozenset({"press", "max"}),
                    "dtype": frozenset({"float32", "bfloat16"}), "scale_by_head_dim": bool, "bias_max_field": str,
                    "bias_max_ignored": bool, "twice_in_eager": bool}
    role = "adds a fixed linear bias per head"
    order = 11
    legend = "bias"

    @classmethod
    def read(cls, ctx: LayerContext, options: Mapping[str, Any]) -> Alibi:
        cfg = ctx.config
        heads = next((cfg.int(f, minimum=1, maximum=4096) for f in options.get("heads_fields", ())
                      if cfg.has(f)), None)
        if heads is None:
            raise ValueError(f"config field {cfg.name(options['heads_fields'][0])} is required (the head count)")
        config_max = None
        bias_max = 8.0
        if options.get("bias_max_field"):
            sub, _, key = options["bias_max_field"].rpartition(".")
            view = cfg.sub(sub) if sub else cfg
            config_max = view.float(key, 8.0, minimum=1e-3, maximum=1e3) if view is not None else 8.0
            if not options.get("bias_max_ignored"):
                bias_max = config_max
        head_dim = None
        if options.get("scale_by_head_dim"):
            head_dim = cfg.int("hidden_size", minimum=1, maximum=1 << 20) // heads
        return cls(heads=heads, rule=options.get("slopes", "press"), dtype=options.get("dtype", "float32"),
                   alibi_bias_max=bias_max, config_bias_max=config_max if config_max != bias_max else None,
                   head_dim=head_dim, twice_in_eager=bool(options.get("twice_in_eager")))

    def slopes(self) -> torch.Tensor:
        """[H] as the model's own code builds them (dtype as it uses them)."""
        slopes = (mpt_alibi_slopes(self.heads, self.alibi_bias_max) if self.rule == "max"
                  else alibi_slopes(self.heads, device="cpu", float32_powers=self.float32_powers))
        return slopes.to(getattr(torch, self.dtype))

    def prepare(self, length: int, like: torch.Tensor) -> torch.Tensor:
        """The bias per offset −slope_h · |j − i| [H, 2L − 1] (offset −(L − 1) first), once per forward: every
        layer's is the same. Divided by √head_dim where the family does (Falcon)."""
        slopes = self.slopes().to(device=like.device, dtype=torch.float32)                   # [H]
        distance = offset_range(length, device=like.device).abs().to(torch.float32)          # [2L − 1]
        bias = -slopes[:, None] * distance[None, :]                                          # [H, 2L − 1]
        if self.head_dim:
            bias = bias / math.sqrt(self.head_dim)
        return bias.to(like.dtype)

    def attend(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, *, causal: bool,
               shared: torch.Tensor | None = None, need_weights: bool = False) -> Attention:
        per_offset = self.prepare(q.shape[-2], q) if shared is None else shared               # [H, 2L − 1]
        return offset_bias_attention(q, k, v, per_offset, causal=causal, need_weights=need_weights, validate=False)

    def structure(self, length: int, causal: bool) -> PositionStructure:
        """The bias :meth:`prepare` gives the forward, per offset [H, 2L − 1], drawn per cell [H, L, L]."""
        per_offset = self.prepare(length, torch.zeros(0)).float().numpy()                     # [H, 2L − 1]
        slopes = tuple(self.slopes().float().tolist())
        scale = f" / √{self.head_dim}" if self.head_dim else ""
        return PositionStructure(f"ALiBi bias −slope · |j − i|{scale}", "ALiBi bias", expand_offsets(per_offset, length),
                                 None, causal, True, facts={"slopes": slopes, **({"head_dim": self.head_dim} if self.head_dim else {})},
                                 caption=structure_caption(slopes, self.head_dim))

    def rule_text(self) -> str:
        """How this family builds its slopes, in words."""
        if self.rule == "max":
            return ("MPT's slopes are 2^(−alibi_bias_max·h/n₂), h = 1 … n₂ (n₂ the next power of 2); for a head count "
                    "that is not a power of 2 it keeps slopes 2, 4, 6, … then 1, 3, 5, … up to the head count: not "
                    "BLOOM's order.")
        rounding = " Rounded to bfloat16." if self.dtype == "bfloat16" else ""
        return "Press et al.'s rule (every other slope of 2p beyond a power of 2)." + rounding

    def notes(self) -> list[str]:
        out = []
        if self.config_bias_max is not None:
            out.append(f"transformers builds MPT's slopes with alibi_bias_max = 8, ignoring the config's "
                       f"{self.config_bias_max:g} (MosaicML's own code uses the config value)")
        if self.twice_in_eager:
            out.append("transformers' Falcon adds the ALiBi bias twice on its eager path (also taken with "
                       "output_attentions=True): 2·slope/√d there, slope/√d on its default SDPA path")
        return out

    def label(self) -> str:
        return f"ALiBi {counted(self.heads, 'head')}"

    def describe(self) -> str:
        scale = f", divided by √{self.head_dim}" if self.head_dim else ""
        return f"ALiBi: bias −m_h·(i − j), {self.heads} slopes from {self.slopes()[0].item():.4g} ({self.dtype}){scale}"

    def settings(self) -> dict[str, Any]:
        out: dict[str, Any] = {"heads": self.heads, "slopes_rule": self.rule, "slopes_dtype": self.dtype,
                               "alibi_bias_max": self.alibi_bias_max}
        if self.config_bias_max is not None:
            out["config_alibi_bias_max"] = self.config_bias_max
        if self.head_dim is not None:
            out["divided_by_sqrt_head_dim"] = True
            out["head_dim"] = self.head_dim
        return out

    def views(self, length: int, layer: Any) -> list[LayerView]:
        slopes = self.slopes().double().numpy()
        # the bias is linear in the offset: a few hundred offsets draw it exactly at any length
        offsets = np.unique(np.round(np.linspace(-(length - 1), 0, min(length, 513)))).astype(np.int64)
        scale = f" transformers' Falcon then divides it by √{self.head_dim}." if self.head_dim else ""
        return [bias_lines(slopes, offsets, title=f"ALiBi: bias −slope · |j − i| per head over {length:,} positions",
                           caption=f"{self.describe()}. {self.rule_text()}{scale} {NOTHING_LEARNED}")]


def structure_caption(slopes: tuple[float, ...], head_dim: int | None = None) -> str:
    """The words beside :meth:`Alibi.structure`: its ``slopes``, and the division by √``head_dim`` where there is one."""
    scale = f", divided by √{head_dim}" if head_dim else ""
    return ("A fixed penalty, nothing learned: each head subtracts slope · distance from its logits (slopes "
            + numbers_text(slopes, 4) + f"){scale}. Far keys fade smoothly; no offset can be singled out.")


def bias_lines(slopes: np.ndarray, offsets: np.ndarray, *,
               title: str = "ALiBi: bias −slope · |j − i| per head (fixed, not learned)",
               caption: str = "") -> BiasCurve:
    """ALiBi's bias −slope · |j − i| per head at ``offsets`` [n], from ``slopes`` [H]: what the mechanism draws for a
    real model (its title and caption) and the toy model's parameter view."""
    slopes = np.asarray(slopes, dtype=np.float64)
    bias = (-slopes[:, None] * np.abs(offsets)[None, :]).astype(np.float32)             # [H, n]
    return BiasCurve(title, caption, np.asarray(offsets), bias, learned=False,
                     head_labels=tuple(f"head {h + 1}: slope {float(s):.4g}" for h, s in enumerate(slopes)))
