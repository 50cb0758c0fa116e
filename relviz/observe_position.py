"""The position side of an observation inside the layers: whether anything in a layer depends on position besides
what relviz reads, and what a layer outside the table runs. Used by relviz.observe; what the input adds per position
is relviz.observe_input's.

- ``probe_layers``: four forwards with each layer's input replaced. (a) the same vector at every position: on a
  layer that applies no position itself, q and k are then equal at every position and every query's weights
  are equal over the keys its mask allows; the other tensors the layer is handed are kept (``alibi_handed``:
  one of them must equal relviz's ALiBi slopes × positions where the plan reads ALiBi); (b, c) a random input, then the same with position 0 negated: a
  layer whose outputs at later positions do not move (beyond float rounding: ``MIXING``) mixes no tokens (an
  MLP-only layer); (d) the last position negated instead: a layer that carries order forward only (a recurrence,
  a scan, a causal convolution) leaves every earlier output where it was.
- ``derive_entry``: for a model_type outside the family table and without RoPE settings, the family entry
  (the table's own format) that says what was seen; ``relviz.plan.read_plan`` reads it like a row of the table.
"""
from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import torch

from relviz.mechanisms.absolute import LearnedAbsolute
from relviz.mechanisms.alibi import Alibi
from relviz.mechanisms.mixer import ATTENTION, LAYER_TYPES, NOT_ON_TEXT
from relviz.mechanisms.none import NoPosition
from relviz.mechanisms.pattern import AttentionPattern
from relviz.mechanisms.sinusoidal import SinusoidalAbsolute
from relviz.observe_input import TOKEN, Run, keeping, layer_input, same_everywhere
from relviz.observe_record import masked_fill

__all__ = ["probe_layers", "derive_entry", "position_differences", "alibi_handed", "INPUT_SIDE"]

#: a layer mixes tokens when negating position 0's input moves a later output by more than this share of the
#: output's size: a mixing layer moves it by O(1); an MoE block's experts, batched over different tokens, move it
#: by float rounding alone (~1e-7, Nemotron-H), which is no mixing
MIXING = 1e-3
#: a long probe for families outside the table: past BigBird's 704, where its attention turns block-sparse
LONG_PROBE = 1100
#: the mechanisms that act before the first layer only: a layer with no others applies no position itself
INPUT_SIDE = (NoPosition, LearnedAbsolute, SinusoidalAbsolute)


@dataclass
class LayerProbe:
    """One layer under the three replaced inputs (None: the probe could not replace its input)."""

    qk_position_free: bool | None = None     # q and k equal at every position when the input is
    query: torch.Tensor | None = None        # ... that probe's q [L, d] (first batch row and head)
    key_free: bool | None = None             # ... and whether k alone is equal at every position
    weights_uniform: bool | None = None      # and every query's weights equal over the keys it sees
    mixes_tokens: bool | None = None         # a change at position 0 moves a later position's output
    causal: bool | None = None               # a change at the last position leaves every earlier output (within
                                             # float rounding: MIXING)
    handed: list[torch.Tensor] = field(default_factory=list)   # the other float tensors the layer is handed
    long_mask: torch.Tensor | None = None    # [LONG_PROBE, LONG_PROBE] keys seen (families outside the table)
    long_checked: bool = False               # the long probe ran
    long_failed: bool = False                # it was wanted and the model did not take it
    scores_uniform: bool | None = None       # (a) every row of the [B, H, L, L] scores its softmax gets is one
                                             # value over the keys it may see (a family seen at its softmax)


def alibi_handed(alibi: Alibi, probe: LayerProbe) -> bool:
    """Whether the layer was handed relviz's ALiBi: a tensor equal (``torch.equal``) to its slopes × key
    positions 0 … N − 1 (BLOOM, Falcon) or −(N − 1) … 0 (MPT), in the slopes' own dtype, for one batch row."""
    slopes = alibi.slopes()                                                            # [H]
    for t in probe.handed:
        if t.numel() % (alibi.heads * t.shape[-1]):
            continue
        rows = t.reshape(-1, alibi.heads, t.shape[-1])[0]                              # [H, N]
        n = rows.shape[-1]
        for positions in (torch.arange(n), torch.arange(1 - n, 1)):
            if torch.equal(rows, (slopes[:, None] * positions[None, :]).to(rows.dtype)):
                return True
    return False


