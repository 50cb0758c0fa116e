"""The views of a learned per-offset vector table (Shaw's a^K / a^V, the Music Transformer's
E_r): the norm of each vector against its offset, and the cosine between the vectors of one
layer. Shared by the schemes that learn such a table; not a scheme itself."""
from __future__ import annotations

import numpy as np

from relviz.schemes.views import SimilarityMatrix, VectorNorms, View, most_distinct


def vector_table_views(*, name: str, what: str, offsets: np.ndarray, norms: np.ndarray, cosine: np.ndarray,
                       used: np.ndarray, layer: int, about: str,
                       second: tuple[str, np.ndarray] | None = None) -> list[View]:
    """[VectorNorms, SimilarityMatrix of ``layer``] with their captions (computed from the data).

    norms [n_layers, R], cosine [n_layers, R, R], offsets [R] (the j − i of each row), used [R].
    """
    layer = min(layer, cosine.shape[0] - 1)
    norms_view = VectorNorms(
        f"{what} per offset",
        f"**Norm of each learned vector {name} against its offset**, per layer. An unusual norm can mark an "
        "offset the layer singles out; the similarity map beside it usually shows that more clearly. " + about,
        name, offsets, norms, used, second)
    distinct = most_distinct(cosine[layer], offsets, used)
    similarity = SimilarityMatrix(
        f"layer {layer + 1}: cosine between the {name} vectors",
        f"**Similarity between the vectors of layer {layer + 1}** (the layer of the close-up). Offsets whose "
        "vectors point the same way look alike to the layer; a row unlike all others is an offset the "
        f"layer can tell apart. Here the most distinct is **j − i = {distinct}**"
        + (" (unused future rows left out)." if not used.all() else "."),
        "offset j − i", offsets, cosine[layer].astype(np.float32))
    return [norms_view, similarity]
