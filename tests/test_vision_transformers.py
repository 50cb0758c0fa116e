"""relviz.vision against transformers 5.23's own modules on tiny configs: Swin and Swin v2's bias of a
block, Pixtral's, the Qwen-VL vision towers' and DINOv3's 2-D rotary, Qwen2/2.5/3-VL's get_rope_index and
text rotary. torch.equal wherever relviz runs the same operations."""
from __future__ import annotations

import importlib
import math
import types

import pytest
import torch

from relviz.vision.grid import PatchGrid
from relviz.vision.mrope import (
    IMAGE,
    MROPE_RULES,
    TEXT,
    VIDEO,
    Image,
    Text,
    Video,
    mrope_angles,
    mrope_position_ids,
    reduces_to_rope,
)
from relviz.vision.rope2d import dinov3_rope, pixtral_rope, qwen_vl_vision_rope, rope2d_cos_sin, rotate_2d
from relviz.vision.swin import (
    swin_bias,
    swin_bias_per_offset,
    swin_relative_position_index,
    swinv2_coordinates,
    swinv2_table,
)


def _modeling(name: str):
    return importlib.import_module(f"transformers.models.{name}.modeling_{name}")


# ---------------------------------------------------------------------------------------
# Swin and Swin v2


def test_swin_block_bias_is_the_table_gathered_by_the_index_formula():
    from transformers import SwinConfig, SwinModel

    torch.manual_seed(0)
    model = SwinModel(SwinConfig(image_size=32, patch_size=4, embed_dim=16, depths=[2], num_heads=[2],
                                 window_size=4)).eval()
    module = model.encoder.layers[0].blocks[0].attention.relative_position_bias
    torch.nn.init.normal_(module.relative_position_bias_table)
    table = module.relative_position_bias_table.detach()
    assert torch.equal(swin_relative_position_index(4, device="cpu").view(-1), module.relative_position_index)
    assert torch.equal(swin_bias(table, 4), module()[0])
    per_offset = swin_bias_per_offset(table, 4)                       # [heads, 7, 7], Δ = key − query
    bias = module()[0]
    for query, key in ((0, 15), (5, 6), (15, 0), (9, 9)):
        dh, dw = key // 4 - query // 4, key % 4 - query % 4
        assert torch.equal(per_offset[:, dh + 3, dw + 3], bias[:, query, key])


@pytest.mark.parametrize("pretrained", [0, 8])
def test_swinv2_log_spaced_coordinates_and_the_bias_its_mlp_gives(pretrained):
    from transformers import Swinv2Config, Swinv2Model

    torch.manual_seed(0)
    model = Swinv2Model(Swinv2Config(image_size=32, patch_size=4, embed_dim=16, depths=[2], num_heads=[2],
                                     window_size=4, pretrained_window_sizes=[pretrained])).eval()
    attention = model.encoder.layers[0].blocks[0].attention.self
    coords = swinv2_coordinates(4, pretrained_window=pretrained, device="cpu")
    assert torch.equal(coords, attention.relative_coords_table.reshape(-1, 2))
    edge = 8 * 3 / (pretrained - 1 if pretrained else 3)              # the window's farthest offset, δ = 3
    assert abs(float(coords.max()) - math.log2(edge + 1) / 3) < 1e-6 and float(coords.min()) == -float(coords.max())
    mlp = attention.continuous_position_bias_mlp
    table = swinv2_table(coords, mlp[0].weight.detach(), mlp[0].bias.detach(), mlp[2].weight.detach())
    hidden = torch.randn(1, 16, 16)
    with torch.no_grad():
        _, probs = attention(hidden, output_attentions=True)
        q = torch.nn.functional.normalize(attention.query(hidden).view(1, 16, 2, 8).transpose(1, 2), dim=-1)
        k = torch.nn.functional.normalize(attention.key(hidden).view(1, 16, 2, 8).transpose(1, 2), dim=-1)
        scale = torch.clamp(attention.logit_scale, max=torch.log(torch.tensor(100.0))).exp()
        expected = torch.softmax(q @ k.transpose(-2, -1) * scale + swin_bias(table, 4)[None], dim=-1)
    assert torch.allclose(probs, expected, atol=1e-6)
    assert torch.equal(table, 16 * torch.sigmoid(mlp(attention.relative_coords_table).view(-1, 2)))


# ---------------------------------------------------------------------------------------
# 2-D RoPE


