"""DeepSeek sparse attention (DSA): a lightning indexer chooses, per query, the ``index_topk`` keys it attends to.

transformers 5.23 runs it on ``indexed_attention`` layers (DeepSeek-V3.2, GLM-MoE-DSA, AXK2, dots3, HY-V4):
beside the layer's attention (MLA, its rotated ``qk_rope_head_dim`` part), an indexer with its own small heads
scores every causal key for every query, ``Σ_h w_h · relu(q_h · k / √d)``, and the query attends only to the
``min(index_topk, i + 1)`` keys with the highest scores (``topk`` then a mask). The indexer's q and k are
rotated too, by the layer's own cos/sin, on ``qk_rope_head_dim`` of its ``index_head_dim`` dims: the first
ones in half-split pairs (DeepSeek-V3.2, AXK2), the first ones interleaved (GLM-MoE-DSA, dots3), the last
ones in half-split pairs (HY-V4). Some families let a layer reuse the previous full layer's choice
(``indexer_types``: ``shared``) instead of running its own indexer.

What relviz can say exactly: up to ``index_topk`` keys a query sees every causal key (the mask is the causal
one); past it, it sees exactly ``index_topk`` of them, chosen by the indexer's scores, which depend on the
tokens. Like a window of ``index_topk`` keys, but chosen by content, not by distance: no mask of positions
alone describes it, so :meth:`IndexedSelection.mask` refuses a length past ``index_topk``. The observer
(relviz.observe) shrinks ``index_topk`` below its probe length (``SHRUNK``) and checks both regimes, that
the choice changes with the tokens, and the indexer's rotation ``torch.equal``. Where the rotated dims sit in the
indexer's head (``rope_at``) is read from transformers' code: the recorded rotation is the rotated slice alone, and
the scores do not depend on which dims hold it.
"""
from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from relviz._words import counted
from relviz.mechanisms.base import MAX_POSITIONS, LayerContext
from relviz.mechanisms.pattern import AttentionPattern
from relviz.mechanisms.rotation import Rotation
from relviz.mechanisms.view_kinds import KeysSeen, LayerView, keys_seen
from relviz.rope.math import LAYOUTS

__all__ = ["IndexedSelection", "INDEXER_MODULES", "SHRUNK", "kept_per_query"]

#: fragments of the class names of modules beside a layer's attention that rotate their own tensors: DSA's indexer
#: (DeepseekV32Indexer, GlmMoeDsaIndexer, ...) and DeepSeek-V4's key compressors (pooled keys rotated at their
#: block's position). The observer tells their rotation calls from the attention's by the module they run inside
INDEXER_MODULES = ("Indexer", "Compressor")
#: config fields the observer's shrunk probe cuts (the real value stays the config's): index_topk below its
#: shorter probe (12 positions), so the probes see both regimes: all causal keys, then index_topk of them
SHRUNK = {"index_topk": 8}
#: where the indexer's rotated dims sit in its head
_ROPE_AT = frozenset({"start", "end"})


def kept_per_query(candidates: torch.Tensor, topk: int) -> torch.Tensor:
    """[L] how many keys each query attends: min(index_topk, the keys its pattern allows), for candidates
    bool [L, L] (the causal mask, or a window's)."""
    return candidates.sum(-1).clamp(max=topk)


