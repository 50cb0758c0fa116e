"""Functional relative attention: Shaw et al. (K and V tables), T5 buckets, Music Transformer
skew, ALiBi.

Every function takes q, k, v of shape [B, H, L, D] (same shape, dtype and device) and returns
``(output [B, H, L, D], weights [B, H, L, L] or None)``. Two paths, the same output:

- ``need_weights=False`` (the default: training, evaluation, experiments): the fused path,
  ``torch.nn.functional.scaled_dot_product_attention`` with the relative term as its bias
  (T5 and ALiBi never even expand theirs: see :func:`offset_bias_attention`), or, with
  ``backend="flex"``, compiled FlexAttention (forward only on CPU). ``backend="auto"`` (the
  default) runs FlexAttention for a per-offset bias on CUDA and SDPA elsewhere (relviz.flex).
  Returns (output, None).
- ``need_weights=True`` (where the app draws the weights): the exact weights path below.

``scale`` defaults to 1/sqrt(D). With
``causal=True`` key j is hidden from query i whenever j > i: its logit is set to −inf before
the softmax (a row always keeps j = i, so it is never fully masked). Every row of the
weights sums to 1. All computation stays on the inputs' device and is differentiable.

Memory: no function here builds an L × L × D tensor. The relative terms are computed per
relative index (at most 2·clip + 1 or L of them) and then moved to their (i, j) cells with
an [L, L] index (Shaw), a bias lookup (T5, ALiBi) or the skew (Music Transformer). The
naive gather that does build L × L × D lives in :func:`relviz.skew.gather_relative` and is
used only by tests and the benchmark.

Validation: each function checks its arguments and refuses non-finite logits, outputs and
relative tables with a ValueError that names what is wrong. The finite checks read two numbers back
from the device per call (a host-device sync on a GPU), so ``validate=False`` skips every check:
it is for callers that validated once already, the model's schemes (relviz.model checks its config
and its input tokens; a checkpoint's tensors are checked finite when it loads). Invalid arguments
then give wrong numbers or torch's own errors, and a non-finite value propagates as NaN or inf.

Sign convention: relative position = key index − query index (j − i).
"""
from __future__ import annotations

from functools import partial
from typing import Any

import torch

from relviz._checks import check_bool, check_int, check_tensor
from relviz.attention_fused import chunked_sdpa, fused_offsets, shaw_sdpa, skew_chunk_bias, skew_hidden
from relviz.attention_steps import (
    check_finite_output,
    check_finite_tables,
    check_mode,
    check_qkv,
    check_scale,
    check_table,
    fused_output,
    future_mask,
    plus_scores,
    resolve_scale,
    softmax_output,
)
from relviz.positions import MAX_ABS_OFFSET, alibi_bias_offsets, shaw_clip_index, t5_config
from relviz.flex import BACKENDS, flex as _flex
from relviz.skew import distance_table, skew

__all__ = ["BACKENDS", "offset_bias_attention", "shaw_attention", "t5_attention", "skew_attention",
           "alibi_attention", "softmax_output", "fused_output", "future_mask"]


