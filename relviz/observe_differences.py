"""Where relviz's plan of a (shrunk) config differs from what transformers ran, one line per finding.

``differences(plan, seen)`` holds each layer of the plan against its observation (``relviz.observe``): the mixer,
the rotation (``torch.equal`` on the recorded call, the same pairs and dims, the rotary module's inv_freq), the mask
at both probe lengths and the value it fills with, a DSA layer's indexer, sinks, the softmax scale, and anything
transformers adds to the scores that relviz does not read; then the position side (``relviz.observe_position``) and,
for DSA, that the keys chosen depend on content. ``verified_plan`` refuses a model where any line comes back.
"""
from __future__ import annotations

import dataclasses
import math
from typing import TYPE_CHECKING

import torch

from relviz.mechanisms.alibi import Alibi
from relviz.mechanisms.indexer import IndexedSelection
from relviz.mechanisms.mixer import ATTENTION, NOT_ON_TEXT
from relviz.mechanisms.pattern import AttentionPattern
from relviz.mechanisms.rotation import Rotation
from relviz.mechanisms.scale import FieldScale, LayerIndexScale, QueryScalar, SoftmaxScale
from relviz.mechanisms.sinks import Sinks
from relviz.model_plan import LayerPlan, ModelPlan
from relviz.observe_position import position_differences

if TYPE_CHECKING:  # relviz.observe imports this module: its dataclasses are named for the type hints only
    from relviz.observe import LayerObservation, Observation

__all__ = ["differences"]


def _plan_pairs(rotation: Rotation, width: int) -> list[int]:
    """The same probe on relviz's rotation: the dim each unit vector lands on at position 1."""
    probe = torch.eye(width)[:, None, :].expand(width, 2, width).contiguous()            # [width, L=2, width]
    turned = rotation.rotate(probe, torch.arange(2))[:, 1, :].clone()                     # [width, width]
    turned[torch.arange(width), torch.arange(width)] = 0.0
    big = turned.abs().max(dim=-1)
    return [int(i) if bool(v > 1e-6) else d for d, (v, i) in enumerate(zip(big.values, big.indices))]