def probe_layers(layers: torch.nn.ModuleList, length: int, run: Run, record: Callable[[], Any]) -> list[LayerProbe]:
    """Each layer with its input replaced (see the module's docstring). ``record()`` opens relviz.observe's
    recorder (its ``calls``: (layer, function name, args, kwargs, output); ``close()``)."""
    probes = [LayerProbe() for _ in layers]

    current = [-1]

    def replaced(make: Callable[[torch.Tensor], torch.Tensor], outputs: dict[int, torch.Tensor] | None):
        def replace(k):
            def hook(module, args, kwargs):
                current[0] = k
                h, give = layer_input(args, kwargs)
                if outputs is None and not probes[k].handed:      # (once) what else the layer is handed
                    probes[k].handed = [t.detach().clone() for t in (*args, *kwargs.values()) if isinstance(
                        t, torch.Tensor) and t is not h and t.is_floating_point() and 0 < t.numel() <= 1 << 20]
                return None if h is None else give(make(h))
            return hook
        hooks = [m.register_forward_pre_hook(replace(k), with_kwargs=True) for k, m in enumerate(layers)]
        if outputs is not None:
            hooks += [m.register_forward_hook(keeping(outputs, k)) for k, m in enumerate(layers)]
        recorder = record()
        owners = (torch.nn.functional, torch, torch.Tensor)
        kept = [owner.softmax for owner in owners]
        if outputs is None:
            for owner, original in zip(owners, kept):
                owner.softmax = _noting_softmax(original, lambda: probes[current[0]] if current[0] >= 0 else None)
        try:
            with torch.no_grad():
                run(torch.full((1, length), TOKEN))
        finally:
            for owner, original in zip(owners, kept):
                owner.softmax = original
            recorder.close()
            for hook in hooks:
                hook.remove()
        return recorder.calls

    calls = replaced(lambda h: h.narrow(-2, 0, 1).expand_as(h).clone(), None)            # (a) one vector at every position
    for layer, name, args, kwargs, out in calls:
        if layer < 0 or name != "eager_attention_forward":
            continue
        query, key = args[1], args[2]                                     # [B, H, L, d]
        key_free = same_everywhere(key)
        free = key_free and same_everywhere(query)
        weights = out[1] if isinstance(out, tuple) and len(out) > 1 else None
        uniform = None
        if free and isinstance(weights, torch.Tensor):
            top = weights.max(dim=-1, keepdim=True).values                 # [B, H, L, 1]
            seen = weights > 0
            uniform = bool(torch.equal(torch.where(seen, weights, top), top.expand_as(weights)))
        here = probes[layer]
        here.qk_position_free = free if here.qk_position_free is None else here.qk_position_free and free
        here.key_free = key_free if here.key_free is None else here.key_free and key_free
        if here.query is None:
            here.query = query[0, 0].detach().clone()
        if uniform is not None:
            here.weights_uniform = uniform if here.weights_uniform is None else here.weights_uniform and uniform
    fixed: dict[int, torch.Tensor] = {}

    def random_input(h: torch.Tensor) -> torch.Tensor:
        if h.shape[-1] not in fixed:
            fixed[h.shape[-1]] = torch.randn(h.shape, generator=torch.Generator().manual_seed(2)).to(h.dtype)
        return fixed[h.shape[-1]].clone()

    before: dict[int, torch.Tensor] = {}
    after: dict[int, torch.Tensor] = {}
    replaced(random_input, before)                                             # (b) a random input

    def moved(h: torch.Tensor) -> torch.Tensor:
        x = random_input(h)
        x[..., 0, :] = -x[..., 0, :]
        return x
    replaced(moved, after)                                                     # (c) position 0 changed

    def last_moved(h: torch.Tensor) -> torch.Tensor:
        x = random_input(h)
        x[..., -1, :] = -x[..., -1, :]
        return x
    later: dict[int, torch.Tensor] = {}
    replaced(last_moved, later)                                                # (d) the last position changed
    for k, probe in enumerate(probes):
        if k in before and k in after and before[k].shape == after[k].shape and before[k].ndim >= 3:
            moved_by = (after[k][..., 1:, :] - before[k][..., 1:, :]).abs().max()
            probe.mixes_tokens = bool(moved_by > MIXING * before[k].abs().max())
        if k in before and k in later and before[k].shape == later[k].shape and before[k].ndim >= 3:
            back = (later[k][..., :-1, :] - before[k][..., :-1, :]).abs().max()
            probe.causal = bool(back <= MIXING * before[k].abs().max())
    return probes


