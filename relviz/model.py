"""A small transformer with a pluggable position scheme.

One model, many ways to tell it where tokens are, so the app can train each one on the same
task and show what its attention learned. The schemes live in :mod:`relviz.schemes`, one
module each (``python -m relviz schemes`` lists them); :class:`ModelConfig` gets one field per
scheme parameter from that registry, so a new scheme needs no edit here.

Architecture: token embedding (+ absolute positions) → n_layers × [pre-LayerNorm
self-attention, pre-LayerNorm GELU MLP] → LayerNorm → linear head. The scheme
(:class:`relviz.schemes.Scheme`, an ``nn.Module``) owns its parameters and does one layer's
attention, so the blocks do not know which scheme they run.

``forward`` returns the attention weights of every layer instead of storing them on the
module: one cached model serves many app users at once under ``torch.inference_mode()``. It
computes them only when asked (``need_weights=True``, where the app draws them); otherwise every
layer takes the scheme's fused path (scaled_dot_product_attention), which training, evaluation
and the experiments use.

Sign convention everywhere: relative position = key index − query index (j − i).
"""
from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from relviz._checks import check_bool, check_int
from relviz.schemes import REGISTRY, Scheme, all_params, get_scheme
from relviz.schemes.base import MAX_LENGTH

__all__ = ["SCHEMES", "SCHEME_SUMMARIES", "MAX_LENGTH", "MAX_PARAMETERS", "ModelConfig", "RelvizTransformer",
           "build_model", "check_token_ids"]

#: Largest model a config may describe (200 MB of float32 weights, ~800 MB while training with
#: Adam): far above anything this app trains, far below what would take a server's memory.
MAX_PARAMETERS = 50_000_000

#: scheme name -> its parameters in :class:`ModelConfig` (what a checkpoint records), in listing order.
SCHEMES: dict[str, tuple[str, ...]] = {name: tuple(p.name for p in cls.params) for name, cls in REGISTRY.items()}

#: One line per scheme, for the app and the CLI.
SCHEME_SUMMARIES: dict[str, str] = {name: cls.summary for name, cls in REGISTRY.items()}


# ---------------------------------------------------------------------------------------
# Configuration


@dataclass(frozen=True)
class _ModelFields:
    """The fields every model has; :class:`ModelConfig` adds one per scheme parameter."""

    vocab_size: int = 10
    d_model: int = 64
    n_layers: int = 2
    n_heads: int = 4
    d_ff: int = 256
    scheme: str = "none"
    causal: bool = True

    def __post_init__(self) -> None:
        # Store what the checks return: numpy integers become ints (the config is written as JSON).
        def keep(name: str, value: Any) -> None:
            object.__setattr__(self, name, value)

        for name, lo, hi in (("vocab_size", 1, 1_000_000), ("d_model", 1, 8192), ("n_layers", 1, 64),
                             ("n_heads", 1, 256), ("d_ff", 1, 65536)):
            keep(name, check_int(name, getattr(self, name), minimum=lo, maximum=hi))
        if self.d_model % self.n_heads:
            raise ValueError(f"d_model must be divisible by n_heads; got d_model={self.d_model}, "
                             f"n_heads={self.n_heads}")
        scheme = get_scheme(self.scheme)
        check_bool("causal", self.causal)
        if scheme.causal_only and not self.causal:
            raise ValueError(f"scheme {self.scheme!r} is causal only: {scheme.causal_reason}; use causal=True")
        for param in all_params():
            keep(param.name, param.check(getattr(self, param.name)))
        for other in REGISTRY.values():
            for name, value in other.check_config(self, other is scheme).items():
                keep(name, value)
        if self.num_parameters() > MAX_PARAMETERS:
            raise ValueError(f"this model would have {self.num_parameters():,} parameters; at most "
                             f"{MAX_PARAMETERS:,} are allowed (lower d_model, d_ff, n_layers, vocab_size "
                             f"or the scheme's table sizes)")

    def num_parameters(self) -> int:
        """What build_model(self).num_parameters() will be, known before allocating anything."""
        d, f, v, layers = self.d_model, self.d_ff, self.vocab_size, self.n_layers
        block = 4 * d * d + 2 * d * f + 9 * d + f          # LayerNorms, qkv, out, MLP (with biases)
        return v * d + layers * block + 2 * d + d * v + v + get_scheme(self.scheme).num_parameters(self)

    @property
    def head_dim(self) -> int:
        return self.d_model // self.n_heads

    def scheme_params(self) -> dict[str, Any]:
        """The parameters of the current scheme only, e.g. ``{"clip": 8}`` for shaw."""
        return {p.name: getattr(self, p.name) for p in get_scheme(self.scheme).params}

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: object) -> ModelConfig:
        """Inverse of :meth:`to_dict`; unknown keys and wrong types raise ValueError.

        Missing keys take their defaults, so configs written by older versions (or before a
        scheme was added) still load.
        """
        if not isinstance(data, dict):
            raise ValueError(f"model config must be a JSON object; got {type(data).__name__}")
        known = [f.name for f in dataclasses.fields(cls)]
        unknown = sorted(set(data) - set(known), key=str)
        if unknown:
            raise ValueError(f"unknown model config keys: {', '.join(map(str, unknown))}; "
                             f"known: {', '.join(known)}")
        return cls(**data)

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


