"""Fit, then explain, for the position kinds that are not a function of j − i: ALiBi's slope vector and the
skew's output (relviz.check.search covers the Toeplitz kinds, one value per offset).

Each kind lists independent differences (a ``Choice``: a slope rule, a head count and the shard's place in it,
the order, a factor; the skew's pad side, dropped row, E_r's order, a transpose, a constant offset); a
hypothesis composes some of them and builds the whole array. The hypotheses with the fewest differences that
reproduce every compared cell are the cause; otherwise the closest partial one, which says it is partial.
"""
from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from itertools import product
from typing import TYPE_CHECKING

import numpy as np
import torch

from relviz._words import article, minus
from relviz.check.alibi_slopes import MAX_HEADS
from relviz.check.matrix_spaces import ALIBI_RULES, _rule_slopes
from relviz.check.result import Cause, CheckResult, equal, partial_cause, partial_worth_showing, reproduction
from relviz.skew import skew_variant

if TYPE_CHECKING:
    from relviz.check.matrix import Settings


@dataclass(frozen=True)
class Choice:
    """One difference from the reference: a short phrase and why code ends up with it."""

    phrase: str
    text: str
    harmless: bool = False


Hypothesis = tuple[tuple[Choice, ...], np.ndarray]   # (the differences, the array they give)

# ---------------------------------------------------------------------------------------
# ALiBi's slopes: rule × head count and slice × bias max × order × factor

SLOPE_FACTORS = {2.0: Choice("slopes doubled", "Every slope is twice ALiBi's (the bias is added twice, or a "
                                               "factor of 2 in the exponent's base)."),
                 -1.0: Choice("slopes negated", "Every slope has the other sign: the bias is subtracted where it "
                                                "is added (or added where the code subtracts slope · distance).")}
REVERSED = Choice("heads in reverse order", "Your slopes run from the flattest to the steepest; ALiBi's head 0 "
                                            "has the steepest slope.")


def _slice_choice(total: int, start: int, n: int) -> Choice:
    return Choice(f"slopes of heads {start}–{start + n - 1} of {total}",
                  f"Your {n} slopes are heads {start} … {start + n - 1} of the {total}-head rule. On a tensor-parallel "
                  f"shard of {article(total)} {total}-head model that holds those heads this is right; for a model of {n} heads the "
                  f"slopes were computed for {total} heads (the global count where the local one belongs, or the "
                  "reverse) or sliced at the wrong shard's offset.")


def _bias_maxes(got: np.ndarray, given: "Settings") -> list[float]:
    """alibi_bias_max values worth trying: the given, Press et al.'s 8, and the one the first slope implies
    (2^(−max/n) for n a power of 2), rounded."""
    out = [float(given.alibi_bias_max), 8.0]
    if got.size and got[0] > 0:
        read = -math.log2(float(got[0])) * got.size
        out += [float(f"{read:.3g}"), float(round(read))]
    return [b for b in dict.fromkeys(out) if 0 < b <= 1e3]


def slope_hypotheses(got: np.ndarray, given: "Settings") -> Iterator[Hypothesis]:
    """Slope vectors from every rule, at every head count whose slopes hold the upload (scaled back by a factor,
    in either order) as a contiguous slice."""
    n = got.size
    flat = got.reshape(-1).astype(np.float64)
    for factor, rule in product((1.0, *SLOPE_FACTORS), range(len(ALIBI_RULES))):
        name, text, _, harmless = ALIBI_RULES[rule]
        values = flat / factor
        if not np.all(values > 0):
            continue
        factor_choice = (SLOPE_FACTORS[factor],) if factor != 1.0 else ()
        for bias_max in (_bias_maxes(values, given) if rule == 0 else [8.0]):
            fixed = ((Choice(name, text, harmless),) if name else ()) + (
                (Choice(f"alibi_bias_max = {bias_max:g}, not {given.alibi_bias_max:g}", "MPT's alibi_bias_max was "
                        "not passed on (or another one was)."),) if bias_max != given.alibi_bias_max else ())
            for total in range(n, MAX_HEADS + 1):
                slopes = _rule_slopes(rule, total, bias_max)
                if slopes is None:
                    continue
                for order, ordered in ((None, values), (REVERSED, values[::-1])):
                    for start in np.flatnonzero(np.isclose(slopes[:total - n + 1], ordered[0], rtol=1e-6, atol=0)):
                        built = slopes[start:start + n]
                        where = (_slice_choice(total, int(start), n),) if total != n else ()
                        choices = fixed + where + ((order,) if order else ()) + factor_choice
                        yield choices, factor * (built[::-1] if order else built).reshape(got.shape)


