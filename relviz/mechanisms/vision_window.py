"""Window attention in a vision tower: Qwen2.5-VL's blocks attend within windows of the patch grid, except
the full-attention blocks listed in ``fullatt_block_indexes``, which see the whole image."""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from relviz.mechanisms.base import LayerContext, Mechanism
from relviz.mechanisms.view_kinds import LayerView, Note

__all__ = ["VisionWindow"]


@dataclass(frozen=True)
class VisionWindow(Mechanism):
    """``window`` patches per side (window_size pixels / patch_size), or None on a full-attention block."""

    window: int | None
    merge: int

    name = "vision_window"
    role = "decides which keys a query sees"
    order = 50
    legend = "pattern"
    option_types = {"full_field": str}

    @classmethod
    def read(cls, ctx: LayerContext, options: Mapping[str, Any]) -> VisionWindow:
        cfg = ctx.config
        full_field = options.get("full_field", "fullatt_block_indexes")
        full = cfg.raw(full_field, [])
        if not isinstance(full, (list, tuple)) or not all(isinstance(v, int) and not isinstance(v, bool)
                                                          and 0 <= v < ctx.layers for v in full):
            raise ValueError(f"config field {cfg.name(full_field)} must be a list of block indexes from 0 to "
                             f"{ctx.layers - 1}; got {full!r:.80}")
        merge = cfg.int("spatial_merge_size", 2, minimum=1, maximum=64)
        if ctx.index in full:
            return cls(window=None, merge=merge)
        pixels = cfg.int("window_size", minimum=1, maximum=1 << 16)
        patch = cfg.int("patch_size", minimum=1, maximum=1 << 12)
        merged = pixels // merge // patch               # transformers' vit_merger_window_size, in merged tokens
        if merged < 1:
            raise ValueError(f"config field {cfg.name('window_size')} ({pixels}) must cover at least one merged "
                             f"token ({cfg.name('patch_size')} × {cfg.name('spatial_merge_size')} = {patch * merge})")
        return cls(window=merged * merge, merge=merge)

    def label(self) -> str:
        return "full image" if self.window is None else f"window {self.window}×{self.window} patches"

    def describe(self) -> str:
        if self.window is None:
            return "full attention: every patch of the image sees every other (a full-attention block)"
        return (f"window attention: a patch sees only the patches of its own {self.window} × {self.window} window "
                f"({self.window // self.merge} × {self.window // self.merge} merged tokens)")

    def settings(self) -> dict[str, Any]:
        return {"window_patches": self.window, "spatial_merge_size": self.merge}

    def views(self, length: int, layer: Any) -> list[LayerView]:
        if self.window is None:
            return [Note("Full attention over the image", "This block sees the whole image: the few full blocks "
                         "carry information between the windows the other blocks stay inside.")]
        return [Note("Window attention", f"This block splits the patch grid into windows of {self.window} × "
                     f"{self.window} patches and attends inside each: a patch never sees past its window here. "
                     "The grid's edge windows are smaller when it does not divide evenly.")]
