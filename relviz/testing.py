"""Assertions for your own test suite: check your implementation against relviz's reference.

Each ``assert_*`` calls your function (or takes the array it produced), compares it with relviz's
reference cell by cell, and raises ``AssertionError`` with the verdict, the first mismatching cells and
the named cause (a cause is named only when relviz computed that mistake and it reproduces your
output). Bad settings raise ``ValueError``. Plain functions: use them in pytest, unittest or a notebook::

    from relviz.testing import assert_rope_matches, assert_t5_buckets_match
    from my_model import build_rope_cache, relative_position_bucket

    assert_rope_matches(build_rope_cache, head_dim=128, base=500000.0)      # fn(seq_len, head_dim) -> (cos, sin)
    assert_t5_buckets_match(relative_position_bucket, num_buckets=32, max_distance=128)
"""
from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from relviz.check.api import check, kind_of
from relviz.check.callables import call, to_array
from relviz.check.matrix import Settings
from relviz.check.result import CheckResult
from relviz.check.rope import RopeSettings, rope_settings
from relviz.check.rope_model import settings_for_model, settings_from_config
from relviz.rope.config import RopeScaling

__all__ = ["assert_matches", "assert_rope_matches", "assert_rope_cache", "assert_t5_buckets_match",
           "assert_alibi_slopes_match", "assert_matches_model", "report"]


def report(result: CheckResult) -> str:
    """The verdict (with the difference described where nothing explains it), the first mismatches and the cause
    or the closest partial fit, and the note: what ``python -m relviz check`` prints, the same explanation."""
    lines = [result.verdict()]
    if result.first:
        row, column, offset = kind_of(result.kind).labels
        lines.append(f"first mismatches ({row}, {column}, {offset}: expected / got):")
        lines += [f"  {m.i}, {m.j}, {m.offset}: {m.expected} / {m.got}" for m in result.first[:10]]
    if result.cause:
        lines.append(f"likely cause: {result.cause.name}. {result.cause.explanation}")
    elif result.closest:
        lines.append(f"closest partial fit (not the cause): {result.closest.name}. {result.closest.explanation}")
    if result.note:
        lines.append(result.note)
    return "\n".join(lines)


def assert_matches(kind: str, got: Any, settings: Any) -> CheckResult:
    """Assert that ``got`` (an array, or a tensor) equals relviz's reference for ``kind`` at ``settings``."""

    result = check(kind, to_array(got, "your output"), settings)
    if not result.ok:
        raise AssertionError(report(result))
    return result


def _rope(head_dim: int | None, base: float, rotary_dim: int | None, layout: str | None, config: Any,
          scaling: RopeScaling | None, q_offset: int = 0) -> RopeSettings:
    if config is not None:
        return settings_from_config(config, layout=layout, q_offset=q_offset)
    if head_dim is None:
        raise ValueError("head_dim is required (or give config=, a config.json dict)")
    return rope_settings(head_dim=head_dim, base=base, rotary_dim=rotary_dim, layout=layout or "half",
                         q_offset=q_offset, scaling=scaling)


def assert_rope_matches(fn: Callable[..., Any], *, head_dim: int | None = None, base: float = 10000.0,
                        rotary_dim: int | None = None, layout: str | None = None, config: Mapping[str, Any] | None = None,
                        scaling: RopeScaling | None = None, seq_len: int = 128) -> None:
    """``fn(seq_len, head_dim) -> (cos, sin)`` builds both caches as relviz's reference does."""
    s = _rope(head_dim, base, rotary_dim, layout, config, scaling)
    for kind in ("rope_cos", "rope_sin"):
        assert_matches(kind, call(kind, fn, s, seq_len), s)


def assert_rope_cache(cache: Any, *, kind: str = "rope_cos", head_dim: int | None = None, base: float = 10000.0,
                      rotary_dim: int | None = None, layout: str | None = None, config: Mapping[str, Any] | None = None,
                      scaling: RopeScaling | None = None, q_offset: int = 0) -> None:
    """A cos or sin cache [seq_len, head_dim] (kind rope_cos / rope_sin) or angles (rope_angles) you built."""
    s = _rope(head_dim if head_dim is not None else np.shape(cache)[-1], base, rotary_dim, layout, config, scaling,
              q_offset)
    assert_matches(kind, cache, s)


def assert_t5_buckets_match(fn: Callable[..., Any], *, num_buckets: int = 32, max_distance: int = 128,
                            bidirectional: bool = True, seq_len: int = 300) -> None:
    """``fn(relative_position, bidirectional, num_buckets, max_distance) -> buckets`` equals T5's buckets."""
    s = Settings(num_buckets=num_buckets, max_distance=max_distance, bidirectional=bidirectional)
    assert_matches("t5", call("t5", fn, s, seq_len), s)


def assert_alibi_slopes_match(fn_or_slopes: Callable[..., Any] | Any, *, num_heads: int | None = None,
                              alibi_bias_max: float = 8.0) -> None:
    """``fn(num_heads) -> slopes`` (or the slopes themselves) equals ALiBi's slopes for num_heads heads."""
    s = Settings(num_heads=num_heads or 8, alibi_bias_max=alibi_bias_max)
    if callable(fn_or_slopes):
        if num_heads is None:
            raise ValueError("num_heads is required to call your slopes function")
        got = call("alibi_slopes", fn_or_slopes, s, 1)
    else:
        got = fn_or_slopes
    assert_matches("alibi_slopes", got, s)


def assert_matches_model(config_or_path: Mapping[str, Any] | str, fn: Callable[..., Any], *, layer: int = 0,
                         kinds: tuple[str, ...] = ("rope_cos", "rope_sin"), seq_len: int = 128,
                         stack: str | None = None) -> None:
    """``fn(seq_len, head_dim) -> (cos, sin)`` builds what layer ``layer`` of the model applies (its per-layer
    plan from relviz.hf: a config.json dict, a model directory or a Hub id). On a layer without rotation
    the model multiplies by cos 1, sin 0; rotating there is named as a mistake."""

    s = settings_for_model(config_or_path, layer, stack=stack)
    for kind in kinds:  # fn(seq_len, head_dim) -> (cos, sin); with kinds=("rope_angles",): -> angles
        assert_matches(kind, call(kind, fn, s, seq_len), s)
