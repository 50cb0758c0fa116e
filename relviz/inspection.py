"""What the live attention page shows about a trained model, as plain arrays (no Streamlit).

- :func:`run_view`: one typed sequence through a model, converted to numpy (the attention
  weights of every layer and head, the prediction against the task's target).
- :func:`random_text` and :func:`resize_text`: seeded examples in the task's alphabet.
- :func:`mean_attention_by_offset`: for each head, the mean weight on the keys at each
  relative offset j − i (one diagonal of the weight matrix per offset), and
  :func:`offset_findings`: what that profile says about the task, in words, from the data.
- :func:`position_structure`: the scheme's own quantity for every cell (T5 bucket, Shaw clip
  index, ALiBi bias, skew's E_r row, ...) at a given length, for the picture beside the
  attention and for the hover on every attention cell.
- The learned position parameters of each scheme: :func:`t5_bias_curve`,
  :func:`relative_tables` (Shaw a^K/a^V, skew E_r), :func:`alibi_parameters`,
  :func:`learned_positions`.

Sign convention everywhere: relative position = key index − query index (j − i).
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import torch

from relviz._checks import check_int
from relviz.model import RelvizTransformer, sinusoidal_positions
from relviz.positions import alibi_bias, alibi_slopes, shaw_clip_index, t5_bucket, t5_bucket_map, t5_config
from relviz.tasks import DIGITS, Task
from relviz.training.evaluation import run_text

__all__ = [
    "RunView", "run_view", "random_text", "resize_text", "OffsetProfile", "mean_attention_by_offset",
    "peak_offsets", "Finding", "offset_findings", "column_attention", "window_attention",
    "PositionStructure", "position_structure", "skew_rows", "T5BiasCurve", "t5_bias_curve", "RelativeTables",
    "relative_tables", "alibi_parameters", "LearnedPositions", "learned_positions", "scheme_has_parameters",
]

#: Longest random example :func:`random_text` draws.
MAX_TEXT = 100_000


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

    One pass over the cells (each weight is added once to its diagonal's sum), then each sum
    is divided by the number of cells on that diagonal.
    """
    w = torch.as_tensor(np.asarray(weights) if not isinstance(weights, torch.Tensor) else weights)
    if w.dim() < 2 or w.shape[-1] != w.shape[-2] or w.shape[-1] < 1:
        raise ValueError(f"weights must have shape [..., L, L] with L >= 1; got {tuple(w.shape)}")
    if not (w.is_floating_point()):
        raise ValueError(f"weights must be floating point; got {w.dtype}")
    length = w.shape[-1]
    lead = w.shape[:-2]
    positions = torch.arange(length)
    index = (positions[None, :] - positions[:, None] + length - 1).reshape(-1)
    flat = w.detach().to("cpu", torch.float64).reshape(-1, length * length)
    sums = torch.zeros(flat.shape[0], 2 * length - 1, dtype=torch.float64).index_add_(1, index, flat)
    offsets = np.arange(-(length - 1), length, dtype=np.int64)
    counts = length - np.abs(offsets)
    mean = (sums.numpy() / counts).reshape(*lead, 2 * length - 1)
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
    """
    if profile.mean.ndim != 3:
        raise ValueError("profile must come from weights [n_layers, H, L, L]")
    length = (len(profile.offsets) + 1) // 2
    peaks = peak_offsets(profile, causal=causal)
    n_layers, n_heads = peaks.shape
    params = task.params()
    findings: list[Finding] = []
    if task.name == "shift":
        s = params["s"]
        if s > length - 1:
            return [Finding(f"The answer sits at j − i = −{s}, beyond this sequence (length {length}): "
                            "make the sequence longer.", False)]
        t = int(np.flatnonzero(profile.offsets == -s)[0])
        at_answer = profile.mean[:, :, t]
        hits = sorted(((l, h) for l in range(n_layers) for h in range(n_heads) if peaks[l, h] == -s),
                      key=lambda lh: -at_answer[lh])
        if hits:
            best = ", ".join(f"{_head_name(l, h)} ({at_answer[l, h]:.0%})" for l, h in hits[:3])
            habit = ("Its positions are absolute, yet it learned a relative habit: from every query it finds the "
                     f"key {s} back." if scheme in ("sinusoidal", "learned") else
                     "The model has learned the task's offset and finds it from every query: a relative habit.")
            findings.append(Finding(
                f"{len(hits)} of {n_layers * n_heads} heads peak at j − i = −{s} = −s, the key exactly s places "
                f"back, where the answer is. Strongest: {best}{' …' if len(hits) > 3 else ''} — the share of the "
                f"head's attention that sits on that one offset, on average. {habit}", True))
        else:
            l, h = np.unravel_index(np.argmax(at_answer), at_answer.shape)
            findings.append(Finding(
                f"No head peaks at j − i = −{s}, where the answer sits. The most attention on that offset: "
                f"{_head_name(l, h)}, {at_answer[l, h]:.0%} on average. "
                + ("Without position information the model cannot single out that key; it can only guess among "
                   "the tokens it sees." if scheme == "none" else
                   "This model finds the answer some other way, or not at all: compare its accuracy."), False))
    elif task.name == "window_max":
        w = params["w"]
        if w > length:
            return [Finding(f"The window (the last w = {w} tokens) is longer than this sequence (length {length}).",
                            False)]
        mass = window_attention(weights, w)
        uniform = float(np.mean([min(w, i + 1) / (i + 1) for i in range(w - 1, length)]))
        l, h = np.unravel_index(np.argmax(mass), mass.shape)
        inside = [(a, b) for a in range(n_layers) for b in range(n_heads) if -(w - 1) <= peaks[a, b] <= 0]
        findings.append(Finding(
            f"The answer lies in the window j − i = −{w - 1}…0. {_head_name(l, h)} keeps {mass[l, h]:.0%} of its "
            f"attention inside it, on average over the queries i ≥ {w - 1} (a head spreading evenly over the past "
            f"would keep {uniform:.0%}); {len(inside)} of {n_layers * n_heads} heads peak inside it.",
            bool(mass[l, h] >= 0.8 and mass[l, h] > uniform + 0.1)))
    elif task.name == "absolute":
        p = params["p"]
        if p > length - 1:
            return [Finding(f"The answer sits at key position p = {p}, beyond this sequence (length {length}).",
                            False)]
        mass = column_attention(weights, p)
        l, h = np.unravel_index(np.argmax(mass), mass.shape)
        findings.append(Finding(
            f"The answer sits at absolute key position p = {p}: a different offset p − i for every query, so "
            f"no single offset can hold it and this profile has no peak for it. Look for a vertical line at "
            f"j = {p} in the heatmaps instead: {_head_name(l, h)} puts {mass[l, h]:.0%} of its attention on "
            f"key {p}, on average over the queries i ≥ {p}.", bool(mass[l, h] >= 0.5)))
    return findings


# ---------------------------------------------------------------------------------------
# The scheme's own quantity for every cell


@dataclass(frozen=True)
class PositionStructure:
    """What a scheme puts into cell (i, j) at a given length, for the picture and for hover.

    ``values`` is [G, L, L] with G = 1 (shared by the heads) or H (one per head). Integer
    values are indices (``discrete`` gives their range); floats are biases or similarities.
    ``extra`` holds more hover fields ([G, L, L] each), e.g. T5's learned bias per head.
    ``masked_future``: the model is causal, cells j > i get no attention.
    """

    scheme: str
    title: str
    label: str
    values: np.ndarray
    discrete: tuple[int, int] | None
    explanation: str
    masked_future: bool
    toeplitz: bool
    extra: dict[str, np.ndarray] = field(default_factory=dict)

    @property
    def per_head(self) -> bool:
        return self.values.shape[0] > 1

    def head_values(self, head: int) -> np.ndarray:
        return self.values[head if self.per_head else 0]

    def hover_fields(self, head: int) -> dict[str, np.ndarray]:
        """label -> [L, L] for one head: the scheme's value, then the extras."""
        fields = {self.label: self.head_values(head)}
        for label, values in self.extra.items():
            fields[label] = values[head if values.shape[0] > 1 else 0]
        return fields


