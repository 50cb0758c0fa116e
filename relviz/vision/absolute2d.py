"""A learned table of one vector per patch of a trained S × S grid (ViT, DeiT, DINOv2), and the table an image of
another grid gets: transformers' ``interpolate_pos_encoding`` resizes the patch rows as an S × S picture of D
channels to H × W by bicubic interpolation (align_corners False), leaving the rows before the patches (the CLS
token, DeiT's distillation token) as they are. An image of the trained grid reads the table itself; any other grid
(a non-square one of S² patches too) reads interpolated vectors, which no row of the table holds.

Exact against transformers 5.23 (relviz/vision_zoo.py, tests/test_vision_sweep.py): the same operations.
"""
from __future__ import annotations

import math

import torch

from relviz._checks import check_int, check_tensor
from relviz.vision.grid import MAX_SIDE


def trained_side(table: torch.Tensor, prefix: int) -> int:
    """S, the side of the square grid the table's patch rows were trained on (rows − prefix = S²)."""
    table = check_tensor("table", table, ndim=2, floating=True)
    prefix = check_int("prefix", prefix, minimum=0, maximum=16)
    patches = table.shape[0] - prefix
    side = math.isqrt(max(patches, 0))
    if patches < 1 or side * side != patches:
        raise ValueError(f"table must hold {prefix} prefix rows and S² patch rows; got {table.shape[0]} rows "
                         f"({patches} after the prefix is not a square)")
    return side


def grid_table(table: torch.Tensor, rows: int, cols: int, *, prefix: int, float32: bool = False) -> torch.Tensor:
    """[prefix + rows·cols, D]: the vector each token of an image of rows × cols patches gets (row-major), as
    ``interpolate_pos_encoding``: the table itself on the trained grid, else its patch rows resized bicubically.
    ``float32``: the resize runs in float32 and casts back (DINOv2)."""
    side = trained_side(table, prefix)
    rows = check_int("rows", rows, minimum=1, maximum=MAX_SIDE)
    cols = check_int("cols", cols, minimum=1, maximum=MAX_SIDE)
    if rows == side and cols == side:
        return table
    dim = table.shape[1]
    patches = table[prefix:].reshape(1, side, side, dim).permute(0, 3, 1, 2)          # [1, D, S, S]
    resized = torch.nn.functional.interpolate(patches.to(torch.float32) if float32 else patches,
                                              size=(rows, cols), mode="bicubic", align_corners=False)
    resized = resized.to(table.dtype) if float32 else resized
    return torch.cat((table[:prefix], resized.permute(0, 2, 3, 1).reshape(rows * cols, dim)), dim=0)


#: Learned patch tables in words (the Images and video page).
PATCH_TABLE_WORDS = (
    "**Learned patch tables (ViT, DeiT, DINOv2) hold no offset at all**: one vector per patch of the trained S × S "
    "grid (S = image_size / patch_size: 14 × 14 for ViT-B/16 at 224 px), after a row for the CLS token (DeiT: two, "
    "with its distillation token), added to the patches before the first layer. For an image of another grid, "
    "transformers resizes the S × S patch rows bicubically to H × W (interpolate_pos_encoding); a non-square grid "
    "of S² patches is resized too. relviz reads the table from a checkpoint and resizes it the same way, bit for bit.")