def test_pixtral_axial_rotary_cos_sin_and_rotation():
    from transformers import PixtralVisionConfig

    modeling = _modeling("pixtral")
    config = PixtralVisionConfig(hidden_size=64, num_attention_heads=4, intermediate_size=16, num_hidden_layers=1,
                                 image_size=64, patch_size=8)
    rotary = modeling.PixtralVisionRotaryEmbedding(config)
    h, w = 3, 5
    hh, ww = torch.meshgrid(torch.arange(h), torch.arange(w), indexing="ij")
    x = torch.randn(1, h * w, 64)
    cos, sin = rotary(x, torch.stack([hh.flatten(), ww.flatten()], dim=-1))
    rope = pixtral_rope(16, config.rope_parameters["rope_theta"])
    mine_cos, mine_sin = rope2d_cos_sin(rope, (h, w), device="cpu")
    assert torch.equal(mine_cos, cos) and torch.equal(mine_sin, sin)
    q = torch.randn(1, 4, h * w, 16)
    expected, _ = modeling.apply_rotary_pos_emb(q, q, cos, sin, unsqueeze_dim=0)
    assert torch.equal(rotate_2d(q, rope, (h, w)), expected)


@pytest.mark.parametrize("module, rotary, config_class", [
    ("qwen2_vl", "Qwen2VLVisionRotaryEmbedding", "Qwen2VLVisionConfig"),
    ("qwen2_5_vl", "Qwen2_5_VLVisionRotaryEmbedding", "Qwen2_5_VLVisionConfig"),
    ("qwen3_vl", "Qwen3VLVisionRotaryEmbedding", "Qwen3VLVisionConfig")])
def test_qwen_vl_vision_rotary_at_the_towers_own_position_ids(module, rotary, config_class):
    """The towers order patches block-major over the spatial merge (vision_utils.get_vision_position_ids);
    each token's cos/sin is relviz's at its (h, w)."""
    import transformers
    from transformers.vision_utils import get_vision_position_ids

    modeling = _modeling(module)
    config = getattr(transformers, config_class)(depth=1, hidden_size=64, embed_dim=64, num_heads=4,
                                                 spatial_merge_size=2)
    embedding = getattr(modeling, rotary)(config)
    head_dim = 64 // 4
    grid = torch.tensor([[2, 4, 6]])
    positions = get_vision_position_ids(grid, 2)                                   # [N, 2]
    cos, sin = embedding(torch.randn(1, 4), positions)
    rope = qwen_vl_vision_rope(head_dim, config.rope_parameters["rope_theta"])
    mine_cos, mine_sin = rope2d_cos_sin(rope, PatchGrid(4, 6), device="cpu")
    flat = positions[:, 0] * 6 + positions[:, 1]
    assert torch.equal(mine_cos[flat], cos) and torch.equal(mine_sin[flat], sin)


@pytest.mark.parametrize("registers", [0, 4])
def test_dinov3_normalised_coordinates_and_unrotated_prefix(registers):
    from transformers import DINOv3ViTConfig

    modeling = _modeling("dinov3_vit")
    config = DINOv3ViTConfig(hidden_size=64, num_attention_heads=4, intermediate_size=16, num_hidden_layers=1,
                             image_size=32, patch_size=8, num_register_tokens=registers)
    embedding = modeling.DINOv3ViTRopePositionEmbedding(config).eval()
    pixels = torch.randn(1, 3, 3 * 8, 5 * 8)
    cos, sin = embedding(pixels)
    rope = dinov3_rope(16, config.rope_theta, prefix_tokens=1 + registers)
    mine_cos, mine_sin = rope2d_cos_sin(rope, (3, 5), device="cpu")
    assert torch.equal(mine_cos, cos) and torch.equal(mine_sin, sin)
    q = torch.randn(1, 4, 1 + registers + 15, 16)
    k = torch.randn(1, 4, 1 + registers + 15, 16)
    expected_q, expected_k = modeling.apply_rotary_pos_emb(q, k, cos, sin)
    assert torch.equal(rotate_2d(q, rope, (3, 5)), expected_q)
    assert torch.equal(rotate_2d(k, rope, (3, 5))[..., :1 + registers, :], k[..., :1 + registers, :])


# ---------------------------------------------------------------------------------------
# M-RoPE: get_rope_index and the text rotary