def skew_rows(length: int, distances: int) -> np.ndarray:
    """The row of the Music Transformer's E_r [distances, D] that cell (i, j) uses, −1 for j > i.

    Row m stands for distance m − (M − 1); distances beyond the table use row 0 (what
    relviz.attention.skew_attention does). Computed per offset, then expanded: [L, L] int64.
    """
    length = check_int("length", length, minimum=1)
    distances = check_int("distances", distances, minimum=1)
    offsets = np.arange(-(length - 1), length)
    per_offset = np.where(offsets <= 0, np.maximum(offsets + distances - 1, 0), -1)
    return _expand(per_offset, length)


def _expand(per_offset: np.ndarray, length: int) -> np.ndarray:
    """Per-offset values [..., 2L − 1] (offset −(L − 1) first) -> [..., L, L], entry (i, j) = j − i."""
    i = np.arange(length)[:, None]
    j = np.arange(length)[None, :]
    return np.ascontiguousarray(per_offset[..., j - i + length - 1])


def position_structure(model: RelvizTransformer, length: int) -> PositionStructure | None:
    """The scheme's quantity for every (query i, key j) at ``length``; None for scheme ``none``.

    Raises the model's ValueError if it cannot run at ``length`` (learned absolute beyond max_len).
    """
    config = model.config
    length = model.check_length(length)
    scheme = config.scheme
    causal = config.causal
    position = model.position
    heads = config.n_heads
    if scheme == "none":
        return None
    if scheme == "t5":
        bidirectional = not causal
        buckets = t5_bucket_map(length, num_buckets=config.num_buckets, max_distance=config.max_distance,
                                bidirectional=bidirectional, device="cpu").numpy()
        table = position.bias.detach().to("cpu", torch.float32).numpy()   # [num_buckets, H]
        bias = np.ascontiguousarray(table.T[:, buckets])                  # [H, L, L]
        cfg = t5_config(config.num_buckets, config.max_distance, bidirectional)
        return PositionStructure(
            scheme, f"T5 bucket of j − i ({config.num_buckets} buckets, max_distance {config.max_distance})",
            "bucket", buckets[None], (0, config.num_buckets - 1),
            f"Each offset j − i falls into a bucket; the model learned one bias per bucket and head (in the hover: "
            f"this head's). Exact buckets for |j − i| < {cfg.max_exact}, then logarithmic bands."
            + (" Causal: every future offset falls in bucket 0 (and is masked anyway)." if causal else ""),
            causal, True, {"learned bias (this head)": bias})
    if scheme == "shaw":
        k = config.clip
        index = shaw_clip_index(length, k=k, device="cpu").numpy()
        return PositionStructure(
            scheme, f"Shaw clip index clip(j − i, −{k}, {k}) + {k}", "clip index", index[None], (0, 2 * k),
            f"Offset j − i, clipped to ±{k}, picks one of {2 * k + 1} learned vectors a^K (added to the key) and "
            f"a^V (added to the value); one table per layer, shared by the heads. Every key farther than {k} "
            "back reads the same vector.", causal, True)
    if scheme == "alibi":
        bias = alibi_bias(length, num_heads=heads, device="cpu").numpy()
        slopes = alibi_slopes(heads, device="cpu").tolist()
        return PositionStructure(
            scheme, "ALiBi bias −slope · |j − i|", "ALiBi bias", bias, None,
            "A fixed penalty, nothing learned: each head subtracts slope · distance from its logits (slopes "
            + ", ".join(f"{s:.4g}" for s in slopes) + "). Far keys fade smoothly; no offset can be singled out.",
            causal, True)
    if scheme == "skew":
        rows = skew_rows(length, config.skew_distances)
        return PositionStructure(
            scheme, f"Music Transformer: row of E_r ({config.skew_distances} distances)", "E_r row",
            rows[None], (-1, config.skew_distances - 1),
            f"Row m of E_r stands for distance m − {config.skew_distances - 1}; the skew moves q_i · E_r[m] into "
            f"cell (i, j) with j − i = m − {config.skew_distances - 1}. Farther keys share row 0. Future keys are "
            "masked (the skew leaves meaningless values there; the hover says −1).", True, True)
    if scheme == "sinusoidal":
        dim = config.d_model
        table = sinusoidal_positions(length, dim).numpy().astype(np.float64)
        offsets = np.abs(np.arange(-(length - 1), length))
        per_offset = (table[offsets] @ table[0]) / (dim / 2)
        return PositionStructure(
            scheme, "sinusoidal: p_i · p_j / (d/2)", "p_i·p_j/(d/2)", _expand(per_offset, length)[None].astype(
                np.float32), None,
            "Absolute vectors, yet their dot product depends only on j − i (a sum of cos(ω · (j − i))). Nothing "
            "learned: the model has to turn this into the offset it needs.", causal, True)
    if scheme == "rope":
        dim = config.head_dim
        half = dim // 2
        theta = config.rope_base ** (-np.arange(half) * 2.0 / dim)
        offsets = np.arange(-(length - 1), length)
        per_offset = np.cos(offsets[:, None] * theta[None, :]).mean(axis=1)
        return PositionStructure(
            scheme, "RoPE: mean cos((j − i) · θ_p) over the rotation pairs", "mean cos((j−i)θ)",
            _expand(per_offset, length)[None].astype(np.float32), None,
            "q and k are rotated by angles proportional to their positions, so q_i · k_j sees only the "
            "difference: pair p turns by (j − i) · θ_p. Shown: how much an unchanged vector still agrees with "
            "itself after that relative turn, averaged over the pairs. Nothing learned.", causal, True)
    if scheme == "learned":
        table = position.table.detach().to("cpu", torch.float64)[:length]
        unit = table / table.norm(dim=1, keepdim=True).clamp(min=1e-12)
        cosine = (unit @ unit.T).numpy().astype(np.float32)
        return PositionStructure(
            scheme, "learned absolute: cos(p_i, p_j) of the learned position vectors", "cos(p_i, p_j)",
            cosine[None], None,
            f"One learned vector per absolute position (0…{config.max_len - 1}). Their similarity is not "
            "forced to depend on j − i; if it looks banded, training made it so.", causal, False)
    raise ValueError(f"unknown scheme {scheme!r}")


