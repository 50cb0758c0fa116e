"""relviz.figures.xy_canvas: arrays travel in plotly's typed form (the same decoder reads both), bad input is refused."""
from __future__ import annotations

import numpy as np
import pytest
from plotly_data import decode

from relviz.figures.xy_canvas import XYPanel, XYTrace, typed_array, xy_image


def test_typed_arrays_decode_to_the_same_values_bit_for_bit():
    values = np.array([0.1, -2.5e-300, np.pi, 1e300])
    assert decode(typed_array(values)).tobytes() == values.tobytes()
    np.testing.assert_array_equal(decode(typed_array(np.arange(-511, 512))), np.arange(-511, 512))
    with pytest.raises(ValueError, match="int32"):
        typed_array(np.array([2**40]))
    with pytest.raises(ValueError, match="float64"):
        typed_array(np.array(["a"]))


def test_a_trace_whose_arrays_disagree_or_an_unknown_kind_is_refused():
    x = np.arange(4)
    with pytest.raises(ValueError, match="lengths"):
        xy_image([XYPanel((XYTrace("line", x, np.zeros(3), "#000", "t", ()),), share=1.0)])
    with pytest.raises(ValueError, match="kind"):
        xy_image([XYPanel((XYTrace("area", x, np.zeros(4), "#000", "t", ()),), share=1.0)])
    with pytest.raises(ValueError, match="shares"):
        xy_image([XYPanel((XYTrace("bar", x, np.zeros(4), "#000", "t", ()),), share=0.5)])
