"""Rotary position embedding (RoPE) and its context-extension scalings, computed exactly.

RoPE (Su et al. 2021, "RoFormer: Enhanced Transformer with Rotary Position Embedding") rotates
dimension pair i of q and k at position m by the angle m·θ_i, θ_i = base^(−2i/d), so q_m · k_n
depends on n − m only. The scaling rules stretch it to longer contexts; their exact arithmetic
here follows Hugging Face transformers' ``modeling_rope_utils.py`` (``ROPE_INIT_FUNCTIONS``) and
its rotary embedding modules (e.g. ``LlamaRotaryEmbedding``), operation for operation, so the
float32 results are bit-identical:

- ``default``  θ_i = base^(−2i/d) (Su et al.);
- ``linear``   position interpolation (Chen et al. 2023): θ_i / factor;
- ``dynamic``  dynamic NTK (bloc97/emozilla): base raised with the current sequence length once
  it exceeds ``max_position_embeddings``;
- ``yarn``     YaRN (Peng et al. 2023): per dimension a ramp between interpolated and original
  θ_i set by beta_fast/beta_slow on the number of turns in the original context, and an
  attention factor 0.1·ln(factor) + 1 (or DeepSeek's mscale/mscale_all_dim ratio);
- ``llama3``   Llama 3.1: keep high frequencies, divide low ones by factor, smooth in between;
- ``longrope`` LongRoPE (Ding et al. 2024, Phi-3): wavelength × per-dimension short or long
  factor, attention factor sqrt(1 + ln(scale)/ln(original_max_position_embeddings)).

Layout: Hugging Face's rotate_half pairs (i, i + r/2) of the first r = rotary_dim dimensions;
the rest of the head is not rotated (partial rotary). Sign convention: offset = j − i = key
position − query position.
"""
from __future__ import annotations

import json
import math
import numbers
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

import torch

from relviz._checks import check_int, check_tensor, resolve_device
from relviz.positions import expand_toeplitz

__all__ = [
    "ROPE_TYPES", "RopeConfig", "RopeScaling", "rope_config_from_hf", "rope_parameters", "rope_inv_freq",
    "rope_attention_scaling", "wavelengths", "turns_in_context", "rotate", "score_per_offset",
    "score_matrix", "decay_bound", "measured_decay", "yarn_correction_range", "random_content",
    "rotated_scores", "ContentScores", "content_scores", "decay_distances", "DecayCurves", "decay_curves",
]

ROPE_TYPES = ("default", "linear", "dynamic", "yarn", "llama3", "longrope")

MAX_HEAD_DIM = 4096
MAX_POSITIONS = 1 << 24


def _check_float(name: str, value: object, *, minimum: float | None = None, above: float | None = None,
                 maximum: float | None = None) -> float:
    """A finite real number within bounds, or ValueError naming ``name`` and the allowed range."""
    parts = []
    if above is not None:
        parts.append(f"> {above:g}")
    if minimum is not None:
        parts.append(f">= {minimum:g}")
    if maximum is not None:
        parts.append(f"<= {maximum:g}")
    allowed = f"a finite number {' and '.join(parts)}".rstrip()
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not math.isfinite(float(value)):
        raise ValueError(f"{name} must be {allowed}; got {value!r}")
    value = float(value)
    if (above is not None and value <= above) or (minimum is not None and value < minimum) \
            or (maximum is not None and value > maximum):
        raise ValueError(f"{name} must be {allowed}; got {value:g}")
    return value


