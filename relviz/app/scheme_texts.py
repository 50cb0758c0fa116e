"""The words the Live attention page says about each position scheme, looked up by the scheme's name.

A scheme (relviz/schemes) holds maths, modules and parameters; what it shows is data
(relviz.schemes.views) with short labels, and each view carries the numbers its words cite in
``facts``. The sentences are here, with the page that shows them: for each scheme, the
explanation beside its position structure, the caption under each parameter view, and what the
page says when there is no structure or no parameter to draw. Every registered scheme has an
entry in :data:`TEXTS` (tests/test_scheme_texts.py), so a new scheme adds one here. Plain data and
functions: it imports no streamlit.

Sign convention everywhere: relative position = key index − query index (j − i).
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from relviz.schemes.views import PositionStructure, VectorNorms, View
from relviz.t5_notes import curve_caption

__all__ = ["SchemeTexts", "TEXTS", "texts_for", "structure_text", "parameter_caption"]

#: What the page says when a scheme's structure() or parameter_views() gives nothing to draw.
NO_STRUCTURE = "This scheme gives attention no position structure to draw."
NO_PARAMETERS = "This scheme learns no position parameters."


@dataclass(frozen=True)
class SchemeTexts:
    """One scheme's words. ``structure``: the explanation beside its position structure (None for
    a scheme without one); ``caption``: the markdown under one of its parameter views (None for a
    scheme without any); ``no_structure`` / ``no_parameters``: the notices shown instead."""

    structure: Callable[[PositionStructure], str] | None = None
    caption: Callable[[View], str] | None = None
    no_structure: str = NO_STRUCTURE
    no_parameters: str = NO_PARAMETERS


def _numbers(values: tuple[float, ...], digits: int) -> str:
    return ", ".join(f"{x:.{digits}g}" for x in values)


# --- vector tables (Shaw, Music Transformer): one caption for the norms, one for the cosine -------------


def _vector_table(about: str) -> Callable[[View], str]:
    """The captions of :func:`relviz.schemes.vectors.vector_table_views`; ``about``: the table's own sentence."""

    def caption(view: View) -> str:
        if isinstance(view, VectorNorms):
            return (f"**Norm of each learned vector {view.name} against its offset**, per layer. An unusual norm can "
                    "mark an offset the layer singles out; the similarity map beside it usually shows that more "
                    "clearly. " + about)
        facts = view.facts
        return (f"**Similarity between the vectors of layer {facts['layer'] + 1}** (the layer of the close-up). "
                "Offsets whose vectors point the same way look alike to the layer; a row unlike all others is an "
                f"offset the layer can tell apart. Here the most distinct is **j − i = {facts['most_distinct']}**"
                + (" (unused future rows left out)." if facts["unused_rows"] else "."))

    return caption


# --- one function per scheme that needs numbers -------------------------------------------------------


def _learned_structure(structure: PositionStructure) -> str:
    return (f"One learned vector per absolute position (0…{structure.facts['max_len'] - 1}). Their similarity is "
            "not forced to depend on j − i; if it looks banded, training made it so.")


def _learned_caption(view: View) -> str:
    share = view.facts["relative_share"]
    return (f"**Cosine between the learned absolute position vectors** (all {view.facts['max_len']}). Nothing "
            "forces their similarity to depend on j − i only"
            + ("" if share is None else
               f". Inside the outlined trained positions **{share:.0%}** of its variation is explained by "
               "j − i alone (stripes parallel to the diagonal)"
               + (": an absolute table that learned a relative habit" if share >= 0.5 else
                  ": the relative part is there, but the table stays largely absolute"))
            + ". Beyond the training length nothing was trained (random), and beyond max_len there is no "
              "vector at all.")


def _shaw_structure(structure: PositionStructure) -> str:
    k = structure.facts["k"]
    return (f"Offset j − i, clipped to ±{k}, picks one of {2 * k + 1} learned vectors a^K (added to the key) and "
            f"a^V (added to the value); one table per layer, shared by the heads. Every key {k} or more back reads "
            "the same vector"
            + ("." if structure.masked_future else f" (every key {k} or more ahead, the other end's)."))


def _t5_structure(structure: PositionStructure) -> str:
    return (f"Each offset j − i falls into a bucket; the model learned one bias per bucket and head (in the hover: "
            f"this head's). Exact buckets for |j − i| < {structure.facts['max_exact']}, then logarithmic bands."
            + (" Causal: every future offset falls in bucket 0 (and is masked anyway)." if structure.masked_future
               else ""))


def _t5_caption(view: View) -> str:
    facts = view.facts
    return (curve_caption(facts["num_buckets"], facts["max_distance"], facts["bidirectional"]) + " "
            + facts["coverage"].sentence())


def _skew_structure(structure: PositionStructure) -> str:
    last = structure.facts["distances"] - 1
    return (f"Row m of E_r stands for distance m − {last}; the skew moves q_i · E_r[m] into cell (i, j) with "
            f"j − i = m − {last}. Farther keys share row 0. Future keys are masked (the skew leaves meaningless "
            "values there; the hover says −1).")


def _alibi_structure(structure: PositionStructure) -> str:
    return ("A fixed penalty, nothing learned: each head subtracts slope · distance from its logits (slopes "
            + _numbers(structure.facts["slopes"], 4) + "). Far keys fade smoothly; no offset can be singled out.")


def _alibi_caption(view: View) -> str:
    heads = view.bias.shape[0]
    sequence = ("a geometric sequence set by the number of heads" if heads & (heads - 1) == 0 else
                f"set by the number of heads ({heads}, not a power of 2: the geometric sequence of the nearest "
                "lower power of 2, then every other slope of twice that many)")
    return (f"**ALiBi's slopes are fixed**, {sequence}: nothing about position is learned. Each head subtracts a "
            "straight line from its logits; a steep head looks only at the last few tokens, a flat one far back. "
            "It cannot prefer offset −s over −s + 1, so a shift task must be solved from the content: compare "
            "its accuracy.")


