"""No position at all on a layer (NoPE): Llama 4 and SmolLM3 on every fourth layer, Cohere 2 on its
full-attention layers. The plan puts it on every layer that applies no other position mechanism, so
the strip and the command line say so instead of showing an empty layer."""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from relviz.mechanisms.base import LayerContext, Mechanism
from relviz.mechanisms.view_kinds import LayerView, Note

__all__ = ["NoPosition"]


@dataclass(frozen=True)
class NoPosition(Mechanism):
    name = "none"
    role = "no position information"
    no_structure = ("This layer gets no position information: q · k depends on the content alone. A causal mask still "
                    "tells a query how many keys it can see, and nothing more: by position alone it cannot tell which "
                    "one is 5 back.")
    order = 1
    legend = "none"

    @classmethod
    def read(cls, ctx: LayerContext, options: Mapping[str, Any]) -> NoPosition:
        return cls()

    def label(self) -> str:
        return "NoPE"

    def describe(self) -> str:
        return ("no position encoding on this layer: its logits depend on content alone (the causal mask still "
                "orders the tokens)")

    def views(self, length: int, layer: Any) -> list[LayerView]:
        return [Note("No position on this layer (NoPE)",
                     "q·k here depends on the content alone: nothing rotates, nothing is added. A causal mask still "
                     "tells a token which keys came before it (and how many), and in a model with position elsewhere "
                     "the layers below have mixed it into the hidden states; a NoPE layer cannot be fooled by an "
                     "offset it never saw in training, which is why models keep some of them for long contexts.")]