@dataclass(frozen=True)
class RopeScaling:
    """A scaling rule and its parameters (the fields of a config's ``rope_scaling``).

    ``None`` means "absent from the config": the rule then uses transformers' default for it.
    """

    rope_type: str = "default"
    factor: float | None = None
    original_max_position_embeddings: int | None = None
    attention_factor: float | None = None
    beta_fast: float | None = None      # yarn (default 32)
    beta_slow: float | None = None      # yarn (default 1)
    mscale: float | None = None         # yarn, DeepSeek style
    mscale_all_dim: float | None = None
    truncate: bool | None = None        # yarn: floor/ceil the correction range (default True)
    low_freq_factor: float | None = None   # llama3
    high_freq_factor: float | None = None  # llama3
    short_factor: tuple[float, ...] | None = None  # longrope, one per rotary pair
    long_factor: tuple[float, ...] | None = None

    def __post_init__(self) -> None:
        if self.rope_type not in ROPE_TYPES:
            raise ValueError(f"rope_type must be one of {', '.join(ROPE_TYPES)}; got {self.rope_type!r}")
        needs_factor = self.rope_type in ("linear", "dynamic", "llama3") or \
            (self.rope_type == "yarn" and self.factor is None and self.original_max_position_embeddings is None)
        if needs_factor and self.factor is None:
            raise ValueError(f"factor is required for rope_type {self.rope_type!r} (a number >= 1)")
        if self.factor is not None:
            object.__setattr__(self, "factor", _check_float("factor", self.factor, above=0.0, maximum=1e6))
        if self.rope_type in ("yarn", "llama3", "longrope") and self.original_max_position_embeddings is not None:
            check_int("original_max_position_embeddings", self.original_max_position_embeddings,
                      minimum=1, maximum=MAX_POSITIONS)
        if self.attention_factor is not None:
            object.__setattr__(self, "attention_factor",
                               _check_float("attention_factor", self.attention_factor, above=0.0, maximum=1e3))
        for name in ("beta_fast", "beta_slow"):
            value = getattr(self, name)
            if value is not None:
                object.__setattr__(self, name, _check_float(name, value, above=0.0, maximum=1e6))
        for name in ("mscale", "mscale_all_dim"):
            value = getattr(self, name)
            if value is not None:
                object.__setattr__(self, name, _check_float(name, value, minimum=0.0, maximum=1e3))
        if self.truncate is not None and not isinstance(self.truncate, bool):
            raise ValueError(f"truncate must be True or False; got {self.truncate!r}")
        if self.rope_type == "llama3":
            for name in ("low_freq_factor", "high_freq_factor"):
                if getattr(self, name) is None:
                    raise ValueError(f"{name} is required for rope_type 'llama3' (a number > 0)")
                object.__setattr__(self, name, _check_float(name, getattr(self, name), above=0.0, maximum=1e6))
            if self.high_freq_factor < self.low_freq_factor:   # equal: no smooth band (Llama 4 Scout: 1 and 1)
                raise ValueError(f"high_freq_factor must be ≥ low_freq_factor ({self.low_freq_factor:g}); "
                                 f"got {self.high_freq_factor:g}")
            if self.original_max_position_embeddings is None:
                raise ValueError("original_max_position_embeddings is required for rope_type 'llama3' "
                                 f"(an integer from 1 to {MAX_POSITIONS})")
        if self.rope_type == "longrope":
            for name in ("short_factor", "long_factor"):
                values = getattr(self, name)
                if values is None or isinstance(values, (str, bytes)) or not isinstance(values, Sequence) \
                        or not values:
                    raise ValueError(f"{name} is required for rope_type 'longrope': a list of positive "
                                     f"numbers, one per rotary pair; got {values!r}")
                object.__setattr__(self, name, tuple(
                    _check_float(f"{name}[{k}]", v, above=0.0, maximum=1e6) for k, v in enumerate(values)))


