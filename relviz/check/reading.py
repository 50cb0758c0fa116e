"""Reading what a user's code produced: a .npy file (never a pickle), CSV, or pasted text, into a checked array.

Every check kind reads its upload here, so every refusal (too large, pickles, NaN, ragged rows, ...)
gets the same clear message naming what was wrong and what is allowed.
"""
from __future__ import annotations

import csv
import io
import re

import numpy as np

#: Largest upload read, in bytes (a 512 × 512 int64 .npy is 2 MiB; a float CSV of that size under 3 MB;
#: a 4096 × 128 float32 RoPE cache 2 MiB). The server's upload limit (.streamlit/config.toml,
#: server.maxUploadSize) is set to match.
MAX_BYTES = 3 * 1024 * 1024
#: Longest side of a checked position matrix (the app's full-resolution views stop at 512 per side).
MAX_SIDE = 512
#: Largest magnitude of a value read (exact in float64; far beyond any position matrix).
MAX_VALUE = 2**53

# ---------------------------------------------------------------------------------------
# Reading a matrix


def load_matrix(data: bytes, *, name: str = "upload", max_side: int = MAX_SIDE) -> np.ndarray:
    """Read a .npy file (no pickles) or CSV / pasted text into a 1-D or 2-D float64 or int64 array.

    Refuses, with a message saying what was wrong: more than MAX_BYTES, empty input, pickles and
    object arrays, .npz archives, non-numeric dtypes, 3-D or larger arrays, sides over ``max_side`` (MAX_SIDE),
    ragged or non-numeric CSV rows, NaN and +inf (−inf is allowed: it is how masks are written).
    """
    if not isinstance(data, (bytes, bytearray)):
        raise ValueError(f"{name} must be bytes; got {type(data).__name__}")
    if len(data) > MAX_BYTES:
        raise ValueError(f"{name} is {len(data):,} bytes; at most {MAX_BYTES:,} are read "
                         f"(a matrix up to {min(max_side, MAX_SIDE)} × {min(max_side, MAX_SIDE)})")
    if not data.strip():
        raise ValueError(f"{name} is empty: upload a .npy or CSV file, or paste the matrix")
    if data.startswith(b"\x93NUMPY"):
        matrix = _load_npy(bytes(data), name, max_side)
    elif data.startswith(b"PK"):
        raise ValueError(f"{name} is a zip archive (.npz?): save one array with np.save(path, array)")
    elif data[:1] == b"\x80" or data.startswith(b"\x00") or b"\x00" in data[:4096]:
        raise ValueError(f"{name} is binary but not a .npy file (a pickle or torch.save file?): relviz never "
                         "unpickles uploads; save with np.save(path, tensor.cpu().numpy()) or as CSV")
    else:
        matrix = parse_text(bytes(data).decode("utf-8-sig", errors="strict") if _utf8(data) else None, name,
                            max_side=max_side)
    return _finish(matrix, name, max_side)


def _utf8(data: bytes) -> bool:
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def _load_npy(data: bytes, name: str, max_side: int) -> np.ndarray:
    stream = io.BytesIO(data)
    try:
        version = np.lib.format.read_magic(stream)
        shape, _, dtype = (np.lib.format.read_array_header_1_0(stream) if version == (1, 0)
                           else np.lib.format.read_array_header_2_0(stream))
    except (ValueError, OSError, EOFError, SyntaxError, TypeError) as exc:
        raise ValueError(f"{name} is not a readable .npy file: {exc}") from None
    _check_dtype(dtype, name)
    _check_shape(shape, name, max_side)
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


def _check_shape(shape: tuple[int, ...], name: str, max_side: int = MAX_SIDE) -> None:
    if len(shape) == 0:
        raise ValueError(f"{name} is a single number (0-D); upload a matrix")
    if len(shape) > 2:
        raise ValueError(f"{name} has {len(shape)} dimensions, shape {tuple(shape)}; relviz checks one 2-D "
                         "matrix (pick one head and one batch element, e.g. bias[0, h])")
    if 0 in shape:
        raise ValueError(f"{name} is empty (shape {tuple(shape)})")
    if max(shape) > max_side:
        raise ValueError(f"{name} has shape {tuple(shape)}; each side must be at most {max_side}")


_NUMBER = re.compile(r"^[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?$|^-inf$|^nan$|^[+]?inf$", re.IGNORECASE)


def _is_number(text: str) -> bool:
    return len(text) <= 40 and bool(_NUMBER.match(text.strip().replace("−", "-")))


def parse_text(text: str | None, name: str = "text", *, max_side: int = MAX_SIDE) -> np.ndarray:
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
    if len(rows) > max_side or max(len(row) for row in rows) > max_side:
        raise ValueError(f"{name} has {len(rows)} rows of up to {max(len(row) for row in rows)} values; "
                         f"each side must be at most {max_side}")
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


def _finish(matrix: np.ndarray, name: str, max_side: int = MAX_SIDE) -> np.ndarray:
    _check_dtype(matrix.dtype, name)
    _check_shape(matrix.shape, name, max_side)
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

