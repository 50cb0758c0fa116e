"""Swin's relative position bias, per block: a (2M − 1)² × heads table (Swin) or the table a small MLP makes
from log-spaced coordinates, bounded by 16·sigmoid (Swin v2), gathered by (Δh, Δw) inside each M × M window.
The arithmetic is relviz.vision.swin (exact against transformers); this module reads one block's values: its
stage and block from the config's depths, the table or the MLP from the checkpoint."""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import torch

from relviz._words import counted
from relviz.mechanisms.base import LayerContext, Mechanism
from relviz.mechanisms.view_kinds import LayerView, Note

__all__ = ["SwinBias"]


def _stage_block(ctx: LayerContext) -> tuple[int, int]:
    """(stage, block in the stage) of the plan's layer ``ctx.index``: the blocks of each stage follow each other."""
    depths = ctx.config.raw(ctx.layers_field)
    index = ctx.index
    for stage, depth in enumerate(depths):
        if index < depth:
            return stage, index
        index -= depth
    raise ValueError(f"layer {ctx.index} is beyond config field {ctx.config.name(ctx.layers_field)}")


def _stage_grid(cfg, stage: int) -> tuple[int, int]:
    """(rows, cols) of patches at stage ``stage``: image_size // patch_size per side, halved per stage, as
    transformers' Swin encoders lay their stages out."""
    sides = []
    for field, default in (("image_size", 224), ("patch_size", 4)):
        value = cfg.raw(field, default)
        value = list(value) if isinstance(value, (list, tuple)) else [value, value]
        if len(value) != 2 or not all(isinstance(v, int) and not isinstance(v, bool) and v > 0 for v in value):
            raise ValueError(f"config field {cfg.name(field)} must be a positive integer or two; got {value!r:.40}")
        sides.append(value)
    rows, cols = (i // p // 2 ** stage for i, p in zip(*sides))
    if not rows or not cols:
        raise ValueError(f"stage {stage} has {rows} × {cols} patches (config fields {cfg.name('image_size')} // "
                         f"{cfg.name('patch_size')}, halved per stage): no window fits")
    return rows, cols


@dataclass(frozen=True, eq=False)
class SwinBias(Mechanism):
    """The bias of block ``block`` of stage ``stage``: window ``window``, ``heads`` heads; ``table``
    [(2M − 1)², heads] when the checkpoint was read (Swin v2: the MLP's output, bounded)."""

    stage: int
    block: int
    window: int
    heads: int
    continuous: bool
    pretrained_window: int = 0
    table: torch.Tensor | None = None

    name = "swin_bias"
    role = "adds a learned bias per (Δh, Δw) to the logits of each window"
    order = 30
    legend = "bias"
    positional = True
    needs_weights = True
    option_types = {"continuous": bool, "shrinks_when_built": bool}

    @classmethod
    def read(cls, ctx: LayerContext, options: Mapping[str, Any]) -> SwinBias:
        from relviz.vision.swin import MAX_WINDOW, swinv2_coordinates, swinv2_raw_table, window_on_grid

        cfg = ctx.config
        stage, block = _stage_block(ctx)
        heads_list = cfg.raw("num_heads")
        if not isinstance(heads_list, (list, tuple)) or len(heads_list) <= stage or not isinstance(heads_list[stage], int):
            raise ValueError(f"config field {cfg.name('num_heads')} must list the heads of every stage; got "
                             f"{heads_list!r:.60}")
        continuous = bool(options.get("continuous", False))
        configured = cfg.int("window_size", minimum=1, maximum=MAX_WINDOW)
        grid = _stage_grid(cfg, stage)
        built = bool(options.get("shrinks_when_built", False))
        rows, cols = window_on_grid(*grid, configured, per_side=built)
        where = f"(config fields {cfg.name('image_size')}, {cfg.name('patch_size')}, {cfg.name('window_size')})"
        if rows != cols:
            raise ValueError(f"stage {stage}'s window is {rows} × {cols} patches: this family shrinks each side of "
                             f"the window to a stage side smaller than it, and relviz reads square windows only {where}")
        if not built and min(grid) < configured:
            raise ValueError(f"stage {stage} has {grid[0]} × {grid[1]} patches, a side smaller than the window "
                             f"{configured}: transformers 5.23 builds this block's table for the window as configured "
                             f"and shrinks the window to {rows} only when it runs, where the bias no longer fits and its "
                             f"forward fails; relviz reads no bias for it {where}")
        window = rows
        pretrained = 0
        if continuous:
            sizes = cfg.raw("pretrained_window_sizes", [0] * (stage + 1))
            if not isinstance(sizes, (list, tuple)) or len(sizes) <= stage or not isinstance(sizes[stage], int):
                raise ValueError(f"config field {cfg.name('pretrained_window_sizes')} must list one size per stage; "
                                 f"got {sizes!r:.60}")
            pretrained = sizes[stage]
        prefix = f"encoder.layers.{stage}.blocks.{block}.attention."
        table = None
        if ctx.has_weights and not continuous:
            names = (prefix + "self.relative_position_bias_table",             # the Hub's checkpoints
                     prefix + "relative_position_bias.relative_position_bias_table")  # transformers 5's module
            table = next((t for t in map(ctx.tensor, names) if t is not None), None)
            if table is None:
                raise ValueError(f"no {names[0]} (or {names[1]}) tensor found in the safetensors")
            side = round(table.shape[0] ** 0.5)
            window = (side + 1) // 2                   # the table's own window (a late stage may shrink it)
        elif ctx.has_weights:
            mlp = prefix + "self.continuous_position_bias_mlp."
            w1, b1, w2 = (ctx.tensor(mlp + name) for name in ("0.weight", "0.bias", "2.weight"))
            if w1 is None or b1 is None or w2 is None:
                raise ValueError(f"no {mlp}0.weight, 0.bias and 2.weight tensors found in the safetensors")
            coords = swinv2_coordinates(window, pretrained_window=pretrained, device="cpu")
            table = swinv2_raw_table(coords, w1.float(), b1.float(), w2.float())   # bounded in bias()
        return cls(stage=stage, block=block, window=window, heads=int(heads_list[stage]), continuous=continuous,
                   pretrained_window=pretrained, table=table)

    def _table(self) -> torch.Tensor:
        if self.table is None:
            raise ValueError("Swin's bias lives in the weights: inspect a model directory, not a config alone")
        return self.table

    def bias_per_offset(self) -> torch.Tensor:
        """[heads, 2M − 1, 2M − 1] the bias at each (Δh, Δw) = key − query (relviz.vision.swin); Swin v2's bound
        applied per offset (equal to bias()'s entries up to the last bit)."""
        from relviz.vision.swin import SWINV2_BOUND, swin_bias_per_offset

        per_offset = swin_bias_per_offset(self._table(), self.window)
        return SWINV2_BOUND * torch.sigmoid(per_offset) if self.continuous else per_offset

    def bias(self) -> torch.Tensor:
        """[heads, M², M²] what the block adds to each window's logits, in transformers' operations (bit for bit)."""
        from relviz.vision.swin import swin_bias, swinv2_bias

        return swinv2_bias(self._table(), self.window) if self.continuous else swin_bias(self._table(), self.window)

    def label(self) -> str:
        return f"{'Swin v2 MLP' if self.continuous else 'Swin'} bias, window {self.window}"

    def describe(self) -> str:
        made = ("made by a 2 → 512 → heads MLP from log-spaced coordinates, bounded by 16·sigmoid"
                + (f" (pretrained window {self.pretrained_window})" if self.pretrained_window else "")
                if self.continuous else "a learned table")
        return (f"stage {self.stage} block {self.block}: a bias per (Δh, Δw) inside {self.window} × {self.window} "
                f"windows, {(2 * self.window - 1) ** 2} rows × {counted(self.heads, 'head')}, {made}")

    def settings(self) -> dict[str, Any]:
        return {"stage": self.stage, "block": self.block, "window_size": self.window, "heads": self.heads,
                "continuous": self.continuous, "pretrained_window": self.pretrained_window}

    def extent(self) -> str:
        return (f"patches of an image, not a sequence (windows of {self.window} × {self.window} patches, as many as "
                "the image holds)")

    def views(self, length: int, layer: Any) -> list[LayerView]:
        return [Note("Swin's relative position bias", self.describe() + ". The Images and video page draws the "
                     "table, its index formula and the gathered bias; with the weights read, bias_per_offset() "
                     "gives this block's values.")]
