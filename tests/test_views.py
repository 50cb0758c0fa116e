"""The display views are exact: pooled stats and windows equal the full matrix's."""
from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from relviz.figures import compact_ints, discrete_colorscale, matrix_heatmap
from relviz.positions import expand_toeplitz, offset_range, t5_bucket
from relviz.toeplitz_display import DISPLAY_MAX, display_block, toeplitz_pooled, toeplitz_window


def per_offset_and_full(q_len: int, k_len: int, q_offset: int) -> tuple[np.ndarray, np.ndarray]:
    offsets = offset_range(q_len, k_len, q_offset=q_offset, device="cpu")
    values = t5_bucket(offsets, num_buckets=16, max_distance=40)
    return values.numpy(), expand_toeplitz(values, q_len, k_len).numpy()


@settings(max_examples=80, deadline=None)
@given(q_len=st.integers(1, 70), k_len=st.integers(1, 70), q_offset=st.integers(-40, 40),
       block=st.integers(1, 20))
def test_pooled_view_equals_block_stats_of_full_matrix(q_len, k_len, q_offset, block):
    per_offset, full = per_offset_and_full(q_len, k_len, q_offset)
    view = toeplitz_pooled(per_offset, q_len, k_len, block)
    assert view.mean.shape == (len(view.row_start), len(view.col_start))
    for a, r0 in enumerate(view.row_start):
        for b, c0 in enumerate(view.col_start):
            cells = full[r0:r0 + block, c0:c0 + block]
            assert view.mean[a, b] == pytest.approx(cells.mean())
            assert view.vmin[a, b] == cells.min() and view.vmax[a, b] == cells.max()


@settings(max_examples=80, deadline=None)
@given(data=st.data(), q_len=st.integers(1, 50), k_len=st.integers(1, 50), q_offset=st.integers(-30, 30))
def test_window_equals_slice_of_full_matrix(data, q_len, k_len, q_offset):
    per_offset, full = per_offset_and_full(q_len, k_len, q_offset)
    row0 = data.draw(st.integers(0, q_len - 1))
    col0 = data.draw(st.integers(0, k_len - 1))
    rows = data.draw(st.integers(1, q_len - row0))
    cols = data.draw(st.integers(1, k_len - col0))
    window = toeplitz_window(per_offset, q_len, k_len, row0=row0, col0=col0, rows=rows, cols=cols)
    assert np.array_equal(window, full[row0:row0 + rows, col0:col0 + cols])


def test_window_outside_the_matrix_is_refused():
    per_offset, _ = per_offset_and_full(10, 10, 0)
    with pytest.raises(ValueError, match="row window"):
        toeplitz_window(per_offset, 10, 10, row0=5, col0=0, rows=6, cols=3)
    with pytest.raises(ValueError, match="column window"):
        toeplitz_window(per_offset, 10, 10, row0=0, col0=-1, rows=2, cols=3)


def test_display_block_fits_the_screen():
    assert display_block(512, 100) == 1
    assert display_block(8192, 8192) == 16
    assert display_block(513, 1) == 2
    for n in (600, 1000, 4097, 8192):
        assert n / display_block(n, n) <= DISPLAY_MAX


def test_compact_ints_picks_smallest_type():
    assert compact_ints(np.array([0, 255])).dtype == np.uint8
    assert compact_ints(np.array([-1, 100])).dtype == np.int8
    assert compact_ints(np.array([-8191, 8191])).dtype == np.int16
    assert compact_ints(np.array([0, 70000])).dtype == np.uint32


def test_discrete_colorscale_has_one_band_per_value():
    scale = discrete_colorscale(5)
    assert len(scale) == 10 and scale[0][0] == 0.0 and scale[-1][0] == 1.0
    assert scale[0][1] == scale[1][1] and scale[1][1] != scale[2][1]


def decode(array_spec) -> np.ndarray:
    if isinstance(array_spec, dict):
        import base64
        raw = np.frombuffer(base64.b64decode(array_spec["bdata"]), dtype=np.dtype(array_spec["dtype"]))
        return raw.reshape([int(s) for s in str(array_spec["shape"]).split(",")]) if "shape" in array_spec else raw
    return np.asarray(array_spec)


def test_matrix_heatmap_payload_is_compact_and_hover_holds_offsets():
    q_len, k_len = 6, 9
    per_offset, full = per_offset_and_full(q_len, k_len, 0)
    rel = expand_toeplitz(offset_range(q_len, k_len, device="cpu"), q_len, k_len).numpy()
    figure = matrix_heatmap(full, x=range(k_len), y=range(q_len), hover={"j − i": rel, "bucket": full},
                            value_label="bucket", discrete_range=(0, 15))
    trace = json.loads(figure.to_json())["data"][0]
    assert trace["z"]["dtype"] == "u1"
    assert np.array_equal(decode(trace["z"]), full)
    custom = decode(trace["customdata"])
    assert np.array_equal(custom[..., 0], rel) and np.array_equal(custom[..., 1], full)
    assert "j − i = %{customdata[0]}" in trace["hovertemplate"]
    assert trace["zmin"] == -0.5 and trace["zmax"] == 15.5


def test_matrix_heatmap_shifts_negative_discrete_values_to_unsigned():
    rel = np.arange(-3, 4).reshape(1, 7)
    trace = json.loads(matrix_heatmap(rel, x=range(7), y=[0], hover={"j − i": rel}, value_label="j − i",
                                      discrete_range=(-3, 3)).to_json())["data"][0]
    assert trace["z"]["dtype"] == "u1"
    assert np.array_equal(decode(trace["z"]).astype(int) - 3, rel)
    assert trace["colorbar"]["ticktext"][0] == "-3"
