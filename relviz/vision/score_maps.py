"""The numbers the Images and video page and ``relviz.show`` draw: named variants, seeded content, the page's
sequence, the score planes.

Its own module so that the page, the notebook API and the tests compute the same planes from the same scalars
(a name, a grid, a seed). Content vectors q and k are random (seeded; ``same=True``: k = q, a patch meeting
its own content elsewhere), so a map shows what the position mechanism alone does.
"""
from __future__ import annotations

import functools
from collections.abc import Callable

import numpy as np
import torch

from relviz._checks import check_bool, check_int
from relviz.rope.math import default_inv_freq
from relviz.vision.grid import PatchGrid
from relviz.vision.mrope import MROPE_RULES, Image, MropeRule, Text, Video, score_map_3d, video_frame_step
from relviz.vision.rope2d import Rope2D, dinov3_rope, pixtral_rope, qwen_vl_vision_rope, score_map_2d

CPU = "cpu"
#: The 2-D RoPE variants by name: their constructor and the base θ their models use.
ROPES_2D: dict[str, tuple[Callable[..., Rope2D], float]] = {
    "pixtral": (pixtral_rope, 10000.0), "qwen_vl": (qwen_vl_vision_rope, 10000.0), "dinov3": (dinov3_rope, 100.0)}


def content(head_dim: int, seed: int, same: bool) -> tuple[torch.Tensor, torch.Tensor]:
    check_bool("same", same)
    generator = torch.Generator().manual_seed(check_int("seed", seed, minimum=0, maximum=2**31 - 1))
    q = torch.randn(head_dim, generator=generator, dtype=torch.float64)
    return q, (q.clone() if same else torch.randn(head_dim, generator=generator, dtype=torch.float64))


def make_rope2d(rope: str, head_dim: int, base: float | None = None) -> Rope2D:
    """A 2-D RoPE by name (``ROPES_2D``), at its model's base θ unless ``base`` is given."""
    if rope not in ROPES_2D:
        raise ValueError(f"rope must be one of {', '.join(ROPES_2D)}; got {rope!r}")
    build, default = ROPES_2D[rope]
    return build(head_dim, default if base is None else base)


@functools.lru_cache(maxsize=16)
def rope2d_plane(rows: int, cols: int, *, rope: str = "pixtral", head_dim: int = 64, base: float | None = None,
                 seed: int = 0, same: bool = True) -> np.ndarray:
    """float64 [2H − 1, 2W − 1], read-only: the score per (Δh, Δw) of the content (q, k) under a 2-D RoPE.
    Kept for the last 16 settings (a query or frame slider then only slices it)."""
    r = make_rope2d(rope, head_dim, base)
    q, k = content(r.head_dim, seed, same)
    return _read_only(score_map_2d(q, k, r, PatchGrid(rows, cols), device=CPU).numpy())


def mixed_sequence(rule: str, rows: int, cols: int, frames: int, *, seconds_per_grid: float = 1.0) -> list:
    """Text, an image of rows × cols tokens, text, a video of ``frames`` such frames, text: the page's sequence
    (Qwen3-VL's frames each get 2 tokens of timestamp text before them)."""
    r = rule_named(rule)
    return [Text(4), Image(rows, cols), Text(3),
            Video(frames, rows, cols, seconds_per_grid=seconds_per_grid, frame_text=2 if r.frames_apart else 0),
            Text(2)]


def rule_named(rule: str) -> MropeRule:
    if rule not in MROPE_RULES:
        raise ValueError(f"rule must be one of {', '.join(MROPE_RULES)}; got {rule!r}")
    return MROPE_RULES[rule]


@functools.lru_cache(maxsize=16)
def mrope_plane(rule: str, rows: int, cols: int, frames: int, *, head_dim: int = 128, seed: int = 0, same: bool = True,
                tokens_per_second: int = 2, seconds_per_grid: float = 1.0) -> np.ndarray:
    """float64 [2T − 1, 2H − 1, 2W − 1], read-only: the score between two tokens of one video per (Δframe, Δh,
    Δw). Kept for the last 16 settings (moving Δt only slices it)."""
    r = rule_named(rule)
    if r.section is None or r.interleaved is None:
        raise ValueError(f"rule {rule!r}: relviz reads {r.label}'s position ids, not how its text rotary splits the "
                         "pairs between t, h and w, so it draws no score map for it")
    head_dim = check_int("head_dim", head_dim, minimum=6, maximum=1024)
    pairs = head_dim // 2
    section = r.section if sum(r.section) == pairs else _scaled_section(r.section, pairs)
    inv_freq = default_inv_freq(2 * pairs, 10000.0, CPU).double()                # [P]: the text head's θ
    q, k = content(2 * pairs, seed, same)
    video = mixed_sequence(rule, rows, cols, frames, seconds_per_grid=seconds_per_grid)[3]
    step = video_frame_step(video, r, tokens_per_second=tokens_per_second)
    return _read_only(score_map_3d(q, k, inv_freq, section, interleaved=r.interleaved, frames=frames, rows=rows,
                                   cols=cols, frame_step=step, device=CPU).numpy())


def _read_only(array: np.ndarray) -> np.ndarray:
    """A cached array, shared by every caller: nobody may change it."""
    array.flags.writeable = False
    return array


def _scaled_section(section: tuple[int, int, int], pairs: int) -> tuple[int, int, int]:
    """The rule's section in proportion for a head of ``pairs`` pairs (t takes what rounding leaves)."""
    h = max(1, round(section[1] * pairs / sum(section)))
    w = max(1, round(section[2] * pairs / sum(section)))
    return (pairs - h - w, h, w)
