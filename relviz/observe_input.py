"""The input side of an observation: what the embedding stage adds per position, found from what transformers runs.
Used by relviz.observe (and its layer probes, relviz.observe_position); every finding is a ``torch.equal``.

``input_position``: one forward with every token the same. Where the first layer's input is equal at every position,
nothing before it carries position (NoPE on the input). Otherwise the module that does is found by its output: its
rows equal rows ``p + offset`` of a table it owns (the offset read from the rows, e.g. OPT's 2); or, where no module
hands one out (CTRL indexes a sinusoid buffer in its own forward), with every token embedding zeroed the first
layer's input rows are rows of it. The table, made constant, must leave the first layer's input equal at every
position again (nothing else adds position); a fixed table must equal relviz's sinusoidal encoding in one of its
layouts and arithmetics, a trained one is a learned absolute table. Layers that run over more positions than the
tokens given (a prompt of the model's own, streams that predict further ahead) are refused by name.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from relviz.mechanisms.absolute import LearnedAbsolute
from relviz.mechanisms.base import Mechanism
from relviz.mechanisms.none import NoPosition
from relviz.mechanisms.sinusoidal import VARIANTS, SinusoidalAbsolute

__all__ = ["InputPosition", "input_position", "layer_input", "same_everywhere", "keeping", "TOKEN", "Run"]

#: a constant token for the probes (inside every tiny vocabulary, past the pad and bos ids relviz.observe sets)
TOKEN = 7
#: one forward of the model on token ids [1, L]
Run = Callable[[torch.Tensor], Any]


@dataclass
class InputPosition:
    """What the embedding stage adds per position: the mechanism (NoPosition, LearnedAbsolute or
    SinusoidalAbsolute, holding the offset found), or None with the reason relviz cannot tell."""

    found: Mechanism | None
    reason: str = ""
    tensor: str = ""                 # the table's name in the model ("decoder.embed_positions.weight")
    rows: int = 0                    # the table's rows (the offset's included)

    def words(self) -> str:
        if self.found is None:
            return f"something relviz cannot tell ({self.reason})"
        return self.found.describe() + (f" (from {self.tensor})" if self.tensor else "")


def layer_input(args: tuple, kwargs: dict) -> tuple[torch.Tensor | None, Callable[[torch.Tensor], tuple]]:
    """A layer's input hidden states [B, L, D] and how to hand it a replacement."""
    if isinstance(kwargs.get("hidden_states"), torch.Tensor):
        return kwargs["hidden_states"], lambda h: (args, {**kwargs, "hidden_states": h})
    if args and isinstance(args[0], torch.Tensor) and args[0].ndim >= 3:     # [..., B, L, D] (Gemma 3n: altup first)
        return args[0], lambda h: ((h, *args[1:]), kwargs)
    return None, lambda h: (args, kwargs)


def _first_input(run: Run, layers: torch.nn.ModuleList, length: int) -> torch.Tensor | None:
    """The first layer's input [B, L, D] on a forward of one token repeated ``length`` times."""
    got: list[torch.Tensor] = []

    def grab(module, args, kwargs):
        h, _ = layer_input(args, kwargs)
        if h is not None and not got:
            got.append(h.detach().clone())
    hook = layers[0].register_forward_pre_hook(grab, with_kwargs=True)
    try:
        with torch.no_grad():
            run(torch.full((1, length), TOKEN))
    finally:
        hook.remove()
    return got[0] if got else None


def same_everywhere(h: torch.Tensor, axis: int = -2) -> bool:
    first = h.narrow(axis, 0, 1)
    return torch.equal(h, first.expand_as(h))


def _tables(model: torch.nn.Module, layers: torch.nn.ModuleList) -> list[tuple[str, torch.nn.Module, str]]:
    """(module path, module, tensor attribute) for every 2-D tensor a module outside the layers owns itself."""
    inside = {id(m) for m in layers.modules()}
    out = []
    for path, module in model.named_modules():
        if id(module) in inside:
            continue
        for name, t in [*module.named_parameters(recurse=False), *module.named_buffers(recurse=False)]:
            if t.ndim == 2 and t.is_floating_point():
                out.append((path, module, name))
    return out


def keeping(store: dict[int, Any], k: int) -> Callable[..., None]:
    """A forward hook that keeps module k's first output tensor (and returns None: the output stays as it is)."""
    def hook(module, args, out) -> None:
        first = out[0] if isinstance(out, (tuple, list)) else out
        if isinstance(first, torch.Tensor) and k not in store:
            store[k] = first.detach().clone()
    return hook


def _rows_read(out: torch.Tensor, table: torch.Tensor, length: int) -> list[int] | None:
    """Which row of ``table`` each of the last ``length`` output rows equals (None: some row is no row of it)."""
    width = table.shape[-1]
    if out.shape[-1] != width or out.numel() % (length * width):
        return None
    rows = out.reshape(-1, length, width)[0]                                        # [L, D]
    hits = (rows[:, None, :] == table[None, :, :]).all(-1)                          # [L, N]
    if not bool(hits.any(-1).all()):
        return None
    return [int(h.nonzero()[0]) for h in hits]


