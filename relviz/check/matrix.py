"""Check my implementation: compare a matrix your code produced with relviz's reference, cell by cell.

A learner who implements a relative position scheme gets a matrix out of it: a relative index,
Shaw et al.'s clip index, T5's bucket map, an ALiBi bias or its slopes, the output of the Music
Transformer skew. This module reads that matrix (.npy without pickles, CSV, or pasted text),
compares it with the reference for the given settings (or finds the settings that fit best on a
bounded grid), lists the first mismatching cells with i, j, j − i, expected and got, and names the
likely cause. A cause is named only when relviz has *computed* that mistake (the sign flipped,
the log in bfloat16, Mesh TensorFlow's float32 arithmetic, ...) for the same settings and found
that it reproduces the upload exactly on every compared cell; it is never a guess.

Sign convention: relative position = key index − query index (j − i).
"""
from __future__ import annotations

import csv
import functools
import io
import math
import re
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field, replace

import numpy as np
import torch

from relviz._checks import check_bool, check_int
from relviz.positions import alibi_slopes, shaw_clip_offsets, t5_bucket, t5_config
from relviz.precision import t5_bucket_in_dtype, t5_bucket_mesh_tf
from relviz.skew import skew

#: What can be checked: kind -> what the matrix holds.
KINDS: dict[str, str] = {
    "relative": "relative index j − i",
    "shaw": "Shaw clip index clip(j − i, −k, k) + k",
    "t5": "T5 bucket map",
    "alibi": "ALiBi bias of one head",
    "alibi_slopes": "ALiBi slopes (one per head)",
    "skew": "skew output for qer = arange(L·L).reshape(L, L)",
}
#: Largest upload read, in bytes (a 512 × 512 int64 .npy is 2 MiB; a float CSV of that size under 3 MB).
#: The server's upload limit (.streamlit/config.toml, server.maxUploadSize) is set to match.
MAX_BYTES = 3 * 1024 * 1024
#: Longest side of a checked matrix (the app's full-resolution views stop at 512 per side).
MAX_SIDE = 512
#: Most heads the ALiBi settings (and the settings search) consider.
MAX_HEADS = 256
#: Largest magnitude of a value read (exact in float64; far beyond any position matrix).
MAX_VALUE = 2**53
#: The first this-many mismatches are listed.
FIRST_MISMATCHES = 20
#: Float kinds compare with this tolerance (float32 rounding of the same formula passes;
#: bfloat16-rounded slopes, 2^−8 relative error, do not).
RTOL, ATOL = 1e-5, 1e-6

#: The settings search's bounded grid (a setting outside it must be given explicitly).
FIT_NUM_BUCKETS = range(2, 129)
FIT_MAX_DISTANCES = (8, 16, 20, 24, 32, 48, 50, 64, 100, 128, 200, 256, 500, 512, 1000, 1024)
FIT_MAX_K = 512
#: The settings search's work bound: candidates evaluated (one reference or named mistake built for one
#: setting, on the first row and column or on every cell) and the cells they cover. Every valid upload's
#: settings are found within it: the longest reference pass (a non-square T5 map reaching bucket 62:
#: 3,012 settings; ALiBi's 2,080 (head count, head) pairs share 64 distinct slopes per q_offset) needs
#: fewer than FIT_MAX_EVALUATIONS, and at most 3,012 × 1,023 cells. Named mistakes are searched in the
#: work left, closest settings first.
FIT_MAX_EVALUATIONS = 6000
FIT_MAX_CELLS = 8_000_000


# ---------------------------------------------------------------------------------------
# Reading a matrix


def load_matrix(data: bytes, *, name: str = "upload") -> np.ndarray:
    """Read a .npy file (no pickles) or CSV / pasted text into a 1-D or 2-D float64 or int64 array.

    Refuses, with a message saying what was wrong: more than MAX_BYTES, empty input, pickles and
    object arrays, .npz archives, non-numeric dtypes, 3-D or larger arrays, sides over MAX_SIDE,
    ragged or non-numeric CSV rows, NaN and +inf (−inf is allowed: it is how masks are written).
    """
    if not isinstance(data, (bytes, bytearray)):
        raise ValueError(f"{name} must be bytes; got {type(data).__name__}")
    if len(data) > MAX_BYTES:
        raise ValueError(f"{name} is {len(data):,} bytes; at most {MAX_BYTES:,} are read "
                         f"(a matrix up to {MAX_SIDE} × {MAX_SIDE})")
    if not data.strip():
        raise ValueError(f"{name} is empty: upload a .npy or CSV file, or paste the matrix")
    if data.startswith(b"\x93NUMPY"):
        matrix = _load_npy(bytes(data), name)
    elif data.startswith(b"PK"):
        raise ValueError(f"{name} is a zip archive (.npz?): save one array with np.save(path, array)")
    elif data[:1] == b"\x80" or data.startswith(b"\x00") or b"\x00" in data[:4096]:
        raise ValueError(f"{name} is binary but not a .npy file (a pickle or torch.save file?): relviz never "
                         "unpickles uploads; save with np.save(path, tensor.cpu().numpy()) or as CSV")
    else:
        matrix = parse_text(bytes(data).decode("utf-8-sig", errors="strict") if _utf8(data) else None, name)
    return _finish(matrix, name)


def _utf8(data: bytes) -> bool:
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def _load_npy(data: bytes, name: str) -> np.ndarray:
    stream = io.BytesIO(data)
    try:
        version = np.lib.format.read_magic(stream)
        shape, _, dtype = (np.lib.format.read_array_header_1_0(stream) if version == (1, 0)
                           else np.lib.format.read_array_header_2_0(stream))
    except (ValueError, OSError, EOFError, SyntaxError, TypeError) as exc:
        raise ValueError(f"{name} is not a readable .npy file: {exc}") from None
    _check_dtype(dtype, name)
    _check_shape(shape, name)
    stream.seek(0)
    try:
        array = np.load(stream, allow_pickle=False)
    except (ValueError, OSError, EOFError) as exc:
        raise ValueError(f"{name} could not be read as .npy: {exc}") from None
    return array


def _check_dtype(dtype: np.dtype, name: str) -> None:
    if dtype.hasobject:
        raise ValueError(f"{name} holds Python objects (dtype {dtype}); relviz reads only numeric arrays "
                         "(np.load with allow_pickle=False)")
    if dtype.names is not None or dtype.subdtype is not None:
        raise ValueError(f"{name} has a structured dtype ({dtype}); save a plain numeric array")
    if dtype.kind not in "iuf":
        raise ValueError(f"{name} has dtype {dtype}; relviz reads integer or floating-point matrices "
                         "(not bool, complex, strings or dates)")


