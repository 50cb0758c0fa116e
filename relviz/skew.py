"""The Music Transformer "skew" (Huang et al. 2018), step by step, and its references.

Relative attention needs S_rel[i, j] = q_i · e_(j − i): one learned vector per distance.
Gathering e_(j − i) for every (i, j) (Shaw et al.) builds an L × L × D tensor. The skew
instead multiplies Q by the L distance vectors once (Q E_rᵀ, L × L, column m = distance
m − (L − 1)) and then moves each entry to its (i, j) cell with a pad and a reshape: O(L²)
memory and no gather. This module holds:

- ``skew``: the causal trick (exact for j ≤ i; the upper triangle is garbage that the
  causal mask hides);
- ``skew_steps`` / ``skew_source_index``: every intermediate tensor, and where each of its
  cells came from, for the teaching page;
- ``skew_bidirectional``: the unmasked variant with 2L − 1 distances, exact everywhere;
- ``distance_table``: the L rows of a learned table E_r [M, D] that a length-L sequence uses;
- ``gather_relative``: the naive gather that the two tricks are proven and measured against;
- the skew in words: each step's title and caption, and what the checks against the gather say.

Sign convention: relative position = key index − query index (j − i).
"""
from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F

from relviz._checks import check_int, check_tensor, resolve_device

__all__ = [
    "SkewSteps",
    "SkewSource",
    "skew",
    "skew_variant",
    "skew_steps",
    "skew_source_index",
    "skew_bidirectional",
    "distance_table",
    "gather_relative",
    "StepWords",
    "causal_step_words",
    "bidirectional_step_words",
    "causal_check_words",
    "bidirectional_check_words",
]


def distance_table(e_r: torch.Tensor, length: int) -> torch.Tensor:
    """The rows of E_r [M, D] (row m is distance m − (M − 1)) for distances −(L − 1)..0: [L, D].

    M ≥ L: the last L rows. M < L: distances beyond the table use its farthest row e_r[0]
    (the table is padded at the front by repeating it; tensor2tensor zero-pads instead).
    """
    rows, dim = e_r.shape
    if rows >= length:
        return e_r[rows - length:]
    return torch.cat([e_r[:1].expand(length - rows, dim), e_r])      # far distances -> e_r[0]


@dataclass(frozen=True)
class SkewSteps:
    """The three intermediate tensors of the skew, plus where the result is exact.

    padded:   [..., L, L+1]  one zero column on the left of qer
    reshaped: [..., L+1, L]  the same memory read with rows of length L
    skewed:   [..., L, L]    reshaped without its first row (== skew(qer))
    valid:    bool [L, L], broadcastable to skewed; True exactly where j ≤ i
    """

    padded: torch.Tensor
    reshaped: torch.Tensor
    skewed: torch.Tensor
    valid: torch.Tensor


@dataclass(frozen=True)
class SkewSource:
    """For every cell of every skew step: the qer cell it holds, or −1 for the pad.

    ``row.padded[r, c]`` and ``col.padded[r, c]`` give the (row, col) of qer held by cell
    (r, c) of the padded step, and likewise for ``reshaped`` and ``skewed``; both are −1
    where the cell holds the zero pad. ``row.valid`` / ``col.valid`` are the j ≤ i mask.
    """

    row: SkewSteps
    col: SkewSteps


def _check_square(qer: object) -> tuple[torch.Tensor, int]:
    qer = check_tensor("qer", qer, min_ndim=2, floating=True)
    rows, cols = qer.shape[-2], qer.shape[-1]
    if rows != cols or rows < 1:
        raise ValueError(
            f"qer must have shape [..., L, L] with L >= 1 (rows: queries, columns: distances "
            f"-(L-1)..0); got shape {tuple(qer.shape)}")
    return qer, rows


def _steps(x: torch.Tensor, pad_value: float = 0.0, *, pad_right: bool = False,
           drop_last: bool = False) -> SkewSteps:
    """The skew on an already-validated [..., L, L] tensor (any dtype: also used on indices). The skew pads
    on the left and drops the first row; ``pad_right`` / ``drop_last`` are the other choices (skew_variant)."""
    length = x.shape[-1]
    batch = tuple(x.shape[:-2])
    padded = F.pad(x, (0, 1) if pad_right else (1, 0), value=pad_value)   # [..., L, L+1]
    reshaped = padded.reshape(batch + (length + 1, length))              # same memory, rows of L
    skewed = reshaped[..., :-1, :] if drop_last else reshaped[..., 1:, :]  # drop the first row
    valid = torch.ones(length, length, dtype=torch.bool, device=x.device).tril()
    return SkewSteps(padded=padded, reshaped=reshaped, skewed=skewed, valid=valid)