def attends_at(layers: torch.nn.ModuleList, length: int, run: Run, record: Callable[[], Any]
               ) -> list[torch.Tensor | None]:
    """Per layer: the keys each query may see [L, L] bool in one forward at ``length`` positions, from its eager call
    or its softmax over [B, H, L, L] scores (None: no softmax attention over them seen). A family outside the table is read from short probes; this long one shows
    attention that changes with length (BigBird's block-sparse attention past 704 positions runs no such softmax)."""
    recorder = record()
    try:
        with torch.no_grad():
            run(torch.full((1, length), TOKEN))
    finally:
        recorder.close()
    masks: dict[int, torch.Tensor] = {}
    for layer, name, args, kwargs, _ in recorder.calls:
        if layer < 0 or layer in masks:
            continue
        if name == "softmax":
            masks[layer] = args[0]
        elif name == "eager_attention_forward":
            mask = kwargs.get("attention_mask", args[4] if len(args) > 4 else None)
            masks[layer] = torch.ones(length, length, dtype=torch.bool) if mask is None else (
                mask[0, 0, :, :length] if mask.dtype == torch.bool
                else mask[0, 0, :, :length] > torch.finfo(mask.dtype).min / 2)
    return [masks.get(k) for k in range(len(layers))]


def _noting_softmax(original: Any, probe: Callable[[], LayerProbe | None]) -> Any:
    """A softmax that notes, on the running layer's probe, whether each row of [B, H, L, L] scores holds one value
    over the keys it may see (finite and above the dtype's min / 2¹⁶, and not a masked fill, as relviz.observe
    reads a mask there)."""
    def wrapped(x, *args, **kwargs):
        here = probe()
        out = original(x, *args, **kwargs)
        if here is not None and isinstance(x, torch.Tensor) and x.ndim in (3, 4) and x.shape[-1] == x.shape[-2] \
                and x.is_floating_point() and isinstance(out, torch.Tensor):
            fill = masked_fill(x if x.ndim == 4 else x[None], out if x.ndim == 4 else out[None])
            seen = torch.isfinite(x) & (x > torch.finfo(x.dtype).min / 2 ** 16) & (x != fill if fill is not None
                                                                                   else True)
            top = torch.where(seen, x, torch.full_like(x, -torch.inf)).amax(-1, keepdim=True)
            low = torch.where(seen, x, torch.full_like(x, torch.inf)).amin(-1, keepdim=True)
            uniform = bool(torch.equal(top, low))
            here.scores_uniform = uniform if here.scores_uniform is None else here.scores_uniform and uniform
        return out
    return wrapped


def query_scaled(scale: Any, probe: LayerProbe) -> bool:
    """Whether probe (a)'s q [L, d] (one input vector at every position) is one vector times ``scale.factors`` at
    each position, and k equal at every position: q[p]·f(0) = q[0]·f(p) to the dtype's rounding of the two products
    (transformers rounds each scaled query once; a factor off by 1e-6 of itself is seen)."""
    q = probe.query.double()                                                        # [L, d]
    f = scale.factors(torch.arange(q.shape[0])).double()                            # [L]
    slack = 4 * torch.finfo(probe.query.dtype).eps * q[:1].abs() * f[:, None]       # [L, d]
    return bool(probe.key_free) and bool(((q * f[0] - q[:1] * f[:, None]).abs() <= slack).all())


