"""The sinusoidal absolute position encoding (Vaswani et al. 2017) and what it says about relative position.

PE[p, 2k] = sin(p · ω_k) and PE[p, 2k + 1] = cos(p · ω_k), with ω_k = base^(−2k / d_model):
one sin/cos pair per frequency, wavelengths from 2π up to 2π · base.

The dot product of two position vectors is
    PE_i · PE_j = Σ_k [sin(iω_k) sin(jω_k) + cos(iω_k) cos(jω_k)] = Σ_k cos((j − i) ω_k),
so the raw position-similarity matrix is *exactly* Toeplitz and symmetric: it depends on
|j − i| only (the computed matrix agrees up to floating-point rounding). That is the sense
in which an absolute encoding "contains" relative position. Once a head projects the
vectors (PE W_Q)(PE W_K)ᵀ, the cross-frequency terms no longer cancel and the scores
depend on the absolute positions too: :func:`projected_similarity` and
:func:`toeplitz_deviation` show by how much.

Pure torch; every function takes ``device=`` and refuses bad arguments with ValueError. At the end, the
encoding in words (what the Absolute vs relative page says beside each picture).
Sign convention: relative position = key index − query index (j − i).
"""
from __future__ import annotations

import math
import numbers
from dataclasses import dataclass
from functools import lru_cache

import torch

from relviz._checks import check_bool, check_int, check_tensor, resolve_device

__all__ = [
    "MAX_POSITIONS",
    "sinusoidal_frequencies",
    "sinusoidal_encoding",
    "tensor2tensor_timing_signal",
    "sinusoidal_similarity",
    "sinusoidal_similarity_per_offset",
    "projected_similarity",
    "diagonal_range",
    "toeplitz_deviation",
    "ShiftedSequence",
    "shift_sequence",
    "shift_words",
    "deviation_words",
]

#: Largest number of positions accepted (an L × L similarity at this size is 4 TB: the cell check bites first).
MAX_POSITIONS = 2**20
#: Largest d_model accepted.
MAX_D_MODEL = 2**16
#: Largest similarity matrix (cells) built in one call.
MAX_CELLS = 2**28


def _check_base(base: object) -> float:
    if isinstance(base, bool) or not isinstance(base, numbers.Real) or not math.isfinite(float(base)) \
            or float(base) <= 1.0:
        raise ValueError(f"base must be a finite number greater than 1 (the paper uses 10000); got {base!r}")
    return float(base)


def _check_d_model(d_model: object) -> int:
    d_model = check_int("d_model", d_model, minimum=2, maximum=MAX_D_MODEL)
    if d_model % 2:
        raise ValueError(f"d_model must be even (one sin/cos pair per frequency); got {d_model}")
    return d_model


def _check_positions(num_positions: object) -> int:
    return check_int("num_positions", num_positions, minimum=1, maximum=MAX_POSITIONS)


