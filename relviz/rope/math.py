"""RoPE's exact arithmetic: θ_i under each scaling rule (operation for operation as transformers'
``modeling_rope_utils.py``, so float32 results are bit-identical), the rotation, the scores it
gives per offset j − i and RoFormer's decay bound.

Its own module because it is the part the rest is proven against: the page's views
(:mod:`relviz.rope.scores`), the mechanisms and the checker all call it. :mod:`relviz.rope` gathers
the whole RoPE API in one import.
"""
from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import replace

import torch

from relviz._checks import check_int, check_tensor, resolve_device
from relviz.rope.config import MAX_POSITIONS, ROPE_TYPES, RopeConfig, RopeScaling


# ---------------------------------------------------------------------------------------
# Frequencies and attention scaling, exactly as transformers computes them


def _exponents(dim: int, device: torch.device, over: int | None = None) -> torch.Tensor:
    """[dim/2]: 2i/over (over: dim unless given) in float32, as transformers builds it (arange(0, dim, 2) / dim)."""
    return torch.arange(0, dim, 2, dtype=torch.int64).to(device=device, dtype=torch.float) / (over or dim)


def default_inv_freq(dim: int, base: float, device: torch.device | str | None = None, *,
                     over: int | None = None, reciprocal: bool = True) -> torch.Tensor:
    """θ_i [dim/2] float32, the default rule, in one of its two arithmetics (as the ALiBi slope rules have two).

    ``reciprocal=True``: 1 / base^(2i/dim), as transformers computes it. False: base^(−2i/dim), RoFormer's formula
    as written, the arithmetic relviz's toy ``rope`` scheme was trained with (relviz.mechanisms.rotation's
    ``reciprocal``): the two differ by at most one float32 ulp per pair (tests/test_rope.py measures it).

    ``over``: the exponent's denominator when it is not ``dim`` (θ_i = 1 / base^(2i/over) for the dim/2 pairs):
    transformers' proportional rule divides by the head's dims while rotating fewer, and the checker's
    deliberately wrong variants (relviz.check.rope_causes) are this rule with another denominator."""
    if over is not None:
        check_int("over", over, minimum=1)
    exponents = _exponents(dim, resolve_device(device), over)                         # [dim/2]: 2i/over
    return 1.0 / (base ** exponents) if reciprocal else base ** (-exponents)


def get_mscale(scale: float, mscale: float = 1.0) -> float:
    if scale <= 1:
        return 1.0
    return 0.1 * mscale * math.log(scale) + 1.0


def yarn_default_attention(factor: float) -> float:
    """YaRN's attention factor when the config sets none (no attention_factor, no mscale pair):
    0.1·ln(factor) + 1, and 1 at factor ≤ 1. The checker's 'default factor where the config sets one' uses it."""
    return get_mscale(factor)


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


# One function per rule, as transformers' ROPE_INIT_FUNCTIONS: (config, seq_len, device) -> (inv_freq, scaling).
# Each is written operation for operation as transformers computes it, so float32 results are bit-identical.

def _default(config: RopeConfig, seq_len: int | None, device: torch.device) -> tuple[torch.Tensor, float]:
    return default_inv_freq(config.rotary_dim, config.base, device), 1.0


def _linear(config: RopeConfig, seq_len: int | None, device: torch.device) -> tuple[torch.Tensor, float]:
    inv_freq = default_inv_freq(config.rotary_dim, config.base, device)
    inv_freq /= config.scaling.factor
    return inv_freq, 1.0


def _dynamic(config: RopeConfig, seq_len: int | None, device: torch.device) -> tuple[torch.Tensor, float]:
    s, dim, base, max_positions = config.scaling, config.rotary_dim, config.base, config.max_position_embeddings
    if seq_len is None or seq_len <= max_positions:
        # At init transformers uses seq_len = max_position_embeddings in Python floats.
        scaled = base * ((s.factor * max_positions / max_positions) - (s.factor - 1)) ** (dim / (dim - 2))
    else:
        # A forward past the cached length recomputes with seq_len a 0-dim int64 tensor: float32 math.
        length = torch.maximum(torch.tensor(seq_len, device=device), torch.tensor(max_positions, device=device))
        scaled = base * ((s.factor * length / max_positions) - (s.factor - 1)) ** (dim / (dim - 2))
    return 1.0 / (scaled ** _exponents(dim, device)), 1.0