def position_differences(layers: list, seen: Any) -> list[str]:
    """Where relviz's plan and the observation differ on position: the input side, and any layer the plan says
    applies no position itself (only INPUT_SIDE mechanisms) whose q, k or weights moved with position."""
    out: list[str] = []
    inputs = seen.inputs
    if inputs is not None and inputs.found is None:
        out.append(f"the input: relviz cannot tell what transformers adds per position: {inputs.reason}")
    elif inputs is not None and layers:
        first = next((p for p in layers if p.mixer.attends), layers[0])
        ours = first.find(LearnedAbsolute) or first.find(SinusoidalAbsolute)
        theirs = inputs.found
        same = type(ours) is type(theirs) if ours is not None else isinstance(theirs, NoPosition)
        if same and isinstance(ours, LearnedAbsolute):
            same = ours.offset == theirs.offset and theirs.tensor_name.endswith(ours.tensor_name)
        elif same and isinstance(ours, SinusoidalAbsolute):
            same = ours == theirs
        if not same:
            out.append(f"the input: relviz reads {ours.describe() if ours else 'no absolute positions'}; "
                       f"transformers adds {inputs.words()}")
    for p, o in zip(layers, seen.layers):
        alibi = p.find(Alibi)
        if alibi is not None and not alibi_handed(alibi, o.probe):
            out.append(f"layer {p.index}: relviz reads ALiBi ({alibi.describe()}); transformers hands the layer "
                       "no tensor equal to those slopes × positions")
        carried = set(p.mixer.kinds) - NOT_ON_TEXT - {"feed_forward"}
        if not p.mixer.attends and carried and o.probe.causal is False:
            out.append(f"layer {p.index}: relviz reads {p.mixer.label()}, which carries order forward only; in "
                       "transformers a change at the last position moved an earlier output")
        if not p.mixer.attends or not o.attends:
            continue
        pattern = p.find(AttentionPattern)
        if o.probe.long_failed:
            out.append(f"layer {p.index}: the observer could not run it at {LONG_PROBE} positions to see whether its "
                       "attention changes with the length")
        elif o.probe.long_checked and o.probe.long_mask is None:
            out.append(f"layer {p.index}: at {LONG_PROBE} positions (or as many as its table holds) transformers "
                       "runs no softmax over them all (its "
                       "attention changes with the length), which relviz does not read")
        elif o.probe.long_checked and (pattern is None or not torch.equal(
                pattern.mask(len(o.probe.long_mask)), o.probe.long_mask)):
            out.append(f"layer {p.index}: at {len(o.probe.long_mask)} positions the keys each query sees differ from relviz's "
                       f"{pattern.label() if pattern else 'reading'} (a window or block wider than the short probes)")
        inside = [m for m in p.mechanisms if m.positional and not isinstance(m, INPUT_SIDE)]
        if inside or o.rotations:
            continue
        scaled = next((m for m in p.mechanisms if callable(getattr(m, "factors", None))), None)   # a query scale
        if getattr(o, "at_softmax", False):          # seen at its softmax: the scores stand for q, k and the weights
            if o.probe.scores_uniform is not True:
                out.append(f"layer {p.index}: " + ("the attention scores change with position inside the layer, "
                                                   "by no mechanism relviz reads" if o.probe.scores_uniform is False
                                                   else "the observer could not check that the layer applies no "
                                                        "position itself"))
        elif scaled is not None and o.probe.query is not None and not query_scaled(scaled, o.probe):
            out.append(f"layer {p.index}: relviz reads {scaled.describe()}; transformers' q and k at the probe's "
                       "positions are not that (k must not move with position, and q only by those factors)")
        elif scaled is None and o.probe.qk_position_free is False:
            out.append(f"layer {p.index}: q or k changes with position inside the layer, by no rotary function "
                       "relviz records and no mechanism it reads")
        elif o.probe.weights_uniform is False:
            out.append(f"layer {p.index}: the attention weights depend on position beyond the mask (a bias or "
                       "scale relviz does not read)")
        elif o.probe.qk_position_free is None:
            out.append(f"layer {p.index}: the observer could not replace this layer's input to check that it "
                       "applies no position itself")
    return out


