"""CSV and .npy downloads of the matrices and per-offset vectors the pages show.

Exists so that every download has the same layout (row and column indices in the CSV, the bare array in
the .npy) and is built only when clicked; numpy is imported only then, never on the landing page.
"""
from __future__ import annotations

import functools
import io
from collections.abc import Callable
from typing import TYPE_CHECKING

import streamlit as st

if TYPE_CHECKING:  # imported where used: the landing page's first visitor skips numpy's import
    import numpy as np


def matrix_to_csv(matrix: np.ndarray, *, row0: int = 0, col0: int = 0, corner: str = "i\\j") -> str:
    """The matrix as CSV with a header row: ``corner`` then the column indices (key positions j from
    ``col0``); each line starts with its row index (query position i from ``row0``). Integers stay
    integers. ``pandas.read_csv(f, index_col=0)`` reads it back as the exact matrix."""
    import numpy as np

    matrix = np.asarray(matrix)
    matrix = matrix.reshape(matrix.shape[0], -1) if matrix.ndim > 1 else matrix[None]
    rows, cols = matrix.shape
    out = io.StringIO()
    out.write(",".join([corner] + [str(col0 + c) for c in range(cols)]) + "\n")
    fmt = "%d" if np.issubdtype(matrix.dtype, np.integer) else "%.7g"
    labelled = np.concatenate([np.arange(row0, row0 + rows)[:, None].astype(matrix.dtype if fmt == "%d"
                                                                             else np.float64), matrix], axis=1)
    np.savetxt(out, labelled, fmt=["%d"] + [fmt] * cols, delimiter=",")
    return out.getvalue()


def offset_vector_csv(offsets: np.ndarray, values: np.ndarray, *, quantity: str) -> str:
    """The per-offset vector as CSV: header ``j-i,<quantity>``, then one line per diagonal."""
    import numpy as np

    table = np.stack([np.asarray(offsets), np.asarray(values)], axis=1)
    out = io.StringIO()
    fmt = "%d" if np.issubdtype(table.dtype, np.integer) else "%.7g"
    np.savetxt(out, table, fmt=["%d", fmt], delimiter=",", header=f"j-i,{quantity}", comments="")
    return out.getvalue()


def matrix_to_npy(matrix: np.ndarray) -> bytes:
    import numpy as np

    out = io.BytesIO()
    np.save(out, np.asarray(matrix))
    return out.getvalue()


def matrix_downloads(matrix: np.ndarray | Callable[[], np.ndarray], *, name: str, key: str,
                     csv: Callable[[], str] | None = None, row0: int = 0, col0: int = 0,
                     corner: str = "i\\j") -> None:
    """CSV and .npy downloads of ``matrix`` (or of what the callable ``matrix`` returns), built only when
    clicked (deferred callables).

    The CSV has a header row (``corner``, then the column indices from ``col0``) and each line starts
    with its row index (from ``row0``); the .npy holds the bare matrix. ``csv`` replaces the CSV text.
    """
    if not callable(matrix):
        matrix = functools.partial(lambda held: held, matrix)
    # a row that wraps: in a narrow column (a third of the page at 1024 px) the buttons go one under the other,
    # whole; two fixed columns cut their labels to "Downl…"
    row = st.container(horizontal=True)
    row.download_button("Download CSV", csv or (lambda: matrix_to_csv(matrix(), row0=row0, col0=col0, corner=corner)),
                        file_name=f"{name}.csv", mime="text/csv", key=f"{key}_csv", on_click="ignore",
                        help="First line: the column indices; first column: the row index "
                             "(pandas.read_csv(file, index_col=0) gives the matrix back).")
    row.download_button("Download .npy", lambda: matrix_to_npy(matrix()), file_name=f"{name}.npy",
                        mime="application/octet-stream", key=f"{key}_npy", on_click="ignore")


def large_matrix_downloads(window_values: np.ndarray, offsets: np.ndarray, values: np.ndarray, *, q_len: int,
                           k_len: int, window, quantity: str, name: str, suffix: str, key: str) -> None:
    """Downloads for a matrix too large to build: the exact window shown (``window``:
    figures.toeplitz_window.Window) and the per-offset vector that defines every entry. Files are
    ``{name}_window_{suffix}`` and ``{name}_per_offset_{suffix}``."""
    st.markdown(
        f"The full {q_len:,} × {k_len:,} matrix is not built. Download the exact **window** shown above, or the "
        f"**per-offset vector** ({q_len + k_len - 1:,} rows: j − i, {quantity}): it defines every entry, "
        f"{quantity}(i, j) = value of the row whose j − i equals j − (offset + i).")
    # one group under the other: side by side, in a page's half-width column, each button got an eighth of the
    # page and its label was cut to "Downloa…" (the Absolute page's ALiBi section at 1440 × 900)
    st.caption(f"{quantity}, window rows {window.row0:,}…{window.row0 + window.rows - 1:,}, "
               f"columns {window.col0:,}…{window.col0 + window.cols - 1:,}")
    matrix_downloads(window_values, name=f"{name}_window_{suffix}", key=f"{key}_win", row0=window.row0,
                     col0=window.col0)
    st.caption(f"per-offset vector (j − i, {quantity})")
    offset_vector_downloads(offsets, values, name=f"{name}_per_offset_{suffix}", key=f"{key}_vec",
                            quantity=quantity)


def window_downloads(window_values: np.ndarray, offsets: np.ndarray, per_offset: np.ndarray, *, heading: str,
                     caption: str, q_len: int, k_len: int, q_offset: int, window, large: bool, quantity: str,
                     name: str, suffix: str, key: str) -> None:
    """The downloads under a Toeplitz page's window (T5's bucket map, Shaw's lookup index), one block for both:
    ``heading``, then for a ``large`` matrix the exact window and the per-offset vector
    (:func:`large_matrix_downloads`), else ``caption`` and the whole matrix, ``{name}_{suffix}_off{q_offset}``."""
    st.markdown(f"#### {heading}")
    if large:
        large_matrix_downloads(window_values, offsets, per_offset, q_len=q_len, k_len=k_len, window=window,
                               quantity=quantity, name=name, suffix=suffix, key=key)
    else:
        st.caption(caption)
        matrix_downloads(window_values, name=f"{name}_{suffix}_off{q_offset}", key=key)


def offset_vector_downloads(offsets: np.ndarray, values: np.ndarray, *, name: str, key: str,
                            quantity: str = "value") -> None:
    """CSV/.npy of the per-offset vector: column 0 is j − i, column 1 the value on that diagonal.

    These q_len + k_len − 1 rows define the whole Toeplitz matrix: entry (i, j) is the value
    of the row whose j − i equals j − (q_offset + i).
    """
    import numpy as np

    # stacked only when clicked: at 2^20 positions the two columns are 4M values
    matrix_downloads(lambda: np.stack([np.asarray(offsets), np.asarray(values)], axis=1), name=name, key=key,
                     csv=lambda: offset_vector_csv(offsets, values, quantity=quantity))
