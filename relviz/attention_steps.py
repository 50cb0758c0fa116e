"""The steps every function of :mod:`relviz.attention` shares: checking q, k, v, the tables, the scale
and the mode; the softmax step of the weights path (mask, softmax, weight v); refusing non-finite
logits and outputs.

The finite checks read two numbers back to the host (a host-device sync on a GPU), so they run only
at the public boundary: the steps take ``validate`` and the model's schemes pass False.

Its own module because the public functions, the fused kernels (:mod:`relviz.attention_fused`) and
the model's schemes (``relviz.schemes.base``) all use these steps, and each is written once.
Shapes: q, k, v [B, H, L, D]; logits and weights [B, H, L, L].
"""
from __future__ import annotations

import math
import numbers

import torch

from relviz._checks import check_bool, check_tensor
from relviz.flex import BACKENDS

#: (output [B, H, L, D_head], weights [B, H, L, L] or None), as every relviz.attention function returns:
#: weights only when asked for (need_weights=True), None on the fused path.
Attention = tuple[torch.Tensor, torch.Tensor | None]

def check_qkv(q: object, k: object, v: object) -> tuple[int, int, int, int]:
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


def check_table(name: str, table: object, q: torch.Tensor, rows: int, cols: int,
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


def resolve_scale(scale: float | None, dim: int) -> float:
    """The scale a call runs with: None means 1/sqrt(D)."""
    return 1.0 / math.sqrt(dim) if scale is None else float(scale)


def check_scale(scale: object, dim: int) -> float:
    """None means 1/sqrt(D); anything else must be a positive finite real number."""
    if scale is None:
        return resolve_scale(scale, dim)
    if isinstance(scale, bool) or not isinstance(scale, numbers.Real) \
            or not math.isfinite(float(scale)) or float(scale) <= 0:
        raise ValueError(f"scale must be None (meaning 1/sqrt(D)) or a positive finite number; got {scale!r}")
    return float(scale)


def plus_scores(relative: torch.Tensor, q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
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


def check_finite_output(output: torch.Tensor) -> torch.Tensor:
    if not _all_finite(output):
        raise ValueError("v (and rel_v) must hold finite values: the attention output is not finite")
    return output


def softmax_output(logits: torch.Tensor, v: torch.Tensor, causal: bool, *, validate: bool = True,
                   ) -> tuple[torch.Tensor, torch.Tensor]:
    """Mask (in place: logits [B, H, L, L] is always a fresh tensor here), softmax over keys, weight
    v [B, H, L, D] -> (output [B, H, L, D], weights [B, H, L, L]).

    Non-finite logits would come out of the softmax as NaN weights (inf − inf), so ``validate``
    refuses them here, before masking: NaN or inf in q or k, or scale · q · k too large for the
    dtype; and a non-finite output (NaN or inf in v).
    """
    if validate and not _all_finite(logits):
        raise ValueError(
            f"the attention logits are not finite: q and k (and the relative table) must hold finite "
            f"values, and scale · q · k must fit in {str(logits.dtype).removeprefix('torch.')}; "
            f"lower the scale or the inputs' magnitude")
    if causal:
        length = logits.shape[-1]
        future = torch.ones(length, length, dtype=torch.bool, device=logits.device).triu(1)
        logits = logits.masked_fill_(future, float("-inf"))
    weights = torch.softmax(logits, dim=-1)
    output = torch.matmul(weights, v)                                          # [B, H, L, D]
    return (check_finite_output(output) if validate else output), weights


# ---------------------------------------------------------------------------------------
# The mode, and the fused path's finite checks


def check_mode(need_weights: object, backend: object) -> tuple[bool, str]:
    """need_weights a bool; backend one of BACKENDS, and not 'flex' with need_weights (flex has no weights)."""
    need_weights = check_bool("need_weights", need_weights)
    if backend not in BACKENDS:
        raise ValueError(f"backend must be one of {', '.join(repr(b) for b in BACKENDS)}; got {backend!r}")
    if need_weights and backend == "flex":
        raise ValueError(f"backend={backend!r} is a fused path, which has no weights: with need_weights=True "
                         "the exact weights path runs, so leave backend at 'auto' or 'sdpa'")
    return need_weights, backend


def check_finite_tables(*tables: torch.Tensor | None) -> None:
    """The weights path refuses non-finite logits; the fused path never sees them. A −inf in a
    (small) relative table would silently mask keys, so the tables are checked here; NaN or
    infinity in q, k or v reaches the output, which :func:`fused_output` refuses."""
    if not all(_all_finite(t) for t in tables if t is not None and t.numel()):
        raise ValueError("the relative tables (rel_k, rel_v, e_r, bias_table, per_offset) must hold finite values")


def fused_output(output: torch.Tensor, *, validate: bool = True) -> torch.Tensor:
    """The fused path's last step: the output [B, H, L, D], refused (``validate``) when it is not finite."""
    if validate and not _all_finite(output):
        raise ValueError(
            f"the attention output is not finite: q, k and v must hold finite values, and scale · q · k "
            f"must fit in {str(output.dtype).removeprefix('torch.')}; lower the scale or the inputs' magnitude")
    return output


def future_mask(length: int, device: torch.device) -> torch.Tensor:
    """[L, L] bool, True where key j lies after query i (the cells a causal model masks)."""
    return torch.ones(length, length, dtype=torch.bool, device=device).triu(1)


def dot_product_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, *, causal: bool,
                          scale: float | None = None, bias: torch.Tensor | None = None,
                          need_weights: bool = False) -> Attention:
    """softmax(scale · q kᵀ + bias) v for [B, H, L, D] inputs -> (output, weights [B, H, L, L] or None).

    need_weights=False (training, evaluation): F.scaled_dot_product_attention, the fused kernel,
    with the causal mask folded into the bias. need_weights=True (the app draws the weights):
    written out, so the weights exist. Causal: keys j > i get −inf, hence weight exactly 0.
    ``bias``: [H, L, L] or broadcastable.

    For the toy model's forward (a mechanism's ``attend``), which validated its config and tokens
    once: nothing is checked here, and nothing is read back from the device.
    """
    if not need_weights:
        if bias is not None and causal:
            bias = bias.masked_fill(future_mask(q.shape[-2], q.device), float("-inf"))
        if bias is not None and bias.dim() < 4:
            bias = bias.expand(*(1,) * (4 - bias.dim()), *bias.shape)   # 4-D: torch's fused CPU kernel takes it
        output = torch.nn.functional.scaled_dot_product_attention(
            q, k, v, attn_mask=bias, is_causal=causal and bias is None, scale=scale)
        return output, None
    scale = 1.0 / math.sqrt(q.shape[-1]) if scale is None else scale
    logits = torch.matmul(q * scale, k.transpose(-2, -1))                     # [B, H, L, L]
    if bias is not None:
        logits = logits + bias
    return softmax_output(logits, v, causal, validate=False)
