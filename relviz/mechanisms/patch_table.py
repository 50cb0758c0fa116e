"""A learned vector per patch of a trained grid, added to the patch embeddings (ViT, DeiT, DINOv2): position enters
with the input, before the first layer, and an image of another grid gets the table resized bicubically
(relviz.vision.absolute2d, exact against transformers' interpolate_pos_encoding)."""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import torch

from relviz.mechanisms.base import LayerContext, Mechanism
from relviz.mechanisms.view_kinds import LayerView, Note

__all__ = ["PatchTable"]


@dataclass(frozen=True, eq=False)
class PatchTable(Mechanism):
    """The table ``tensor_name`` [prefix + side², D] (None from a config alone) of a ``side`` × ``side`` grid."""

    tensor_name: str
    prefix: int
    side: int
    float32: bool = False
    table: torch.Tensor | None = None

    name = "patch_table"
    role = "adds a learned vector per patch of the trained grid to the input, resized for other grids"
    order = 20
    legend = "absolute"
    positional = True
    needs_weights = True
    option_types = {"tensor": str, "prefix": int, "float32": bool}

    @classmethod
    def read(cls, ctx: LayerContext, options: Mapping[str, Any]) -> PatchTable:
        cfg = ctx.config
        image, patch = cfg.int("image_size", minimum=1, maximum=1 << 16), cfg.int("patch_size", minimum=1,
                                                                                    maximum=1 << 12)
        side = image // patch
        if side < 1:
            raise ValueError(f"config field {cfg.name('image_size')} ({image}) must hold at least one "
                             f"{cfg.name('patch_size')} ({patch})")
        name, prefix = options["tensor"], int(options.get("prefix", 0))
        table = None
        if ctx.has_weights:
            if "patch_table" not in ctx.shared:
                found = ctx.tensor(name)
                if found is None:
                    raise ValueError(f"no {name} tensor found in the safetensors")
                ctx.shared["patch_table"] = found.reshape(-1, found.shape[-1])
            table = ctx.shared["patch_table"]
            if table.shape[0] != prefix + side * side:
                raise ValueError(f"tensor {name} has {table.shape[0]} rows; {cfg.name('image_size')} // "
                                 f"{cfg.name('patch_size')} = {side} gives {prefix} + {side}² = {prefix + side * side}")
        return cls(tensor_name=name, prefix=prefix, side=side, float32=bool(options.get("float32", False)),
                   table=table)

    def grid_table(self, rows: int, cols: int) -> torch.Tensor:
        """[prefix + rows·cols, D] what an image of rows × cols patches adds to its tokens (relviz.vision.absolute2d)."""
        from relviz.vision.absolute2d import grid_table

        if self.table is None:
            raise ValueError("the patch table lives in the weights: inspect a model directory, not a config alone")
        return grid_table(self.table, rows, cols, prefix=self.prefix, float32=self.float32)

    def label(self) -> str:
        return f"learned patch table {self.side}×{self.side}"

    def describe(self) -> str:
        before = {0: "", 1: "; one row for the CLS token before them"}.get(
            self.prefix, f"; {self.prefix} rows for the tokens before them (CLS, distillation)")
        return (f"a learned vector per patch of a {self.side} × {self.side} grid added to the patch embeddings"
                f"{before}; an image of another grid gets the patch rows resized bicubically to its grid")

    def settings(self) -> dict[str, Any]:
        return {"trained_grid": [self.side, self.side], "prefix_rows": self.prefix, "tensor": self.tensor_name}

    def extent(self) -> str:
        return (f"patches of an image ({self.side} × {self.side} trained; other grids interpolated), not a "
                "sequence")

    def views(self, length: int, layer: Any) -> list[LayerView]:
        return [Note("Learned patch table", self.describe() + ". Position enters once, with the input: the "
                     "layers themselves apply none.")]
