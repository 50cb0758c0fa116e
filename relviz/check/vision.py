"""Check kinds for position in images and video: 2-D RoPE angles and M-RoPE position ids, with named causes.

Kinds (registered with relviz.check):

- ``rope2d_angles``: the angle of every patch's frequency pairs, [H·W, head_dim / 2] in rotate_half order,
  as a vision tower computes them before cos and sin (Pixtral, the Qwen-VL towers, DINOv3;
  relviz.vision.rope2d). Compared within float32 rounding of the angle.
- ``mrope_position_ids``: the three rows of M-RoPE ids, [3, N], of a sequence of text, images and videos
  (relviz.vision.mrope, exactly transformers 5.23's get_rope_index). Compared exactly.

A mismatch is tried against the mistakes people make, each computed for the same settings (rows and columns
swapped, patches in column-major order, 1-D RoPE over the flattened patches, the other family's pair split,
positions not normalised; the counter moved to max id + 1, time not scaled, ids not offset, vision tokens
numbered as text). Settings are given, never searched: ``relviz.check.check(kind, got, Rope2DSettings(...))``.
"""
from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import torch

from relviz.check.registry import Kind, register
from relviz.check.result import FIRST_MISMATCHES, Cause, CheckResult, Mismatch
from relviz.vision.grid import PatchGrid
from relviz.vision.mrope import (
    MROPE_RULES,
    TEXT,
    Image,
    MropeRule,
    Segment,
    Text,
    Video,
    mrope_position_ids,
)
from relviz.vision.rope2d import Rope2D, rope2d_angles
from relviz.vision.score_maps import ROPES_2D, make_rope2d

#: An angle matches within float32 rounding of θ·position (and its product), relative, or this much absolute.
ANGLE_RTOL, ANGLE_ATOL = 2.0 ** -18, 1e-6


# ---------------------------------------------------------------------------------------
# 2-D RoPE angles


@dataclass(frozen=True)
class Rope2DSettings:
    """Which 2-D RoPE (a name of relviz.vision.score_maps.ROPES_2D: pixtral, qwen_vl, dinov3), its head and base θ
    (None: the model's), and the patch grid."""

    model: str
    head_dim: int
    rows: int
    cols: int
    base: float | None = None

    def __post_init__(self) -> None:
        make_rope2d(self.model, self.head_dim, self.base)     # checks model, head_dim, base
        PatchGrid(self.rows, self.cols)                        # checks rows, cols

    @property
    def rope(self) -> Rope2D:
        return make_rope2d(self.model, self.head_dim, self.base)

    @property
    def grid(self) -> PatchGrid:
        return PatchGrid(self.rows, self.cols)


def _angles_at(rope: Rope2D, coords: torch.Tensor) -> torch.Tensor:
    """[N, D/2] float32 angles of ``rope``'s pairs at the given (row, column) coordinates [N, 2]."""
    if rope.normalised:
        coords = 2 * math.pi * coords
    return coords[:, rope.pair_axis] * rope.pair_freq[None, :]


def _swapped(s: Rope2DSettings) -> np.ndarray:
    coords = s.rope.coordinates(s.grid)
    return _angles_at(s.rope, coords.flip(-1)).double().numpy()


def _column_major(s: Rope2DSettings) -> np.ndarray:
    order = torch.arange(s.rows * s.cols).view(s.rows, s.cols).T.flatten()      # patch n of column-major order
    return rope2d_angles(s.rope, s.grid, device="cpu")[order].double().numpy()


def _flattened(s: Rope2DSettings) -> np.ndarray:
    n = torch.arange(s.rows * s.cols).float()[:, None]
    scale = 2 * math.pi if s.rope.normalised else 1.0
    freq = s.rope.pair_freq[None, :]
    return (n * scale * freq).double().numpy()


def _other_split(s: Rope2DSettings) -> np.ndarray | None:
    """The pair split of the other integer-position family: Pixtral's even/odd θ where the Qwen-VL towers use one
    θ per axis, and the reverse."""
    others = [n for n in ROPES_2D if n != s.model and not make_rope2d(n, s.head_dim).normalised]
    if s.rope.normalised or len(others) != 1:
        return None
    other = make_rope2d(others[0], s.head_dim, s.base if s.base is not None else ROPES_2D[s.model][1])
    return rope2d_angles(other, s.grid, device="cpu").double().numpy()


