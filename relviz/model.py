"""A small transformer with a pluggable position scheme.

One model, eight ways to tell it where tokens are, so the app can train each one on the
same task and show what its attention learned:

==============  =============================================================================
``none``        no position information at all (a causal model still sees how much past it has)
``sinusoidal``  fixed sin/cos vectors added to the token embeddings (absolute)
``learned``     one learned vector per absolute position, up to ``max_len`` (absolute)
``shaw``        Shaw et al.: learned a^K, a^V per clipped offset (±clip), per layer, shared by heads
``t5``          T5: a learned scalar per (bucket, head), one table shared by all layers
``skew``        Music Transformer: learned E_r per layer, applied with the skew (causal only)
``alibi``       ALiBi: fixed per-head linear penalty on distance
``rope``        rotary embeddings: q and k rotated by an angle proportional to position
==============  =============================================================================

Architecture: token embedding (+ absolute positions) → n_layers × [pre-LayerNorm
self-attention, pre-LayerNorm GELU MLP] → LayerNorm → linear head. Each
:class:`PositionScheme` owns its parameters and does one layer's attention, so the blocks
do not know which scheme they run.

``forward`` returns the attention weights of every layer instead of storing them on the
module: one cached model serves many app users at once under ``torch.inference_mode()``.

Sign convention everywhere: relative position = key index − query index (j − i).
"""
from __future__ import annotations

import dataclasses
import json
import math
import numbers
from dataclasses import dataclass
from typing import Any, ClassVar

import torch
from torch import nn

from relviz._checks import check_bool, check_int
from relviz.attention import _softmax_output as softmax_output
from relviz.attention import alibi_attention, shaw_attention, skew_attention, t5_attention
from relviz.positions import t5_config

__all__ = ["SCHEMES", "SCHEME_SUMMARIES", "MAX_LENGTH", "MAX_PARAMETERS", "ModelConfig", "PositionScheme",
           "RelvizTransformer", "build_model", "dot_product_attention", "rope_rotate"]

#: Longest sequence ``forward`` accepts: the attention weights it returns take
#: n_layers · B · H · L² floats (L = 4096, 2 layers, 4 heads: 537 MB per sequence).
MAX_LENGTH = 4096

#: Largest model a config may describe (200 MB of float32 weights, ~800 MB while training with
#: Adam): far above anything this app trains, far below what would take a server's memory.
MAX_PARAMETERS = 50_000_000

#: scheme name -> its parameters in :class:`ModelConfig` (what a checkpoint records).
SCHEMES: dict[str, tuple[str, ...]] = {
    "none": (),
    "sinusoidal": (),
    "learned": ("max_len",),
    "shaw": ("clip",),
    "t5": ("num_buckets", "max_distance"),
    "skew": ("skew_distances",),
    "alibi": (),
    "rope": ("rope_base",),
}

#: One line per scheme, for the app and the CLI.
SCHEME_SUMMARIES: dict[str, str] = {
    "none": "no position information (a causal model still sees how many tokens precede it)",
    "sinusoidal": "fixed sin/cos vectors added to the token embeddings (absolute)",
    "learned": "one learned vector per absolute position, up to max_len (absolute)",
    "shaw": "Shaw et al.: learned key/value vectors per offset j − i, clipped to ±clip; per layer",
    "t5": "T5: a learned scalar per (bucket of j − i, head), one table shared by all layers",
    "skew": "Music Transformer: a learned vector per distance, applied with the skew; causal only",
    "alibi": "ALiBi: a fixed per-head penalty −slope · |j − i| on the attention logits",
    "rope": "RoPE: q and k rotated by angles proportional to position, so q · k sees only j − i",
}

#: (output [B, H, L, D_head], weights [B, H, L, L]), as every relviz.attention function returns.
Attention = tuple[torch.Tensor, torch.Tensor]

#: Schemes that only exist for causal attention.
CAUSAL_ONLY = frozenset({"skew"})


# ---------------------------------------------------------------------------------------
# Configuration


