"""Position mechanisms of real and toy models: one module each, found by
:mod:`relviz.mechanisms.registry`.

Every module of this package is imported, and every :class:`~relviz.mechanisms.base.Mechanism` subclass
it defines with a ``name`` is registered. The family table (``families.py``) names mechanisms by these
names; ``relviz.model_plan.read_plan`` asks each to read itself for each layer. A new mechanism is one new file
here (its ``read``, its math, its words); a family that uses it names it in the table.
"""
from __future__ import annotations

from relviz._lazy import lazy_exports

# Names load with their module on first use (relviz/_lazy.py), so this package's body imports nothing.
__all__, __getattr__, __dir__ = lazy_exports(__name__, {
    "base": ("Mechanism", "ConfigView", "LayerContext"),
    "registry": ("MECHANISMS", "get_mechanism"),
})
