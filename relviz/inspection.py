"""What the live attention page shows about a trained model, as plain arrays (no Streamlit).

- :func:`run_view`: one typed sequence through a model, converted to numpy (the attention
  weights of every layer and head, the prediction against the task's target).
- :func:`random_text` and :func:`resize_text`: seeded examples in the task's alphabet.
- :func:`mean_attention_by_offset`: for each head, the mean weight on the keys at each
  relative offset j − i (one diagonal of the weight matrix per offset), and
  :func:`offset_findings`: what that profile says about the task, in words, from the data.
- :func:`position_structure`: a layer's position mechanism's quantity for every cell (T5 bucket, Shaw
  clip index, ALiBi bias, skew's E_r row, ...) at a given length, for the picture beside the
  attention and for the hover on every attention cell, and :func:`parameter_views`: its position
  parameters as data. Both are the mechanism's (relviz.mechanisms), the ones Your model draws.

Sign convention everywhere: relative position = key index − query index (j − i).
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from relviz._checks import check_int
from relviz.mechanisms.view_kinds import LayerView, Note
from relviz.model import ModelConfig, RelvizTransformer
from relviz.schemes import get_scheme, scheme_names
from relviz.schemes.base import clamped_layer
from relviz.schemes.view_kinds import PositionStructure
from relviz.tasks import DIGITS, Absolute, Shift, Task, WindowMax
from relviz.training.evaluation import run_text

__all__ = [
    "about_the_models", "OFFSET_PROFILE", "LiveModel", "RunView", "run_view", "random_text", "resize_text", "OffsetProfile", "mean_attention_by_offset",
    "peak_offsets", "Finding", "offset_findings", "column_attention", "window_attention",
    "PositionStructure", "position_structure", "parameter_views", "structure_text", "no_structure_text", "parameter_caption",
    "clamped_layer",
]

#: Longest random example :func:`random_text` draws.
MAX_TEXT = 100_000


# ---------------------------------------------------------------------------------------
# The models a page shows, whatever their origin


def about_the_models() -> str:
    """What the shipped models are, in Markdown: the common shape (ModelConfig's defaults), and each scheme that
    departs from it in its own words (``Scheme.shape_note``)."""
    common = ModelConfig()
    notes = [get_scheme(name).shape_note for name in scheme_names() if get_scheme(name).shape_note]
    more = f", some with more layers: {', '.join(notes[:-1])} and {notes[-1]}" if len(notes) > 1 else (
        f", one with more layers: {notes[0]}" if notes else "")
    return (f"A small transformer ({common.n_layers} layers, {common.n_heads} heads, d_model {common.d_model}, "
            f"{'causal' if common.causal else 'bidirectional'}) was trained with **each position scheme** on the "
            f"same task{more}. Pick one in the sidebar, give it a "
            "sequence, and see what it predicts and **where every head looks**, next to the position structure its "
            "scheme gave it. Then train your own at the bottom of the page.")


@dataclass(frozen=True)
class LiveModel:
    """A trained model the live page shows: a shipped checkpoint or one trained in the session.

    ``key`` is unique per weights (the page's cache key).
    """

    key: str
    name: str
    model: RelvizTransformer
    task: Task
    train_length: int
    accuracy: float
    steps: int
    origin: str

    @property
    def config(self):
        return self.model.config

    @property
    def scheme(self) -> str:
        return self.model.config.scheme

    @classmethod
    def from_checkpoint(cls, name: str, checkpoint) -> LiveModel:
        """From a loaded :class:`relviz.training.Checkpoint`."""
        info = checkpoint.info
        return cls(f"shipped:{name}", name, checkpoint.model, info.task, info.train_length, info.accuracy,
                   info.steps, "shipped checkpoint")

    @classmethod
    def from_trained(cls, trained) -> LiveModel:
        """From a :class:`relviz.app.training_queue.TrainedModel` (a model trained in this session)."""
        return cls(trained.key, trained.name, trained.model, trained.task, trained.train_length, trained.accuracy,
                   trained.request.steps, "trained in this session")


    def headline(self) -> str:
        """One line: name, scheme, task and accuracy at the training length."""
        return (f"**{self.name}** · scheme **{self.scheme}** · task **{self.task.describe()}** · "
                f"{self.accuracy:.1%} at its training length {self.train_length}")

    def description(self) -> str:
        """The model in Markdown: its scheme with the scheme's parameters and summary, its task, its shape, how
        long it trained and its held-out accuracy."""
        config, task = self.config, self.task
        params = ", ".join(f"{k} = {v}" for k, v in config.scheme_params().items())
        return (f"**{self.name}** ({self.origin}) · scheme **{self.scheme}**{f' ({params})' if params else ''}: "
                f"{get_scheme(self.scheme).summary}.  \n"
                f"Task **{task.describe()}**: {task.summary}  \n"
                f"{config.n_layers} layers × {config.n_heads} heads, {'causal' if config.causal else 'bidirectional'}; "
                f"trained {self.steps} steps at length **{self.train_length}**; accuracy on held-out sequences at "
                f"that length: **{self.accuracy:.1%}**.")


# ---------------------------------------------------------------------------------------
# One sequence through a model


@dataclass(frozen=True)
class RunView:
    """A typed sequence through a model, as numpy arrays (picklable, for st.cache_data).

    ``weights`` is [n_layers, H, L, L] float32; ``target_text`` has "·" where no answer counts.
    """

    text: str
    predicted_text: str
    target_text: str
    mask: np.ndarray          # [L] bool: positions whose answer counts
    correct: np.ndarray       # [L] bool (False where mask is False)
    accuracy: float | None    # over the counted positions; None when none counts
    weights: np.ndarray       # [n_layers, H, L, L] float32

    @property
    def length(self) -> int:
        return len(self.text)

    @property
    def errors(self) -> list[int]:
        """Positions that count and were predicted wrong."""
        return np.flatnonzero(self.mask & ~self.correct).tolist()

    def accuracy_between(self, start: int, stop: int) -> float | None:
        """Accuracy over the counted positions start..stop − 1 (None if none counts there)."""
        mask = self.mask[start:stop]
        counted = int(mask.sum())
        return int(self.correct[start:stop].sum()) / counted if counted else None


    def accuracy_line(self, train_length: int) -> str | None:
        """The run's accuracy in words: overall, within and beyond ``train_length`` when the sequence is longer,
        and the wrong positions (the first 20); None when no position counts."""
        if self.accuracy is None:
            return None
        parts = [f"**{self.accuracy:.1%}** correct over the {int(self.mask.sum())} positions that count"]
        if self.length > train_length:
            inside = self.accuracy_between(0, train_length)
            beyond = self.accuracy_between(train_length, self.length)
            if inside is not None:
                parts.append(f"{inside:.1%} within the training length {train_length}")
            if beyond is not None:
                parts.append(f"**{beyond:.1%} beyond it** (extrapolation)")
        errors = self.errors
        shown = ", ".join(map(str, errors[:20])) + (" …" if len(errors) > 20 else "")
        parts.append(f"wrong at positions {shown}" if errors else "no errors")
        return " · ".join(parts)


def run_view(model: RelvizTransformer, task: Task, text: str) -> RunView:
    """Run ``text`` (in the task's alphabet) through ``model``; bad text raises ValueError."""
    run = run_text(model, task, text)
    weights = torch.stack(run.attentions).to(torch.float32).numpy()
    return RunView(text=run.text, predicted_text=run.predicted_text, target_text=run.target_text,
                   mask=run.mask.numpy(), correct=run.correct.numpy(), accuracy=run.accuracy,
                   weights=weights)


def random_text(length: int, seed: int, alphabet: str = DIGITS) -> str:
    """``length`` uniformly random characters of ``alphabet``; the same seed gives the same text.

    The tasks sample their inputs the same way (uniform tokens), so a random example is a
    typical input. The global RNG is not touched.
    """
    length = check_int("length", length, minimum=1, maximum=MAX_TEXT)
    seed = check_int("seed", seed, minimum=0, maximum=2**63 - 1)
    if not isinstance(alphabet, str) or not alphabet:
        raise ValueError("alphabet must be a non-empty string")
    generator = torch.Generator().manual_seed(seed)
    ids = torch.randint(0, len(alphabet), (length,), generator=generator).tolist()
    return "".join(alphabet[t] for t in ids)


def resize_text(text: str, length: int, seed: int, alphabet: str = DIGITS) -> str:
    """``text`` cut or extended to ``length``: the first characters are kept, new ones are
    those of ``random_text(length, seed)`` at the same positions."""
    length = check_int("length", length, minimum=1, maximum=MAX_TEXT)
    text = text.strip() if isinstance(text, str) else ""
    if len(text) >= length:
        return text[:length]
    return text + random_text(length, seed, alphabet)[len(text):]


# ---------------------------------------------------------------------------------------
# Mean attention by offset


#: What the mean attention by offset is, and what to look for in it.
OFFSET_PROFILE = ("For each head: the average weight on the keys at offset j − i, over every query that has such a "
                  "key (one diagonal of its heatmap). A relative habit shows up as a peak at a fixed offset.")


@dataclass(frozen=True)
class OffsetProfile:
    """Mean attention weight per relative offset j − i, for every leading index (layer, head).

    ``mean[..., t]`` is the mean of the weights on the diagonal j − i = ``offsets[t]``, which
    holds ``counts[t]`` = L − |offset| cells.
    """

    offsets: np.ndarray  # [2L − 1] int64: −(L − 1) .. L − 1
    mean: np.ndarray     # [..., 2L − 1] float64
    counts: np.ndarray   # [2L − 1] int64


def mean_attention_by_offset(weights: np.ndarray | torch.Tensor) -> OffsetProfile:
    """Average the weights [..., L, L] along each diagonal: one value per offset j − i.

    One pass over the cells (each weight is added once to its diagonal's sum, in float64), then each sum
    is divided by the number of cells on that diagonal. In numpy (np.bincount), not torch's index_add_: the same
    sums bit for bit, and on a two-core server torch's two threads spun ~40 ms of CPU at length 200 with 24 heads
    (2 ms here).
    """
    w = weights.detach() if isinstance(weights, torch.Tensor) else np.asarray(weights)
    if w.ndim < 2 or w.shape[-1] != w.shape[-2] or w.shape[-1] < 1:
        raise ValueError(f"weights must have shape [..., L, L] with L >= 1; got {tuple(w.shape)}")
    if not (w.is_floating_point() if isinstance(w, torch.Tensor) else np.issubdtype(w.dtype, np.floating)):
        raise ValueError(f"weights must be floating point; got {w.dtype}")
    if isinstance(w, torch.Tensor):
        w = w.to("cpu", torch.float64).numpy()
    length = w.shape[-1]
    lead = w.shape[:-2]
    positions = np.arange(length)
    index = (positions[None, :] - positions[:, None] + length - 1).reshape(-1)
    flat = w.astype(np.float64).reshape(-1, length * length)
    sums = np.zeros((flat.shape[0], 2 * length - 1))
    for row, cells in zip(sums, flat):
        row[:] = np.bincount(index, weights=cells, minlength=2 * length - 1)
    offsets = np.arange(-(length - 1), length, dtype=np.int64)
    counts = length - np.abs(offsets)
    mean = (sums / counts).reshape(*lead, 2 * length - 1)
    return OffsetProfile(offsets=offsets, mean=mean, counts=counts)


def _considered(profile: OffsetProfile, causal: bool) -> np.ndarray:
    """Offsets a peak search looks at: enough cells to average (≥ L/4), no masked future."""
    length = (len(profile.offsets) + 1) // 2
    keep = profile.counts >= max(1, length // 4)
    if causal:
        keep &= profile.offsets <= 0
    return keep


def peak_offsets(profile: OffsetProfile, *, causal: bool) -> np.ndarray:
    """For each leading index (layer, head), the offset j − i with the largest mean weight.

    Offsets averaged over fewer than L/4 cells (the far corners) are left out: a single
    cell, e.g. a query's weight on the first token, would otherwise pass for a pattern.
    """
    keep = _considered(profile, causal)
    masked = np.where(keep, profile.mean, -np.inf)
    return profile.offsets[np.argmax(masked, axis=-1)]


def column_attention(weights: np.ndarray, column: int) -> np.ndarray:
    """Mean weight on key ``column`` over the queries that can see it (i ≥ column): [...]."""
    weights = np.asarray(weights)
    length = weights.shape[-1]
    column = check_int("column", column, minimum=0, maximum=length - 1)
    return weights[..., column:, column].mean(axis=-1)


def window_attention(weights: np.ndarray, w: int) -> np.ndarray:
    """Share of attention on the keys j − i = −(w − 1)..0, averaged over queries i ≥ w − 1: [...]."""
    weights = np.asarray(weights)
    length = weights.shape[-1]
    w = check_int("w", w, minimum=1, maximum=length)
    i = np.arange(length)[:, None]
    j = np.arange(length)[None, :]
    window = (j <= i) & (j > i - w)
    return (weights * window)[..., w - 1:, :].sum(axis=-1).mean(axis=-1)


@dataclass(frozen=True)
class Finding:
    """One sentence about the data, and whether it is the task's answer (the teaching moment)."""

    text: str
    good: bool


def _head_name(layer: int, head: int) -> str:
    return f"layer {layer + 1}, head {head + 1}"


def offset_findings(task: Task, profile: OffsetProfile, weights: np.ndarray, *, causal: bool,
                    scheme: str | None = None) -> list[Finding]:
    """What the mean-attention-by-offset profile ([n_layers, H, 2L − 1]) says about the task.

    Every sentence is computed from the data: which heads peak where the task's answer sits.
    ``scheme`` (its family: absolute, relative or none) shapes the explanation. Each task's reading is
    its own function, found by the task's class (:data:`_FINDINGS`; a task without one: no findings).
    """
    kind = get_scheme(scheme) if scheme is not None else None
    absolute, blind = (kind.in_input(), kind.without_position()) if kind is not None else (False, False)
    if profile.mean.ndim != 3:
        raise ValueError("profile must come from weights [n_layers, H, L, L]")
    seen = _Seen(profile, weights, peak_offsets(profile, causal=causal), (len(profile.offsets) + 1) // 2,
                 absolute, blind)
    reading = _FINDINGS.get(type(task))
    return [] if reading is None else reading(task, seen)


@dataclass(frozen=True)
class _Seen:
    """What every task's reading looks at: the profile, the weights, each head's peak offset [n_layers, H]."""

    profile: OffsetProfile
    weights: np.ndarray
    peaks: np.ndarray
    length: int
    absolute: bool      # the scheme adds positions to the input
    blind: bool         # the model gets no position at all

    @property
    def heads(self) -> int:
        return self.peaks.shape[0] * self.peaks.shape[1]


def _shift_findings(task: Shift, seen: _Seen) -> list[Finding]:
    s, profile, peaks = task.s, seen.profile, seen.peaks
    n_layers, n_heads = peaks.shape
    if s > seen.length - 1:
        return [Finding(f"The answer sits at j − i = −{s}, beyond this sequence (length {seen.length}): "
                        "make the sequence longer.", False)]
    t = int(np.flatnonzero(profile.offsets == -s)[0])
    at_answer = profile.mean[:, :, t]
    hits = sorted(((l, h) for l in range(n_layers) for h in range(n_heads) if peaks[l, h] == -s),
                  key=lambda lh: -at_answer[lh])
    if hits:
        best = ", ".join(f"{_head_name(l, h)} ({at_answer[l, h]:.0%})" for l, h in hits[:3])
        habit = ("Its positions are absolute, yet it learned a relative habit: from every query it finds the "
                 f"key {s} back." if seen.absolute else
                 "The model has learned the task's offset and finds it from every query: a relative habit.")
        return [Finding(
            f"{len(hits)} of {seen.heads} heads peak at j − i = −{s} = −s, the key exactly s places "
            f"back, where the answer is. Strongest: {best}{' …' if len(hits) > 3 else ''} — the share of the "
            f"head's attention that sits on that one offset, on average. {habit}", True)]
    l, h = np.unravel_index(np.argmax(at_answer), at_answer.shape)
    return [Finding(
        f"No head peaks at j − i = −{s}, where the answer sits. The most attention on that offset: "
        f"{_head_name(l, h)}, {at_answer[l, h]:.0%} on average. "
        + ("Without position information the model cannot single out that key; it can only guess among "
           "the tokens it sees." if seen.blind else
           "This model finds the answer some other way, or not at all: compare its accuracy."), False)]


def _window_findings(task: WindowMax, seen: _Seen) -> list[Finding]:
    w, length, peaks = task.w, seen.length, seen.peaks
    n_layers, n_heads = peaks.shape
    if w > length:
        return [Finding(f"The window (the last w = {w} tokens) is longer than this sequence (length {length}).",
                        False)]
    mass = window_attention(seen.weights, w)
    uniform = float(np.mean([min(w, i + 1) / (i + 1) for i in range(w - 1, length)]))
    l, h = np.unravel_index(np.argmax(mass), mass.shape)
    inside = [(a, b) for a in range(n_layers) for b in range(n_heads) if -(w - 1) <= peaks[a, b] <= 0]
    return [Finding(
        f"The answer lies in the window j − i = −{w - 1}…0. {_head_name(l, h)} keeps {mass[l, h]:.0%} of its "
        f"attention inside it, on average over the queries i ≥ {w - 1} (a head spreading evenly over the past "
        f"would keep {uniform:.0%}); {len(inside)} of {seen.heads} heads peak inside it.",
        bool(mass[l, h] >= 0.8 and mass[l, h] > uniform + 0.1))]


def _absolute_findings(task: Absolute, seen: _Seen) -> list[Finding]:
    p = task.p
    if p > seen.length - 1:
        return [Finding(f"The answer sits at key position p = {p}, beyond this sequence (length {seen.length}).",
                        False)]
    mass = column_attention(seen.weights, p)
    l, h = np.unravel_index(np.argmax(mass), mass.shape)
    return [Finding(
        f"The answer sits at absolute key position p = {p}: a different offset p − i for every query, so "
        f"no single offset can hold it and this profile has no peak for it. Look for a vertical line at "
        f"j = {p} in the heatmaps instead: {_head_name(l, h)} puts {mass[l, h]:.0%} of its attention on "
        f"key {p}, on average over the queries i ≥ {p}.", bool(mass[l, h] >= 0.5))]


#: task class -> its reading of the offset profile
_FINDINGS: dict[type[Task], Callable[[Any, _Seen], list[Finding]]] = {
    Shift: _shift_findings, WindowMax: _window_findings, Absolute: _absolute_findings}


# ---------------------------------------------------------------------------------------
# The scheme's own quantity for every cell, and its position parameters


def position_structure(model: RelvizTransformer, length: int, layer: int = 0) -> PositionStructure | None:
    """What layer ``layer``'s position mechanism puts into every (query i, key j) at ``length`` (the one Your model
    draws for that layer); None when it has none.

    Raises the model's ValueError if it cannot run at ``length`` (learned absolute beyond max_len).
    """
    return model.position.structure(model.check_length(length), layer)


def parameter_views(model: RelvizTransformer, *, length: int, train_length: int, layer: int = 0) -> list[LayerView]:
    """The scheme's position parameters as data (a bias curve, vector norms, a similarity matrix, ...)."""
    return model.position.parameter_views(length=length, train_length=train_length, layer=layer)


def no_structure_text(model: RelvizTransformer, layer: int = 0) -> str:
    """What the page says where layer ``layer``'s mechanism has no structure to draw: the mechanism's words."""
    return model.position.mechanism(clamped_layer(model.config, layer)).no_structure


def structure_text(structure: PositionStructure) -> str:
    """The explanation beside a position structure: its mechanism's words (the mechanism's module owns them)."""
    return structure.caption


def parameter_caption(view: LayerView) -> str:
    """The markdown under one of a layer's parameter views: its mechanism's words, carried in the view (a note's
    text, another view's caption)."""
    return view.text if isinstance(view, Note) else view.caption
