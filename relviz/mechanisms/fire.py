"""FIRE (Li et al. 2023): a learned MLP of the distance normalised by the query's own position,
f_θ(ψ(i − j) / ψ(max(L, i))) with ψ(x) = log(c·x + 1), one function per layer. No model in the family table
applies it (``read`` finds it in no config): relviz's toy model's ``fire`` scheme hands it out holding its
learned c, L and MLP, and runs it, so a FIRE checkpoint draws on the Your model page. Its function, curve and
words are written once, here."""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import torch
from torch import nn

from relviz.attention_steps import Attention, dot_product_attention
from relviz.mechanisms.base import ToyMechanism
from relviz.mechanisms.view_kinds import LayerView
from relviz.schemes.view_kinds import BiasCurve, PositionStructure

__all__ = ["FireFunction", "fire_curve", "curve_caption", "structure_caption"]


@dataclass(frozen=True, eq=False)
class FireFunction(ToyMechanism):
    """One layer's function: ``c`` and ``threshold`` (L) [] both > 0, ``mlp`` 1 -> hidden -> H; ``layer``: its
    index (0-based). Its titles and words say "this layer", never a number: the two pages that draw it count
    layers differently (Live attention from 1, Your model from 0 as transformers does), and each names the layer
    in its own heading."""

    c: torch.Tensor
    threshold: torch.Tensor
    mlp: nn.Module
    layer: int

    name = "fire"
    role = "adds a learned function of the normalised distance"
    order = 13

    def bias(self, length: int, first_query: int = 0) -> torch.Tensor:
        """The bias [H, L − first_query, L] for queries first_query..L − 1 and keys 0..L − 1 (future keys:
        distance 0, masked by the pattern)."""
        position = torch.arange(length, device=self.c.device, dtype=torch.float32)       # [L]
        query = position[first_query:]                                                   # [n]
        distance = (query[:, None] - position[None, :]).clamp(min=0)                     # [n, L], i − j
        psi = torch.log1p(self.c * distance)                                             # ψ(i − j)
        norm = torch.log1p(self.c * torch.maximum(self.threshold, query))                # [n], ψ(max(L, i))
        x = (psi / norm[:, None])[..., None]                                             # [n, L, 1]
        return self.mlp(x).permute(2, 0, 1)                                              # [H, n, L]

    def attend(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, *, causal: bool, shared: Any = None,
               need_weights: bool = False) -> Attention:
        bias = self.bias(q.shape[-2]).to(q.dtype)                                        # [H, L, L]
        return dot_product_attention(q, k, v, causal=causal, bias=bias, need_weights=need_weights)

    def structure(self, length: int, causal: bool) -> PositionStructure:
        """This layer's bias for every query and key [H, L, L]: not Toeplitz, since it depends on the query's own
        position beyond L."""
        with torch.no_grad():
            bias = self.bias(length).to("cpu", torch.float32).numpy()                       # [H, L, L]
        facts = {"threshold": float(self.threshold.detach()), "c": float(self.c.detach())}
        return PositionStructure(
            "FIRE bias f(ψ(i − j) / ψ(max(L, i))) of this layer", "FIRE bias (this layer)",
            np.ascontiguousarray(bias), None, causal, False, facts=facts, caption=structure_caption(**facts))

    def label(self) -> str:
        return f"FIRE L {self.threshold.item():.3g}"

    def describe(self) -> str:
        return (f"FIRE: a learned MLP of ψ(i − j) / ψ(max(L, i)), ψ(x) = log(c·x + 1), this layer's own "
                f"(c = {self.c.item():.3g}, L = {self.threshold.item():.3g})")

    def settings(self) -> dict[str, Any]:
        return {"c": self.c.item(), "threshold": self.threshold.item(), "hidden": self.mlp[0].out_features}

    def views(self, length: int, layer: Any) -> list[LayerView]:
        curve = fire_curve(self, length)
        return [replace(curve, caption=curve_caption(curve))]


def fire_curve(fire: FireFunction, length: int) -> BiasCurve:
    """One layer's learned function read along the last query's row (i = length − 1) as a view: what the
    mechanism draws, and the toy model's parameter view."""
    layer = fire.layer
    with torch.no_grad():
        bias = fire.bias(length, length - 1)[:, 0, :].to("cpu", torch.float32).numpy()   # [H, L], the last query
    offsets = np.arange(length) - (length - 1)                                      # j − i of keys 0..L − 1
    return BiasCurve(
        f"FIRE, this layer: learned bias per head vs offset, for the last query i = {length - 1}", "",
        offsets, np.ascontiguousarray(bias, dtype=np.float32), learned=True,
        facts={"layer": layer, "query": length - 1, "c": float(fire.c.detach()),
               "threshold": float(fire.threshold.detach())})


def curve_caption(view: BiasCurve) -> str:
    """The words under :func:`fire_curve`'s view, citing its facts."""
    facts = view.facts
    return (f"**FIRE's learned function** in this layer (the layer of the close-up), read "
            f"along the last row: the query i = {facts['query']} looking back. f_θ sees the distance only "
            f"after ψ(x) = log(c·x + 1) and the division by ψ(max(L, i)) (learned c = {facts['c']:.3g}, "
            f"L = {facts['threshold']:.3g}), so a longer input squeezes more offsets into the same [0, 1] "
            "range the MLP was trained on: interpolation, not extrapolation. Grey: distances never seen in "
            "training.")


def structure_caption(threshold: float, c: float) -> str:
    """The words beside :meth:`FireFunction.structure`, quoting the learned ``threshold`` L and ``c``."""
    return ("A learned function of the distance divided by the query's own (log) position: for queries beyond the "
            f"learned threshold L = {threshold:.3g} the same offset gets a different bias in every row (c = {c:.3g}), so "
            "the picture is not a Toeplitz matrix; below L it is. Future keys are masked.")
