"""What a scheme shows, as plain data: the figures dispatch on these kinds, never on scheme names.

- :class:`PositionStructure`: a mechanism's quantity for every (query i, key j) at one length
  (an index, a bias or a similarity), drawn beside the attention and used for its hover
  (``Mechanism.structure``: the Live attention page and Your model draw the same one).
- :class:`BiasCurve`: a bias per head against the offset j − i (T5's learned buckets, ALiBi's
  fixed slopes, KERPLE's and FIRE's learned functions).
- :class:`VectorNorms`: a table of learned vectors, one per offset, per layer (Shaw's a^K and
  a^V, the Music Transformer's E_r): the norm of each.
- :class:`SimilarityMatrix`: cosine similarity between learned vectors (relative tables,
  learned absolute positions).

Every view is data with short labels (its title, axis, hover and legend labels) and ``facts``: the
numbers the words about it cite (a slope, the most distinct offset, the last bucket's start),
computed by the mechanism that builds the view. Its words are the mechanism's too, carried in the view
(``caption``, a function of the facts, so the numbers it quotes are the view's).

Sign convention everywhere: relative position = key index − query index (j − i).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from relviz.positions import expand_toeplitz

__all__ = ["PositionStructure", "BiasCurve", "VectorNorms", "SimilarityMatrix", "View", "norms_and_cosine",
           "most_distinct", "relative_share", "expand_offsets"]


@dataclass(frozen=True)
class PositionStructure:
    """What a mechanism puts into cell (i, j) at a given length, for the picture and for hover.

    ``values`` is [G, L, L] with G = 1 (shared by the heads) or H (one per head). Integer
    values are indices (``discrete`` gives their range); floats are biases or similarities.
    ``extra`` holds more hover fields ([G, L, L] each), e.g. T5's learned bias per head.
    ``masked_future``: the model is causal, cells j > i get no attention. ``facts``: the numbers
    its ``caption`` (the mechanism's explanation of it) cites.
    """

    title: str
    label: str
    values: np.ndarray
    discrete: tuple[int, int] | None
    masked_future: bool
    toeplitz: bool
    extra: dict[str, np.ndarray] = field(default_factory=dict)
    facts: dict[str, Any] = field(default_factory=dict)
    caption: str = ""

    @property
    def per_head(self) -> bool:
        return self.values.shape[0] > 1

    def head_values(self, head: int) -> np.ndarray:
        return self.values[head if self.per_head else 0]

    def hover_fields(self, head: int) -> dict[str, np.ndarray]:
        """label -> [L, L] for one head: the mechanism's value, then the extras."""
        fields = {self.label: self.head_values(head)}
        for label, values in self.extra.items():
            fields[label] = values[head if values.shape[0] > 1 else 0]
        return fields


@dataclass(frozen=True)
class BiasCurve:
    """A bias per head added to the attention logit, against the offset j − i.

    ``steps``: draw as steps (constant between ``edges``, the half-integer offsets where the
    value changes, e.g. T5's bucket edges). ``band``: an offset range to shade, with its label.
    ``hover``: per-offset integers shown on hover (e.g. the bucket). ``head_labels``: legend
    names (default "head h"). ``caption``: a mechanism's words under its layer view
    (relviz.layer_strip) and on the Live attention page. ``facts``: the numbers words about it cite.
    """

    title: str
    caption: str
    offsets: np.ndarray          # [n] ascending j − i
    bias: np.ndarray             # [H, n] float32
    learned: bool
    steps: bool = False
    edges: np.ndarray | None = None
    band: tuple[float, float] | None = None
    band_label: str = ""
    hover: dict[str, np.ndarray] = field(default_factory=dict)
    head_labels: tuple[str, ...] | None = None
    facts: dict[str, Any] = field(default_factory=dict)
    #: what the curve's values are (the y axis, the hover): DeBERTa's is an embedding index, not a bias
    value_label: str = "bias added to the logit"
    value_name: str = "bias"


@dataclass(frozen=True)
class VectorNorms:
    """Norm of each learned vector of a per-offset table, per layer.

    ``offsets[r]`` is the j − i that row r stands for; ``used[r]`` is False for rows a causal
    model never reads (future offsets), which training therefore never shapes.
    ``second``: (name, norms) of a second table drawn dashed (Shaw's a^V). ``facts``: the numbers
    words about it cite.
    """

    title: str
    name: str
    offsets: np.ndarray          # [R]
    norms: np.ndarray            # [n_layers, R]
    used: np.ndarray             # [R] bool
    second: tuple[str, np.ndarray] | None = None
    facts: dict[str, Any] = field(default_factory=dict)
    caption: str = ""            # the mechanism's words under it (as BiasCurve's)
    #: the number the legend gives the first layer: Live attention counts layers from 1, Your model from 0 (as
    #: transformers and its strip do; layer_strip.layer_views sets 0)
    first_layer: int = 1


@dataclass(frozen=True)
class SimilarityMatrix:
    """Cosine similarity between learned vectors; ``outline``: the first n rows/columns framed
    (e.g. the positions seen in training). ``facts``: the numbers words about it cite."""

    title: str
    axis: str
    labels: np.ndarray           # [R]
    cosine: np.ndarray           # [R, R] float32
    outline: int | None = None
    outline_label: str = ""
    facts: dict[str, Any] = field(default_factory=dict)
    caption: str = ""            # the mechanism's words under it (as BiasCurve's)


View = BiasCurve | VectorNorms | SimilarityMatrix


def norms_and_cosine(tables: list[torch.Tensor]) -> tuple[np.ndarray, np.ndarray]:
    """Per table [R, D]: the row norms [n, R] and the cosine between rows [n, R, R]."""
    stacked = torch.stack([t.detach().to("cpu", torch.float64) for t in tables])   # [n, R, D]
    norms = stacked.norm(dim=-1)
    unit = stacked / norms[..., None].clamp(min=1e-12)
    return norms.numpy(), (unit @ unit.transpose(1, 2)).numpy()


def most_distinct(cosine: np.ndarray, offsets: np.ndarray, used: np.ndarray) -> int:
    """The offset whose vector is least like the others (lowest mean cosine to the used rows)."""
    cosine = cosine[np.ix_(used, used)]
    n = cosine.shape[0]
    if n < 2:
        return int(offsets[used][0])
    mean_other = (cosine.sum(axis=1) - np.diagonal(cosine)) / (n - 1)
    return int(offsets[used][np.argmin(mean_other)])


def relative_share(cosine: np.ndarray, n: int) -> float:
    """How much of the similarity among positions 0..n − 1 depends on j − i alone.

    1 − (variance left after subtracting each diagonal's mean) / (variance), over the
    off-diagonal cells: 1 means the table behaves exactly like a relative one.
    """
    block = np.asarray(cosine)[:n, :n].astype(np.float64)
    i, j = np.indices((n, n))
    off = i != j
    offset = (j - i)[off] + n - 1
    values = block[off]
    means = np.bincount(offset, weights=values, minlength=2 * n - 1) / np.maximum(
        np.bincount(offset, minlength=2 * n - 1), 1)
    total = values.var()
    return float(1 - (values - means[offset]).var() / total) if total > 0 else 1.0


def expand_offsets(per_offset: np.ndarray, length: int) -> np.ndarray:
    """Per-offset values [..., 2L − 1] (offset −(L − 1) first) -> [..., L, L], entry (i, j) = j − i
    (relviz.positions.expand_toeplitz, for numpy arrays): a Toeplitz structure built from one value per offset."""
    return np.ascontiguousarray(expand_toeplitz(torch.from_numpy(np.asarray(per_offset)), length, length).numpy())
