"""Functional relative attention: Shaw et al. (K and V tables), T5 buckets, Music Transformer
skew, ALiBi.

Every function takes q, k, v of shape [B, H, L, D] (same shape, dtype and device) and returns
``(output [B, H, L, D], weights [B, H, L, L])``. ``scale`` defaults to 1/sqrt(D). With
``causal=True`` key j is hidden from query i whenever j > i: its logit is set to −inf before
the softmax (a row always keeps j = i, so it is never fully masked). Every row of the
weights sums to 1. All computation stays on the inputs' device and is differentiable.

Memory: no function here builds an L × L × D tensor. The relative terms are computed per
relative index (at most 2·clip + 1 or L of them) and then moved to their (i, j) cells with
an [L, L] index (Shaw), a bias lookup (T5, ALiBi) or the skew (Music Transformer). The
naive gather that does build L × L × D lives in :func:`relviz.skew.gather_relative` and is
used only by tests and the benchmark.

Sign convention: relative position = key index − query index (j − i).
"""
from __future__ import annotations

import math
import numbers

import torch

from relviz._checks import check_bool, check_int, check_tensor
from relviz.positions import MAX_ABS_OFFSET, alibi_bias, shaw_clip_index, t5_bucket_map, t5_config
from relviz.skew import skew

__all__ = ["shaw_attention", "t5_attention", "skew_attention", "alibi_attention"]


# ---------------------------------------------------------------------------------------
# Shared checks and the softmax step


def _check_qkv(q: object, k: object, v: object) -> tuple[int, int, int, int]:
    """q, k, v must be floating tensors of one shape [B, H, L, D], one dtype, one device."""
    q = check_tensor("q", q, ndim=4, floating=True)
    for name, t in (("k", k), ("v", v)):
        t = check_tensor(name, t, ndim=4, floating=True)
        if t.shape != q.shape:
            raise ValueError(
                f"{name} must have the same shape as q [B, H, L, D] = {tuple(q.shape)}; "
                f"got {tuple(t.shape)}")
        if t.dtype != q.dtype:
            raise ValueError(f"{name} must have the same dtype as q ({q.dtype}); got {t.dtype}")
        if t.device != q.device:
            raise ValueError(f"{name} must be on q's device ({q.device}); got {t.device}")
    if min(q.shape) < 1:
        raise ValueError(f"q, k and v must have every dimension >= 1 [B, H, L, D]; got {tuple(q.shape)}")
    batch, heads, length, dim = q.shape
    return batch, heads, length, dim


def _check_table(name: str, table: object, q: torch.Tensor, rows: int, cols: int,
                 what: str) -> torch.Tensor:
    """A learned table of exactly [rows, cols], with q's dtype and device."""
    table = check_tensor(name, table, ndim=2, floating=True)
    if tuple(table.shape) != (rows, cols):
        raise ValueError(f"{name} must have shape [{what}] = [{rows}, {cols}]; got {tuple(table.shape)}")
    if table.dtype != q.dtype:
        raise ValueError(f"{name} must have the same dtype as q ({q.dtype}); got {table.dtype}")
    if table.device != q.device:
        raise ValueError(f"{name} must be on q's device ({q.device}); got {table.device}")
    return table


def _scale(scale: object, dim: int) -> float:
    """None means 1/sqrt(D); anything else must be a positive finite real number."""
    if scale is None:
        return 1.0 / math.sqrt(dim)
    if isinstance(scale, bool) or not isinstance(scale, numbers.Real) \
            or not math.isfinite(float(scale)) or float(scale) <= 0:
        raise ValueError(f"scale must be None (meaning 1/sqrt(D)) or a positive finite number; got {scale!r}")
    return float(scale)


