"""The observer's recorders: what transformers' modeling code runs on each layer, caught as it runs.

``Recorder`` wraps a modeling module's ``eager_attention_forward`` and ``apply_*rotary*`` functions, and torch's
softmax (for families whose attention does not go through ``eager_attention_forward``: the scores each
[B, H, L, L] softmax gets), keyed by the layer running (a forward pre-hook on each layer of the list).
``partners`` probes a recorded rotation with one unit vector per dim; ``allowed``, ``biased`` and
``allowed_scores`` read which keys each query may see, and whether a bias rides in the mask; ``inputs`` are the
probe's token ids (an encoder-decoder's decoder fed too). relviz.observe turns the calls into a per-layer
observation.
"""
from __future__ import annotations

import inspect
from typing import Any

import torch

from relviz.mechanisms.indexer import INDEXER_MODULES
from relviz.observe_shrink import PROBE_FIRST, PROBE_TOKENS

__all__ = ["INDEXER_SCOPE", "Recorder", "layer_list", "allowed", "biased", "allowed_scores", "masked_fill", "partners",
           "inputs", "query_pre_scale", "PRE_SCALE", "rotation_input"]


#: the prefix of a call's name made inside a DSA indexer module (relviz.mechanisms.indexer)
INDEXER_SCOPE = "indexer:"


class Recorder:
    """Recorders around one modeling module's functions, keyed by the layer that is running."""

    def __init__(self, modeling: Any, model: torch.nn.Module, layers: torch.nn.ModuleList) -> None:
        self.modeling, self.layer = modeling, -1
        self.inside = 0                  # how deep in INDEXER_MODULES the running code is (they nest: V4's indexer
                                         # runs inside its compressor)
        self.calls: list[tuple[int, str, tuple, dict, Any]] = []
        self.restore: list[tuple[str, Any]] = []
        self.ran: set[int] = set()                     # the layers whose forward ran (Mllama skips some on text)
        self.hooks = [m.register_forward_pre_hook(lambda mod, args, k=k: self._enter(k)) for k, m in enumerate(layers)]
        for module in layers.modules():
            if any(fragment in type(module).__name__ for fragment in INDEXER_MODULES):
                self.hooks += [module.register_forward_pre_hook(lambda *_: setattr(self, "inside", self.inside + 1)),
                               module.register_forward_hook(lambda *_: setattr(self, "inside", self.inside - 1))]
        self.linear_out: dict[int, torch.Tensor] = {}     # id(nn.Linear) -> its latest output (a query's source)
        self.hooks += [m.register_forward_hook(lambda mod, args, out: self.linear_out.__setitem__(id(mod), out))
                       for m in model.modules() if isinstance(m, torch.nn.Linear)]
        self.restore_static: list[tuple[type, str, Any]] = []
        for name in dir(modeling):
            fn = getattr(modeling, name)
            if callable(fn) and getattr(fn, "__module__", None) == modeling.__name__ and not isinstance(fn, type) and (
                    name == "eager_attention_forward" or _rotary(name)):
                self._wrap(name, fn)
            elif isinstance(fn, type) and fn.__module__ == modeling.__name__:   # RoFormer's rotation: a static method
                for attr, raw in list(vars(fn).items()):
                    if isinstance(raw, staticmethod) and _rotary(attr):
                        self.restore_static.append((fn, attr, raw))
                        self._wrap(f"{fn.__name__}.{attr}", raw.__func__, owner=fn, attr=attr)
        self.softmax_restore = [(owner, "softmax", owner.softmax) for owner in (torch.nn.functional, torch,
                                                                                torch.Tensor)]
        for owner, name, original in self.softmax_restore:
            setattr(owner, name, self._softmax(original))

    def _enter(self, k: int) -> None:
        self.layer = k
        self.ran.add(k)

    def _softmax(self, original: Any) -> Any:
        """A softmax that notes, per layer, the keys each query may see where it runs over [B, H, L, L] scores (or
        [B·H, L, L]): a family whose attention does not go through eager_attention_forward (Bloom, Falcon, GPT-J,
        TrOCR) is seen there."""
        def wrapped(x, *args, **kwargs):
            dim = kwargs.get("dim", args[0] if args else None)
            out = original(x, *args, **kwargs)
            if isinstance(x, torch.Tensor) and x.ndim in (3, 4) and x.shape[-1] == x.shape[-2] and \
                    dim in (-1, x.ndim - 1) and x.is_floating_point() and isinstance(out, torch.Tensor):
                x4 = x if x.ndim == 4 else x[None]          # [B·H, L, L] (TrOCR, XGLM, MVP) as [1, B·H, L, L]
                fill = masked_fill(x4, out.reshape(x4.shape))
                self.calls.append((self.layer, "softmax", (allowed_scores(x4, fill), x4[0].detach().clone()),
                                   {"fill": fill}, None))
            return out
        return wrapped

    def _wrap(self, name: str, original: Any, owner: type | None = None, attr: str = "") -> None:
        self.restore.append((name, original))

        def wrapped(*args, **kwargs):
            out = original(*args, **kwargs)
            if name == "eager_attention_forward":
                kwargs = {**kwargs, PRE_SCALE: query_pre_scale(args[0] if args else kwargs.get("module"), args[1] if len(
                    args) > 1 else kwargs.get("query"), self.linear_out)}
            self.calls.append((self.layer, (INDEXER_SCOPE if self.inside else "") + name, args, kwargs, out))
            return out
        if owner is None:
            setattr(self.modeling, name, wrapped)
        else:
            setattr(owner, attr, staticmethod(wrapped))

    def close(self) -> None:
        for name, original in self.restore:
            if "." not in name:
                setattr(self.modeling, name, original)
        for owner, attr, raw in self.restore_static:
            setattr(owner, attr, raw)
        for owner, name, original in self.softmax_restore:
            setattr(owner, name, original)
        for hook in self.hooks:
            hook.remove()


