"""Argument checks shared by every public function.

Validation lives here, once, so that every bad argument gets the same kind of message:
which parameter was wrong, what it was, and what is allowed.
"""
from __future__ import annotations

import numbers
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # imported where used: check_int/check_bool serve torch-free modules too
    import torch


def check_int(name: str, value: object, *, minimum: int | None = None,
              maximum: int | None = None) -> int:
    """Return ``value`` as an int, or raise ValueError naming ``name`` and the allowed range."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise ValueError(f"{name} must be an integer{_range_text(minimum, maximum)}; got {value!r}")
    value = int(value)
    if (minimum is not None and value < minimum) or (maximum is not None and value > maximum):
        raise ValueError(f"{name} must be an integer{_range_text(minimum, maximum)}; got {value}")
    return value


def _range_text(minimum: int | None, maximum: int | None) -> str:
    if minimum is not None and maximum is not None:
        return f" from {minimum} to {maximum}"
    if minimum is not None:
        return f" >= {minimum}"
    if maximum is not None:
        return f" <= {maximum}"
    return ""


def check_bool(name: str, value: object) -> bool:
    if not isinstance(value, bool):
        raise ValueError(f"{name} must be True or False; got {value!r}")
    return value


def resolve_device(device: torch.device | str | None) -> torch.device:
    """None means the default device (CUDA when available); anything else must name a real device."""
    import torch

    if device is None:
        return default_device()
    try:
        resolved = torch.device(device)
    except (RuntimeError, TypeError) as exc:
        raise ValueError(f"device must be a torch device such as 'cpu' or 'cuda'; got {device!r}") from exc
    if resolved.type == "meta":
        raise ValueError("device 'meta' holds no values (relviz computes values): use 'cpu' or 'cuda'")
    if resolved.type != "cpu":
        # A valid name is not a usable device: torch.device("cuda") exists on a CPU-only build, and
        # the first tensor put there would fail deep inside torch (AssertionError, RuntimeError).
        try:
            torch.empty(0, device=resolved)
        except (RuntimeError, AssertionError) as exc:
            raise ValueError(f"device {device!r} is not available here: {exc}".rstrip()) from exc
    return resolved


def default_device() -> torch.device:
    """CUDA when available, else CPU: the device every core function uses unless told otherwise."""
    import torch

    return torch.device("cuda") if torch.cuda.is_available() else torch.device("cpu")


def check_tensor(name: str, value: object, *, ndim: int | None = None,
                 min_ndim: int | None = None, floating: bool = False) -> torch.Tensor:
    """Refuse non-tensors and wrong ranks with a message, before torch fails deep inside."""
    import torch

    if not isinstance(value, torch.Tensor):
        raise ValueError(f"{name} must be a torch.Tensor; got {type(value).__name__}")
    if ndim is not None and value.dim() != ndim:
        raise ValueError(f"{name} must have {ndim} dimensions; got shape {tuple(value.shape)}")
    if min_ndim is not None and value.dim() < min_ndim:
        raise ValueError(f"{name} must have at least {min_ndim} dimensions; got shape {tuple(value.shape)}")
    if floating and not value.is_floating_point():
        raise ValueError(f"{name} must be a floating-point tensor; got dtype {value.dtype}")
    return value
