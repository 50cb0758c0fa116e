"""Finding the settings of a RoPE cache: a bounded grid of bases, layouts, rotary dims and scaling rules.

Each candidate is scored on a few rows (the first positions and some far ones: the low frequencies show
only there); the first candidate that matches them exactly is confirmed on every cell. When none does,
the named mistakes of the closest candidates are tried the same way. The grid holds
len(BASES) × 2 layouts × len(PARTIAL_FACTORS) × (1 + len(SCALINGS)) candidates (3,600 for a cos cache),
about a millisecond each on the sampled rows; a partial rotary whose pass-through dims do not hold cos 1
(sin 0) in the upload is not tried (a full-rotary cache: 720 candidates).
"""
from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace

import numpy as np

from relviz.check.result import Cause, CheckResult
from relviz.check.rope import (
    LAYOUTS, ROPE_KINDS, RopeKind, RopeSettings, _angle_bound, _storage, _stored, compare, describe_scaling,
    reference_recipe, rope_settings, tolerance,
)
from relviz.check.rope_causes import COMMON_BASES, variants
from relviz.rope import RopeScaling

#: The bases tried, most common first (Llama 2 / Mistral 10^4, Llama 3 5·10^5, Qwen 10^6, ...).
BASES = (10000.0, 500000.0, 1000000.0) + tuple(b for b in COMMON_BASES if b not in (10000.0, 500000.0, 1000000.0))
#: Fractions of the head that rotate (GPT-NeoX and StableLM 0.25, Phi-2 0.4, ChatGLM 0.5).
PARTIAL_FACTORS = (1.0, 0.5, 0.25, 0.75, 0.4)
#: Scaling rules at common factors (original context: Llama 3.1's 8192, DeepSeek / GPT-OSS's 4096, ...).
SCALINGS: tuple[RopeScaling, ...] = (
    *(RopeScaling("linear", factor=f) for f in (2.0, 4.0, 8.0)),
    *(RopeScaling("yarn", factor=f, original_max_position_embeddings=o)
      for f in (2.0, 4.0, 8.0, 16.0, 32.0, 40.0) for o in (2048, 4096, 8192, 32768)),
    *(RopeScaling("llama3", factor=f, original_max_position_embeddings=8192, low_freq_factor=1.0,
                  high_freq_factor=4.0) for f in (8.0, 32.0)),
)
#: A pass-through dim's values lie this close to the kind's rest value (bfloat16 stores 1 and 0 exactly).
PASS_THROUGH_TOL = 1e-6
#: Named mistakes are tried on this many of the closest candidates.
MISTAKE_CANDIDATES = 8


