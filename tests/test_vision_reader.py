"""The reader's vision side: a vision-language config's vision tower is a stack of its own (2-D RoPE, window or
full blocks), exact against transformers' Qwen2-VL / Qwen2.5-VL towers on tiny configs; the text side's M-RoPE
is exact with real image and video ids."""
from __future__ import annotations

import importlib

import torch

from relviz.mechanisms.rope2d import Rope2DLayer
from relviz.mechanisms.vision_window import VisionWindow
from relviz.model_presets import preset_plan
from relviz.model_plan import read_plan
from relviz.vision.grid import PatchGrid
from relviz.vision.mrope import MROPE_RULES, Image, Text, Video, mrope_position_ids
from relviz.vision.rope2d import rope2d_cos_sin


def _modeling(name: str):
    return importlib.import_module(f"transformers.models.{name}.modeling_{name}")


def test_qwen25_vl_preset_shows_its_vision_tower_beside_its_text_layers():
    plan = preset_plan("models/qwen2.5-vl-7b")
    assert plan.stack_names == ["decoder", "vision"]
    vision = plan.plans["vision"]
    assert len(vision) == 32 and len(plan.plans["decoder"]) == 28
    full = [p.index for p in vision if p.find(VisionWindow).window is None]
    assert full == [7, 15, 23, 31]
    assert {p.find(VisionWindow).window for p in vision if p.index not in full} == {8}   # 112 px / 14 px
    rope = vision[0].find(Rope2DLayer)
    assert (rope.head_dim, rope.base, rope.variant) == (80, 10000.0, "qwen_vl")       # 1280 / 16
    assert plan.layer(0, stack="decoder").find(Rope2DLayer) is None


def test_qwen25_vl_tower_rotation_and_windows_are_transformers():
    from transformers import Qwen2_5_VLConfig
    from transformers.vision_utils import get_vision_position_ids, get_vision_window_index

    config = Qwen2_5_VLConfig(vision_config=dict(depth=4, hidden_size=64, num_heads=4, intermediate_size=16,
                                                 out_hidden_size=32, patch_size=14, spatial_merge_size=2,
                                                 window_size=112, fullatt_block_indexes=[1, 3]),
                              text_config=dict(hidden_size=32, num_attention_heads=2, num_key_value_heads=2,
                                               num_hidden_layers=1, intermediate_size=16, vocab_size=32))
    plan = read_plan(config.to_dict())
    vision = plan.plans["vision"]
    assert [p.find(VisionWindow).window is None for p in vision] == [i in (1, 3) for i in range(4)]
    tower = _modeling("qwen2_5_vl").Qwen2_5_VisionTransformerPretrainedModel._from_config(config.vision_config)
    grid = torch.tensor([[1, 16, 16]])
    positions = get_vision_position_ids(grid, 2)
    cos, sin = tower.rotary_pos_emb(torch.zeros(1), positions)
    mine_cos, mine_sin = rope2d_cos_sin(vision[0].find(Rope2DLayer).rope(), PatchGrid(16, 16))
    flat = positions[:, 0] * 16 + positions[:, 1]
    assert torch.equal(mine_cos[flat], cos) and torch.equal(mine_sin[flat], sin)
    _, cu_window = get_vision_window_index(grid, 2, 112, 14)
    window = vision[0].find(VisionWindow).window
    assert set(torch.diff(cu_window).tolist()) == {window * window}                   # 8 × 8 patches each


def test_qwen2_vl_tower_reads_embed_dim_and_has_no_windows():
    from transformers import Qwen2VLConfig

    config = Qwen2VLConfig(vision_config=dict(depth=2, embed_dim=64, num_heads=4, hidden_size=32),
                           text_config=dict(hidden_size=32, num_attention_heads=2, num_key_value_heads=2,
                                            num_hidden_layers=1, intermediate_size=16, vocab_size=32))
    plan = read_plan(config.to_dict())
    layer = plan.layer(0, stack="vision")
    assert layer.find(Rope2DLayer).head_dim == 16 and layer.find(VisionWindow) is None


def test_a_config_without_a_vision_tower_has_only_its_text_stack():
    plan = read_plan({"model_type": "qwen2_5_vl", "num_hidden_layers": 2, "hidden_size": 32,
                      "num_attention_heads": 2, "rope_theta": 1e6})
    assert plan.stack_names == ["decoder"]


