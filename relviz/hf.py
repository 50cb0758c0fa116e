"""Real Hugging Face checkpoints: their position structure, read exactly, without loading the model.

``inspect(path)`` reads ``config.json`` and, only where the position structure has weights, just
those tensors from ``*.safetensors`` (``safe_open``: the header and the named tensors, nothing
else; sharded checkpoints through ``model.safetensors.index.json``). Pickled checkpoints
(``.bin``, ``.pt``, ``.pth``, ``.ckpt``, ``.pkl``) are never opened: loading a pickle can run
code. transformers is not needed; the tests compare every result with what transformers computes.

Families (config ``model_type``):

- T5 (t5, mt5, umt5, longt5): ``relative_attention_bias`` [num_buckets, heads], in block 0 of the encoder
  and of the decoder (UMT5: in every layer), added to the raw q·k logits (Raffel et al. 2020);
- ALiBi (bloom, mpt, falcon with ``alibi``): no weights, slopes from the head count, built the
  way each model's code builds them (Press et al. 2022; MPT's and Falcon's variants differ);
- RoPE (llama, mistral, qwen2, qwen3, gemma, gemma2, phi3, gpt_neox, ...): θ and the attention
  scaling from the config (relviz.rope);
- learned absolute (gpt2 ``wpe``, bert ``position_embeddings``).
"""
from __future__ import annotations

import json
import math
import os
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from relviz._checks import check_int
from relviz.positions import t5_bias, t5_config
from relviz.rope import RopeConfig, rope_config_from_hf, rope_parameters

__all__ = ["ModelPositions", "inspect", "from_config", "SUPPORTED", "PICKLE_SUFFIXES", "MAX_CONFIG_BYTES"]

T5_TYPES = ("t5", "mt5", "umt5", "longt5")
ALIBI_TYPES = ("bloom", "mpt", "falcon")
ROPE_TYPES = ("llama", "mistral", "mixtral", "qwen2", "qwen3", "gemma", "gemma2", "phi3", "gpt_neox", "olmo",
              "stablelm")
LEARNED_TYPES = ("gpt2", "bert")
#: model_type -> scheme (a registry name: t5, alibi, rope, learned)
SUPPORTED: dict[str, str] = {**{t: "t5" for t in T5_TYPES}, **{t: "alibi" for t in ALIBI_TYPES},
                             **{t: "rope" for t in ROPE_TYPES}, **{t: "learned" for t in LEARNED_TYPES}}
PICKLE_SUFFIXES = (".bin", ".pt", ".pth", ".ckpt", ".pkl", ".pickle")
MAX_CONFIG_BYTES = 4 << 20
HUB_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,95}/[A-Za-z0-9][A-Za-z0-9_.-]{0,95}$")
INDEX_NAME = "model.safetensors.index.json"


def _supported_text() -> str:
    return "; ".join(f"{scheme}: {', '.join(t for t, s in SUPPORTED.items() if s == scheme)}"
                     for scheme in ("t5", "alibi", "rope", "learned"))


# ---------------------------------------------------------------------------------------
# Reading only what is needed