def skew(qer: torch.Tensor) -> torch.Tensor:
    """Music Transformer skew: [..., L, L] -> [..., L, L], with no L × L × D tensor.

    qer = Q E_rᵀ, column m standing for distance m − (L − 1). Returns S_rel with
    S_rel[..., i, j] = qer[..., i, j − i + L − 1] for j ≤ i (exact). Above the diagonal the
    values are garbage that a causal mask must hide: S_rel[i, i+1] = 0 (the pad) and
    S_rel[i, j] = qer[i+1, j − i − 2] for j ≥ i + 2. Differentiable; runs on qer's device.
    """
    qer, _ = _check_square(qer)
    return _steps(qer).skewed


def skew_variant(qer: torch.Tensor, *, pad_right: bool = False, drop_last: bool = False) -> torch.Tensor:
    """The skew with its two choices as parameters: the side of the zero column and the row dropped after
    the reshape. The Music Transformer pads on the left and drops the first row (:func:`skew`); the
    checker's named mistakes (relviz.check) are the other three."""
    qer, _ = _check_square(qer)
    return _steps(qer, pad_right=pad_right, drop_last=drop_last).skewed


def skew_steps(qer: torch.Tensor) -> SkewSteps:
    """Every intermediate tensor of ``skew(qer)``, so a page can show the trick step by step."""
    qer, _ = _check_square(qer)
    return _steps(qer)


#: skew_source_index holds about 64·L² bytes (int64 coordinates through every step): 1 GB at 4096.
#: It exists to explain the trick cell by cell, which no one does beyond a few hundred.
MAX_SOURCE_LENGTH = 4096

#: Index dtypes gather_relative accepts: the ones torch can index with after .long() and
#: reduce with min/max (torch has no min/max for uint16/32/64 on every device).
INDEX_DTYPES = (torch.int8, torch.int16, torch.int32, torch.int64, torch.uint8)


def skew_source_index(length: int, *, device: torch.device | str | None = None) -> SkewSource:
    """Which qer cell (row, col) each cell of each skew step holds; −1 marks the pad.

    Computed by running the very same pad/reshape/slice on a tensor of (row, col)
    coordinates, so the answer is true by construction rather than re-derived by hand.
    """
    length = check_int("length", length, minimum=1, maximum=MAX_SOURCE_LENGTH)
    dev = resolve_device(device)
    coords = torch.stack(torch.meshgrid(
        torch.arange(length, device=dev), torch.arange(length, device=dev), indexing="ij"))
    steps = _steps(coords, pad_value=-1)                     # leading dim 2: (row, col)

    def pick(k: int) -> SkewSteps:
        return SkewSteps(padded=steps.padded[k], reshaped=steps.reshaped[k],
                         skewed=steps.skewed[k], valid=steps.valid)

    return SkewSource(row=pick(0), col=pick(1))


def skew_bidirectional(qer: torch.Tensor) -> torch.Tensor:
    """Unmasked skew: [..., L, 2L−1] -> [..., L, L], exact everywhere.

    qer = Q E_rᵀ over 2L − 1 distances, column m standing for distance m − (L − 1).
    Returns out[..., i, j] = qer[..., i, j − i + L − 1] for every i, j.

    Why it works: in the row-major flattening of qer, cell (i, j − i + L − 1) sits at
    i·(2L − 2) + (L − 1) + j. So dropping the first L − 1 flat entries and reading rows of
    length 2L − 2 puts it at row i, column j; the first L columns are the answer. Only
    reshapes and slices (a copy at most of qer itself), so it stays O(L²) and differentiable.
    """
    qer = check_tensor("qer", qer, min_ndim=2, floating=True)
    length, width = qer.shape[-2], qer.shape[-1]
    if length < 1 or width != 2 * length - 1:
        raise ValueError(
            f"qer must have shape [..., L, 2L-1] with L >= 1 (columns: distances "
            f"-(L-1)..+(L-1)); got shape {tuple(qer.shape)}")
    if length == 1:
        return qer[..., :1]  # one query, one key, one distance (0): already in place
    batch = tuple(qer.shape[:-2])
    flat = qer.reshape(batch + (length * width,))
    stride = 2 * length - 2
    window = flat[..., length - 1: length - 1 + length * stride]
    return window.reshape(batch + (length, stride))[..., :length]


