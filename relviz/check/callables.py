"""Calling a user's own function with the reference inputs, so its output can be checked.

``python -m relviz check --callable FILE.py:NAME --kind KIND`` and relviz.testing import a function from
the user's own file and call it as the kind's ``signature`` documents (e.g. T5:
``fn(relative_position, bidirectional, num_buckets, max_distance) -> buckets``). This runs the user's
code in the user's own process: the command line and the library only. The app never imports or runs
code a visitor sends.
"""
from __future__ import annotations

import importlib.util
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from relviz.check.api import REGISTRY
from relviz.check.registry import kind_of

#: Longest sequence a function is called with (its output is checked cell by cell).
MAX_LENGTH = 65536


def load_callable(spec: str) -> Callable[..., Any]:
    """The function NAME (dotted names reach into classes: ``T5Attention._relative_position_bucket``)
    defined in FILE.py, from ``"FILE.py:NAME"``. Importing the file runs it: only your own code."""
    if not isinstance(spec, str) or ":" not in spec:
        raise ValueError(f"callable must be FILE.py:NAME (e.g. my_rope.py:build_cache); got {spec!r}")
    path_text, _, name = spec.rpartition(":")
    path = Path(path_text)
    if path.suffix != ".py" or not path.is_file():
        raise ValueError(f"callable's FILE must be an existing .py file; got {path_text!r}")
    if not name or not all(part.isidentifier() for part in name.split(".")):
        raise ValueError(f"callable's NAME must be a Python name (dotted for a class's method); got {name!r}")
    module_name = f"_relviz_user_{abs(hash(path.resolve()))}"
    loader_spec = importlib.util.spec_from_file_location(module_name, path)
    module = importlib.util.module_from_spec(loader_spec)
    sys.path.insert(0, str(path.resolve().parent))  # the file may import its neighbours
    try:
        loader_spec.loader.exec_module(module)
    except Exception as exc:  # noqa: BLE001 - whatever the user's file raises is reported, not re-raised
        raise ValueError(f"importing {path} raised {type(exc).__name__}: {exc}") from exc
    finally:
        sys.path.remove(str(path.resolve().parent))
    target: Any = module
    for part in name.split("."):
        if not hasattr(target, part):
            raise ValueError(f"{path} defines no {name!r}")
        target = getattr(target, part)
    if not callable(target):
        raise ValueError(f"{name} in {path} is a {type(target).__name__}, not a function")
    return target


def to_array(value: Any, what: str) -> np.ndarray:
    """A tensor, array or nested list as float64/int64 numpy, leading size-1 dims (batch, head) dropped."""
    if hasattr(value, "detach") and hasattr(value, "cpu"):  # a torch tensor (bfloat16 included)
        value = value.detach().cpu()
        value = value.double() if value.is_floating_point() else value
        value = value.numpy()
    if isinstance(value, (str, bytes, dict)) or value is None:
        raise ValueError(f"{what} returned {type(value).__name__}; expected a tensor or an array")
    try:
        array = np.asarray(value)
    except (ValueError, TypeError) as exc:
        raise ValueError(f"{what} returned something that is not an array: {exc}") from None
    if array.dtype.kind not in "iuf":
        raise ValueError(f"{what} returned an array of dtype {array.dtype}; expected numbers")
    while array.ndim > 2 and array.shape[0] == 1:
        array = array[0]
    return array.astype(np.float64) if array.dtype.kind == "f" else array.astype(np.int64)


def call(kind: str, fn: Callable[..., Any], settings: Any, length: int) -> np.ndarray:
    """Call ``fn`` for ``kind`` as its documented signature says; the array it produced."""
    spec = kind_of(kind)
    if spec.invoke is None:
        raise ValueError(f"kind {kind!r} has no documented signature for a function")
    if isinstance(length, bool) or not isinstance(length, int) or not 1 <= length <= MAX_LENGTH:
        raise ValueError(f"seq_len must be an integer from 1 to {MAX_LENGTH}; got {length!r}")
    name = getattr(fn, "__qualname__", repr(fn))
    try:
        out = spec.invoke(fn, settings, length)
    except Exception as exc:  # noqa: BLE001 - the user's code: report what it raised
        raise ValueError(f"your function {name} raised {type(exc).__name__}: {exc}") from exc
    return to_array(out, f"your function {name} (expected {spec.signature})")


def signatures() -> dict[str, str]:
    """kind -> the signature relviz calls a function of that kind with."""

    return {name: kind.signature for name, kind in REGISTRY.items() if kind.signature}
