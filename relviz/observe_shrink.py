"""Shrink a config to tiny widths, keeping everything position depends on, for the observer to build it.

One rule for every family, driven by the config's own data (no per-family list):

- the width is the field transformers' config class maps ``hidden_size`` to (``d_model``, ``n_embd``,
  ``emb_dim``: its ``attribute_map``), the heads the field it maps ``num_attention_heads`` to;
- every heads field becomes 2 (a key/value heads field 1 where it groups queries, 2 where it does not), and
  the width keeps its width per head: ``2 * width / heads`` (``2 * head_dim`` where that is not whole);
- any other field holding the width itself (``attention_hidden_size``, ``embedding_dim``) follows it, and
  a field whose name says it is a projection's width (intermediate, ffn, inner, rank, hidden...) is cut in
  the same proportion, rounded up to a multiple of ``ROUND`` (so divisors such as 2, 4 and 8 still divide);
- head dims, rotary dims, RoPE parameters, layer counts and layer types, positions, ids and buckets are
  never touched; windows and chunks are cut to a few positions so that a short probe shows them (the real
  values stay the config's);
- a nested config (``vision_config``, ``audio_config``, a per-layer list of settings) is shrunk by the
  same rule, with its own class's field names where it names its model_type.
"""
from __future__ import annotations

import math
import re
from collections.abc import Mapping
from typing import Any

from relviz.mechanisms.indexer import SHRUNK as INDEXER_SHRUNK

__all__ = ["shrink", "SMALL_WINDOW", "SMALL_CHUNK", "WINDOW_FIELDS", "CHUNK_FIELDS", "TINY", "ROUND", "MLP", "ROUTED",
           "PROBE_FIRST", "PROBE_TOKENS", "fills"]

SMALL_WINDOW = 3
SMALL_CHUNK = 4
#: window and chunk fields, cut to a few positions so the probes show them (the real values stay the config's)
WINDOW_FIELDS = ("sliding_window", "attention_window_size", "sliding_window_size")
CHUNK_FIELDS = ("attention_chunk_size",)
#: fields set to given tiny values (position math never reads them); they win over the proportional rule
TINY = {"vocab_size": 64, "vocab_size_per_layer_input": 64, "intermediate_size": 32, "moe_intermediate_size": 16,
        "shared_expert_intermediate_size": 16, "intermediate_size_mlp": 32, "num_local_experts": 4,
        "n_routed_experts": 4, "num_experts": 4, "num_experts_per_tok": 1, "n_group": 1, "topk_group": 1,
        "n_shared_experts": 1, "kv_lora_rank": 16, "linear_num_value_heads": 2, "linear_num_key_heads": 2,
        "linear_key_head_dim": 8, "linear_value_head_dim": 8, "mamba_d_state": 8, "mamba_n_heads": 4,
        "mamba_d_head": "auto", "mamba_n_groups": 1, "ssm_state_size": 8, "lru_width": None}
#: token ids a tiny vocabulary must still hold (an id past it is moved inside: position ids never read them)
TOKEN_IDS = {"pad_token_id": 0, "bos_token_id": 1, "eos_token_id": 1}
#: a cut width is a multiple of this (a head count, a group count or a block of 8 still divides it)
ROUND = 8
#: a field named so is a count of heads
HEADS = re.compile(r"heads$|(^|_)n_head$")
#: ... of key/value heads (grouped where it is below the query heads)
KV_HEADS = re.compile(r"key_value|kv")
#: ... of groups of heads (which must divide the heads)
GROUPS = re.compile(r"n_groups$|num_groups$")
#: ... of the experts a token is routed to, or of their groups (1, so that any count of experts holds them)
ROUTED = re.compile(r"experts_per_tok|expert_group|^moe_topk$|^moe_top_k$")
#: a field named so holds a projection's width (cut in proportion to the width)
WIDE = re.compile(r"hidden|d_model|embd|emb_dim|embedding_dim|intermediate|ffn|dff|inner|dim_ff|rank|width|"
                  r"state_size|proj_size|channels|filters|units|d_ssm")
#: ... of an MLP's width (set where the config leaves it to the class)
MLP = re.compile(r"^n_inner$|^d_inner$|^intermediate_size$|^ffn_dim$")
#: ... unless it is named for what position depends on, or for a count, an id or a geometry
KEEP = re.compile(r"head_dim|d_head|dim_head|kv_channels|rotary|rope|nope|position|ctx|seq|context|window|chunk|"
                  r"length|token|bucket|distance|topk|vocab|layers|rate|image|patch|crop|sampl|partial|stride|"
                  r"kernel|conv|group|block|period|index|layer|experts|expert_num|_id$|max_|min_|factor|ratio|"
                  r"multiple|top_k")
