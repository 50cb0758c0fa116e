"""The naive references relviz's fast paths are proven and measured against.

- :func:`t5_bucket_map_per_cell`: T5's bucket formula (Mesh TensorFlow / Hugging Face
  ``_relative_position_bucket``) evaluated on every cell of an L × L matrix, where relviz
  computes 2L − 1 offsets and expands them (``relviz.positions.t5_bucket_map``).
- :func:`naive_skew_attention` and :func:`naive_shaw_attention`: relative attention that
  gathers the relative embeddings into an L × L × D tensor (``relviz.skew.gather_relative``,
  Shaw et al. 2018's formulation taken literally), where relviz's attention never builds it.

The benchmark (``python -m relviz bench``), the experiments' cost study and the chunked
attention's checks use these; the tests keep their own independent transcriptions.

Sign convention: relative position = key index − query index (j − i).
"""
from __future__ import annotations

import math

import torch

from relviz.positions import relative_positions, shaw_clip_index
from relviz.skew import gather_relative

__all__ = ["t5_bucket_map_per_cell", "naive_skew_attention", "naive_shaw_attention"]


def t5_bucket_map_per_cell(relative_position: torch.Tensor, num_buckets: int = 32,
                           max_distance: int = 128, bidirectional: bool = True) -> torch.Tensor:
    """T5's reference formula (Mesh TensorFlow / Hugging Face) transcribed plainly, per cell.

    relative_position: the full [L, L] matrix of key − query offsets. Float32 log, truncation
    toward zero, exactly as Hugging Face's ``T5Attention._relative_position_bucket`` does it.
    """
    relative_buckets = torch.zeros_like(relative_position)
    if bidirectional:
        num_buckets //= 2
        relative_buckets += (relative_position > 0).to(torch.long) * num_buckets
        relative_position = torch.abs(relative_position)
    else:
        relative_position = -torch.min(relative_position, torch.zeros_like(relative_position))
    max_exact = num_buckets // 2
    is_small = relative_position < max_exact
    relative_position_if_large = max_exact + (
        torch.log(relative_position.float() / max_exact)
        / math.log(max_distance / max_exact)
        * (num_buckets - max_exact)
    ).to(torch.long)
    relative_position_if_large = torch.min(
        relative_position_if_large, torch.full_like(relative_position_if_large, num_buckets - 1))
    relative_buckets += torch.where(is_small, relative_position, relative_position_if_large)
    return relative_buckets


def _causal_softmax(logits: torch.Tensor) -> torch.Tensor:
    """Softmax over keys with keys j > i masked out: [..., L, L] -> weights."""
    length = logits.shape[-1]
    future = torch.ones(length, length, dtype=torch.bool, device=logits.device).triu(1)
    return torch.softmax(logits.masked_fill(future, float("-inf")), dim=-1)


def naive_skew_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, e_r: torch.Tensor,
                         scale: float) -> tuple[torch.Tensor, torch.Tensor]:
    """skew_attention's result the naive way: gather e_r per (i, j) into L × L × D.

    q, k, v [B, H, L, D]; e_r [M >= L, D], row m is distance m − (M − 1). Causal.
    """
    length = q.shape[-2]
    table = e_r[e_r.shape[0] - length:]                                   # distances −(L−1)..0
    index = relative_positions(length, device=q.device).clamp(max=0) + (length - 1)   # [L, L]
    logits = (q @ k.transpose(-2, -1) + gather_relative(q, table, index)) * scale     # [B, H, L, L]
    weights = _causal_softmax(logits)
    return weights @ v, weights


def naive_shaw_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, rel_k: torch.Tensor,
                         rel_v: torch.Tensor, clip: int, scale: float) -> tuple[torch.Tensor, torch.Tensor]:
    """Causal shaw_attention the naive way: a^K and a^V gathered into L × L × D each."""
    length = q.shape[-2]
    index = shaw_clip_index(length, k=clip, device=q.device)                          # [L, L]
    logits = (q @ k.transpose(-2, -1) + gather_relative(q, rel_k, index)) * scale     # [B, H, L, L]
    weights = _causal_softmax(logits)
    output = weights @ v + torch.einsum("bhij,ijd->bhid", weights, rel_v[index])      # [B, H, L, D]
    return output, weights
