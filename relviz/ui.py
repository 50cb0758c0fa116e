"""Streamlit helpers shared by the pages (the only relviz module that imports streamlit).

Keeps the pages thin: page registry, the sign-convention note, figure display with PNG
export, matrix downloads, and turning a library ValueError into an on-page message.
"""
from __future__ import annotations

import contextlib
import io
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np
import plotly.graph_objects as go
import streamlit as st


@dataclass(frozen=True)
class PageInfo:
    path: str
    title: str
    icon: str
    default: bool = False


#: The learning order: the navigation and the landing page both follow it.
PAGES: list[PageInfo] = [
    PageInfo("pages/home.py", "Start here", ":material/home:", default=True),
    PageInfo("pages/shaw.py", "Relative index & Shaw clipping", ":material/grid_on:"),
    PageInfo("pages/t5.py", "T5 buckets", ":material/view_week:"),
    PageInfo("pages/skew.py", "The skew, step by step", ":material/south_east:"),
    PageInfo("pages/absolute.py", "Absolute vs relative", ":material/compare_arrows:"),
]

SIGN_CONVENTION = ("**Sign convention:** relative position = **j − i** = key position − query position. "
                   "Negative: the key lies in the past of the query; positive: in its future.")

#: Plotly's camera button exports PNG at twice the shown size: sharp on a projector.
PLOTLY_CONFIG = {"displaylogo": False,
                 "toImageButtonOptions": {"format": "png", "scale": 2}}


def sign_convention() -> None:
    st.info(SIGN_CONVENTION, icon=":material/swap_horiz:")


def show_figure(figure: go.Figure, *, key: str) -> None:
    """Draw a plotly figure with the PNG export button; ``key`` keeps it stable across reruns."""
    st.plotly_chart(figure, key=key, config=PLOTLY_CONFIG, width="stretch")


def matrix_to_csv(matrix: np.ndarray) -> str:
    """Rows of the matrix as CSV lines (integers stay integers)."""
    matrix = np.asarray(matrix)
    out = io.StringIO()
    fmt = "%d" if np.issubdtype(matrix.dtype, np.integer) else "%.7g"
    np.savetxt(out, matrix.reshape(matrix.shape[0], -1) if matrix.ndim > 1 else matrix[None], fmt=fmt,
               delimiter=",")
    return out.getvalue()


def matrix_to_npy(matrix: np.ndarray) -> bytes:
    out = io.BytesIO()
    np.save(out, np.asarray(matrix))
    return out.getvalue()


def matrix_downloads(matrix: np.ndarray, *, name: str, key: str) -> None:
    """CSV and .npy downloads of ``matrix``, built only when clicked (deferred callables)."""
    left, right = st.columns(2)
    left.download_button("Download CSV", lambda: matrix_to_csv(matrix), file_name=f"{name}.csv",
                         mime="text/csv", key=f"{key}_csv", on_click="ignore")
    right.download_button("Download .npy", lambda: matrix_to_npy(matrix), file_name=f"{name}.npy",
                          mime="application/octet-stream", key=f"{key}_npy", on_click="ignore")


@contextlib.contextmanager
def user_errors() -> Iterator[None]:
    """Show a library ValueError as st.error (its message names the parameter) instead of a traceback.

    Only the block inside stops; everything after it on the page still runs.
    """
    try:
        yield
    except ValueError as error:
        st.error(str(error), icon=":material/error:")
