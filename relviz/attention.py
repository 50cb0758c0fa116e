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

Sign convention: relative position = key index − query index (j − i).
"""
from __future__ import annotations

import math
import numbers
from functools import lru_cache, partial

import torch

from relviz._checks import check_bool, check_int, check_tensor
from relviz.positions import MAX_ABS_OFFSET, alibi_bias_offsets, shaw_clip_index, t5_config
from relviz.flex import BACKENDS, flex as _flex, resolve_backend
from relviz.skew import distance_table, skew

__all__ = ["BACKENDS", "offset_bias_attention", "shaw_attention", "t5_attention", "skew_attention",
           "alibi_attention", "softmax_output", "fused_output", "future_mask"]


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
    """relative + q·kᵀ ([B, H, L, L]): q·kᵀ is written into a fresh tensor and relative added to it in
    place, so no third L × L tensor exists. q is already scaled.

    Not baddbmm over [B·H, L, L] and a .view back: the softmax step masks its logits in place, and an
    in-place op on a view makes autograd copy the whole L × L gradient twice more in the backward
    (CopySlices); matmul's result is not a view."""
    return torch.matmul(q, k.transpose(-2, -1)).add_(relative)


def _all_finite(tensor: torch.Tensor) -> bool:
    """One reduction pass and no temporary of the tensor's size (isfinite would build one
    L × L boolean per head); NaN propagates through aminmax. The two extremes are read as Python
    floats: torch.isfinite on them would cost four more ops (~20 µs, per call of every fused path)."""
    low, high = torch.aminmax(tensor.detach())
    return math.isfinite(low.item()) and math.isfinite(high.item())


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


#: The shared last step (refuse non-finite logits, mask, softmax, weight v), for the model's schemes.
softmax_output = _softmax_output


# ---------------------------------------------------------------------------------------
# The fused path: scaled_dot_product_attention (or compiled FlexAttention) with the bias



def _check_mode(need_weights: object, backend: object) -> tuple[bool, str]:
    need_weights = check_bool("need_weights", need_weights)
    if backend not in BACKENDS:
        raise ValueError(f"backend must be one of {', '.join(repr(b) for b in BACKENDS)}; got {backend!r}")
    if need_weights and backend == "flex":
        raise ValueError(f"backend={backend!r} is a fused path, which has no weights: with need_weights=True "
                         "the exact weights path runs, so leave backend at 'auto' or 'sdpa'")
    return need_weights, backend


def _check_finite_tables(*tables: torch.Tensor | None) -> None:
    """The weights path refuses non-finite logits; the fused path never sees them. A −inf in a
    (small) relative table would silently mask keys, so the tables are checked here; NaN or
    infinity in q, k or v reaches the output, which :func:`_check_fused_output` refuses."""
    if not all(_all_finite(t) for t in tables if t is not None and t.numel()):
        raise ValueError("the relative tables (rel_k, rel_v, e_r, bias_table, per_offset) must hold finite values")


def _check_fused_output(output: torch.Tensor) -> torch.Tensor:
    if not _all_finite(output):
        raise ValueError(
            f"the attention output is not finite: q, k and v must hold finite values, and scale · q · k "
            f"must fit in {str(output.dtype).removeprefix('torch.')}; lower the scale or the inputs' magnitude")
    return output


#: The fused path's last step (refuse a non-finite output), for the model's schemes.
fused_output = _check_fused_output


def _causal_offsets(per_offset: torch.Tensor, length: int, causal: bool) -> torch.Tensor:
    """Per-offset bias [H, 2L − 1] (entry t is offset t − (L − 1)), −inf at offsets > 0 when causal."""
    if not causal:
        return per_offset
    future = torch.arange(2 * length - 1, device=per_offset.device) > length - 1
    return per_offset.masked_fill(future, float("-inf"))


#: Queries per chunk on the chunked fused paths; None: by length (:func:`_chunk_size`).
FUSED_CHUNK: int | None = None