#: a field named so is a divisor, never a size
DIVISOR = re.compile(r"divisible|multiple")
#: the width of a model with no heads field
FREE_WIDTH = 64
#: a head width shrink(narrow=True) cuts an unnamed one to
NARROW_HEAD = 16
#: the probe's tokens are drawn from these ids: a special id among them is moved out (XLM pads with 2, and
#: would mask each probe token 2 as padding); special ids moved inside a tiny vocabulary go above them
PROBE_FIRST, PROBE_TOKENS = 2, 16


#: a null field named so is a choice among the config's own list of options (X-MOD's default_language among its
#: languages: its forward refuses token ids alone without one); shrinking picks the first
DEFAULT_CHOICE = re.compile(r"^default_(\w+)$")


def fills(key: str) -> bool:
    """Whether shrinking fills this field where a config leaves it null, no position depending on it: an MLP width,
    a count of experts per token, a default choice among the config's options (the observer otherwise keeps a null
    that the config class keeps null too)."""
    return bool(MLP.search(key) or ROUTED.search(key) or DEFAULT_CHOICE.search(key))


def _default_choices(out: dict[str, Any]) -> None:
    for key in [k for k in out if out[k] is None and DEFAULT_CHOICE.search(k)]:
        options = out.get(DEFAULT_CHOICE.search(key).group(1) + "s")
        if isinstance(options, (list, tuple)) and options and isinstance(options[0], str):
            out[key] = options[0]


