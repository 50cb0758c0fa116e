"""2-D RoPE in a vision tower: each layer rotates q and k by the patch's row and column (axial), as the
Qwen2-VL / 2.5-VL / 3-VL vision towers, Pixtral's vision encoder and DINOv3 do. The arithmetic is
relviz.vision.rope2d (exact against transformers); this module reads one layer's settings from a vision config.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from relviz.mechanisms.base import LayerContext, Mechanism
from relviz.mechanisms.view_kinds import LayerView, Note

__all__ = ["Rope2DLayer"]

#: variant -> (its base θ when the config gives none, the constructor's name in relviz.vision.rope2d, words)
VARIANTS: dict[str, tuple[float, str, str]] = {
    "qwen_vl": (10000.0, "qwen_vl_vision_rope", "the same θ (a D/2-wide RoPE's) for rows and for columns"),
    "pixtral": (10000.0, "pixtral_rope", "the even-indexed θ of a D-wide RoPE for rows, the odd-indexed for columns"),
    "dinov3": (100.0, "dinov3_rope", "θ_i = 1/base^(4i/D) on patch centres normalised to [−1, 1], angle 2π·coordinate·θ"),
}


@dataclass(frozen=True)
class Rope2DLayer(Mechanism):
    """Axial 2-D RoPE on one layer of a vision tower: ``head_dim`` per head, ``base`` θ, the ``variant``'s split."""

    variant: str
    head_dim: int
    base: float
    prefix: int = 0               # tokens before the patches that are not rotated (DINOv3's CLS + registers)
    patch_size: int | None = None  # pixels per patch side, and the image side config.json names (if any)
    image_size: int | None = None

    name = "rope2d"
    role = "rotates q and k by the patch's row and column"
    order = 10
    legend = "rotation"
    positional = True
    option_types = {"variant": frozenset(VARIANTS), "heads_field": str, "width_field": str, "registers_field": str}

    @classmethod
    def read(cls, ctx: LayerContext, options: Mapping[str, Any]) -> Rope2DLayer:
        cfg = ctx.config
        variant = options.get("variant", "qwen_vl")
        heads_field = options.get("heads_field", "num_heads")
        width_field = options.get("width_field", "hidden_size")
        heads = cfg.int(heads_field, minimum=1, maximum=4096)
        if cfg.has("head_dim"):                        # Pixtral's config states it; else hidden size / heads
            head_dim = cfg.int("head_dim", minimum=4, maximum=4096)
        else:
            width = cfg.int(width_field, minimum=4, maximum=1 << 16)
            if width % heads:
                raise ValueError(f"config field {cfg.name(width_field)} ({width}) must be divisible by "
                                 f"{cfg.name(heads_field)} ({heads})")
            head_dim = width // heads
        if head_dim % 4:
            raise ValueError(f"the head size must be divisible by 4 (half the pairs per axis); got {head_dim} "
                             f"from {cfg.name('head_dim') if cfg.has('head_dim') else cfg.name(width_field)}")
        prefix = 0
        if options.get("registers_field"):             # DINOv3: the CLS token and the register tokens
            prefix = 1 + cfg.int(options["registers_field"], 0, minimum=0, maximum=63)
        params = cfg.sub("rope_parameters")
        default = VARIANTS[variant][0]
        base = params.float("rope_theta", default, minimum=1.0) if params is not None else \
            cfg.float("rope_theta", default, minimum=1.0)
        sizes = {f: cfg.int(f, minimum=1, maximum=1 << 16) if isinstance(cfg.raw(f), int) else None
                 for f in ("patch_size", "image_size")}
        return cls(variant=variant, head_dim=head_dim, base=base, prefix=prefix, **sizes)

    def rope(self):
        """The relviz.vision.rope2d.Rope2D this layer applies."""
        from relviz.vision import rope2d

        rope = getattr(rope2d, VARIANTS[self.variant][1])(self.head_dim, self.base)
        return replace(rope, prefix_tokens=self.prefix)

    def label(self) -> str:
        return f"2-D RoPE θ {self.base / 1000:g}k" if self.base >= 1000 else f"2-D RoPE θ {self.base:g}"

    def describe(self) -> str:
        prefix = ("; the CLS token is not rotated" if self.prefix == 1 else
                  f"; the first {self.prefix} tokens (CLS and registers) are not rotated" if self.prefix else "")
        return (f"2-D RoPE: half of each head's {self.head_dim // 2} pairs turn with the patch's row, half with its "
                f"column; {VARIANTS[self.variant][2]}; base {self.base:g}{prefix}")

    def settings(self) -> dict[str, Any]:
        out = {"variant": self.variant, "head_dim": self.head_dim, "rope_theta": self.base}
        return out | ({"unrotated_prefix_tokens": self.prefix} if self.prefix else {})

    def extent(self) -> str:
        patch = f"patch_size {self.patch_size} px" if self.patch_size else "no patch size in config.json"
        if self.image_size and self.patch_size:
            side = self.image_size // self.patch_size
            return (f"patches of an image, not a sequence (their grid follows the image's size; config.json's "
                    f"image_size {self.image_size} px at {patch} gives {side} × {side} = {side * side:,} patches)")
        return (f"patches of an image, not a sequence (their grid follows the image's size; {patch}, and "
                "config.json names no image size)")

    def views(self, length: int, layer: Any) -> list[LayerView]:
        return [Note("2-D RoPE: position on the patch grid",
                     f"Each head has {self.head_dim} dims, {self.head_dim // 2} frequency pairs: "
                     f"{self.head_dim // 4} turn with the patch's row, {self.head_dim // 4} with its column "
                     f"({VARIANTS[self.variant][2]}). A score then depends on a pair of patches only through "
                     "(Δh, Δw), a row term plus a column term: the Images and video page draws it per offset.")]
