"""The token mixer of one layer: softmax attention, or something that mixes tokens without attending.

Hybrid models interleave softmax attention with layers that carry order in a recurrent state (Mamba's
selective scan, Gated DeltaNet's delta rule, Griffin's RG-LRU) or in a short causal convolution (LFM2).
Such a layer has no attention pattern, no rotation and no logits: what reaches it about order comes
through its state. transformers 5.23 names the layer kinds in ``layer_types`` (``LAYER_TYPES`` below
gives what each value runs); its value ``linear_attention`` covers every recurrent kind (Mamba, Mamba2,
Gated DeltaNet, lightning attention), so which one a family runs is the family table's ``linear_kind``
(or what the observer sees run). A value not listed is refused by name, never read as attention.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from relviz.mechanisms.base import LayerContext, Mechanism
from relviz.mechanisms.view_kinds import LayerView, Note

__all__ = ["TokenMixer", "MIXER_KINDS", "LAYER_TYPES", "LAYER_TYPE_NEEDS", "ATTENTION", "NOT_ON_TEXT", "mixer_kinds",
           "kind_of_module", "check_read"]

ATTENTION = "softmax_attention"

#: kind -> (short label, how order reaches a layer of this kind, in words)
MIXER_KINDS: dict[str, tuple[str, str]] = {
    ATTENTION: ("softmax attention", "its position mechanisms and mask"),
    "linear_attention": ("linear attention", "the recurrent state its delta rule updates token by token"),
    "state_space": ("state-space (Mamba)", "the selective scan's recurrent state"),
    "short_convolution": ("short convolution", "its causal convolution over the last few tokens"),
    "recurrence": ("recurrence (RG-LRU)", "the recurrence's gated state"),
    "mlstm": ("recurrence (xLSTM's mLSTM)", "the matrix memory its gated recurrence updates token by token"),
    "wkv": ("recurrence (RWKV's WKV)", "the WKV recurrence's decaying state, and a token shift that mixes each "
                                       "token with the one before"),
    "recurrent_state": ("recurrent state (kind not named by the config)",
                        "a recurrent state (transformers' linear_attention: Mamba, a delta rule or lightning "
                        "attention; the config alone does not say which)"),
    "cross_attention": ("cross-attention to the image only", "nothing: this layer attends to the image's tokens only "
                        "(transformers skips it on text alone)"),
    "feed_forward": ("feed-forward only", "nothing: this layer mixes no tokens (an MLP or MoE block)"),
}

#: transformers' layer type values -> the mixer kinds a layer of that type runs (None: the family's
#: ``linear_kind``); legacy names as transformers remaps them (configuration_utils._LEGACY_LAYER_TYPE_REMAP)
LAYER_TYPES: dict[str, tuple[str | None, ...]] = {
    "full_attention": (ATTENTION,), "sliding_attention": (ATTENTION,), "chunked_attention": (ATTENTION,),
    "attention": (ATTENTION,),
    "linear_attention": (None,), "mamba": ("state_space",), "recurrent": ("recurrence",),
    "conv": ("short_convolution",),
    "hybrid": (ATTENTION, None),            # attention and a recurrent mixer on one layer (Falcon-H1)
    "moe": ("feed_forward",), "mlp": ("feed_forward",),
    "indexed_attention": (ATTENTION,),      # read only with its mechanism: LAYER_TYPE_NEEDS
    "cross_attention": ("cross_attention",),   # a layer that attends to an image only (Mllama's cross_attention_layers)
}
#: kinds whose layer transformers skips on text alone: the observer checks that it did not run
NOT_ON_TEXT = frozenset({"cross_attention"})

#: layer types that attend in a way only one mechanism reads -> (its name, what transformers runs there): a family
#: whose table does not apply it on such a layer is refused (never read as plain attention)
LAYER_TYPE_NEEDS: dict[str, tuple[str, str]] = {
    "indexed_attention": ("indexer", "DeepSeek sparse attention: past index_topk keys a lightning indexer chooses by "
                                     "content which keys each query attends (relviz.mechanisms.indexer)"),
}

_COMPRESSED = ("each query attends to its last sliding_window keys and to compressed keys, one per {rate} tokens "
               "(pooled with learned gates and rotated at their block's position by the 'compress' RoPE){topk}: its keys "
               "are not one per position, so relviz's per-position pattern and rotation cannot describe it")
#: layer types relviz knows and refuses, with the reason (what transformers runs there), e.g. DeepSeek-V4's
LAYER_TYPE_REASONS: dict[str, str] = {
    "compressed_sparse_attention": _COMPRESSED.format(rate="compress_rates' 4", topk=", of which a learned indexer "
                                                      "keeps the top index_topk for each query"),
    "heavily_compressed_attention": _COMPRESSED.format(rate="compress_rates' 128", topk=""),
}

#: fragments of a transformers module's class name -> the kind it runs (the observer's reading of a layer)
MODULE_KINDS: tuple[tuple[str, str], ...] = (
    ("GatedDeltaNet", "linear_attention"), ("DeltaNet", "linear_attention"), ("LightningAttention", "linear_attention"),
    ("LinearAttention", "linear_attention"), ("KimiDelta", "linear_attention"), ("DeltaAttention", "linear_attention"),
    ("Mamba", "state_space"), ("Mixer", "state_space"),
    ("ShortConv", "short_convolution"),
    ("Rglru", "recurrence"), ("RecurrentBlock", "recurrence"),
    ("RwkvSelfAttention", "wkv"), ("xLSTMLayer", "mlstm"),           # transformers' name; it runs rwkv_linear_attention, no softmax
)


def kind_of_module(class_name: str) -> str | None:
    """The mixer kind a module class runs, by the fragments of ``MODULE_KINDS`` (None: not one of them)."""
    return next((kind for fragment, kind in MODULE_KINDS if fragment in class_name), None)


def mixer_kinds(name: str, layer_type: str | None, linear_kind: str | None) -> tuple[str, ...]:
    """What a layer of ``layer_type`` runs (None: a layer type-less attention layer); ValueError for a value
    relviz does not know, naming the field ``name``."""
    if layer_type is None:
        return (ATTENTION,)
    if layer_type in LAYER_TYPE_REASONS:
        raise ValueError(f"config field {name} is {layer_type!r}, a layer type relviz refuses: "
                         f"{LAYER_TYPE_REASONS[layer_type]}")
    if layer_type not in LAYER_TYPES:
        raise ValueError(f"config field {name} is {layer_type!r}: a layer type relviz does not read (it reads "
                         f"{', '.join(LAYER_TYPES)}); it is refused rather than taken for attention")
    return tuple((linear_kind or "recurrent_state") if k is None else k for k in LAYER_TYPES[layer_type])


def check_read(name: str, layer_type: str | None, found: list[Mechanism]) -> None:
    """A ValueError naming the field ``name`` when a layer of ``layer_type`` needs a mechanism (LAYER_TYPE_NEEDS)
    its family's table did not apply: relviz would otherwise read it as plain attention."""
    need = LAYER_TYPE_NEEDS.get(layer_type or "")
    if need is not None and not any(m.name == need[0] for m in found):
        raise ValueError(f"config field {name} is {layer_type!r}: {need[1]}; this family's entry in relviz's family "
                         f"table does not read it (mechanism {need[0]!r}), so the layer is refused rather than read "
                         "as plain attention")