def derive_entry(config: Mapping[str, Any], seen: Any) -> dict[str, Any]:
    """The family entry for what transformers ran on a model_type outside the table without RoPE settings
    (ValueError where relviz cannot say it in the table's terms)."""
    attending = [o for o in seen.layers if o.attends]
    kinds = {k for o in seen.layers for k in o.kinds if k != ATTENTION}
    handed = next((o for o in attending if o.handed_scores), None)
    if handed is not None:
        raise ValueError(f"transformers hands layer {handed.index}'s attention {handed.handed_scores}, a tensor over "
                         "query and key positions beside its mask (a position bias), which relviz does not read")
    if any(o.rotations for o in seen.layers):
        raise ValueError("transformers rotates q and k, but the config has no RoPE settings relviz reads")
    masks = {("causal" if torch.equal(m, torch.ones_like(m).tril()) else "full" if bool(m.all()) else "other")
             for o in attending for m in o.masks.values()}
    if "other" in masks or len(masks) > 1:
        raise ValueError("its attention masks are neither all causal nor all full (a window or a chunk needs its "
                         "config field, which relviz reads only for families in its table)")
    causal = masks != {"full"}
    aliases = seen.attribute_map                  # the config class's own names (GPT-2: n_layer, n_embd)
    if seen.inputs is None or seen.inputs.found is None:
        raise ValueError(seen.inputs.reason if seen.inputs is not None else "the input side was not observed")
    field = aliases.get("num_hidden_layers", "num_hidden_layers")
    stack: dict[str, Any] = {"layers_field": field, "causal": causal}
    if config.get(field) is None:                 # its config class's default (or a property: Nemotron-H's count
        stack["layers_default"] = len(seen.layers)    # of layers_block_type), as transformers built it
    mechanisms: dict[str, Any] = {}
    found = seen.inputs.found
    if isinstance(found, LearnedAbsolute):
        mechanisms[found.name] = {"tensor": found.tensor_name, **({"offset": found.offset} if found.offset else {})}
    elif isinstance(found, SinusoidalAbsolute):
        width = next((k for k in (aliases.get("hidden_size"), "hidden_size") if k and config.get(k) == found.d_model),
                     None)
        if width is None:
            raise ValueError(f"its sinusoidal table is {found.d_model} wide, and no config field relviz knows holds "
                             "that width")
        mechanisms[found.name] = {"variant": found.variant, "float32": found.float32, "offset": found.offset,
                                  "width_field": width}
    entry: dict[str, Any] = {"stacks": {"decoder" if causal else "encoder": stack}}
    for o in seen.layers:
        if not o.attends and not o.kinds and o.probe.mixes_tokens is False:
            o.kinds = ("feed_forward",)                   # it mixes no tokens: an MLP or MoE block
            kinds.add("feed_forward")
    unknown = [o.index for o in seen.layers if not o.attends and not o.kinds]
    if unknown and not attending:
        raise ValueError("transformers' attention was not seen: no layer calls eager_attention_forward or runs a "
                         "token mixer relviz knows, yet the layers mix tokens")
    if unknown:
        raise ValueError(f"layer {unknown[0]} runs no softmax attention and no token mixer relviz knows, yet it "
                         f"mixes tokens (or the observer could not tell)")
    recurrent = sorted(kinds - {"feed_forward"})
    if len(recurrent) > 1:
        raise ValueError(f"its layers run {', '.join(recurrent)}: more than one recurrent kind")
    if kinds:
        mechanisms["mixer"] = {"linear_kind": recurrent[0]} if recurrent else {}
        has_types = any(config.get(f) is not None for f in ("layer_types", "layers_block_type"))
        if not has_types:
            per_layer = {tuple(sorted(o.kinds)) for o in seen.layers}
            if len(per_layer) != 1:
                raise ValueError("its layers mix tokens in different ways, and its config has no layer_types "
                                 "field to say which layer does which")
            (only,) = per_layer
            named = sorted(LAYER_TYPES.items(), key=lambda item: None in item[1])   # a type naming the kind first
            value = next(t for t, ks in named if tuple(sorted(
                (recurrent[0] if recurrent else "") if k is None else k for k in ks)) == only)
            entry["derive"] = [{"field": "layer_types", "constant": value, "always": True}]
    if attending:
        fills = {o.fill for o in attending}         # OpenAI GPT masks with −1e4 (relviz.observe_record.masked_fill)
        if len(fills) > 1:
            raise ValueError(f"its layers mask with different values ({', '.join(map(repr, fills))})")
        (fill,) = fills
        mechanisms["pattern"] = {} if fill is None else {"fill": fill}
    entry["mechanisms"] = mechanisms
    return entry