#: Everything needed to rebuild a model; validated on creation, round-trips through JSON.
#: Fields: those of every model, then one per scheme parameter (unused ones keep their defaults;
#: :meth:`scheme_params` returns only the current scheme's).
ModelConfig = dataclasses.make_dataclass(
    "ModelConfig", [(p.name, p.kind, dataclasses.field(default=p.default)) for p in all_params()],
    bases=(_ModelFields,), frozen=True, namespace={"__module__": __name__, "__doc__": _ModelFields.__doc__})


# ---------------------------------------------------------------------------------------
# The transformer


class SelfAttention(nn.Module):
    """Multi-head self-attention whose scores come from the shared position scheme."""

    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        self.n_heads = config.n_heads
        self.qkv = nn.Linear(config.d_model, 3 * config.d_model)
        self.out = nn.Linear(config.d_model, config.d_model)

    def forward(self, x: torch.Tensor, layer: int, position: Scheme, shared: Any, need_weights: bool,
                ) -> tuple[torch.Tensor, torch.Tensor | None]:
        batch, length, width = x.shape
        q, k, v = (t.view(batch, length, self.n_heads, -1).transpose(1, 2)
                   for t in self.qkv(x).chunk(3, dim=-1))                   # [B, H, L, D_head]
        output, weights = position.attend(layer, q, k, v, shared=shared, need_weights=need_weights)
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

    def forward(self, x: torch.Tensor, layer: int, position: Scheme, shared: Any, need_weights: bool,
                ) -> tuple[torch.Tensor, torch.Tensor | None]:
        attended, weights = self.attn(self.ln_attn(x), layer, position, shared, need_weights)
        x = x + attended
        return x + self.mlp(self.ln_mlp(x)), weights


def check_token_ids(tokens: torch.Tensor, vocab_size: int) -> None:
    """ValueError unless every id lies in 0..vocab_size − 1.

    The model's forward runs it on tokens in host memory only: on a GPU the check would make the host
    wait for the device on every call (reading min and max back), and the embedding lookup refuses an
    out-of-range id there itself (a device-side assert). Call it before moving user input to a GPU.
    """
    low, high = tokens.aminmax()
    if int(low) < 0 or int(high) >= vocab_size:
        raise ValueError(f"tokens must be ids from 0 to {vocab_size - 1}; got values from {int(low)} to {int(high)}")


class RelvizTransformer(nn.Module):
    """The small transformer: ``forward(tokens [B, L], need_weights=False) -> (logits [B, L, vocab],
    attentions)``.

    ``attentions`` is a list with one [B, H, L, L] tensor per layer (rows sum to 1; causal
    models have exact zeros above the diagonal) with ``need_weights=True``, else None (every
    layer took the fused path).

    Validation happens once, at this boundary: the config when it is built, the tokens' type,
    shape and length on every call, and their ids when they are in host memory
    (:func:`check_token_ids`). Inside, nothing is checked again and nothing is read back from the
    device, so a forward on a GPU never waits for it: the schemes call :mod:`relviz.attention` with
    ``validate=False``. A non-finite value cannot arise from valid weights and tokens (a
    checkpoint's tensors are checked finite when it loads); if one does (weights set by hand, a
    diverged training run), it propagates to the logits as NaN or inf, as in torch's own layers,
    and the loss shows it (``train`` reads the loss at each progress report and at the end:
    ``TrainResult.final_loss``).
    """

    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        if not isinstance(config, ModelConfig):
            raise ValueError(f"config must be a ModelConfig; got {type(config).__name__}")
        self.config = config
        self.embed = nn.Embedding(config.vocab_size, config.d_model)
        self.position = get_scheme(config.scheme)(config)
        self.blocks = nn.ModuleList(Block(config) for _ in range(config.n_layers))
        self.ln_final = nn.LayerNorm(config.d_model)
        self.head = nn.Linear(config.d_model, config.vocab_size)

    def check_length(self, length: int) -> int:
        """Return ``length`` if this model can run at it, else ValueError saying why."""
        length = check_int("sequence length", length, minimum=1, maximum=MAX_LENGTH)
        self.position.check_length(length)
        return length

    def forward(self, tokens: torch.Tensor, *, need_weights: bool = False,
                ) -> tuple[torch.Tensor, list[torch.Tensor] | None]:
        if not isinstance(tokens, torch.Tensor) or tokens.dim() != 2 or tokens.dtype != torch.long:
            raise ValueError("tokens must be a LongTensor of shape [B, L]; got "
                             + (f"{tokens.dtype} {tuple(tokens.shape)}" if isinstance(tokens, torch.Tensor)
                                else type(tokens).__name__))
        if tokens.shape[0] < 1:
            raise ValueError("tokens must hold at least one sequence (B >= 1)")
        self.check_length(tokens.shape[1])
        if tokens.device.type == "cpu":                                # host memory: no device sync
            check_token_ids(tokens, self.config.vocab_size)
        need_weights = check_bool("need_weights", need_weights)
        x = self.position.embed(self.embed(tokens))
        shared = self.position.prepare(tokens.shape[1], x)            # once per forward, for every layer
        attentions = []
        for layer, block in enumerate(self.blocks):
            x, weights = block(x, layer, self.position, shared, need_weights)
            attentions.append(weights)
        return self.head(self.ln_final(x)), (attentions if need_weights else None)

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