@dataclass(frozen=True)
class TokenMixer(Mechanism):
    """What mixes tokens on this layer: ``kinds`` (softmax attention, or one of the recurrent kinds, or both)."""

    kinds: tuple[str, ...] = (ATTENTION,)

    name = "mixer"
    option_types = {"linear_kind": str, "refuse": dict}
    role = "mixes tokens"
    order = -10

    @classmethod
    def read(cls, ctx: LayerContext, options: Mapping[str, Any]) -> TokenMixer:
        refused = options.get("refuse", {})     # the family's own: {layer type: what it runs there}
        if ctx.layer_type in refused:
            raise ValueError(f"config field {ctx.config.name(f'layer_types[{ctx.index}]')} is {ctx.layer_type!r}, a "
                             f"layer type relviz refuses in this family: {refused[ctx.layer_type]}")
        linear = options.get("linear_kind")
        if linear is not None and (linear not in MIXER_KINDS or linear == ATTENTION):
            raise ValueError(f"the family table's linear_kind must be one of {', '.join(MIXER_KINDS)}; got {linear!r}")
        return cls(mixer_kinds(ctx.config.name(f"layer_types[{ctx.index}]"), ctx.layer_type, linear))

    @property
    def attends(self) -> bool:
        return ATTENTION in self.kinds

    @property
    def legend(self) -> str:  # type: ignore[override]
        """The strip's colour group: layers that do not attend get colours of their own."""
        return "mixer" if self.attends else "no_attention"

    def others(self) -> list[str]:
        return [k for k in self.kinds if k != ATTENTION]

    def label(self) -> str:
        words = " + ".join(MIXER_KINDS[k][0] for k in self.kinds)
        return words if self.attends else f"{words}, no attention"

    def describe(self) -> str:
        if self.attends and not self.others():
            return "softmax attention"
        through = "; ".join(MIXER_KINDS[k][1] for k in self.others())
        if self.attends:
            beside = " + ".join(MIXER_KINDS[k][0] for k in self.others())
            return f"softmax attention and {beside} on one layer: order also reaches it through {through}"
        return f"no attention on this layer: order reaches it through {through}"

    def settings(self) -> dict[str, Any]:
        return {"mixer": list(self.kinds)}

    def views(self, length: int, layer: Any) -> list[LayerView]:
        if self.attends:
            return []
        return [Note(f"Token mixer: {' + '.join(MIXER_KINDS[k][0] for k in self.kinds)}",
                     self.describe().capitalize() + ". It has no attention pattern, no rotation and no logits to "
                     "draw; the softmax-attention layers around it are where the position mechanisms act.")]