def _chunk_size(length: int) -> int:
    """Queries per chunk: 64 up to L = 256 (and up to 512 on one thread), 128 up to 1024, 256 beyond.

    Smaller chunks skip more of the causal future (a causal chunked pass costs (L + chunk) / 2L of
    one full SDPA call, plus for skew q·E_rᵀ over the same cells: half as much again), but each
    chunk costs several ops, and on two threads each op forks and joins the threads (from the
    figures below, a chunk costs about 3–5% of one SDPA call at L = 512 beyond its share of the
    work). Measured at L = 512 (in turns, min of 61 rounds, ratio to SDPA with the bias prebuilt,
    two threads, load 4): skew 1.18× with 96, 1.12× with 128, 1.18× with 160, 1.13× with 192,
    1.21× with 256; Shaw 1.02×, 0.95×, 0.99×, 0.95×, 1.02×. One thread (15 rounds, load 1): skew
    1.05× with 64, 1.06× with 128, 1.21× with 256; Shaw 0.91×, 0.93×, 1.06×. The model's train step
    at B8×L256, two threads (9 rounds, load 3): skew 44 ms with 64 or 128, 62 ms with 256. T5 and
    ALiBi are 10–20% slower at L ≥ 2048 with 128 than with 256.
    """
    if FUSED_CHUNK:
        return FUSED_CHUNK
    if length <= 256 or (length <= 512 and torch.get_num_threads() == 1):
        return 64
    return 128 if length <= 1024 else 256


def _chunked_sdpa(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, chunk_bias, *, causal: bool,
                  scale: float, reverse: bool = False) -> torch.Tensor:
    """scaled_dot_product_attention a chunk of queries at a time (:func:`_chunk_size`).

    ``chunk_bias(start, stop, keys)`` gives the bias of queries start..stop − 1 over keys
    0..keys − 1, with −inf on masked keys: [B or 1, H, stop − start, keys] (``reverse``: its rows
    run from query stop − 1 down to start). Causal: a chunk needs only keys 0..stop − 1, so
    future blocks are never computed (about half the work), and no bias is ever larger than
    [B, H, chunk, L]. Each chunk's output is copied into one [B, H, L, D] tensor as it comes
    (no list of chunk outputs and no concatenation: one output and one chunk alive at a time).
    One concatenation at the end instead (one op instead of a copy per chunk) measured 2% faster
    at L = 512 but 20% slower at L = 1024 for skew (two threads, in turns): holding every chunk's
    output changes which freed memory the next chunk's bias can reuse.
    """
    length = q.shape[-2]
    chunk = _chunk_size(length)
    if chunk >= length:                                          # one chunk: no copy at all
        return _sdpa_chunk(q, k, v, chunk_bias(0, length, length), scale=scale, reverse=reverse)
    output = q.new_empty(q.shape)                                # [B, H, L, D]
    for start in range(0, length, chunk):
        stop = min(start + chunk, length)
        keys = stop if causal else length
        output[..., start:stop, :] = _sdpa_chunk(q[..., start:stop, :], k[..., :keys, :], v[..., :keys, :],
                                                 chunk_bias(start, stop, keys), scale=scale, reverse=reverse)
    return output


def _sdpa_chunk(queries: torch.Tensor, k: torch.Tensor, v: torch.Tensor, bias: torch.Tensor, *, scale: float,
                reverse: bool) -> torch.Tensor:
    """One chunk's SDPA; ``reverse``: the bias's rows run backwards, so the queries do too."""
    if not reverse:
        return torch.nn.functional.scaled_dot_product_attention(queries, k, v, attn_mask=bias, scale=scale)
    out = torch.nn.functional.scaled_dot_product_attention(queries.flip(-2), k, v, attn_mask=bias, scale=scale)
    return out.flip(-2)


def _sdpa_offsets(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, per_offset: torch.Tensor,
                  scale: float, causal: bool) -> torch.Tensor:
    """SDPA with a Toeplitz bias given per offset, without ever building the [H, L, L] bias.

    bias[i, j] = per_offset[j − i + L − 1]. The unfold view V[r, j] = per_offset[r + j] is that
    bias with its rows in reverse order (r = L − 1 − i); a Toeplitz matrix needs a negative row
    stride, which torch has not, so the queries are reversed instead (an L × D copy, not L × L).
    In query chunks (:func:`_chunked_sdpa`): causal, no chunk computes its future keys.
    """
    length = q.shape[-2]

    def reversed_rows(start: int, stop: int, keys: int) -> torch.Tensor:
        # queries stop − 1 down to start over keys 0..keys − 1: entry (r, j) = per_offset[j − (stop − 1 − r) + L − 1].
        # Four dimensions: a 3-D mask sends torch's CPU dispatch to the unfused math kernel.
        return per_offset[..., length - stop:].unfold(-1, keys, 1)[None, :, :stop - start]
    return _chunked_sdpa(q, k, v, reversed_rows, causal=causal, scale=scale, reverse=True)