def offset_bias_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, per_offset: torch.Tensor, *,
                          causal: bool = False, scale: float | None = None, need_weights: bool = False,
                          backend: str = "auto", validate: bool = True) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Attention with a relative (Toeplitz) bias given once per offset: T5, ALiBi, or any other.

        logit_ij = scale · q_i · k_j + per_offset[h, j − i + L − 1]

    per_offset: [H, 2L − 1] (as positions.t5_bias_offsets / alibi_bias_offsets build it). A
    model computes it once per forward and passes it to every layer. The fused path never
    expands it to [H, L, L]; the weights path expands it once (one copy). ``validate=False``: no
    checks (the model's schemes; see the module docstring).
    """
    if validate:
        _, heads, length, dim = check_qkv(q, k, v)
        causal, scale, need_weights, backend = _check_options(causal, scale, need_weights, backend, dim)
        per_offset = check_table("per_offset", per_offset, q, heads, 2 * length - 1, "H, 2L-1")
    return _offset_bias(q, k, v, per_offset, causal, scale, need_weights, backend, check_values=validate)


def _check_options(causal: Any, scale: Any, need_weights: Any, backend: Any, dim: int,
                   ) -> tuple[bool, float | None, bool, str]:
    """The options every offset-bias function takes, checked (each public entry calls this once)."""
    causal, scale = check_bool("causal", causal), check_scale(scale, dim)
    return (causal, scale, *check_mode(need_weights, backend))


def _offset_bias(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, per_offset: torch.Tensor, causal: bool,
                 scale: float | None, need_weights: bool, backend: str, *, check_values: bool,
                 ) -> tuple[torch.Tensor, torch.Tensor | None]:
    """offset_bias_attention's computation on arguments its public caller already checked.

    ``check_values``: refuse non-finite tables, logits and outputs (a host read each; the public
    functions do, the model's schemes do not)."""
    length, scale = q.shape[-2], resolve_scale(scale, q.shape[-1])
    if not need_weights:
        if check_values:
            check_finite_tables(per_offset)
        output = fused_offsets(q, k, v, per_offset, causal=causal, scale=scale, backend=backend)
        return fused_output(output, validate=check_values), None
    bias = per_offset.unfold(-1, length, 1).flip(-2)                               # [H, L, L], one copy
    logits = torch.matmul(q * scale, k.transpose(-2, -1)).add_(bias)               # [B, H, L, L]
    return softmax_output(logits, v, causal, validate=check_values)


# ---------------------------------------------------------------------------------------
# Shaw et al. 2018


def _causal_index_sums(weights: torch.Tensor, used: int) -> torch.Tensor:
    """Causal Shaw's weight per relative index [B, H, L, used + 1] from the band alone.

    Index r ≥ 1 (offset r − used, within the clip) has exactly one key, j = i + r − used: a
    diagonal of the weights, gathered (L · used values, not a scatter over L · L). Index 0 holds
    every farther key, whose weights sum to 1 minus the band's (each row sums to 1; future keys
    have weight 0). Same values as the scatter to float rounding, and the same gradient: the
    softmax's backward ignores a constant added to every weight's gradient.
    """
    batch, heads, length, _ = weights.shape
    rows = torch.arange(length, device=weights.device)[:, None]
    keys = rows - torch.arange(used - 1, -1, -1, device=weights.device)[None, :]     # [L, used], j for r = 1..used
    band = torch.gather(weights, -1, keys.clamp(min=0).expand(batch, heads, length, used))
    band = band.masked_fill(keys < 0, 0.0)                                           # no key before position 0
    return torch.cat([1 - band.sum(-1, keepdim=True), band], dim=-1)


def shaw_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, rel_k: torch.Tensor,
                   rel_v: torch.Tensor | None = None, *, clip: int, causal: bool = False,
                   scale: float | None = None, need_weights: bool = False, backend: str = "sdpa",
                   validate: bool = True) -> tuple[torch.Tensor, torch.Tensor | None]:
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

    Fused path (need_weights=False, rel_v None): the gathered key term is the bias of
    scaled_dot_product_attention. The value term needs every weight (its per-index sums), which
    no fused kernel returns: with rel_v the weights path runs and only the weights are dropped.
    ``validate=False``: no checks (the model's schemes; see the module docstring).
    """
    if validate:
        _, _, _, dim = check_qkv(q, k, v)
        clip = check_int("clip", clip, minimum=0, maximum=MAX_ABS_OFFSET)
        causal = check_bool("causal", causal)
        scale = check_scale(scale, dim)
        need_weights, backend = check_mode(need_weights, backend)
        rel_k = check_table("rel_k", rel_k, q, 2 * clip + 1, dim, "2*clip+1, D")
        if rel_v is not None:
            rel_v = check_table("rel_v", rel_v, q, 2 * clip + 1, dim, "2*clip+1, D")
            if backend not in ("auto", "sdpa"):
                raise ValueError(f"backend={backend!r} cannot add the value term (rel_v): it needs every "
                                 "attention weight; use backend='sdpa'")
    batch, heads, length, dim = q.shape
    scale = resolve_scale(scale, dim)
    backend = "sdpa" if backend == "auto" else backend     # its flex score_mod reads a [B, H, L, 2·clip + 1] table

    # Only 2·min(clip, L − 1) + 1 rows can ever be used: slice the tables to them, so that
    # the per-index tensors below are at most [B, H, L, 2L − 1] however large clip is.
    used = min(clip, length - 1)
    if causal:
        # Future keys are masked (weight exactly 0), so every offset > 0 may share the row of
        # offset 0: the per-index tensors shrink to used + 1 columns.
        rows = slice(clip - used, clip + 1)
    else:
        rows = slice(clip - used, clip + used + 1)
    size = rows.stop - rows.start
    if rel_v is None and not need_weights:
        if validate:
            check_finite_tables(rel_k)
        if backend == "flex":
            rel_logits = torch.matmul(q, (rel_k[rows] * scale).transpose(0, 1))      # [B, H, L, size]

            def score_mod(score, b, h, q_idx, kv_idx):
                return score + rel_logits[b, h, q_idx, (kv_idx - q_idx).clamp(-used, 0 if causal else used) + used]
            return fused_output(_flex(q, k, v, score_mod, scale, (rel_k,), causal), validate=validate), None
        output = shaw_sdpa(q, k, v, rel_k[rows] * scale, used=used, causal=causal, scale=scale)
        return fused_output(output, validate=validate), None
    scaled = q * scale
    rel_logits = torch.matmul(scaled, rel_k[rows].transpose(0, 1))      # [B, H, L, size]

    index = shaw_clip_index(length, k=used, device=q.device)          # [L, L], values 0..2·used
    if causal:
        index = index.clamp(max=used)
    index = index.expand(batch, heads, length, length)              # a view, no copy
    relative = torch.gather(rel_logits, -1, index)                  # [B, H, L, L]
    del rel_logits                                                  # (names dropped early to
    logits = plus_scores(relative, scaled, k)                      #  keep the peak low)
    del relative
    output, weights = softmax_output(logits, v, causal, validate=validate)
    del logits
    if rel_v is not None:
        # Σ_j w_ij rel_v[idx_ij] = Σ_r (Σ_{j: idx_ij = r} w_ij) rel_v[r]
        if causal and not need_weights:
            per_index = _causal_index_sums(weights, used)
        else:
            per_index = weights.new_zeros(batch, heads, length, size).scatter_add_(-1, index, weights)
        output = output + torch.matmul(per_index, rel_v[rows])                     # [B, H, L, D]
        if validate:
            check_finite_output(output)
    return output, (weights if need_weights else None)


# ---------------------------------------------------------------------------------------
# T5


def t5_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, bias_table: torch.Tensor, *,
                 num_buckets: int, max_distance: int, bidirectional: bool, causal: bool = False,
                 scale: float | None = None, need_weights: bool = False, backend: str = "auto",
                 ) -> tuple[torch.Tensor, torch.Tensor | None]:
    """T5 relative attention: a learned scalar per (bucket, head) added to the logit.

        logit_ij = scale · q_i · k_j + bias_table[bucket(j − i), h]

    bias_table: [num_buckets, H]. The bias is not scaled; T5 itself uses no 1/sqrt(D), so
    pass scale=1.0 to reproduce it. Buckets are positions.t5_bucket's (T5's exact formula);
    invalid configurations raise ValueError. The bias is built per offset
    (positions.t5_bias_offsets: 2L − 1 values per head), as :func:`offset_bias_attention` takes it.
    """
    batch, heads, length, dim = check_qkv(q, k, v)
    config = t5_config(num_buckets, max_distance, bidirectional)
    bias_table = check_table("bias_table", bias_table, q, config.num_buckets, heads, "num_buckets, H")
    causal, scale, need_weights, backend = _check_options(causal, scale, need_weights, backend, dim)
    per_offset = config.bias_offsets(bias_table, length, length)                  # [H, 2L − 1]
    return _offset_bias(q, k, v, per_offset, causal, scale, need_weights, backend, check_values=True)


# ---------------------------------------------------------------------------------------
# Music Transformer


def skew_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, e_r: torch.Tensor, *,
                   scale: float | None = None, need_weights: bool = False, backend: str = "sdpa",
                   validate: bool = True) -> tuple[torch.Tensor, torch.Tensor | None]:
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

    Fused path (need_weights=False): the skewed term, masked, is the bias of
    scaled_dot_product_attention (relviz.chunked holds the query-chunked variant).
    ``validate=False``: no checks (the model's schemes; see the module docstring).
    """
    if validate:
        _, _, _, dim = check_qkv(q, k, v)
        scale = check_scale(scale, dim)
        need_weights, backend = check_mode(need_weights, backend)
        e_r = check_tensor("e_r", e_r, ndim=2, floating=True)
        if e_r.shape[0] < 1 or e_r.shape[1] != dim:
            raise ValueError(
                f"e_r must have shape [M, D] with M >= 1 and D = {dim} (q's last dimension); "
                f"got {tuple(e_r.shape)}")
        e_r = check_table("e_r", e_r, q, e_r.shape[0], dim, "M, D")
    length, scale = q.shape[-2], resolve_scale(scale, q.shape[-1])
    backend = "sdpa" if backend == "auto" else backend     # its flex score_mod reads an [B, H, L, L] q·E_rᵀ
    table = distance_table(e_r, length)                                # distances −(L−1)..0

    if not need_weights:
        if validate:
            check_finite_tables(e_r)
        if backend == "flex":
            qer = torch.matmul(q, (table * scale).transpose(0, 1))     # [B, H, L, L], column = distance + L − 1

            def score_mod(score, b, h, q_idx, kv_idx):
                return score + qer[b, h, q_idx, (kv_idx - q_idx + length - 1).clamp(max=length - 1)]
            return fused_output(_flex(q, k, v, score_mod, scale, (e_r,), True), validate=validate), None
        extended = torch.cat([table[:1], table]) * scale                                # [L + 1, D]
        bias = partial(skew_chunk_bias, q, extended, skew_hidden(q, length))
        return fused_output(chunked_sdpa(q, k, v, bias, causal=True, scale=scale), validate=validate), None
    scaled = q * scale
    relative = skew(torch.matmul(scaled, table.transpose(0, 1)))      # exact for j ≤ i (column = distance + L − 1)
    logits = plus_scores(relative, scaled, k)                         # [B, H, L, L]
    del relative
    return softmax_output(logits, v, causal=True, validate=validate)  # the mask hides j > i


# ---------------------------------------------------------------------------------------
# ALiBi


def alibi_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, *, causal: bool = True,
                    scale: float | None = None, need_weights: bool = False, backend: str = "auto",
                    ) -> tuple[torch.Tensor, torch.Tensor | None]:
    """ALiBi (Press et al.): a fixed, head-specific linear penalty on distance.

        logit_ij = scale · q_i · k_j − slope_h · |i − j|

    slopes from positions.alibi_slopes(H) (the reference's, including H not a power of 2).
    ALiBi was designed for causal models (the default); causal=False keeps the symmetric
    penalty |i − j| on both sides. The bias is built per offset (2L − 1 values per head).
    """
    batch, heads, length, dim = check_qkv(q, k, v)
    causal, scale, need_weights, backend = _check_options(causal, scale, need_weights, backend, dim)
    per_offset = alibi_bias_offsets(length, num_heads=heads, device=q.device).to(q.dtype)   # [H, 2L − 1]
    return _offset_bias(q, k, v, per_offset, causal, scale, need_weights, backend, check_values=True)
