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
    ROPE_KINDS, Recipe, RopeKind, RopeSettings, _angle_bound, _reproduces, _storage, _stored, compare,
    describe_scaling, proof, reference_recipe, rope_settings, stored_in, tolerance,
)
from relviz.check.rope_causes import COMMON_BASES, variants
from relviz.check.rope_derive import derive
from relviz.rope.config import RopeScaling
from relviz.rope.math import CACHE_LAYOUTS, rope_parameters

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
    layouts = CACHE_LAYOUTS if kind.laid_out else CACHE_LAYOUTS[:1]
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


def fit(kind_name: str, got: np.ndarray, *, read_first: bool = False) -> CheckResult:
    """The settings read from ``got`` or on the grid that reproduce it; else, among the closest (mean |difference|
    on sampled rows), the first whose named mistake does; else the closest settings. A first position other than 0
    is read only with ``read_first`` (explaining a mismatch against given settings): a bare fit assumes row 0 is
    position 0, so positions from 1 stay a named mistake."""
    kind = ROPE_KINDS[kind_name]
    got = np.asarray(got, dtype=np.float64)
    if got.ndim != 2:
        raise ValueError(f"a {kind.description} is 2-D; got shape {tuple(got.shape)}")
    rows = sample_rows(got.shape[0])
    sample, total, storage = got[rows], int(got.shape[0]), _storage(got)   # once: the upload is read per search
    for s in derive(kind_name, got):   # settings read from the data first: no grid holds base 31337 or offset 7
        if s.q_offset and not read_first:
            continue
        if _score(kind, s, sample, rows, total, storage)[0] == 1.0:
            result = compare(kind_name, got, s, fitted=True)
            if result.ok or (storage is not None and result.cause and result.cause.name == stored_in(storage)):
                return result
    scored: list[tuple[float, int, RopeSettings]] = []
    for n, s in enumerate(candidates(kind, got.shape, sample)):
        share, error = _score(kind, s, sample, rows, total, storage)
        if share == 1.0:
            result = compare(kind_name, got, s, fitted=True)
            if result.ok or (storage is not None and result.cause and result.cause.name == stored_in(storage)):
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
    if found.config.scaling != given.config.scaling:
        out.append(f"scaling {scaling_words(found.config.scaling)}, not {scaling_words(given.config.scaling)}")
    if found.q_offset != given.q_offset:
        out.append(f"first position {found.q_offset}, not {given.q_offset}")
    return out


def scaling_words(s: RopeScaling) -> str:
    """A scaling rule with the parameters the search reads (Llama 3's frequency factors, LongRoPE's per pair)."""
    words = describe_scaling(s)
    if s.rope_type == "llama3":
        words += f" (low_freq_factor {s.low_freq_factor:g}, high_freq_factor {s.high_freq_factor:g})"
    if s.rope_type == "longrope" and s.short_factor:
        shown = ", ".join(f"{f:.4g}" for f in s.short_factor[:4])
        words += f" (factors per pair {shown}{', …' if len(s.short_factor) > 4 else ''})"
    return words


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
    derived = _derived(result, given)
    if derived is not None:
        return derived
    try:
        found = fit(result.kind, result.got, read_first=True)
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
    reproduce = extra.reproduce if extra else proof(kind, reference_recipe(found.settings, found.got.shape[0]),
                                                    reference_recipe(found.settings, found.got.shape[0]),
                                                    np.asarray(found.got, dtype=np.float64), None)
    return replace(result, causes=(Cause(name, text.strip(), False, 1.0, reproduce),), closest=None)


#: YaRN's correction range tried when the settings use YaRN (transformers' defaults first: beta_fast 32, beta_slow 1).
YARN_BETAS = ((32.0, 1.0), (16.0, 1.0), (64.0, 1.0), (32.0, 2.0), (32.0, 0.5), (16.0, 2.0))


def _derived(result: CheckResult, given: RopeSettings) -> CheckResult | None:
    """One setting of the given scaling rule read from the data or varied where the grid does not reach: the
    attention factor (cos and sin carry it: the upload over the unscaled reference), dynamic NTK evaluated at
    another length, YaRN's correction range (beta_fast, beta_slow) and its truncation. The first that reproduces
    every cell is the cause."""
    kind = ROPE_KINDS[result.kind]
    got = np.asarray(result.got, dtype=np.float64)
    rows, width = got.shape
    every = np.arange(rows)
    storage = _storage(got)
    ref = reference_recipe(given, rows)
    tries: list[tuple[str, str, Recipe]] = []
    if kind.scaled:
        unit = kind.build(replace(ref, scale=1.0), every, width).double().numpy()
        big = np.abs(unit) > 0.5
        if big.any():
            observed = float(np.median(got[big] / unit[big]))
            if abs(observed - ref.scale) > 1e-6 * max(1.0, abs(ref.scale)):
                tries.append((f"attention factor {observed:.6g}, not {ref.scale:.6g}",
                              "The attention factor on cos and sin differs from the settings' (YaRN's 0.1·ln(factor) "
                              "+ 1, the config's attention_factor, or DeepSeek's mscale ratio): read from your cache, "
                              "it is the ratio of your values to the unscaled ones.", replace(ref, scale=observed)))
    scaling = given.config.scaling
    if scaling.rope_type == "dynamic":
        original = given.config.max_position_embeddings
        for length in sorted({rows, given.q_offset + rows, 2 * original, 4 * original} - {given.q_offset + rows}):
            if length > 0:
                inv_freq, _ = rope_parameters(given.config, max(length, 1), device="cpu")
                tries.append((f"dynamic NTK evaluated at length {length}, not {given.q_offset + rows}",
                              "Dynamic NTK raises the base with the current length once it exceeds the original "
                              "context; your cache was computed for another length (a cache built once at its "
                              "longest, or never recomputed).", replace(ref, inv_freq=inv_freq)))
    if scaling.rope_type == "yarn":
        current = (scaling.beta_fast or 32.0, scaling.beta_slow or 1.0)
        for fast, slow in YARN_BETAS:
            for truncate in (True, False):
                if (fast, slow) == current and truncate == (scaling.truncate is not False):
                    continue
                other = replace(scaling, beta_fast=fast, beta_slow=slow, truncate=truncate)
                inv_freq, _ = rope_parameters(replace(given.config, scaling=other), given.q_offset + rows, device="cpu")
                changes = [f"beta_fast {fast:g}" if fast != current[0] else "",
                           f"beta_slow {slow:g}" if slow != current[1] else "",
                           ("" if truncate == (scaling.truncate is not False) else f"truncate {truncate}")]
                tries.append(("YaRN with " + ", ".join(c for c in changes if c) + " (the settings: beta_fast "
                              f"{current[0]:g}, beta_slow {current[1]:g}, truncate {scaling.truncate is not False})",
                              "YaRN's ramp between interpolated and original frequencies is set by beta_fast and "
                              "beta_slow (turns within the original context) and rounded to whole dims unless "
                              "truncate is false: the config's values were not passed on.",
                              replace(ref, inv_freq=inv_freq)))
    for name, text, recipe in tries:
        if _reproduces(kind, recipe, ref, got, every, width, storage).all():
            return replace(result, causes=(Cause(name, f"Your cache is the settings' with {name}: that reproduces "
                                                 f"every cell. {text}", False, 1.0,
                                                 proof(kind, recipe, ref, got, storage)),), closest=None)
    return None