def _unnormalised(s: Rope2DSettings) -> np.ndarray | None:
    if not s.rope.normalised:
        return None
    integer = replace(s.rope, normalised=False)
    return (2 * math.pi * rope2d_angles(integer, s.grid, device="cpu").double()).numpy()


def _corners(s: Rope2DSettings) -> np.ndarray | None:
    if not s.rope.normalised:
        return None
    h = torch.arange(s.rows, dtype=torch.float32) / s.rows * 2 - 1
    w = torch.arange(s.cols, dtype=torch.float32) / s.cols * 2 - 1
    coords = torch.stack(torch.meshgrid(h, w, indexing="ij"), dim=-1).flatten(0, 1)
    return _angles_at(s.rope, coords).double().numpy()


def _pairs_interleaved(s: Rope2DSettings) -> np.ndarray:
    """Row and column angles alternating pair by pair ([N, D/4, 2] flattened) instead of in two blocks."""
    angles = rope2d_angles(s.rope, s.grid, device="cpu")
    quarter = s.head_dim // 4
    return torch.stack((angles[:, :quarter], angles[:, quarter:]), dim=-1).flatten(1).double().numpy()


ROPE2D_CAUSES: tuple[tuple[str, str, Callable[[Rope2DSettings], np.ndarray | None]], ...] = (
    ("rows and columns swapped", "The row pairs turn with the patch's column and the column pairs with its row: "
     "the coordinates were stacked (w, h) instead of (h, w).", _swapped),
    ("patches in column-major order", "Row n of the upload holds the patch n of a column-by-column walk: the "
     "patch grid was flattened in the other order from the sequence the model reads (row by row).", _column_major),
    ("1-D RoPE over the flattened patches", "Every pair turns with the patch's index in the sequence "
     "(n = h·W + w): a 1-D RoPE applied to the flattened grid, which forgets which patches are neighbours "
     "vertically.", _flattened),
    ("the other family's pair split", "The frequencies are split between the axes as in the other family: "
     "Pixtral gives the even-indexed θ of a D-wide RoPE to rows and the odd-indexed to columns; the Qwen-VL towers "
     "use the same θ of a D/2-wide RoPE for both.", _other_split),
    ("positions not normalised", "DINOv3 rotates by patch centres normalised to [−1, 1]; these angles use the "
     "integer patch index.", _unnormalised),
    ("patch corners, not centres", "DINOv3's coordinates are patch centres, (p + 0.5)/side·2 − 1; these use "
     "p/side·2 − 1 (the corners).", _corners),
    ("row and column pairs interleaved", "Row and column angles alternate pair by pair; the models lay them out "
     "in two blocks, [row pairs, column pairs], before rotate_half.", _pairs_interleaved),
)


