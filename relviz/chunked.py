"""Query-chunked relative attention: the memory wall moved from L² to chunk · L.

:func:`relviz.attention.skew_attention` never builds Shaw's L × L × D table, but its weights
path (need_weights=True) still holds the [B, H, L, L] logits and weights (and returns the
weights, which the app draws). For long sequences that L² · H term becomes the wall. (Its
fused default runs scaled_dot_product_attention in query chunks too; this module keeps the
softmax written out, so the memory-wall chart can show each step.) Processing the queries ``chunk`` at a
time needs only [B, H, chunk, L] of logits at once: peak extra memory grows as
chunk · L · H instead of L² · H, for the same result.

:func:`chunked_skew_attention` computes exactly ``skew_attention(q, k, v, e_r)[0]`` (the
output, not the weights: returning L × L weights would defeat the purpose). Per chunk of
queries it multiplies them by the distance table (chunk × L values per head, the Music
Transformer's Q·E_rᵀ restricted to those rows) and moves each value to its key with a
gather, the per-row equivalent of the skew.

The memory-wall chart measures it as the ``chunked`` case of :mod:`relviz.experiments.cases`, beside
the other attention implementations.

Sign convention: relative position = key index − query index (j − i).
"""
from __future__ import annotations

import math

import torch

from relviz._checks import check_int, check_tensor
from relviz.skew import distance_table

__all__ = ["chunked_skew_attention", "chunked_extra_bytes", "chunked_bytes"]


def chunked_skew_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, e_r: torch.Tensor, *,
                           chunk: int = 256, scale: float | None = None) -> torch.Tensor:
    """Causal Music Transformer attention, ``chunk`` queries at a time -> output [B, H, L, D].

    Same semantics as :func:`relviz.attention.skew_attention` (e_r [M, D], row m is distance
    m − (M − 1), distances beyond the table use e_r[0]); the same output up to float rounding.
    Query chunk [a, b) only needs keys 0..b − 1 (causal), so the largest temporary is
    [B, H, chunk, L].
    """
    for name, t in (("q", q), ("k", k), ("v", v)):
        check_tensor(name, t, ndim=4, floating=True)
    if k.shape != q.shape or v.shape != q.shape:
        raise ValueError(f"q, k and v must have one shape [B, H, L, D]; got {tuple(q.shape)}, "
                         f"{tuple(k.shape)}, {tuple(v.shape)}")
    batch, heads, length, dim = q.shape
    e_r = check_tensor("e_r", e_r, ndim=2, floating=True)
    if e_r.shape[0] < 1 or e_r.shape[1] != dim:
        raise ValueError(f"e_r must have shape [M, D] with M >= 1 and D = {dim}; got {tuple(e_r.shape)}")
    chunk = check_int("chunk", chunk, minimum=1, maximum=1 << 20)
    scale = 1.0 / math.sqrt(dim) if scale is None else float(scale)
    if not (math.isfinite(scale) and scale > 0):
        raise ValueError(f"scale must be a positive finite number; got {scale!r}")

    table = distance_table(e_r, length)                              # [L, D]
    q = q * scale
    out = torch.empty_like(v)
    for start in range(0, length, chunk):
        stop = min(start + chunk, length)
        q_chunk = q[..., start:stop, :]                              # [B, H, c, D]
        keys = stop                                                  # causal: keys 0..stop − 1
        rel = torch.matmul(q_chunk, table.transpose(0, 1))           # [B, H, c, L], column = distance + L − 1
        i = torch.arange(start, stop, device=q.device)[:, None]
        j = torch.arange(keys, device=q.device)[None, :]
        column = (j - i + length - 1).clamp(max=length - 1)          # future keys: any column (masked below)
        logits = torch.gather(rel, -1, column.expand(batch, heads, stop - start, keys))
        del rel
        logits = logits.add_(torch.matmul(q_chunk, k[..., :keys, :].transpose(-2, -1)))
        logits = logits.masked_fill_(j > i, float("-inf"))
        out[..., start:stop, :] = torch.matmul(torch.softmax(logits, dim=-1), v[..., :keys, :])
        del logits
    return out


def chunked_extra_bytes(length: int, *, chunk: int, batch: int, heads: int, dtype_bytes: int = 4) -> int:
    """The chunked path's largest temporaries: ~3 tensors of [B, H, chunk, L] (relative
    logits, logits, weights) — chunk · L · H, against L² · H for whole-sequence attention."""
    return 3 * batch * heads * min(chunk, length) * length * dtype_bytes


def chunked_bytes(length: float, *, chunk: int, batch: int, heads: int, dim: int, dtype_bytes: int = 4) -> float:
    """The chunked forward's working set: its temporaries (:func:`chunked_extra_bytes`) plus q, k,
    v and the output ([B, H, L, D] each). Linear in L."""
    return (chunked_extra_bytes(length, chunk=chunk, batch=batch, heads=heads, dtype_bytes=dtype_bytes)
            + 4 * batch * heads * length * dim * dtype_bytes)