# ---------------------------------------------------------------------------------------
# Learned position parameters


@dataclass(frozen=True)
class T5BiasCurve:
    """T5's learned bias per head against the offset j − i (the classic curve)."""

    offsets: np.ndarray      # ascending j − i
    buckets: np.ndarray      # bucket of each offset
    bias: np.ndarray         # [H, n] float32: bias_table[bucket(offset), h]
    edges: np.ndarray        # half-integer offsets where the bucket changes
    max_exact: int
    last_start: int          # first distance of the last (saturated) bucket
    num_buckets: int
    max_distance: int
    bidirectional: bool


def t5_bias_curve(model: RelvizTransformer, extent: int) -> T5BiasCurve:
    """Bias of every head at offsets −extent..0 (causal) or −extent..extent (bidirectional)."""
    config = model.config
    if config.scheme != "t5":
        raise ValueError(f"t5_bias_curve needs a t5 model; got scheme {config.scheme!r}")
    extent = check_int("extent", extent, minimum=1, maximum=1 << 20)
    bidirectional = not config.causal
    cfg = t5_config(config.num_buckets, config.max_distance, bidirectional)
    offsets = torch.arange(-extent, (extent if bidirectional else 0) + 1)
    buckets = t5_bucket(offsets, num_buckets=config.num_buckets, max_distance=config.max_distance,
                        bidirectional=bidirectional)
    table = model.position.bias.detach().to("cpu", torch.float32)
    bias = table[buckets].T.numpy()
    b = buckets.numpy()
    change = np.flatnonzero(b[1:] != b[:-1])
    edges = offsets.numpy()[change] + 0.5
    far = t5_bucket(torch.arange(0, 4 * config.max_distance + 1), num_buckets=config.num_buckets,
                    max_distance=config.max_distance, bidirectional=True).numpy() if bidirectional else \
        t5_bucket(-torch.arange(0, 4 * config.max_distance + 1), num_buckets=config.num_buckets,
                  max_distance=config.max_distance, bidirectional=False).numpy()
    last_start = int(np.flatnonzero(far == far[-1])[0])
    return T5BiasCurve(offsets.numpy(), b, np.ascontiguousarray(bias), edges, cfg.max_exact, last_start,
                       config.num_buckets, config.max_distance, bidirectional)


