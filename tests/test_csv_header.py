"""Downloaded CSVs start with a header row naming their columns (and carry the query index)."""
from __future__ import annotations

import io

import numpy as np
import pandas as pd

from relviz.app.downloads import matrix_to_csv, offset_vector_csv


def test_matrix_csv_has_a_header_row_and_row_labels():
    matrix = np.arange(6).reshape(2, 3)
    text = matrix_to_csv(matrix)
    assert text.splitlines()[0] == "i\\j,0,1,2"
    assert text.splitlines()[1] == "0,0,1,2"
    back = pd.read_csv(io.StringIO(text), index_col=0)
    np.testing.assert_array_equal(back.to_numpy(), matrix)


def test_window_csv_names_its_true_rows_and_columns():
    text = matrix_to_csv(np.zeros((2, 2), dtype=np.int64), row0=5, col0=100)
    lines = text.splitlines()
    assert lines[0] == "i\\j,100,101" and lines[1].startswith("5,") and lines[2].startswith("6,")


def test_float_matrix_and_custom_corner():
    text = matrix_to_csv(np.array([[0.5, np.nan]], dtype=np.float32), corner="p\\d")
    assert text.splitlines() == ["p\\d,0,1", "0,0.5,nan"]


def test_offset_vector_csv_header():
    text = offset_vector_csv(np.array([-1, 0, 1]), np.array([3, 0, 17]), quantity="bucket")
    assert text.splitlines() == ["j-i,bucket", "-1,3", "0,0", "1,17"]