def _check_shape(shape: tuple[int, ...], name: str) -> None:
    if len(shape) == 0:
        raise ValueError(f"{name} is a single number (0-D); upload a matrix")
    if len(shape) > 2:
        raise ValueError(f"{name} has {len(shape)} dimensions, shape {tuple(shape)}; relviz checks one 2-D "
                         "matrix (pick one head and one batch element, e.g. bias[0, h])")
    if 0 in shape:
        raise ValueError(f"{name} is empty (shape {tuple(shape)})")
    if max(shape) > MAX_SIDE:
        raise ValueError(f"{name} has shape {tuple(shape)}; each side must be at most {MAX_SIDE}")


_NUMBER = re.compile(r"^[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?$|^-inf$|^nan$|^[+]?inf$", re.IGNORECASE)


def _is_number(text: str) -> bool:
    return len(text) <= 40 and bool(_NUMBER.match(text.strip().replace("−", "-")))


def parse_text(text: str | None, name: str = "text") -> np.ndarray:
    """Parse a matrix written as CSV (with or without a header row), whitespace-separated columns, or
    printed by numpy / torch (``[[0, 1], [-1, 0]]``, ``tensor([[...]])``). One number per cell."""
    if text is None:
        raise ValueError(f"{name} is neither a .npy file nor UTF-8 text")
    if len(text) > MAX_BYTES:
        raise ValueError(f"{name} is {len(text):,} characters; at most {MAX_BYTES:,} are read")
    if "[" in text:
        rows = [_split(group) for group in re.findall(r"\[([^\[\]]*)\]", text)]
        rows = [row for row in rows if row]
    else:
        lines = [line for line in text.splitlines() if line.strip() and not line.lstrip().startswith("#")]
        rows = [_split(line) for line in lines]
        if len(rows) > 1 and not all(_is_number(cell) for cell in rows[0]):
            rows = _drop_header(rows)
    if not rows:
        raise ValueError(f"{name} holds no numbers")
    if len(rows) > MAX_SIDE or max(len(row) for row in rows) > MAX_SIDE:
        raise ValueError(f"{name} has {len(rows)} rows of up to {max(len(row) for row in rows)} values; "
                         f"each side must be at most {MAX_SIDE}")
    width = len(rows[0])
    for number, row in enumerate(rows):
        if len(row) != width:
            raise ValueError(f"{name}: row {number} has {len(row)} values but row 0 has {width} "
                             "(ragged rows: every row must have the same number of columns)")
        for column, cell in enumerate(row):
            if not _is_number(cell):
                raise ValueError(f"{name}: row {number}, column {column} is {cell[:40]!r}, not a number")
    if all(re.fullmatch(r"[+-]?\d+", cell.strip().replace("−", "-")) for row in rows for cell in row):
        values = [[int(cell.strip().replace("−", "-")) for cell in row] for row in rows]
        if all(abs(v) <= MAX_VALUE for row in values for v in row):
            return np.array(values, dtype=np.int64)
    return np.array([[float(cell.strip().replace("−", "-")) for cell in row] for row in rows], dtype=np.float64)


def _split(line: str) -> list[str]:
    line = line.strip().strip(",;")
    if not line:
        return []
    if "," in line or ";" in line or "\t" in line:
        return [cell.strip() for cell in next(csv.reader([line], delimiter=_delimiter(line)))]
    return line.split()


def _delimiter(line: str) -> str:
    return "," if "," in line else (";" if ";" in line else "\t")


def _drop_header(rows: list[list[str]]) -> list[list[str]]:
    """Drop a header row; drop a row-label column too when the header names one (its first cell is a
    label such as "i" and every row starts with its own query index)."""
    header, body = rows[0], rows[1:]
    first = header[0].strip().lower() if header else ""
    labelled = (first in {"", "i", "i\\j", "i/j", "query", "row", "query i", "i \\ j"} and body
                and all(_is_number(cell) for cell in header[1:]) and len(header) > 1
                and all(row and re.fullmatch(r"-?\d+", row[0].strip()) for row in body)
                and [int(row[0]) for row in body] == list(range(int(body[0][0]), int(body[0][0]) + len(body))))
    return [row[1:] for row in body] if labelled else body


def _finish(matrix: np.ndarray, name: str) -> np.ndarray:
    _check_dtype(matrix.dtype, name)
    _check_shape(matrix.shape, name)
    if matrix.dtype.kind == "f":
        if np.isnan(matrix).any():
            i = np.argwhere(np.isnan(matrix))[0]
            raise ValueError(f"{name} holds NaN (first at index {tuple(int(x) for x in i)}); relviz compares "
                             "numbers: replace masked cells by -inf or leave them out")
        if np.isposinf(matrix).any():
            raise ValueError(f"{name} holds +inf; only -inf (a masked cell) is allowed")
        finite = matrix[np.isfinite(matrix)]
        if finite.size and np.abs(finite).max() > MAX_VALUE:
            raise ValueError(f"{name} holds {np.abs(finite).max():.3g}; values must lie within ±2^53 "
                             "(no position matrix holds larger numbers)")
        if np.isfinite(matrix).all() and np.all(matrix == np.round(matrix)) and np.abs(matrix).max() < 2**53:
            return matrix.astype(np.int64)  # integers written as floats ("3.0"): compare exactly
        return matrix.astype(np.float64)
    if matrix.size and (int(matrix.max()) > MAX_VALUE or int(matrix.min()) < -MAX_VALUE):
        raise ValueError(f"{name} holds integers beyond ±2^53 (no position matrix holds larger numbers)")
    return matrix.astype(np.int64)


# ---------------------------------------------------------------------------------------
# Settings


@dataclass(frozen=True)
class Settings:
    """Every setting any kind uses; each kind reads only its own (see SETTINGS_OF)."""

    q_offset: int = 0
    k: int = 3
    num_buckets: int = 32
    max_distance: int = 128
    bidirectional: bool = True
    num_heads: int = 8
    head: int = 0
    causal: bool = False
    full: bool = False


#: The settings each kind uses (what the CLI and the page ask for, and what a result reports).
SETTINGS_OF: dict[str, tuple[str, ...]] = {
    "relative": ("q_offset",),
    "shaw": ("k", "q_offset"),
    "t5": ("num_buckets", "max_distance", "bidirectional", "q_offset"),
    "alibi": ("num_heads", "head", "q_offset", "causal"),
    "alibi_slopes": (),
    "skew": ("full",),
}


