"""The checker's 2-D RoPE and M-RoPE kinds: transformers' own values pass, each named mistake is named, and
nothing else is named for a difference none of them makes."""
from __future__ import annotations

import importlib
import types

import numpy as np
import pytest
import torch
from device_support import default_device_holds_no_values

import relviz.check as check
from relviz.check import vision as V
from relviz.vision.mrope import Image, Text, Video

ROPE_CASES = [V.Rope2DSettings("pixtral", 16, 3, 4), V.Rope2DSettings("qwen_vl", 16, 5, 2),
              V.Rope2DSettings("dinov3", 16, 3, 4)]
#: Mistakes of one family's arithmetic that another cannot make (DINOv3 alone normalises; the integer families
#: alone have a pair split to confuse).
NOT_APPLICABLE = {("the other family's pair split", "dinov3"), ("positions not normalised", "pixtral"),
                  ("positions not normalised", "qwen_vl"), ("patch corners, not centres", "pixtral"),
                  ("patch corners, not centres", "qwen_vl")}
MROPE = V.MropeSettings("qwen2_5_vl", (Text(3), Image(2, 3), Text(2), Video(8, 2, 2), Text(2)))


def test_pixtrals_own_angles_pass():
    from transformers import PixtralVisionConfig

    modeling = importlib.import_module("transformers.models.pixtral.modeling_pixtral")
    rotary = modeling.PixtralVisionRotaryEmbedding(PixtralVisionConfig(hidden_size=64, num_attention_heads=4))
    hh, ww = torch.meshgrid(torch.arange(3), torch.arange(4), indexing="ij")
    freqs = torch.stack([hh.flatten(), ww.flatten()], dim=-1)[..., None].float() * rotary.inv_freq
    angles = torch.cat([freqs.chunk(2, dim=-1)[0][:, 0], freqs.chunk(2, dim=-1)[1][:, 1]], dim=-1)   # Pixtral's recomposition
    result = check.check("rope2d_angles", angles.numpy(), ROPE_CASES[0])
    assert result.ok and result.cells == 12 * 8
    assert check.check("rope2d_angles", angles.double().numpy() * (1 + 2e-7), ROPE_CASES[0]).ok  # float64 rounding


def test_get_rope_index_ids_pass():
    modeling = importlib.import_module("transformers.models.qwen2_5_vl.modeling_qwen2_5_vl")
    model = modeling.Qwen2_5_VLModel
    fake = types.SimpleNamespace(config=types.SimpleNamespace(vision_config=types.SimpleNamespace(
        spatial_merge_size=1, tokens_per_second=2)))
    fake.get_vision_position_ids = lambda *a, **k: model.get_vision_position_ids(fake, *a, **k)
    kinds = torch.tensor([[0] * 3 + [1] * 6 + [0] * 2 + [2] * 32 + [0] * 2])
    ids, _ = model.get_rope_index(fake, torch.zeros_like(kinds), kinds, image_grid_thw=torch.tensor([[1, 2, 3]]),
                                  video_grid_thw=torch.tensor([[8, 2, 2]]),
                                  second_per_grid_ts=torch.tensor([1.0]))
    assert check.check("mrope_position_ids", ids[:, 0].numpy(), MROPE).ok


@pytest.mark.parametrize("settings", ROPE_CASES, ids=lambda s: s.model)
@pytest.mark.parametrize("cause", [c[0] for c in V.ROPE2D_CAUSES])
def test_each_2d_rope_mistake_is_named(settings, cause):
    build = next(b for name, _, b in V.ROPE2D_CAUSES if name == cause)
    wrong = build(settings)
    if wrong is None:  # a mistake only another family can make: none is built, so none can be named
        assert (cause, settings.model) in NOT_APPLICABLE
        return
    result = check.check("rope2d_angles", wrong, settings)
    assert not result.ok and [c.name for c in result.causes] == [cause]
    assert result.first[0].offset in (0, 1)                            # the third column: the pair's axis


def test_the_2d_rope_check_computes_on_the_cpu_whatever_the_default_device(monkeypatch):
    """It compares numpy arrays: on a GPU machine (default device CUDA) it failed before comparing anything. The
    default device here holds no values; the check still passes the right angles and names every mistake."""
    from relviz.vision.rope2d import rope2d_angles

    right = {s.model: rope2d_angles(s.rope, s.grid, device="cpu").numpy() for s in ROPE_CASES}
    default_device_holds_no_values(monkeypatch)
    for settings in ROPE_CASES:
        assert check.check("rope2d_angles", right[settings.model], settings).ok
        for cause, _, build in V.ROPE2D_CAUSES:
            wrong = build(settings)
            assert wrong is None or [c.name for c in check.check("rope2d_angles", wrong, settings).causes] == [cause]


@pytest.mark.parametrize("cause", [c[0] for c in V.MROPE_CAUSES])
def test_each_mrope_mistake_is_named(cause):
    build = next(b for name, _, b in V.MROPE_CAUSES if name == cause)
    result = check.check("mrope_position_ids", build(MROPE), MROPE)
    assert not result.ok and [c.name for c in result.causes] == [cause]


def test_the_max_plus_one_counter_is_the_old_formula():
    """Transcribed from the earlier get_rope_index: st_idx = max(ids so far) + 1, text then its vision block."""
    ids = []
    for block in ([np.arange(3)] * 3,                                            # text
                  [np.zeros(6), np.repeat(np.arange(2), 3), np.tile(np.arange(3), 2)],   # image 2 × 3
                  [np.arange(2)] * 3,                                            # text
                  [np.repeat(np.arange(8) * 2, 4), np.tile(np.repeat(np.arange(2), 2), 8), np.tile(np.arange(2), 16)],
                  [np.arange(2)] * 3):
        start = max(int(i.max()) for i in ids) + 1 if ids else 0
        ids.append(np.stack(block).astype(np.int64) + start)
    assert np.array_equal(V._max_plus_one(MROPE), np.concatenate(ids, axis=1))


def test_an_unnamed_difference_is_described_not_named():
    wrong = MROPE.ids()[0].copy()
    wrong[2, 5] += 7
    result = check.check("mrope_position_ids", wrong, MROPE)
    assert not result.causes and result.mismatches == 1 and "1 of" in result.difference


@pytest.mark.parametrize("kind, settings, got, match", [
    ("rope2d_angles", ROPE_CASES[0], np.zeros((12, 6)), r"shape \(12, 8\)"),
    ("rope2d_angles", None, np.zeros((12, 8)), "must be Rope2DSettings"),
    ("mrope_position_ids", MROPE, np.zeros((3, 10)), r"shape \(3, 45\)"),
    ("mrope_position_ids", MROPE, np.full((3, 45), 0.5), "whole numbers"),
])
def test_bad_uploads_are_refused_with_what_is_allowed(kind, settings, got, match):
    with pytest.raises(ValueError, match=match):
        check.check(kind, got, settings)


def test_bad_settings_and_the_command_line_say_what_is_allowed():
    with pytest.raises(ValueError, match="rope must be one of"):
        V.Rope2DSettings("swin", 16, 2, 2)
    with pytest.raises(ValueError, match="rows must be an integer from 1 to 1024; got 0"):
        V.Rope2DSettings("pixtral", 16, 0, 2)
    with pytest.raises(ValueError, match="frame_text must be at least 1"):
        V.MropeSettings("qwen3_vl", (Video(2, 2, 2),))
    from relviz.check.registry import kind_of

    with pytest.raises(ValueError, match="takes its settings in Python"):
        kind_of("mrope_position_ids").from_args(types.SimpleNamespace(), (3, 45))
