"""Sinusoidal absolute positions (Vaswani et al. 2017): PE[p, 2k] = sin(p·ω_k), PE[p, 2k + 1] = cos(p·ω_k),
ω_k = 10000^(−2k/d), added to the input before the first layer; nothing learned. relviz's toy model hands
it out and runs it (``embed``); a real family gets it from the observer (relviz.observe_position), which compares
the model's fixed table with ``table`` row by row (``torch.equal``) in each of the layouts below. The
encoding is relviz.absolute's.

``variant``: "interleaved" (the paper: sin, cos per pair), "concatenated" (all sines, then all cosines, the
paper's frequencies: Marian), "tensor2tensor" (concatenated, frequencies 1e4^(−k/(d/2 − 1)): XGLM);
``float32``: the angles computed step by step in float32, as the model's code does (XGLM, CTRL), not in
float64 rounded once; ``offset``: position p gets row p + offset of the encoding (XGLM: 2, so its
position 0 is the paper's position 2).
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from relviz.absolute import sinusoidal_encoding, tensor2tensor_timing_signal
from relviz.mechanisms.base import LayerContext, Mechanism
from relviz.mechanisms.view_kinds import LayerView, Note
from relviz.schemes.view_kinds import PositionStructure, expand_offsets

__all__ = ["SinusoidalAbsolute", "NOTHING_LEARNED", "VARIANTS", "STRUCTURE_CAPTION"]

#: what the pages say about its parameters: there are none
NOTHING_LEARNED = ("Sinusoidal positions are fixed sin/cos vectors: nothing about position is learned. "
                   "Their dot product (the structure beside the close-up) depends only on j − i.")
VARIANTS = ("interleaved", "concatenated", "tensor2tensor")
#: the words beside the structure
STRUCTURE_CAPTION = ("Absolute vectors, yet their dot product depends only on j − i (a sum of cos(ω · (j − i))). "
                     "Nothing learned: the model has to turn this into the offset it needs.")


@dataclass(frozen=True)
class SinusoidalAbsolute(Mechanism):
    d_model: int
    variant: str = "interleaved"
    float32: bool = False
    offset: int = 0

    positional = True
    needs_weights = False           # fixed: nothing learned
    name = "sinusoidal"
    option_types = {"variant": frozenset(VARIANTS), "float32": bool, "offset": int, "width_field": str}
    role = "adds a fixed sin/cos vector per position to the input"
    order = 21
    legend = "absolute"

    @classmethod
    def read(cls, ctx: LayerContext, options: Mapping[str, Any]) -> SinusoidalAbsolute:
        width = ctx.config.int(options.get("width_field", "hidden_size"), minimum=2, maximum=1 << 16)
        return cls(d_model=width, variant=options.get("variant", "interleaved"),
                   float32=bool(options.get("float32")), offset=options.get("offset", 0))

    def embed(self, x: torch.Tensor) -> torch.Tensor:
        """x [B, L, D] + PE [L, D], computed for this length in x's dtype (the toy model's paper layout)."""
        table = sinusoidal_encoding(x.shape[1], x.shape[2], dtype=x.dtype, device=x.device)   # [L, D]
        return x + table

    def table(self, positions: int, *, device: torch.device | str | None = None) -> torch.Tensor:
        """[positions, d_model] float32 on ``device``: the encoding's rows 0 … positions − 1 (position p adds row
        p + offset)."""
        if self.variant == "tensor2tensor":
            return tensor2tensor_timing_signal(positions, self.d_model, float32_arithmetic=self.float32, device=device)
        return sinusoidal_encoding(positions, self.d_model, interleaved=self.variant == "interleaved",
                                   float32_arithmetic=self.float32, device=device)

    def structure(self, length: int, causal: bool) -> PositionStructure:
        """p_i · p_j / (d/2) [1, L, L]: per offset, p_|j − i| · p_0 of this variant's frequencies in float64 (a sum of
        cos((j − i) · ω_k), so neither the layout nor the row offset changes it)."""
        if self.variant == "tensor2tensor":
            table = tensor2tensor_timing_signal(length, self.d_model, dtype=torch.float64, device="cpu")
        else:
            table = sinusoidal_encoding(length, self.d_model, interleaved=self.variant == "interleaved",
                                        dtype=torch.float64, device="cpu")
        table = table.numpy()                                                                # [L, D]
        distance = np.abs(np.arange(-(length - 1), length))                                  # [2L − 1]
        per_offset = (table[distance] @ table[0]) / (self.d_model / 2)
        return PositionStructure("sinusoidal: p_i · p_j / (d/2)", "p_i·p_j/(d/2)",
                                 expand_offsets(per_offset, length)[None].astype(np.float32), None, causal, True,
                                 caption=STRUCTURE_CAPTION)

    def label(self) -> str:
        return "sinusoidal abs"

    def describe(self) -> str:
        layout = {"interleaved": "sin/cos interleaved", "concatenated": "sines then cosines",
                  "tensor2tensor": "tensor2tensor's frequencies, sines then cosines"}[self.variant]
        rows = f"; position p gets the encoding of p + {self.offset}" if self.offset else ""
        return f"sinusoidal absolute positions (d = {self.d_model}, {layout}{rows}) added to the input, fixed"

    def settings(self) -> dict[str, Any]:
        out: dict[str, Any] = {"d_model": self.d_model}
        if (self.variant, self.float32, self.offset) != ("interleaved", False, 0):
            out.update(variant=self.variant, float32_arithmetic=self.float32, offset=self.offset)
        return out

    def views(self, length: int, layer: Any) -> list[LayerView]:
        return [Note("Sinusoidal positions (in the input, before the first layer)", NOTHING_LEARNED)]
