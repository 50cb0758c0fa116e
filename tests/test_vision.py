"""relviz.vision against independent transcriptions of the papers' formulas, per offset against per pair,
and its bad-input messages."""
from __future__ import annotations

import math

import pytest
import torch
from device_support import default_device_holds_no_values

from relviz.vision.grid import PatchGrid, offset_window, patch_coordinates, query_offsets, relative_index_2d
from relviz.vision.mrope import (
    MROPE_RULES,
    Image,
    Text,
    Video,
    mrope_pair_axes,
    mrope_position_ids,
    score_map_3d,
    video_frame_step,
)
from relviz.vision.rope2d import (
    Rope2D,
    dinov3_rope,
    pixtral_rope,
    qwen_vl_vision_rope,
    rope2d_angles,
    rotate_2d,
    score_map_2d,
)
from relviz.vision.swin import swin_bias, swin_bias_per_offset, swin_index_per_offset, swin_relative_position_index


def test_relative_index_2d_is_key_minus_query_per_axis():
    grid = PatchGrid(3, 4)
    dh, dw = relative_index_2d(grid, device="cpu")
    coords = patch_coordinates(grid, device="cpu")
    for n in range(12):
        for m in range(12):
            assert (int(dh[n, m]), int(dw[n, m])) == tuple((coords[m] - coords[n]).tolist())
    row_dh, row_dw = query_offsets(grid, 1, 2, device="cpu")
    assert torch.equal(row_dh.flatten(), dh[6]) and torch.equal(row_dw.flatten(), dw[6])


def test_a_query_rows_window_of_the_offset_plane_is_its_row_of_the_pair_matrix():
    grid = PatchGrid(4, 5)
    plane = torch.arange(7 * 9).view(7, 9)                            # any per-offset map
    dh, dw = relative_index_2d(grid, device="cpu")
    for row, col in ((0, 0), (3, 4), (2, 1)):
        n = row * 5 + col
        assert torch.equal(offset_window(plane, grid, row, col).flatten(), plane[dh[n] + 3, dw[n] + 4])


def test_swin_index_is_the_papers_formula_with_delta_query_minus_key():
    m = 3
    index = swin_relative_position_index(m, device="cpu")
    for n in range(m * m):
        for k in range(m * m):
            dh, dw = n // m - k // m, n % m - k % m          # Swin's δ = query − key
            assert int(index[n, k]) == (dh + m - 1) * (2 * m - 1) + (dw + m - 1)
    per_offset = swin_index_per_offset(m, device="cpu")
    assert sorted(per_offset.flatten().tolist()) == list(range((2 * m - 1) ** 2))   # each table row once
    assert int(per_offset[m - 1, m - 1]) == (m - 1) * (2 * m - 1) + (m - 1)          # Δ = 0: the centre row
    table = torch.randn((2 * m - 1) ** 2, 2)
    bias = swin_bias(table, m)
    assert torch.equal(offset_window(swin_bias_per_offset(table, m), PatchGrid(m, m), 1, 2).reshape(2, -1),
                       bias[:, 1 * m + 2])


def test_2d_rope_score_depends_only_on_the_offset_and_is_the_per_offset_map():
    torch.manual_seed(0)
    grid = PatchGrid(3, 4)
    for rope in (pixtral_rope(16, 100.0), qwen_vl_vision_rope(16, 100.0), dinov3_rope(16, 100.0, prefix_tokens=0)):
        q, k = torch.randn(16, dtype=torch.float64), torch.randn(16, dtype=torch.float64)
        rq = rotate_2d(q.expand(12, 16).clone(), rope, grid).double()
        rk = rotate_2d(k.expand(12, 16).clone(), rope, grid).double()
        scores = rq @ rk.T                                             # [N, N], every pair
        plane = score_map_2d(q, k, rope, grid, device="cpu")          # [5, 7] per (Δh, Δw)
        dh, dw = relative_index_2d(grid, device="cpu")
        assert torch.allclose(scores, plane[dh + 2, dw + 3], atol=1e-5), rope.label
        assert torch.allclose(plane, plane[:, 3:4] + plane[2:3, :] - plane[2, 3], atol=1e-12)  # S_h(Δh) + S_w(Δw)


