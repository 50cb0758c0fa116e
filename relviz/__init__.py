"""relviz: see how transformers encode relative position.

The library computes the matrices the app draws (relative index, Shaw clip index, T5
buckets, ALiBi bias), the Music Transformer skew, and functional relative attention.
It never imports streamlit, so researchers can use it on its own.
"""
from relviz._checks import default_device

__all__ = ["default_device"]
__version__ = "0.1.0"