class _Tensors:
    """Names and lazy reads of a directory's safetensors, one shard opened per read."""

    def __init__(self, directory: Path, fetch: Callable[[str], Path] | None = None) -> None:
        self.directory = directory
        self.fetch = fetch or (lambda name: directory / name)
        self.read: list[str] = []           # the tensors actually read, for the record
        index = self._file(INDEX_NAME)
        if index is not None:
            try:
                weight_map = json.loads(index.read_text(encoding="utf-8"))["weight_map"]
            except (ValueError, KeyError, TypeError) as exc:
                raise ValueError(f"{INDEX_NAME} is not a valid safetensors index: {exc}") from exc
            if not isinstance(weight_map, dict):
                raise ValueError(f"{INDEX_NAME}: weight_map must map tensor names to shard files")
            self.where = {str(k): str(v) for k, v in weight_map.items()}
        else:
            single = self._file("model.safetensors")
            self.where = {}
            if single is not None:
                for name in self._keys(single):
                    self.where[name] = "model.safetensors"

    def _file(self, name: str) -> Path | None:
        try:
            path = self.fetch(name)
        except FileNotFoundError:
            return None
        return path if path is not None and path.is_file() else None

    @staticmethod
    def _keys(path: Path) -> list[str]:
        from safetensors import safe_open

        try:
            with safe_open(str(path), framework="pt") as handle:
                return list(handle.keys())
        except Exception as exc:  # noqa: BLE001 - safetensors raises its own error types on corrupt files
            raise ValueError(f"{path.name} is not a readable safetensors file: {exc}") from exc

    def find(self, suffix: str) -> str | None:
        """The one tensor name ending in ``suffix`` (prefixes differ between model classes)."""
        hits = sorted(n for n in self.where if n == suffix or n.endswith("." + suffix))
        return hits[0] if hits else None

    def get(self, name: str) -> torch.Tensor:
        from safetensors import safe_open

        shard = self.where[name]
        if Path(shard).name != shard or not shard.endswith(".safetensors"):
            raise ValueError(f"{INDEX_NAME} names shard {shard!r}: only .safetensors files in the same directory")
        path = self._file(shard)
        if path is None:
            raise ValueError(f"shard {shard} (holding {name}) is missing from {self.directory}")
        try:
            with safe_open(str(path), framework="pt") as handle:
                tensor = handle.get_tensor(name)
        except Exception as exc:  # noqa: BLE001
            raise ValueError(f"could not read {name} from {shard}: {exc}") from exc
        self.read.append(name)
        return tensor


def _refuse_pickles(directory: Path) -> None:
    pickles = sorted(p.name for p in directory.iterdir() if p.suffix.lower() in PICKLE_SUFFIXES) \
        if directory.is_dir() else []
    if pickles:
        raise ValueError(f"this model's weights are only in {pickles[0]}: relviz never opens pickled checkpoints "
                         f"({', '.join(PICKLE_SUFFIXES)}), since loading a pickle can run arbitrary code. Convert "
                         "it to safetensors (e.g. transformers' save_pretrained(..., safe_serialization=True)).")
    raise ValueError(f"no model.safetensors or {INDEX_NAME} in {directory}")


