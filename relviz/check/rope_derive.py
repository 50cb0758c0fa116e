"""RoPE settings read from the upload itself, for settings no grid holds (base 31337, positions from 7, Llama 3's
factors, LongRoPE's per-pair factors).

θ_i of each pair is read first: a cos or sin column obeys v[m + 1] + v[m − 1] = 2 cos θ · v[m] (whatever the
attention factor), so a least-squares cos θ per column gives θ where it is not tiny; the angles kind gives θ as
the slope of each column. The ratio of consecutive high-frequency θ is base^(−2/d') (scaling rules leave those
pairs alone, and linear interpolation divides them all alike); a rotary dim d' < d shows as trailing columns at
rest (cos 1, sin 0). The first position is the one whose row of angles is row 0 (a vectorised search over
positions); with it, small θ are read from arccos / arcsin of the column. Llama 3's factor is the lowest pair's
θ ratio, its low/high frequency factors come from the smoothed band; LongRoPE's factors are the θ ratios per
pair. Every reading is only a candidate: relviz.check.rope_fit confirms it on every cell.
"""
from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import torch
from relviz.check.rope import ROPE_KINDS, RopeKind, RopeSettings, rope_settings
from relviz.check.rope_causes import COMMON_BASES
from relviz.rope.config import RopeScaling
from relviz.rope.math import rope_parameters

#: Pairs at or above this θ (radians per position) are read from the recurrence and give the base.
HIGH_THETA = 0.1
#: Below this θ a cos or sin column is read by its angle (the recurrence loses precision), where the angle at the
#: last row read reaches READABLE (cos 1 − 10^−3: float32 resolves it to about 10^−5 relative).
SMALL_THETA = 0.01
READABLE = 0.05
#: First positions searched (row 0 is position 0 … MAX_OFFSET − 1).
MAX_OFFSET = 1 << 16
#: Original contexts tried for Llama 3 when the data cannot tell (its smoothing band depends on the ratio only).
ORIGINALS = (8192, 4096, 2048, 16384, 32768, 1024)
#: Llama 3's (low, high) frequency factors tried beside the ones read from the band.
LLAMA3_FACTORS = ((1.0, 4.0), (1.0, 2.0), (2.0, 4.0), (1.0, 8.0), (1.0, 1.0), (2.0, 8.0))


def round_candidates(x: float, rel: float = 1e-3) -> list[float]:
    """Round numbers within ``rel`` of ``x``, fewest significant digits first, then ``x`` itself."""
    out: list[float] = []
    for digits in range(1, 9):
        r = float(f"{x:.{digits}g}")
        if abs(r - x) <= rel * abs(x) and r not in out:
            out.append(r)
    return out + ([x] if x not in out else [])