def _fused_offsets(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, per_offset: torch.Tensor, *,
                   causal: bool, scale: float, backend: str) -> torch.Tensor:
    """Fused attention with a Toeplitz bias per offset [H, 2L − 1] (T5, ALiBi)."""
    _check_finite_tables(per_offset)
    length = q.shape[-2]
    per_offset = per_offset.to(q.dtype)
    if resolve_backend(backend, q.device) == "flex":
        def score_mod(score, b, h, q_idx, kv_idx):
            return score + per_offset[h, kv_idx - q_idx + length - 1]
        return _check_fused_output(_flex(q, k, v, score_mod, scale, (per_offset,), causal))
    return _check_fused_output(_sdpa_offsets(q, k, v, _causal_offsets(per_offset, length, causal), scale, causal))


def future_mask(length: int, device: torch.device) -> torch.Tensor:
    """[L, L] bool, True where key j lies after query i (the cells a causal model masks)."""
    return torch.ones(length, length, dtype=torch.bool, device=device).triu(1)


def offset_bias_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, per_offset: torch.Tensor, *,
                          causal: bool = False, scale: float | None = None, need_weights: bool = False,
                          backend: str = "auto") -> tuple[torch.Tensor, torch.Tensor | None]:
    """Attention with a relative (Toeplitz) bias given once per offset: T5, ALiBi, or any other.

        logit_ij = scale · q_i · k_j + per_offset[h, j − i + L − 1]

    per_offset: [H, 2L − 1] (as positions.t5_bias_offsets / alibi_bias_offsets build it). A
    model computes it once per forward and passes it to every layer. The fused path never
    expands it to [H, L, L]; the weights path expands it once (one copy).
    """
    batch, heads, length, dim = _check_qkv(q, k, v)
    causal = check_bool("causal", causal)
    scale = _scale(scale, dim)
    need_weights, backend = _check_mode(need_weights, backend)
    per_offset = _check_table("per_offset", per_offset, q, heads, 2 * length - 1, "H, 2L-1")
    if not need_weights:
        return _fused_offsets(q, k, v, per_offset, causal=causal, scale=scale, backend=backend), None
    bias = per_offset.unfold(-1, length, 1).flip(-2)                               # [H, L, L], one copy
    logits = torch.matmul(q * scale, k.transpose(-2, -1)).add_(bias)
    return _softmax_output(logits, v, causal)


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


def _shaw_sdpa(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, rel_k: torch.Tensor, *, used: int,
               causal: bool, scale: float) -> torch.Tensor:
    """Shaw's key term as SDPA's bias, in query chunks (:func:`_chunked_sdpa`).

    rel_k: the used rows, already scaled ([size, D]; row c is offset c − used). Every key farther
    back than ``used`` shares row 0, so each row's logits are shifted by −q_i·rel_k[0] (a constant
    per row leaves the softmax unchanged): the table's row 0 is subtracted from every row, and the
    far past then has bias exactly 0. A chunk's bias is a strided view of one row-padded copy of
    its logits, P[r] = [0 × a, rel[i], far-future value × b] ([B, H, n, a + size + b]): read with
    row stride a + size + b − 1, entry (r, j) lands on P[r, j − i + used + a], which is 0 for every
    key farther back than ``used``, rel for the clipped window, and beyond it −inf (causal) or the
    last row's logit. One concatenation per chunk, no gather and no index tensor.
    """
    rel = torch.matmul(q, (rel_k - rel_k[:1]).transpose(0, 1))                  # [B, H, L, size], column 0: 0
    size = rel.shape[-1]

    def chunk_bias(start: int, stop: int, keys: int) -> torch.Tensor:
        chunk_rel = rel[..., start:stop, :]                                      # [B, H, n, size]
        rows = chunk_rel.shape[:-1]
        lead = max(0, stop - 1 - used)                                           # key 0 from query stop − 1
        trail = max(0, keys - start + used - size)                               # key keys − 1 from query start
        far = chunk_rel.new_full((), float("-inf")) if causal else chunk_rel[..., size - 1:]
        padded = torch.cat([chunk_rel.new_zeros(()).expand(*rows, lead), chunk_rel,
                            far.expand(*rows, trail)], dim=-1)                   # [B, H, n, lead + size + trail]
        width = padded.shape[-1]
        return padded.as_strided((*rows, keys), (*padded.stride()[:2], width - 1, 1),
                                 padded.storage_offset() + used + lead - start)  # [B, H, n, keys]
    return _chunked_sdpa(q, k, v, chunk_bias, causal=causal, scale=scale)


