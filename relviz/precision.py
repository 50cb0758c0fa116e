"""Where T5's bucket formula depends on arithmetic: Mesh TensorFlow vs Hugging Face, and low precision.

relviz's :func:`relviz.positions.t5_bucket` follows Hugging Face transformers'
``T5Attention._relative_position_bucket``: in float32 it *divides*,
``log(n / max_exact) / log(max_distance / max_exact) * (num_buckets − max_exact)``.
Mesh TensorFlow (the original T5 code, ``mesh_tensorflow.transformer``) writes the same
expression, but ``mtf.divide`` by a Python number multiplies by its reciprocal, rounded to
float32. Where the exact value of the expression is an integer (or within ~1e-6 of one), the
two round to different sides and the truncation gives different buckets. The textbook
32 / 128 setting has no such offset; others do (num_buckets 34, max_distance 27,
bidirectional, j − i = −18: Hugging Face 13, Mesh TensorFlow 14, exact arithmetic 14).

The same formula evaluated in bfloat16 or float16 moves many more offsets, because the log and
the quotients are rounded to 8 or 11 significant bits (bfloat16 moves |j − i| = 16, 32 and 90
at 32 / 128). :func:`precision_changes` lists them.

Sign convention: relative position = j − i = key − query. The log here is torch's float32 log;
TensorFlow's may differ from it in the last bit, which could move a further edge.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from relviz._checks import check_bool, check_int
from relviz.positions import MAX_ABS_OFFSET, T5Config, t5_bucket, t5_config, t5_direction, t5_finish, t5_log_part

__all__ = ["PRECISIONS", "EdgeOffset", "PrecisionChange", "t5_bucket_mesh_tf", "t5_bucket_in_dtype",
           "t5_bucket_exact", "mesh_tf_edges", "precision_changes", "precision_window", "CHANGE_COLUMNS",
           "EDGE_COLUMNS", "change_rows", "edge_rows"]

#: The precisions the T5 page compares, by name.
PRECISIONS: dict[str, torch.dtype] = {"float32": torch.float32, "bfloat16": torch.bfloat16,
                                      "float16": torch.float16}
#: Largest integer float16 holds (the distance itself overflows beyond it).
_FLOAT16_MAX = 65504


def _distances(relative_position: torch.Tensor | int, config: T5Config) -> tuple[torch.Tensor, torch.Tensor]:
    """(bucket offset of the direction, distance n ≥ 0 the formula buckets), LongTensors like the input."""
    if not isinstance(relative_position, torch.Tensor):
        relative_position = torch.as_tensor(check_int("relative_position", relative_position,
                                                      minimum=-MAX_ABS_OFFSET, maximum=MAX_ABS_OFFSET))
    if relative_position.is_floating_point() or relative_position.is_complex() \
            or relative_position.dtype == torch.bool:
        raise ValueError(f"relative_position must be an integer tensor; got dtype {relative_position.dtype}")
    n = relative_position.to(torch.long)
    if n.numel() and (int(n.min()) < -MAX_ABS_OFFSET or int(n.max()) > MAX_ABS_OFFSET):
        raise ValueError(f"relative_position values must lie within ±{MAX_ABS_OFFSET}")
    return t5_direction(n, config.bidirectional, config.buckets_per_direction)


def _finish(base: torch.Tensor, n: torch.Tensor, large: torch.Tensor, config: T5Config) -> torch.Tensor:
    return t5_finish(base, n, large, config.max_exact, config.buckets_per_direction)


def t5_bucket_mesh_tf(relative_position: torch.Tensor | int, *, num_buckets: int = 32, max_distance: int = 128,
                      bidirectional: bool = True) -> torch.Tensor:
    """T5's bucket as Mesh TensorFlow computes it: multiplying by float32 reciprocals.

    ``log(n · fl(1/max_exact)) · fl(1/log(max_distance/max_exact)) · (num_buckets − max_exact)``,
    every step in float32 (``mtf.divide(x, c)`` for a Python number c is ``x * (1.0 / c)``).
    Differs from :func:`relviz.positions.t5_bucket` (Hugging Face) only at float32 edges:
    :func:`mesh_tf_edges` lists them.
    """
    config = t5_config(num_buckets, max_distance, bidirectional)
    base, n = _distances(relative_position, config)
    me = config.max_exact
    reciprocal = torch.tensor(1.0 / me, dtype=torch.float32)
    scale = torch.tensor(1.0 / math.log(config.max_distance / me), dtype=torch.float32)
    width = torch.tensor(float(config.buckets_per_direction - me), dtype=torch.float32)
    large = torch.log(n.clamp(min=me).to(torch.float32) * reciprocal.to(n.device)) * scale.to(n.device) \
        * width.to(n.device)
    return _finish(base, n, large, config)


def t5_bucket_in_dtype(relative_position: torch.Tensor | int, dtype: torch.dtype, *, num_buckets: int = 32,
                       max_distance: int = 128, bidirectional: bool = True) -> torch.Tensor:
    """T5's bucket with the reference (Hugging Face) formula evaluated in ``dtype`` (float32, bfloat16, float16).

    The distance, the log and both quotients are rounded to ``dtype`` after every operation, as a
    model running the bucket code in that precision would. float32 equals relviz.positions.t5_bucket.
    """
    if dtype not in PRECISIONS.values():
        raise ValueError(f"dtype must be one of torch.float32, torch.bfloat16, torch.float16; got {dtype!r}")
    config = t5_config(num_buckets, max_distance, bidirectional)
    base, n = _distances(relative_position, config)
    if dtype == torch.float16 and n.numel() and int(n.max()) > _FLOAT16_MAX:
        raise ValueError(f"relative_position must lie within ±{_FLOAT16_MAX} for float16 (larger distances "
                         "overflow to inf)")
    large = t5_log_part(n, config.max_exact, config.max_distance, config.buckets_per_direction, dtype)
    return _finish(base, n, large, config)


def t5_bucket_exact(offset: int, *, num_buckets: int = 32, max_distance: int = 128,
                    bidirectional: bool = True) -> int:
    """The bucket of one offset j − i in exact arithmetic (what the formula means, no rounding).

    The largest t ≤ L − 1 (L = logarithmic buckets per direction) with
    t · log(max_distance / max_exact) ≤ L · log(n / max_exact), decided by the integer comparison
    max_distance^t · max_exact^L ≤ n^L · max_exact^t where float64 is too close to call.
    """
    config = t5_config(num_buckets, max_distance, bidirectional)
    offset = check_int("offset", offset, minimum=-MAX_ABS_OFFSET, maximum=MAX_ABS_OFFSET)
    base, n = (config.buckets_per_direction if offset > 0 else 0, abs(offset)) if config.bidirectional \
        else (0, max(-offset, 0))
    me, md = config.max_exact, config.max_distance
    if n < me:
        return base + n
    width = config.buckets_per_direction - me
    value = math.log(n / me) / math.log(md / me) * width
    t = math.floor(value)
    if abs(value - round(value)) < 1e-6:   # near an integer: decide exactly
        t = round(value)
        if t > 0 and md**t * me**width > n**width * me**t:
            t -= 1
    return base + me + min(t, width - 1)


@dataclass(frozen=True)
class EdgeOffset:
    """One offset j − i whose bucket depends on the reference: Hugging Face (relviz), Mesh TF, exact."""

    offset: int
    hf: int
    mesh_tf: int
    exact: int


def mesh_tf_edges(*, num_buckets: int = 32, max_distance: int = 128, bidirectional: bool = True) -> list[EdgeOffset]:
    """Every offset whose bucket differs between Hugging Face (relviz) and Mesh TensorFlow, ascending.

    Only |j − i| ≤ max_distance can differ: beyond it both are clamped to the last bucket.
    """
    config = t5_config(num_buckets, max_distance, bidirectional)
    offsets = torch.arange(-config.max_distance, config.max_distance + 1)
    hf = config.bucket(offsets)
    mtf = t5_bucket_mesh_tf(offsets, num_buckets=num_buckets, max_distance=max_distance,
                            bidirectional=bidirectional)
    differ = (hf != mtf).nonzero().flatten().tolist()
    return [EdgeOffset(int(offsets[k]), int(hf[k]), int(mtf[k]),
                       t5_bucket_exact(int(offsets[k]), num_buckets=num_buckets, max_distance=max_distance,
                                       bidirectional=bidirectional))
            for k in differ]


@dataclass(frozen=True)
class PrecisionChange:
    """One offset whose bucket changes when the formula runs in ``dtype`` instead of float32."""

    offset: int
    dtype: str      # "bfloat16" or "float16"
    float32: int
    got: int


def precision_changes(*, num_buckets: int = 32, max_distance: int = 128, bidirectional: bool = True,
                      max_offset: int | None = None) -> list[PrecisionChange]:
    """Offsets within ±max_offset (default 2 · max_distance) whose bucket differs in bfloat16 or float16.

    Sorted by dtype (bfloat16 first), then offset.
    """
    config = t5_config(num_buckets, max_distance, bidirectional)
    max_offset = 2 * config.max_distance if max_offset is None else check_int(
        "max_offset", max_offset, minimum=1, maximum=_FLOAT16_MAX)
    offsets = torch.arange(-max_offset, max_offset + 1)
    settings = dict(num_buckets=num_buckets, max_distance=max_distance, bidirectional=check_bool(
        "bidirectional", bidirectional))
    reference = t5_bucket(offsets, **settings)
    changes = []
    for name in ("bfloat16", "float16"):
        got = t5_bucket_in_dtype(offsets, PRECISIONS[name], **settings)
        for k in (got != reference).nonzero().flatten().tolist():
            changes.append(PrecisionChange(int(offsets[k]), name, int(reference[k]), int(got[k])))
    return changes


#: the widest ±offset range the precision view scans (beyond 2 · max_distance every bucket is the last one)
MAX_PRECISION_WINDOW = 2048


def precision_window(max_distance: int) -> int:
    """The ±offsets the precision view scans: twice max_distance, at most MAX_PRECISION_WINDOW."""
    return min(2 * max_distance, MAX_PRECISION_WINDOW)


#: the columns of the two tables, as the T5 page heads them
CHANGE_COLUMNS = ("j − i", "precision", "float32 bucket", "bucket")
EDGE_COLUMNS = ("j − i", "Hugging Face (relviz)", "Mesh TensorFlow", "exact arithmetic")


def change_rows(changes: list[PrecisionChange]) -> list[dict[str, int | str]]:
    """The offsets whose bucket changes in low precision, one row each (CHANGE_COLUMNS)."""
    return [dict(zip(CHANGE_COLUMNS, (c.offset, c.dtype, c.float32, c.got))) for c in changes]


def edge_rows(edges: list[EdgeOffset]) -> list[dict[str, int]]:
    """The offsets where Mesh TensorFlow and Hugging Face disagree, one row each (EDGE_COLUMNS)."""
    return [dict(zip(EDGE_COLUMNS, (e.offset, e.hf, e.mesh_tf, e.exact))) for e in edges]