def _plus_scores(relative: torch.Tensor, q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
    """relative + q·kᵀ ([B, H, L, L]) in one fused batched matmul (baddbmm), so q·kᵀ never
    needs an L × L temporary of its own. q is already scaled."""
    batch, heads, length, dim = q.shape
    flat = batch * heads
    out = torch.baddbmm(relative.reshape(flat, length, length), q.reshape(flat, length, dim),
                        k.reshape(flat, length, dim).transpose(1, 2))
    return out.view(batch, heads, length, length)


def _all_finite(tensor: torch.Tensor) -> bool:
    """One reduction pass and no temporary of the tensor's size (isfinite would build one
    L × L boolean per head); NaN propagates through aminmax."""
    low, high = torch.aminmax(tensor.detach())
    return bool(torch.isfinite(torch.stack([low, high])).all())


def _check_finite_output(output: torch.Tensor) -> torch.Tensor:
    if not _all_finite(output):
        raise ValueError("v (and rel_v) must hold finite values: the attention output is not finite")
    return output


def _softmax_output(logits: torch.Tensor, v: torch.Tensor, causal: bool,
                    ) -> tuple[torch.Tensor, torch.Tensor]:
    """Mask (in place: logits is always a fresh tensor here), softmax over keys, weight v.

    Non-finite logits would come out of the softmax as NaN weights (inf − inf), so they are
    refused here, before masking: NaN or inf in q or k, or scale · q · k too large for the dtype.
    """
    if not _all_finite(logits):
        raise ValueError(
            f"the attention logits are not finite: q and k (and the relative table) must hold finite "
            f"values, and scale · q · k must fit in {str(logits.dtype).removeprefix('torch.')}; "
            f"lower the scale or the inputs' magnitude")
    if causal:
        length = logits.shape[-1]
        future = torch.ones(length, length, dtype=torch.bool, device=logits.device).triu(1)
        logits = logits.masked_fill_(future, float("-inf"))
    weights = torch.softmax(logits, dim=-1)
    return _check_finite_output(torch.matmul(weights, v)), weights


# ---------------------------------------------------------------------------------------
# Shaw et al. 2018


def shaw_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, rel_k: torch.Tensor,
                   rel_v: torch.Tensor | None = None, *, clip: int, causal: bool = False,
                   scale: float | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """Shaw et al.'s relative attention with clipped key (and optionally value) embeddings.

    rel_k, rel_v: [2·clip + 1, D], shared by all heads; row clip(j − i, −clip, clip) + clip
    is the embedding of relative position j − i.

        logit_ij  = scale · q_i · (k_j + rel_k[idx_ij])
        output_i  = Σ_j w_ij (v_j + rel_v[idx_ij])      (rel_v term only when rel_v is given)

    Never builds the L × L × D tensor of gathered embeddings: the key side computes
    q · rel_kᵀ ([B, H, L, 2·clip + 1]) and gathers it with the [L, L] index; the value side
    sums the weights per relative index (scatter_add, [B, H, L, 2·clip + 1]) and multiplies
    that by rel_v. Both per-index tensors keep only the rows that can be used: at most
    2L − 1 (or L when causal, since masked keys have weight 0).
    """
    batch, heads, length, dim = _check_qkv(q, k, v)
    clip = check_int("clip", clip, minimum=0, maximum=MAX_ABS_OFFSET)
    causal = check_bool("causal", causal)
    scale = _scale(scale, dim)
    rel_k = _check_table("rel_k", rel_k, q, 2 * clip + 1, dim, "2*clip+1, D")
    if rel_v is not None:
        rel_v = _check_table("rel_v", rel_v, q, 2 * clip + 1, dim, "2*clip+1, D")

    # Only 2·min(clip, L − 1) + 1 rows can ever be used: slice the tables to them, so that
    # the per-index tensors below are at most [B, H, L, 2L − 1] however large clip is.
    used = min(clip, length - 1)
    index = shaw_clip_index(length, k=used, device=q.device)          # [L, L], values 0..2·used
    if causal:
        # Future keys are masked (weight exactly 0), so every offset > 0 may share the row of
        # offset 0: the per-index tensors shrink to used + 1 columns.
        index = index.clamp(max=used)
        rows = slice(clip - used, clip + 1)
    else:
        rows = slice(clip - used, clip + used + 1)
    size = rows.stop - rows.start
    index = index.expand(batch, heads, length, length)              # a view, no copy

    q = q * scale
    rel_logits = torch.matmul(q, rel_k[rows].transpose(0, 1))       # [B, H, L, size]
    relative = torch.gather(rel_logits, -1, index)                  # [B, H, L, L]
    del rel_logits                                                  # (names dropped early to
    logits = _plus_scores(relative, q, k)                           #  keep the peak low)
    del relative
    output, weights = _softmax_output(logits, v, causal)
    del logits
    if rel_v is not None:
        # Σ_j w_ij rel_v[idx_ij] = Σ_r (Σ_{j: idx_ij = r} w_ij) rel_v[r]
        per_index = weights.new_zeros(batch, heads, length, size).scatter_add_(-1, index, weights)
        output = _check_finite_output(output + torch.matmul(per_index, rel_v[rows]))
    return output, weights


# ---------------------------------------------------------------------------------------
# T5


def t5_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, bias_table: torch.Tensor, *,
                 num_buckets: int, max_distance: int, bidirectional: bool, causal: bool = False,
                 scale: float | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """T5 relative attention: a learned scalar per (bucket, head) added to the logit.

        logit_ij = scale · q_i · k_j + bias_table[bucket(j − i), h]

    bias_table: [num_buckets, H]. The bias is not scaled; T5 itself uses no 1/sqrt(D), so
    pass scale=1.0 to reproduce it. Buckets are positions.t5_bucket_map's (T5's exact
    formula); invalid configurations raise ValueError.
    """
    batch, heads, length, dim = _check_qkv(q, k, v)
    config = t5_config(num_buckets, max_distance, bidirectional)
    causal = check_bool("causal", causal)
    scale = _scale(scale, dim)
    bias_table = _check_table("bias_table", bias_table, q, config.num_buckets, heads, "num_buckets, H")

    buckets = t5_bucket_map(length, num_buckets=config.num_buckets, max_distance=config.max_distance,
                            bidirectional=config.bidirectional, device=q.device)      # [L, L]
    bias = bias_table.transpose(0, 1)[:, buckets]                                   # [H, L, L]
    logits = torch.matmul(q * scale, k.transpose(-2, -1)).add_(bias)
    return _softmax_output(logits, v, causal)


# ---------------------------------------------------------------------------------------
# Music Transformer


def skew_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, e_r: torch.Tensor, *,
                   scale: float | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """Music Transformer relative attention (Huang et al. 2018), always causal.

    e_r: [M, D], one learned vector per distance, shared by all heads; row m stands for
    relative position m − (M − 1), so the last row is distance 0 and row 0 the farthest.

        logit_ij = scale · q_i · (k_j + e_r[row of j − i])     for j ≤ i (j > i masked)

    The relative term is skew(Q E_rᵀ) (relviz.skew.skew): O(L·D) extra memory for the
    table slice and O(L²) per head for the logits, never L × L × D.

    When M ≥ L the last L rows of e_r are used (distances −(L − 1)..0). When L > M,
    distances farther than the table reaches (|j − i| > M − 1) use its farthest row e_r[0]:
    the table is padded at the front by repeating e_r[0] — Shaw-style clipping, so this
    equals shaw_attention(..., clip=M − 1, causal=True) with rel_k's first M rows = e_r.
    (tensor2tensor zero-pads instead, giving those distances no relative term at all.)
    """
    batch, heads, length, dim = _check_qkv(q, k, v)
    scale = _scale(scale, dim)
    e_r = check_tensor("e_r", e_r, ndim=2, floating=True)
    if e_r.shape[0] < 1 or e_r.shape[1] != dim:
        raise ValueError(
            f"e_r must have shape [M, D] with M >= 1 and D = {dim} (q's last dimension); "
            f"got {tuple(e_r.shape)}")
    e_r = _check_table("e_r", e_r, q, e_r.shape[0], dim, "M, D")
    rows = e_r.shape[0]
    if rows >= length:
        table = e_r[rows - length:]                                    # distances −(L−1)..0
    else:
        table = torch.cat([e_r[:1].expand(length - rows, dim), e_r])   # far distances -> e_r[0]

    q = q * scale
    relative = skew(torch.matmul(q, table.transpose(0, 1)))            # exact for j ≤ i
    logits = _plus_scores(relative, q, k)                              # [B, H, L, L]
    del relative
    return _softmax_output(logits, v, causal=True)                     # the mask hides j > i


# ---------------------------------------------------------------------------------------
# ALiBi


def alibi_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, *, causal: bool = True,
                    scale: float | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """ALiBi (Press et al.): a fixed, head-specific linear penalty on distance.

        logit_ij = scale · q_i · k_j − slope_h · |i − j|

    slopes from positions.alibi_slopes(H) (the reference's, including H not a power of 2).
    ALiBi was designed for causal models (the default); causal=False keeps the symmetric
    penalty |i − j| on both sides.
    """
    batch, heads, length, dim = _check_qkv(q, k, v)
    causal = check_bool("causal", causal)
    scale = _scale(scale, dim)
    bias = alibi_bias(length, num_heads=heads, device=q.device).to(q.dtype)     # [H, L, L]
    logits = torch.matmul(q * scale, k.transpose(-2, -1)).add_(bias)
    return _softmax_output(logits, v, causal)