def _ntk_alpha(config: RopeConfig, seq_len: int | None, device: torch.device) -> tuple[torch.Tensor, float]:
    """Hunyuan's NTK-alpha: the base raised once by alpha^(d/(d − 2)) in Python floats, the same at every length
    (its rotary module's compute_ntk_alpha_rope_parameters; the arange is float32 there, the same values)."""
    dim = config.rotary_dim
    base = config.base * config.scaling.alpha ** (dim / (dim - 2))
    return 1.0 / (base ** (torch.arange(0, dim, 2, dtype=torch.float, device=device) / dim)), 1.0


def _proportional(config: RopeConfig, seq_len: int | None, device: torch.device) -> tuple[torch.Tensor, float]:
    """Gemma 4's global layers: rope_angles pairs with θ_i = 1/base^(2i/head_dim) (over the whole head), then
    θ = 0 for the other head_dim/2 − rope_angles pairs, all divided by the factor; cos and sin span the head."""
    head_dim, angles = config.head_dim, config.turning_pairs
    turning = 1.0 / (config.base ** (torch.arange(0, 2 * angles, 2, dtype=torch.int64).to(
        device=device, dtype=torch.float) / head_dim))
    still = head_dim // 2 - angles
    inv_freq = torch.cat((turning, torch.zeros(still, dtype=torch.float32, device=device))) if still > 0 else turning
    inv_freq /= config.scaling.factor if config.scaling.factor is not None else 1.0
    return inv_freq, 1.0