def _read_config(path: Path) -> dict[str, Any]:
    if not path.is_file():
        raise ValueError(f"no config.json in {path.parent}: not a Hugging Face model directory")
    if path.stat().st_size > MAX_CONFIG_BYTES:
        raise ValueError(f"config.json is {path.stat().st_size:,} bytes: larger than {MAX_CONFIG_BYTES:,}, refused")
    try:
        config = json.loads(path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise ValueError(f"config.json is not valid JSON: {exc}") from exc
    if not isinstance(config, dict):
        raise ValueError("config.json must hold a JSON object")
    return config


# ---------------------------------------------------------------------------------------
# The result


@dataclass
class ModelPositions:
    """A checkpoint's position structure. ``config`` holds the position-related settings read."""

    model_type: str
    scheme: str
    config: dict[str, Any]
    source: str
    tensors_read: list[str] = field(default_factory=list)
    _tables: dict[tuple[str, int], torch.Tensor] = field(default_factory=dict, repr=False)
    _rope: RopeConfig | None = field(default=None, repr=False)
    _positions: torch.Tensor | None = field(default=None, repr=False)
    directory: Path | None = None   # where the weights are (None: a config alone, or the Hub)

    def _need(self, scheme: str, what: str) -> None:
        if self.scheme != scheme:
            raise ValueError(f"{what} needs a {scheme} model; {self.model_type} uses {self.scheme}")

    # T5 family
    @property
    def stacks(self) -> list[str]:
        """The stacks with bias tables, encoder first (T5's bidirectional side, then the decoder)."""
        present = {stack for stack, _ in self._tables}
        return [stack for stack in ("encoder", "decoder") if stack in present]

    def layers(self, stack: str) -> list[int]:
        return sorted(layer for s, layer in self._tables if s == stack)

    def bias_table(self, *, stack: str = "encoder", layer: int = 0) -> torch.Tensor:
        """The learned table [num_buckets, heads] that this stack/layer looks up."""
        self._need("t5", "bias_table")
        if stack not in self.stacks:
            raise ValueError(f"stack must be one of {', '.join(self.stacks)}; got {stack!r}")
        if (stack, layer) in self._tables:
            return self._tables[(stack, layer)]
        layers = self.layers(stack)
        if self.config["per_layer_tables"]:
            raise ValueError(f"layer must be one of {layers[0]}..{layers[-1]} for the {stack}; got {layer!r}")
        check_int("layer", layer, minimum=0, maximum=self.config[f"{stack}_layers"] - 1)
        return self._tables[(stack, 0)]  # T5: block 0's table serves every layer of the stack

    def bias(self, q_len: int, k_len: int, *, stack: str = "encoder", layer: int = 0) -> torch.Tensor:
        """[H, q_len, k_len]: what the model adds to its attention logits (encoder bidirectional,
        decoder unidirectional), exactly transformers' ``compute_bias`` without the batch dim."""
        table = self.bias_table(stack=stack, layer=layer).float()
        return t5_bias(table, q_len, k_len, num_buckets=self.config["num_buckets"],
                       max_distance=self.config["max_distance"], bidirectional=stack == "encoder")

    def local_block_bias(self, *, layer: int = 0) -> torch.Tensor:
        """LongT5's encoder bias for one block [H, block_length, 3·block_length]: queries of a block against
        keys of that block and its two neighbours (transformers' LongT5 ``compute_bias(block_len)``); the
        local mask then keeps |j − i| ≤ local_radius. (The transient-global side bias is not read.)"""
        if self.model_type != "longt5":
            raise ValueError(f"local_block_bias is LongT5's; this model is {self.model_type}")
        block = self.config["block_length"]
        table = self.bias_table(stack="encoder", layer=layer).float()
        return t5_bias(table, block, 3 * block, num_buckets=self.config["num_buckets"],
                       max_distance=self.config["max_distance"], bidirectional=True, q_offset=block)

    # ALiBi family
    def alibi_slopes(self) -> torch.Tensor:
        """[H] the slopes as the model's own code builds them (dtype as it uses them)."""
        self._need("alibi", "alibi_slopes")
        return _alibi_slopes(self.model_type, self.config["heads"], self.config.get("alibi_bias_max", 8))

    # RoPE family
    @property
    def rope(self) -> RopeConfig:
        self._need("rope", "rope")
        assert self._rope is not None
        return self._rope

    def rope_inv_freq(self, seq_len: int | None = None) -> torch.Tensor:
        return rope_parameters(self.rope, seq_len, device="cpu")[0]

    def rope_attention_scaling(self, seq_len: int | None = None) -> float:
        return rope_parameters(self.rope, seq_len, device="cpu")[1]

    # learned absolute
    def position_embeddings(self) -> torch.Tensor:
        """[max_positions, d] the learned absolute position vectors."""
        self._need("learned", "position_embeddings")
        assert self._positions is not None
        return self._positions

    def to_json(self) -> dict[str, Any]:
        """model_type, scheme, config and the small tables (no L × L matrices)."""
        out: dict[str, Any] = {"model_type": self.model_type, "scheme": self.scheme, "config": self.config,
                               "source": self.source, "tensors_read": self.tensors_read}
        if self.scheme == "t5":
            out["bias_tables"] = {f"{stack}.{layer}": table.float().tolist()
                                  for (stack, layer), table in sorted(self._tables.items())}
        elif self.scheme == "alibi":
            out["alibi_slopes"] = self.alibi_slopes().float().tolist()
        elif self.scheme == "rope":
            out["rope_inv_freq"] = self.rope_inv_freq().tolist()
            out["rope_attention_scaling"] = self.rope_attention_scaling()
        else:
            out["position_embeddings_shape"] = list(self.position_embeddings().shape)
        return out


# ---------------------------------------------------------------------------------------
# Per family


def _alibi_slopes(model_type: str, heads: int, alibi_bias_max: float = 8) -> torch.Tensor:
    """Slopes as BLOOM / Falcon (bfloat16) / MPT build them in transformers."""
    if model_type == "mpt":  # MPT: 2^(−max·h/n₂) over the next power of 2, odd ones first when n is not one
        n2 = 2 ** math.ceil(math.log2(heads))
        base = torch.arange(1, n2 + 1, dtype=torch.int64).float() * (alibi_bias_max / n2)
        slopes = 1.0 / torch.pow(2, base)
        if n2 != heads:
            slopes = torch.concat([slopes[1::2], slopes[::2]])[:heads]
        return slopes
    # BLOOM and Falcon: Press et al.'s rule in float32 (powers of one base, then every other slope of 2p)
    closest = 2 ** math.floor(math.log2(heads))
    base = torch.full((), 2 ** (-(2 ** -(math.log2(closest) - 3))), dtype=torch.float32)
    slopes = torch.pow(base, torch.arange(1, 1 + closest, dtype=torch.int32))
    if closest != heads:
        extra_base = torch.full((), 2 ** (-(2 ** -(math.log2(2 * closest) - 3))), dtype=torch.float32)
        remaining = min(closest, heads - closest)
        slopes = torch.cat([slopes, torch.pow(extra_base, torch.arange(1, 1 + 2 * remaining, 2, dtype=torch.int32))])
    return slopes.bfloat16() if model_type == "falcon" else slopes


def _t5(model_type: str, config: dict[str, Any], tensors: _Tensors) -> tuple[dict, dict]:
    num_buckets = int(config.get("relative_attention_num_buckets", 32))
    max_distance = int(config.get("relative_attention_max_distance", 128))  # older configs omit it
    t5_config(num_buckets, max_distance, True)
    t5_config(num_buckets, max_distance, False)
    heads = int(config["num_heads"])
    encoder_layers = int(config.get("num_layers", 6))
    decoder_layers = int(config.get("num_decoder_layers") or encoder_layers)
    per_layer = model_type == "umt5"
    tables: dict[tuple[str, int], torch.Tensor] = {}
    # LongT5's encoder attends block-locally (LocalSelfAttention / TransientGlobalSelfAttention).
    kinds = ("SelfAttention", "LocalSelfAttention", "TransientGlobalSelfAttention")
    for stack, count in (("encoder", encoder_layers), ("decoder", decoder_layers)):
        for layer in range(count if per_layer else 1):
            name = next((n for kind in kinds if (n := tensors.find(
                f"{stack}.block.{layer}.layer.0.{kind}.relative_attention_bias.weight")) is not None), None)
            if name is None:
                continue
            table = tensors.get(name)
            if tuple(table.shape) != (num_buckets, heads):
                raise ValueError(f"{name} has shape {tuple(table.shape)}; config.json says "
                                 f"[relative_attention_num_buckets, num_heads] = [{num_buckets}, {heads}]")
            tables[(stack, layer)] = table
    if not tables:
        raise ValueError("no relative_attention_bias tensor found in the safetensors (expected "
                         "encoder.block.0.layer.0.SelfAttention.relative_attention_bias.weight)")
    settings = {"num_buckets": num_buckets, "max_distance": max_distance, "heads": heads,
                "encoder_layers": encoder_layers, "decoder_layers": decoder_layers, "per_layer_tables": per_layer}
    if model_type == "longt5":
        radius = int(config.get("local_radius", 127))
        settings.update(encoder_attention_type=config.get("encoder_attention_type", "local"), local_radius=radius,
                        block_length=radius + 1)
    return settings, tables


def _alibi(model_type: str, config: dict[str, Any]) -> dict[str, Any]:
    if model_type == "bloom":
        return {"heads": int(config.get("n_head") or config["num_attention_heads"])}
    if model_type == "mpt":
        attn = config.get("attn_config") or {}
        if not attn.get("alibi", False):
            raise ValueError("this MPT config has attn_config.alibi = false: it uses learned positions, "
                             "which relviz does not read for MPT")
        return {"heads": int(config["n_heads"]), "alibi_bias_max": float(attn.get("alibi_bias_max", 8))}
    if not config.get("alibi", False):
        raise ValueError("this Falcon config has alibi = false: it uses RoPE (not read for Falcon)")
    heads = int(config.get("num_attention_heads") or config["n_head"])
    return {"heads": heads, "slopes_dtype": "bfloat16",
            "divided_by_sqrt_head_dim": True, "head_dim": int(config["hidden_size"]) // heads}


def _learned(model_type: str, config: dict[str, Any], tensors: _Tensors) -> tuple[dict, torch.Tensor]:
    suffix = "wpe.weight" if model_type == "gpt2" else "embeddings.position_embeddings.weight"
    name = tensors.find(suffix)
    if name is None:
        raise ValueError(f"no {suffix} tensor found in the safetensors")
    table = tensors.get(name)
    return {"max_positions": int(table.shape[0]), "d_model": int(table.shape[1]), "tensor": name}, table


# ---------------------------------------------------------------------------------------
# Hub ids


def _hub_fetcher(repo_id: str) -> Callable[[str], Path]:
    """Download one named file of ``repo_id`` (cached by huggingface_hub) when first asked for."""
    try:
        from huggingface_hub import hf_hub_download
        from huggingface_hub.errors import EntryNotFoundError, LocalEntryNotFoundError
    except ImportError as exc:
        raise ValueError(f"{repo_id!r} is not a local directory, and reading a Hub model needs huggingface_hub: "
                         "pip install 'relviz[hf]' (or pip install huggingface_hub)") from exc

    def fetch(name: str) -> Path:
        try:
            return Path(hf_hub_download(repo_id, name))
        except LocalEntryNotFoundError as exc:  # (a subclass of EntryNotFoundError: test it first)
            raise ValueError(f"could not download {name} of {repo_id}: no internet connection (or the Hub is "
                             "disabled here, HF_HUB_OFFLINE)") from exc
        except EntryNotFoundError as exc:
            raise FileNotFoundError(name) from exc
        except Exception as exc:  # noqa: BLE001 - network, auth, missing repo: say which file and why
            raise ValueError(f"could not download {name} of {repo_id}: {type(exc).__name__}: {exc}") from exc

    return fetch


# ---------------------------------------------------------------------------------------
# The entry point


def inspect(path: str | os.PathLike[str], *, allow_hub: bool = True) -> ModelPositions:
    """Read a model directory's position structure (or, with ``allow_hub``, a Hub id "owner/name").

    Only config.json and the position tensors are read; the result says which tensors.
    """
    if not isinstance(path, (str, os.PathLike)):
        raise ValueError(f"path must be a directory path or a Hub id; got {type(path).__name__}")
    text = os.fspath(path)
    directory = Path(text)
    fetch: Callable[[str], Path] | None = None
    if directory.is_dir():
        config_path = directory / "config.json"
        source = str(directory)
    elif HUB_ID.match(text) and not text.startswith((".", "/")) and allow_hub:
        fetch = _hub_fetcher(text)
        try:
            config_path = fetch("config.json")
        except FileNotFoundError as exc:
            raise ValueError(f"{text} has no config.json on the Hub") from exc
        directory = config_path.parent
        source = f"hub:{text}"
    else:
        raise ValueError(f"{text!r} is not a model directory" + (" (and Hub ids are disabled here)"
                                                                  if HUB_ID.match(text) else ""))
    config = _read_config(config_path)
    result = from_config(config, source=source, _weights=True)
    if result.scheme in ("rope", "alibi"):
        return result
    result.directory = directory
    tensors = _Tensors(directory, fetch)
    if not tensors.where:
        _refuse_pickles(directory)
    if result.scheme == "t5":
        result.config, result._tables = _t5(result.model_type, config, tensors)
    else:
        result.config, result._positions = _learned(result.model_type, config, tensors)
    result.tensors_read = list(tensors.read)
    return result


def from_config(config: dict[str, Any], *, source: str = "config", _weights: bool = False) -> ModelPositions:
    """The structure a config alone determines (RoPE, ALiBi): e.g. a published config.json's fields.

    T5 and learned absolute positions live in weights: those need :func:`inspect` on a directory.
    """
    if not isinstance(config, dict):
        raise ValueError(f"config must be a dict (a parsed config.json); got {type(config).__name__}")
    model_type = config.get("model_type")
    if model_type not in SUPPORTED:
        raise ValueError(f"model_type {model_type!r} is not supported. Supported: {_supported_text()}")
    scheme = SUPPORTED[model_type]
    result = ModelPositions(model_type=model_type, scheme=scheme, config={}, source=source)
    if scheme == "rope":
        result._rope = rope = rope_config_from_hf(config)
        result.config = {"head_dim": rope.head_dim, "rotary_dim": rope.rotary_dim, "base": rope.base,
                         "max_position_embeddings": rope.max_position_embeddings,
                         "rope_type": rope.scaling.rope_type,
                         "scaling": {k: v for k, v in vars(rope.scaling).items() if v is not None and k != "rope_type"}}
    elif scheme == "alibi":
        result.config = _alibi(model_type, config)
    elif not _weights:
        raise ValueError(f"{model_type} keeps its positions in weights: inspect a model directory instead")
    return result


# ---------------------------------------------------------------------------------------
# What the app shows: the operator's list, the existing views' data, the model's own attention

MODELS_ENV = "RELVIZ_MODELS"
ALLOW_HUB_ENV = "RELVIZ_ALLOW_HUB"
MAX_MODEL_MB_ENV = "RELVIZ_MAX_MODEL_MB"
DEFAULT_MAX_MODEL_MB = 500
MAX_TOKENS = 64
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "spiece.model", "vocab.txt", "vocab.json")


def configured_models(env: dict[str, str] | None = None) -> dict[str, str]:
    """name -> directory (or "hub:owner/name") from RELVIZ_MODELS, the operator's list.

    Entries are separated by the path separator (':' on Linux); each is a directory, "name=directory",
    or "hub:owner/name" (kept only when RELVIZ_ALLOW_HUB=1). Missing directories are skipped.
    """
    env = os.environ if env is None else env
    allow_hub = env.get(ALLOW_HUB_ENV, "") == "1"
    models: dict[str, str] = {}
    for entry in (e.strip() for e in env.get(MODELS_ENV, "").split(os.pathsep)):
        if not entry:
            continue
        name, _, target = entry.partition("=") if "=" in entry else ("", "", entry)
        if target.startswith("hub:"):
            if allow_hub and HUB_ID.match(target[4:]):
                models[name or target[4:]] = target
            continue
        directory = Path(target).expanduser()
        if (directory / "config.json").is_file():
            models[name or directory.name] = str(directory.resolve())
    return models


def open_configured(target: str) -> ModelPositions:
    """inspect() of an entry of configured_models (a directory, or hub:owner/name)."""
    return inspect(target[4:]) if target.startswith("hub:") else inspect(target, allow_hub=False)


def weights_bytes(directory: Path) -> int:
    return sum(p.stat().st_size for p in Path(directory).glob("*.safetensors"))


def has_tokenizer(directory: Path | None) -> bool:
    return directory is not None and any((Path(directory) / name).is_file() for name in TOKENIZER_FILES)


def max_model_bytes(env: dict[str, str] | None = None) -> int:
    env = os.environ if env is None else env
    try:
        megabytes = float(env.get(MAX_MODEL_MB_ENV, DEFAULT_MAX_MODEL_MB))
    except ValueError:
        megabytes = DEFAULT_MAX_MODEL_MB
    return int(max(megabytes, 0) * 1e6)


def bias_curve(positions: ModelPositions, *, stack: str = "encoder", layer: int = 0, extent: int = 160):
    """The learned bias of every head against j − i (relviz.schemes.BiasCurve, as the Live attention page
    draws it for a relviz T5 model)."""
    from relviz.schemes.t5 import bias_curve as t5_curve

    extent = check_int("extent", extent, minimum=1, maximum=1 << 16)
    table = positions.bias_table(stack=stack, layer=layer).float().numpy()
    return t5_curve(table, num_buckets=positions.config["num_buckets"], max_distance=positions.config["max_distance"],
                    bidirectional=stack == "encoder", extent=extent)


def learned_similarity(positions: ModelPositions, n: int):
    """Cosine between the first ``n`` position vectors (relviz.schemes.SimilarityMatrix;
    relviz.schemes.views.relative_share says how much of it depends on j − i alone)."""
    from relviz.schemes.views import SimilarityMatrix, norms_and_cosine

    table = positions.position_embeddings()
    n = check_int("n", n, minimum=3, maximum=table.shape[0])
    _, cosine = norms_and_cosine([table[:n]])                                   # [1, n, n]
    return SimilarityMatrix("learned absolute: cosine between position vectors p_i, p_j", "", "position",
                            torch.arange(n).numpy(), cosine[0].astype("float32"))


def check_runnable(directory: Path, *, max_bytes: int | None = None) -> None:
    """Refuse to run a model above the operator's size limit or without a tokenizer (ValueError says which)."""
    size, limit = weights_bytes(directory), max_model_bytes() if max_bytes is None else max_bytes
    if size > limit:
        raise ValueError(f"this model's weights are {size / 1e6:,.0f} MB; the operator allows running models up to "
                         f"{limit / 1e6:,.0f} MB here ({MAX_MODEL_MB_ENV})")
    if not has_tokenizer(directory):
        raise ValueError(f"no tokenizer files in this model directory (one of {', '.join(TOKENIZER_FILES)})")


def load_model(directory: Path, *, max_bytes: int | None = None):
    """(tokenizer, model) with eager attention, from safetensors only; refuses models above max_bytes."""
    try:
        from transformers import AutoModel, AutoTokenizer
    except ImportError as exc:
        raise ValueError("running the model needs transformers: pip install 'relviz[hf]'") from exc
    check_runnable(directory, max_bytes=max_bytes)
    tokenizer = AutoTokenizer.from_pretrained(str(directory))
    model = AutoModel.from_pretrained(str(directory), attn_implementation="eager", use_safetensors=True).eval()
    return tokenizer, model


def model_attention(tokenizer, model, text: str, *, max_tokens: int = MAX_TOKENS) -> tuple[list[str], torch.Tensor]:
    """(tokens, attention [layers, heads, L, L]) of the model's self-attention on ``text`` (the encoder's for
    encoder-decoder models), at most ``max_tokens`` tokens."""
    if not isinstance(text, str) or not text.strip():
        raise ValueError("text must be a non-empty string")
    max_tokens = check_int("max_tokens", max_tokens, minimum=1, maximum=512)
    encoded = tokenizer(text, return_tensors="pt", truncation=True, max_length=max_tokens)
    ids = encoded["input_ids"][:, :max_tokens]
    with torch.inference_mode():
        if getattr(model.config, "is_encoder_decoder", False):
            out = model.get_encoder()(input_ids=ids, output_attentions=True)
        else:
            out = model(input_ids=ids, output_attentions=True)
    attentions = torch.stack([a[0] for a in out.attentions]).float()         # [layers, heads, L, L]
    return tokenizer.convert_ids_to_tokens(ids[0].tolist()), attentions