def test_a_2d_rope_is_described_on_the_cpu_and_computed_where_asked(monkeypatch):
    """On a GPU machine the default device is CUDA: a Rope2D's θ and axes were built there while its coordinates
    were on the CPU, and every angle failed (two devices). Now the description lives on the CPU and each function
    moves it where it computes: the device asked for, or the rotated tensor's. The default device here holds no
    values, so anything that still went there unasked fails."""
    grid = PatchGrid(3, 4)
    q, k = torch.randn(16, generator=torch.Generator().manual_seed(0)), torch.randn(16)
    ropes = (pixtral_rope(16), qwen_vl_vision_rope(16), dinov3_rope(16, prefix_tokens=2))
    before = [(rope2d_angles(r, grid, device="cpu"), rotate_2d(torch.ones(r.prefix_tokens + 12, 16), r, grid),
               score_map_2d(q, k, r, grid, device="cpu")) for r in ropes]
    default_device_holds_no_values(monkeypatch)
    for build, (angles, rotated, plane) in zip((pixtral_rope, qwen_vl_vision_rope, dinov3_rope), before):
        rope = build(16, prefix_tokens=2) if build is dinov3_rope else build(16)
        assert rope.pair_freq.device.type == rope.pair_axis.device.type == "cpu"
        assert torch.equal(rope2d_angles(rope, grid, device="cpu"), angles)
        assert torch.equal(rotate_2d(torch.ones(rope.prefix_tokens + 12, 16), rope, grid), rotated)
        assert torch.equal(score_map_2d(q, k, rope, grid, device="cpu"), plane)
        assert rope2d_angles(rope, grid).device.type == "meta"          # no device given: the default one


def test_a_2d_rope_description_is_checked_once():
    with pytest.raises(ValueError, match=r"pair_freq and pair_axis must have head_dim / 2 = 4 entries; got 3 and 4"):
        Rope2D("short", 8, torch.ones(3), torch.zeros(4, dtype=torch.long))
    with pytest.raises(ValueError, match="pair_freq must be a torch.Tensor"):
        Rope2D("a list", 8, [1.0] * 4, torch.zeros(4, dtype=torch.long))
    with pytest.raises(ValueError, match="pair_freq and pair_axis must hold values; got them on device 'meta'"):
        Rope2D("no values", 8, torch.ones(4, device="meta"), torch.zeros(4, dtype=torch.long))


def test_axial_pairs_as_each_paper_writes_them():
    # Pixtral (Mistral's reference): freqs_h = outer(h, θ[::2]), freqs_w = outer(w, θ[1::2]), θ_i = base^(−2i/D)
    theta = [10000 ** (-2 * i / 16) for i in range(8)]
    angles = rope2d_angles(pixtral_rope(16, 10000.0), (2, 3), device="cpu")
    h, w = 1, 2
    expected = [h * t for t in theta[0::2]] + [w * t for t in theta[1::2]]
    assert torch.allclose(angles[h * 3 + w].double(), torch.tensor(expected, dtype=torch.float64), rtol=1e-6)
    # DINOv3: patch centres (p + 0.5)/side · 2 − 1, angle 2π·coordinate·base^(−4i/D)
    angles = rope2d_angles(dinov3_rope(16, 100.0), (2, 4), device="cpu")
    y, x = (1 + 0.5) / 2 * 2 - 1, (3 + 0.5) / 4 * 2 - 1
    theta = [100 ** (-4 * i / 16) for i in range(4)]
    expected = [2 * math.pi * y * t for t in theta] + [2 * math.pi * x * t for t in theta]
    assert torch.allclose(angles[1 * 4 + 3].double(), torch.tensor(expected, dtype=torch.float64), rtol=1e-6)


def test_large_grids_are_described_per_offset():
    q, k = torch.randn(64), torch.randn(64)
    plane = score_map_2d(q, k, pixtral_rope(64), PatchGrid(64, 64), device="cpu")          # 4,096 patches
    assert plane.shape == (127, 127)
    video = score_map_3d(torch.randn(128), torch.randn(128), 1 / 10000 ** (torch.arange(64) / 64), (24, 20, 20),
                         interleaved=True, frames=8, rows=64, cols=64, frame_step=(66, 66, 66), device="cpu")    # 8 frames of them
    assert video.shape == (15, 127, 127)
    with pytest.raises(ValueError, match="use query_offsets"):
        relative_index_2d(PatchGrid(128, 128))


def test_mrope_pair_axes_sectioned_and_interleaved():
    assert mrope_pair_axes((16, 24, 24), interleaved=False).tolist() == [0] * 16 + [1] * 24 + [2] * 24
    axes = mrope_pair_axes((24, 20, 20), interleaved=True).tolist()
    assert axes[:6] == [0, 1, 2, 0, 1, 2] and axes[60:] == [0, 0, 0, 0]
    assert [axes.count(a) for a in range(3)] == [24, 20, 20]


