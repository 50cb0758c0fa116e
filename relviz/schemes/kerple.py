"""``kerple``: KERPLE, logarithmic variant (Chi et al. 2022, "KERPLE: Kernelized Relative
Positional Embedding for Length Extrapolation").

Each head adds −r1 · log(1 + r2 · |j − i|) to its attention logits, with r1, r2 > 0 learned per
head (a conditionally positive definite kernel of the distance, shifted into a bias). ALiBi is
the fixed straight-line cousin; the logarithm penalises far keys less and less.
"""
from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from relviz.attention import offset_bias_attention
from relviz.positions import offset_range
from relviz.schemes.base import Attention, Scheme, SchemeConfig, detached, expand_offsets, numbers_text
from relviz.schemes.view_kinds import BiasCurve, PositionStructure, View


#: softplus⁻¹(1): the raw value whose softplus is 1 (r1 and r2 start at 1 in every head).
_ONE = float(np.log(np.expm1(1.0)))


class Kerple(Scheme):
    """Per-head r1, r2 (kept positive through a softplus), one pair shared by every layer."""

    name = "kerple"
    summary = "KERPLE (log): a learned per-head bias −r1 · log(1 + r2 · |j − i|), r1, r2 > 0"
    order = 8
    # Like ALiBi, the bias only falls with distance, so no head singles out offset −5 by position
    # alone: the model composes it over layers. The same settings as ALiBi's (6 narrow layers).
    training_defaults = {"model": {"n_layers": 6, "d_ff": 64}, "training": {"lr": 1e-2}}

    def __init__(self, config: SchemeConfig) -> None:
        super().__init__(config)
        self.raw_r1 = nn.Parameter(torch.full((config.n_heads,), _ONE))   # [H]
        self.raw_r2 = nn.Parameter(torch.full((config.n_heads,), _ONE))   # [H]

    @classmethod
    def num_parameters(cls, config: SchemeConfig) -> int:
        return 2 * config.n_heads

    def coefficients(self) -> tuple[torch.Tensor, torch.Tensor]:
        """(r1, r2), each [H], both > 0."""
        return F.softplus(self.raw_r1), F.softplus(self.raw_r2)

    def bias_per_offset(self, offsets: torch.Tensor) -> torch.Tensor:
        """−r1 · log(1 + r2 · |offset|) for offsets [n] -> [H, n]."""
        return kerple_bias(*self.coefficients(), offsets)

    def prepare(self, length: int, like: torch.Tensor) -> torch.Tensor:
        """The bias per offset [H, 2L − 1], once per forward: every layer shares r1 and r2."""
        return self.bias_per_offset(offset_range(length, device=like.device)).to(like.dtype)

    def attend(self, layer: int, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, *,
               shared: torch.Tensor | None = None, need_weights: bool = False) -> Attention:
        per_offset = self.prepare(q.shape[-2], q) if shared is None else shared
        return offset_bias_attention(q, k, v, per_offset, causal=self.config.causal, need_weights=need_weights,
                                     validate=False)

    def _per_offset(self, length: int) -> np.ndarray:
        with torch.no_grad():
            return detached(self.bias_per_offset(offset_range(length, device="cpu")))   # [H, 2L − 1]

    def structure(self, length: int) -> PositionStructure:
        r1, r2 = (detached(r) for r in self.coefficients())
        return PositionStructure(
            self.name, "KERPLE bias −r1 · log(1 + r2 · |j − i|)", "KERPLE bias",
            expand_offsets(self._per_offset(length), length), None, self.config.causal, True,
            facts={"r1": tuple(r1.tolist()), "r2": tuple(r2.tolist())})

    def parameter_views(self, *, length: int, train_length: int, layer: int) -> list[View]:
        offsets = self.offsets_shown(length)
        r1, r2 = (detached(r) for r in self.coefficients())
        return [kerple_curve(r1, r2, offsets, self._per_offset(length)[:, offsets + length - 1])]

    @classmethod
    def structure_text(cls, structure: PositionStructure) -> str:
        return ("A learned penalty per head that grows with the logarithm of the distance (r1 = "
                + numbers_text(structure.facts["r1"], 3) + "; r2 = " + numbers_text(structure.facts["r2"], 3)
                + "). Like ALiBi it only falls with distance, so no single offset can be singled out.")

    @classmethod
    def parameter_caption(cls, view: View) -> str:
        facts = view.facts
        return ("**KERPLE's learned curves.** Two numbers per head, shared by every layer: r1 scales the penalty, "
                "r2 sets how fast the logarithm bends. The penalty is concave in the distance: the step from 1 to "
                "2 keys back costs more than the step from 20 to 21. Steepest here: head "
                f"{facts['steepest_head'] + 1} (r1 = {facts['r1']:.3g}, r2 = {facts['r2']:.3g}), "
                f"{facts['farthest_bias']:.2f} at j − i = {facts['farthest_offset']}. The formula is defined at "
                "every distance, so longer inputs extend the curve; grey: distances never seen in training.")


def kerple_bias(r1: torch.Tensor, r2: torch.Tensor, offsets: torch.Tensor) -> torch.Tensor:
    """KERPLE's (log) bias −r1 · log(1 + r2 · |offset|): r1, r2 [H] (> 0), offsets [n] -> [H, n]."""
    distance = offsets.abs().to(r1.dtype)
    return -r1[:, None] * torch.log1p(r2[:, None] * distance[None, :])


def kerple_curve(r1: np.ndarray, r2: np.ndarray, offsets: np.ndarray, per_offset: np.ndarray) -> BiasCurve:
    """The learned curves as a view: ``per_offset`` [H, n] the bias at ``offsets`` [n] (the toy model's
    parameter view, and what relviz.mechanisms.kerple draws)."""
    steep = int(np.argmin(per_offset[:, 0]))            # the head with the lowest bias at the farthest offset
    return BiasCurve(
        "KERPLE: learned bias −r1 · log(1 + r2 · |j − i|) per head", "",
        offsets, per_offset.astype(np.float32), learned=True,
        head_labels=tuple(f"head {h + 1}: r1 {a:.3g}, r2 {b:.3g}" for h, (a, b) in enumerate(zip(r1, r2))),
        facts={"steepest_head": steep, "r1": float(r1[steep]), "r2": float(r2[steep]),
               "farthest_bias": float(per_offset[steep, 0]), "farthest_offset": int(offsets[0])})
