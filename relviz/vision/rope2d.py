"""Axial 2-D RoPE: half of each head's frequency pairs turn with the patch's row, half with its column.

Three ways transformers 5.23 does it, each a :class:`Rope2D` (data, not a branch):

- Pixtral (``PixtralVisionRotaryEmbedding``, rope_type "axial"): θ_i = 1/base^(2i/D) for i < D/2; the
  even-indexed θ turn with the row h, the odd-indexed with the column w; integer patch positions.
- The Qwen2-VL / 2.5-VL / 3-VL vision towers (``Qwen2VLVisionRotaryEmbedding``): θ_i = 1/base^(2i/(D/2))
  for i < D/4, the same θ for rows and for columns; integer positions.
- DINOv3 (``DINOv3ViTRopePositionEmbedding``): θ_i = 1/base^(4i/D); positions are patch centres
  normalised to [−1, 1] ((p + 0.5)/H · 2 − 1) and the angle is 2π·coordinate·θ; the CLS and register
  tokens in front of the patches are not rotated.

In all three the cos/sin layout is [row pairs, column pairs] twice and Llama's rotate_half pairs
dimension p with p + D/2. The score of rotated q and k then depends on the pair only through
(Δh, Δw), and it is a sum of a row term and a column term: S(Δh, Δw) = S_h(Δh) + S_w(Δw).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from relviz._checks import check_int, check_tensor, resolve_device
from relviz._words import counted, minus
from relviz.rope.math import default_inv_freq, rotate_half_by, score_per_offset
from relviz.vision.grid import PatchGrid, as_grid

#: Largest head the functions accept, and the bounds of θ's base.
MAX_HEAD_DIM = 1024
MAX_BASE = 1e9


@dataclass(frozen=True)
class Rope2D:
    """One axial 2-D RoPE: the frequency and the axis (0 row, 1 column) of each of the D/2 pairs, in the
    order rotate_half pairs them (pair p rotates dimensions p and p + D/2).

    A description, kept on the CPU whatever the default device: the functions below move its tensors to the
    device they compute on (``device=``, or the input's), so a description never mixes two devices."""

    label: str
    head_dim: int
    pair_freq: torch.Tensor        # float32 [D/2], θ of each pair
    pair_axis: torch.Tensor        # long [D/2], 0 (row h) or 1 (column w)
    normalised: bool = False       # DINOv3: coordinates are patch centres in [−1, 1], angle 2π·coordinate·θ
    prefix_tokens: int = 0         # tokens before the patches that are not rotated (DINOv3's CLS + registers)

    def __post_init__(self) -> None:
        pairs = self.head_dim // 2
        freq = check_tensor("pair_freq", self.pair_freq, ndim=1, floating=True)
        axis = check_tensor("pair_axis", self.pair_axis, ndim=1)
        if freq.shape[0] != pairs or axis.shape[0] != pairs:
            raise ValueError(f"pair_freq and pair_axis must have head_dim / 2 = {pairs} entries; got "
                             f"{freq.shape[0]} and {axis.shape[0]}")
        if freq.is_meta or axis.is_meta:
            raise ValueError("pair_freq and pair_axis must hold values; got them on device 'meta'")
        object.__setattr__(self, "pair_freq", freq.to("cpu"))
        object.__setattr__(self, "pair_axis", axis.to("cpu", torch.long))

    def coordinates(self, grid: PatchGrid) -> torch.Tensor:
        """float32 [N, 2] on the CPU: each patch's (row, column) coordinate as the model computes it."""
        if self.normalised:
            h = torch.arange(0.5, grid.rows, dtype=torch.float32) / grid.rows
            w = torch.arange(0.5, grid.cols, dtype=torch.float32) / grid.cols
            coords = torch.stack(torch.meshgrid(h, w, indexing="ij"), dim=-1).flatten(0, 1)
            return 2.0 * coords - 1.0
        h, w = torch.meshgrid(torch.arange(grid.rows), torch.arange(grid.cols), indexing="ij")
        return torch.stack((h.flatten(), w.flatten()), dim=-1).float()

    def step(self, grid: PatchGrid) -> torch.Tensor:
        """float64 [D/2] on the CPU: the angle each pair turns per patch along its own axis (θ, or 2π·θ·2/side for
        normalised coordinates: the same offset in patches turns less on a larger image)."""
        freq = self.pair_freq.double()
        if not self.normalised:
            return freq
        side = torch.where(self.pair_axis == 0, grid.rows, grid.cols).double()
        return 2 * math.pi * freq * 2 / side


def _check(head_dim: int, base: float, multiple: int) -> tuple[int, float]:
    head_dim = check_int("head_dim", head_dim, minimum=multiple, maximum=MAX_HEAD_DIM)
    if head_dim % multiple:
        raise ValueError(f"head_dim must be a multiple of {multiple} (half the pairs per axis); got {head_dim}")
    if isinstance(base, bool) or not isinstance(base, (int, float)) or not 1 < base <= MAX_BASE:
        raise ValueError(f"base must be a number above 1 and at most {MAX_BASE:g}; got {base!r}")
    return head_dim, float(base)


def _axes(quarter: int) -> torch.Tensor:
    return torch.cat((torch.zeros(quarter, dtype=torch.long), torch.ones(quarter, dtype=torch.long)))


def pixtral_rope(head_dim: int = 64, base: float = 10000.0) -> Rope2D:
    """Pixtral's vision encoder: even-indexed θ of a D-wide RoPE to rows, odd-indexed to columns."""
    head_dim, base = _check(head_dim, base, 4)
    inv_freq = default_inv_freq(head_dim, base, "cpu")                           # [D/2]: transformers' θ
    return Rope2D("Pixtral (axial: even θ rows, odd θ columns)", head_dim,
                  torch.cat([inv_freq[0::2], inv_freq[1::2]]), _axes(head_dim // 4))


def qwen_vl_vision_rope(head_dim: int = 80, base: float = 10000.0) -> Rope2D:
    """The Qwen2-VL / 2.5-VL / 3-VL vision towers: a D/2-wide RoPE's θ, the same for rows and columns."""
    head_dim, base = _check(head_dim, base, 4)
    spatial = head_dim // 2
    inv_freq = default_inv_freq(spatial, base, "cpu")                            # [D/4]
    return Rope2D("Qwen-VL vision (axial: same θ for rows and columns)", head_dim,
                  torch.cat([inv_freq, inv_freq]), _axes(head_dim // 4))


def dinov3_rope(head_dim: int = 64, base: float = 100.0, *, prefix_tokens: int = 1) -> Rope2D:
    """DINOv3's ViT: θ_i = 1/base^(4i/D) on patch centres in [−1, 1]; ``prefix_tokens`` (1 CLS +
    num_register_tokens) come first and are not rotated."""
    head_dim, base = _check(head_dim, base, 4)
    prefix_tokens = check_int("prefix_tokens", prefix_tokens, minimum=0, maximum=64)
    inv_freq = 1 / base ** torch.arange(0, 1, 4 / head_dim, dtype=torch.float32)
    return Rope2D("DINOv3 (normalised coordinates)", head_dim, torch.cat([inv_freq, inv_freq]),
                  _axes(head_dim // 4), normalised=True, prefix_tokens=prefix_tokens)


def _check_rope(rope: object) -> Rope2D:
    if not isinstance(rope, Rope2D):
        raise ValueError(f"rope must be a Rope2D (pixtral_rope, qwen_vl_vision_rope, dinov3_rope); "
                         f"got {type(rope).__name__}")
    return rope


def rope2d_angles(rope: Rope2D, grid: PatchGrid | tuple[int, int], *,
                  device: torch.device | str | None = None) -> torch.Tensor:
    """float32 [N, D/2] on ``device``: the angle of each patch's pairs, operation for operation as the model
    (N = H·W patches, row-major; the prefix tokens have none)."""
    rope, grid = _check_rope(rope), as_grid(grid)
    device = resolve_device(device)
    coords = rope.coordinates(grid).to(device)                              # [N, 2]
    if rope.normalised:
        coords = 2 * math.pi * coords
    return coords[:, rope.pair_axis.to(device)] * rope.pair_freq.to(device)[None, :]   # [N, D/2]


def rope2d_cos_sin(rope: Rope2D, grid: PatchGrid | tuple[int, int], *,
                   device: torch.device | str | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """(cos [N, D], sin [N, D]) on ``device``, as the model's rotary module returns them (the angles twice)."""
    angles = rope2d_angles(rope, grid, device=device)
    emb = torch.cat((angles, angles), dim=-1)
    return emb.cos(), emb.sin()


def rotate_2d(x: torch.Tensor, rope: Rope2D, grid: PatchGrid | tuple[int, int]) -> torch.Tensor:
    """x [..., prefix + N, D] rotated: the first ``rope.prefix_tokens`` rows as they are, each patch by
    its angles (x·cos + rotate_half(x)·sin, in float32 like the models' vision attention), on x's device."""
    rope, grid = _check_rope(rope), as_grid(grid)
    x = check_tensor("x", x, min_ndim=2, floating=True)
    if x.shape[-1] != rope.head_dim or x.shape[-2] != rope.prefix_tokens + grid.patches:
        raise ValueError(f"x must end in ({rope.prefix_tokens} + {grid.patches} tokens, {rope.head_dim}) for "
                         f"this rope and grid; got shape {tuple(x.shape)}")
    cos, sin = rope2d_cos_sin(rope, grid, device=x.device)
    prefix, patches = x[..., :rope.prefix_tokens, :], x[..., rope.prefix_tokens:, :]
    rotated = rotate_half_by(patches.float(), cos, sin)
    return torch.cat((prefix, rotated.to(x.dtype)), dim=-2)


def score_map_2d(q: torch.Tensor, k: torch.Tensor, rope: Rope2D, grid: PatchGrid | tuple[int, int], *,
                 device: torch.device | str | None = None) -> torch.Tensor:
    """float64 [2H − 1, 2W − 1]: the logit (R_query q)·(R_key k) of fixed content q, k [D] at each
    offset (Δh, Δw) = key − query, ascending: the row pairs give S_h(Δh), the column pairs S_w(Δw),
    the map is their sum. (2H − 1) + (2W − 1) values computed, whatever the number of patch pairs."""
    rope, grid = _check_rope(rope), as_grid(grid)
    q = check_tensor("q", q, ndim=1, floating=True)
    k = check_tensor("k", k, ndim=1, floating=True)
    if q.shape[0] != rope.head_dim or k.shape[0] != rope.head_dim:
        raise ValueError(f"q and k must have head_dim = {rope.head_dim} entries; got {q.shape[0]} and {k.shape[0]}")
    device = resolve_device(device)
    half = rope.head_dim // 2
    step = rope.step(grid)
    terms = []
    for axis, side in ((0, grid.rows), (1, grid.cols)):
        pairs = torch.nonzero(rope.pair_axis == axis).flatten()
        dims = torch.cat((pairs, pairs + half))                            # this axis's pairs, rotate_half order
        offsets = torch.arange(-(side - 1), side, device=device)
        terms.append(score_per_offset(q[dims].double(), k[dims].double(), step[pairs].to(device), offsets))
    return terms[0][:, None] + terms[1][None, :]


# ---------------------------------------------------------------------------------------
# 2-D RoPE in words (the Images and video page)


def plane_words(rows: int, cols: int) -> str:
    """The score per offset (Δh, Δw): a row term plus a column term."""
    return (f"**The score per offset (Δh, Δw)**: {counted((2 * rows - 1) * (2 * cols - 1), 'value')} describe all "
            f"{counted((rows * cols) ** 2, 'pair')}. Half the frequency pairs turn with the row, half with the "
            "column, so the map is a row term plus a column term: S(Δh, Δw) = S_h(Δh) + S_w(Δw). Every query patch "
            "reads its own H × W part of this one map.")


def query_words(rows: int, cols: int, query_row: int, query_col: int) -> str:
    """One query patch's slice of the per-offset map."""
    return (f"**The query patch ({query_row}, {query_col}) against every key patch**: its part of the map beside "
            f"(Δh from {minus(-query_row)} to {rows - 1 - query_row}, Δw from {minus(-query_col)} to "
            f"{cols - 1 - query_col}), laid out as the image. Move the query: the picture slides, its shape stays.")


#: Which pairs each family gives to the row and to the column.
PAIRS_WORDS = (
    "**Which pairs turn with which axis, and how fast.** Pixtral takes a D-wide RoPE and gives its even-indexed θ to "
    "the row, the odd-indexed to the column, so rows and columns alternate along the wavelengths; the Qwen-VL vision "
    "towers use the same θ (from a D/2-wide RoPE) for both; DINOv3 uses θ_i = 1/100^(4i/D) on patch centres "
    "normalised to [−1, 1], an angle of 2π·coordinate·θ, so its wavelengths in patches grow with the grid. All "
    "three lay cos and sin out as [row pairs, column pairs] twice and pair dimension p with p + D/2 (rotate_half).")

#: Where the coordinates are normalised (DINOv3): the map stretches with the grid.
NORMALISED_WORDS = (
    "**DINOv3's coordinates depend on the image size**: neighbouring patches are 2/H apart, so one patch of offset "
    "turns a pair by 2π·θ·2/H, less on a larger image: the map stretches with the grid. Its CLS and register tokens "
    "come before the patches and are not rotated: a patch's score against them depends on where the patch is, not "
    "on an offset.")