def differences(plan: ModelPlan, seen: Observation) -> list[str]:
    """Where relviz's plan of the (shrunk) config differs from what transformers ran, one line per finding."""
    out: list[str] = []
    added: list[str] = []                           # a bias found at the softmax (after the rest)
    if not any(o.attends or o.kinds for o in seen.layers):
        return ["transformers' attention was not seen: this family's modeling code goes neither through "
                "eager_attention_forward nor through a softmax over its positions, so the observer cannot check it"]
    layers = plan.plans[plan.stack_names[0]]
    if len(layers) != len(seen.layers):
        return [f"relviz reads {len(layers)} layers; transformers built {len(seen.layers)}"]
    for p, o in zip(layers, seen.layers):
        where = f"layer {p.index}"
        mixer = p.mixer
        if set(mixer.kinds) <= NOT_ON_TEXT:            # a layer transformers skips on text alone (Mllama's)
            if o.ran:
                out.append(f"{where}: relviz reads {mixer.label()}, which does not run on text alone; transformers ran it")
            continue
        if mixer.attends != o.attends:
            out.append(f"{where}: relviz reads {mixer.label()}; transformers "
                       f"{'runs softmax attention' if o.attends else 'runs no softmax attention'}"
                       f" ({', '.join(o.modules) or 'no recurrent module'})")
            continue
        known = [k for k in mixer.others() if k != "recurrent_state"]
        if known and set(known) != set(o.kinds) - {ATTENTION}:
            out.append(f"{where}: relviz reads {mixer.label()}; transformers runs {', '.join(o.modules)}")
        if not o.attends:
            continue
        rotation = p.find(Rotation)
        if (rotation is not None) != bool(o.rotations):
            out.append(f"{where}: relviz says it {'rotates' if rotation else 'does not rotate'}; transformers "
                       f"{'rotates q and k' if o.rotations else 'applies no rotation'}")
        elif rotation is not None:
            out.extend(_rotation_differences(where, p, rotation, o))
        pattern = p.find(AttentionPattern)
        for length, allowed in o.masks.items():
            wrong = pattern.agrees(allowed) if pattern is not None else "no pattern"
            if wrong:
                out.append(f"{where}: the mask at {length} positions differs ({_mask_kind(allowed)} in transformers, "
                           f"{pattern.label() if pattern else 'none'} in relviz: {wrong})")
                break
        fill = pattern.fill if pattern is not None else None
        if o.attends and fill != o.fill:
            out.append(f"{where}: transformers masks its scores with "
                       f"{'−inf or the lowest float' if o.fill is None else f'{o.fill:g} (a finite value)'}; "
                       f"relviz reads {'−inf' if fill is None else f'{fill:g}'}")
        out.extend(_indexer_differences(where, p, o, seen))
        if bool(p.find(Sinks)) != o.sinks:
            out.append(f"{where}: sinks {'read' if p.find(Sinks) else 'not read'} by relviz; transformers "
                       f"{'has' if o.sinks else 'has none'}")
        unchecked = [m.name for m in p.mechanisms if o.at_softmax and m.positional and "input" not in m.role
                     and not isinstance(m, (Rotation, AttentionPattern, Alibi))]   # (ALiBi: on what it is handed)
        if unchecked:
            out.append(f"{where}: transformers' attention was seen only at its softmax (the family does not go "
                       f"through eager_attention_forward), where relviz's {', '.join(unchecked)} cannot be told "
                       "apart from q·k, so it is not checked")
        if o.softmax_bias and not any(m.positional and m.role.startswith("adds") and "input" not in m.role
                                      for m in p.mechanisms):
            added.append(f"{where}: transformers adds something besides q·k to the scores its softmax gets (seen with "
                       "every projection zeroed) that relviz does not read")
        scale = p.find(SoftmaxScale) or p.find(QueryScalar) or p.find(FieldScale) or p.find(LayerIndexScale)
        if scale is not None and o.scaling is not None and scale.scale() != o.scaling:
            out.append(f"{where}: softmax scale {scale.scale()} in relviz, {o.scaling} in transformers")
        elif scale is None and isinstance(o.scaling, (int, float)) and o.head_dim and not math.isclose(
                o.scaling, o.head_dim ** -0.5, rel_tol=1e-12):     # (1/math.sqrt(d) and d ** -0.5 may differ by an ulp)
            out.append(f"{where}: transformers scales the scores by {o.scaling:.6g}, not 1/√{o.head_dim} = "
                       f"{o.head_dim ** -0.5:.6g}, and relviz's plan names no softmax scale")
        if o.handed_scores and not any(m.positional and m.role.startswith("adds") and "input" not in m.role
                                       for m in p.mechanisms):
            out.append(f"{where}: transformers hands its attention {o.handed_scores}, a tensor over query and key "
                       "positions beside the mask (a position bias), which relviz does not read")
        if o.bias and not any(m.positional and m.role.startswith("adds") and "input" not in m.role
                              for m in p.mechanisms):
            out.append(f"{where}: transformers adds a bias to the logits in the mask it hands the attention (one "
                       "that depends on position, or on the content as a dynamic mask does) that relviz does not read")
    return out + position_differences(layers, seen) + added + _content_differences(plan, seen)


