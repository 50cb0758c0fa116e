"""KERPLE (Chi et al. 2022, log variant): a learned bias −r1_h · log(1 + r2_h · |j − i|) per head, one pair
(r1, r2) shared by every layer. No model in the family table applies it (``read`` finds it in no config):
relviz's toy model's ``kerple`` scheme hands it out holding its learned values and runs it, and a KERPLE
checkpoint draws on the Your model page. Its formula, curve and words are written once, here."""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import torch

from relviz._words import counted, numbers_text
from relviz.attention import offset_bias_attention
from relviz.attention_steps import Attention
from relviz.mechanisms.base import ToyMechanism
from relviz.mechanisms.view_kinds import LayerView
from relviz.positions import offset_range
from relviz.schemes.view_kinds import BiasCurve, PositionStructure, expand_offsets

__all__ = ["KerpleBias", "kerple_bias", "kerple_curve", "curve_caption", "structure_caption"]


@dataclass(frozen=True, eq=False)
class KerpleBias(ToyMechanism):
    """``r1``, ``r2``: [H], both > 0 (the softplus of the learned values); ``causal``: whether the model attends
    to the past only (the views draw the offsets it sees)."""

    r1: torch.Tensor
    r2: torch.Tensor
    causal: bool = True                   # the views draw past offsets only; a bidirectional model's both sides

    name = "kerple"
    role = "adds a learned logarithmic bias per head"
    order = 12

    def bias_per_offset(self, offsets: torch.Tensor) -> torch.Tensor:
        """[H, n] the bias at ``offsets`` [n]."""
        return kerple_bias(self.r1, self.r2, offsets)

    def prepare(self, length: int, like: torch.Tensor) -> torch.Tensor:
        """The bias per offset [H, 2L − 1], once per forward: every layer shares r1 and r2."""
        return self.bias_per_offset(offset_range(length, device=like.device)).to(like.dtype)

    def attend(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, *, causal: bool,
               shared: torch.Tensor | None = None, need_weights: bool = False) -> Attention:
        per_offset = self.prepare(q.shape[-2], q) if shared is None else shared               # [H, 2L − 1]
        return offset_bias_attention(q, k, v, per_offset, causal=causal, need_weights=need_weights, validate=False)

    def structure(self, length: int, causal: bool) -> PositionStructure:
        """The bias :meth:`prepare` gives the forward, per offset [H, 2L − 1], drawn per cell [H, L, L]."""
        with torch.no_grad():
            per_offset = self.bias_per_offset(offset_range(length, device="cpu")).to("cpu", torch.float32).numpy()
        r1, r2 = (tuple(r.detach().to("cpu", torch.float32).numpy().tolist()) for r in (self.r1, self.r2))
        return PositionStructure("KERPLE bias −r1 · log(1 + r2 · |j − i|)", "KERPLE bias",
                                 expand_offsets(per_offset, length), None, causal, True, facts={"r1": r1, "r2": r2},
                                 caption=structure_caption(r1, r2))

    def label(self) -> str:
        return f"KERPLE {counted(len(self.r1), 'head')}"

    def describe(self) -> str:
        return (f"KERPLE (log): bias −r1·log(1 + r2·|j − i|) per head, learned, shared by every layer; "
                f"r1 {self.r1.min().item():.3g}–{self.r1.max().item():.3g}")

    def settings(self) -> dict[str, Any]:
        return {"heads": len(self.r1), "r1": self.r1.tolist(), "r2": self.r2.tolist()}

    def views(self, length: int, layer: Any) -> list[LayerView]:
        offsets = np.arange(-(length - 1), 1 if self.causal else length)                   # [n]
        with torch.no_grad():
            per_offset = self.bias_per_offset(torch.from_numpy(offsets)).to("cpu", torch.float32).numpy()   # [H, n]
        r1, r2 = (r.detach().to("cpu", torch.float32).numpy() for r in (self.r1, self.r2))
        curve = kerple_curve(r1, r2, offsets, per_offset)
        return [replace(curve, caption=curve_caption(curve))]


def kerple_bias(r1: torch.Tensor, r2: torch.Tensor, offsets: torch.Tensor) -> torch.Tensor:
    """KERPLE's (log) bias −r1 · log(1 + r2 · |offset|): r1, r2 [H] (> 0), offsets [n] -> [H, n]."""
    distance = offsets.abs().to(r1.dtype)
    return -r1[:, None] * torch.log1p(r2[:, None] * distance[None, :])


def kerple_curve(r1: np.ndarray, r2: np.ndarray, offsets: np.ndarray, per_offset: np.ndarray) -> BiasCurve:
    """The learned curves as a view: ``per_offset`` [H, n] the bias at ``offsets`` [n] (what the mechanism
    draws, and the toy model's parameter view)."""
    steep = int(np.argmin(per_offset[:, 0]))            # the head with the lowest bias at the farthest offset
    return BiasCurve(
        "KERPLE: learned bias −r1 · log(1 + r2 · |j − i|) per head", "",
        offsets, per_offset.astype(np.float32), learned=True,
        head_labels=tuple(f"head {h + 1}: r1 {a:.3g}, r2 {b:.3g}" for h, (a, b) in enumerate(zip(r1, r2))),
        facts={"steepest_head": steep, "r1": float(r1[steep]), "r2": float(r2[steep]),
               "farthest_bias": float(per_offset[steep, 0]), "farthest_offset": int(offsets[0])})


def curve_caption(view: BiasCurve) -> str:
    """The words under :func:`kerple_curve`'s view, citing its facts."""
    facts = view.facts
    return ("**KERPLE's learned curves.** Two numbers per head, shared by every layer: r1 scales the penalty, "
            "r2 sets how fast the logarithm bends. The penalty is concave in the distance: the step from 1 to "
            "2 keys back costs more than the step from 20 to 21. Steepest here: head "
            f"{facts['steepest_head'] + 1} (r1 = {facts['r1']:.3g}, r2 = {facts['r2']:.3g}), "
            f"{facts['farthest_bias']:.2f} at j − i = {facts['farthest_offset']}. The formula is defined at "
            "every distance, so longer inputs extend the curve; grey: distances never seen in training.")


def structure_caption(r1: tuple[float, ...], r2: tuple[float, ...]) -> str:
    """The words beside :meth:`KerpleBias.structure`, quoting each head's ``r1`` and ``r2``."""
    return ("A learned penalty per head that grows with the logarithm of the distance (r1 = " + numbers_text(r1, 3)
            + "; r2 = " + numbers_text(r2, 3) + "). Like ALiBi it only falls with distance, so no single offset can be "
            "singled out.")