# ---------------------------------------------------------------------------------------
# The skew: pad side × dropped row × E_r's order × transpose, and a constant offset of the input


SKEW_CHOICES = (
    Choice("pad on the right", "The zero column is padded on the right of QE_rᵀ; the Music Transformer pads on the "
                               "left, then reshapes and drops the first row."),
    Choice("dropped the last row", "The last row of the reshaped (L + 1) × L tensor is dropped; the Music "
                                   "Transformer drops the first."),
    Choice("E_r in the opposite order", "E_r's column m stands for distance −m; the skew needs column m to stand "
                                        "for distance m − (L − 1) (farthest first, distance 0 last)."),
    Choice("transposed", "The output is transposed: queries along the columns."),
)


def _skew(length: int, pad_right: bool, drop_last: bool, flip: bool, transpose: bool) -> np.ndarray:
    qer = torch.arange(length * length, dtype=torch.float64).reshape(length, length)            # [L, L]
    qer = qer.flip(-1) if flip else qer
    out = skew_variant(qer, pad_right=pad_right, drop_last=drop_last).numpy()                   # [L, L]
    return out.T.copy() if transpose else out


def skew_hypotheses(got: np.ndarray, given: "Settings") -> Iterator[Hypothesis]:
    length = got.shape[0]
    for flags in sorted(product((False, True), repeat=4), key=sum):
        choices = tuple(c for c, on in zip(SKEW_CHOICES, flags) if on)
        built = _skew(length, *flags)
        yield choices, built
        shift = float(got[-1, 0] - built[-1, 0])   # row L − 1, column 0: compared under any mask
        if shift and shift == round(shift):
            by = minus(shift, "+g")
            yield choices + (Choice(f"values off by {by}", f"Every value is {by} from the skew's: "
                                    "the input (or an index into it) is shifted."),), built + shift


SPACES: dict[str, Callable[[np.ndarray, "Settings"], Iterator[Hypothesis]]] = {
    "alibi_slopes": slope_hypotheses, "skew": skew_hypotheses}


def explain_whole(result: CheckResult, given: "Settings | None", description: str) -> CheckResult | None:
    """The cause from the kind's hypotheses (None: the kind has none here): the fewest differences that reproduce
    every compared cell, else the closest partial fit kept when it is worth showing."""
    hypotheses = SPACES.get(result.kind)
    if hypotheses is None or result.ok or result.causes:
        return None
    got = np.asarray(result.got, dtype=np.float64)
    compared = np.broadcast_to(result.compared, got.shape)
    base = given if given is not None else result.settings
    exact: list[Hypothesis] = []
    partial: tuple[float, tuple[Choice, ...]] | None = None
    cells = max(1, int(compared.sum()))
    for choices, built in hypotheses(got, base):
        if built.shape != got.shape or not choices:
            continue
        agree = equal(built, got) | ~compared
        if agree.all():
            exact.append((choices, built))
        else:
            share = float((agree & compared).sum()) / cells
            if partial is None or share > partial[0]:
                partial = (share, choices)
    if exact:
        fewest = min(len(c) for c, _ in exact)
        causes = []
        for choices, built in ((c, b) for c, b in exact if len(c) == fewest):
            name = " + ".join(c.phrase for c in choices)
            if name not in [c.name for c in causes]:
                text = (f"Your {description} is relviz's with " + "; ".join(c.phrase for c in choices)
                        + ": that reproduces every compared cell. " + " ".join(c.text for c in choices))
                causes.append(Cause(name, text, all(c.harmless for c in choices), 1.0,
                                    reproduction(lambda built=built: built, result.got)))
        return replace(result, causes=tuple(causes[:8]), closest=None)
    if partial is not None:
        share, choices = partial
        reference_share = 1.0 - result.mismatches / max(1, result.cells)
        if partial_worth_showing(share, reference_share) and (result.closest is None
                                                              or share > result.closest.explains):
            return replace(result, closest=partial_cause(" + ".join(c.phrase for c in choices),
                                                         " ".join(c.text for c in choices),
                                                         all(c.harmless for c in choices), share))
    return None