def check_kind(kind: object) -> str:
    if kind not in KINDS:
        raise ValueError(f"kind must be one of {', '.join(KINDS)}; got {kind!r}")
    return str(kind)


def validate_settings(kind: str, settings: Settings, shape: tuple[int, ...]) -> Settings:
    """Refuse settings the reference cannot serve, naming the parameter and the allowed range."""
    kind = check_kind(kind)
    q_len, k_len = (shape + (1,))[:2] if len(shape) == 2 else (1, shape[0])
    check_int("q_offset", settings.q_offset, minimum=-q_len - MAX_SIDE, maximum=k_len + MAX_SIDE)
    if kind == "shaw":
        check_int("k", settings.k, minimum=0, maximum=2**24)
    if kind == "t5":
        t5_config(settings.num_buckets, settings.max_distance, settings.bidirectional)
    if kind == "alibi":
        check_int("num_heads", settings.num_heads, minimum=1, maximum=MAX_HEADS)
        check_int("head", settings.head, minimum=0, maximum=settings.num_heads - 1)
    check_bool("causal", settings.causal)
    check_bool("full", settings.full)
    if kind == "alibi_slopes" and len(shape) == 2 and min(shape) != 1:
        raise ValueError(f"alibi_slopes must be one row or column of slopes; got shape {shape}")
    if kind != "alibi_slopes" and len(shape) != 2:
        raise ValueError(f"a {KINDS[kind]} is a 2-D matrix; got a vector of {shape[0]} values")
    if kind == "skew" and shape[0] != shape[1]:
        raise ValueError(f"the skew's output is square (L × L); got shape {shape}")
    return settings


# ---------------------------------------------------------------------------------------
# References and the mistakes relviz can compute


@dataclass(frozen=True)
class Grid:
    """The cells of a q_len × k_len matrix: query i, key j (broadcastable int64 arrays).

    With ``border=True`` only the first column (bottom to top) and the first row: one cell per
    offset, all a Toeplitz matrix holds, which is what the settings search scores cheaply.
    """

    q_len: int
    k_len: int
    border: bool = False

    @property
    def i(self) -> np.ndarray:
        if self.border:
            return np.concatenate([np.arange(self.q_len - 1, -1, -1), np.zeros(self.k_len - 1, dtype=np.int64)])
        return np.arange(self.q_len)[:, None]

    @property
    def j(self) -> np.ndarray:
        if self.border:
            return np.concatenate([np.zeros(self.q_len, dtype=np.int64), np.arange(1, self.k_len)])
        return np.arange(self.k_len)[None, :]

    def toeplitz(self, per_offset: Callable[[np.ndarray], np.ndarray], q_offset: int) -> np.ndarray:
        """per_offset(n) evaluated once per offset n = j − (q_offset + i), expanded to [q_len, k_len]."""
        lowest = -(self.q_len - 1) - q_offset
        values = np.asarray(per_offset(np.arange(lowest, lowest + self.q_len + self.k_len - 1)))
        return values if self.border else values[self.j - self.i + self.q_len - 1]


def t5_bucket_variant(n: np.ndarray, num_buckets: int, max_distance: int, bidirectional: bool, *,
                      rounded: bool = False, max_exact_before_halving: bool = False) -> np.ndarray:
    """T5 buckets with a coding mistake: rounding instead of truncation, or max_exact = num_buckets // 2
    taken before the halving for direction. With both flags off this is Hugging Face's
    ``_relative_position_bucket`` (tests check it equals relviz's t5_bucket). The arithmetic variants
    (Mesh TensorFlow, bfloat16, float16) are relviz.precision's."""
    n = torch.as_tensor(np.asarray(n, dtype=np.int64))
    per_direction = num_buckets // 2 if bidirectional else num_buckets
    max_exact = (num_buckets if max_exact_before_halving else per_direction) // 2
    if bidirectional:
        bucket = (n > 0).long() * per_direction
        n = n.abs()
    else:
        bucket = torch.zeros_like(n)
        n = (-n).clamp(min=0)
    if max_exact < 1 or max_distance <= max_exact:
        return (bucket + n.clamp(max=per_direction - 1)).numpy()
    value = torch.log(n.clamp(min=max_exact).float() / max_exact) / math.log(max_distance / max_exact) \
        * (per_direction - max_exact)
    value = value.round() if rounded else value
    if_large = (max_exact + value.to(torch.long)).clamp(max=per_direction - 1)
    return (bucket + torch.where(n < max_exact, n, if_large)).numpy()


def _t5_arithmetic(n: np.ndarray, s: Settings, dtype: torch.dtype | None) -> np.ndarray:
    """T5 buckets in another arithmetic: Mesh TensorFlow's float32 (dtype None) or the formula in dtype."""
    n = torch.as_tensor(n)
    kwargs = dict(num_buckets=s.num_buckets, max_distance=s.max_distance, bidirectional=s.bidirectional)
    return (t5_bucket_mesh_tf(n, **kwargs) if dtype is None else t5_bucket_in_dtype(n, dtype, **kwargs)).numpy()


def _t5(n: np.ndarray, s: Settings, bidirectional: bool | None = None) -> np.ndarray:
    bidirectional = s.bidirectional if bidirectional is None else bidirectional
    return t5_bucket(torch.as_tensor(n), num_buckets=s.num_buckets, max_distance=s.max_distance,
                     bidirectional=bidirectional).numpy()


def _shaw(n: np.ndarray, k: int) -> np.ndarray:
    return shaw_clip_offsets(torch.as_tensor(n), k=k).numpy()


def _slopes(num_heads: int) -> np.ndarray:
    """ALiBi's slopes as float64 (a copy of the cached ones: the settings search asks for them per head)."""
    return _cached_slopes(num_heads).copy()


@functools.lru_cache(maxsize=MAX_HEADS)
def _cached_slopes(num_heads: int) -> np.ndarray:
    return alibi_slopes(num_heads, device="cpu").double().numpy()


def _slopes_naive(num_heads: int) -> np.ndarray:
    """2^(−8h/n) for every n: the power-of-2 formula applied to any head count."""
    return np.array([2.0 ** (-8.0 * (h + 1) / num_heads) for h in range(num_heads)], dtype=np.float32).astype(float)


def _slopes_truncated(num_heads: int) -> np.ndarray:
    """The first n slopes of the next power of 2."""
    power = 1 << max(0, (num_heads - 1).bit_length())
    return _slopes(power)[:num_heads]


def _bf16(values: np.ndarray) -> np.ndarray:
    return torch.as_tensor(values, dtype=torch.float32).to(torch.bfloat16).double().numpy()