def _rope_index(module: str, segments, merge: int, tokens_per_second: int):
    """transformers' get_rope_index on the sequence ``segments`` describes (grids × merge, as the processor)."""
    modeling = _modeling(module)
    model_class = next(getattr(modeling, name) for name in dir(modeling)
                       if name.endswith("VLModel") and hasattr(getattr(modeling, name), "get_rope_index"))
    config = types.SimpleNamespace(vision_config=types.SimpleNamespace(spatial_merge_size=merge,
                                                                       tokens_per_second=tokens_per_second))
    fake = types.SimpleNamespace(config=config)
    fake.get_vision_position_ids = lambda *a, **k: model_class.get_vision_position_ids(fake, *a, **k)
    kinds, images, videos, seconds = [], [], [], []
    for s in segments:
        if isinstance(s, Text):
            kinds += [TEXT] * s.length
        elif isinstance(s, Image):
            kinds += [IMAGE] * (s.rows * s.cols)
            images.append([1, s.rows * merge, s.cols * merge])
        else:
            frames = [([TEXT] * s.frame_text + [VIDEO] * (s.rows * s.cols)) for _ in range(s.frames)]
            kinds += [kind for frame in frames for kind in frame]
            videos.append([s.frames, s.rows * merge, s.cols * merge])
            seconds.append(s.seconds_per_grid)
    types_ = torch.tensor([kinds])
    extra = {"second_per_grid_ts": torch.tensor(seconds, dtype=torch.float32)} if seconds else {}
    ids, delta = model_class.get_rope_index(
        fake, torch.zeros_like(types_), types_, image_grid_thw=torch.tensor(images) if images else None,
        video_grid_thw=torch.tensor(videos) if videos else None, **extra)
    return ids[:, 0], torch.tensor(kinds), delta


MIXED = [Text(5), Image(3, 4), Text(2), Video(3, 2, 2, seconds_per_grid=0.5), Text(3)]


@pytest.mark.parametrize("module, segments", [
    ("qwen2_vl", MIXED), ("qwen2_5_vl", MIXED),
    ("qwen2_5_vl", [Text(1), Video(8, 2, 3, seconds_per_grid=1.5), Text(2), Image(4, 2)]),
    ("qwen3_vl", [Text(5), Image(3, 4), Text(2), Video(3, 2, 2, frame_text=3), Text(3)]),
    ("qwen3_vl", [Image(2, 2), Text(1)])])
def test_mrope_position_ids_are_get_rope_index(module, segments):
    expected, kinds, delta = _rope_index(module, segments, merge=2, tokens_per_second=4)
    ids, mine_kinds = mrope_position_ids(segments, MROPE_RULES[module], tokens_per_second=4, device="cpu")
    assert torch.equal(ids, expected) and torch.equal(mine_kinds, kinds)
    assert int(ids.max()) + 1 - ids.shape[1] == int(delta)
    assert bool(reduces_to_rope(ids)[kinds == TEXT].all())


@pytest.mark.parametrize("module, rotary, config_class, interleaved", [
    ("qwen2_vl", "Qwen2VLRotaryEmbedding", "Qwen2VLTextConfig", False),
    ("qwen2_5_vl", "Qwen2_5_VLRotaryEmbedding", "Qwen2_5_VLTextConfig", False),
    ("qwen3_vl", "Qwen3VLTextRotaryEmbedding", "Qwen3VLTextConfig", True)])
def test_mrope_angles_are_the_text_rotary_at_real_image_and_video_ids(module, rotary, config_class, interleaved):
    import transformers

    section = [4, 6, 6] if not interleaved else [6, 5, 5]
    config = getattr(transformers, config_class)(hidden_size=64, num_attention_heads=2, num_key_value_heads=2,
                                                 num_hidden_layers=1, intermediate_size=16, vocab_size=32, head_dim=32,
                                                 rope_parameters={"rope_type": "default", "rope_theta": 10000.0,
                                                                  "mrope_section": section})
    embedding = getattr(_modeling(module), rotary)(config)
    segments = MIXED if not interleaved else [Text(5), Image(3, 4), Text(2), Video(3, 2, 2, frame_text=2)]
    ids, kinds = mrope_position_ids(segments, MROPE_RULES[module], tokens_per_second=4, device="cpu")
    cos, sin = embedding(torch.randn(1, 4), ids[:, None, :])
    angles = mrope_angles(ids, embedding.inv_freq, section, interleaved=interleaved)
    emb = torch.cat((angles, angles), dim=-1)
    assert torch.equal(emb.cos(), cos[0]) and torch.equal(emb.sin(), sin[0])
    # Text tokens: plain RoPE at their one id (every pair multiplies the same number).
    text = kinds == TEXT
    plain = ids[0, text].float()[:, None] * embedding.inv_freq[None, :]
    assert torch.equal(angles[text], plain)
    assert not torch.equal(angles[~text], ids[0, ~text].float()[:, None] * embedding.inv_freq[None, :])
