"""relviz: see how transformers encode relative position.

The library computes the matrices the app draws (relative index, Shaw clip index, T5
buckets, ALiBi bias), the Music Transformer skew, and functional relative attention;
``relviz.show`` gives the app's pictures as plain Plotly figures for a notebook.
It never imports streamlit and changes nothing global when imported, so researchers can use it\non its own.
"""
from __future__ import annotations

import importlib
from typing import Any

__all__ = ["default_device", "show", "__version__"]
__version__ = "0.1.0"


def __getattr__(name: str) -> Any:
    """Load on first use (PEP 562), so ``import relviz`` and ``relviz --version`` do not pay
    for importing torch, and ``relviz.show`` works after a plain ``import relviz``."""
    if name == "default_device":
        from relviz._checks import default_device
        return default_device
    if name == "show":
        return importlib.import_module("relviz.show")
    raise AttributeError(f"module 'relviz' has no attribute {name!r}")