def _skew_input(length: int) -> torch.Tensor:
    """The qer the skew check feeds: cell (row, col) holds row·L + col, so an output names its source."""
    return torch.arange(length * length, dtype=torch.float32).reshape(length, length)


def _skew_like(length: int, *, pad_right: bool, drop_last: bool, flip: bool = False) -> np.ndarray:
    qer = _skew_input(length)
    qer = qer.flip(-1) if flip else qer
    pad = torch.zeros(length, 1)
    padded = torch.cat([qer, pad] if pad_right else [pad, qer], dim=1).reshape(length + 1, length)
    return (padded[:-1] if drop_last else padded[1:]).numpy().astype(np.float64)


@dataclass(frozen=True)
class Variant:
    """One mistake (or a harmless alternative convention) relviz can compute for given settings."""

    name: str
    explanation: str
    build: Callable[[Grid, Settings], np.ndarray | None]
    harmless: bool = False


def _other_alignment(grid: Grid, s: Settings) -> int | None:
    """The query offset of the other alignment convention (first keys: 0, last keys: k_len − q_len)."""
    last = grid.k_len - grid.q_len
    if last == 0:
        return None
    return last if s.q_offset == 0 else (0 if s.q_offset == last else None)


def _alignment(fn: Callable[[Grid, Settings], np.ndarray]) -> Callable[[Grid, Settings], np.ndarray | None]:
    def build(grid: Grid, s: Settings) -> np.ndarray | None:
        other = _other_alignment(grid, s)
        return None if other is None else fn(grid, replace(s, q_offset=other))
    return build


ALIGNMENT = ("queries aligned to the other end",
             "Your queries sit at the other end of the keys: query i at key position i (T5, offset 0) versus the "
             "last q_len keys (tensor2tensor, offset k_len − q_len). Both conventions exist; pick the one your "
             "model's cache uses and set the query offset to match.")

SIGN = "sign flipped: i − j instead of j − i"
SIGN_TEXT = ("Your code computes query − key. relviz, T5, Mesh TensorFlow, tensor2tensor and Shaw et al. use "
             "key − query (j − i): negative means the key lies in the query's past.")


def _ref_relative(grid: Grid, s: Settings) -> np.ndarray:
    return grid.toeplitz(lambda n: n, s.q_offset)


def _ref_shaw(grid: Grid, s: Settings) -> np.ndarray:
    return grid.toeplitz(lambda n: _shaw(n, s.k), s.q_offset)


def _ref_t5(grid: Grid, s: Settings) -> np.ndarray:
    return grid.toeplitz(lambda n: _t5(n, s), s.q_offset)


def _alibi_slope(s: Settings) -> float:
    return float(_slopes(s.num_heads)[s.head])


def _ref_alibi(grid: Grid, s: Settings) -> np.ndarray:
    slope = _alibi_slope(s)
    return grid.toeplitz(lambda n: -slope * np.abs(n).astype(np.float64), s.q_offset)


def _with_slope(slope_of: Callable[[Settings], float | None]) -> Callable[[Grid, Settings], np.ndarray | None]:
    def build(grid: Grid, s: Settings) -> np.ndarray | None:
        slope = slope_of(s)
        return None if slope is None else grid.toeplitz(lambda n: -slope * np.abs(n).astype(np.float64), s.q_offset)
    return build


def _head(values: np.ndarray, head: int) -> float | None:
    return float(values[head]) if 0 <= head < len(values) else None


def _ref_skew(grid: Grid, s: Settings) -> np.ndarray:
    return skew(_skew_input(grid.q_len)).numpy().astype(np.float64)


