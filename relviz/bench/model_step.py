"""The ``model`` bench section: one training step (forward, backward, AdamW) of the small transformer
per scheme, against the same model written by hand for SDPA (its relative term as attn_mask) and
against the floor, plain causal SDPA with no relative term.

Why: the fused section times attention alone; this is what a user training the model pays, beside
what they would write themselves. The hand-written SDPA models are transcriptions per scheme class
(``_user_sdpa``), kept here beside the one section that runs them. ``python -m relviz bench --only model``.
"""
from __future__ import annotations

import math
import statistics
from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F

from relviz.bench.report import (SAMPLE_S, BenchContext, Column, SectionResult, Target, load_average, ms,
                                 time_in_turns)
from relviz.model import SCHEMES, ModelConfig, build_model
from relviz.positions import alibi_bias, expand_toeplitz, offset_range, shaw_clip_index, t5_bias
from relviz.schemes.alibi import AlibiScheme
from relviz.schemes.fire import Fire
from relviz.schemes.kerple import Kerple
from relviz.schemes.rope import Rope
from relviz.schemes.shaw import Shaw
from relviz.schemes.skew import Skew
from relviz.schemes.t5 import T5
from relviz.skew import distance_table, skew

#: The model section's schemes with --quick (every scheme otherwise): no position, a learned bias, a vector table.
QUICK_MODEL_SCHEMES = ("none", "t5", "shaw")


def _train_step_call(model: torch.nn.Module, tokens: torch.Tensor) -> Callable[[], None]:
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)

    def step() -> None:
        logits = model(tokens)[0]
        loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), tokens.reshape(-1))
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
    return step


def _plain_sdpa(model: torch.nn.Module) -> torch.nn.Module:
    """The floor: the same model with every layer's attention replaced by plain SDPA, no relative
    term at all (absolute schemes keep their embeddings)."""
    causal = model.config.causal

    def attend(layer: int, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, *, shared: Any = None,
               need_weights: bool = False):
        return F.scaled_dot_product_attention(q, k, v, is_causal=causal), None
    model.position.attend = attend
    return model


def _with_mask(bias: torch.Tensor, causal: bool) -> torch.Tensor:
    """[..., L, L] bias -> 4-D attn_mask, −inf above the diagonal when causal."""
    length = bias.shape[-1]
    if causal:
        bias = bias.masked_fill(torch.ones(length, length, dtype=torch.bool, device=bias.device).triu(1),
                                float("-inf"))
    return bias.expand(*(1,) * (4 - bias.dim()), *bias.shape) if bias.dim() < 4 else bias


def _toeplitz_user(position, config, causal):
    """T5, ALiBi, KERPLE: the full bias [1, H, L, L] built once per forward (as Hugging Face's T5
    shares position_bias between layers), then attn_mask in every layer."""

    def prepare(length: int, like: torch.Tensor) -> torch.Tensor:
        if isinstance(position, T5):
            bias = t5_bias(position.bias, length, num_buckets=config.num_buckets, max_distance=config.max_distance,
                           bidirectional=not causal)
        elif isinstance(position, AlibiScheme):
            bias = alibi_bias(length, num_heads=config.n_heads, device=like.device)
        else:
            bias = expand_toeplitz(position.mechanism(0).bias_per_offset(offset_range(length, device=like.device)),
                                   length, length)
        return _with_mask(bias.to(like.dtype), causal)                                     # [1, H, L, L]
    position.prepare = prepare
    return lambda layer, q, k, v, *, shared=None, need_weights=False: (
        F.scaled_dot_product_attention(q, k, v, attn_mask=shared), None)


def _rope_user(position, config, causal):
    rotation = position.mechanism(0)
    return lambda layer, q, k, v, *, shared=None, need_weights=False: (F.scaled_dot_product_attention(
        *(rotation.turn(x, rotation.prepare(q.shape[-2], q)) for x in (q, k)), v, is_causal=causal), None)


def _fire_user(position, config, causal):
    return lambda layer, q, k, v, *, shared=None, need_weights=False: (F.scaled_dot_product_attention(
        q, k, v, attn_mask=_with_mask(position.mechanism(layer).bias(q.shape[-2]), True)), None)


def _skew_user(position, config, causal):

    def attend(layer, q, k, v, *, shared=None, need_weights=False):
        table = distance_table(position.e_r[layer], q.shape[-2])                           # [L, D]
        bias = skew((q / math.sqrt(q.shape[-1])) @ table.transpose(0, 1))                   # [B, H, L, L]
        return F.scaled_dot_product_attention(q, k, v, attn_mask=_with_mask(bias, True)), None
    return attend


def _shaw_user(position, config, causal):
    """Key term only: no SDPA call can add Shaw's a^V value term."""

    def attend(layer, q, k, v, *, shared=None, need_weights=False):
        length, clip = q.shape[-2], config.clip
        rel = (q / math.sqrt(q.shape[-1])) @ position.rel_k[layer].transpose(0, 1)          # [B, H, L, 2·clip + 1]
        index = shaw_clip_index(length, k=clip, device=q.device).expand(*q.shape[:2], length, length)
        return F.scaled_dot_product_attention(q, k, v, attn_mask=_with_mask(torch.gather(rel, -1, index), causal)), None
    return attend