def check_rope2d(got: Any, settings: Rope2DSettings | None) -> CheckResult:
    """Compare an upload of 2-D RoPE angles with relviz's (exact against transformers) at ``settings``."""
    if not isinstance(settings, Rope2DSettings):
        raise ValueError("settings for kind 'rope2d_angles' must be Rope2DSettings(model, head_dim, rows, cols) "
                         f"(relviz.check.vision); got {type(settings).__name__}")
    s = settings
    got = np.asarray(got, dtype=np.float64)
    shape = (s.rows * s.cols, s.head_dim // 2)
    if got.shape != shape:
        raise ValueError(f"2-D RoPE angles for {s.rows} × {s.cols} patches and head_dim {s.head_dim} have shape "
                         f"{shape} (a row per patch, row by row; a column per pair); got {got.shape}")
    if not np.isfinite(got).all():
        raise ValueError("the angles hold NaN or infinite values: every patch has a finite angle")
    expected = rope2d_angles(s.rope, s.grid, device="cpu").double().numpy()

    def close(a: np.ndarray) -> np.ndarray:
        return np.isclose(got, a, rtol=ANGLE_RTOL, atol=ANGLE_ATOL)

    axis = np.broadcast_to(s.rope.pair_axis.numpy()[None, :], got.shape)
    note = (f"Row n is the patch (n // {s.cols}, n % {s.cols}); column p is pair p (it rotates dimensions p and "
            f"p + {s.head_dim // 2}); the third column is its axis (0 row, 1 column).")
    return _named_result("rope2d_angles", s, expected, got, ~close(expected), axis, ROPE2D_CAUSES,
                         lambda variant: close(variant).all(), note,
                         lambda variant: ANGLE_ATOL + ANGLE_RTOL * np.abs(variant))


def _named_result(kind: str, s: Any, expected: np.ndarray, got: np.ndarray, mismatch: np.ndarray,
                  third: np.ndarray, named: tuple, reproduces: Callable[[np.ndarray], bool], note: str,
                  tol: Callable[[np.ndarray], np.ndarray] = np.zeros_like) -> CheckResult:
    """The verdict of a vision kind: each named mistake whose variant reproduces the whole upload is a cause (its
    proof: the variant and ``tol`` of it, each cell's tolerance); the first mismatches carry ``third`` (a pair's
    axis, a token's kind) as their third column."""
    causes = []
    if mismatch.any():
        for name, text, build in named:
            variant = build(s)
            if variant is not None and variant.shape == got.shape and reproduces(variant):
                causes.append(Cause(name, text, False, 1.0,
                                    lambda variant=variant: (variant, tol(np.asarray(variant, dtype=np.float64)))))
    first = tuple(Mismatch(int(i), int(j), int(third[i, j]), float(expected[i, j]), float(got[i, j]))
                  for i, j in np.argwhere(mismatch)[:FIRST_MISMATCHES])
    return CheckResult(kind, s, False, expected.astype(np.float64), got.astype(np.float64), np.ones_like(mismatch),
                       mismatch, first, tuple(causes), None, note, third)


# ---------------------------------------------------------------------------------------
# M-RoPE position ids


@dataclass(frozen=True)
class MropeSettings:
    """A family's rule (a model_type of relviz.vision.mrope.MROPE_RULES) and the sequence, in segments."""

    rule: str
    segments: tuple[Segment, ...]
    tokens_per_second: int = 2

    def __post_init__(self) -> None:
        if self.rule not in MROPE_RULES:
            raise ValueError(f"rule must be one of {', '.join(MROPE_RULES)}; got {self.rule!r}")
        object.__setattr__(self, "segments", tuple(self.segments))
        mrope_position_ids(self.segments, MROPE_RULES[self.rule], tokens_per_second=self.tokens_per_second,
                           device="cpu")        # checks every segment

    @property
    def model_rule(self) -> MropeRule:
        return MROPE_RULES[self.rule]

    def ids(self, rule: MropeRule | None = None) -> tuple[np.ndarray, np.ndarray]:
        ids, kinds = mrope_position_ids(self.segments, rule or self.model_rule, tokens_per_second=self.tokens_per_second,
                                        device="cpu")
        return ids.numpy(), kinds.numpy()


def _runs(kinds: np.ndarray) -> list[tuple[int, int]]:
    """(start, end) of each run of tokens of one kind, as get_rope_index groups them."""
    edges = np.flatnonzero(np.diff(kinds)) + 1
    return list(zip(np.concatenate([[0], edges]).tolist(), np.concatenate([edges, [len(kinds)]]).tolist()))


def _max_plus_one(s: MropeSettings) -> np.ndarray:
    """Each run starts at max(previous ids) + 1: its ids relative to its own start, moved there."""
    ids, kinds = s.ids()
    out = ids.copy()
    previous_max = -1
    for a, b in _runs(kinds):
        out[:, a:b] = ids[:, a:b] - ids[:, a:b].min() + previous_max + 1
        previous_max = int(out[:, a:b].max())
    return out


def _time_unscaled(s: MropeSettings) -> np.ndarray | None:
    if not s.model_rule.time_scaled:
        return None
    return s.ids(replace(s.model_rule, time_scaled=False))[0]


def _swapped_hw(s: MropeSettings) -> np.ndarray:
    ids = s.ids()[0].copy()
    ids[[1, 2]] = ids[[2, 1]]
    return ids


def _as_text(s: MropeSettings) -> np.ndarray:
    n = s.ids()[0].shape[1]
    return np.broadcast_to(np.arange(n), (3, n)).copy()


def _not_offset(s: MropeSettings) -> np.ndarray:
    """Vision ids counted from 0 on every axis instead of from the position the sequence has reached."""
    ids, kinds = s.ids()
    out = ids.copy()
    for a, b in _runs(kinds):
        if kinds[a] != TEXT:
            out[:, a:b] = ids[:, a:b] - ids[:, a:b].min(axis=1, keepdims=True)
    return out


MROPE_CAUSES: tuple[tuple[str, str, Callable[[MropeSettings], np.ndarray | None]], ...] = (
    ("counter moved to max id + 1", "After an image or a video the ids continue from the largest id so far + 1, "
     "as earlier releases of get_rope_index did (st_idx = max + 1); transformers 5.23 moves the counter by "
     "max(H, W) of the grid, so a video whose time ids outgrow its grid is followed by text below them.",
     _max_plus_one),
    ("time ids not scaled", "Qwen2.5-VL spaces a video's frames by tokens_per_second · second_per_grid_t ids; "
     "these step by 1 per frame (Qwen2-VL's rule).", _time_unscaled),
    ("rows and columns swapped", "The h row holds the column index and the w row the row index.", _swapped_hw),
    ("vision tokens numbered as text", "All three rows count the tokens one by one: 1-D positions, so M-RoPE "
     "reduces to plain RoPE for the images and videos too (the model's position_ids default without "
     "get_rope_index).", _as_text),
    ("vision ids not offset", "An image's or video's ids start at 0 on every axis instead of at the position "
     "the sequence has reached.", _not_offset),
)


def check_mrope(got: Any, settings: MropeSettings | None) -> CheckResult:
    """Compare an upload of M-RoPE ids [3, N] with get_rope_index's at ``settings``, exactly."""
    if not isinstance(settings, MropeSettings):
        raise ValueError("settings for kind 'mrope_position_ids' must be MropeSettings(rule, segments) "
                         f"(relviz.check.vision); got {type(settings).__name__}")
    s = settings
    expected, kinds = s.ids()
    got = np.asarray(got)
    if got.shape != expected.shape:
        raise ValueError(f"the ids of this sequence have shape {expected.shape} (rows t, h, w; a column per token); "
                         f"got {got.shape}")
    if not np.isfinite(got.astype(np.float64)).all() or (got.astype(np.float64) != np.round(got.astype(np.float64))).any():
        raise ValueError("position ids are whole numbers; the upload holds fractions, NaN or infinite values")
    got = got.astype(np.int64)
    third = np.broadcast_to(kinds[None, :], got.shape)
    note = "Rows are the t, h and w ids; column n is token n; the third column is its kind (0 text, 1 image, 2 video)."
    return _named_result("mrope_position_ids", s, expected, got, got != expected, third, MROPE_CAUSES,
                         lambda variant: np.array_equal(variant, got), note)


def _python_only(kind: str, settings: str) -> Callable[[Any, tuple[int, ...] | None], Any]:
    def from_args(args: Any, shape: tuple[int, ...] | None) -> Any:
        raise ValueError(f"kind {kind} takes its settings in Python: relviz.check.check({kind!r}, array, "
                         f"relviz.check.vision.{settings}(...)); the command line has no flags for them")
    return from_args


register(Kind("rope2d_angles", "2-D RoPE angles [patches, head_dim / 2] (Pixtral, Qwen-VL vision, DINOv3)",
              ("model", "head_dim", "rows", "cols", "base"), check_rope2d, labels=("patch", "pair", "axis"),
              axes=("patch n (row-major)", "pair p"), max_side=1 << 20, on_page=False,
              from_args=_python_only("rope2d_angles", "Rope2DSettings")))
register(Kind("mrope_position_ids", "M-RoPE position ids [3, tokens] (Qwen2-VL, Qwen2.5-VL, Qwen3-VL)",
              ("rule", "segments", "tokens_per_second"), check_mrope, labels=("axis", "token", "kind"),
              axes=("t, h, w", "token n"), max_side=1 << 22, on_page=False,
              from_args=_python_only("mrope_position_ids", "MropeSettings")))

__all__ = ["Rope2DSettings", "MropeSettings", "ROPE2D_CAUSES", "MROPE_CAUSES", "check_rope2d", "check_mrope",
           "Image", "Text", "Video"]
