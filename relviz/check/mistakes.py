"""Mistakes no list holds: seeded random mistakes for every check kind (relviz.check.verify checks each verdict).

The public-mistakes tests hold the mistakes people made; a user makes others. This module draws, for every kind
in relviz.check's registry, valid settings and then an upload that is wrong in a way no test lists: a named
mistake at other settings, two or three named mistakes composed, a transformation real bugs apply (a transpose, a
row or column shift, swapped halves, reversed or permuted rows, an offset, a scale, rounding to a low precision,
one row, column or block corrupted), or noise of any size, at the tolerance's edge included. relviz.check.verify
holds the checker's verdict on each to its rule and counts the outcomes per kind.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, fields, replace
from typing import Any

import numpy as np
import torch

@dataclass(frozen=True)
class KindDrawer:
    """How to draw and rebuild one family of kinds: ``owns(kind)``; ``draw(kind, rng)`` valid (settings, shape);
    ``reference(kind, settings, got)`` the reference's (values, tolerance per cell) for an upload like ``got``;
    ``known(kind, settings, shape, rng)`` the named mistakes as (name, array), compositions included;
    ``searched``: the kind can be checked with no settings (the checker searches them)."""

    owns: Callable[[str], bool]
    draw: Callable[..., tuple[Any, tuple[int, ...]]]   # (kind, rng, like=None): like, a shape to keep where it can
    reference: Callable[[str, Any, np.ndarray], tuple[np.ndarray, np.ndarray]]
    known: Callable[[str, Any, tuple[int, ...], np.random.Generator], list[tuple[str, np.ndarray]]]
    searched: Callable[[str], bool] = lambda kind: False


# ---------------------------------------------------------------------------------------
# The position matrices (relviz.check.matrix): every setting of Settings drawn, the kind's validation keeps it


def _matrix_draw(kind: str, rng: np.random.Generator, like: tuple[int, ...] | None = None) -> tuple[Any, tuple[int, ...]]:
    from relviz.check.matrix import MATRIX_KINDS, Settings, validate_settings

    spec = MATRIX_KINDS[kind]
    for _ in range(200):
        if like is not None:
            shape = like
            q, k = (1, like[0]) if len(like) == 1 else like
        elif spec.vector:
            shape: tuple[int, ...] = (int(rng.integers(1, 49)),)
            q, k = 1, shape[0]
        else:
            q = int(rng.integers(1, 41))
            k = q if rng.random() < 0.6 else int(rng.integers(1, 61))
            shape = (q, k)
        heads = int(rng.integers(1, 65))
        s = Settings(q_offset=int(rng.choice([0, 0, 0, k - q, int(rng.integers(-3, 4))])), k=int(rng.integers(0, 30)),
                     num_buckets=int(rng.integers(2, 70)),
                     max_distance=int(rng.choice([128, 64, 20, int(rng.integers(2, 400))])),
                     bidirectional=bool(rng.random() < 0.5), num_heads=heads, head=int(rng.integers(0, heads)),
                     causal=bool(rng.random() < 0.3), full=bool(rng.random() < 0.5),
                     alibi_bias_max=float(rng.choice([8.0, 8.0, 16.0, 4.0, 12.0])))
        try:
            validate_settings(kind, s, shape)
            spec.reference(_grid(kind, shape), s)
        except ValueError:
            continue
        return s, shape
    raise ValueError(f"no valid {kind} settings drawn for shape {like}")


def _grid(kind: str, shape: tuple[int, ...]):
    from relviz.check.matrix import _grid as grid

    return grid(kind, shape)


def _matrix_reference(kind: str, s: Any, got: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    from relviz.check.matrix import reference
    from relviz.check.result import within

    values = reference(kind, tuple(got.shape), s)
    return values, within(values, got)


def _matrix_known(kind: str, s: Any, shape: tuple[int, ...], rng: np.random.Generator) -> list[tuple[str, np.ndarray]]:
    """The kind's named mistakes at ``s`` and the steps of its search space, each as the whole array."""
    from relviz.check.matrix import MATRIX_KINDS, _variants, reference
    from relviz.check.matrix_spaces import SPACES

    got = reference(kind, shape, s)
    out = [(v.name, np.asarray(b).reshape(shape)) for v, b in _variants(kind, _grid(kind, shape), s, got)]
    for other, spec in MATRIX_KINDS.items():      # another kind's matrix: a mistake of kind, not of detail
        if other != kind and spec.vector == MATRIX_KINDS[kind].vector:
            try:
                at, _ = _matrix_draw(other, rng, shape)
            except ValueError:
                continue
            out.append((f"the {other} reference", reference(other, shape, at)))
    space = SPACES.get(MATRIX_KINDS[kind].name)
    if space is not None and len(shape) == 2:
        for step in space.steps[1:]:
            values = step.per_offset(np.arange(-(shape[0] - 1) - s.q_offset, shape[1] - s.q_offset), s)
            if values is not None:
                out.append((step.name, _grid(kind, shape).toeplitz(
                    lambda n, v=np.asarray(values): v[n + shape[0] - 1 + s.q_offset], s.q_offset)))
    return out