def _user_sdpa(model: torch.nn.Module) -> tuple[torch.nn.Module, str]:
    """The same model as a user would write it for F.scaled_dot_product_attention: the scheme's own
    term, built the usual way and passed as attn_mask (a transcription per scheme class; schemes
    without a relative term: plain SDPA). Returns the model and what its attention leaves out."""
    writers = {T5: _toeplitz_user, AlibiScheme: _toeplitz_user, Kerple: _toeplitz_user, Rope: _rope_user,
               Fire: _fire_user, Skew: _skew_user, Shaw: _shaw_user}
    position, config = model.position, model.config
    writer = writers.get(type(position))
    if writer is None:                                           # no relative term: absolute or none
        return _plain_sdpa(model), ""
    position.attend = writer(position, config, config.causal)
    return model, "key term only: SDPA cannot add Shaw's a^V value term" if writer is _shaw_user else ""


MODEL_TARGET = 1.3


def model_section(ctx: BenchContext) -> SectionResult:
    batch, length = (2, 32) if ctx.quick else (8, 256)
    rounds = 1 if ctx.quick else 7
    rows = []
    tokens = torch.randint(0, 10, (batch, length), generator=torch.Generator().manual_seed(0))
    for scheme in QUICK_MODEL_SCHEMES if ctx.quick else SCHEMES:
        ctx.log(f"model: {scheme} (load {load_average()})")
        config = ModelConfig(scheme=scheme, max_len=max(64, length), skew_distances=32)
        ours = build_model(config, seed=0)
        user, note = _user_sdpa(build_model(config, seed=0))
        with torch.no_grad():                                               # the same model? (Shaw: no a^V)
            difference = float((ours(tokens)[0] - user(tokens)[0]).abs().max())
        calls = {"relviz": _train_step_call(ours, tokens), "sdpa": _train_step_call(user, tokens),
                 "floor": _train_step_call(_plain_sdpa(build_model(config, seed=0)), tokens)}
        for call in calls.values():
            call()                                                          # warm-up
        times = time_in_turns(calls, rounds, SAMPLE_S)
        med = {name: statistics.median(t) for name, t in times.items()}
        rows.append({"scheme": scheme, "relviz_s": med["relviz"], "sdpa_s": med["sdpa"], "floor_s": med["floor"],
                     "ratio": med["relviz"] / med["sdpa"], "floor_ratio": med["relviz"] / med["floor"],
                     "logits_diff": difference, "note": note, "load": load_average()})
    over = [r for r in rows if r["ratio"] > MODEL_TARGET]
    same = [r for r in rows if not r["note"]]
    targets = [Target(f"every scheme's train step ≤ {MODEL_TARGET}× the same model written for fused SDPA "
                      f"(B{batch}×L{length})", None if ctx.quick or not rows else not over,
                      ", ".join(f"{r['scheme']} {r['ratio']:.2f}×" for r in rows)),
               Target("the SDPA model computes the same logits (max |Δ| ≤ 1e-4; Shaw's leaves out a^V)",
                      all(r["logits_diff"] <= 1e-4 for r in same) if same else None,
                      f"largest {max(r['logits_diff'] for r in same):.1e}" if same else "n/a")]
    speed = lambda x: f"{x:.2f}×"  # noqa: E731
    return SectionResult(
        name="model", title=f"Model train step (forward + backward + AdamW), B={batch} L={length}: relviz vs the "
                            "same model written for F.scaled_dot_product_attention, and vs the no-position floor",
        columns=[Column("scheme", "scheme"), Column("relviz_s", "relviz ms", ms),
                 Column("sdpa_s", "same model, SDPA ms", ms), Column("ratio", "÷ SDPA", speed),
                 Column("floor_s", "floor ms", ms), Column("floor_ratio", "÷ floor", speed),
                 Column("logits_diff", "max |Δ logits|", lambda x: f"{x:.1e}"),
                 Column("note", "alternative leaves out"), Column("load", "load avg")],
        rows=rows, targets=targets,
        notes=["Default ModelConfig (d_model 64, 2 layers, 4 heads, d_ff 256), the same weights in all three. "
               "relviz: the model as training runs it (need_weights=False: each layer's fused path). "
               "same model, SDPA: each scheme's term written by hand for F.scaled_dot_product_attention "
               "(T5/ALiBi/KERPLE: the full [1, H, L, L] bias built once per forward, as Hugging Face's T5 "
               "shares position_bias; FIRE, skew, Shaw: the bias per layer; RoPE: rotate, then is_causal). "
               "floor: plain causal SDPA, no relative term at all (absolute schemes keep their embeddings). "
               f"{rounds} rounds taking turns after a warm-up, each sample at least {SAMPLE_S * 1e3:.0f} ms of "
               "repeated steps, medians of the per-step means."])