@dataclass(frozen=True)
class IndexedSelection(AttentionPattern):
    """The keys a query sees on a DSA layer: the pattern's (``causal``), of which the indexer keeps ``topk``.

    ``rotation``: the indexer's own RoPE (its head ``heads`` × ``head_dim``; None when the layer reuses
    ``source``'s choice and runs no indexer of its own)."""

    topk: int = 2048
    heads: int = 0
    head_dim: int = 0
    rotation: Rotation | None = None
    source: int | None = None

    name = "indexer"
    option_types = {"pattern": dict, "layer_types": (list, tuple), "rotation": dict,
                    "rope_at": _ROPE_AT, "shared_field": str, "shared_default": dict, "required_fields": (list, tuple)}
    role = "decides which keys a query sees: past index_topk, a lightning indexer chooses them by content"
    order = 51
    positional = True

    @classmethod
    def read(cls, ctx: LayerContext, options: Mapping[str, Any]) -> AttentionPattern:
        """The layer's pattern (read with the ``pattern`` options, AttentionPattern's), and on an indexed layer
        (``layer_types``) the indexer that narrows it."""
        cfg = ctx.config
        missing = [f for f in options.get("required_fields", ()) if not cfg.has(f)]
        if missing:       # dots3: its config class derives them from fields relviz does not read (use_dsa, swa_*)
            raise ValueError(f"config field {cfg.name(missing[0])} is required for this family: its config class "
                             "derives which layers are indexed, sliding or full, and their sizes, from other fields, "
                             "which relviz does not read (give the config as transformers saves it)")
        base = AttentionPattern.read(ctx, options.get("pattern", {}))
        if ctx.layer_type not in options.get("layer_types", ("indexed_attention",)):
            return base
        topk = cfg.int("index_topk", minimum=1, maximum=MAX_POSITIONS)
        heads = cfg.int("index_n_heads", minimum=1, maximum=1 << 14)
        head_dim = cfg.int("index_head_dim", minimum=2, maximum=1 << 14)
        shared = options.get("shared_field")
        kinds = cfg.list(shared, ctx.layers, lambda n, v: _indexer_kind(n, v), counted_by=ctx.layers_field) \
            if shared else None
        if shared and kinds is None:
            kinds = _derived_kinds(cfg, ctx.layers, options.get("shared_default", {}))
        source = None
        if kinds is not None and kinds[ctx.index] == "shared":
            source = next((j for j in range(ctx.index - 1, -1, -1) if kinds[j] == "full"), None)
            if source is None:
                raise ValueError(f"config field {cfg.name(f'{shared}[{ctx.index}]')} is 'shared', but no layer "
                                 "before it runs its own indexer ('full') to share")
            return cls(**_pattern_fields(base), topk=topk, heads=heads,
                       head_dim=head_dim, source=source)
        turn = Rotation.read(ctx, options.get("rotation", {}))
        if turn is None:
            raise ValueError(f"config field {cfg.name(f'layer_types[{ctx.index}]')} is {ctx.layer_type!r}, whose "
                             "indexer rotates by the layer's RoPE; this layer has none")
        if turn.rotary_dim > head_dim:
            raise ValueError(f"config field {cfg.name('index_head_dim')} is {head_dim}: the indexer rotates "
                             f"{turn.rotary_dim} dims of its head, so it must be at least {turn.rotary_dim}")
        offset = head_dim - turn.rotary_dim if options.get("rope_at", "start") == "end" else 0
        turn = dataclasses.replace(turn, head_width=head_dim, rotary_offset=offset)
        return cls(**_pattern_fields(base), topk=topk, heads=heads,
                   head_dim=head_dim, rotation=turn)

    # -- the maths ----------------------------------------------------------------------------

    @property
    def cap(self) -> int:
        return self.topk

    def mask(self, length: int) -> torch.Tensor:
        """bool [length, length], exact while no query has more than ``topk`` keys to choose from: there every query
        sees its pattern's keys. Past it the indexer chooses by content: a ValueError, never a mask of positions."""
        candidates = super().mask(length)
        if int(candidates.sum(-1).max()) > self.topk:
            raise ValueError(f"length {length} is past this layer's index_topk = {self.topk:,}: from there a "
                             f"lightning indexer chooses which {self.topk:,} keys each query attends, by the tokens' "
                             "content, so no mask of positions alone is its pattern (up to index_topk it is "
                             f"{super().label()})")
        return candidates

    def agrees(self, allowed: torch.Tensor) -> str | None:
        """Whether ``allowed`` bool [L, L] (what transformers' attention got) is this layer's: inside the pattern,
        and exactly min(topk, the pattern's keys) keys per query. None when it holds, else what differs."""
        length = allowed.shape[-1]
        candidates = super().mask(length)
        if bool((allowed & ~candidates).any()):
            return f"a query sees a key outside the {super().label()} pattern"
        seen, kept = allowed.sum(-1), kept_per_query(candidates, self.topk)
        if not torch.equal(seen, kept):
            row = int((seen != kept).nonzero()[0, 0])
            return (f"query {row} sees {int(seen[row])} keys; with index_topk = {self.topk} it would see "
                    f"{int(kept[row])}")
        return None

    def chosen_by_content(self, masks: Mapping[int, torch.Tensor]) -> bool | None:
        """Whether two probes' masks (different tokens at the same positions) chose different keys for a query
        past ``topk`` (None: no query in both probes has more than ``topk`` keys to choose from)."""
        lengths = sorted(masks)
        if len(lengths) < 2:
            return None
        short = lengths[0]
        rows = kept_per_query(super().mask(short), self.topk) < super().mask(short).sum(-1)
        if not bool(rows.any()):
            return None
        return not torch.equal(masks[short][rows], masks[lengths[1]][:short, :short][rows])

    # -- words --------------------------------------------------------------------------------

    def observed_words(self) -> str:
        """What the observer saw of the DSA layers, this being a layer of the shrunk probe (relviz.observe)."""
        return (f"DeepSeek sparse attention observed with index_topk cut to {self.topk} in the probe (the plan's "
                "index_topk is the config's): up to it each query attended every causal key, past it exactly "
                f"{self.topk} of them, and other tokens at the same positions chose other keys; the indexer's own "
                "rotation equals transformers' (torch.equal)")

    def label(self) -> str:
        by = "indexer" if self.source is None else f"layer {self.source}'s indexer"
        return f"{super().label()}, top {self.topk:,} by {by}"

    def _rotation_words(self) -> str:
        if self.rotation is None:
            return f"it runs no indexer of its own: it reuses layer {self.source}'s choice of keys"
        r = self.rotation
        where = "first" if r.rotary_offset == 0 else "last"
        return (f"its indexer ({counted(self.heads, 'head')} of {self.head_dim} dims) rotates the {where} "
                f"{r.rotary_dim} dims of q and k by the layer's RoPE (base {r.rope.base:g}; layout: "
                f"{LAYOUTS[r.layout]})")

    def describe(self) -> str:
        return (f"{super().describe()}; DeepSeek sparse attention: a lightning indexer scores every one of these keys "
                f"(from their content and, through its RoPE, their position) and the query attends only the top "
                f"index_topk = {self.topk:,}: up to {self.topk:,} keys "
                f"it sees all of them, past that exactly {self.topk:,} chosen by the indexer's scores, not by distance "
                f"(like a window of {self.topk:,}, but which keys depends on the tokens); {self._rotation_words()}")

    def settings(self) -> dict[str, Any]:
        out = {**super().settings(), "index_topk": self.topk, "index_n_heads": self.heads,
               "index_head_dim": self.head_dim}
        if self.rotation is None:
            out["indexer"] = f"shared from layer {self.source}"
        else:
            r = self.rotation
            out["indexer_rotation"] = {"rotary_dim": r.rotary_dim, "rotary_offset": r.rotary_offset,
                                       "layout": r.layout, "rope_theta": r.rope.base}
        return out

    def views(self, length: int, layer: Any) -> list[LayerView]:
        positions, back, ahead, sampled = keys_seen(length, causal=self.causal, window=self.window, chunk=self.chunk)
        if self.chunk is None and self.topk < length and self.topk - 1 not in positions:   # the count's kink
            at = np.searchsorted(positions, self.topk - 1)
            back = np.insert(back, at, round(np.interp(self.topk - 1, positions, back)))
            ahead = np.insert(ahead, at, round(np.interp(self.topk - 1, positions, ahead)))
            positions = np.insert(positions, at, self.topk - 1)
        if length <= self.topk:
            what = (f"At {length:,} positions, no more than index_topk = {self.topk:,} keys: every query sees all the "
                    f"keys its {super().label()} pattern allows, exactly. Past {self.topk:,} keys a lightning "
                    f"indexer keeps the {self.topk:,} it scores highest, by content.")
        else:
            what = (f"Up to {self.topk:,} keys a query sees all of them; past that it attends exactly {self.topk:,}, "
                    "chosen by a lightning indexer's scores of each key's content (its own RoPE makes the scores "
                    "position-aware too). The count is a window's; which keys is not: the band shows the offsets it "
                    f"may choose from, any of them, and which {self.topk:,} it attends depends on the tokens.")
        return [KeysSeen(f"Which keys each query may attend over {length:,} positions", what, length, positions,
                         back, ahead, self.reach(), f"top {self.topk:,}", sampled, cap=self.cap)]