def test_text_side_mrope_is_exact_with_real_image_and_video_ids():
    from transformers import Qwen2_5_VLTextConfig

    modeling = _modeling("qwen2_5_vl")
    config = Qwen2_5_VLTextConfig(hidden_size=64, num_attention_heads=2, num_key_value_heads=2, num_hidden_layers=1,
                                  intermediate_size=16, vocab_size=32,
                                  rope_parameters={"rope_type": "default", "rope_theta": 10000.0,
                                                   "mrope_section": [4, 6, 6]})
    plan = read_plan(config.to_dict())
    ids, kinds = mrope_position_ids([Text(3), Image(3, 4), Text(2), Video(3, 2, 2, seconds_per_grid=1.5), Text(2)],
                                    MROPE_RULES["qwen2_5_vl"], tokens_per_second=2, device="cpu")
    q = torch.randn(1, 2, ids.shape[1], 32)
    cos, sin = modeling.Qwen2_5_VLRotaryEmbedding(config)(q, ids[:, None, :])
    expected, _ = modeling.apply_rotary_pos_emb(q, q, cos, sin)
    assert torch.equal(plan.rotate(q, ids), expected)
    assert not torch.equal(plan.rotate(q, ids), plan.rotate(q, torch.arange(ids.shape[1])))


def test_your_model_page_shows_the_vision_stack_of_the_preset():
    from page_support import run_page
    from plotly_data import charts

    at = run_page("your_model", timeout=120, ym_model="Qwen2.5-VL 7B (published config)", ym_stack="vision",
                  ym_layer=7)
    assert not at.error
    assert at.radio(key="ym_stack").options == ["decoder", "vision"]
    strip = charts(at)[0]
    assert max(max(t["x"]) for t in strip["data"] if t.get("type") == "bar" and isinstance(t.get("x"), list)) == 31
    assert any("2-D RoPE" in c.value and "vision layer 7" in c.value for c in at.caption)
    assert any("sees the whole image" in c.value for c in at.caption)
    # the text side stays in view under the vision strip: its 28 decoder layers, titled by their stack
    text_strip = charts(at)[1]
    assert text_strip["layout"]["title"]["text"].startswith("decoder")
    assert max(max(t["x"]) for t in text_strip["data"] if t.get("type") == "bar" and isinstance(t.get("x"), list)) == 27


def test_pixtral_encoder_is_read_as_transformers_rotates_it():
    from transformers import PixtralVisionConfig

    config = PixtralVisionConfig(hidden_size=64, num_attention_heads=4, head_dim=16, num_hidden_layers=2,
                                 intermediate_size=16, image_size=64, patch_size=8)
    plan = read_plan(config.to_dict())
    layer = plan.layer(1, stack="encoder")
    rope = layer.find(Rope2DLayer)
    assert rope.variant == "pixtral" and rope.head_dim == 16 and len(plan.plans["encoder"]) == 2
    rotary = _modeling("pixtral").PixtralVisionRotaryEmbedding(config)
    hh, ww = torch.meshgrid(torch.arange(4), torch.arange(6), indexing="ij")
    cos, sin = rotary(torch.zeros(1), torch.stack([hh.flatten(), ww.flatten()], dim=-1))
    assert torch.equal(rope2d_cos_sin(rope.rope(), (4, 6))[0], cos)


def test_dinov3_vit_leaves_cls_and_registers_unrotated():
    from transformers import DINOv3ViTConfig

    from relviz.vision.rope2d import rotate_2d

    modeling = _modeling("dinov3_vit")
    config = DINOv3ViTConfig(hidden_size=64, num_attention_heads=4, intermediate_size=16, num_hidden_layers=2,
                             image_size=32, patch_size=8, num_register_tokens=4)
    rope = read_plan(config.to_dict()).layer(0, stack="encoder").find(Rope2DLayer)
    assert (rope.variant, rope.base, rope.prefix) == ("dinov3", 100.0, 5)
    cos, sin = modeling.DINOv3ViTRopePositionEmbedding(config).eval()(torch.zeros(1, 3, 24, 40))
    q = torch.randn(1, 4, 5 + 15, 16)
    expected, _ = modeling.apply_rotary_pos_emb(q, q, cos, sin)
    assert torch.equal(rotate_2d(q, rope.rope(), (3, 5)), expected)