def sample_rows(rows: int) -> np.ndarray:
    """The rows a candidate is scored on: the first eight and a spread to the last."""
    picks = {*range(min(rows, 8)), rows - 1, rows // 2, rows // 4, rows // 8, (3 * rows) // 4}
    return np.array(sorted(r for r in picks if 0 <= r < rows))


def candidates(kind: RopeKind, shape: tuple[int, int], sample: np.ndarray | None = None) -> Iterator[RopeSettings]:
    """The bounded grid, the most common settings first. With ``sample`` (rows of the upload), a partial
    rotary whose pass-through dims do not hold the kind's rest value (cos 1, sin 0) there is skipped."""
    width = shape[1]
    layouts = LAYOUTS if kind.laid_out else LAYOUTS[:1]
    head_dim = width if kind.laid_out else 2 * width
    rotaries = [int(head_dim * f) for f in (PARTIAL_FACTORS if kind.rest is not None else (1.0,))]
    rotaries = [r for r in dict.fromkeys(rotaries) if r >= 2 and r % 2 == 0 and (
        sample is None or kind.rest is None or np.all(np.abs(sample[:, r:] - kind.rest) <= PASS_THROUGH_TOL))]
    for scaling in (None, *SCALINGS):
        for base in BASES:
            for layout in layouts:
                for rotary in rotaries:
                    try:
                        yield rope_settings(head_dim=head_dim, base=base, rotary_dim=rotary, layout=layout,
                                            scaling=scaling, max_position_embeddings=max(shape[0], 2048))
                    except ValueError:
                        continue


def _score(kind: RopeKind, s: RopeSettings, sample: np.ndarray, rows: np.ndarray, total_rows: int,
           storage, recipe=None) -> tuple[float, float]:
    """(the fraction of the sampled cells (``sample`` = the upload's ``rows``) that ``recipe`` (default: the
    reference at ``s``) reproduces within the check's tolerance, their mean |difference|)."""
    width = sample.shape[1]
    reference = reference_recipe(s, total_rows)
    recipe = recipe if recipe is not None else reference
    built = _stored(kind.build(recipe, rows, width), storage)
    bound = _angle_bound(kind, reference, rows, width)
    if recipe is not reference:
        bound = np.maximum(bound, _angle_bound(kind, recipe, rows, width))
    gap = np.abs(built - sample)
    return float((gap <= tolerance(bound, built, storage)).mean()), float(gap.mean())


def fit(kind_name: str, got: np.ndarray) -> CheckResult:
    """The settings on the grid that reproduce ``got``; else, among the closest (mean |difference| on sampled
    rows), the first whose named mistake does; else the closest settings."""
    kind = ROPE_KINDS[kind_name]
    got = np.asarray(got, dtype=np.float64)
    if got.ndim != 2:
        raise ValueError(f"a {kind.description} is 2-D; got shape {tuple(got.shape)}")
    rows = sample_rows(got.shape[0])
    sample, total, storage = got[rows], int(got.shape[0]), _storage(got)   # once: the upload is read per search
    scored: list[tuple[float, int, RopeSettings]] = []
    for n, s in enumerate(candidates(kind, got.shape, sample)):
        share, error = _score(kind, s, sample, rows, total, storage)
        if share == 1.0:
            result = compare(kind_name, got, s, fitted=True)
            if result.ok:
                return result
        scored.append((error, n, s))
    if not scored:  # no partial rotary leaves these dims at rest: score the whole grid
        scored = [(_score(kind, s, sample, rows, total, storage)[1], n, s)
                  for n, s in enumerate(candidates(kind, got.shape))]
    if not scored:  # e.g. an odd width: no head_dim (cos, sin) or pair count (angles) gives this shape
        raise ValueError(f"no RoPE settings on the search grid give a {kind.description} of shape "
                         f"{tuple(got.shape)}: check its width (cos and sin: head_dim, even; angles: rotary_dim / 2)")
    scored.sort(key=lambda item: (item[0], item[1]))  # the closest first (mean |difference| on the sampled rows)
    for _, _, s in scored[:MISTAKE_CANDIDATES]:
        for _, recipe in variants(kind, s, int(got.shape[0])):
            if _score(kind, s, sample, rows, total, storage, recipe)[0] == 1.0:
                result = compare(kind_name, got, s, fitted=True)
                if result.cause:
                    return result
    result = compare(kind_name, got, scored[0][2], fitted=True)
    return result


def differences(found: RopeSettings, given: RopeSettings) -> list[str]:
    """How ``found`` differs from ``given``, as short phrases (what a user passes: base, dims, layout, scaling,
    the first position)."""
    out = []
    if found.base != given.base:
        out.append(f"base = {found.base:g}, not {given.base:g}")
    if found.rotary_dim != given.rotary_dim:
        out.append(f"rotary_dim = {found.rotary_dim}, not {given.rotary_dim}")
    if found.layout != given.layout:
        out.append(f"layout {found.layout}, not {given.layout}")
    if describe_scaling(found.config.scaling) != describe_scaling(given.config.scaling):
        out.append(f"scaling {describe_scaling(found.config.scaling)}, not {describe_scaling(given.config.scaling)}")
    if found.q_offset != given.q_offset:
        out.append(f"first position {found.q_offset}, not {given.q_offset}")
    return out


WHY = {"base": "rope_theta was not passed on (a default of 10000 is the usual culprit).",
       "rotary_dim": "partial_rotary_factor (rotary_dim) was not passed on.",
       "layout": "The pair layout differs: adjacent pairs (2i, 2i + 1) against rotate_half's (i, i + d/2).",
       "scaling": "The scaling rule differs: rope_scaling / rope_parameters was not applied as the config says.",
       "first": "The positions start elsewhere."}


def explain(result: CheckResult, given: RopeSettings) -> CheckResult:
    """Fit, then explain, for a RoPE mismatch no named mistake reproduces: the settings search over the upload;
    settings that reproduce it exactly (or with one named mistake) are the cause, said as their differences from
    ``given``. Otherwise the result is returned as it was."""
    if result.ok or result.causes or not given.rotates:
        return result
    try:
        found = fit(result.kind, result.got)
    except ValueError:
        return result
    if not (found.ok or found.causes):
        return result
    phrases = differences(found.settings, given)
    if not phrases:
        return result  # the same settings: the named mistakes were tried already
    extra = found.cause
    kind = ROPE_KINDS[result.kind]
    name = " + ".join(phrases + ([extra.name] if extra else []))
    text = (f"Your cache is relviz's {kind.description} with " + "; ".join(phrases)
            + (f", and {extra.name}" if extra else "") + ": that reproduces every cell. "
            + " ".join(why for key, why in WHY.items() if any(p.startswith(key) for p in phrases))
            + (f" {extra.explanation}" if extra else ""))
    return replace(result, causes=(Cause(name, text.strip(), False, 1.0),), closest=None)