@dataclass(frozen=True)
class ModelConfig:
    """Everything needed to rebuild a model; validated on creation, round-trips through JSON.

    Scheme parameters live here flat (unused ones keep their defaults);
    :meth:`scheme_params` returns only the current scheme's.
    """

    vocab_size: int = 10
    d_model: int = 64
    n_layers: int = 2
    n_heads: int = 4
    d_ff: int = 256
    scheme: str = "none"
    causal: bool = True
    max_len: int = 64            # learned: number of absolute positions
    clip: int = 8                # shaw: offsets beyond ±clip share the end embeddings
    num_buckets: int = 32        # t5
    max_distance: int = 128      # t5
    skew_distances: int = 32     # skew: rows of E_r (distances −(M − 1)..0)
    rope_base: float = 10000.0   # rope: angle of pair p is position · base^(−2p / D_head)

    def __post_init__(self) -> None:
        # Store what the checks return: numpy integers become ints (the config is written as JSON).
        def keep_int(name: str, minimum: int, maximum: int) -> None:
            object.__setattr__(self, name, check_int(name, getattr(self, name), minimum=minimum, maximum=maximum))

        keep_int("vocab_size", 1, 1_000_000)
        keep_int("d_model", 1, 8192)
        keep_int("n_layers", 1, 64)
        keep_int("n_heads", 1, 256)
        keep_int("d_ff", 1, 65536)
        if self.d_model % self.n_heads:
            raise ValueError(f"d_model must be divisible by n_heads; got d_model={self.d_model}, "
                             f"n_heads={self.n_heads}")
        if not isinstance(self.scheme, str) or self.scheme not in SCHEMES:
            raise ValueError(f"unknown scheme {self.scheme!r}; known schemes: {', '.join(SCHEMES)}")
        check_bool("causal", self.causal)
        if self.scheme in CAUSAL_ONLY and not self.causal:
            raise ValueError(f"scheme {self.scheme!r} is causal only: the skew is exact only for "
                             "keys j <= i (its upper triangle is garbage the causal mask hides); "
                             "use causal=True")
        keep_int("max_len", 1, MAX_LENGTH)
        keep_int("clip", 0, MAX_LENGTH)
        keep_int("skew_distances", 1, MAX_LENGTH)
        t5 = t5_config(self.num_buckets, self.max_distance, not self.causal)
        object.__setattr__(self, "num_buckets", t5.num_buckets)
        object.__setattr__(self, "max_distance", t5.max_distance)
        if self.num_buckets > 4096:
            raise ValueError(f"num_buckets must be at most 4096; got {self.num_buckets}")
        if isinstance(self.rope_base, bool) or not isinstance(self.rope_base, numbers.Real) \
                or not math.isfinite(self.rope_base) or self.rope_base <= 1:
            raise ValueError(f"rope_base must be a finite number > 1; got {self.rope_base!r}")
        object.__setattr__(self, "rope_base", float(self.rope_base))
        if self.scheme == "rope" and self.head_dim % 2:
            raise ValueError(f"scheme 'rope' rotates pairs of dimensions: d_model / n_heads must "
                             f"be even; got {self.head_dim}")
        if self.num_parameters() > MAX_PARAMETERS:
            raise ValueError(f"this model would have {self.num_parameters():,} parameters; at most "
                             f"{MAX_PARAMETERS:,} are allowed (lower d_model, d_ff, n_layers, vocab_size "
                             f"or the scheme's table sizes)")

    def num_parameters(self) -> int:
        """What build_model(self).num_parameters() will be, known before allocating anything."""
        d, f, v, layers = self.d_model, self.d_ff, self.vocab_size, self.n_layers
        block = 4 * d * d + 2 * d * f + 9 * d + f          # LayerNorms, qkv, out, MLP (with biases)
        scheme = {
            "learned": self.max_len * d,
            "shaw": 2 * layers * (2 * self.clip + 1) * self.head_dim,
            "t5": self.num_buckets * self.n_heads,
            "skew": layers * self.skew_distances * self.head_dim,
        }.get(self.scheme, 0)
        return v * d + layers * block + 2 * d + d * v + v + scheme

    @property
    def head_dim(self) -> int:
        return self.d_model // self.n_heads

    def scheme_params(self) -> dict[str, Any]:
        """The parameters of the current scheme only, e.g. ``{"clip": 8}`` for shaw."""
        return {name: getattr(self, name) for name in SCHEMES[self.scheme]}

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: object) -> ModelConfig:
        """Inverse of :meth:`to_dict`; unknown keys and wrong types raise ValueError.

        Missing keys take their defaults, so configs written by older versions still load.
        """
        if not isinstance(data, dict):
            raise ValueError(f"model config must be a JSON object; got {type(data).__name__}")
        known = {f.name: f for f in dataclasses.fields(cls)}
        unknown = sorted(set(data) - set(known))
        if unknown:
            raise ValueError(f"unknown model config keys: {', '.join(map(str, unknown))}; "
                             f"known: {', '.join(known)}")
        values = dict(data)
        if isinstance(values.get("rope_base"), int) and not isinstance(values.get("rope_base"), bool):
            values["rope_base"] = float(values["rope_base"])  # JSON writes 10000.0 as 10000.0, but be kind
        return cls(**values)

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> ModelConfig:
        if not isinstance(text, str):
            raise ValueError(f"model config must be JSON text (str); got {type(text).__name__}")
        try:
            data = json.loads(text)
        except (json.JSONDecodeError, RecursionError) as exc:  # RecursionError: nesting too deep
            raise ValueError(f"model config is not valid JSON: {str(exc)[:200]}") from exc
        return cls.from_dict(data)

    def replace(self, **changes: Any) -> ModelConfig:
        """A copy with some fields changed (validated again)."""
        return dataclasses.replace(self, **changes)