@dataclass(frozen=True)
class RelativeTables:
    """Per-layer learned relative vectors: Shaw's a^K (and a^V) or the skew's E_r.

    ``offsets[r]`` is the j − i that row r stands for; ``used[r]`` is False for rows a causal
    model never reads (future offsets), which training therefore never shapes.
    """

    scheme: str
    name: str                 # "a^K" or "E_r"
    offsets: np.ndarray       # [R]
    norms: np.ndarray         # [n_layers, R]
    cosine: np.ndarray        # [n_layers, R, R]
    used: np.ndarray          # [R] bool
    value_norms: np.ndarray | None = None   # Shaw's a^V norms [n_layers, R]

    def most_distinct(self, layer: int) -> int:
        """The offset whose vector is least like the others (lowest mean cosine to the used rows)."""
        cosine = self.cosine[layer][np.ix_(self.used, self.used)]
        n = cosine.shape[0]
        if n < 2:
            return int(self.offsets[self.used][0])
        mean_other = (cosine.sum(axis=1) - np.diagonal(cosine)) / (n - 1)
        return int(self.offsets[self.used][np.argmin(mean_other)])


def _norms_and_cosine(tables: list[torch.Tensor]) -> tuple[np.ndarray, np.ndarray]:
    stacked = torch.stack([t.detach().to("cpu", torch.float64) for t in tables])   # [layers, R, D]
    norms = stacked.norm(dim=-1)
    unit = stacked / norms[..., None].clamp(min=1e-12)
    return norms.numpy(), (unit @ unit.transpose(1, 2)).numpy()


