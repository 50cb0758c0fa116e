"""Memory arithmetic for the relative term: Shaw's gathered L × L × D tensor vs the skew's L × D.

Used by the benchmark and by the app's skew page, so both quote the same figures. Sizes
are in decimal units, as in the Music Transformer paper (L = 2048, D = 512, fp32: 8.6 GB
vs 4.2 MB per layer; the paper rounds the first to "8.5 GB").
"""
from __future__ import annotations

import numbers
from dataclasses import dataclass

from relviz._checks import check_int

__all__ = ["RelativeTermBytes", "relative_term_bytes", "naive_gather_bytes", "skew_table_bytes",
           "attention_matrix_bytes", "format_bytes", "PAPER_FIGURES"]

#: The Music Transformer paper's memory figures, worked out exactly (its 8.5 GB is 8.6 GB).
PAPER_FIGURES = (
    "At L = 2048, D = 512 in fp32 the Music Transformer paper quotes “8.5 GB → 4.2 MB”. The exact figures are "
    "2048² × 512 × 4 B = 8 589 934 592 B = 8.6 GB (decimal; it is 8.0 GiB) and 2048 × 512 × 4 B = 4.2 MB: the "
    "paper's 8.5 is a rounding slip. Per head (D_h = 64): 1.1 GB vs 0.52 MB.")


def naive_gather_bytes(length: float, dim: int, tables: int = 1, dtype_bytes: int = 4) -> float:
    """The naive path's gathered L × L × D table(s), R[i, j] = e_(j − i) (Shaw needs two: K and V)."""
    return tables * length * length * dim * dtype_bytes


def skew_table_bytes(length: float, dim: int, dtype_bytes: int = 4) -> float:
    """The skew's distance table: L × D."""
    return length * dim * dtype_bytes


def attention_matrix_bytes(length: float, batch: int, heads: int, dtype_bytes: int = 4) -> float:
    """One [B, H, L, L] tensor (logits or weights): every whole-sequence implementation holds it."""
    return batch * heads * length * length * dtype_bytes


@dataclass(frozen=True)
class RelativeTermBytes:
    """Bytes of the relative term of one attention layer and of one of its heads.

    shaw_*: the gathered embeddings R[i, j] = e_(j − i), L × L × D values (Shaw et al.).
    skew_*: the distance table the skew multiplies by, L × D values (Music Transformer).
    Per head means D_h = D / H.
    """

    length: int
    dim: int
    heads: int
    dtype_bytes: int
    shaw_per_layer: int
    skew_per_layer: int
    shaw_per_head: int
    skew_per_head: int

    @property
    def ratio(self) -> int:
        """How many times more memory Shaw's gathered tensor takes: exactly L."""
        return self.shaw_per_layer // self.skew_per_layer

    @property
    def head_dim(self) -> int:
        """D_h = D / H, the width one head's share of the relative term has."""
        return self.dim // self.heads

    def explanation(self) -> str:
        """Why the skew saves memory, with these L and D: Shaw's L²·D values against the skew's L·D."""
        return (f"Shaw et al. gather a D-vector for every (i, j): **L²·D** = {self.length}² × {self.dim} values. The "
                f"skew keeps only the table E_r, **L·D** values: **{self.ratio:,}× less** (exactly L). Both still "
                "build the L × L scores per head, like attention itself does; what the skew removes is the "
                "L × L × D tensor.")


def relative_term_bytes(length: int, dim: int, heads: int, dtype_bytes: int = 4) -> RelativeTermBytes:
    """The memory of the relative term for sequence length L, model width D and H heads.

    D must be divisible by H (each head has D / H dimensions). dtype_bytes: 4 for fp32,
    2 for fp16/bf16.
    """
    length = check_int("length", length, minimum=1, maximum=10**9)
    dim = check_int("dim", dim, minimum=1, maximum=10**9)
    heads = check_int("heads", heads, minimum=1, maximum=10**9)
    dtype_bytes = check_int("dtype_bytes", dtype_bytes, minimum=1, maximum=16)
    if heads > dim:
        raise ValueError(f"heads must be at most dim (each head needs at least one of the dim dimensions); "
                         f"got dim={dim}, heads={heads}")
    if dim % heads:
        raise ValueError(f"dim must be divisible by heads (each head has dim / heads dimensions); "
                         f"got dim={dim}, heads={heads}")
    head_dim = dim // heads
    return RelativeTermBytes(
        length=length, dim=dim, heads=heads, dtype_bytes=dtype_bytes,
        shaw_per_layer=naive_gather_bytes(length, dim, dtype_bytes=dtype_bytes),
        skew_per_layer=skew_table_bytes(length, dim, dtype_bytes),
        shaw_per_head=naive_gather_bytes(length, head_dim, dtype_bytes=dtype_bytes),
        skew_per_head=skew_table_bytes(length, head_dim, dtype_bytes),
    )


#: Far beyond any machine; the bound keeps float conversion and the output short.
MAX_BYTES = 10**30

_UNITS = [(10**15, "PB"), (10**12, "TB"), (10**9, "GB"), (10**6, "MB"), (10**3, "kB")]


def format_bytes(n: int | float) -> str:
    """Decimal units with two significant digits, the paper's style: 8.6 GB, 4.2 MB, 0.52 MB.

    The unit is the largest one in which the number is at least 0.1 (so 524 288 bytes is
    "0.52 MB", like the paper, not "524 kB"); numbers of 10 and more are shown whole
    ("34 GB"); below 1000 bytes, whole bytes ("512 B").
    """
    if isinstance(n, bool) or not isinstance(n, numbers.Real) or not 0 <= n <= MAX_BYTES:
        raise ValueError(f"n must be a number of bytes from 0 to {MAX_BYTES:.0e}; got {n!r:.40}")
    n = float(n)   # within range, so float() cannot overflow (big ints, numpy numbers)
    if n < 1000:
        return f"{round(n)} B"
    for size, unit in _UNITS:
        value = n / size
        if value >= 0.1:
            break
    if value >= 9.95:
        return f"{value:.0f} {unit}"
    return f"{float(f'{value:.2g}'):g} {unit}"