#: the key a recorded eager call's kwargs gain: the factor its module multiplied q by before the call, or None
PRE_SCALE = "relviz_query_pre_scale"


def query_pre_scale(module: Any, query: Any, outputs: dict[int, torch.Tensor]) -> float | None:
    """The factor the attention module multiplied its q projection's output by before handing it over (OPT,
    Whisper: ``q_proj(x) * self.scaling``, then ``scaling=1.0`` in the call), proven ``torch.equal``: one of the
    module's own linear layers' output times its ``scaling`` attribute, in [B, H, L, d], is the query it handed
    over. None where no such factor is shown (most families scale in the call)."""
    factor = getattr(module, "scaling", None)
    if not isinstance(query, torch.Tensor) or query.ndim != 4 or isinstance(factor, bool) or \
            not isinstance(factor, (int, float)) or factor == 1:
        return None
    batch, heads, length, width = query.shape
    for child in module.children():
        out = outputs.get(id(child))
        if isinstance(out, torch.Tensor) and out.numel() == query.numel() and out.shape[:2] == (batch, length) \
                and torch.equal((out * factor).view(batch, length, heads, width).transpose(1, 2), query):
            return float(factor)
    return None


def _rotary(name: str) -> bool:
    """A function the recorder wraps as a rotation: apply_rotary_pos_emb and its kin."""
    return name.startswith("apply") and ("rotary" in name or "rope" in name)


def rotation_input(args: tuple, out: Any) -> int:
    """Which argument of a recorded rotation is the tensor it turns: the first of the output's shape (0 for
    apply_rotary_pos_emb(q, k, cos, sin); 1 for RoFormer's (sinusoidal_pos, q, k))."""
    first = out[0] if isinstance(out, (tuple, list)) else out
    return next((i for i, a in enumerate(args) if isinstance(a, torch.Tensor) and isinstance(first, torch.Tensor)
                 and a.shape == first.shape), 0)


def layer_list(model: torch.nn.Module, count: int) -> torch.nn.ModuleList:
    lists = [m for n, m in model.named_modules() if isinstance(m, torch.nn.ModuleList) and len(m) == count
             and not n.split(".")[-1].startswith(("vision", "visual"))]
    if not lists:
        raise ValueError(f"the model transformers built has no list of {count} layers to observe")
    return lists[0]


def allowed(mask: Any, length: int) -> torch.Tensor:
    if mask is None:                                   # no mask: every query sees every key
        return torch.ones(length, length, dtype=torch.bool)
    mask = mask[0, 0, :, :length]
    return mask if mask.dtype == torch.bool else mask > torch.finfo(mask.dtype).min / 2


def biased(mask: Any, length: int) -> bool:
    """Whether a float mask adds something other than 0 where it allows a key (a position bias in the mask)."""
    if not isinstance(mask, torch.Tensor) or mask.dtype == torch.bool:
        return False
    mask = mask[..., :length]
    return bool((mask[mask > torch.finfo(mask.dtype).min / 2] != 0).any())


def allowed_scores(scores: torch.Tensor, fill: float | None = None) -> torch.Tensor:
    """bool [L, L]: where the scores handed to a softmax let a query see a key: not -inf, and not near the
    dtype's min (a masked score may be divided by the scale after masking, as CodeGen's: min / 16 still masks),
    nor ``fill`` (a finite value the masked scores are set to: ``masked_fill``)."""
    first = scores[0, 0].detach()
    seen = torch.isfinite(first) & (first > torch.finfo(first.dtype).min / 2 ** 16)
    return seen if fill is None else seen & (first != fill)