VARIANTS: dict[str, list[Variant]] = {
    "relative": [
        Variant(SIGN, SIGN_TEXT, lambda g, s: -_ref_relative(g, s)),
        Variant("off by one (+1)", "Every value is one too large: an index shifted by one somewhere (e.g. "
                "positions counted from 1 for the keys only).", lambda g, s: _ref_relative(g, s) + 1),
        Variant("off by one (−1)", "Every value is one too small: an index shifted by one somewhere (e.g. "
                "positions counted from 1 for the queries only).", lambda g, s: _ref_relative(g, s) - 1),
        Variant("shifted to a table index (j − i + q_len − 1)",
                "Your matrix is the relative index plus q_len − 1: a lookup index into a table of "
                "q_len + k_len − 1 rows, not the signed offset itself. Fine for an embedding lookup.",
                lambda g, s: _ref_relative(g, s) + g.q_len - 1 + s.q_offset, harmless=True),
        Variant(*ALIGNMENT, _alignment(_ref_relative)),
    ],
    "shaw": [
        Variant(SIGN, SIGN_TEXT + " With clipping, the past keys read the future rows of the table.",
                lambda g, s: g.toeplitz(lambda n: _shaw(-n, s.k), s.q_offset)),
        Variant("signed clip, no + k", "Your values are clip(j − i, −k, k), from −k to k: an embedding lookup "
                "needs clip(j − i, −k, k) + k, from 0 to 2k (a negative index wraps around in numpy and PyTorch).",
                lambda g, s: _ref_shaw(g, s) - s.k),
        Variant("clipped at k + 1", "Off by one in the clipping distance: clip(j − i, −(k+1), k+1) + (k+1) "
                "(a table of 2k + 3 rows).", lambda g, s: g.toeplitz(lambda n: _shaw(n, s.k + 1), s.q_offset)),
        Variant("clipped at k − 1", "Off by one in the clipping distance: clip(j − i, −(k−1), k−1) + (k−1) "
                "(a table of 2k − 1 rows).",
                lambda g, s: g.toeplitz(lambda n: _shaw(n, s.k - 1), s.q_offset) if s.k >= 1 else None),
        Variant("zero-pad beyond the table instead of clamp (index 2k + 1)",
                "Offsets beyond ±k point to an extra row 2k + 1 (a zero vector, as tensor2tensor's masked "
                "relative attention does past its stored distances) instead of clamping to the end rows 0 "
                "and 2k as Shaw et al. do.",
                lambda g, s: g.toeplitz(lambda n: np.where(np.abs(n) > s.k, 2 * s.k + 1, _shaw(n, s.k)), s.q_offset)),
        Variant("zero-pad beyond the table instead of clamp (index −1)",
                "Offsets beyond ±k are marked −1 (no vector: zero-padded) instead of clamped to the end rows "
                "0 and 2k as Shaw et al. do.",
                lambda g, s: g.toeplitz(lambda n: np.where(np.abs(n) > s.k, -1, _shaw(n, s.k)), s.q_offset)),
        Variant(*ALIGNMENT, _alignment(_ref_shaw)),
    ],
    "t5": [
        Variant(SIGN, SIGN_TEXT + " In T5 the past and future offsets use different buckets, so every "
                "off-diagonal cell moves.", lambda g, s: g.toeplitz(lambda n: _t5(-n, s), s.q_offset)),
        Variant("bidirectional vs unidirectional",
                "Your map uses the other mode: bidirectional (encoder) gives the future its own half of the "
                "buckets; unidirectional (decoder) puts every future offset in bucket 0.",
                lambda g, s: g.toeplitz(lambda n: _t5(n, s, not s.bidirectional), s.q_offset)
                if t5_ok(s.num_buckets, s.max_distance, not s.bidirectional) else None),
        Variant("log in bfloat16", "Your buckets were computed in bfloat16 (e.g. a model cast with "
                ".to(torch.bfloat16) computing the bucket chain in its dtype): the log and the division round "
                "to 8 bits and some offsets land one bucket off. T5 computes the buckets in float32.",
                lambda g, s: g.toeplitz(lambda n: _t5_arithmetic(n, s, torch.bfloat16), s.q_offset)),
        Variant("log in float16", "Your buckets were computed in float16: some offsets land one bucket off. "
                "T5 computes the buckets in float32.",
                lambda g, s: g.toeplitz(lambda n: _t5_arithmetic(n, s, torch.float16), s.q_offset)
                if g.q_len + g.k_len + abs(s.q_offset) < 65504 else None),
        Variant("Mesh TensorFlow vs Hugging Face float32 edge",
                "Your buckets follow Mesh TensorFlow, which multiplies by the reciprocals 1/max_exact and "
                "1/log(max_distance/max_exact) where Hugging Face (and relviz) divides; at a bucket edge the "
                "float32 result lands on the other side. Both are 'T5'; relviz follows Hugging Face.",
                lambda g, s: g.toeplitz(lambda n: _t5_arithmetic(n, s, None), s.q_offset), harmless=True),
        Variant("rounded instead of truncated", "Your code rounds the logarithmic bucket to the nearest "
                "integer; T5 truncates toward zero (int / .to(torch.long)).",
                lambda g, s: g.toeplitz(lambda n: t5_bucket_variant(
                    n, s.num_buckets, s.max_distance, s.bidirectional, rounded=True), s.q_offset)),
        Variant("max_exact taken before halving", "Your max_exact is num_buckets // 2 even in bidirectional "
                "mode; T5 takes half of one direction's buckets (num_buckets // 2 // 2): 8 exact + 8 "
                "logarithmic per direction for 32 buckets, not 16 close + 16 far.",
                lambda g, s: g.toeplitz(lambda n: t5_bucket_variant(
                    n, s.num_buckets, s.max_distance, s.bidirectional, max_exact_before_halving=True), s.q_offset)
                if s.bidirectional else None),
        Variant("the seed notebook's max_position² table (clipping, not buckets)",
                "Your 'T5' map is Shaw-style clipping, clamp(j − i, −m, m) + m, as in the seed notebook's "
                "T5RelativePositionalEncoder (whose table has max_position² rows, far more than the 2m + 1 it "
                "can use). T5 buckets offsets logarithmically instead.", lambda g, s: None),
        Variant(*ALIGNMENT, _alignment(_ref_t5)),
    ],
    "alibi": [
        Variant("sign flipped: + slope · |j − i|", "Your bias rewards distance: ALiBi subtracts slope · "
                "distance, so farther keys get a lower score.", lambda g, s: -_ref_alibi(g, s)),
        Variant("slope · j (the original ALiBi code and BLOOM)",
                "Your bias is slope · (key position), as in the original ALiBi code and BLOOM. Each row differs "
                "from −slope · (i − j) by slope · i, which the softmax cancels: the same attention under a "
                "causal mask.", lambda g, s: _alibi_slope(s) * (g.j + 0 * g.i).astype(np.float64), harmless=True),
        Variant("non-power-of-2 slopes: 2^(−8h/n) for every n",
                "Your slopes apply the power-of-2 formula to a head count that is not a power of 2. ALiBi "
                "takes the slopes of the nearest lower power of 2, then every other slope of the next one.",
                _with_slope(lambda s: _head(_slopes_naive(s.num_heads), s.head)
                            if s.num_heads & (s.num_heads - 1) else None)),
        Variant("non-power-of-2 slopes: the first n of the next power of 2",
                "Your slopes are the first n slopes of the next power of 2. ALiBi takes the slopes of the "
                "nearest lower power of 2, then every other slope of the next one.",
                _with_slope(lambda s: _head(_slopes_truncated(s.num_heads), s.head)
                            if s.num_heads & (s.num_heads - 1) else None)),
        Variant("heads in reverse order", "Your head h has the slope of head n − 1 − h.",
                _with_slope(lambda s: _head(_slopes(s.num_heads)[::-1], s.head) if s.num_heads > 1 else None)),
        Variant("head numbered from 1", "Your head h has the slope of head h + 1 (or h − 1): heads counted "
                "from 1 on one side and from 0 on the other.",
                _with_slope(lambda s: _head(_slopes(s.num_heads), s.head + 1))),
        Variant("slopes rounded to bfloat16", "Your slopes are rounded to bfloat16 (as Falcon does).",
                _with_slope(lambda s: float(_bf16(_slopes(s.num_heads))[s.head])), harmless=True),
        Variant(*ALIGNMENT, _alignment(_ref_alibi)),
    ],
    "alibi_slopes": [
        Variant("non-power-of-2 slopes: 2^(−8h/n) for every n",
                "Your slopes apply the power-of-2 formula to a head count that is not a power of 2. ALiBi "
                "takes the slopes of the nearest lower power of 2, then every other slope of the next one.",
                lambda g, s: _slopes_naive(g.k_len) if g.k_len & (g.k_len - 1) else None),
        Variant("non-power-of-2 slopes: the first n of the next power of 2",
                "Your slopes are the first n slopes of the next power of 2. ALiBi takes the slopes of the "
                "nearest lower power of 2, then every other slope of the next one.",
                lambda g, s: _slopes_truncated(g.k_len) if g.k_len & (g.k_len - 1) else None),
        Variant("heads in reverse order", "Your slopes run from the flattest to the steepest; ALiBi's head 0 "
                "has the steepest slope.", lambda g, s: _slopes(g.k_len)[::-1] if g.k_len > 1 else None),
        Variant("slopes rounded to bfloat16", "Your slopes are rounded to bfloat16 (as Falcon does).",
                lambda g, s: _bf16(_slopes(g.k_len)), harmless=True),
        Variant("log2 of the slopes", "Your values are log2(slope) (−8h/n), not the slopes.",
                lambda g, s: np.log2(_slopes(g.k_len))),
    ],
    "skew": [
        Variant("pad on the right", "Your skew pads the zero column on the right of QE_rᵀ; the Music "
                "Transformer pads on the left, then reshapes and drops the first row.",
                lambda g, s: _skew_like(g.q_len, pad_right=True, drop_last=False)),
        Variant("dropped the last row", "Your skew drops the last row of the reshaped (L + 1) × L tensor; "
                "the Music Transformer drops the first.",
                lambda g, s: _skew_like(g.q_len, pad_right=False, drop_last=True)),
        Variant("pad on the right and dropped the last row",
                "Your skew pads on the right and drops the last row; the Music Transformer pads on the left "
                "and drops the first.", lambda g, s: _skew_like(g.q_len, pad_right=True, drop_last=True)),
        Variant("E_r in the opposite order", "Your E_r's column m stands for distance −m; the skew needs "
                "column m to stand for distance m − (L − 1) (farthest first, distance 0 last).",
                lambda g, s: _skew_like(g.q_len, pad_right=False, drop_last=False, flip=True)),
        Variant("not skewed", "Your output is QE_rᵀ itself: the pad, reshape and slice did not happen "
                "(or were undone).", lambda g, s: _skew_input(g.q_len).numpy().astype(np.float64)),
        Variant("transposed", "Your output is the transpose of the skew: queries along the columns.",
                lambda g, s: _ref_skew(g, s).T.copy()),
    ],
}