@dataclass(frozen=True)
class RopeConfig:
    """The position-related settings of a RoPE attention head.

    ``max_position_embeddings`` matters to dynamic NTK (where scaling starts) and to yarn/longrope
    (their default factor and original length).
    """

    head_dim: int = 128
    base: float = 10000.0
    partial_rotary_factor: float = 1.0
    max_position_embeddings: int = 4096
    scaling: RopeScaling = field(default_factory=RopeScaling)

    def __post_init__(self) -> None:
        check_int("head_dim", self.head_dim, minimum=2, maximum=MAX_HEAD_DIM)
        if self.head_dim % 2:
            raise ValueError(f"head_dim must be even (RoPE rotates pairs of dimensions); got {self.head_dim}")
        object.__setattr__(self, "base", _check_float("base", self.base, above=1.0, maximum=1e12))
        object.__setattr__(self, "partial_rotary_factor",
                           _check_float("partial_rotary_factor", self.partial_rotary_factor, above=0.0, maximum=1.0))
        check_int("max_position_embeddings", self.max_position_embeddings, minimum=1, maximum=MAX_POSITIONS)
        if not isinstance(self.scaling, RopeScaling):
            raise ValueError(f"scaling must be a RopeScaling; got {type(self.scaling).__name__}")
        if self.rotary_dim < 2:
            raise ValueError(f"partial_rotary_factor × head_dim must leave at least 2 rotary dimensions; "
                             f"got int({self.partial_rotary_factor:g} × {self.head_dim}) = {self.rotary_dim}")
        if self.scaling.rope_type == "dynamic" and self.rotary_dim < 4:
            raise ValueError("dynamic NTK raises the base to the power d/(d − 2): rotary_dim must be >= 4; "
                             f"got {self.rotary_dim}")
        if self.scaling.rope_type == "longrope":
            for name in ("short_factor", "long_factor"):
                if len(getattr(self.scaling, name)) != self.pairs:
                    raise ValueError(f"{name} must have {self.pairs} entries "
                                     f"(one per rotary pair); got {len(getattr(self.scaling, name))}")

    @property
    def rotary_dim(self) -> int:
        """How many dimensions of the head rotate (transformers: int(head_dim × partial_rotary_factor))."""
        return int(self.head_dim * self.partial_rotary_factor)

    @property
    def pairs(self) -> int:
        """How many pairs rotate: len(arange(0, rotary_dim, 2)) (an odd rotary_dim rounds up, as in HF)."""
        return (self.rotary_dim + 1) // 2

    @property
    def original_max_position_embeddings(self) -> int:
        """The pre-training context: the scaling's original length, else max_position_embeddings."""
        return self.scaling.original_max_position_embeddings or self.max_position_embeddings

    @property
    def scaled_from(self) -> int | None:
        """The original context a scaling stretches (what the figures mark), or None without a scaling."""
        return self.original_max_position_embeddings if self.scaling.rope_type != "default" else None

    def with_scaling(self, **changes: object) -> RopeConfig:
        return replace(self, scaling=replace(self.scaling, **changes))


