"""What the RoPE page shows, as data: one head's scores for fixed random content (checked against
brute-force rotation) and its long-term decay curves.

Its own module because these are views built on :mod:`relviz.rope.math` for one page and
``relviz.show``, not RoPE's maths itself.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from relviz._checks import check_int, check_tensor
from relviz.positions import expand_toeplitz
from relviz.rope.config import MAX_HEAD_DIM, MAX_POSITIONS, RopeConfig
from relviz.rope.math import decay_bound, measured_decay, rope_parameters, rotate, score_matrix, unscaled


# ---------------------------------------------------------------------------------------
# What the RoPE page shows: one head's scores for fixed content, and its decay curves

MAX_WINDOW = 1024
MAX_DECAY_POINTS = 4096


def random_content(head_dim: int, *, same: bool = True, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """(q [head_dim], k [head_dim]) random unit vectors (float64, CPU), so the unrotated score is their cosine.

    ``same``: k = q, the same content at the query and the key.
    """
    head_dim = check_int("head_dim", head_dim, minimum=2, maximum=MAX_HEAD_DIM)
    generator = torch.Generator().manual_seed(check_int("seed", seed, minimum=0, maximum=2**31 - 1))
    q = torch.randn(head_dim, dtype=torch.float64, generator=generator)                 # [D]
    k = q.clone() if same else torch.randn(head_dim, dtype=torch.float64, generator=generator)
    return q / q.norm(), k / k.norm()


def rotated_scores(q: torch.Tensor, k: torch.Tensor, inv_freq: torch.Tensor, window: int, *,
                   attention_scaling: float = 1.0) -> torch.Tensor:
    """[W, W] the brute-force score matrix: q and k rotated at every position 0 … W − 1, then multiplied.

    This is how a model computes it (float32 cos and sin, as in transformers); ``score_matrix`` gets the
    same numbers per offset.
    """
    window = check_int("window", window, minimum=1, maximum=MAX_WINDOW)
    q = check_tensor("q", q, ndim=1, floating=True)
    k = check_tensor("k", k, ndim=1, floating=True)
    positions = torch.arange(window)                                                              # [W]
    rq = rotate(q.expand(window, -1).clone(), positions, inv_freq, attention_scaling=attention_scaling)  # [W, D]
    rk = rotate(k.expand(window, -1).clone(), positions, inv_freq, attention_scaling=attention_scaling)  # [W, D]
    return rq @ rk.T                                                                              # [W, W]


@dataclass(frozen=True)
class ContentScores:
    """One head's scores for fixed content q, k at every position: a Toeplitz matrix, checked live.

    ``per_offset`` [2W − 1] holds entry (i, j) at index j − i + W − 1; ``spreads`` [W] holds, at n − 1,
    the largest |brute force − per offset| over the top-left n × n block (float32 rotation against
    float64 per offset), so ``head`` gives any smaller window with its own check, computed once.
    """

    per_offset: torch.Tensor
    spreads: torch.Tensor
    attention_scaling: float

    @property
    def window(self) -> int:
        return (self.per_offset.shape[0] + 1) // 2

    @property
    def spread(self) -> float:
        """The largest |brute force − per offset| over the whole W × W matrix."""
        return float(self.spreads[-1])

    def matrix(self) -> torch.Tensor:
        """[W, W] the score matrix, expanded from the per-offset scores."""
        return expand_toeplitz(self.per_offset, self.window, self.window)

    def head(self, window: int) -> ContentScores:
        """The scores at positions 0 … window − 1: the top-left window × window block. It is what
        ``content_scores`` gives for that window (to float64 rounding): a position's rotation does not
        depend on how many positions are shown."""
        window = check_int("window", window, minimum=1, maximum=self.window)
        middle = self.window - 1
        return ContentScores(self.per_offset[middle - (window - 1):middle + window], self.spreads[:window],
                             self.attention_scaling)


def content_scores(config: RopeConfig, length: int, window: int, *, same: bool = True,
                   seed: int = 0) -> ContentScores:
    """The window × window score matrix of random unit q, k (``random_content``) under ``config``
    run at ``length`` positions, computed per offset and checked against brute-force rotation."""
    if not isinstance(config, RopeConfig):
        raise ValueError(f"config must be a RopeConfig; got {type(config).__name__}")
    window = check_int("window", window, minimum=1, maximum=MAX_WINDOW)
    inv_freq, scaling = rope_parameters(config, length, device="cpu")
    q, k = random_content(config.head_dim, same=same, seed=seed)
    _, per_offset = score_matrix(q, k, inv_freq, window, attention_scaling=scaling)              # [2W − 1]
    brute = rotated_scores(q, k, inv_freq, window, attention_scaling=scaling)                     # [W, W]
    gap = (brute - expand_toeplitz(per_offset, window, window)).abs()                             # [W, W]
    # block n × n = block (n − 1)² + row n − 1 up to its diagonal + column n − 1 down to it
    edge = torch.maximum(gap.tril().amax(dim=1), gap.triu().amax(dim=0))                          # [W]
    return ContentScores(per_offset, edge.cummax(dim=0).values, scaling)


def decay_distances(length: int, points: int = 600) -> torch.Tensor:
    """[R] int64 distances 1 … length − 1 (a log axis has no 0): every one up to 64, then ``points`` log-spaced."""
    length = check_int("length", length, minimum=1, maximum=MAX_POSITIONS)
    points = check_int("points", points, minimum=2, maximum=MAX_DECAY_POINTS)
    dense = torch.arange(1, min(max(length, 2), 65), dtype=torch.int64)                       # [≤ 64]
    if length <= 65:
        return dense
    sparse = torch.logspace(math.log10(65), math.log10(length - 1), points, dtype=torch.float64)
    return torch.cat([dense, sparse.round().to(torch.int64).unique()])                          # sorted


@dataclass(frozen=True)
class DecayCurves:
    """RoPE's long-term decay at ``distances`` [R], each curve [R] relative to its value at distance 0.

    ``bound``: RoFormer's relative bound / (P + 1)/2 (its value at 0); ``bound_unscaled``: the same
    for the unscaled θ (None without a scaling rule); ``identical``: mean score for q = k;
    ``independent``: mean |score| for independent q, k.
    """

    distances: torch.Tensor
    bound: torch.Tensor
    bound_unscaled: torch.Tensor | None
    identical: torch.Tensor
    independent: torch.Tensor


def decay_curves(config: RopeConfig, length: int, *, points: int = 600) -> DecayCurves:
    """The decay of ``config`` run at ``length`` positions, at ``decay_distances(length, points)``."""
    if not isinstance(config, RopeConfig):
        raise ValueError(f"config must be a RopeConfig; got {type(config).__name__}")
    distances = decay_distances(length, points)                                                   # [R]
    inv_freq, _ = rope_parameters(config, length, device="cpu")                                  # [P]
    top = (inv_freq.shape[0] + 1) / 2   # the bound at distance 0: mean of |S_j| = j over j = 1..P
    plain = None
    if config.scaling.scales:
        plain = decay_bound(rope_parameters(unscaled(config), device="cpu")[0], distances) / top
    return DecayCurves(distances, decay_bound(inv_freq, distances) / top, plain,
                       measured_decay(inv_freq, distances, identical=True), measured_decay(inv_freq, distances))


# ---------------------------------------------------------------------------------------
# The RoPE page's words beside these views

#: What rotary position embedding does, and why it is relative.
WHAT_ROPE_DOES = (
    "**Rotary position embedding** (Su et al., RoFormer) rotates every pair of dimensions of q and k by an angle "
    "proportional to the position: pair i at position m turns by m·θ_i, with θ_i = base^(−2i/d). Rotating both and "
    "taking the dot product leaves only the *difference* of the angles, so q_m · k_n depends on n − m alone. Nearly "
    "every current LLM uses it, and stretches it past its training length with a **scaling rule**. Every number "
    "here is computed the way Hugging Face transformers computes it.")

#: What the wavelengths say: fast pairs for local position, slow ones for long range, and what scaling fixes.
WAVELENGTH_WORDS = (
    "Pair i rotates by m·θ_i at position m, a full turn every 2π/θ_i positions. Early pairs turn many times (fine, "
    "local position); the last pairs sweep only a fraction of the circle over the whole context (coarse, "
    "long-range). A pair that never completed a turn in training meets angles it has never seen once the context "
    "grows: that is what the scaling rules fix.")

#: In place of the ratio chart, for plain RoPE.
NO_RULE_WORDS = ("**No scaling rule.** Pick one (custom) or a scaled model to see what it does to each pair's "
                 "frequency.")

#: How to read the ratio chart θ_scaled / θ.
RATIO_WORDS = ("θ_scaled / θ per pair at this length: 1 = kept (extrapolated), 1/factor = interpolated (positions "
               "squeezed into the trained range).")

#: Why the content scores are constant along each diagonal.
SCORE_MATRIX_WORDS = (
    "Every query position carries the same unit vector q, every key position the same k; only the rotation "
    "differs. The score (R_i q)·(R_j k) is then Σ_pairs A·cos((j − i)θ) + B·sin((j − i)θ): **constant along each "
    "diagonal**. relviz computes it once per offset (2W − 1 values for W positions shown) and expands.")


def checked_words(spread: float) -> str:
    """The content scores against brute-force rotation (ContentScores.spread: the largest difference)."""
    return (f"Checked: rotating q and k at every position and multiplying gives the same matrix up to {spread:.1e} "
            "(float32 cos/sin, as in transformers).")


def decay_words(curves: DecayCurves) -> str:
    """The caption of the decay chart: RoFormer's bound, the measured means, and what a rule changes (where the
    curves hold the unscaled bound beside the scaled one)."""
    return ("RoFormer §3.4.3 bounds |q·k| by max|h_{k+1} − h_k| · (1/P)·Σ_j |S_j|, S_j = Σ_{k<j} e^{i(j−i)θ_k}; the "
            "blue curve is that relative bound divided by its value at distance 0, (P + 1)/2: it falls (with "
            "ripples) as the distance grows. For q = k the mean score starts at 1 and dephases; for independent "
            "q, k the mean |score| stays flat — the decay is about *aligned* content."
            + (" Scaling slows the pairs it touches, so the bound decays later wherever those pairs matter "
               "(compare the dotted, unscaled curve; rules that keep the fast pairs barely change short distances)."
               if curves.bound_unscaled is not None else "")
            + f" Drawn at {len(curves.distances)} distances: every one up to 64, then log-spaced.")