def _yarn(config: RopeConfig, seq_len: int | None, device: torch.device) -> tuple[torch.Tensor, float]:
    s, dim, base = config.scaling, config.rotary_dim, config.base
    factor = s.factor if s.factor is not None else config.max_position_embeddings / config.original_max_position_embeddings
    if s.attention_factor is not None:
        attention = s.attention_factor
    elif s.mscale and s.mscale_all_dim:
        attention = float(get_mscale(factor, s.mscale) / get_mscale(factor, s.mscale_all_dim))
    else:
        attention = get_mscale(factor)
    pos_freqs = base ** (torch.arange(0, dim, 2).to(device=device, dtype=torch.float) / dim)
    extrapolation = 1.0 / pos_freqs
    interpolation = 1.0 / (factor * pos_freqs)
    low, high = yarn_correction_range(config)
    if low == high:
        high += 0.001  # transformers' guard against a zero-width ramp
    ramp = torch.clamp((torch.arange(dim // 2, dtype=torch.float32) - low) / (high - low), 0, 1)
    extrapolation_factor = 1 - ramp.to(device=device, dtype=torch.float)
    return interpolation * (1 - extrapolation_factor) + extrapolation * extrapolation_factor, attention


def _llama3(config: RopeConfig, seq_len: int | None, device: torch.device) -> tuple[torch.Tensor, float]:
    s = config.scaling
    inv_freq = default_inv_freq(config.rotary_dim, config.base, device)
    old_context = config.original_max_position_embeddings
    low_wavelen = old_context / s.low_freq_factor
    high_wavelen = old_context / s.high_freq_factor
    wavelen = 2 * math.pi / inv_freq
    scaled = torch.where(wavelen > low_wavelen, inv_freq / s.factor, inv_freq)
    smooth = (old_context / wavelen - s.low_freq_factor) / (s.high_freq_factor - s.low_freq_factor)
    smoothed = (1 - smooth) * scaled / s.factor + smooth * scaled
    medium = ~(wavelen < high_wavelen) * ~(wavelen > low_wavelen)
    return torch.where(medium, smoothed, scaled), 1.0


def _longrope(config: RopeConfig, seq_len: int | None, device: torch.device) -> tuple[torch.Tensor, float]:
    s, dim = config.scaling, config.rotary_dim
    original = config.original_max_position_embeddings
    factor = s.factor if s.factor is not None else config.max_position_embeddings / original
    if s.attention_factor is not None:
        attention = s.attention_factor
    elif factor <= 1.0:
        attention = 1.0
    else:
        attention = math.sqrt(1 + math.log(factor) / math.log(original))
    chosen = s.long_factor if seq_len is not None and seq_len > original else s.short_factor
    ext = torch.tensor(chosen, dtype=torch.float32, device=device)
    shape = torch.arange(0, dim, 2, dtype=torch.int64, device=device).float() / dim
    return 1.0 / (ext * config.base ** shape), attention


#: rope_type -> its rule (transformers' ROPE_INIT_FUNCTIONS, with "default" and Hunyuan's "ntk_alpha")
ROPE_RULES: dict[str, Callable[[RopeConfig, int | None, torch.device], tuple[torch.Tensor, float]]] = {
    "default": _default, "linear": _linear, "dynamic": _dynamic, "yarn": _yarn, "llama3": _llama3,
    "longrope": _longrope, "proportional": _proportional, "ntk_alpha": _ntk_alpha}
assert tuple(ROPE_RULES) == ROPE_TYPES


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
    return ROPE_RULES[config.scaling.rope_type](config, seq_len, resolve_device(device))


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


def turning_in_context(inv_freq: torch.Tensor, length: int) -> tuple[int, int, float]:
    """(pairs whose wavelength 2π/θ_i fits in positions 0..length − 1, all pairs, the longest wavelength), in
    float64: how much of the head completes a turn at this length."""
    length = check_int("length", length, minimum=1, maximum=MAX_POSITIONS)
    wave = 2 * math.pi / check_tensor("inv_freq", inv_freq, ndim=1, floating=True).double()  # [P]
    return int((wave <= length - 1).sum()), len(wave), float(wave.max())


# ---------------------------------------------------------------------------------------
# The rotation and the scores it produces


#: layout -> what pairs it rotates, in words
LAYOUTS = {
    "half": "pairs (i, i + r/2), rotate_half (Llama, GPT-NeoX)",
    "interleaved": "adjacent pairs (2i, 2i + 1), rotate_every_two (GPT-J, Cohere)",
    "complex": "adjacent pairs (2i, 2i + 1) multiplied as complex numbers (Llama 4)",
    "deinterleave": "adjacent pairs (2i, 2i + 1) in, written out half-split (DeepSeek-V3 rope_interleave)",
}


# The four pair layouts, each as transformers writes it (same operations, so float results are bit-identical).
# rot [..., L, r]; freqs [L, r/2] radians (position × θ_i); scaling multiplies cos and sin.

def half_cos_sin(freqs: torch.Tensor, scaling: float, dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
    """(cos, sin) [L, r] of the half layout, ``cat(freqs, freqs)`` (what a model computes once per forward)."""
    emb = torch.cat((freqs, freqs), dim=-1)                                      # [L, r]
    return (emb.cos() * scaling).to(dtype), (emb.sin() * scaling).to(dtype)


def rotate_half_by(rot: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """rot [..., L, r] rotated with the half layout's cos and sin [L, r]: rot·cos + rotate_half(rot)·sin."""
    half = rot.shape[-1] // 2
    return rot * cos + torch.cat((-rot[..., half:], rot[..., :half]), dim=-1) * sin


def _half(rot: torch.Tensor, freqs: torch.Tensor, scaling: float) -> torch.Tensor:
    return rotate_half_by(rot, *half_cos_sin(freqs, scaling, rot.dtype))


def _interleaved(rot: torch.Tensor, freqs: torch.Tensor, scaling: float) -> torch.Tensor:
    emb = torch.repeat_interleave(freqs, 2, dim=-1)                              # [L, r]: θ0 θ0 θ1 θ1 ...
    cos, sin = (emb.cos() * scaling).to(rot.dtype), (emb.sin() * scaling).to(rot.dtype)
    turned = torch.stack((-rot[..., 1::2], rot[..., 0::2]), dim=-1).flatten(-2)
    return rot * cos + turned * sin


def _complex(rot: torch.Tensor, freqs: torch.Tensor, scaling: float) -> torch.Tensor:
    cis = torch.polar(torch.ones_like(freqs), freqs) * scaling                  # [L, r/2] complex
    z = torch.view_as_complex(rot.float().reshape(*rot.shape[:-1], -1, 2))
    return torch.view_as_real(z * cis).flatten(-2).type_as(rot)


def _deinterleave(rot: torch.Tensor, freqs: torch.Tensor, scaling: float) -> torch.Tensor:
    cos, sin = (freqs.cos() * scaling).to(rot.dtype), (freqs.sin() * scaling).to(rot.dtype)
    a, b = rot[..., 0::2], rot[..., 1::2]
    return torch.cat([a * cos - b * sin, b * cos + a * sin], dim=-1)


_ROTATE = {"half": _half, "interleaved": _interleaved, "complex": _complex, "deinterleave": _deinterleave}
assert set(_ROTATE) == set(LAYOUTS)

#: The two column orders of a cos/sin cache (what the checker compares): each pair's value at columns
#: (i, i + r/2), or at (2i, 2i + 1).
CACHE_LAYOUTS = ("half", "interleaved")
#: each cache column order in words, as the Check page offers it
CACHE_LAYOUT_WORDS = {"half": "half-split (i, i + d/2): Llama, GPT-NeoX",
                      "interleaved": "interleaved (2i, 2i + 1): GPT-J, Meta"}
#: layout -> the column order of its cos/sin cache: complex pairs are adjacent; DeepSeek's de-interleaving
#: rotates half-split pairs after reordering q and k.
CACHE_LAYOUT_OF = {"half": "half", "interleaved": "interleaved", "complex": "interleaved", "deinterleave": "half"}
assert set(CACHE_LAYOUT_OF) == set(LAYOUTS) and set(CACHE_LAYOUT_OF.values()) == set(CACHE_LAYOUTS)
assert tuple(CACHE_LAYOUT_WORDS) == CACHE_LAYOUTS


#: layout -> whether its pairs are adjacent (2i, 2i + 1) as it reads them in, and as it writes them out
_ADJACENT_IN_OUT = {"half": (False, False), "interleaved": (True, True), "complex": (True, True),
                    "deinterleave": (True, False)}
assert set(_ADJACENT_IN_OUT) == set(LAYOUTS)


def _negate_seconds(x: torch.Tensor, adjacent: bool) -> torch.Tensor:
    """x [..., r] with the second dim of each pair negated (a mirror: a turn by θ between two mirrors turns by −θ)."""
    if adjacent:
        return torch.stack((x[..., 0::2], -x[..., 1::2]), dim=-1).flatten(-2)
    half = x.shape[-1] // 2
    return torch.cat((x[..., :half], -x[..., half:]), dim=-1)


def rotate_pairs(rot: torch.Tensor, freqs: torch.Tensor, scaling: float = 1.0, *, layout: str = "half",
                 backwards: bool = False) -> torch.Tensor:
    """rot [..., L, r] turned by ``freqs`` [L, r/2] (angle of each pair at each position) in ``layout``'s pairs;
    ``backwards``: by −freqs, as NanoChat's rotate_half with flipped signs turns them. Written as the forward turn
    between two mirrors, which is bit for bit the flipped rotate_half: negating a factor or a sum rounds alike.

    No checks: the callers (:func:`rotate`, the mechanisms, the toy model) check their own inputs once.
    """
    if not backwards:
        return _ROTATE[layout](rot, freqs, scaling)
    into, out = _ADJACENT_IN_OUT[layout]
    return _negate_seconds(_ROTATE[layout](_negate_seconds(rot, into), freqs, scaling), out)


def rotate(x: torch.Tensor, positions: torch.Tensor, inv_freq: torch.Tensor, *,
           attention_scaling: float = 1.0, layout: str = "half") -> torch.Tensor:
    """Rotate x [..., L, D] at ``positions`` [L] as transformers does (``layout``: one of :data:`LAYOUTS`;
    the default pairs (i, i + r/2) as rotate_half).

    Only the first r = 2·len(inv_freq) dimensions rotate; cos and sin carry ``attention_scaling``.
    """
    x = check_tensor("x", x, min_ndim=2, floating=True)
    positions = check_tensor("positions", positions, ndim=1)
    inv_freq = check_tensor("inv_freq", inv_freq, ndim=1, floating=True)
    if layout not in LAYOUTS:
        raise ValueError(f"layout must be one of {', '.join(LAYOUTS)}; got {layout!r}")
    r = 2 * inv_freq.shape[0]
    if r > x.shape[-1]:
        raise ValueError(f"inv_freq has {inv_freq.shape[0]} pairs: x needs at least {r} dimensions; "
                         f"got {x.shape[-1]}")
    if positions.shape[0] != x.shape[-2]:
        raise ValueError(f"positions must have one entry per row of x ({x.shape[-2]}); got {positions.shape[0]}")
    freqs = positions.to(x.device).float()[:, None] * inv_freq.to(x.device).float()[None, :]   # [L, P]
    rot, rest = x[..., :r], x[..., r:]
    return torch.cat((rotate_pairs(rot, freqs, attention_scaling, layout=layout), rest), dim=-1)


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
# A query scale a RoPE config implies (it rides in rope_parameters, but scales q rather than turning it)


def llama4_query_scale(positions: torch.Tensor, beta: float, original: int) -> torch.Tensor:
    """[L] the factor on each query at integer ``positions`` [L] under Mistral's ``llama_4_scaling_beta``:
    1 + β·ln(1 + ⌊pos / original_max_position_embeddings⌋), float32 operation for operation as transformers'
    ``get_llama_4_attn_scale`` (Ministral 3, Mistral 4: every layer, after the rotation)."""
    positions = check_tensor("positions", positions, ndim=1)
    return 1 + beta * torch.log(1 + torch.floor(positions / original))
