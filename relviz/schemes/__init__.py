"""Position schemes: one module per scheme, found by :mod:`relviz.schemes.registry`.

A new scheme is one new file here: the model (ModelConfig / build_model), ``python -m relviz
train --scheme NAME`` with its flags, checkpoints, ``python -m relviz schemes``, the in-app
training guard and the Live attention page all read the registry. The names below load with
their module on first use (:mod:`relviz._lazy`), so this package's body imports nothing.
"""
from __future__ import annotations

from relviz._lazy import lazy_exports

__all__, __getattr__, __dir__ = lazy_exports(__name__, {
    "base": ("Param", "Scheme"),
    "registry": ("REGISTRY", "get_scheme", "scheme_names", "all_params", "param_owner"),
    "view_kinds": ("PositionStructure", "BiasCurve", "VectorNorms", "SimilarityMatrix", "View"),
})
