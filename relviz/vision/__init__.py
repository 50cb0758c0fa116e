"""Position in images and video: patch grids, Swin's bias table, 2-D RoPE and M-RoPE.

One module per structure (``grid``: the 2-D relative index; ``swin``: Swin and Swin v2's bias tables;
``rope2d``: axial 2-D RoPE as Pixtral, the Qwen-VL vision towers and DINOv3 apply it; ``mrope``: M-RoPE's
position ids and frequency sections). Every structure is built per offset (Δh, Δw) or (Δt, Δh, Δw),
never per patch pair: 4,096 patches have 4,096² pairs but only 127² offsets.
"""
from __future__ import annotations

from relviz._lazy import lazy_exports

# Names load with their module on first use (relviz/_lazy.py), so this package's body imports nothing.
__all__, __getattr__, __dir__ = lazy_exports(__name__, {
    "grid": ("PatchGrid", "patch_coordinates", "relative_index_2d", "query_offsets"),
    "swin": ("swin_index_per_offset", "swin_relative_position_index", "swin_bias", "swin_bias_per_offset",
             "swinv2_coordinates", "swinv2_table"),
    "rope2d": ("Rope2D", "pixtral_rope", "qwen_vl_vision_rope", "dinov3_rope", "rope2d_angles",
               "rope2d_cos_sin", "rotate_2d", "score_map_2d"),
    "mrope": ("MropeRule", "MROPE_RULES", "Text", "Image", "Video", "mrope_position_ids", "mrope_pair_axes",
              "mrope_angles", "video_frame_step", "score_map_3d"),
})
