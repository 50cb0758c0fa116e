"""The fused path's kernels: ``scaled_dot_product_attention`` (or compiled FlexAttention) with a relative
bias built a chunk of queries at a time, so no [H, L, L] bias (nor the causal future) is ever computed.

Its own module because the chunking (how many queries per chunk, why, and what it measured) and the
strided views that turn per-offset values into each chunk's bias are one piece of engineering shared
by T5/ALiBi (per offset), Shaw (clipped table) and the Music Transformer (skew); the public functions
in :mod:`relviz.attention` check their arguments (and, at the public boundary, the finiteness of
what comes out) and call these, which check nothing.
Shapes: q, k, v [B, H, L, D]; a chunk's bias [B or 1, H, chunk, keys].
"""
from __future__ import annotations

import torch

from relviz.flex import flex as _flex, resolve_backend


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


def chunked_sdpa(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, chunk_bias, *, causal: bool,
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
    In query chunks (:func:`chunked_sdpa`): causal, no chunk computes its future keys.
    """
    length = q.shape[-2]

    def reversed_rows(start: int, stop: int, keys: int) -> torch.Tensor:
        # queries stop − 1 down to start over keys 0..keys − 1: entry (r, j) = per_offset[j − (stop − 1 − r) + L − 1].
        # Four dimensions: a 3-D mask sends torch's CPU dispatch to the unfused math kernel.
        return per_offset[..., length - stop:].unfold(-1, keys, 1)[None, :, :stop - start]
    return chunked_sdpa(q, k, v, reversed_rows, causal=causal, scale=scale, reverse=True)


def fused_offsets(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, per_offset: torch.Tensor, *,
                  causal: bool, scale: float, backend: str) -> torch.Tensor:
    """Fused attention with a Toeplitz bias per offset [H, 2L − 1] (T5, ALiBi) -> output [B, H, L, D]."""
    length = q.shape[-2]
    per_offset = per_offset.to(q.dtype)
    if resolve_backend(backend, q.device, min(q.shape[-1], v.shape[-1])) == "flex":
        def score_mod(score, b, h, q_idx, kv_idx):
            return score + per_offset[h, kv_idx - q_idx + length - 1]
        return _flex(q, k, v, score_mod, scale, (per_offset,), causal)
    return _sdpa_offsets(q, k, v, _causal_offsets(per_offset, length, causal), scale, causal)


def shaw_sdpa(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, rel_k: torch.Tensor, *, used: int,
              causal: bool, scale: float) -> torch.Tensor:
    """Shaw's key term as SDPA's bias, in query chunks (:func:`chunked_sdpa`).

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
    return chunked_sdpa(q, k, v, chunk_bias, causal=causal, scale=scale)


def skew_chunk_bias(q: torch.Tensor, extended: torch.Tensor, hidden: torch.Tensor, start: int, stop: int,
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


def skew_hidden(q: torch.Tensor, length: int) -> torch.Tensor:
    """The masking addend of :func:`skew_chunk_bias`: −inf × chunk, then 0 × chunk; a chunk of
    n queries reads it as hidden[chunk − n + row + column], −inf exactly where row + column < n."""
    chunk = min(_chunk_size(length), length)
    hidden = q.new_zeros(2 * chunk)
    hidden[:chunk] = float("-inf")
    return hidden