def _pattern_fields(base: AttentionPattern) -> dict[str, Any]:
    """The pattern's own fields (causal, window, chunk, its mask fill...), which an indexed layer keeps."""
    return {f.name: getattr(base, f.name) for f in dataclasses.fields(AttentionPattern)}


def _derived_kinds(cfg: Any, layers: int, rule: Mapping[str, Any]) -> list[str]:
    """``indexer_types`` as the family's config class derives it when a config omits it: from a pattern of F and S
    (``pattern_field``, GLM-MoE-DSA's index_topk_pattern), else layer i runs its own indexer when
    max(i − offset + 1, 0) % freq == 0 (GLM-MoE-DSA: index_topk_freq 1, index_skip_topk_offset 2: every layer;
    HY-V4: every 4th from layer 1, and layer 0)."""
    pattern = cfg.raw(rule["pattern_field"]) if rule.get("pattern_field") else None
    if pattern is not None:
        letters = {"F": "full", "S": "shared"}
        kinds = [letters.get(c, c) for c in pattern] if isinstance(pattern, str) else list(pattern)
        if len(kinds) != layers or any(k not in ("full", "shared") for k in kinds):
            raise ValueError(f"config field {cfg.name(rule['pattern_field'])} must give 'F' (full) or 'S' (shared) "
                             f"for each of the {layers} layers; got {pattern!r:.60}")
        return kinds
    freq = max(cfg.int(rule["freq_field"], rule.get("freq", 1), minimum=0, maximum=1 << 12)
               if rule.get("freq_field") else rule.get("freq", 1), 1)
    offset = cfg.int(rule["offset_field"], rule.get("offset", 2), minimum=0, maximum=1 << 12) \
        if rule.get("offset_field") else rule.get("offset", 2)
    return ["full" if max(i - offset + 1, 0) % freq == 0 else "shared" for i in range(layers)]


def _indexer_kind(name: str, value: Any) -> str:
    """One entry of ``indexer_types``: 'full' (the layer runs its indexer) or 'shared' (it reuses one's)."""
    if value not in ("full", "shared"):
        raise ValueError(f"config field {name} must be 'full' or 'shared'; got {value!r:.60}")
    return value