def pair_columns(kind: RopeKind, width: int, layout: str, rotary: int) -> np.ndarray:
    """The column holding each pair's first value."""
    if not kind.laid_out:
        return np.arange(width)
    return np.arange(rotary // 2) * (2 if layout == "interleaved" else 1)


def recurrence_theta(v: np.ndarray) -> np.ndarray:
    """[P] θ per column of ``v`` [R, P] from v[m + 1] + v[m − 1] = 2 cos θ · v[m] (NaN where unreadable)."""
    if v.shape[0] < 3:
        return np.full(v.shape[1], np.nan)
    mid, around = v[1:-1], v[2:] + v[:-2]
    denominator = 2.0 * (mid * mid).sum(0)
    with np.errstate(divide="ignore", invalid="ignore"):
        cosine = (around * mid).sum(0) / denominator
    return np.where(denominator > 0, np.arccos(np.clip(cosine, -1.0, 1.0)), np.nan)


def _layouts(kind: RopeKind, got: np.ndarray) -> list[tuple[str, int]]:
    """(layout, rotary_dim) the upload's columns allow: trailing columns at rest are pass-through dims."""
    if not kind.laid_out:
        return [("half", 2 * got.shape[1])]
    width = got.shape[1]
    at_rest = np.all(np.abs(got - kind.rest) <= 1e-6, axis=0)
    moving = np.flatnonzero(~at_rest)
    rotary = int(moving[-1]) + 1 if moving.size else width
    rotary += rotary % 2
    out = []
    for r in dict.fromkeys((width, rotary)):   # all dims first: tiny angles at few rows look at rest
        if r < 2:
            continue
        halves = np.allclose(np.abs(got[:, :r // 2]), np.abs(got[:, r // 2:r]), atol=1e-6)
        neighbours = np.allclose(np.abs(got[:, 0:r:2]), np.abs(got[:, 1:r:2]), atol=1e-6)
        out += [(layout, r) for layout, fits in (("half", halves), ("interleaved", neighbours)) if fits]
    return out


def _offsets(kind: RopeKind, row0: np.ndarray, inv_freq: torch.Tensor, high: np.ndarray) -> list[int]:
    """The first positions whose angles give ``row0`` [P] on the high-frequency pairs, best first (scale-free)."""
    theta = inv_freq[torch.as_tensor(high)]                                                      # [K] float32
    if not kind.scaled:
        return sorted({max(0, int(round(float(row0[k]) / float(theta[n])))) for n, k in enumerate(high[:2])})
    g = row0[high]
    if not np.any(g != (kind.rest or 0.0)) or np.all(np.abs(g - g[0]) == 0) and kind.rest == 1.0:
        return [0]
    positions = torch.arange(MAX_OFFSET, dtype=torch.int64).float()                               # [O]
    angle = positions[:, None] * theta[None, :]                                                  # [O, K] float32
    c = (angle.sin() if kind.rest == 0.0 else angle.cos()).double().numpy()
    scale = (c @ g) / np.maximum((c * c).sum(1), 1e-30)                                          # [O]
    residual = np.abs(c * scale[:, None] - g[None, :]).max(1)
    residual[scale <= 0] = np.inf
    return [int(o) for o in np.argsort(residual, kind="stable")[:3]]


def _small_theta(kind: RopeKind, values: np.ndarray, first: int, theta: np.ndarray) -> np.ndarray:
    """θ of the low-frequency pairs read from their angles (arccos / arcsin before the first turn)."""
    if not kind.scaled:
        return theta
    rows = values.shape[0]
    positions = first + np.arange(rows, dtype=np.float64)
    scale = float(np.max(np.abs(values[:, 0]))) if rows >= 8 else 1.0
    out = theta.copy()
    for k in np.flatnonzero(~(theta >= SMALL_THETA)):
        ratio = np.clip(values[:, k] / scale, -1.0, 1.0)
        angle = np.arccos(ratio) if kind.rest == 1.0 else np.arcsin(ratio)
        limit = 2.5 if kind.rest == 1.0 else 1.3
        falls = np.flatnonzero((np.diff(angle) < -1e-6) | (angle[1:] >= limit))
        end = int(falls[0]) + 1 if falls.size else rows     # rows before the first turn
        m = end - 1
        out[k] = angle[m] / positions[m] if positions[m] > 0 and angle[m] >= READABLE else np.nan
    return out


def derive(kind_name: str, got: np.ndarray) -> Iterator[RopeSettings]:
    """Settings read from ``got`` (base, rotary dims, layout, first position, then Llama 3's or LongRoPE's factors),
    the roundest first. Nothing is yielded where the data do not allow a reading."""
    kind = ROPE_KINDS[kind_name]
    rows, width = got.shape
    if rows < 3:
        return
    later: list[tuple[np.ndarray, RopeSettings, np.ndarray]] = []   # the scaling rules after every plain reading
    for layout, rotary in _layouts(kind, got):
        values = got[:, pair_columns(kind, width, layout, rotary)]                                # [R, P]
        pairs = values.shape[1]
        theta = (values[-1] - values[0]) / (rows - 1) if not kind.scaled else recurrence_theta(values)
        high = np.flatnonzero(theta >= HIGH_THETA)
        if high.size < 2:
            high = np.arange(min(2, pairs))
        if high.size < 2 or not np.all(theta[high] > 0):
            continue
        slope, intercept = np.polyfit(high.astype(np.float64), np.log(theta[high]), 1)
        if slope >= 0:
            continue
        head_dim = width if kind.laid_out else 2 * width
        linear = float(np.exp(-intercept))
        scalings: list[RopeScaling | None] = [None]
        if abs(linear - 1.0) > 1e-3:
            scalings += [RopeScaling("linear", factor=f) for f in round_candidates(linear, 1e-2)]
        read = round_candidates(float(np.exp(-slope * rotary / 2)), 2e-3)[:4]
        for base in [*read, *(b for b in COMMON_BASES if b not in read)]:
            for scaling in scalings:
                try:
                    plain = rope_settings(head_dim=head_dim, base=base, rotary_dim=rotary, layout=layout,
                                          scaling=scaling, max_position_embeddings=max(rows, 2048))
                except ValueError:
                    continue
                inv_freq = rope_parameters(plain.config, None, device="cpu")[0]                   # [P] float32
                for first in _offsets(kind, values[0], inv_freq, high):
                    at = rope_settings(head_dim=head_dim, base=base, rotary_dim=rotary, layout=layout,
                                       scaling=scaling, q_offset=first,
                                       max_position_embeddings=max(first + rows, 2048))
                    if base in read:   # a common base is only a reading for LongRoPE (it scales every pair)
                        yield at
                    if scaling is None:
                        later.append((base in read, values, at, _small_theta(kind, values, first, theta)))
    for is_read, values, at, measured in later:
        if is_read:
            yield from _llama3(values, at, measured)
    # LongRoPE's per-pair factors fit any base: the common bases first (Phi-3's 10000), factors ≥ 1 only
    for is_read, values, at, measured in sorted(later, key=lambda item: item[0]):
        yield from _longrope(values, at, measured)


def _ratio(s: RopeSettings, measured: np.ndarray) -> np.ndarray | None:
    """[P] θ / θ' of ``s``'s unscaled θ over the measured ones (None where a pair is unread or all agree)."""
    reference = rope_parameters(s.config, None, device="cpu")[0].double().numpy()                # [P]
    read = np.isfinite(measured)
    if not np.all(measured[read] > 0) or np.allclose(measured[read], reference[read], rtol=1e-4):
        return None
    return reference / measured                                                                  # NaN: unread


def _common(values: np.ndarray, s: RopeSettings) -> dict:
    return dict(head_dim=s.head_dim, base=s.base, rotary_dim=s.rotary_dim, layout=s.layout, q_offset=s.q_offset,
                max_position_embeddings=max(s.q_offset + values.shape[0], 2048))


def _llama3(values: np.ndarray, s: RopeSettings, measured: np.ndarray) -> Iterator[RopeSettings]:
    """Llama 3 at ``s``'s base and first position: the factor is the lowest pair's θ ratio; low and high frequency
    factors come from the smoothed band (smooth = (original·θ/2π − low) / (high − low), a line in θ)."""
    ratio = _ratio(s, measured)
    read = np.flatnonzero(np.isfinite(ratio)) if ratio is not None else np.array([], dtype=int)
    if not read.size or ratio[read[-1]] <= 1.0 + 1e-3:
        return
    reference = ratio * measured
    factor = float(ratio[read[-1]])     # the lowest readable pair: below the band every pair is θ / factor
    band = (ratio > 1.0 + 1e-4) & (ratio < factor * (1.0 - 1e-4))
    smooth = ((1.0 / ratio) - 1.0 / factor) / (1.0 - 1.0 / factor)                               # [P]
    for original in ORIGINALS:
        tried = []
        if band.sum() >= 2:
            a, b = np.polyfit(original * reference[band] / (2 * np.pi), smooth[band], 1)
            if a > 0:
                tried += [(lo, lo + 1.0 / a) for lo in round_candidates(-b / a, 1e-2)[:2]]
        for f in round_candidates(factor, 1e-2)[:2]:
            for low, high in [*tried, *LLAMA3_FACTORS]:
                try:
                    yield rope_settings(**_common(values, s), scaling=RopeScaling(
                        "llama3", factor=f, original_max_position_embeddings=original,
                        low_freq_factor=round(low, 6), high_freq_factor=round(high, 6)))
                except ValueError:
                    continue


def _longrope(values: np.ndarray, s: RopeSettings, measured: np.ndarray) -> Iterator[RopeSettings]:
    """LongRoPE at ``s``'s base: each pair's factor is its θ ratio (within the original context: short_factor)."""
    ratio = _ratio(s, measured)
    if ratio is None or not np.all(ratio >= 1.0 - 1e-6):   # every pair read, each factor ≥ 1
        return
    ext = tuple(float(x) for x in ratio.astype(np.float32))
    try:
        yield rope_settings(**_common(values, s), scaling=RopeScaling(
            "longrope", factor=1.0, original_max_position_embeddings=max(s.q_offset + values.shape[0], 2),
            short_factor=ext, long_factor=ext, attention_factor=1.0))
    except ValueError:
        return