SEED_NOTEBOOK = VARIANTS["t5"][-2].name

REFERENCES: dict[str, Callable[[Grid, Settings], np.ndarray]] = {
    "relative": _ref_relative,
    "shaw": _ref_shaw,
    "t5": _ref_t5,
    "alibi": _ref_alibi,
    "alibi_slopes": lambda g, s: _slopes(g.k_len),
    "skew": _ref_skew,
}


def t5_ok(num_buckets: int, max_distance: int, bidirectional: bool) -> bool:
    try:
        t5_config(num_buckets, max_distance, bidirectional)
    except ValueError:
        return False
    return True


def reference(kind: str, shape: tuple[int, ...], settings: Settings) -> np.ndarray:
    """relviz's reference for ``kind`` at ``shape`` and ``settings`` (validated)."""
    kind = check_kind(kind)
    validate_settings(kind, settings, shape)
    grid = _grid(kind, shape)
    return _shaped(REFERENCES[kind](grid, settings), shape)


def variant_matrix(kind: str, name: str, shape: tuple[int, ...], settings: Settings) -> np.ndarray | None:
    """The matrix the named mistake produces at ``shape`` and ``settings`` (None: it does not apply)."""
    kind = check_kind(kind)
    validate_settings(kind, settings, shape)
    grid = _grid(kind, shape)
    for variant in VARIANTS[kind]:
        if variant.name == name:
            if name == SEED_NOTEBOOK:  # its max_position is a clipping distance: settings.k
                return _seed_notebook(grid, settings, settings.k)
            built = variant.build(grid, settings)
            return None if built is None else _shaped(np.asarray(built), shape)
    raise ValueError(f"name must be one of the {kind} causes: {', '.join(v.name for v in VARIANTS[kind])}; "
                     f"got {name!r}")


def _seed_notebook(grid: Grid, s: Settings, max_position: int) -> np.ndarray:
    return grid.toeplitz(lambda n: _shaw(n, max_position), s.q_offset)


def _grid(kind: str, shape: tuple[int, ...], *, border: bool = False) -> Grid:
    if kind == "alibi_slopes":
        return Grid(1, int(np.prod(shape)))
    return Grid(int(shape[0]), int(shape[1]), border)


def _full(grid: Grid) -> tuple[int, ...]:
    return (grid.q_len + grid.k_len - 1,) if grid.border else (grid.q_len, grid.k_len)