def gather_relative(q: torch.Tensor, table: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
    """Naive reference: out[..., i, j] = q[..., i, :] · table[index[i, j], :].

    This deliberately materialises the gathered L × L × D tensor table[index] (Shaw et
    al.'s way): it is the obviously-correct baseline that ``skew`` and
    ``skew_bidirectional`` are tested and benchmarked against, not something to use at
    scale. q: [..., Lq, D]; table: [M, D]; index: integer [Lq, Lk] with values in 0..M−1.
    """
    q = check_tensor("q", q, min_ndim=2, floating=True)
    table = check_tensor("table", table, ndim=2, floating=True)
    index = check_tensor("index", index, ndim=2)
    if index.dtype not in INDEX_DTYPES:
        allowed = ", ".join(str(d).removeprefix("torch.") for d in INDEX_DTYPES)
        raise ValueError(f"index must be an integer tensor of dtype {allowed}; got dtype {index.dtype}")
    if table.shape[1] != q.shape[-1]:
        raise ValueError(
            f"table must have shape [M, D] with D equal to q's last dimension ({q.shape[-1]}); "
            f"got shape {tuple(table.shape)}")
    if table.shape[0] < 1:
        raise ValueError(f"table must have at least one row; got shape {tuple(table.shape)}")
    if index.shape[0] != q.shape[-2]:
        raise ValueError(
            f"index must have shape [Lq, Lk] with Lq equal to q's query length ({q.shape[-2]}); "
            f"got shape {tuple(index.shape)}")
    if table.dtype != q.dtype:
        raise ValueError(f"table must have the same dtype as q ({q.dtype}); got {table.dtype}")
    for name, tensor in (("table", table), ("index", index)):
        if tensor.device != q.device:
            raise ValueError(f"{name} must be on q's device ({q.device}); got {tensor.device}")
    if index.numel() > 0:
        low, high = int(index.min()), int(index.max())
        if low < 0 or high >= table.shape[0]:
            raise ValueError(
                f"index values must be from 0 to {table.shape[0] - 1} (rows of table); "
                f"got values from {low} to {high}")
    gathered = table[index.long()]                           # [Lq, Lk, D]: the L²·D cost
    return torch.einsum("...id,ijd->...ij", q, gathered)


# ---------------------------------------------------------------------------------------
# The skew in words: what the Skew page (and a notebook) says about each step


@dataclass(frozen=True)
class StepWords:
    """One step's title (at most 26 characters, so three fit a row of a 1024 px page, each on one line) and
    its caption."""

    title: str
    caption: str


def causal_step_words(length: int) -> dict[str, StepWords]:
    """The causal skew's five steps for length L, keyed like their cells: qer, padded, reshaped, skewed, masked."""
    last = check_int("length", length, minimum=1) - 1
    return {
        "qer": StepWords(
            "1 · Q E_rᵀ by distance",
            f"Row i: query i against every distance vector. Column m stands for distance m − {last}: the last "
            f"column is distance 0 (the query itself), the first is −{last}. A causal model only needs these L "
            "distances."),
        "padded": StepWords(
            "2 · Pad a zero column",
            "L × (L + 1): each row gets a zero in front (grey) and its scores shift one column right. Nothing is "
            "computed, only memory is laid out."),
        "reshaped": StepWords(
            "3 · Reshape to (L + 1) × L",
            "The same numbers in the same memory order, read in rows of L instead of L + 1. So row r starts r "
            "cells earlier in memory: it holds the last r scores of query r − 1, then query r's pad, then the "
            "first scores of query r. Each row slides one more cell: that is the skew."),
        "skewed": StepWords(
            "4 · Drop row 0 → S_rel",
            "Row i now starts with query i's last i + 1 scores, distances −i … 0: key j sits exactly at distance "
            "j − i (labels on each diagonal agree). Then the pad (j = i + 1) and, hatched, scores of query i + 1 "
            "for the wrong distances: garbage."),
        "masked": StepWords(
            "5 · Mask out j > i",
            "A decoder adds −∞ above the diagonal anyway (a token must not see the future), which removes the "
            "pad and the garbage. What remains is q_i · e(j − i) for every key j ≤ i."),
    }


def bidirectional_step_words(length: int) -> dict[str, StepWords]:
    """The bidirectional skew's three steps for length L, keyed like their cells: qer, window, result."""
    length = check_int("length", length, minimum=1)
    last = length - 1
    return {
        "qer": StepWords(
            "1 · Q E_allᵀ: 2L − 1 distances",
            f"An encoder's key can lie on either side of the query, so the table holds one vector per distance "
            f"−{last} … +{last}. Column m stands for distance m − {last}."),
        "window": StepWords(
            "2 · Flatten, skip L − 1 numbers, read rows of 2L − 2",
            f"In memory, query i's score for distance −i (key 0) sits at i·(2L − 2) + {last} … so after "
            f"dropping the first {last} numbers, rows of 2L − 2 = {2 * length - 2} start exactly there. The faded "
            "columns (≥ L) are cut off next."),
        "result": StepWords(
            "3 · Keep the first L columns → S_rel",
            "Every cell holds q_i · e(j − i), above the diagonal too: exact everywhere, no mask needed. Its lower "
            "triangle equals the causal skew's (both tabs share E_r for distances ≤ 0)."),
    }


#: Why relative attention needs the skew at all.
WHY_THE_SKEW = (
    "Relative attention needs, for every query i and key j, the score **q_i · e(j − i)**: the query against the "
    "learned vector of their distance. Shaw et al. gather an e(j − i) for every (i, j): an L × L × D tensor. The "
    "Music Transformer (Huang et al. 2018) computes **Q E_rᵀ** once, one score per query and *distance*, then "
    "moves every score to its (i, j) cell with a pad, a reshape and a slice: no gather, only L × D extra memory. "
    "Every cell is labelled with the distance its score stands for.")

#: What the naive gather the skew is checked against is.
NAIVE_GATHER = (
    "The naive gather (relviz.skew.gather_relative) builds e(j − i) for every cell and takes q_i · e(j − i): "
    "Shaw et al.'s way. The skew moves scores, it does not compute new ones; the difference is float32 rounding "
    "of two summation orders.")

#: Why the causal skew must not run in an encoder.
NOT_IN_AN_ENCODER = (
    "**Do not use this skew in a bidirectional encoder.** Without a causal mask the garbage reaches the softmax: "
    "every key after the query gets another query's score for a wrong distance. Transformer-XL's `_rel_shift` is "
    "the same trick (pad, view, drop a row) and has the same garbage above the diagonal; reusing it in a "
    "non-causal model is a known bug in several codebases. An encoder needs the **2L − 1 distances** of the next "
    "tab.")

#: What the bidirectional skew costs.
BIDIRECTIONAL_PRICE = (
    "Same idea as the causal skew: only reshapes and slices, no L × L × D tensor (tensor2tensor's "
    "dot_product_unmasked_self_attention_relative_v2). The price is a table of 2L − 1 distances instead of L.")

#: What the causal skew does in an encoder, beside the picture of its error.
UNMASKED_ERROR = (
    "The causal skew of the first tab, fed to an encoder without its mask: every cell above the diagonal holds "
    "another query's score for a wrong distance (the pad and the garbage), and the softmax uses it. Below the "
    "diagonal the error is 0. Transformer-XL's _rel_shift has the same upper triangle; several codebases reuse "
    "it in encoders.")


def _difference(x: float) -> str:
    return f"{x:.1e}" if x else "0"


def causal_check_words(lower: float, upper: float) -> tuple[str, str]:
    """The causal skew against the naive gather: below the diagonal (``lower``, max |difference|) and above it
    (``upper``, the garbage)."""
    return (f"skew equals the naive gather on the lower triangle (j ≤ i): max |difference| = {_difference(lower)}",
            f"Above the diagonal the skew differs from the true q_i · e(j − i) by up to {upper:.3g}: those cells "
            "are garbage.")


def bidirectional_check_words(everywhere: float, causal_upper: float) -> tuple[str, str]:
    """The bidirectional skew against the naive gather (``everywhere``), and what the causal one would be off by."""
    return (f"bidirectional skew equals the naive gather everywhere: max |difference| = {_difference(everywhere)}",
            f"The causal skew used here instead would be wrong above the diagonal by up to {causal_upper:.3g}.")