def _matrix_searched(kind: str) -> bool:
    from relviz.check.matrix import MATRIX_KINDS

    return MATRIX_KINDS[kind].candidates is not None


# ---------------------------------------------------------------------------------------
# RoPE caches and angles (relviz.check.rope): named mistakes are recipes, so two or three compose


def _rope_draw(kind: str, rng: np.random.Generator, like: tuple[int, ...] | None = None) -> tuple[Any, tuple[int, ...]]:
    from relviz.check.rope import ROPE_KINDS, rope_settings
    from relviz.rope.config import RopeScaling

    rope_kind = ROPE_KINDS[kind]
    while True:
        head, rows = 2 * int(rng.integers(2, 49)), int(rng.integers(3, 257))
        if like is not None:
            rows, head = like[0], like[1] if rope_kind.laid_out else 2 * like[1]
        rotary = int(head * float(rng.choice([1.0, 1.0, 0.5, 0.25, 0.75]))) if rope_kind.laid_out else head
        rotary -= rotary % 2
        factor = float(rng.choice([2.0, 4.0, 8.0, 16.0, 32.0]))
        original = int(rng.choice([64, 128, 2048, 4096, 8192]))
        scaling = [None, None, None, RopeScaling("linear", factor=factor),
                   RopeScaling("yarn", factor=factor, original_max_position_embeddings=original),
                   RopeScaling("llama3", factor=factor, original_max_position_embeddings=original,
                               low_freq_factor=1.0, high_freq_factor=4.0),
                   RopeScaling("dynamic", factor=factor)][int(rng.integers(0, 7))]
        base = float(rng.choice([10000.0, 500000.0, 1e6, float(round(rng.uniform(50.0, 2e6)))]))
        try:
            s = rope_settings(head_dim=head, base=base, rotary_dim=rotary, layout=str(rng.choice(["half", "interleaved"])),
                              q_offset=int(rng.choice([0, 0, 0, int(rng.integers(1, 60))])), scaling=scaling,
                              max_position_embeddings=int(rng.choice([128, 2048, 4096])))
        except ValueError:
            continue
        if rotary >= 2:
            return s, (rows, rope_kind.width_of(s))


def _rope_reference(kind: str, s: Any, got: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    from relviz.check.rope import ROPE_KINDS, proof, reference_recipe

    ref = reference_recipe(s, got.shape[0])
    return proof(ROPE_KINDS[kind], ref, ref, np.asarray(got, dtype=np.float64), None)()


def _differs(a: object, b: object) -> bool:
    if isinstance(a, torch.Tensor) or isinstance(b, torch.Tensor):
        return not (isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor) and a.shape == b.shape
                    and torch.equal(a, b))
    return a != b


def _rope_known(kind: str, s: Any, shape: tuple[int, ...], rng: np.random.Generator) -> list[tuple[str, np.ndarray]]:
    """Every named mistake, and two or three of them composed (each recipe's changes from the reference, merged)."""
    from relviz.check.rope import ROPE_KINDS, reference_recipe
    from relviz.check.rope_causes import variants

    rope_kind = ROPE_KINDS[kind]
    rows, width = shape
    ref = reference_recipe(s, rows)
    named = list(variants(rope_kind, s, rows))
    every = np.arange(rows)
    out = [(cause.name, rope_kind.build(recipe, every, width).double().numpy()) for cause, recipe in named]
    for _ in range(3):
        if len(named) < 2:
            break
        picks = rng.choice(len(named), size=min(len(named), int(rng.integers(2, 4))), replace=False)
        changes: dict[str, object] = {}
        for n in picks:
            recipe = named[int(n)][1]
            changes.update({f.name: getattr(recipe, f.name) for f in fields(recipe)
                            if _differs(getattr(recipe, f.name), getattr(ref, f.name))})
        try:
            built = rope_kind.build(replace(ref, **changes), every, width).double().numpy()
        except (RuntimeError, IndexError, ValueError):
            continue
        out.append((" + ".join(named[int(n)][0].name for n in picks), built))
    return out