# ---------------------------------------------------------------------------------------
# Plain attention and RoPE (the schemes that need no relative term in the logits)


def dot_product_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, *, causal: bool,
                          scale: float | None = None, bias: torch.Tensor | None = None,
                          ) -> tuple[torch.Tensor, torch.Tensor]:
    """softmax(scale · q kᵀ + bias) v for [B, H, L, D] inputs -> (output, weights [B, H, L, L]).

    Written out (not F.scaled_dot_product_attention) because the app needs the weights.
    Causal: keys j > i get −inf, hence weight exactly 0.
    """
    scale = 1.0 / math.sqrt(q.shape[-1]) if scale is None else scale
    logits = torch.matmul(q * scale, k.transpose(-2, -1))
    if bias is not None:
        logits = logits + bias
    return softmax_output(logits, v, causal)   # relviz.attention's: refuses non-finite logits


def rope_rotate(x: torch.Tensor, *, base: float = 10000.0) -> torch.Tensor:
    """Rotary embedding of x [B, H, L, D] (D even): pair (p, p + D/2) of position t is rotated
    by the angle t · base^(−2p / D).

    Then q_i · k_j depends on i and j only through j − i: the rotation by t_i on one side and
    t_j on the other leaves a rotation by (j − i). This is the "rotate half" layout of GPT-NeoX
    and Llama.
    """
    length, dim = x.shape[-2], x.shape[-1]
    half = dim // 2
    inv_freq = base ** (-torch.arange(half, device=x.device, dtype=torch.float32) * 2 / dim)
    angles = torch.arange(length, device=x.device, dtype=torch.float32)[:, None] * inv_freq[None, :]
    cos, sin = angles.cos().to(x.dtype), angles.sin().to(x.dtype)
    x1, x2 = x[..., :half], x[..., half:]
    return torch.cat([x1 * cos - x2 * sin, x2 * cos + x1 * sin], dim=-1)


