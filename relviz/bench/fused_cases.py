"""The fused bench section's cases: each attention function as a table entry (its tables, relviz's
call, the bias an SDPA user prebuilds, FlexAttention's score_mod) and each implementation beside it.

relviz.bench.fused times and measures them (``python -m relviz bench --only fused``).
Sign convention: relative position = key index − query index (j − i).
"""
from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F

from relviz import attention
from relviz.positions import alibi_bias, alibi_slopes, shaw_clip_index, t5_bias, t5_bias_offsets
from relviz.skew import skew

__all__ = ["B", "H", "D", "Function", "FUNCTIONS", "Impl", "IMPLS", "FLEX_IMPLS", "inputs", "impl_call"]

#: The shape every case runs at: batch, heads, head width (fp32, causal).
B, H, D = 1, 8, 64

# ---------------------------------------------------------------------------------------
# The attention cases: each function's tables and terms, and each implementation as a zero-argument call

Tables = dict[str, Any]


@dataclass(frozen=True)
class Function:
    """One attention function of the fused section (a value of :data:`FUNCTIONS`).

    ``tables(gen, length)``: its position tables; ``relviz(x, **mode)``: relviz's call (``mode``:
    need_weights or backend); ``bias(x)``: the relative term an SDPA user prebuilds, [1 or B, H, L, L]
    before the causal mask; ``score_mod(x)``: the same term as a FlexAttention score_mod."""

    tables: Callable[[torch.Generator, int], Tables]
    relviz: Callable[..., Callable[[], torch.Tensor]]
    bias: Callable[[Tables], torch.Tensor]
    score_mod: Callable[[Tables], Callable[..., torch.Tensor]]
    per_query: bool = False      # the term depends on q: its bias is [B, H, L, L], not [1, H, L, L]
    value_term: bool = False     # Shaw's a^V needs every weight: no fused kernel (SDPA, FlexAttention) adds it


def _t5_tables(gen: torch.Generator, length: int) -> Tables:
    return {"table": torch.randn(32, H, generator=gen)}                    # [num_buckets, H]


def _skew_tables(gen: torch.Generator, length: int) -> Tables:
    return {"e_r": torch.randn(length, D, generator=gen) * 0.1}            # [L, D]


def _shaw_tables(with_values: bool) -> Callable[[torch.Generator, int], Tables]:
    def tables(gen: torch.Generator, length: int) -> Tables:
        clip = 64
        rel_k = torch.randn(2 * clip + 1, D, generator=gen) * 0.1           # [2·clip + 1, D]
        rel_v = torch.randn(2 * clip + 1, D, generator=gen) * 0.1 if with_values else None
        return {"clip": clip, "rel_k": rel_k, "rel_v": rel_v}
    return tables


def _t5_relviz(x: Tables, **mode) -> Callable[[], torch.Tensor]:
    return lambda: attention.t5_attention(x["q"], x["k"], x["v"], x["table"], num_buckets=32, max_distance=128,
                                          bidirectional=False, causal=True, **mode)[0]


def _alibi_relviz(x: Tables, **mode) -> Callable[[], torch.Tensor]:
    return lambda: attention.alibi_attention(x["q"], x["k"], x["v"], causal=True, **mode)[0]


def _skew_relviz(x: Tables, **mode) -> Callable[[], torch.Tensor]:
    return lambda: attention.skew_attention(x["q"], x["k"], x["v"], x["e_r"], **mode)[0]


def _shaw_relviz(x: Tables, **mode) -> Callable[[], torch.Tensor]:
    return lambda: attention.shaw_attention(x["q"], x["k"], x["v"], x["rel_k"], x["rel_v"], clip=x["clip"],
                                            causal=True, **mode)[0]


def _t5_bias(x: Tables) -> torch.Tensor:
    return t5_bias(x["table"], x["q"].shape[-2], num_buckets=32, max_distance=128, bidirectional=False)[None]


def _alibi_bias(x: Tables) -> torch.Tensor:
    return alibi_bias(x["q"].shape[-2], num_heads=H, device="cpu")[None]


def _skew_bias(x: Tables) -> torch.Tensor:
    return skew((x["q"] / math.sqrt(D)) @ x["e_r"].transpose(0, 1))


def _shaw_bias(x: Tables) -> torch.Tensor:
    length = x["q"].shape[-2]
    index = shaw_clip_index(length, k=x["clip"], device="cpu")
    return torch.gather((x["q"] / math.sqrt(D)) @ x["rel_k"].transpose(0, 1), -1, index.expand(B, H, length, length))


def _t5_score_mod(x: Tables) -> Callable[..., torch.Tensor]:
    length = x["q"].shape[-2]
    per_offset = t5_bias_offsets(x["table"], length, num_buckets=32, max_distance=128, bidirectional=False)

    def score_mod(score, b, h, q_idx, kv_idx):
        return score + per_offset[h, kv_idx - q_idx + length - 1]
    return score_mod


def _alibi_score_mod(x: Tables) -> Callable[..., torch.Tensor]:
    slopes = alibi_slopes(H, device="cpu")

    def score_mod(score, b, h, q_idx, kv_idx):
        return score - slopes[h] * (q_idx - kv_idx).abs()
    return score_mod