def test_clip_and_siglip_vision_tables_are_read_from_the_checkpoint(tmp_path):
    """A learned table fixes the grid: (image_size / patch_size)² rows (+ CLIP's CLS), read from the safetensors."""
    from transformers import CLIPVisionConfig, CLIPVisionModel, SiglipVisionConfig, SiglipVisionModel

    from relviz.hf import inspect
    from relviz.mechanisms.absolute import LearnedAbsolute

    small = dict(hidden_size=16, intermediate_size=16, num_hidden_layers=2, num_attention_heads=2, image_size=32,
                 patch_size=8)
    for model, rows in ((CLIPVisionModel(CLIPVisionConfig(**small)), 16 + 1),
                        (SiglipVisionModel(SiglipVisionConfig(**small)), 16)):
        directory = tmp_path / model.config.model_type
        model.save_pretrained(directory)
        table = inspect(directory).layer(0, stack="encoder").find(LearnedAbsolute).positions()
        assert table.shape == (rows, 16)
        reference = next(w for n, w in model.named_parameters() if n.endswith("embeddings.position_embedding.weight"))
        assert torch.equal(table, reference.detach())


def test_swin_and_swinv2_bias_of_every_block_is_read_from_the_checkpoint(tmp_path):
    """Each block's bias per (Δh, Δw), gathered per pair, is what its module adds (Swin) or makes (Swin v2)."""
    from transformers import SwinConfig, SwinModel, Swinv2Config, Swinv2Model

    from relviz.hf import inspect
    from relviz.mechanisms.swin_bias import SwinBias

    torch.manual_seed(0)
    small = dict(image_size=32, patch_size=4, embed_dim=16, depths=[2, 1], num_heads=[2, 4], window_size=4)
    for model in (SwinModel(SwinConfig(**small)), Swinv2Model(Swinv2Config(**small, pretrained_window_sizes=[0, 8]))):
        for p in model.parameters():
            torch.nn.init.normal_(p)
        model.save_pretrained(tmp_path / model.config.model_type)
        plan = inspect(tmp_path / model.config.model_type)
        assert len(plan.plans["encoder"]) == 3
        for index, (stage, block) in enumerate([(0, 0), (0, 1), (1, 0)]):
            found = plan.layer(index, stack="encoder").find(SwinBias)
            assert (found.stage, found.block) == (stage, block)
            attention = model.encoder.layers[stage].blocks[block].attention
            with torch.no_grad():
                if hasattr(attention, "relative_position_bias"):                    # Swin
                    expected = attention.relative_position_bias()[0]
                else:                                                              # Swin v2: its forward's steps
                    self_ = attention.self
                    table = self_.continuous_position_bias_mlp(self_.relative_coords_table).view(-1, self_.num_attention_heads)
                    expected = 16 * torch.sigmoid(table[self_.relative_position_index.view(-1)].view(
                        16, 16, -1).permute(2, 0, 1).contiguous())
            assert torch.equal(found.bias(), expected), (model.config.model_type, index)     # bit for bit


def test_qwen3_vl_text_side_interleaves_its_sections_as_transformers():
    """Qwen3-VL's text rotary interleaves t, h, w pair by pair: the plan rotates as its module at real ids, with the
    config's sections and with the module's own default [24, 20, 20] when the config names none."""
    from transformers import Qwen3VLConfig, Qwen3VLTextConfig

    modeling = _modeling("qwen3_vl")
    for head_dim, section in ((32, [6, 5, 5]), (128, None)):
        params = {"rope_type": "default", "rope_theta": 10000.0, **({"mrope_section": section} if section else {})}
        config = Qwen3VLTextConfig(hidden_size=64, num_attention_heads=2, num_key_value_heads=2, num_hidden_layers=1,
                                   intermediate_size=16, vocab_size=32, head_dim=head_dim, rope_parameters=params)
        plan = read_plan(config.to_dict())
        ids, _ = mrope_position_ids([Text(3), Image(3, 4), Text(2), Video(3, 2, 2, frame_text=2)],
                                    MROPE_RULES["qwen3_vl"], device="cpu")
        q = torch.randn(1, 2, ids.shape[1], head_dim)
        cos, sin = modeling.Qwen3VLTextRotaryEmbedding(config)(q, ids[:, None, :])
        expected, _ = modeling.apply_rotary_pos_emb(q, q, cos, sin)
        assert torch.equal(plan.rotate(q, ids), expected), section
    full = Qwen3VLConfig(vision_config=dict(depth=2, hidden_size=64, num_heads=4, out_hidden_size=32),
                         text_config=dict(hidden_size=32, num_attention_heads=2, num_key_value_heads=2,
                                          num_hidden_layers=1, intermediate_size=16, vocab_size=32, head_dim=16,
                                          rope_parameters={"rope_type": "default", "rope_theta": 1e4,
                                                           "mrope_section": [2, 3, 3]}))
    plan = read_plan(full.to_dict())
    assert plan.stack_names == ["decoder", "vision"] and plan.layer(0, stack="vision").find(Rope2DLayer).head_dim == 16