def relative_tables(model: RelvizTransformer) -> RelativeTables:
    """Shaw's a^K / a^V or the Music Transformer's E_r of every layer: norms and cosine similarities."""
    config = model.config
    position = model.position
    if config.scheme == "shaw":
        k = config.clip
        offsets = np.arange(-k, k + 1)
        norms, cosine = _norms_and_cosine(list(position.rel_k))
        value_norms, _ = _norms_and_cosine(list(position.rel_v))
        used = offsets <= 0 if config.causal else np.ones_like(offsets, dtype=bool)
        return RelativeTables("shaw", "a^K", offsets, norms, cosine, used, value_norms)
    if config.scheme == "skew":
        m = config.skew_distances
        offsets = np.arange(m) - (m - 1)
        norms, cosine = _norms_and_cosine(list(position.e_r))
        return RelativeTables("skew", "E_r", offsets, norms, cosine, np.ones(m, dtype=bool))
    raise ValueError(f"relative_tables needs a shaw or skew model; got scheme {config.scheme!r}")


def alibi_parameters(model: RelvizTransformer) -> np.ndarray:
    """ALiBi's slopes for the model's heads (fixed by the head count, not learned)."""
    if model.config.scheme != "alibi":
        raise ValueError(f"alibi_parameters needs an alibi model; got scheme {model.config.scheme!r}")
    return alibi_slopes(model.config.n_heads, device="cpu").numpy()


@dataclass(frozen=True)
class LearnedPositions:
    """The learned absolute table: norm of each position's vector and cosine between positions."""

    norms: np.ndarray    # [max_len]
    cosine: np.ndarray   # [max_len, max_len] float32

    def relative_share(self, n: int) -> float:
        """How much of the similarity among positions 0..n − 1 depends on j − i alone.

        1 − (variance left after subtracting each diagonal's mean) / (variance), over the
        off-diagonal cells: 1 means the learned table behaves exactly like a relative one.
        """
        n = check_int("n", n, minimum=3, maximum=self.cosine.shape[0])
        block = self.cosine[:n, :n].astype(np.float64)
        i, j = np.indices((n, n))
        off = i != j
        offset = (j - i)[off] + n - 1
        values = block[off]
        means = np.bincount(offset, weights=values, minlength=2 * n - 1) / np.maximum(
            np.bincount(offset, minlength=2 * n - 1), 1)
        total = values.var()
        return float(1 - (values - means[offset]).var() / total) if total > 0 else 1.0


def learned_positions(model: RelvizTransformer) -> LearnedPositions:
    if model.config.scheme != "learned":
        raise ValueError(f"learned_positions needs a learned model; got scheme {model.config.scheme!r}")
    table = model.position.table.detach().to("cpu", torch.float64)
    norms = table.norm(dim=1)
    unit = table / norms[:, None].clamp(min=1e-12)
    return LearnedPositions(norms.numpy(), (unit @ unit.T).numpy().astype(np.float32))


def scheme_has_parameters(scheme: str) -> bool:
    """Whether the page has a learned-parameters picture for this scheme (ALiBi's are fixed)."""
    return scheme in ("t5", "shaw", "skew", "alibi", "learned")