def _skew_score_mod(x: Tables) -> Callable[..., torch.Tensor]:
    length = x["q"].shape[-2]
    qer = (x["q"] / math.sqrt(D)) @ x["e_r"].transpose(0, 1)              # [B, H, L, L], column = distance + L − 1

    def score_mod(score, b, h, q_idx, kv_idx):
        return score + qer[b, h, q_idx, (kv_idx - q_idx + length - 1).clamp(max=length - 1)]
    return score_mod


def _shaw_score_mod(x: Tables) -> Callable[..., torch.Tensor]:
    clip = x["clip"]
    rel_logits = (x["q"] / math.sqrt(D)) @ x["rel_k"].transpose(0, 1)     # [B, H, L, 2·clip + 1]

    def score_mod(score, b, h, q_idx, kv_idx):
        return score + rel_logits[b, h, q_idx, (kv_idx - q_idx).clamp(-clip, clip) + clip]
    return score_mod


#: The fused section's functions, in the order of its rows.
FUNCTIONS: dict[str, Function] = {
    "t5": Function(_t5_tables, _t5_relviz, _t5_bias, _t5_score_mod),
    "alibi": Function(lambda gen, length: {}, _alibi_relviz, _alibi_bias, _alibi_score_mod),
    "skew": Function(_skew_tables, _skew_relviz, _skew_bias, _skew_score_mod, per_query=True),
    "shaw": Function(_shaw_tables(False), _shaw_relviz, _shaw_bias, _shaw_score_mod, per_query=True),
    "shaw_kv": Function(_shaw_tables(True), _shaw_relviz, _shaw_bias, _shaw_score_mod, per_query=True,
                        value_term=True),
}


def inputs(function: Function, length: int) -> Tables:
    gen = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(B, H, length, D, generator=gen) for _ in range(3))   # [B, H, L, D]
    return {"q": q, "k": k, "v": v} | function.tables(gen, length)


def _prebuilt_bias(function: Function, x: Tables) -> torch.Tensor:
    """The bias a user would hand to SDPA, built outside the timing: [1 or B, H, L, L], −inf above
    the diagonal (causal). For Shaw and skew the relative term depends on q: [B, H, L, L]."""
    length = x["q"].shape[-2]
    future = torch.ones(length, length, dtype=torch.bool).triu(1)
    return function.bias(x).masked_fill(future, float("-inf")).contiguous()


def _sdpa_call(function: Function, x: Tables, causal: bool) -> Callable[[], torch.Tensor]:
    """SDPA with the bias prebuilt; ``causal``: is_causal=True beside it, which torch 2.13's CPU flash kernel
    accepts beside attn_mask (the math fallback refuses it): it applies both and skips the key blocks past
    each query block (faster from L = 1024)."""
    bias = _prebuilt_bias(function, x)
    return lambda: F.scaled_dot_product_attention(x["q"], x["k"], x["v"], attn_mask=bias, is_causal=causal)


def _flex_call(function: Function, x: Tables) -> Callable[[], torch.Tensor]:
    """What a FlexAttention user writes: the relative term in a score_mod (per offset for T5 and
    ALiBi, per query row for skew and Shaw), causality as a block mask (future blocks skipped)."""
    from torch.nn.attention.flex_attention import create_block_mask, flex_attention

    length = x["q"].shape[-2]
    score_mod = function.score_mod(x)
    block_mask = create_block_mask(lambda b, h, q_idx, kv_idx: kv_idx <= q_idx, None, None, length, length,
                                   device="cpu")
    compiled = torch.compile(flex_attention, dynamic=False)
    return lambda: compiled(x["q"], x["k"], x["v"], score_mod=score_mod, block_mask=block_mask, scale=1 / math.sqrt(D))


@dataclass(frozen=True)
class Impl:
    """One implementation of the fused section: ``call(function, x)`` gives its zero-argument call."""

    call: Callable[[Function, Tables], Callable[[], torch.Tensor]]
    fused: bool = True           # a fused kernel: cannot add a value term (Function.value_term)
    compiles: bool = False       # torch.compile's FlexAttention: left out by --no-flex and --quick


#: The implementations, in the order of the section's columns.
IMPLS: dict[str, Impl] = {
    "relviz": Impl(lambda f, x: f.relviz(x), fused=False),
    "sdpa_prebuilt": Impl(lambda f, x: _sdpa_call(f, x, causal=False)),
    "sdpa_causal": Impl(lambda f, x: _sdpa_call(f, x, causal=True)),
    "flex": Impl(_flex_call, compiles=True),
    "relviz_flex": Impl(lambda f, x: f.relviz(x, backend="flex"), compiles=True),
    "weights": Impl(lambda f, x: f.relviz(x, need_weights=True), fused=False),
}
#: The implementations that torch.compile FlexAttention (left out by --no-flex and --quick).
FLEX_IMPLS = tuple(name for name, impl in IMPLS.items() if impl.compiles)


def impl_call(function: Function, impl: Impl, x: Tables) -> Callable[[], torch.Tensor] | None:
    """``impl``'s call for ``function``; None where a fused kernel cannot compute it."""
    return None if impl.fused and function.value_term else impl.call(function, x)