def sinusoidal_positions(length: int, dim: int, *, device: torch.device | None = None) -> torch.Tensor:
    """Vaswani et al.'s table [length, dim]: sin at even dimensions, cos at odd ones."""
    position = torch.arange(length, device=device, dtype=torch.float32)[:, None]
    freq = torch.exp(torch.arange(0, dim, 2, device=device, dtype=torch.float32) * (-math.log(10000.0) / dim))
    table = torch.zeros(length, dim, device=device)
    table[:, 0::2] = torch.sin(position * freq)
    table[:, 1::2] = torch.cos(position * freq)[:, : dim // 2]
    return table


# ---------------------------------------------------------------------------------------
# Position schemes: each owns its parameters and does one layer's attention


class PositionScheme(nn.Module):
    """Base class: plain causal/bidirectional attention, nothing added.

    ``embed`` adds absolute positions to the token embeddings (identity for relative
    schemes); ``attend`` runs layer ``layer``'s attention with whatever relative term the
    scheme adds; ``check_length`` refuses lengths the scheme cannot run at.
    """

    name: ClassVar[str] = ""

    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        self.config = config

    def check_length(self, length: int) -> None:
        """Raise ValueError, saying why, if the scheme cannot run at this sequence length."""

    def embed(self, x: torch.Tensor) -> torch.Tensor:
        """Token embeddings [B, L, D] -> input of the first block."""
        return x

    def attend(self, layer: int, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> Attention:
        """Layer ``layer``'s attention on [B, H, L, D_head] -> (output, weights [B, H, L, L])."""
        return dot_product_attention(q, k, v, causal=self.config.causal)


class NoPositionScheme(PositionScheme):
    """``none``: no position information at all. A causal model still knows something: how
    many tokens it can see (hence the base class's behaviour, unchanged)."""

    name = "none"


class SinusoidalScheme(PositionScheme):
    """Fixed absolute sin/cos vectors, computed for any length (no parameters)."""

    name = "sinusoidal"

    def embed(self, x: torch.Tensor) -> torch.Tensor:
        return x + sinusoidal_positions(x.shape[1], x.shape[2], device=x.device).to(x.dtype)


class LearnedScheme(PositionScheme):
    """One learned vector per absolute position 0..max_len − 1; nothing exists beyond."""

    name = "learned"

    def __init__(self, config: ModelConfig) -> None:
        super().__init__(config)
        self.table = nn.Parameter(torch.randn(config.max_len, config.d_model) * 0.02)

    def check_length(self, length: int) -> None:
        if length > self.config.max_len:
            raise ValueError(
                f"scheme 'learned' has position embeddings for positions 0..{self.config.max_len - 1} "
                f"only (max_len={self.config.max_len}); a sequence of length {length} needs "
                f"positions up to {length - 1}, which have no embedding. Relative schemes have no "
                "such limit.")

    def embed(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.table[: x.shape[1]]


class ShawScheme(PositionScheme):
    """Shaw et al.: per layer, a^K and a^V tables [2·clip + 1, D_head] shared by all heads."""

    name = "shaw"

    def __init__(self, config: ModelConfig) -> None:
        super().__init__(config)
        shape = (2 * config.clip + 1, config.head_dim)
        self.rel_k = nn.ParameterList(nn.Parameter(torch.randn(shape) * 0.02) for _ in range(config.n_layers))
        self.rel_v = nn.ParameterList(nn.Parameter(torch.randn(shape) * 0.02) for _ in range(config.n_layers))

    def attend(self, layer: int, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> Attention:
        return shaw_attention(q, k, v, self.rel_k[layer], self.rel_v[layer], clip=self.config.clip,
                              causal=self.config.causal, need_weights=True)


class T5Scheme(PositionScheme):
    """T5: one bias table [num_buckets, H] computed once and reused by every layer.

    The bucketing is bidirectional exactly when the model is (as in T5's encoder/decoder).
    The scores keep relviz's 1/sqrt(D_head) scale; the bias is added unscaled.
    """

    name = "t5"

    def __init__(self, config: ModelConfig) -> None:
        super().__init__(config)
        self.bias = nn.Parameter(torch.randn(config.num_buckets, config.n_heads) * 0.02)

    def attend(self, layer: int, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> Attention:
        return t5_attention(q, k, v, self.bias, num_buckets=self.config.num_buckets,
                            max_distance=self.config.max_distance, bidirectional=not self.config.causal,
                            causal=self.config.causal, need_weights=True)


class SkewScheme(PositionScheme):
    """Music Transformer: per layer, E_r [skew_distances, D_head] shared by heads, via the skew.

    Row m is distance m − (M − 1); distances beyond the table use its farthest row.
    """

    name = "skew"

    def __init__(self, config: ModelConfig) -> None:
        super().__init__(config)
        shape = (config.skew_distances, config.head_dim)
        self.e_r = nn.ParameterList(nn.Parameter(torch.randn(shape) * 0.02) for _ in range(config.n_layers))

    def attend(self, layer: int, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> Attention:
        return skew_attention(q, k, v, self.e_r[layer], need_weights=True)


class AlibiScheme(PositionScheme):
    """ALiBi: a fixed per-head penalty −slope_h · |j − i| on the logits (no parameters)."""

    name = "alibi"

    def attend(self, layer: int, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> Attention:
        return alibi_attention(q, k, v, causal=self.config.causal, need_weights=True)


class RopeScheme(PositionScheme):
    """RoPE: q and k rotated by their positions, so q·k sees only j − i (no parameters)."""

    name = "rope"

    def attend(self, layer: int, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> Attention:
        base = self.config.rope_base
        return dot_product_attention(rope_rotate(q, base=base), rope_rotate(k, base=base), v,
                                     causal=self.config.causal)


_SCHEME_CLASSES: dict[str, type[PositionScheme]] = {
    cls.name: cls for cls in (NoPositionScheme, SinusoidalScheme, LearnedScheme, ShawScheme, T5Scheme,
                              SkewScheme, AlibiScheme, RopeScheme)
}
assert set(_SCHEME_CLASSES) == set(SCHEMES)


# ---------------------------------------------------------------------------------------
# The transformer


class SelfAttention(nn.Module):
    """Multi-head self-attention whose scores come from the shared position scheme."""

    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        self.n_heads = config.n_heads
        self.qkv = nn.Linear(config.d_model, 3 * config.d_model)
        self.out = nn.Linear(config.d_model, config.d_model)

    def forward(self, x: torch.Tensor, layer: int, position: PositionScheme,
                ) -> tuple[torch.Tensor, torch.Tensor]:
        batch, length, width = x.shape
        q, k, v = (t.view(batch, length, self.n_heads, -1).transpose(1, 2)
                   for t in self.qkv(x).chunk(3, dim=-1))                   # [B, H, L, D_head]
        output, weights = position.attend(layer, q, k, v)
        return self.out(output.transpose(1, 2).reshape(batch, length, width)), weights


class Block(nn.Module):
    """Pre-LayerNorm transformer block: x + attn(LN(x)), then x + MLP(LN(x))."""

    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        self.ln_attn = nn.LayerNorm(config.d_model)
        self.attn = SelfAttention(config)
        self.ln_mlp = nn.LayerNorm(config.d_model)
        self.mlp = nn.Sequential(nn.Linear(config.d_model, config.d_ff), nn.GELU(),
                                 nn.Linear(config.d_ff, config.d_model))

    def forward(self, x: torch.Tensor, layer: int, position: PositionScheme,
                ) -> tuple[torch.Tensor, torch.Tensor]:
        attended, weights = self.attn(self.ln_attn(x), layer, position)
        x = x + attended
        return x + self.mlp(self.ln_mlp(x)), weights


class RelvizTransformer(nn.Module):
    """The small transformer: ``forward(tokens [B, L]) -> (logits [B, L, vocab], attentions)``.

    ``attentions`` is a list with one [B, H, L, L] tensor per layer (rows sum to 1; causal
    models have exact zeros above the diagonal).
    """

    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        if not isinstance(config, ModelConfig):
            raise ValueError(f"config must be a ModelConfig; got {type(config).__name__}")
        self.config = config
        self.embed = nn.Embedding(config.vocab_size, config.d_model)
        self.position = _SCHEME_CLASSES[config.scheme](config)
        self.blocks = nn.ModuleList(Block(config) for _ in range(config.n_layers))
        self.ln_final = nn.LayerNorm(config.d_model)
        self.head = nn.Linear(config.d_model, config.vocab_size)

    def check_length(self, length: int) -> int:
        """Return ``length`` if this model can run at it, else ValueError saying why."""
        length = check_int("sequence length", length, minimum=1, maximum=MAX_LENGTH)
        self.position.check_length(length)
        return length

    def forward(self, tokens: torch.Tensor) -> tuple[torch.Tensor, list[torch.Tensor]]:
        if not isinstance(tokens, torch.Tensor) or tokens.dim() != 2 or tokens.dtype != torch.long:
            raise ValueError("tokens must be a LongTensor of shape [B, L]; got "
                             + (f"{tokens.dtype} {tuple(tokens.shape)}" if isinstance(tokens, torch.Tensor)
                                else type(tokens).__name__))
        if tokens.shape[0] < 1:
            raise ValueError("tokens must hold at least one sequence (B >= 1)")
        self.check_length(tokens.shape[1])
        if int(tokens.min()) < 0 or int(tokens.max()) >= self.config.vocab_size:
            raise ValueError(f"tokens must be ids from 0 to {self.config.vocab_size - 1}; got values "
                             f"from {int(tokens.min())} to {int(tokens.max())}")
        x = self.position.embed(self.embed(tokens))
        attentions = []
        for layer, block in enumerate(self.blocks):
            x, weights = block(x, layer, self.position)
            attentions.append(weights)
        return self.head(self.ln_final(x)), attentions

    def num_parameters(self) -> int:
        return sum(p.numel() for p in self.parameters())


def build_model(config: ModelConfig, *, seed: int | None = None) -> RelvizTransformer:
    """A freshly initialised model; with ``seed`` the initial weights depend only on it (the
    global RNG is left as it was, so a server's other users are not disturbed)."""
    if seed is None:
        return RelvizTransformer(config)
    seed = check_int("seed", seed, minimum=0, maximum=2**63 - 1)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return RelvizTransformer(config)
