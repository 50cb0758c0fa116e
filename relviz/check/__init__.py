"""Check my implementation: compare what your code produced with relviz's reference, and name the mistake.

A kind is what the code produced (a relative index, T5's bucket map, ALiBi slopes, a RoPE cos cache,
...); each is registered (relviz.check.registry) by the module that knows it:

- relviz.check.matrix_kinds: the position matrices (engine: relviz.check.matrix);
- relviz.check.rope: RoPE's cos and sin caches and its angles (causes: rope_causes; search: rope_fit).

A cause is named only when relviz has *computed* that mistake for the same settings and found that it
reproduces the upload on every compared cell; it is never a guess. Uploads are read by
relviz.check.reading (never a pickle); a user's own function is called by relviz.check.callables.
"""
from __future__ import annotations

from relviz._lazy import lazy_exports

# Names load with their module on first use (relviz/_lazy.py: a package body that imported its own
# modules would close an import cycle). What reads the kind registry comes through api, which
# imports the modules that register the kinds.
__all__, __getattr__, __dir__ = lazy_exports(__name__, {
    "api": ("KINDS", "SETTINGS_OF", "check", "load", "REGISTRY", "Kind", "kind_of", "MAX_HEADS", "SEED_NOTEBOOK",
            "SIGN"),
    "matrix": ("FitWork", "Settings", "fit", "reference", "variant_matrix"),
    "reading": ("MAX_BYTES", "MAX_SIDE", "load_matrix", "parse_text"),
    "result": ("FIRST_MISMATCHES", "Cause", "CheckResult", "Mismatch"),
    "rope": ("RopeSettings", "rope_settings"),
    "rope_model": ("settings_from_config",),
})