def sinusoidal_frequencies(d_model: int, *, base: float = 10000.0,
                           device: torch.device | str | None = None) -> torch.Tensor:
    """ω_k = base^(−2k / d_model) for k = 0 .. d_model/2 − 1, float64 [d_model // 2] (angular, rad/position).

    The wavelength of pair k is 2π / ω_k: from 2π (k = 0) up to nearly 2π · base.
    """
    d_model = _check_d_model(d_model)
    base = _check_base(base)
    device = resolve_device(device)
    k = torch.arange(d_model // 2, device=device, dtype=torch.float64)
    return torch.exp(-(2.0 * k / d_model) * math.log(base))


def sinusoidal_encoding(num_positions: int, d_model: int, *, base: float = 10000.0,
                        interleaved: bool = True, dtype: torch.dtype = torch.float32,
                        device: torch.device | str | None = None, float32_arithmetic: bool = False) -> torch.Tensor:
    """The sinusoidal position encoding, [num_positions, d_model] in ``dtype``.

    interleaved=True (the paper, and most PyTorch code): dims 2k, 2k + 1 hold sin, cos of
    frequency k. interleaved=False: all sines, then all cosines — the concatenated layout of
    tensor2tensor, but still the paper's frequencies base^(−2k/d_model); tensor2tensor's own
    frequencies are 1e4^(−k/(d_model/2 − 1)): see :func:`tensor2tensor_timing_signal`.
    Angles p · ω_k are computed in float64 and rounded once to ``dtype``, so long positions
    stay accurate (a float32 angle at p = 10⁵ would be off by ~0.01 rad). ``float32_arithmetic``:
    as transformers' CTRL computes them instead, every step in float32 (ω_k = 1 / base^(2k/d), then
    p · ω_k): up to ~4e-5 away from the float64 values at 512 positions.
    """
    num_positions = _check_positions(num_positions)
    interleaved = check_bool("interleaved", interleaved)
    float32_arithmetic = check_bool("float32_arithmetic", float32_arithmetic)
    if not isinstance(dtype, torch.dtype) or not dtype.is_floating_point:
        raise ValueError(f"dtype must be a floating-point torch dtype; got {dtype!r}")
    if float32_arithmetic:
        d_model, base = _check_d_model(d_model), _check_base(base)
        k = torch.arange(d_model // 2, device=resolve_device(device), dtype=torch.int64).float()
        omega = 1 / torch.pow(base, (2 * k) / d_model)                                # float32 [d/2]
        positions = torch.arange(num_positions, device=omega.device, dtype=torch.int64).float()
    else:
        omega = sinusoidal_frequencies(d_model, base=base, device=device)
        positions = torch.arange(num_positions, device=omega.device, dtype=torch.float64)
    angles = positions[:, None] * omega[None, :]                      # [P, d/2]
    if interleaved:
        pe = torch.stack([angles.sin(), angles.cos()], dim=-1).reshape(num_positions, -1)
    else:
        pe = torch.cat([angles.sin(), angles.cos()], dim=-1)
    return pe.to(dtype)


def tensor2tensor_timing_signal(length: int, channels: int, *, min_timescale: float = 1.0,
                                max_timescale: float = 1.0e4, dtype: torch.dtype = torch.float32,
                                device: torch.device | str | None = None,
                                float32_arithmetic: bool = False) -> torch.Tensor:
    """tensor2tensor's ``common_attention.get_timing_signal_1d``: [length, channels] in ``dtype``.

    num_timescales = channels // 2; frequency k is min_timescale · (max/min)^(−k / (num_timescales − 1)),
    so with the defaults 1e4^(−k/(channels/2 − 1)): the lowest frequency is exactly 1e−4, where the
    paper's base^(−2k/d) stops one step short. Output concat(sin, cos), plus a zero column when
    channels is odd. Angles in float64, rounded once to ``dtype``; ``float32_arithmetic``: every step in
    float32, as tensor2tensor and transformers' XGLM compute it (up to ~1.5e-4 away at 2,050 positions).
    """
    length = _check_positions(length)
    channels = check_int("channels", channels, minimum=2, maximum=MAX_D_MODEL)
    for name, value in (("min_timescale", min_timescale), ("max_timescale", max_timescale)):
        if isinstance(value, bool) or not isinstance(value, numbers.Real) or not math.isfinite(float(value)) \
                or float(value) <= 0:
            raise ValueError(f"{name} must be a finite positive number; got {value!r}")
    if float(max_timescale) < float(min_timescale):
        raise ValueError(f"max_timescale must be at least min_timescale = {min_timescale}; got {max_timescale}")
    if not isinstance(dtype, torch.dtype) or not dtype.is_floating_point:
        raise ValueError(f"dtype must be a floating-point torch dtype; got {dtype!r}")
    device = resolve_device(device)
    num_timescales = channels // 2
    increment = math.log(float(max_timescale) / float(min_timescale)) / max(num_timescales - 1, 1)
    wide = torch.float32 if check_bool("float32_arithmetic", float32_arithmetic) else torch.float64
    k = torch.arange(num_timescales, device=device, dtype=torch.int64).to(wide)
    inv_timescales = float(min_timescale) * torch.exp(k * -increment)             # [channels // 2]
    angles = torch.arange(length, device=device, dtype=torch.int64).to(wide)[:, None] * inv_timescales[None, :]
    signal = torch.cat([angles.sin(), angles.cos()], dim=-1)                     # [length, 2 · (channels // 2)]
    if channels % 2:
        signal = torch.nn.functional.pad(signal, (0, 1))
    return signal.to(dtype)


def sinusoidal_similarity(num_positions: int, d_model: int, *, base: float = 10000.0,
                          normalize: bool = False, dtype: torch.dtype = torch.float32,
                          device: torch.device | str | None = None) -> torch.Tensor:
    """PE_i · PE_j for every pair of positions, [num_positions, num_positions] in ``dtype``.

    Computed as the actual matrix product of the encoding (not from the closed form), so a
    page can show the Toeplitz structure emerging. Exactly Σ_k cos((j − i) ω_k) in exact
    arithmetic; in float32 the two agree to about 1e-6 · d_model. normalize=True divides by
    d_model / 2 (the diagonal), giving cosine similarities in [−1, 1].
    """
    num_positions = _check_positions(num_positions)
    normalize = check_bool("normalize", normalize)
    if num_positions * num_positions > MAX_CELLS:
        raise ValueError(f"num_positions² must be at most {MAX_CELLS} cells; got {num_positions}²")
    pe = sinusoidal_encoding(num_positions, d_model, base=base, dtype=dtype, device=device)
    similarity = pe @ pe.T
    return similarity / (d_model / 2) if normalize else similarity


def sinusoidal_similarity_per_offset(offsets: torch.Tensor | int, d_model: int, *, base: float = 10000.0,
                                     normalize: bool = False) -> torch.Tensor:
    """The closed form Σ_k cos(n · ω_k) for each offset n = j − i, float64, shaped like ``offsets``.

    Even in n: the raw similarity cannot tell a key 5 positions back from one 5 ahead.
    """
    normalize = check_bool("normalize", normalize)
    if not isinstance(offsets, torch.Tensor):
        offsets = torch.as_tensor(check_int("offsets", offsets), device="cpu")
    if offsets.is_complex() or offsets.dtype == torch.bool:
        raise ValueError(f"offsets must be a real tensor; got dtype {offsets.dtype}")
    omega = sinusoidal_frequencies(d_model, base=base, device=offsets.device)
    total = torch.cos(offsets.to(torch.float64)[..., None] * omega).sum(-1)
    return total / (d_model / 2) if normalize else total


def projected_similarity(num_positions: int, d_model: int, *, d_head: int = 64, seed: int = 0,
                         base: float = 10000.0, device: torch.device | str | None = None) -> torch.Tensor:
    """(PE W_Q)(PE W_K)ᵀ / sqrt(d_head) with random Gaussian W_Q, W_K [d_model, d_head]: float32 [P, P].

    What one attention head of an untrained model sees of the positions alone. Unlike the
    raw dot product it is not Toeplitz: the projections mix frequencies, so the score of a
    pair depends on where it sits, not only on j − i. W entries have variance 1 / d_model.
    """
    num_positions = _check_positions(num_positions)
    d_model = _check_d_model(d_model)
    d_head = check_int("d_head", d_head, minimum=1, maximum=MAX_D_MODEL)
    seed = check_int("seed", seed, minimum=0, maximum=2**63 - 1)
    if num_positions * num_positions > MAX_CELLS:
        raise ValueError(f"num_positions² must be at most {MAX_CELLS} cells; got {num_positions}²")
    pe = sinusoidal_encoding(num_positions, d_model, base=base, device=device)
    generator = torch.Generator(device="cpu").manual_seed(seed)
    w = torch.randn(2, d_model, d_head, generator=generator) / math.sqrt(d_model)
    w = w.to(pe.device)
    return (pe @ w[0]) @ (pe @ w[1]).T / math.sqrt(d_head)


def diagonal_range(matrix: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The smallest and largest value along each diagonal: float64 ``(lo, hi)``, [rows + cols − 1].

    Entry t is the diagonal j − i = t − (rows − 1). Equal for a Toeplitz matrix; the gap is how
    far a matrix is from depending on j − i only. Each row is padded by rows − 1 cells of ±inf on
    both sides, and a view with row stride (width + 1) lines the diagonals up as columns: a
    reduction over rows, five times faster than a scatter over the cells at 512 × 512.
    """
    matrix = check_tensor("matrix", matrix, ndim=2)
    rows, cols = matrix.shape
    bins = max(rows + cols - 1, 0)
    if rows == 0 or cols == 0:
        return (torch.full((bins,), math.inf, dtype=torch.float64, device=matrix.device),
                torch.full((bins,), -math.inf, dtype=torch.float64, device=matrix.device))
    values = matrix.to(torch.float64)

    def per_diagonal(fill: float, reduce) -> torch.Tensor:
        padded = torch.nn.functional.pad(values, (rows - 1, rows - 1), value=fill)   # [R, C + 2R − 2]
        # aligned[i, t] = padded[i, t + i] = values[i, t + i − (R − 1)]: cell (i, j) with j − i = t − (R − 1)
        aligned = padded.as_strided((rows, bins), (padded.stride(0) + 1, 1))        # [R, R + C − 1]
        return reduce(aligned, dim=0)
    return per_diagonal(math.inf, torch.amin), per_diagonal(-math.inf, torch.amax)


def toeplitz_deviation(matrix: torch.Tensor) -> float:
    """How far a square-or-not matrix is from Toeplitz: the largest (max − min) along any diagonal.

    0 for a matrix whose value depends only on j − i.
    """
    matrix = check_tensor("matrix", matrix, ndim=2)
    if matrix.numel() == 0:
        return 0.0
    lo, hi = diagonal_range(matrix)
    return float((hi - lo).max())


@dataclass(frozen=True)
class ShiftedSequence:
    """A whole sequence moved ``shift`` positions along (the same tokens, starting at position s instead of 0):
    every absolute vector changes, the relative structure does not. Arrays are float64 on the CPU."""

    shift: int
    #: [L] ‖PE(i + s) − PE(i)‖: how far each position's own vector moved (never 0 for s > 0)
    change: torch.Tensor
    #: [2L − 1] the offsets j − i of the diagonals below
    offsets: torch.Tensor
    #: [2L − 1] each diagonal's min and max of PE_i · PE_j / (d_model / 2), before and after the shift
    before: tuple[torch.Tensor, torch.Tensor]
    after: tuple[torch.Tensor, torch.Tensor]
    #: the largest |after − before| over every pair (i, j): rounding only
    largest_difference: float


def shift_sequence(length: int, d_model: int, shift: int, *, base: float = 10000.0) -> ShiftedSequence:
    """What shifting the whole sequence by ``shift`` positions does to sinusoidal encodings (float64).

    The vectors are computed at positions 0…L−1 and s…s+L−1 and compared as they are: their distances, and
    their dot products PE_i · PE_j per diagonal j − i (an L × L product: at most 512² cells on the page), so
    the picture shows the invariance rather than assuming it."""
    length = check_int("length", length, minimum=1, maximum=4096)
    shift = check_int("shift", shift, minimum=0, maximum=MAX_POSITIONS - length)
    before, sim_before, before_range = _unshifted(length, d_model, base)
    after = sinusoidal_encoding(length + shift, d_model, base=base, dtype=torch.float64,
                                device="cpu")[shift:]                        # [L, d]
    sim_after = after @ after.T / (d_model / 2)                              # [L, L]
    return ShiftedSequence(shift=shift, change=(after - before).norm(dim=1),
                           offsets=torch.arange(-(length - 1), length),
                           before=before_range, after=diagonal_range(sim_after),
                           largest_difference=float((sim_after - sim_before).abs().max()))


@lru_cache(maxsize=4)
def _unshifted(length: int, d_model: int, base: float,
               ) -> tuple[torch.Tensor, torch.Tensor, tuple[torch.Tensor, torch.Tensor]]:
    """The unshifted side of :func:`shift_sequence`, the same for every shift (a slider move changes only
    the shift): PE at 0…L−1 [L, d], its dot products / (d/2) [L, L] and their range per diagonal."""
    before = sinusoidal_encoding(length, d_model, base=base, dtype=torch.float64, device="cpu")
    similarity = before @ before.T / (d_model / 2)
    return before, similarity, diagonal_range(similarity)


# ---------------------------------------------------------------------------------------
# The sinusoidal encoding in words (the Absolute vs relative page, a notebook)

#: What the encoding's matrix PE[p, d] holds.
ENCODING_WORDS = (
    "Dimensions 2k and 2k + 1 hold sin and cos of p·ω_k with ω_k = 10000^(−2k/d_model): the first pairs turn fast "
    "(wavelength 2π), later ones ever slower (up to 2π·10000). Each row is one position's vector — a different "
    "vector for every position.")

#: Why the raw dot products PE_i · PE_j depend on j − i alone.
DOT_PRODUCT_WORDS = (
    "Shown divided by d_model / 2. sin(a)sin(b) + cos(a)cos(b) = cos(a − b), so PE_i · PE_j = Σ_k cos((j − i)·ω_k): "
    "constant along every diagonal, like the relative matrix beside it. Absolute vectors, relative dot products.")

#: Why a random head's projections lose that.
PROJECTED_WORDS = (
    "(PE_i W_Q)·(PE_j W_K) / √64 with random Gaussian W_Q, W_K. The projections mix frequencies, so the "
    "sin·sin + cos·cos pairs no longer combine into cos((j − i)ω): the score depends on where the pair sits, not "
    "only on j − i. A trained head can learn to keep the relative part, but nothing forces it to.")

#: What a relative scheme hands the score instead.
RELATIVE_WORDS = (
    "What a relative scheme gives the score directly: the offset, the same along each diagonal (a Toeplitz "
    "matrix). Shaw et al. look it up in a table, T5 in buckets, ALiBi turns it into a penalty (below).")

#: Absolute against relative, and where the sinusoidal encoding sits between them.
ABSOLUTE_VS_RELATIVE = (
    "An **absolute** encoding gives every position its own vector and adds it to the token: the model must "
    "*learn* to compare positions. A **relative** scheme hands the attention score the offset j − i directly. The "
    "sinusoidal encoding sits in between: its vectors are absolute, but their dot products depend only on the "
    "offset.")

#: What the similarity curve by offset shows, and why relative schemes do not rely on it.
CURVE_WORDS = (
    "The curve is **symmetric**: the raw similarity cannot tell a key 5 positions back from one 5 ahead, and it is "
    "**not monotone** — it ripples, so it is a poor distance measure far away. The model only sees position "
    "through learned projections of token + PE, which is why relative schemes put j − i into the score "
    "explicitly.")


def shift_words(shift: int) -> str:
    """What moving every token ``shift`` positions along does: the vectors move, the scores by j − i do not."""
    return (f"**Move every token {shift} positions along.** Each position's own vector PE(i) becomes "
            f"PE(i + {shift}): left, how far each one moved. A model that reads positions from these vectors sees "
            "a different input. Right: the dot products by offset j − i, before (line) and after (dots): the "
            "relative structure, what a relative scheme gives the score, does not move.")


def deviation_words(deviation: float, *, projected: bool) -> str:
    """Whether the similarity depends on j − i alone: ``deviation`` is the largest spread along a diagonal."""
    if projected:
        return (f"No: along one diagonal (same j − i) the random head's score varies by up to {deviation:.3g}. The "
                "orange band on the left is that spread.")
    return f"Yes: the largest spread along any diagonal is {deviation:.1e} (float32 rounding)."