def _kerple_structure(structure: PositionStructure) -> str:
    return ("A learned penalty per head that grows with the logarithm of the distance (r1 = "
            + _numbers(structure.facts["r1"], 3) + "; r2 = " + _numbers(structure.facts["r2"], 3)
            + "). Like ALiBi it only falls with distance, so no single offset can be singled out.")


def _kerple_caption(view: View) -> str:
    facts = view.facts
    return ("**KERPLE's learned curves.** Two numbers per head, shared by every layer: r1 scales the penalty, "
            "r2 sets how fast the logarithm bends. The penalty is concave in the distance: the step from 1 to 2 "
            "keys back costs more than the step from 20 to 21. Steepest here: head "
            f"{facts['steepest_head'] + 1} (r1 = {facts['r1']:.3g}, r2 = {facts['r2']:.3g}), "
            f"{facts['farthest_bias']:.2f} at j − i = {facts['farthest_offset']}. The formula is defined at every "
            "distance, so longer inputs extend the curve; grey: distances never seen in training.")


def _fire_structure(structure: PositionStructure) -> str:
    facts = structure.facts
    return ("A learned function of the distance divided by the query's own (log) position: for queries beyond "
            f"the learned threshold L = {facts['threshold']:.3g} the same offset gets a different bias in every "
            f"row (c = {facts['c']:.3g}), so the picture is not a Toeplitz matrix; below L it is. Future keys are "
            "masked.")


def _fire_caption(view: View) -> str:
    facts = view.facts
    return (f"**FIRE's learned function** in layer {facts['layer'] + 1} (the layer of the close-up), read along "
            f"the last row: the query i = {facts['query']} looking back. f_θ sees the distance only after "
            f"ψ(x) = log(c·x + 1) and the division by ψ(max(L, i)) (learned c = {facts['c']:.3g}, "
            f"L = {facts['threshold']:.3g}), so a longer input squeezes more offsets into the same [0, 1] range the "
            "MLP was trained on: interpolation, not extrapolation. Grey: distances never seen in training.")


#: Every registered scheme's words, by its name (relviz.schemes.REGISTRY).
TEXTS: dict[str, SchemeTexts] = {
    "none": SchemeTexts(
        no_structure=("Scheme **none**: the model gets no position information at all. A causal model still knows "
                      "how many tokens it can see, and nothing more: it cannot tell which one is 5 back."),
        no_parameters="Scheme none has no position parameters."),
    "sinusoidal": SchemeTexts(
        structure=lambda _: ("Absolute vectors, yet their dot product depends only on j − i (a sum of "
                             "cos(ω · (j − i))). Nothing learned: the model has to turn this into the offset it "
                             "needs."),
        no_parameters=("Sinusoidal positions are fixed sin/cos vectors: nothing about position is learned. "
                       "Their dot product (the structure beside the close-up) depends only on j − i.")),
    "learned": SchemeTexts(structure=_learned_structure, caption=_learned_caption),
    "shaw": SchemeTexts(structure=_shaw_structure, caption=_vector_table(
        "Shaw's table has 2k + 1 rows per layer (a^K added to keys, a^V to values), shared by the heads; in a "
        "causal model the rows for future offsets are never read, so they stay at their random start (shrunk by "
        "weight decay).")),
    "t5": SchemeTexts(structure=_t5_structure, caption=_t5_caption),
    "skew": SchemeTexts(structure=_skew_structure, caption=_vector_table(
        "E_r has one row per distance 0…M − 1 per layer, shared by the heads; the skew puts q_i · E_r[m] into "
        "every cell at that distance.")),
    "alibi": SchemeTexts(structure=_alibi_structure, caption=_alibi_caption),
    "rope": SchemeTexts(
        structure=lambda _: ("q and k are rotated by angles proportional to their positions, so q_i · k_j sees "
                             "only the difference: pair p turns by (j − i) · θ_p. Shown: how much an unchanged "
                             "vector still agrees with itself after that relative turn, averaged over the pairs. "
                             "Nothing learned."),
        no_parameters=("RoPE has no position parameters: fixed rotation angles θ_p = base^(−2p/d) per pair of "
                       "dimensions. The structure beside the close-up shows what the rotation does to q · k.")),
    "kerple": SchemeTexts(structure=_kerple_structure, caption=_kerple_caption),
    "fire": SchemeTexts(structure=_fire_structure, caption=_fire_caption),
}


def texts_for(scheme: str) -> SchemeTexts:
    """The words for scheme ``scheme``; LookupError (naming this module) for a scheme without an entry."""
    try:
        return TEXTS[scheme]
    except KeyError:
        raise LookupError(f"scheme {scheme!r} has no page texts: add its entry to TEXTS in "
                          "relviz/app/scheme_texts.py") from None


def structure_text(structure: PositionStructure) -> str:
    """The explanation beside a scheme's position structure."""
    words = texts_for(structure.scheme).structure
    if words is None:
        raise LookupError(f"scheme {structure.scheme!r} shows a position structure but has no words for it in "
                          "relviz/app/scheme_texts.py")
    return words(structure)


def parameter_caption(scheme: str, view: View) -> str:
    """The markdown under one of scheme ``scheme``'s parameter views."""
    words = texts_for(scheme).caption
    if words is None:
        raise LookupError(f"scheme {scheme!r} shows parameter views but has no captions for them in "
                          "relviz/app/scheme_texts.py")
    return words(view)
