"""relviz.vision_zoo: the image and video families found by walking transformers' source, a fast subset of the
bench's sweep (``python -m relviz bench --only vision_zoo`` runs every family and case): each case exact against
transformers or refused with a reason, never WRONG; and the fixes the sweep found."""
from __future__ import annotations

import pytest
import torch

from relviz.vision.mrope import MROPE_RULES, Image, Text, Video, mrope_position_ids, mrope_rule
from relviz.vision_zoo import EXACT, REFUSED, WRONG, Family, discover, sweep


def test_discovery_walks_the_library_not_a_list():
    found = {(f.module, f.kind) for f in discover()}
    # families no relviz table names are found too: their markers are in transformers' source
    for expected in (("qwen2_vl", "mrope_ids"), ("glm4v", "mrope_ids"), ("ernie4_5_vl_moe", "mrope_ids"),
                     ("pixtral", "vision_rotary"), ("llama4", "vision_rotary"), ("swinv2", "bias_table"),
                     ("beit", "bias_table"), ("vit", "absolute"), ("siglip", "absolute"), ("dinov2", "absolute")):
        assert expected in found
    # Mistral 3's tower is Pixtral's: found through its config, swept with Pixtral's module
    mistral3 = next(f for f in discover(["vision_rotary"]) if f.module == "mistral3")
    assert mistral3.source == "pixtral"
    assert ("dinov3_vit", "pixel_rotary") in found                  # DINOv3's rotary reads the grid from the pixels


# the families relviz reads, a case or two each; plus families it must refuse (the reason names what)
CASES = [Family("qwen2_5_vl", "mrope_ids", "get_rope_index"), Family("qwen3_vl", "mrope_ids", "get_rope_index"),
         Family("glm4v", "mrope_ids", "get_rope_index"), Family("ernie4_5_vl_moe", "mrope_ids", "get_rope_index"),
         Family("qwen2_vl", "vision_rotary", "Qwen2VLVisionRotaryEmbedding"),
         Family("pixtral", "vision_rotary", "PixtralVisionRotaryEmbedding"),
         Family("mistral3", "vision_rotary", "PixtralVisionRotaryEmbedding", via="pixtral"),
         Family("llama4", "vision_rotary", "Llama4VisionRotaryEmbedding"),
         Family("swinv2", "bias_table", "relative_position_bias_table"),
         Family("donut", "bias_table", "relative_position_bias_table"),
         Family("beit", "bias_table", "relative_position_bias_table"),
         Family("dinov3_vit", "pixel_rotary", "DINOv3ViTRopePositionEmbedding"),
         Family("deit", "absolute", "interpolate_pos_encoding"), Family("siglip", "absolute", "interpolate_pos_encoding")]


@pytest.fixture(scope="module")
def outcomes():
    return sweep(CASES, quick=True)


def test_every_case_is_exact_or_refused_with_a_reason(outcomes):
    assert not [(o.family.module, o.case, o.reason) for o in outcomes if o.status == WRONG]
    assert all(o.reason for o in outcomes if o.status == REFUSED)
    exact = {o.family.module for o in outcomes if o.status == EXACT}
    assert exact == {"qwen2_5_vl", "qwen3_vl", "glm4v", "qwen2_vl", "pixtral", "mistral3", "swinv2", "donut", "deit",
                     "dinov3_vit"}
    deit = [o.case for o in outcomes if o.family.module == "deit"]
    assert "2×8 (trained 4×4)" in deit and "1×1 (trained 4×4)" in deit    # 16 patches, not square: resized too
    reasons = {o.family.module: o.reason for o in outcomes if o.status == REFUSED}
    assert "no M-RoPE rule for model_type 'ernie4_5_vl_moe'" in reasons["ernie4_5_vl_moe"]
    assert "vision_config" in reasons["llama4"] and "is not read" in reasons["llama4"]
    assert "'beit'" in reasons["beit"] and "'siglip'" in reasons["siglip"]


def test_two_grids_with_no_text_between_are_refused():
    """get_rope_index reads a run of one kind as one grid: transformers raises on such a sequence, relviz gave ids."""
    rule = MROPE_RULES["qwen2_vl"]
    with pytest.raises(ValueError, match=r"segments\[2\] follows another image with no text between"):
        mrope_position_ids([Text(1), Image(2, 2), Image(3, 3), Text(1)], rule, device="cpu")
    with pytest.raises(ValueError, match="follows another video"):
        mrope_position_ids([Video(2, 1, 1), Video(1, 2, 2)], rule, device="cpu")
    ids, _ = mrope_position_ids([Image(2, 2), Video(2, 1, 1)], rule, device="cpu")   # two kinds: two groups
    assert ids.shape == (3, 6)
    with pytest.raises(ValueError, match="no M-RoPE rule for model_type 'hunyuan_vl'"):
        mrope_rule("hunyuan_vl")


def test_a_swin_window_larger_than_its_stage_is_shrunk_as_transformers_builds_it():
    """Swin v2 shrinks the window to a smaller stage when it builds the block: relviz reads the shrunk window and
    its bias bit for bit. Swin builds the table for the configured window, shrinks the window only when it runs and
    then fails: relviz refuses, naming the fields. A non-square stage gives Swin v2 a non-square window: refused."""
    from transformers import AutoModel, SwinConfig, Swinv2Config

    from relviz.mechanisms.swin_bias import SwinBias
    from relviz.model_plan import read_plan

    small = dict(image_size=6, patch_size=2, embed_dim=8, depths=[2], num_heads=[2], window_size=5)
    with pytest.raises(ValueError, match="stage 0 has 3 × 3 patches, a side smaller than the window 5"):
        read_plan(SwinConfig(**small).to_dict())
    with pytest.raises(RuntimeError):                          # transformers' own forward on that config
        AutoModel.from_config(SwinConfig(**small)).eval()(torch.randn(1, 3, 6, 6))
    with pytest.raises(ValueError, match="window is 3 × 5 patches"):
        read_plan(Swinv2Config(**{**small, "image_size": [6, 10], "window_size": 7}).to_dict())

    config = Swinv2Config(image_size=6, patch_size=2, embed_dim=8, depths=[2], num_heads=[2], window_size=5)
    torch.manual_seed(0)
    model = AutoModel.from_config(config).eval()
    blocks = [p.find(SwinBias) for p in read_plan(config.to_dict()).all_layers()]
    assert {b.window for b in blocks} == {3}                    # 3 × 3 patches: the window is the whole stage
    state = dict(model.state_dict())
    attention = model.encoder.layers[0].blocks[0].attention.self
    bias = read_plan(config.to_dict(), tensor=state.get).layer(0, stack="encoder").find(SwinBias).bias()
    with torch.no_grad():
        table = attention.continuous_position_bias_mlp(attention.relative_coords_table).view(-1, 2)
        gathered = table[attention.relative_position_index.view(-1)].view(9, 9, -1).permute(2, 0, 1).contiguous()
    assert torch.equal(bias, 16 * torch.sigmoid(gathered))


def test_a_vision_tower_the_table_does_not_read_is_said_in_the_plan():
    from transformers import AutoConfig

    from relviz.model_plan import read_plan

    plan = read_plan(AutoConfig.for_model("glm4v").to_dict())
    assert any("config field vision_config ('glm4v_vision') is not read" in n for n in plan.notes)
    assert not any("vision_config" in n for n in read_plan(AutoConfig.for_model("qwen2_vl").to_dict()).notes)