def input_position(model: torch.nn.Module, layers: torch.nn.ModuleList, length: int, run: Run) -> InputPosition:
    """What the embedding stage adds per position (ValueError where relviz cannot tell exactly). ``run(ids)``: one
    forward of the model on token ids [1, L] (relviz.observe's, which feeds an encoder-decoder's decoder too)."""
    first = _first_input(run, layers, length)
    if first is None:
        raise ValueError("the observer could not see the first layer's input (no hidden-states argument)")
    ran = first.shape[-2]
    if length not in first.shape[:-1]:             # (XLNet's is [L, B, D]: an axis of the length is enough)
        what = f"adds {ran - length} of its own (a prompt of learned tokens, streams that predict further ahead)" \
            if ran > length else f"drops {length - ran}"
        raise ValueError(f"its layers run over {ran} positions for the {length} tokens given: the model {what}, "
                         "which relviz does not read")
    if same_everywhere(first):
        return InputPosition(NoPosition())
    tables = _tables(model, layers)
    seen: dict[int, Any] = {}
    hooks = [m.register_forward_hook(keeping(seen, k)) for k, (_, m, _) in enumerate(tables)]
    try:
        with torch.no_grad():
            run(torch.full((1, length), TOKEN))
    finally:
        for hook in hooks:
            hook.remove()
    found = []
    for k, (path, module, name) in enumerate(tables):
        out = seen.get(k)
        rows = _rows_read(out, getattr(module, name), length) if out is not None else None
        if rows is not None and len(set(rows)) == length and all(r - p == rows[0] for p, r in enumerate(rows)):
            found.append((path, module, name, rows[0]))
    if not found:                                   # a buffer indexed in the model's own forward (CTRL's)
        found = _indexed_table(model, layers, tables, length, run)
    if len(found) != 1:
        what = "no table whose rows it reads by position" if not found else \
            f"{len(found)} tables read by position ({', '.join(f[0] for f in found)}: an encoder-decoder's, or a "\
            "second stack's; the observer reads one stack, and relviz does not guess the other)"
        raise ValueError(f"the first layer's input differs by position, and relviz found {what}: it cannot tell "
                         "what the input adds per position")
    path, module, name, offset = found[0]
    table = getattr(module, name)
    kept = table.detach().clone()
    with torch.no_grad():
        table.copy_(kept[offset].expand_as(kept))                      # every position's row made the same
    try:
        again = _first_input(run, layers, length)
    finally:
        with torch.no_grad():
            table.copy_(kept)
    tensor = f"{path}.{name}" if path else name
    if again is None or not same_everywhere(again):
        raise ValueError(f"besides {tensor}, something else adds position to the first layer's input: relviz "
                         "cannot tell what")
    rows, width = int(kept.shape[0]), int(kept.shape[1])
    held = kept[offset:].float().cpu()             # compared on the CPU, in the arithmetic relviz's tables are checked in
    for variant in VARIANTS:
        for float32 in (False, True):
            sinusoidal = SinusoidalAbsolute(width, variant, float32, offset)
            if width % 2 == 0 and torch.equal(held, sinusoidal.table(rows, device="cpu")[offset:]):
                return InputPosition(sinusoidal, tensor=tensor, rows=rows)      # (rows before the offset: padding)
    if isinstance(table, torch.nn.Parameter) and table.requires_grad:
        return InputPosition(LearnedAbsolute(tensor, offset=offset), tensor=tensor, rows=rows)
    raise ValueError(f"{tensor} holds fixed position vectors that are none of relviz's sinusoidal encodings "
                     f"({', '.join(VARIANTS)}; float64 or float32 arithmetic): relviz cannot tell what they are")


def _indexed_table(model: torch.nn.Module, layers: torch.nn.ModuleList, tables: list, length: int, run: Run
                   ) -> list[tuple[str, torch.nn.Module, str, int]]:
    """The table no module hands out, read by the model's forward itself (CTRL indexes a sinusoid buffer): with every
    token embedding (each ``nn.Embedding`` outside the layers) zeroed, the first layer's input rows are rows
    ``p + offset`` of it (``torch.equal``). The caller still proves, by making it constant, that it is the only
    thing that adds position."""
    inside = {id(m) for m in layers.modules()}
    embeddings = [m for m in model.modules() if isinstance(m, torch.nn.Embedding) and id(m) not in inside]
    kept = [m.weight.detach().clone() for m in embeddings]
    try:
        with torch.no_grad():
            for m in embeddings:
                m.weight.zero_()
        first = _first_input(run, layers, length)
    finally:
        with torch.no_grad():
            for m, w in zip(embeddings, kept):
                m.weight.copy_(w)
    if first is None:
        return []
    found = []
    for path, module, name in tables:
        if isinstance(module, torch.nn.Embedding):
            continue
        rows = _rows_read(first, getattr(module, name), length)
        if rows is not None and len(set(rows)) == length and all(r - p == rows[0] for p, r in enumerate(rows)):
            found.append((path, module, name, rows[0]))
    return found