def _aliases(model_type: Any) -> dict[str, str]:
    """transformers' own names for this class's width and heads (its config class's attribute_map)."""
    try:
        from transformers import CONFIG_MAPPING
        return dict(getattr(CONFIG_MAPPING[model_type], "attribute_map", {}) or {})
    except (ImportError, KeyError, TypeError):
        return {}


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _whole(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value > 0


def shrink(config: Mapping[str, Any], *, heads_to: int = 2, narrow: bool = False) -> dict[str, Any]:
    """The same model with tiny widths: layer count, layer types, rope fields and head dim kept; ``heads_to``
    heads (two; four where transformers splits the heads in four, as CodeGen does). ``narrow``: a head width the
    config does not name is cut to ``NARROW_HEAD`` too (for a model past the observer's cap that rotates nothing)."""
    out = {k: v for k, v in config.items() if not k.startswith("_") and k not in ("architectures", "auto_map")}
    aliases = _aliases(out.get("model_type"))
    width_field = aliases.get("hidden_size", "hidden_size")
    heads_field = aliases.get("num_attention_heads", "num_attention_heads")
    if heads_field not in out:                      # a state-space model's heads (Mamba-2's num_heads)
        heads_field = next((k for k in out if HEADS.search(k) and not KV_HEADS.search(k)), heads_field)
    heads, width = out.get(heads_field), out.get(width_field)
    given = out.get(aliases.get("head_dim", "head_dim"))
    if any(v is not None and not _whole(v) for v in (heads, width, given)):
        return _fixed(out)                          # a hostile value is left as it is, for read_plan to refuse
    if width is None:                               # no width of its own (a composite): its nested configs shrink
        _shrink_fields(out, 1, 1, 1, heads_to)
        return _fixed(out)
    if heads is None:                               # no heads (RWKV): a width of 64 at most
        small = min(width, FREE_WIDTH)
        heads = max(1, heads_to * width // small)
    else:
        head_dim = given or (min(width // heads, NARROW_HEAD) if narrow else width // heads)
        ratio = heads_to * width // heads if (heads_to * width) % heads == 0 and not narrow else 0
        small = ratio if ratio % ROUND == 0 and ratio >= 2 * ROUND else heads_to * head_dim
        for key, value in (("num_key_value_heads", heads_to), ("head_dim", head_dim)):
            if key in out and out[key] is None:     # left to the class, which derives it from the real sizes
                out[key] = value
    out[width_field] = min(small, width)
    _shrink_fields(out, width, min(small, width), heads, heads_to)
    return _rederived(config, _fixed(out))


def _rederived(config: Mapping[str, Any], out: dict[str, Any]) -> dict[str, Any]:
    """Fields the config class derives from the others (not fields it declares: Zamba2's mamba_headdim, expand ×
    width / Mamba heads) that the config holds as derived, derived again from the shrunk fields, so that a kept
    640 does not meet a width of 160. A field whose value differs from what the class derives was set on purpose,
    and is kept."""
    import dataclasses
    try:
        from transformers import CONFIG_MAPPING
    except ImportError:      # the [hf] extra is absent: nothing to derive with (the observer says how to install it)
        return out
    try:
        cls = CONFIG_MAPPING[config.get("model_type")]
        declared = {f.name for f in dataclasses.fields(cls)} | set(getattr(cls, "attribute_map", {}) or {})
        def derive(fields: Mapping[str, Any]) -> dict[str, Any]:
            return cls(**{k: v for k, v in fields.items() if k in declared and k != "model_type"}).to_dict()
        full, shrunk = derive(config), derive(out)
    except Exception:  # noqa: BLE001 - no such class, not a dataclass, or one that refuses: the fields stay as shrunk
        return out
    for key, value in config.items():           # (a number: a nested setting is shrunk by the rules above)
        if key not in declared and _number(value) and key in full and key in shrunk and full[key] == value \
                and out.get(key) != shrunk[key]:
            out[key] = shrunk[key]
    return out


def _shrink_fields(out: dict[str, Any], width: int, small: int, heads: int, heads_to: int) -> None:
    """Every heads field to ``heads_to`` (kv half that where grouped), the width and fields equal to it to
    ``small``, projections cut in proportion, a group count that would not divide the heads to 1."""
    queries = [v for k, v in out.items() if isinstance(k, str) and HEADS.search(k) and not KV_HEADS.search(k)
               and _whole(v)]
    local = max(queries) if queries else heads      # a nested setting's own query heads, where it names them
    for key, value in list(out.items()):
        if isinstance(value, Mapping):
            out[key] = _nested(value, width, small, heads, heads_to)
        elif isinstance(value, list) and value and all(isinstance(v, Mapping) for v in value):
            out[key] = [_nested(v, width, small, heads, heads_to) for v in value]
        elif value is None and MLP.search(key) and width > 1:
            out[key] = small                        # an MLP width left to the class (GPT-2's n_inner: 4 × width)
        elif not _whole(value) or not isinstance(key, str):
            continue
        elif HEADS.search(key):
            grouped = KV_HEADS.search(key) and value < local
            out[key] = max(1, heads_to // 2) if grouped else heads_to
        elif GROUPS.search(key) and heads_to % value:
            out[key] = 1
        elif ROUTED.search(key):                    # experts chosen per token, and their groups: one
            out[key] = 1
        elif value == width and width > 1 and not KEEP.search(key):
            out[key] = small
        elif WIDE.search(key) and not KEEP.search(key) and value > small and width > 1:
            out[key] = max(ROUND, math.ceil(value * small / width / ROUND) * ROUND)


def _nested(value: Mapping[str, Any], width: int, small: int, heads: int, heads_to: int) -> dict[str, Any]:
    """A nested config: its own class's rule where it names its model_type, else the parent's proportions."""
    if isinstance(value.get("model_type"), str):
        return shrink(value, heads_to=heads_to)
    inner = dict(value)
    _shrink_fields(inner, width, small, heads, heads_to)
    for key in TINY.keys() & inner.keys():
        inner[key] = TINY[key]
    return inner


def _fixed(out: dict[str, Any]) -> dict[str, Any]:
    """The given tiny values, token ids inside the tiny vocabulary, windows and chunks cut, default choices made."""
    _default_choices(out)
    for key, value in TINY.items():
        if key in out:
            out[key] = value
    vocab = TINY["vocab_size"]
    for key in [k for k in out if "vocab" in k and not DIVISOR.search(k) and _whole(out[k]) and out[k] > vocab]:
        out[key] = vocab
    spare = iter(range(vocab - 1, PROBE_TOKENS, -1))        # other special ids: above the probe's tokens
    for key, value in list(out.items()):
        probed = _whole(value) and PROBE_FIRST <= value < PROBE_TOKENS
        if key in TOKEN_IDS:
            if isinstance(value, list) or (_whole(value) and value >= vocab) or probed:
                out[key] = TOKEN_IDS[key]
        elif key.endswith("token_id") and _whole(value) and (value >= vocab or probed):
            out[key] = next(spare)
    for key in (*WINDOW_FIELDS, *_table_fields(out.get("model_type"), "window_field")):
        if isinstance(out.get(key), int) and out[key] > SMALL_WINDOW:
            out[key] = SMALL_WINDOW
    for key in (*CHUNK_FIELDS, *_table_fields(out.get("model_type"), "chunk_field")):
        if isinstance(out.get(key), int) and out[key] > SMALL_CHUNK:
            out[key] = SMALL_CHUNK
    for key, small in INDEXER_SHRUNK.items():       # DSA's index_topk: below the probe, so the indexer chooses
        if isinstance(out.get(key), int) and out[key] > small:
            out[key] = small
    return out


def _table_fields(model_type: Any, option: str) -> tuple[str, ...]:
    """The window (or chunk) field the family table's pattern reads for this model_type (GPT-Neo's window_size),
    cut like the usual ones so that the probes see the window."""
    from relviz.mechanisms.families import FAMILIES

    entry = FAMILIES.get(model_type) if isinstance(model_type, str) else None
    field = ((entry or {}).get("mechanisms", {}).get("pattern") or {}).get(option)
    return (field,) if isinstance(field, str) else ()