def masked_fill(scores: torch.Tensor, weights: torch.Tensor) -> float | None:
    """The finite value a family sets its masked scores to instead of −inf (OpenAI GPT's −1e4), or None.

    scores, weights [B, H, L, L]: a softmax's input and its output. The fill is the lowest score of the first row
    block, shared by the entries it masks, where the softmax gave every one of them exactly 0 weight in every head
    (exp(fill − the row's largest score) underflowed): then the weights are exactly those of a mask there, which
    is what was run, not assumed. A lowest score with any weight is a score, and no fill."""
    first = scores[0, 0].detach()
    seen = torch.isfinite(first) & (first > torch.finfo(first.dtype).min / 2 ** 16)
    if not bool(seen.any()):
        return None
    low = first[seen].min()
    at = seen & (first == low)                                                          # [L, L]
    if bool(at.all()) or not bool((scores[:, :, at] == low).all()) or bool((weights[:, :, at] != 0).any()):
        return None
    return float(low)


def partners(fn: Any, args: tuple, kwargs: dict, x: torch.Tensor, axis: int, at: int = 0) -> list[int]:
    """Probe a rotation: one unit vector per dim at position 1; the dim each lands on (itself: not rotated).

    All dims in one call where the rotation broadcasts over its heads axis (one unit vector per head);
    else one call per dim."""
    width = x.shape[-1]
    heads = [a for a in range(1, x.ndim - 1) if a != axis]
    if heads:
        shape = list(x.shape)
        shape[0], shape[heads[0]] = 1, width
        probe = torch.zeros(shape, dtype=x.dtype)                                    # [1, width, L, width] or so
        probe.movedim(heads[0], 0).select(1, 0).reshape(width, -1, width)[:] = torch.eye(width)[:, None, :]
        try:
            turned = fn(*_probing(args, probe, at), **kwargs)
            turned = turned[0] if isinstance(turned, tuple) else turned
            rows = turned.select(axis, 1).movedim(heads[0] - (heads[0] > axis), 1).reshape(-1, width, width)[0]
            return _landing(rows.clone())
        except (RuntimeError, ValueError, IndexError):
            pass                                  # it does not broadcast over heads: one dim at a time
    rows = []
    for d in range(width):
        probe = torch.zeros_like(x)
        probe[..., d] = 1.0
        try:
            turned = fn(*_probing(args, probe, at), **kwargs)
        except (RuntimeError, ValueError, IndexError, TypeError) as exc:
            raise ValueError(f"the observer could not probe this family's rotation ({getattr(fn, '__name__', fn)} "
                             f"refused one unit vector per dim: {type(exc).__name__}: {str(exc)[:160]})") from exc
        turned = turned[0] if isinstance(turned, tuple) else turned
        rows.append(turned.select(axis, 1).reshape(-1, width)[0])                  # [width] at position 1
    return _landing(torch.stack(rows))


def _probing(args: tuple, probe: torch.Tensor, at: int = 0) -> tuple:
    """The recorded call's arguments with its query (argument ``at``) and its key (the next argument when it is
    one) replaced."""
    x = args[at]
    key = len(args) > at + 1 and isinstance(args[at + 1], torch.Tensor) and args[at + 1].ndim == x.ndim and \
        args[at + 1].shape[-1] == x.shape[-1]
    return (*args[:at], probe, probe, *args[at + 2:]) if key else (*args[:at], probe, *args[at + 1:])


def _landing(rows: torch.Tensor) -> list[int]:
    """rows [width, width]: unit vector d rotated; the dim each lands on besides itself (itself: not rotated)."""
    width = rows.shape[0]
    rows[torch.arange(width), torch.arange(width)] = 0.0
    big = rows.abs().max(dim=-1)
    return [int(i) if bool(v > 1e-6) else d for d, (v, i) in enumerate(zip(big.values, big.indices))]


def inputs(model: torch.nn.Module, length: int, ids: torch.Tensor | None = None) -> dict[str, torch.Tensor]:
    """Random token ids at ``length`` positions (or ``ids``); an encoder-decoder also gets them as its decoder's
    input."""
    ids = torch.randint(PROBE_FIRST, PROBE_TOKENS, (1, length)) if ids is None else ids
    wants = inspect.signature(model.forward).parameters
    return {"input_ids": ids, **({"decoder_input_ids": ids.clone()} if "decoder_input_ids" in wants else {})}