def _indexer_differences(where: str, p: LayerPlan, o: LayerObservation, seen: Observation) -> list[str]:
    """A DSA layer (relviz.mechanisms.indexer) against what ran: its indexer's own rotation (``torch.equal``), or the
    choice it shares being the source layer's (the same mask at both lengths); and a layer relviz reads without an
    indexer must run none."""
    selection = p.find(IndexedSelection)
    if selection is None:
        return [f"{where}: transformers runs a DSA indexer there (its rotation was seen) that relviz does not read"] \
            if o.indexer_rotations else []
    if selection.rotation is None:
        source = seen.layers[selection.source]
        if o.indexer_rotations:
            return [f"{where}: relviz reads layer {selection.source}'s choice of keys reused; transformers runs an "
                    "indexer here"]
        if any(not torch.equal(mask, source.masks.get(length, mask[:0])) for length, mask in o.masks.items()):
            return [f"{where}: its keys differ from layer {selection.source}'s, whose choice relviz reads it reuses"]
        return []
    if not o.indexer_rotations:
        return [f"{where}: relviz reads an indexer rotated by RoPE; transformers' indexer rotated nothing there"]
    own = type(o)(o.index, rotations=o.indexer_rotations, pairs=o.indexer_pairs, inv_freq=o.inv_freq)
    return [f"{where}: the indexer's {line.split(': ', 1)[-1]}" for line in
            _rotation_differences(where, p, selection.rotation, own)]


def _content_differences(plan: ModelPlan, seen: Observation) -> list[str]:
    """Past index_topk, the keys must change with the tokens on some DSA layer (the two probes' different tokens at
    the same positions): otherwise the choice is not the content-dependent one relviz says."""
    layers = plan.plans[plan.stack_names[0]]
    shown = [s.chosen_by_content(o.masks) for p, o in zip(layers, seen.layers)
             if (s := p.find(IndexedSelection)) is not None and s.rotation is not None]
    if shown and not any(shown) and any(v is not None for v in shown):
        return ["past index_topk keys no DSA layer chose other keys for other tokens at the same positions: the "
                "choice relviz reads as content's was not seen to depend on content"]
    return []


def _rotation_differences(where: str, p: LayerPlan, rotation: Rotation, o: LayerObservation) -> list[str]:
    out = []
    for x_in, x_out in o.rotations:
        length = x_in.shape[-2]
        start = rotation.rotary_offset
        if x_in.shape[-1] > rotation.width:
            return [f"{where}: transformers rotates {x_in.shape[-1]} dims; relviz's head is {rotation.width}"]
        full = torch.nn.functional.pad(x_in, (start, rotation.width - start - x_in.shape[-1]))
        ours = rotation.rotate(full, torch.arange(length))[..., start:start + x_in.shape[-1]]
        if ours.shape != x_out.shape or not torch.equal(ours, x_out):
            other = dataclasses.replace(rotation, backwards=not rotation.backwards)
            back = other.rotate(full, torch.arange(length))[..., start:start + x_in.shape[-1]]
            if back.shape == x_out.shape and torch.allclose(back, x_out, atol=1e-5):
                return [f"{where}: transformers turns each pair the other way (by {'+' if rotation.backwards else '−'}"
                        f"θ·p) from relviz's reading (the family table's rotation option 'backwards' says which)"]
            delta = (ours - x_out).abs().max() if ours.shape == x_out.shape else float("nan")
            return [f"{where}: the rotation differs from transformers' (max |Δ| {float(delta):.3g})"]
    if o.pairs is not None and len(o.pairs) == rotation.width and o.pairs != _plan_pairs(rotation, rotation.width):
        out.append(f"{where}: transformers pairs the dims differently from relviz's {rotation.layout} layout")
    if o.inv_freq is not None and o.inv_freq.shape == rotation.inv_freq().shape and \
            not torch.equal(o.inv_freq.float(), rotation.inv_freq()):
        out.append(f"{where}: the rotary module's inv_freq differs from relviz's")
    return out


def _mask_kind(allowed: torch.Tensor) -> str:
    """A mask in words: causal, full, a window, a chunk, or something else."""
    length = allowed.shape[0]
    for causal in (True, False):
        if torch.equal(AttentionPattern(causal=causal).mask(length), allowed):
            return "causal" if causal else "full"
        for w in range(1, length):
            if torch.equal(AttentionPattern(causal=causal, window=w).mask(length), allowed):
                return f"window {w}" if causal else f"local ±{w}"
            if torch.equal(AttentionPattern(causal=causal, chunk=w).mask(length), allowed):
                return f"chunk {w}"
    return "a mask that is neither causal, full, a window nor a chunk"