@pytest.mark.parametrize("rule, video", [
    ("qwen2_vl", Video(3, 2, 3)), ("qwen2_5_vl", Video(3, 2, 3, seconds_per_grid=1.5)),
    ("qwen3_vl", Video(3, 2, 3, frame_text=2))])
def test_mrope_score_between_video_tokens_is_the_per_offset_map(rule, video):
    """Rotate q and k at the ids get_rope_index gives two video tokens (relviz's, equal to transformers' in
    test_vision_transformers) and compare with the per-offset map at their (Δframe, Δh, Δw)."""
    torch.manual_seed(1)
    inv_freq = 1 / 10000 ** (torch.arange(8, dtype=torch.float64) / 8)
    q, k = torch.randn(16, dtype=torch.float64), torch.randn(16, dtype=torch.float64)
    r = MROPE_RULES[rule]
    section = (2, 3, 3)
    ids, kinds = mrope_position_ids([Text(2), video], r, tokens_per_second=2, device="cpu")
    video_ids = ids[:, kinds == 2].T.reshape(3, 2, 3, 3)                # [frame, h, w, axis]
    step = video_frame_step(video, r, tokens_per_second=2)
    plane = score_map_3d(q, k, inv_freq, section, interleaved=r.interleaved, frames=3, rows=2, cols=3,
                         frame_step=step, device="cpu")
    axes = mrope_pair_axes(section, interleaved=r.interleaved)

    def rotated(x, where):
        angle = where.double()[axes] * inv_freq
        a, b = x[:8], x[8:]
        return torch.cat((a * angle.cos() - b * angle.sin(), b * angle.cos() + a * angle.sin()))

    for (f0, h0, w0), (f1, h1, w1) in (((0, 0, 0), (1, 1, 2)), ((2, 1, 2), (0, 0, 1)), ((1, 1, 0), (1, 1, 0))):
        score = rotated(q, video_ids[f0, h0, w0]) @ rotated(k, video_ids[f1, h1, w1])
        assert torch.isclose(score, plane[f1 - f0 + 2, h1 - h0 + 1, w1 - w0 + 2], atol=1e-10)


def test_a_long_video_overlaps_the_next_texts_ids_in_transformers_5_23():
    """get_rope_index moves on by max(h, w) after a grid, not past its largest t id: 8 frames at
    tokens_per_second 2 reach t id 14 on a 2 × 2 grid, and the next text starts at 2."""
    ids, kinds = mrope_position_ids([Video(8, 2, 2), Text(3)], MROPE_RULES["qwen2_5_vl"], tokens_per_second=2,
                                    device="cpu")
    assert int(ids[0, kinds == 2].max()) == 14 and ids[:, kinds == 0][0].tolist() == [2, 3, 4]


@pytest.mark.parametrize("call, match", [
    (lambda: PatchGrid(0, 4), "rows must be an integer from 1 to 1024; got 0"),
    (lambda: PatchGrid(4, 10**9), "cols must be an integer from 1 to 1024"),
    (lambda: swin_bias(torch.zeros(25, 2), (3, 4)), "window must be square"),
    (lambda: swin_bias(torch.zeros(24, 2), 3), "table must have"),
    (lambda: PatchGrid(65, 64).check_fits(64, 64, model="Pixtral (image_size 1024 / patch_size 16)"),
     r"must fit Pixtral .* 64 × 64 patches; got 65 × 64"),
    (lambda: pixtral_rope(18), "head_dim must be a multiple of 4"),
    (lambda: mrope_position_ids([Video(3, 2, 2)], MROPE_RULES["qwen3_vl"]), "frame_text must be at least 1"),
    (lambda: mrope_position_ids([Video(3, 2, 2, frame_text=1)], MROPE_RULES["qwen2_vl"]), "frame_text must be 0"),
    (lambda: mrope_position_ids([Image(0, 2)], MROPE_RULES["qwen2_vl"]), r"segments\[0\].rows"),
    (lambda: mrope_position_ids([Text(4)], "qwen2_vl"), "rule must be an MropeRule"),
    (lambda: mrope_pair_axes((16, 24, 20), interleaved=True), None),
    (lambda: score_map_2d(torch.zeros(8), torch.zeros(8), pixtral_rope(16), (2, 2)), "head_dim = 16"),
    (lambda: video_frame_step(Video(2, 2, 2, seconds_per_grid=0.3), MROPE_RULES["qwen2_5_vl"]), "whole number"),
])
def test_bad_input_names_the_parameter_and_what_is_allowed(call, match):
    if match is None:                                    # a valid but uneven section is accepted
        assert call().shape == (60,)
        return
    with pytest.raises(ValueError, match=match):
        call()
