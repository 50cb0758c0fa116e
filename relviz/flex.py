"""Compiled FlexAttention for the fused path, and the choice of backend.

``backend="auto"`` (the default of :func:`relviz.attention.offset_bias_attention`, T5 and ALiBi)
runs FlexAttention compiled with a ``score_mod`` on CUDA, where it computes the bias inside the
kernel and skips the masked blocks, and SDPA elsewhere: on CPU torch 2.13's FlexAttention has no
backward, and a per-offset bias fed to SDPA in query chunks measured 1.6-2.1x faster than compiled
FlexAttention's forward (``python -m relviz bench --only fused``). Where FlexAttention is absent
(an older torch, or no Triton for the GPU) "auto" falls back to SDPA, and so it does for a head
narrower than 16: torch's CUDA kernel for FlexAttention refuses it (``tl.dot`` needs 16 lanes; seen
on an H100 with torch 2.11, where a head of 4 raised ``NotImplementedError`` in the compile). Whether
FlexAttention is the fastest CUDA path is measured by ``scripts/gpu_check.sh``
(``python -m relviz.bench.gpu``).
"""
from __future__ import annotations

from functools import lru_cache

import torch

__all__ = ["BACKENDS", "MIN_CUDA_HEAD_DIM", "available", "resolve_backend", "compiled", "causal_block_mask",
           "flex"]

#: The backends of the fused path: "auto" picks "flex" on CUDA where FlexAttention exists, else "sdpa".
BACKENDS = ("auto", "sdpa", "flex")

#: The narrowest q/k and v head FlexAttention's CUDA kernel compiles (torch's inductor lowering refuses fewer).
MIN_CUDA_HEAD_DIM = 16

_COMPILED: dict[str, object] = {}


@lru_cache(maxsize=None)
def available(device_type: str) -> bool:
    """Whether compiled FlexAttention can run on this kind of device here (CUDA needs Triton)."""
    try:
        from torch.nn.attention.flex_attention import flex_attention  # noqa: F401
    except ImportError:
        return False
    if device_type == "cuda":
        try:
            from torch.utils._triton import has_triton
        except ImportError:
            return False
        return bool(torch.cuda.is_available() and has_triton())
    return device_type == "cpu"


def resolve_backend(backend: str, device: torch.device, head_dim: int) -> str:
    """The backend a fused call runs: "auto" -> "flex" on CUDA with FlexAttention and a head of at
    least :data:`MIN_CUDA_HEAD_DIM`, else "sdpa"."""
    if backend != "auto":
        return backend
    runs_flex = device.type == "cuda" and head_dim >= MIN_CUDA_HEAD_DIM and available("cuda")
    return "flex" if runs_flex else "sdpa"


def compiled(device_type: str):
    """flex_attention compiled once per process and device type (the compile takes seconds to a minute).

    CPU: ``dynamic=False`` (dynamic shapes do not compile on CPU in torch 2.13), so each new length
    recompiles. CUDA: torch's automatic dynamic shapes (``dynamic=None``): the first length compiles
    static and a second one compiles a kernel for any length, so a model run at many lengths does not
    hit the recompile limit (past it torch would run FlexAttention eagerly, with L × L scores).
    """
    if device_type not in _COMPILED:
        from torch.nn.attention.flex_attention import flex_attention
        _COMPILED[device_type] = torch.compile(flex_attention, dynamic=False if device_type == "cpu" else None)
    return _COMPILED[device_type]


def _future_is_hidden(b, h, q_idx, kv_idx):
    return kv_idx <= q_idx


@lru_cache(maxsize=8)
def causal_block_mask(length: int, device: str):
    """FlexAttention's causal BlockMask for [L, L]: blocks wholly in the future are skipped."""
    from torch.nn.attention.flex_attention import create_block_mask
    return create_block_mask(_future_is_hidden, None, None, length, length, device=device)


def flex(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, score_mod, scale: float,
         tables: tuple[torch.Tensor | None, ...], causal: bool) -> torch.Tensor:
    """Compiled FlexAttention with ``score_mod`` (which adds the relative term); causal: a block
    mask hides the future keys and skips the blocks above the diagonal.

    On CPU torch has FlexAttention's forward only: backward raises NotImplementedError, so a
    call that would need gradients is refused here, with the way out; so is a CUDA head narrower
    than :data:`MIN_CUDA_HEAD_DIM`, which torch's kernel refuses deep in the compile.
    """
    needs_grad = torch.is_grad_enabled() and any(t is not None and t.requires_grad for t in (q, k, v, *tables))
    if needs_grad and q.device.type == "cpu":
        raise ValueError("backend='flex' has no backward on CPU (torch raises NotImplementedError): "
                         "use backend='sdpa' for training, or run under torch.no_grad()")
    narrowest = min(q.shape[-1], v.shape[-1])
    if q.device.type == "cuda" and narrowest < MIN_CUDA_HEAD_DIM:
        raise ValueError(f"backend='flex' needs a head dim of at least {MIN_CUDA_HEAD_DIM} on CUDA (torch's "
                         f"FlexAttention kernel refuses fewer); got {narrowest}: use backend='sdpa' or 'auto'")
    block_mask = causal_block_mask(q.shape[-2], str(q.device)) if causal else None
    return compiled(q.device.type)(q, k, v, score_mod=score_mod, block_mask=block_mask, scale=scale)