# ---------------------------------------------------------------------------------------
# Position in images and video (relviz.check.vision): settings are always given


def _rope2d_draw(kind: str, rng: np.random.Generator, like: tuple[int, ...] | None = None) -> tuple[Any, tuple[int, ...]]:
    from relviz.check.vision import Rope2DSettings
    from relviz.vision.score_maps import ROPES_2D

    while True:
        try:
            s = Rope2DSettings(str(rng.choice(sorted(ROPES_2D))), 4 * int(rng.integers(2, 17)), int(rng.integers(1, 13)),
                               int(rng.integers(1, 13)), None if rng.random() < 0.6 else float(rng.choice([100.0, 1e4, 5e5])))
        except ValueError:
            continue
        return s, (s.rows * s.cols, s.head_dim // 2)


def _rope2d_reference(kind: str, s: Any, got: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    from relviz.check.vision import ANGLE_ATOL, ANGLE_RTOL
    from relviz.vision.rope2d import rope2d_angles

    values = rope2d_angles(s.rope, s.grid, device="cpu").double().numpy()
    return values, ANGLE_ATOL + ANGLE_RTOL * np.abs(values)


def _named_table(table: tuple) -> Callable[[str, Any, tuple[int, ...], np.random.Generator], list]:
    def known(kind: str, s: Any, shape: tuple[int, ...], rng: np.random.Generator) -> list[tuple[str, np.ndarray]]:
        return [(name, np.asarray(v)) for name, _, build in table if (v := build(s)) is not None and v.shape == shape]
    return known


def _mrope_draw(kind: str, rng: np.random.Generator, like: tuple[int, ...] | None = None) -> tuple[Any, tuple[int, ...]]:
    from relviz.check.vision import MropeSettings
    from relviz.vision.mrope import MROPE_RULES, Image, Text, Video

    while True:
        rule = str(rng.choice(sorted(MROPE_RULES)))
        segments = []
        for _ in range(int(rng.integers(1, 6))):
            pick = int(rng.integers(0, 3))
            if pick == 0:
                segments.append(Text(int(rng.integers(1, 7))))
            elif pick == 1:
                segments.append(Image(int(rng.integers(1, 7)), int(rng.integers(1, 7))))
            else:
                segments.append(Video(int(rng.integers(1, 4)), int(rng.integers(1, 5)), int(rng.integers(1, 5)),
                                      seconds_per_grid=float(rng.choice([1.0, 0.5, 2.0])),
                                      frame_text=2 if MROPE_RULES[rule].frames_apart else 0))
        try:
            s = MropeSettings(rule, tuple(segments), tokens_per_second=int(rng.choice([1, 2, 4])))
        except ValueError:
            continue
        return s, tuple(s.ids()[0].shape)


def _mrope_reference(kind: str, s: Any, got: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    values = s.ids()[0]
    return values, np.zeros(values.shape)


def _families() -> list[KindDrawer]:
    from relviz.check.matrix import MATRIX_KINDS
    from relviz.check.rope import ROPE_KINDS
    from relviz.check.vision import MROPE_CAUSES, ROPE2D_CAUSES, check_mrope, check_rope2d
    from relviz.check.api import REGISTRY   # api imports the modules that register every kind

    def checked_by(fn: Callable) -> Callable[[str], bool]:
        return lambda kind: kind in REGISTRY and REGISTRY[kind].check is fn

    return [
        KindDrawer(lambda kind: kind in MATRIX_KINDS, _matrix_draw, _matrix_reference, _matrix_known, _matrix_searched),
        KindDrawer(lambda kind: kind in ROPE_KINDS, _rope_draw, _rope_reference, _rope_known, lambda kind: True),
        KindDrawer(checked_by(check_rope2d), _rope2d_draw, _rope2d_reference, _named_table(ROPE2D_CAUSES)),
        KindDrawer(checked_by(check_mrope), _mrope_draw, _mrope_reference, _named_table(MROPE_CAUSES)),
    ]


def family_of(kind: str) -> KindDrawer:
    """The family that draws ``kind``; ValueError for a registered kind no family draws (a new kind needs one)."""
    for family in _families():
        if family.owns(kind):
            return family
    raise ValueError(f"no mistake family draws the check kind {kind!r}: add one to relviz.check.mistakes")


def kinds() -> list[str]:
    """Every kind in relviz.check's registry."""
    from relviz.check.api import REGISTRY

    return list(REGISTRY)


# ---------------------------------------------------------------------------------------
# Transformations real bugs apply, on any array


def _bf16(x: np.ndarray) -> np.ndarray:
    return torch.tensor(np.array(x, dtype=np.float64)).to(torch.bfloat16).double().numpy()


def _f16(x: np.ndarray) -> np.ndarray:
    return torch.tensor(np.array(x, dtype=np.float64)).to(torch.float16).double().numpy()


def _two_d(fn: Callable[[np.ndarray], np.ndarray]) -> Callable[[np.ndarray, np.random.Generator], np.ndarray | None]:
    return lambda x, rng: fn(x) if x.ndim == 2 else None


def _scale(x: np.ndarray) -> float:
    finite = np.abs(x[np.isfinite(x)])
    return float(finite.max()) if finite.size and finite.max() > 0 else 1.0


def _region(x: np.ndarray, rng: np.random.Generator) -> tuple:
    """A random row, column, block, diagonal band or single cell of ``x`` (an index into it)."""
    if x.ndim == 1:
        a = int(rng.integers(0, x.size))
        return (slice(a, a + int(rng.integers(1, max(2, x.size - a + 1)))),)
    rows, cols = x.shape
    pick = int(rng.integers(0, 5))
    if pick == 0:
        return (int(rng.integers(0, rows)), slice(None))
    if pick == 1:
        return (slice(None), int(rng.integers(0, cols)))
    if pick == 2:
        r, c = int(rng.integers(0, rows)), int(rng.integers(0, cols))
        return (slice(r, r + int(rng.integers(1, 6))), slice(c, c + int(rng.integers(1, 6))))
    if pick == 3:
        band = np.arange(cols)[None, :] - np.arange(rows)[:, None] == int(rng.integers(-rows + 1, cols))
        return np.nonzero(band)
    return (int(rng.integers(0, rows)), int(rng.integers(0, cols)))


def _in_region(change: Callable[[np.ndarray, np.random.Generator], np.ndarray]):
    def apply(x: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        y = x.copy()
        where = _region(x, rng)
        y[where] = change(np.asarray(x[where], dtype=np.float64), rng)
        return y
    return apply


def _noise(x: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    return x + rng.normal(0.0, _scale(x) * 10.0 ** float(rng.uniform(-9, 0)), x.shape)


def _permute(axis: int) -> Callable[[np.ndarray, np.random.Generator], np.ndarray | None]:
    def apply(x: np.ndarray, rng: np.random.Generator) -> np.ndarray | None:
        if axis >= x.ndim or x.shape[axis] < 2:
            return None
        order = np.arange(x.shape[axis])
        a, b = rng.choice(x.shape[axis], 2, replace=False)
        order[[a, b]] = order[[b, a]]
        return np.take(x, order if rng.random() < 0.5 else rng.permutation(x.shape[axis]), axis=axis)
    return apply


def _swap_halves(axis: int) -> Callable[[np.ndarray, np.random.Generator], np.ndarray | None]:
    def apply(x: np.ndarray, rng: np.random.Generator) -> np.ndarray | None:
        if axis >= x.ndim or x.shape[axis] < 2:
            return None
        half = x.shape[axis] // 2
        return np.concatenate([np.take(x, np.arange(half, x.shape[axis]), axis),
                               np.take(x, np.arange(half), axis)], axis)
    return apply


def _shift(axis: int) -> Callable[[np.ndarray, np.random.Generator], np.ndarray | None]:
    """Rows (axis 0) or columns moved by ±1..3, the edge repeated (an index off by some) or wrapped."""
    def apply(x: np.ndarray, rng: np.random.Generator) -> np.ndarray | None:
        if axis >= x.ndim or x.shape[axis] < 2:
            return None
        by = int(rng.choice([-3, -2, -1, 1, 2, 3]))
        if rng.random() < 0.5:
            return np.roll(x, by, axis=axis)
        index = np.clip(np.arange(x.shape[axis]) - by, 0, x.shape[axis] - 1)
        return np.take(x, index, axis=axis)
    return apply


#: name -> transformation (None where it does not apply to this array).
TRANSFORMS: dict[str, Callable[[np.ndarray, np.random.Generator], np.ndarray | None]] = {
    "constant offset": lambda x, rng: x + float(rng.choice([1, -1, 2, -2, 0.5, 3, -7, 1e-3])),
    "scaled": lambda x, rng: x * float(rng.choice([2.0, 0.5, -1.0, 1.5, 1.001, 3.0, -2.0, 1e-6 + 1.0])),
    "transposed": _two_d(lambda x: x.T.copy()),
    "rows reversed": _two_d(lambda x: x[::-1].copy()),
    "columns reversed": lambda x, rng: x[..., ::-1].copy(),
    "rows shifted": _shift(0),
    "columns shifted": _shift(1),
    "vector shifted": lambda x, rng: _shift(0)(x, rng) if x.ndim == 1 else None,
    "halves swapped (columns)": lambda x, rng: _swap_halves(x.ndim - 1)(x, rng),
    "halves swapped (rows)": _swap_halves(0),
    "rows permuted": _permute(0),
    "columns permuted": lambda x, rng: _permute(x.ndim - 1)(x, rng),
    "rounded to bfloat16": lambda x, rng: _bf16(x),
    "rounded to float16": lambda x, rng: _f16(x) if _scale(x) < 6e4 else None,
    "rounded to float32": lambda x, rng: x.astype(np.float32).astype(np.float64),
    "rounded to decimals": lambda x, rng: np.round(x, int(rng.integers(0, 6))),
    "off by one in a region": _in_region(lambda v, rng: v + float(rng.choice([1, -1]))),
    "region scaled": _in_region(lambda v, rng: v * float(rng.choice([2.0, -1.0, 0.5]))),
    "region noisy": _in_region(lambda v, rng: v + rng.normal(0, 10.0 ** float(rng.uniform(-8, 0)), v.shape)),
    "region zeroed": _in_region(lambda v, rng: np.zeros_like(v)),
    "noise": _noise,
    "noise at the tolerance's edge": _in_region(lambda v, rng: v * (1 + float(rng.uniform(1.0, 4.0)) * 1e-5
                                                                   * float(rng.choice([-1, 1])))),
    "whole-number noise in a few cells": lambda x, rng: _few_cells(x, rng),
    "clipped": lambda x, rng: np.clip(x, *np.quantile(x, sorted(rng.uniform(0, 1, 2)))),
}


def _few_cells(x: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    y = x.copy()
    picked = rng.choice(x.size, max(1, int(x.size * 10.0 ** float(rng.uniform(-3, -0.5)))), replace=False)
    y.flat[picked] += rng.integers(1, 4, picked.size) * rng.choice([-1, 1], picked.size)
    return y


# ---------------------------------------------------------------------------------------
# One case: settings, an upload made wrong, and the settings the check is given


@dataclass(frozen=True)
class MistakeCase:
    kind: str
    seed: int
    settings: Any
    got: np.ndarray
    given: Any                 # the settings the check is given (None: it searches them)
    recipe: str                # how the upload was made, in words


def case(kind: str, seed: int) -> MistakeCase:
    """The seeded case ``seed`` of ``kind``: valid settings, then one of: a named mistake or two or three composed,
    the reference or a named mistake at other settings with a transformation, the reference with one to three
    transformations, or noise alone."""
    rng = np.random.default_rng([seed, sum(map(ord, kind))])
    family = family_of(kind)
    settings, shape = family.draw(kind, rng)
    values, _ = family.reference(kind, settings, np.zeros(shape))
    got = np.asarray(values, dtype=np.float64).reshape(shape)
    steps: list[str] = []
    mode = int(rng.integers(0, 5))
    if mode in (1, 2):          # a named mistake (compositions included), at these or at other settings
        at, at_shape = (settings, shape) if mode == 1 else family.draw(kind, rng, shape)
        if at_shape == shape:
            known = family.known(kind, at, shape, rng)
            if known:
                name, got = known[int(rng.integers(0, len(known)))]
                got = np.asarray(got, dtype=np.float64).reshape(shape)
                steps.append(name + ("" if mode == 1 else " at other settings"))
    if mode == 4:               # noise alone, of the reference's size
        scale = _scale(got)
        got = rng.uniform(-scale, scale, shape) if rng.random() < 0.5 else np.round(rng.uniform(-scale, scale, shape))
        steps.append("random values")
    else:
        for _ in range(int(rng.integers(0 if steps else 1, 3 if steps else 4))):
            names = list(TRANSFORMS)
            for _ in range(8):
                name = names[int(rng.integers(0, len(names)))]
                changed = TRANSFORMS[name](got, rng)
                if changed is not None and changed.shape == got.shape:
                    got, _ = np.asarray(changed, dtype=np.float64), steps.append(name)
                    break
    given = None if family.searched(kind) and rng.random() < 0.3 else settings
    if np.all(got == np.round(got)) and np.all(np.abs(got) < 2**53):
        got = got.astype(np.int64)    # whole numbers read as integers, as relviz.check.reading does
    return MistakeCase(kind, seed, settings, got, given, " then ".join(steps) or "the reference")