def _shaped(values: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    return np.asarray(values).reshape(shape)


# ---------------------------------------------------------------------------------------
# Comparing


@dataclass(frozen=True)
class Mismatch:
    i: int
    j: int
    offset: int  # j − (q_offset + i)
    expected: float
    got: float


@dataclass(frozen=True)
class Cause:
    name: str
    explanation: str
    harmless: bool
    #: Fraction of the mismatching cells the variant reproduces (1.0: all of them, and no others).
    explains: float


@dataclass(frozen=True)
class CheckResult:
    """The verdict: every compared cell, the first mismatches, and the named cause when one fits."""

    kind: str
    settings: Settings
    fitted: bool
    expected: np.ndarray
    got: np.ndarray
    compared: np.ndarray = field(repr=False)  # bool, the cells that count (all, or j ≤ i where masked)
    mismatch: np.ndarray = field(repr=False)  # bool, compared cells that differ
    first: tuple[Mismatch, ...]
    #: Every named mistake that reproduces the upload on every compared cell (several can coincide
    #: on a small matrix); the first is the one reported as the likely cause.
    causes: tuple[Cause, ...]
    closest: Cause | None
    note: str = ""

    @property
    def cause(self) -> Cause | None:
        return self.causes[0] if self.causes else None

    @property
    def ok(self) -> bool:
        return not self.mismatch.any()

    @property
    def mismatches(self) -> int:
        return int(self.mismatch.sum())

    @property
    def cells(self) -> int:
        return int(self.compared.sum())

    def used_settings(self) -> dict[str, object]:
        return {name: getattr(self.settings, name) for name in SETTINGS_OF[self.kind]}

    def verdict(self) -> str:
        """One sentence a person reads first."""
        what = KINDS[self.kind]
        settings = ", ".join(f"{k} = {v}" for k, v in self.used_settings().items()) or "no settings"
        found = " (settings found by search)" if self.fitted else ""
        if self.ok:
            return f"Matches: all {self.cells} compared cells equal relviz's {what} for {settings}{found}."
        text = (f"{self.mismatches} of {self.cells} compared cells differ from relviz's {what} for "
                f"{settings}{found}.")
        if self.cause:
            text += f" Likely cause: {self.cause.name}."
            if len(self.causes) > 1:
                text += " Also consistent with: " + "; ".join(c.name for c in self.causes[1:]) + "."
        elif self.closest and self.closest.explains >= 0.5:
            text += (f" No known mistake reproduces it exactly; the closest, {self.closest.name}, accounts "
                     f"for {self.closest.explains:.0%} of the differing cells.")
        return text

    def to_json(self) -> dict[str, object]:
        return {
            "kind": self.kind, "ok": self.ok, "settings": self.used_settings(), "fitted": self.fitted,
            "shape": list(self.got.shape), "cells_compared": self.cells, "mismatches": self.mismatches,
            "first_mismatches": [asdict(m) for m in self.first],
            "cause": asdict(self.cause) if self.cause else None,
            "also_consistent_with": [asdict(c) for c in self.causes[1:]],
            "closest": asdict(self.closest) if self.closest else None,
            "verdict": self.verdict(), "note": self.note,
        }


def _compared(kind: str, grid: Grid, s: Settings, shape: tuple[int, ...]) -> np.ndarray:
    if kind == "skew" and not s.full:
        mask = grid.j <= grid.i
    elif kind == "alibi" and s.causal:
        mask = grid.j <= grid.i + s.q_offset
    else:
        mask = np.ones((1, 1), dtype=bool)
    return np.broadcast_to(mask, (grid.q_len, grid.k_len)).reshape(shape)


def _equal(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Cell-wise equality: exact for integers, within RTOL/ATOL for floats (−inf only equals −inf)."""
    if a.dtype.kind in "iu" and b.dtype.kind in "iu":
        return a == b
    a, b = a.astype(np.float64), b.astype(np.float64)
    with np.errstate(invalid="ignore"):
        return np.isclose(a, b, rtol=RTOL, atol=ATOL) | (a == b)


def compare(kind: str, got: np.ndarray, settings: Settings, *, fitted: bool = False) -> CheckResult:
    """Compare ``got`` with the reference for ``settings``; name the cause when a computed mistake
    reproduces ``got`` on every compared cell."""
    kind = check_kind(kind)
    got = np.asarray(got)
    shape = tuple(got.shape)
    validate_settings(kind, settings, shape)
    grid = _grid(kind, shape)
    expected = _shaped(REFERENCES[kind](grid, settings), shape)
    compared = _compared(kind, grid, settings, shape)
    mismatch = ~_equal(expected, got) & compared
    first = _first(mismatch, expected, got, grid, settings, kind)
    causes: list[Cause] = []
    closest = None
    if mismatch.any():
        for variant, built in _variants(kind, grid, settings, got):
            matches = _equal(built, got) | ~compared
            if matches.all():
                if variant.name not in [c.name for c in causes]:
                    causes.append(Cause(variant.name, variant.explanation, variant.harmless, 1.0))
                continue
            explained = float((matches & mismatch).sum()) / max(1, int(mismatch.sum()))
            if explained > 0 and (closest is None or explained > closest.explains):
                closest = Cause(variant.name, variant.explanation, variant.harmless, explained)
    note = ""
    if kind == "skew":
        note = ("Feed your skew qer = torch.arange(L * L, dtype=torch.float32).reshape(L, L): each output cell "
                "then names the QE_rᵀ cell it came from (row · L + column). Only j ≤ i is meaningful "
                + ("(compared here: every cell, the garbage too)." if settings.full else
                   "(compared here; the upper triangle is garbage the causal mask hides)."))
    return CheckResult(kind, settings, fitted, expected, got, compared, mismatch, first,
                       tuple(causes), None if causes else closest, note)


def _variants(kind: str, grid: Grid, s: Settings, got: np.ndarray) -> Iterator[tuple[Variant, np.ndarray]]:
    """Every named mistake that applies at these settings, built on ``grid`` (full or border)."""
    shape = (grid.q_len + grid.k_len - 1,) if grid.border else tuple(got.shape)
    for variant in VARIANTS[kind]:
        if variant.name == SEED_NOTEBOOK:
            for m in _seed_candidates(s, got):
                yield variant, _shaped(_seed_notebook(grid, s, m), shape)
            continue
        built = variant.build(grid, s)
        if built is not None:
            yield variant, _shaped(np.broadcast_to(np.asarray(built), _full(grid)), shape)


def _seed_candidates(s: Settings, got: np.ndarray) -> list[int]:
    """The seed notebook's index is clamp(j − i, −m, m) + m: its value at j − i = 0 is m itself."""
    if got.ndim != 2:
        return []
    i = np.arange(got.shape[0])
    j = i + s.q_offset
    inside = (j >= 0) & (j < got.shape[1])
    if not inside.any():
        return []
    m = int(got[i[inside][0], j[inside][0]])
    return [m] if 0 <= m <= 2**24 else []


def _first(mismatch: np.ndarray, expected: np.ndarray, got: np.ndarray, grid: Grid, s: Settings,
           kind: str) -> tuple[Mismatch, ...]:
    cells = np.argwhere(mismatch.reshape(grid.q_len, grid.k_len))[:FIRST_MISMATCHES]
    e, g = expected.reshape(grid.q_len, grid.k_len), got.reshape(grid.q_len, grid.k_len)
    offset = 0 if kind in ("skew", "alibi_slopes") else s.q_offset
    return tuple(Mismatch(int(i), int(j), int(j - i - offset), _num(e[i, j]), _num(g[i, j])) for i, j in cells)


def _num(value: np.generic) -> float:
    value = value.item()
    return value if isinstance(value, int) or not math.isfinite(value) or value != int(value) else int(value)


# ---------------------------------------------------------------------------------------
# Finding the settings that fit


def fit_candidates(kind: str, got: np.ndarray) -> list[Settings]:
    """The bounded grid of settings the search tries for ``kind``, the common defaults first (where
    several settings give the same matrix, the search reports the first)."""
    kind = check_kind(kind)
    shape = tuple(got.shape)
    if kind in ("alibi_slopes", "skew"):
        return [Settings()]
    q_len, k_len = shape
    offsets = sorted({0, k_len - q_len})
    if kind == "relative":
        return [Settings(q_offset=q_offset) for q_offset in offsets]
    if kind == "shaw":
        ks = range(0, min(FIT_MAX_K, q_len + k_len) + 1)
        return [Settings(q_offset=q_offset, k=k) for q_offset in offsets for k in ks]
    if kind == "t5":
        top = int(got.max()) if got.dtype.kind in "iu" else FIT_NUM_BUCKETS[-1]
        # Every bucket is below num_buckets; a map reaching bucket b needs num_buckets ≤ 2(b + 1) + 2
        # (bidirectional: the future starts at num_buckets // 2; unidirectional: all-exact ends at b).
        buckets = [nb for nb in FIT_NUM_BUCKETS if top < nb <= 2 * (top + 1) + 2]
        grid = [Settings(q_offset=q_offset, num_buckets=nb, max_distance=md, bidirectional=bidirectional)
                for q_offset in offsets for bidirectional in (True, False) for nb in buckets
                for md in FIT_MAX_DISTANCES if t5_ok(nb, md, bidirectional)]
        return sorted(grid, key=lambda s: (s.num_buckets != 32 or s.max_distance != 128))
    # alibi
    return [Settings(q_offset=q_offset, num_heads=num_heads, head=head, causal=causal)
            for q_offset in offsets for causal in (False, True)
            for num_heads in range(1, 65) for head in range(num_heads)]


@dataclass
class FitWork:
    """What one settings search evaluated; it stops (``capped``) at FIT_MAX_EVALUATIONS or FIT_MAX_CELLS."""

    evaluations: int = 0
    cells: int = 0
    capped: bool = False

    def spend(self, cells: int, count: int = 1) -> bool:
        """Account for ``count`` evaluations over ``cells`` cells; False (and capped) once over the bound."""
        if self.evaluations + count > FIT_MAX_EVALUATIONS or self.cells + cells > FIT_MAX_CELLS:
            self.capped = True
            return False
        self.evaluations += count
        self.cells += cells
        return True


def exact_fit_possible(kind: str, got: np.ndarray) -> bool:
    """Whether any setting's reference or named mistake could equal ``got``: each is a function of the
    offset alone (a Toeplitz matrix), and the index kinds hold integers. A corrupted or random upload
    fails this in one O(q_len · k_len) pass, so the search skips confirming candidates on every cell.
    A causal ALiBi check compares only j − i ≤ q_offset, so only that part has to be Toeplitz."""
    if got.ndim != 2 or min(got.shape) < 1:
        return True
    values = got.astype(np.float64)
    if kind in ("relative", "shaw", "t5"):
        with np.errstate(invalid="ignore"):
            if not (np.isfinite(values).all() and (values == np.round(values)).all()):
                return False
    a, b = values[1:, 1:], values[:-1, :-1]  # (i, j) and (i − 1, j − 1): the same offset
    with np.errstate(invalid="ignore"):
        # 3× the comparison's tolerance: two cells each within tolerance of one reference value
        same = np.isclose(a, b, rtol=3 * RTOL, atol=3 * ATOL) | (a == b)
    if same.all():
        return True
    if kind != "alibi":
        return False
    q_len, k_len = got.shape
    lowest = min(0, k_len - q_len)  # the smallest q_offset the search tries
    later = (np.arange(1, k_len)[None, :] - np.arange(1, q_len)[:, None]) > lowest
    return bool((same | later).all())


def fit(kind: str, got: np.ndarray, *, work: FitWork | None = None) -> CheckResult:
    """Find the settings on the bounded grid that explain ``got`` best, then compare with them.

    Order of preference: settings where the reference matches exactly; else settings where a named
    mistake matches exactly; else the settings whose reference agrees with most cells. Candidates are
    scored on the first row and column (every offset of a Toeplitz matrix: q_len + k_len − 1 cells),
    and confirmed on every cell. The work is bounded (``work`` counts it, FitWork's caps stop it): an
    upload no setting can match exactly (:func:`exact_fit_possible`) gets no confirmations and no search
    for named mistakes, and the first exact fit ends the search.
    """
    kind = check_kind(kind)
    got = np.asarray(got)
    shape = tuple(got.shape)
    validate_settings(kind, Settings(), shape)
    work = work if work is not None else FitWork()
    if kind in ("skew", "alibi_slopes"):
        return compare(kind, got, Settings(), fitted=True)
    candidates = fit_candidates(kind, got) or [Settings()]
    border_grid = _grid(kind, shape, border=True)
    border = _border(got)
    full_cost = int(np.prod(shape)) * (1 + len(VARIANTS[kind]))  # a confirmation, with its causes
    possible = exact_fit_possible(kind, got)
    best: tuple[float, Settings] | None = None
    cache: dict[tuple, np.ndarray] = {}
    scores: list[float] = []
    for s in candidates:
        key = _toeplitz_key(kind, s)
        if key not in cache:
            if not work.spend(border.size):
                break
            cache[key] = REFERENCES[kind](border_grid, s)
        agree = _equal(cache[key], border) | _masked(kind, border_grid, s)
        score = float(agree.mean())
        scores.append(score)
        if best is None or score > best[0]:
            best = (score, s)
        if score == 1.0:
            if not possible:
                break  # every offset agrees: nothing scores higher, and no setting matches every cell
            if not work.spend(full_cost, 1 + len(VARIANTS[kind])):
                break
            result = compare(kind, got, s, fitted=True)
            if result.ok:
                return result
    if possible and not work.capped:
        # Closest settings first (most named mistakes change few offsets); ties keep the defaults first.
        order = sorted(range(len(scores)), key=lambda n: -scores[n])
        for s in (candidates[n] for n in order):
            if kind == "alibi" and s.causal:
                continue  # the same slope unmasked is a candidate too; a mask adds no mistake of its own
            for _, built in _variants(kind, border_grid, s, got):
                if not work.spend(border.size):
                    break
                if _equal(built, border).all():
                    if not work.spend(full_cost, 1 + len(VARIANTS[kind])):
                        break
                    result = compare(kind, got, s, fitted=True)
                    if result.cause:
                        return result
                    break
            if work.capped:
                break
    result = compare(kind, got, best[1] if best else candidates[0], fitted=True)
    if work.capped:
        note = (f"The settings search stopped at its work bound ({work.evaluations:,} candidates evaluated): "
                "these are the best settings found by then. Give the settings to check against them exactly.")
        result = replace(result, note=(result.note + " " + note).strip())
    return result


def _masked(kind: str, grid: Grid, s: Settings) -> np.ndarray:
    """Cells a causal ALiBi check ignores (keys after the query), on a full or border grid."""
    if kind == "alibi" and s.causal:
        return grid.j + 0 * grid.i > grid.i + s.q_offset
    return np.zeros(1, dtype=bool)


def _border(matrix: np.ndarray) -> np.ndarray:
    """First column (bottom to top) and first row: one cell per offset of a q_len × k_len matrix."""
    return np.concatenate([matrix[::-1, 0], matrix[0, 1:]])


def _toeplitz_key(kind: str, s: Settings) -> tuple:
    """Settings with the same key have the same reference (ALiBi: many head counts share a slope)."""
    if kind == "alibi":
        return s.q_offset, _alibi_slope(s)
    return tuple(getattr(s, name) for name in SETTINGS_OF[kind] if name != "causal")


def check(kind: str, got: np.ndarray, settings: Settings | None = None) -> CheckResult:
    """Compare with the given settings, or search for the best-fitting ones when ``settings`` is None."""
    return fit(kind, got) if settings is None else compare(kind, got, settings)
