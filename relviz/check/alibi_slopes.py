"""ALiBi's slopes, and the ways code gets them wrong (Press et al. 2022; MPT's alibi_bias_max).

Shared by the alibi and alibi_slopes kinds of the checker (relviz.check.matrix_kinds): each function
computes one reading of "the slopes", the reference first. The rules themselves (Press et al.'s, MPT's,
the geometric one) are relviz.positions'; the wrong readings here are built from them.
"""
from __future__ import annotations

import functools

import numpy as np
import torch

from relviz.positions import (alibi_power_of_two, alibi_slopes, alibi_slopes_geometric, mpt_alibi_slopes,
                              press_slope_powers)

#: Most heads the ALiBi settings (and the settings search) consider.
MAX_HEADS = 256

def _slopes(num_heads: int, bias_max: float = 8.0) -> np.ndarray:
    """ALiBi's slopes as float64 (a copy of the cached ones: the settings search asks for them per head).

    ``bias_max`` is MPT's ``alibi_bias_max``: 2^(−bias_max·h/n) (8: Press et al.'s slopes)."""
    return _cached_slopes(num_heads, float(bias_max)).copy()


@functools.lru_cache(maxsize=MAX_HEADS)
def _cached_slopes(num_heads: int, bias_max: float) -> np.ndarray:
    if bias_max == 8.0:
        return alibi_slopes(num_heads, device="cpu").double().numpy()
    return mpt_alibi_slopes(num_heads, bias_max).double().numpy()


def _slopes_sorted(num_heads: int) -> np.ndarray:
    """The right n slopes, sorted steepest first (the every-other slopes of 2p interleaved, not after)."""
    return np.sort(_slopes(num_heads))[::-1].copy()


def _slopes_extra_first(num_heads: int) -> np.ndarray:
    """The right n slopes, the every-other slopes of 2p first and the nearest power of 2's after."""
    lower = alibi_power_of_two(num_heads)
    slopes = _slopes(num_heads)
    return np.concatenate([slopes[lower:], slopes[:lower]])


def _slopes_naive(num_heads: int) -> np.ndarray:
    """2^(−8h/n) for every n: the power-of-2 formula applied to any head count."""
    return alibi_slopes_geometric(num_heads, device="cpu").double().numpy()


def _slopes_truncated(num_heads: int) -> np.ndarray:
    """The first n slopes of the next power of 2."""
    power = 1 << max(0, (num_heads - 1).bit_length())
    return _slopes(power)[:num_heads]


def _slopes_from_0(num_heads: int) -> np.ndarray:
    """Each slope one power of its base too large: 2^(−8h/n) from h = 0 (head 0 gets slope 1); for a head
    count that is not a power of 2, the extra heads' base 2^(−4/p) likewise."""
    bases, _ = press_slope_powers(num_heads)
    return _slopes(num_heads) / np.asarray(bases)


def _power_of_2(n: int) -> bool:
    return alibi_power_of_two(n) == n



def _bf16(values: np.ndarray) -> np.ndarray:
    return torch.as_tensor(values, dtype=torch.float32).to(torch.bfloat16).double().numpy()


ALIBI_TWICE = "ALiBi bias added twice"
ALIBI_TWICE_TEXT = ("Your bias is twice ALiBi's: it is added in two places (e.g. once into the attention mask and "
                    "again in the scores, as transformers' Falcon eager attention does), so every head decays twice "
                    "as fast.")
BIAS_MAX_IGNORED = "alibi_bias_max ignored (8 used)"
BIAS_MAX_TEXT = ("Your slopes are Press et al.'s 2^(−8h/n) although the settings (MPT's config alibi_bias_max) say "
                 "2^(−max·h/n): the config's alibi_bias_max was not passed on (transformers' MptModel builds its "
                 "ALiBi without it).")
FROM_0 = "slopes' exponent counted from 0: head 0 gets slope 1"
FROM_0_TEXT = ("Your slopes are 2^(−8h/n) with h from 0, one power of the ratio too large: ALiBi's first head has "
               "slope 2^(−8/n) (1/2 for 8 heads), not 1, and the last 2^(−8), not 2^(−8 + 8/n).")
SORTED = "non-power-of-2 slopes in the wrong order: sorted by steepness"
SORTED_TEXT = ("Your slopes are the right values in the wrong order: sorted steepest first. For a head count that "
               "is not a power of 2, ALiBi gives the first p heads (p the nearest lower power of 2) their "
               "geometric sequence, and only then the every-other slopes of 2p, so head h's slope changes.")
EXTRA_FIRST = "non-power-of-2 slopes in the wrong order: the every-other slopes first"
EXTRA_FIRST_TEXT = ("Your slopes put the every-other slopes of the next power of 2 before the p slopes of the nearest "
                    "lower power of 2; ALiBi puts them after.")
