"""The views of a learned per-offset vector table (Shaw's a^K / a^V, the Music Transformer's
E_r): the norm of each vector against its offset, and the cosine between the vectors of one
layer, and their captions. Shared by the mechanisms that hold such a table (Shaw, skew); not a mechanism itself."""
from __future__ import annotations

import numpy as np

from relviz.schemes.view_kinds import SimilarityMatrix, VectorNorms, View, most_distinct


def vector_table_views(*, name: str, what: str, offsets: np.ndarray, norms: np.ndarray, cosine: np.ndarray,
                       used: np.ndarray, layer: int, second: tuple[str, np.ndarray] | None = None) -> list[View]:
    """[VectorNorms, SimilarityMatrix of ``layer``]; the similarity's facts: ``layer`` (0-based, clamped to
    the model's layers), ``most_distinct`` (the offset whose vector is least like the others) and
    ``unused_rows`` (whether rows a causal model never reads were left out of that choice).

    norms [n_layers, R], cosine [n_layers, R, R], offsets [R] (the j − i of each row), used [R].
    """
    layer = min(layer, cosine.shape[0] - 1)
    norms_view = VectorNorms(f"{what} per offset", name, offsets, norms, used, second)
    similarity = SimilarityMatrix(
        f"this layer: cosine between the {name} vectors", "offset j − i", offsets,
        cosine[layer].astype(np.float32),
        facts={"layer": layer, "most_distinct": most_distinct(cosine[layer], offsets, used),
               "unused_rows": not bool(used.all())})
    return [norms_view, similarity]


def vector_table_caption(view: View, about: str) -> str:
    """The caption under one of :func:`vector_table_views`' views; ``about``: the table's own sentence."""
    if isinstance(view, VectorNorms):
        return (f"**Norm of each learned vector {view.name} against its offset**, per layer. An unusual norm can "
                "mark an offset the layer singles out; the similarity map beside it usually shows that more "
                "clearly. " + about)
    facts = view.facts
    return ("**Similarity between this layer's vectors** (the layer of the close-up). "
            "Offsets whose vectors point the same way look alike to the layer; a row unlike all others is an "
            f"offset the layer can tell apart. Here the most distinct is **j − i = {facts['most_distinct']}**"
            + (" (unused future rows left out)." if facts["unused_rows"] else "."))
