"""The views of a learned per-offset vector table (Shaw's a^K / a^V, the Music Transformer's
E_r): the norm of each vector against its offset, and the cosine between the vectors of one
layer. Shared by the schemes that learn such a table; not a scheme itself."""
from __future__ import annotations

import numpy as np

from relviz.schemes.views import SimilarityMatrix, VectorNorms, View, most_distinct


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
        f"layer {layer + 1}: cosine between the {name} vectors", "offset j − i", offsets,
        cosine[layer].astype(np.float32),
        facts={"layer": layer, "most_distinct": most_distinct(cosine[layer], offsets, used),
               "unused_rows": not bool(used.all())})
    return [norms_view, similarity]