def shaw_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, rel_k: torch.Tensor,
                   rel_v: torch.Tensor | None = None, *, clip: int, causal: bool = False,
                   scale: float | None = None, need_weights: bool = False, backend: str = "sdpa",
                   ) -> tuple[torch.Tensor, torch.Tensor | None]:
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
    """
    batch, heads, length, dim = _check_qkv(q, k, v)
    clip = check_int("clip", clip, minimum=0, maximum=MAX_ABS_OFFSET)
    causal = check_bool("causal", causal)
    scale = _scale(scale, dim)
    need_weights, backend = _check_mode(need_weights, backend)
    backend = "sdpa" if backend == "auto" else backend     # its flex score_mod reads a [B, H, L, 2·clip + 1] table
    rel_k = _check_table("rel_k", rel_k, q, 2 * clip + 1, dim, "2*clip+1, D")
    if rel_v is not None:
        rel_v = _check_table("rel_v", rel_v, q, 2 * clip + 1, dim, "2*clip+1, D")
        if backend != "sdpa":
            raise ValueError(f"backend={backend!r} cannot add the value term (rel_v): it needs every attention "
                             "weight; use backend='sdpa'")

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
        _check_finite_tables(rel_k)
        if backend == "flex":
            rel_logits = torch.matmul(q, (rel_k[rows] * scale).transpose(0, 1))      # [B, H, L, size]

            def score_mod(score, b, h, q_idx, kv_idx):
                return score + rel_logits[b, h, q_idx, (kv_idx - q_idx).clamp(-used, 0 if causal else used) + used]
            return _check_fused_output(_flex(q, k, v, score_mod, scale, (rel_k,), causal)), None
        return _check_fused_output(_shaw_sdpa(q, k, v, rel_k[rows] * scale, used=used, causal=causal,
                                              scale=scale)), None
    scaled = q * scale
    rel_logits = torch.matmul(scaled, rel_k[rows].transpose(0, 1))      # [B, H, L, size]

    index = shaw_clip_index(length, k=used, device=q.device)          # [L, L], values 0..2·used
    if causal:
        index = index.clamp(max=used)
    index = index.expand(batch, heads, length, length)              # a view, no copy
    relative = torch.gather(rel_logits, -1, index)                  # [B, H, L, L]
    del rel_logits                                                  # (names dropped early to
    logits = _plus_scores(relative, scaled, k)                      #  keep the peak low)
    del relative
    output, weights = _softmax_output(logits, v, causal)
    del logits
    if rel_v is not None:
        # Σ_j w_ij rel_v[idx_ij] = Σ_r (Σ_{j: idx_ij = r} w_ij) rel_v[r]
        if causal and not need_weights:
            per_index = _causal_index_sums(weights, used)
        else:
            per_index = weights.new_zeros(batch, heads, length, size).scatter_add_(-1, index, weights)
        output = _check_finite_output(output + torch.matmul(per_index, rel_v[rows]))
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
    batch, heads, length, dim = _check_qkv(q, k, v)
    config = t5_config(num_buckets, max_distance, bidirectional)
    bias_table = _check_table("bias_table", bias_table, q, config.num_buckets, heads, "num_buckets, H")
    per_offset = config.bias_offsets(bias_table, length, length)                  # [H, 2L − 1]
    return offset_bias_attention(q, k, v, per_offset, causal=causal, scale=scale, need_weights=need_weights,
                                 backend=backend)


# ---------------------------------------------------------------------------------------
# Music Transformer


def _skew_chunk_bias(q: torch.Tensor, extended: torch.Tensor, hidden: torch.Tensor, start: int, stop: int,
                     keys: int) -> torch.Tensor:
    """Queries start..stop − 1 of the causal skew bias, keys 0..stop − 1, −inf above the diagonal:
    a strided view of q·E_rᵀ, the skew without its copy.

    ``extended`` is [L + 1, D]: one pad row (any finite row: it is always masked), then scale · E_r's
    rows for distances −(L − 1)..0 (the scale is folded into the table, so q is never scaled: no
    [B, H, L, D] copy). qer = q_chunk · extended[L − stop:]ᵀ is [B·H, n, stop + 1] (column 0: the
    pad; column c ≥ 1: distance c − stop). Read with row stride stop instead of stop + 1 from column
    n, entry (r, j) lands on distance j − i (i = start + r) for j ≤ i, on the next row's pad for
    j = i + 1, and for j ≥ i + 2 on the next row's columns 1..n − 2 − r, its distances before key 0.
    So the cells to hide are exactly those with row + column < n, a triangle in the first n columns:
    one in-place add of ``hidden`` (−inf there, 0 elsewhere: a Hankel view of one vector) masks them,
    and the view is then exactly the masked bias. (baddbmm with the addend would mask in the matmul
    itself, but it copies the addend over all n × (stop + 1) cells first: 2–10% slower from L = 2048.)
    """
    length = extended.shape[0] - 1
    n = stop - start
    batch, heads, _, dim = q.shape
    qer = torch.matmul(q[..., start:stop, :].reshape(batch * heads, n, dim),
                       extended[length - stop:].transpose(0, 1)).contiguous()        # [B·H, n, stop + 1]
    qer[..., :n].add_(hidden.as_strided((n, n), (1, 1), hidden.shape[0] // 2 - n))
    width = stop + 1
    return qer.as_strided((batch, heads, n, stop), (heads * n * width, n * width, stop, 1), qer.storage_offset() + n)


def _skew_hidden(q: torch.Tensor, length: int) -> torch.Tensor:
    """The masking addend of :func:`_skew_chunk_bias`: −inf × chunk, then 0 × chunk; a chunk of
    n queries reads it as hidden[chunk − n + row + column], −inf exactly where row + column < n."""
    chunk = min(_chunk_size(length), length)
    hidden = q.new_zeros(2 * chunk)
    hidden[:chunk] = float("-inf")
    return hidden


def skew_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, e_r: torch.Tensor, *,
                   scale: float | None = None, need_weights: bool = False, backend: str = "sdpa",
                   ) -> tuple[torch.Tensor, torch.Tensor | None]:
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
    """
    batch, heads, length, dim = _check_qkv(q, k, v)
    scale = _scale(scale, dim)
    need_weights, backend = _check_mode(need_weights, backend)
    backend = "sdpa" if backend == "auto" else backend     # its flex score_mod reads an [B, H, L, L] q·E_rᵀ
    e_r = check_tensor("e_r", e_r, ndim=2, floating=True)
    if e_r.shape[0] < 1 or e_r.shape[1] != dim:
        raise ValueError(
            f"e_r must have shape [M, D] with M >= 1 and D = {dim} (q's last dimension); "
            f"got {tuple(e_r.shape)}")
    e_r = _check_table("e_r", e_r, q, e_r.shape[0], dim, "M, D")
    table = distance_table(e_r, length)                                # distances −(L−1)..0

    if not need_weights:
        _check_finite_tables(e_r)
        if backend == "flex":
            qer = torch.matmul(q, (table * scale).transpose(0, 1))     # [B, H, L, L], column = distance + L − 1

            def score_mod(score, b, h, q_idx, kv_idx):
                return score + qer[b, h, q_idx, (kv_idx - q_idx + length - 1).clamp(max=length - 1)]
            return _check_fused_output(_flex(q, k, v, score_mod, scale, (e_r,), True)), None
        extended = torch.cat([table[:1], table]) * scale                                # [L + 1, D]
        bias = partial(_skew_chunk_bias, q, extended, _skew_hidden(q, length))
        return _check_fused_output(_chunked_sdpa(q, k, v, bias, causal=True, scale=scale)), None
    scaled = q * scale
    relative = skew(torch.matmul(scaled, table.transpose(0, 1)))      # exact for j ≤ i (column = distance + L − 1)
    logits = _plus_scores(relative, scaled, k)                         # [B, H, L, L]
    del relative
    return _softmax_output(logits, v, causal=True)                     # the mask hides j > i


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
    batch, heads, length, dim = _check_qkv(q, k, v)
    per_offset = alibi_bias_offsets(length, num_heads=heads, device=q.device).to(q.dtype)   # [H, 2L − 1]
    return offset_bias_attention(q, k, v, per_offset, causal=causal, scale=scale, need_weights=need_weights,
                                 backend=backend)