def rope_config_from_hf(config: Mapping[str, object]) -> RopeConfig:
    """Read a Hugging Face config.json (as a dict) into a RopeConfig, as transformers standardises it.

    Reads ``rope_theta`` (or ``rope_parameters``/``rope_scaling`` holding it), ``partial_rotary_factor``,
    ``head_dim`` (else hidden_size // num_attention_heads), GPT-NeoX's ``rotary_pct`` (default 0.25)
    and ``rotary_emb_base`` and the scaling dict; a top-level
    ``original_max_position_embeddings`` (Phi-3) wins over the one inside the dict, as in transformers.
    """
    if not isinstance(config, Mapping):
        raise ValueError(f"config must be a mapping (a parsed config.json); got {type(config).__name__}")
    scaling = config.get("rope_parameters") or config.get("rope_scaling") or {}
    if not isinstance(scaling, Mapping):
        raise ValueError(f"rope_scaling must be a mapping or null; got {scaling!r}")
    if any(isinstance(v, Mapping) for v in scaling.values()):
        raise ValueError("rope_parameters nested per layer type are not supported (one RoPE per model only)")
    scaling = dict(scaling)
    rope_type = scaling.pop("rope_type", None) or scaling.pop("type", None) or "default"
    scaling.pop("type", None)
    if rope_type == "su":  # Phi-3's first name for LongRoPE; transformers' Phi3Config reads it as longrope
        rope_type = "longrope"
    base = scaling.pop("rope_theta", None) or config.get("rope_theta") or config.get("rotary_emb_base") or 10000.0
    partial = (scaling.pop("partial_rotary_factor", None) or config.get("partial_rotary_factor")
               or config.get("rotary_pct") or 1.0)
    heads = config.get("num_attention_heads")
    head_dim = config.get("head_dim") or (config["hidden_size"] // heads if heads else None)
    if head_dim is None:
        raise ValueError("config has neither head_dim nor hidden_size and num_attention_heads")
    max_positions = config.get("max_position_embeddings", 2048)
    if rope_type in ("yarn", "llama3", "longrope"):
        if config.get("original_max_position_embeddings") is not None:
            scaling["original_max_position_embeddings"] = config["original_max_position_embeddings"]
        scaling.setdefault("original_max_position_embeddings", max_positions)
    known = {f for f in RopeScaling.__dataclass_fields__} - {"rope_type"}
    if rope_type == "default":
        scaling = {}
    unknown = sorted(set(scaling) - known)
    if unknown:
        raise ValueError(f"rope_scaling has fields relviz does not know for {rope_type!r}: {', '.join(unknown)}")
    return RopeConfig(head_dim=head_dim, base=base, partial_rotary_factor=partial,
                      max_position_embeddings=max_positions, scaling=RopeScaling(rope_type=rope_type, **scaling))


# ---------------------------------------------------------------------------------------
# Frequencies and attention scaling, exactly as transformers computes them


def _exponents(dim: int, device: torch.device) -> torch.Tensor:
    """[dim/2]: 2i/dim in float32, as transformers builds it (arange(0, dim, 2) / dim)."""
    return torch.arange(0, dim, 2, dtype=torch.int64).to(device=device, dtype=torch.float) / dim


def _get_mscale(scale: float, mscale: float = 1.0) -> float:
    if scale <= 1:
        return 1.0
    return 0.1 * mscale * math.log(scale) + 1.0


def yarn_correction_range(config: RopeConfig) -> tuple[float, float]:
    """YaRN's ramp [low, high] in pair index: pairs below low keep θ_i, above high are interpolated.

    A pair making beta_fast turns in the original context sits at low, beta_slow turns at high.
    """
    s = config.scaling
    dim, base = config.rotary_dim, config.base
    beta_fast = s.beta_fast or 32
    beta_slow = s.beta_slow or 1
    original = config.original_max_position_embeddings

    def correction_dim(turns: float) -> float:
        return (dim * math.log(original / (turns * 2 * math.pi))) / (2 * math.log(base))

    low, high = correction_dim(beta_fast), correction_dim(beta_slow)
    if s.truncate is None or s.truncate:
        low, high = math.floor(low), math.ceil(high)
    return max(low, 0), min(high, dim - 1)


def rope_parameters(config: RopeConfig, seq_len: int | None = None, *,
                    device: torch.device | str | None = None) -> tuple[torch.Tensor, float]:
    """(inv_freq [rotary_dim/2] float32, attention scaling) for a forward pass over ``seq_len`` positions.

    ``seq_len`` (positions 0..seq_len − 1) matters to ``dynamic`` (a fresh module recomputes the
    base once seq_len > max_position_embeddings) and ``longrope`` (long factors beyond the original
    context); None means "within the original context". The attention scaling multiplies cos and
    sin, so it multiplies every q·k logit by its square.
    """
    if not isinstance(config, RopeConfig):
        raise ValueError(f"config must be a RopeConfig; got {type(config).__name__}")
    if seq_len is not None:
        seq_len = check_int("seq_len", seq_len, minimum=1, maximum=MAX_POSITIONS)
    device = resolve_device(device)
    s = config.scaling
    dim, base = config.rotary_dim, config.base
    max_positions = config.max_position_embeddings

    if s.rope_type == "default":
        return 1.0 / (base ** _exponents(dim, device)), 1.0
    if s.rope_type == "linear":
        inv_freq = 1.0 / (base ** _exponents(dim, device))
        inv_freq /= s.factor
        return inv_freq, 1.0
    if s.rope_type == "dynamic":
        if seq_len is None or seq_len <= max_positions:
            # At init transformers uses seq_len = max_position_embeddings in Python floats.
            scaled = base * ((s.factor * max_positions / max_positions) - (s.factor - 1)) ** (dim / (dim - 2))
        else:
            # A forward past the cached length recomputes with seq_len a 0-dim int64 tensor: float32 math.
            length = torch.maximum(torch.tensor(seq_len, device=device),
                                   torch.tensor(max_positions, device=device))
            scaled = base * ((s.factor * length / max_positions) - (s.factor - 1)) ** (dim / (dim - 2))
        return 1.0 / (scaled ** _exponents(dim, device)), 1.0
    if s.rope_type == "yarn":
        factor = s.factor if s.factor is not None else max_positions / config.original_max_position_embeddings
        if s.attention_factor is not None:
            attention = s.attention_factor
        elif s.mscale and s.mscale_all_dim:
            attention = float(_get_mscale(factor, s.mscale) / _get_mscale(factor, s.mscale_all_dim))
        else:
            attention = _get_mscale(factor)
        pos_freqs = base ** (torch.arange(0, dim, 2).to(device=device, dtype=torch.float) / dim)
        extrapolation = 1.0 / pos_freqs
        interpolation = 1.0 / (factor * pos_freqs)
        low, high = yarn_correction_range(config)
        if low == high:
            high += 0.001  # transformers' guard against a zero-width ramp
        ramp = torch.clamp((torch.arange(dim // 2, dtype=torch.float32) - low) / (high - low), 0, 1)
        extrapolation_factor = 1 - ramp.to(device=device, dtype=torch.float)
        inv_freq = interpolation * (1 - extrapolation_factor) + extrapolation * extrapolation_factor
        return inv_freq, attention
    if s.rope_type == "llama3":
        inv_freq = 1.0 / (base ** _exponents(dim, device))
        old_context = config.original_max_position_embeddings
        low_wavelen = old_context / s.low_freq_factor
        high_wavelen = old_context / s.high_freq_factor
        wavelen = 2 * math.pi / inv_freq
        scaled = torch.where(wavelen > low_wavelen, inv_freq / s.factor, inv_freq)
        smooth = (old_context / wavelen - s.low_freq_factor) / (s.high_freq_factor - s.low_freq_factor)
        smoothed = (1 - smooth) * scaled / s.factor + smooth * scaled
        medium = ~(wavelen < high_wavelen) * ~(wavelen > low_wavelen)
        return torch.where(medium, smoothed, scaled), 1.0
    # longrope
    original = config.original_max_position_embeddings
    factor = s.factor if s.factor is not None else max_positions / original
    if s.attention_factor is not None:
        attention = s.attention_factor
    elif factor <= 1.0:
        attention = 1.0
    else:
        attention = math.sqrt(1 + math.log(factor) / math.log(original))
    chosen = s.long_factor if seq_len is not None and seq_len > original else s.short_factor
    ext = torch.tensor(chosen, dtype=torch.float32, device=device)
    shape = torch.arange(0, dim, 2, dtype=torch.int64, device=device).float() / dim
    return 1.0 / (ext * base ** shape), attention


def rope_inv_freq(config: RopeConfig, seq_len: int | None = None, *,
                  device: torch.device | str | None = None) -> torch.Tensor:
    """θ_i [rotary_dim/2] (radians per position) under the config's scaling rule."""
    return rope_parameters(config, seq_len, device=device)[0]


def rope_attention_scaling(config: RopeConfig, seq_len: int | None = None) -> float:
    """The factor on cos and sin (yarn, longrope; 1 otherwise): logits scale by its square."""
    return rope_parameters(config, seq_len, device="cpu")[1]


def unscaled(config: RopeConfig) -> RopeConfig:
    """The same head with plain RoPE (the reference the scalings are drawn against)."""
    return replace(config, scaling=RopeScaling())


def wavelengths(inv_freq: torch.Tensor) -> torch.Tensor:
    """[P] positions per full turn of each pair: 2π / θ_i."""
    inv_freq = check_tensor("inv_freq", inv_freq, ndim=1, floating=True)
    return 2 * math.pi / inv_freq


def turns_in_context(inv_freq: torch.Tensor, length: int) -> torch.Tensor:
    """[P] how many full turns each pair makes over positions 0..length − 1 (≥ 1: the pair wraps)."""
    length = check_int("length", length, minimum=1, maximum=MAX_POSITIONS)
    inv_freq = check_tensor("inv_freq", inv_freq, ndim=1, floating=True)
    return (length - 1) * inv_freq.double() / (2 * math.pi)


# ---------------------------------------------------------------------------------------
# The rotation and the scores it produces


def _rotate_half(x: torch.Tensor) -> torch.Tensor:
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


def rotate(x: torch.Tensor, positions: torch.Tensor, inv_freq: torch.Tensor, *,
           attention_scaling: float = 1.0) -> torch.Tensor:
    """Rotate x [..., L, D] at ``positions`` [L] as Hugging Face does (rotate_half pairs (i, i + r/2)).

    Only the first r = 2·len(inv_freq) dimensions rotate; cos and sin carry ``attention_scaling``.
    """
    x = check_tensor("x", x, min_ndim=2, floating=True)
    positions = check_tensor("positions", positions, ndim=1)
    inv_freq = check_tensor("inv_freq", inv_freq, ndim=1, floating=True)
    r = 2 * inv_freq.shape[0]
    if r > x.shape[-1]:
        raise ValueError(f"inv_freq has {inv_freq.shape[0]} pairs: x needs at least {r} dimensions; "
                         f"got {x.shape[-1]}")
    if positions.shape[0] != x.shape[-2]:
        raise ValueError(f"positions must have one entry per row of x ({x.shape[-2]}); got {positions.shape[0]}")
    freqs = positions.to(x.device).float()[:, None] * inv_freq.to(x.device).float()[None, :]   # [L, P]
    emb = torch.cat((freqs, freqs), dim=-1)                                                       # [L, r]
    cos, sin = emb.cos() * attention_scaling, emb.sin() * attention_scaling
    rot, rest = x[..., :r], x[..., r:]
    return torch.cat((rot * cos.to(x.dtype) + _rotate_half(rot) * sin.to(x.dtype), rest), dim=-1)


def score_per_offset(q: torch.Tensor, k: torch.Tensor, inv_freq: torch.Tensor, offsets: torch.Tensor, *,
                     attention_scaling: float = 1.0) -> torch.Tensor:
    """[R] the logit (R_i q)·(R_j k) for fixed content q, k [D] at each offset j − i (float64).

    With z = q_a + i·q_b (pair a, b = a + r/2) and w the same for k, the pair contributes
    Re(z·conj(w)·e^{−i(j−i)θ}) = A cos((j−i)θ) + B sin((j−i)θ), A = q_a k_a + q_b k_b,
    B = q_b k_a − q_a k_b; the unrotated dimensions add a constant.
    """
    q = check_tensor("q", q, ndim=1, floating=True).double()
    k = check_tensor("k", k, ndim=1, floating=True).double()
    inv_freq = check_tensor("inv_freq", inv_freq, ndim=1, floating=True).double()
    offsets = check_tensor("offsets", offsets, ndim=1)
    if q.shape != k.shape:
        raise ValueError(f"q and k must have the same shape; got {tuple(q.shape)} and {tuple(k.shape)}")
    p = inv_freq.shape[0]
    if 2 * p > q.shape[0]:
        raise ValueError(f"inv_freq has {p} pairs: q needs at least {2 * p} dimensions; got {q.shape[0]}")
    qa, qb, ka, kb = q[:p], q[p:2 * p], k[:p], k[p:2 * p]
    a = (qa * ka + qb * kb).to(inv_freq.device)                                   # [P]
    b = (qb * ka - qa * kb).to(inv_freq.device)                                   # [P]
    angle = offsets.to(inv_freq.device).double()[:, None] * inv_freq[None, :]   # [R, P]
    rest = float((q[2 * p:] * k[2 * p:]).sum())
    return (angle.cos() @ a + angle.sin() @ b) * attention_scaling ** 2 + rest


def score_matrix(q: torch.Tensor, k: torch.Tensor, inv_freq: torch.Tensor, length: int, *,
                 attention_scaling: float = 1.0) -> tuple[torch.Tensor, torch.Tensor]:
    """(offsets [2L − 1], per-offset scores [2L − 1]) of the L × L score matrix: it is Toeplitz.

    Computed per offset; entry (i, j) is scores[j − i + L − 1].
    """
    length = check_int("length", length, minimum=1, maximum=1 << 20)
    offsets = torch.arange(-(length - 1), length, device=inv_freq.device)
    return offsets, score_per_offset(q, k, inv_freq, offsets, attention_scaling=attention_scaling)


def decay_bound(inv_freq: torch.Tensor, offsets: torch.Tensor) -> torch.Tensor:
    """[R] RoFormer §3.4.3's relative upper bound (1/P)·Σ_{j=1..P} |S_j|, S_j = Σ_{k<j} e^{i·(j−i)·θ_k}.

    Multiplied by max_k |h_{k+1} − h_k| (h_k = z_k conj(w_k)) it bounds |q·k|; it decays with |j − i|.
    """
    inv_freq = check_tensor("inv_freq", inv_freq, ndim=1, floating=True).double()
    offsets = check_tensor("offsets", offsets, ndim=1)
    angle = offsets.to(inv_freq.device).double()[:, None] * inv_freq[None, :]    # [R, P]
    partial = torch.polar(torch.ones_like(angle), angle).cumsum(dim=1)           # [R, P]: S_1 .. S_P
    return partial.abs().mean(dim=1)


def measured_decay(inv_freq: torch.Tensor, offsets: torch.Tensor, *, rotary_dim: int | None = None,
                   samples: int = 256, seed: int = 0, identical: bool = False) -> torch.Tensor:
    """[R] mean over ``samples`` random unit-variance q, k of the score q·k / r at each offset.

    ``identical``: k = q (a token attending to the same content), whose score is
    Σ |z|² cos((j−i)θ) / r: 1 at offset 0, decaying as the pairs dephase. Independent q, k give a
    mean near 0 at every offset; this returns the mean |score| for them, which stays flat.
    """
    inv_freq = check_tensor("inv_freq", inv_freq, ndim=1, floating=True).double()
    offsets = check_tensor("offsets", offsets, ndim=1)
    samples = check_int("samples", samples, minimum=1, maximum=4096)
    p = inv_freq.shape[0]
    r = 2 * p if rotary_dim is None else check_int("rotary_dim", rotary_dim, minimum=2 * p, maximum=2 * p)
    generator = torch.Generator().manual_seed(check_int("seed", seed, minimum=0, maximum=2**31 - 1))
    z = torch.randn(samples, p, dtype=torch.complex128, generator=generator) * math.sqrt(2)   # E|z|² = 2
    w = z if identical else torch.randn(samples, p, dtype=torch.complex128, generator=generator) * math.sqrt(2)
    h = (z * w.conj()).to(inv_freq.device)                                                  # [S, P]
    angle = offsets.to(inv_freq.device).double()[:, None] * inv_freq[None, :]             # [R, P]
    scores = (h[:, None, :] * torch.polar(torch.ones_like(angle), -angle)[None]).real.sum(-1) / r   # [S, R]
    return scores.mean(0) if identical else scores.abs().mean(0)


# ---------------------------------------------------------------------------------------
# What the RoPE page shows: one head's scores for fixed content, and its decay curves

MAX_WINDOW = 1024
MAX_DECAY_POINTS = 4096


def random_content(head_dim: int, *, same: bool = True, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """(q [head_dim], k [head_dim]) random unit vectors (float64, CPU), so the unrotated score is their cosine.

    ``same``: k = q, the same content at the query and the key.
    """
    head_dim = check_int("head_dim", head_dim, minimum=2, maximum=MAX_HEAD_DIM)
    generator = torch.Generator().manual_seed(check_int("seed", seed, minimum=0, maximum=2**31 - 1))
    q = torch.randn(head_dim, dtype=torch.float64, generator=generator)                 # [D]
    k = q.clone() if same else torch.randn(head_dim, dtype=torch.float64, generator=generator)
    return q / q.norm(), k / k.norm()


def rotated_scores(q: torch.Tensor, k: torch.Tensor, inv_freq: torch.Tensor, window: int, *,
                   attention_scaling: float = 1.0) -> torch.Tensor:
    """[W, W] the brute-force score matrix: q and k rotated at every position 0 … W − 1, then multiplied.

    This is how a model computes it (float32 cos and sin, as in transformers); ``score_matrix`` gets the
    same numbers per offset.
    """
    window = check_int("window", window, minimum=1, maximum=MAX_WINDOW)
    q = check_tensor("q", q, ndim=1, floating=True)
    k = check_tensor("k", k, ndim=1, floating=True)
    positions = torch.arange(window)                                                              # [W]
    rq = rotate(q.expand(window, -1).clone(), positions, inv_freq, attention_scaling=attention_scaling)  # [W, D]
    rk = rotate(k.expand(window, -1).clone(), positions, inv_freq, attention_scaling=attention_scaling)  # [W, D]
    return rq @ rk.T                                                                              # [W, W]


@dataclass(frozen=True)
class ContentScores:
    """One head's scores for fixed content q, k at every position: a Toeplitz matrix, checked live.

    ``per_offset`` [2W − 1] holds entry (i, j) at index j − i + W − 1; ``spreads`` [W] holds, at n − 1,
    the largest |brute force − per offset| over the top-left n × n block (float32 rotation against
    float64 per offset), so ``head`` gives any smaller window with its own check, computed once.
    """

    per_offset: torch.Tensor
    spreads: torch.Tensor
    attention_scaling: float

    @property
    def window(self) -> int:
        return (self.per_offset.shape[0] + 1) // 2

    @property
    def spread(self) -> float:
        """The largest |brute force − per offset| over the whole W × W matrix."""
        return float(self.spreads[-1])

    def matrix(self) -> torch.Tensor:
        """[W, W] the score matrix, expanded from the per-offset scores."""
        return expand_toeplitz(self.per_offset, self.window, self.window)

    def head(self, window: int) -> ContentScores:
        """The scores at positions 0 … window − 1: the top-left window × window block. It is what
        ``content_scores`` gives for that window (to float64 rounding): a position's rotation does not
        depend on how many positions are shown."""
        window = check_int("window", window, minimum=1, maximum=self.window)
        middle = self.window - 1
        return ContentScores(self.per_offset[middle - (window - 1):middle + window], self.spreads[:window],
                             self.attention_scaling)


def content_scores(config: RopeConfig, length: int, window: int, *, same: bool = True,
                   seed: int = 0) -> ContentScores:
    """The window × window score matrix of random unit q, k (``random_content``) under ``config``
    run at ``length`` positions, computed per offset and checked against brute-force rotation."""
    if not isinstance(config, RopeConfig):
        raise ValueError(f"config must be a RopeConfig; got {type(config).__name__}")
    window = check_int("window", window, minimum=1, maximum=MAX_WINDOW)
    inv_freq, scaling = rope_parameters(config, length, device="cpu")
    q, k = random_content(config.head_dim, same=same, seed=seed)
    _, per_offset = score_matrix(q, k, inv_freq, window, attention_scaling=scaling)              # [2W − 1]
    brute = rotated_scores(q, k, inv_freq, window, attention_scaling=scaling)                     # [W, W]
    gap = (brute - expand_toeplitz(per_offset, window, window)).abs()                             # [W, W]
    # block n × n = block (n − 1)² + row n − 1 up to its diagonal + column n − 1 down to it
    edge = torch.maximum(gap.tril().amax(dim=1), gap.triu().amax(dim=0))                          # [W]
    return ContentScores(per_offset, edge.cummax(dim=0).values, scaling)


def decay_distances(length: int, points: int = 600) -> torch.Tensor:
    """[R] int64 distances 1 … length − 1 (a log axis has no 0): every one up to 64, then ``points`` log-spaced."""
    length = check_int("length", length, minimum=1, maximum=MAX_POSITIONS)
    points = check_int("points", points, minimum=2, maximum=MAX_DECAY_POINTS)
    dense = torch.arange(1, min(max(length, 2), 65), dtype=torch.int64)                       # [≤ 64]
    if length <= 65:
        return dense
    sparse = torch.logspace(math.log10(65), math.log10(length - 1), points, dtype=torch.float64)
    return torch.cat([dense, sparse.round().to(torch.int64).unique()])                          # sorted


@dataclass(frozen=True)
class DecayCurves:
    """RoPE's long-term decay at ``distances`` [R], each curve [R] relative to its value at distance 0.

    ``bound``: RoFormer's relative bound / (P + 1)/2 (its value at 0); ``bound_unscaled``: the same
    for the unscaled θ (None without a scaling rule); ``identical``: mean score for q = k;
    ``independent``: mean |score| for independent q, k.
    """

    distances: torch.Tensor
    bound: torch.Tensor
    bound_unscaled: torch.Tensor | None
    identical: torch.Tensor
    independent: torch.Tensor


def decay_curves(config: RopeConfig, length: int, *, points: int = 600) -> DecayCurves:
    """The decay of ``config`` run at ``length`` positions, at ``decay_distances(length, points)``."""
    if not isinstance(config, RopeConfig):
        raise ValueError(f"config must be a RopeConfig; got {type(config).__name__}")
    distances = decay_distances(length, points)                                                   # [R]
    inv_freq, _ = rope_parameters(config, length, device="cpu")                                  # [P]
    top = (inv_freq.shape[0] + 1) / 2   # the bound at distance 0: mean of |S_j| = j over j = 1..P
    plain = None
    if config.scaling.rope_type != "default":
        plain = decay_bound(rope_parameters(unscaled(config), device="cpu")[0], distances) / top
    return DecayCurves(distances, decay_bound(inv_freq, distances) / top, plain,
                       measured_decay(inv_freq, distances, identical=True), measured_decay(inv_freq, distances))


# ---------------------------------------------------------------------------------------
# Presets: published checkpoints' settings (relviz/presets.json names the source of each)

PRESETS_PATH = Path(__file__).with_name("presets.json")


def load_presets() -> dict:
    """The presets file: {"rope": [...], "t5": [...], "alibi": [...], "missing": [...]}, each with its source."""
    return json.loads(PRESETS_PATH.read_text(encoding="utf-8"))


def rope_presets() -> dict[str, tuple[str, RopeConfig, str]]:
    """id -> (label, RopeConfig read from the model's config.json fields, source)."""
    return {entry["id"]: (entry["label"], rope_config_from_hf(entry["config"]), entry["source"])
            for entry in load_presets()["rope"]}
