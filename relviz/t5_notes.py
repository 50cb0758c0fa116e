"""Pitfalls and facts about one T5 bucket setting, as data and as sentences.

``t5_notes(...)`` never raises for a setting the sliders can reach: an invalid setting comes
back with ``valid=False``, the library's own ValueError message and the nearest valid
setting. Each note has a ``kind`` (stable, for tests and pages), a ``level`` ("warning" for
something that wastes capacity or surprises an implementer, "info" for how T5 is built)
and a short Markdown ``text`` with the numbers of the current setting.

Sign convention: relative position = j − i = key − query; n is the distance the reference
buckets (|j − i| bidirectional, max(i − j, 0) unidirectional).
"""
from __future__ import annotations

from dataclasses import dataclass, field

import torch

from relviz._words import runs
from relviz.positions import t5_bucket, t5_bucket_ranges, t5_config, t5_nearest_valid


@dataclass(frozen=True)
class T5Note:
    kind: str
    level: str   # "warning" | "info"
    text: str


@dataclass(frozen=True)
class T5Notes:
    num_buckets: int
    max_distance: int
    bidirectional: bool
    valid: bool
    error: str | None = None
    nearest: tuple[int, int] | None = None     # (num_buckets, max_distance) the formula can serve
    buckets_per_direction: int | None = None
    max_exact: int | None = None
    log_buckets: int | None = None              # per direction, the last one included
    last_start: int | None = None               # first distance n in a direction's last bucket
    unused: tuple[int, ...] = ()                # buckets no offset ever uses
    unused_reasons: dict[int, str] = field(default_factory=dict)
    unreached: tuple[int, ...] = ()             # used buckets this matrix never reaches
    longest: int | None = None                  # longest |j − i| in the matrix, if lengths were given
    notes: tuple[T5Note, ...] = ()

    def kinds(self) -> list[str]:
        return [note.kind for note in self.notes]


def last_bucket_start(num_buckets: int, max_distance: int, bidirectional: bool) -> int:
    """The first distance n = |j − i| in a direction's last bucket (at most max_distance).

    The formula reaches the last bucket by max_distance at the latest, so scanning the
    distances 0..max_distance of the past side finds it.
    """
    config = t5_config(num_buckets, max_distance, bidirectional)
    distances = torch.arange(0, config.max_distance + 1)
    past = config.bucket(-distances)
    return int(distances[past == config.buckets_per_direction - 1][0])


def curve_caption(num_buckets: int, max_distance: int, bidirectional: bool, *, per_layer: bool = False) -> str:
    """What a T5 bias curve (relviz.schemes.t5.bias_curve) shows, in words: under the Live attention
    page's curve of a relviz T5 model and the Your model page's curve of a real T5 layer (``per_layer``:
    each layer has its own table, as in UMT5)."""
    exact = t5_config(num_buckets, max_distance, bidirectional).max_exact
    shared = "this layer's own table (each layer has one)" if per_layer else "shared by every layer"
    return (f"**The classic T5 curve.** One learned scalar per bucket and head, {shared}, added "
            f"to the logit. Flat steps: offsets in one bucket share a bias (dotted lines: bucket edges; shaded: "
            f"the exact buckets |j − i| < {exact}; the last bucket begins at distance "
            f"{last_bucket_start(num_buckets, max_distance, bidirectional)}, before max_distance {max_distance}).")


def _direction(bidirectional: bool) -> str:
    return "bidirectional" if bidirectional else "unidirectional"


def t5_notes(num_buckets: int, max_distance: int, bidirectional: bool, *, q_len: int | None = None,
             k_len: int | None = None, q_offset: int = 0) -> T5Notes:
    """What to tell a user about this setting (and, given lengths, about this matrix)."""
    mode = _direction(bidirectional)
    try:
        config = t5_config(num_buckets, max_distance, bidirectional)
    except ValueError as error:
        nearest = t5_nearest_valid(num_buckets, max_distance, bidirectional)
        text = (f"The T5 formula cannot serve num_buckets = {num_buckets}, max_distance = {max_distance} "
                f"({mode}): {str(error).rstrip('.')}. The nearest setting it can serve is "
                f"num_buckets = {nearest[0]}, max_distance = {nearest[1]}.")
        return T5Notes(num_buckets, max_distance, bidirectional, valid=False, error=str(error),
                       nearest=nearest, notes=(T5Note("invalid", "warning", text),))

    per_dir = config.buckets_per_direction
    max_exact = config.max_exact
    log_buckets = per_dir - max_exact

    # Every bucket has begun by max_distance, so ±max_distance shows all of them.
    ranges = t5_bucket_ranges(num_buckets=num_buckets, max_distance=max_distance, bidirectional=bidirectional)
    unused = tuple(r.bucket for r in ranges if not r.used)
    reasons: dict[int, str] = {}
    for b in unused:
        if bidirectional and b == per_dir:
            reasons[b] = f"offset 0 goes to bucket 0 and the future side starts at {per_dir} + 1 " \
                         f"(its smallest distance is 1): nothing lands on {per_dir}"
        elif bidirectional and b >= 2 * per_dir:
            reasons[b] = f"odd num_buckets: {num_buckets} // 2 = {per_dir} per direction leaves bucket {b} over"
        else:
            reasons[b] = "skipped by the logarithmic formula: consecutive distances jump over it " \
                         "(max_distance is close to max_exact for this many logarithmic buckets)"

    last_start = last_bucket_start(num_buckets, max_distance, bidirectional)

    notes: list[T5Note] = []

    # --- warnings: capacity wasted or behaviour that surprises -----------------------------
    if unused:
        names = ", ".join(str(b) for b in unused)
        parts = []
        if bidirectional and per_dir in unused:
            parts.append(f"bucket {per_dir} (= num_buckets // 2) is never used in bidirectional mode: offset 0 "
                         f"goes to bucket 0, and the future side starts at {per_dir} + 1 because its smallest "
                         f"distance is 1")
        odd = [b for b in unused if bidirectional and b >= 2 * per_dir]
        if odd:
            parts.append(f"odd num_buckets wastes bucket {odd[0]}: the halving floors {num_buckets} to "
                         f"{per_dir} per direction")
        skipped = [b for b in unused if reasons[b].startswith("skipped")]
        if skipped:
            parts.append(f"the logarithmic formula skips bucket{'s' if len(skipped) > 1 else ''} "
                         f"{', '.join(map(str, skipped))}: max_distance = {max_distance} leaves only "
                         f"{max_distance - max_exact} distances ({max_exact}…{max_distance - 1}) for "
                         f"{log_buckets} logarithmic buckets, so neighbouring distances jump over some")
        notes.append(T5Note("unused", "warning",
                          f"**{len(unused)} of {num_buckets} buckets {'is' if len(unused) == 1 else 'are'} "
                          f"never used** ({names}): "
                          + "; ".join(parts) + f". {'Its' if len(unused) == 1 else 'Their'} bias values "
                          f"are trained by nothing."))
    if last_start < max_distance:
        notes.append(T5Note("saturation", "warning",
                          f"**Saturation starts before max_distance:** the last bucket of a direction begins at "
                          f"distance {last_start}, not {max_distance}. Distances {last_start}…{max_distance - 1} "
                          f"already share one bias with every longer distance; max_distance only sets the scale "
                          f"of the logarithm."))
    if not bidirectional:
        notes.append(T5Note("future_bucket0", "warning",
                          "**Every future offset (j − i > 0) lands in bucket 0**, together with j − i = 0: the "
                          "unidirectional formula uses n = max(i − j, 0). A decoder does not care, because its "
                          "causal mask removes every future key before the softmax, so those biases are never "
                          "used. In an encoder this would erase the difference between all future positions."))

    # --- how T5 is built (info) --------------------------------------------------------------
    if bidirectional:
        notes.append(T5Note("split", "info",
                          f"**{num_buckets} buckets = {per_dir} per direction"
                          f"{' (+1 left over)' if num_buckets % 2 else ''} = {max_exact} exact + {log_buckets} "
                          f"logarithmic per direction**, not \"{per_dir} for close and {per_dir} for far "
                          f"distances\": the halving for the direction comes first, then half of each "
                          f"direction's buckets are exact."))
    else:
        notes.append(T5Note("split", "info",
                          f"**{num_buckets} buckets, all for one direction: {max_exact} exact + {log_buckets} "
                          f"logarithmic.** No halving for the direction in unidirectional mode."))
    exact_text = ("distance 0 gets its own bucket." if max_exact == 1 else
                  f"distances 0…{max_exact - 1} get a bucket each.")
    if bidirectional:
        notes.append(T5Note("max_exact", "info",
                          f"**max_exact = {max_exact}** = (buckets per direction) // 2 = {per_dir} // 2. It is "
                          f"taken after the halving for the direction on purpose (the reference does the same), "
                          f"not a double-halving bug: " + exact_text))
    else:
        notes.append(T5Note("max_exact", "info",
                          f"**max_exact = {max_exact}** = num_buckets // 2 = {num_buckets} // 2: unidirectional "
                          f"mode does not halve for the direction, so all {num_buckets} buckets serve the past "
                          f"and half of them are exact: " + exact_text))
    widest = max((r for r in ranges if r.used and not (r.open_low or r.open_high) and r.first != r.last),
                 key=lambda r: r.count, default=None)
    if widest is not None:
        a, b = sorted((abs(widest.first), abs(widest.last)))
        side = " (past side)" if bidirectional else ""
        example = (f" Here distances {a} and {b} both fall in bucket {widest.bucket}{side}; distances {last_start} "
                   f"and {10 * max_distance} share bucket {per_dir - 1}{side}.")
    else:
        example = ""
    notes.append(T5Note("blind", "info",
                      "**One layer is blind inside a bucket:** every offset in a bucket gets the same bias, so a "
                      "single attention layer cannot tell them apart from the bias alone." + example +
                      " Later layers can compose exact short offsets into longer ones (the T5 paper's argument "
                      "for coarse buckets far away), which is why a deep model still locates tokens."))
    notes.append(T5Note("sharing", "info",
                      f"**One bias table per head, shared by all layers:** T5 learns one scalar per (bucket, head), "
                      f"{num_buckets} × heads values, computed in the first layer of a stack and reused by the "
                      f"others; the encoder and the decoder have separate tables, and cross-attention has no "
                      f"position bias at all. The bias is added to the raw q·k (T5 does not scale by 1/√d). "
                      f"Shaw et al. instead learn vectors per layer, shared across heads."))

    # --- this matrix -------------------------------------------------------------------------
    unreached: tuple[int, ...] = ()
    longest = None
    if q_len is not None and k_len is not None:
        lowest = -(q_len - 1) - q_offset
        highest = k_len - 1 - q_offset
        longest = max(abs(lowest), abs(highest))
        present = torch.unique(t5_bucket(torch.arange(lowest, highest + 1), num_buckets=num_buckets,
                                         max_distance=max_distance, bidirectional=bidirectional)).tolist()
        unreached = tuple(r.bucket for r in ranges if r.used and r.bucket not in set(present))
        if unreached:
            notes.append(T5Note("unreached", "info",
                              f"**This matrix reaches {len(present)} of the {num_buckets - len(unused)} usable "
                              f"buckets:** its offsets run from {lowest} to {highest}, so bucket"
                              f"{'s' if len(unreached) > 1 else ''} {_ranges_text(unreached)} "
                              f"only appear in longer sequences."))

    return T5Notes(num_buckets, max_distance, bidirectional, valid=True, buckets_per_direction=per_dir,
                   max_exact=max_exact, log_buckets=log_buckets, last_start=last_start, unused=unused,
                   unused_reasons=reasons, unreached=unreached, longest=longest, notes=tuple(notes))


def _ranges_text(values: tuple[int, ...]) -> str:
    """'3–7, 10, 12–13' for sorted integers."""
    return ", ".join(str(a) if a == b else f"{a}–{b}" for a, b in runs(values))


@dataclass(frozen=True)
class TrainingCoverage:
    """Which buckets offsets longer than training fall into: buckets that also hold a seen offset
    (their bias was trained by those) and buckets that hold none (their bias was trained by nothing)."""

    train_length: int
    shared_with_seen: tuple[int, ...]
    never_seen: tuple[int, ...]

    def sentence(self) -> str:
        parts = [f"Grey: offsets longer than any seen in training (|j − i| ≥ {self.train_length})."]
        if self.shared_with_seen:
            parts.append(f"Those in bucket{'s' if len(self.shared_with_seen) > 1 else ''} "
                         f"{_ranges_text(self.shared_with_seen)} reuse the bias that the seen offsets sharing "
                         "the bucket shaped.")
        if self.never_seen:
            parts.append(f"Bucket{'s' if len(self.never_seen) > 1 else ''} {_ranges_text(self.never_seen)} "
                         f"hold{'' if len(self.never_seen) > 1 else 's'} no seen offset at all: "
                         f"{'their' if len(self.never_seen) > 1 else 'its'} bias was shaped by nothing and keeps "
                         "its initial value (apart from any weight decay).")
        return " ".join(parts)


def t5_training_coverage(num_buckets: int, max_distance: int, bidirectional: bool, *, train_length: int,
                         extent: int) -> TrainingCoverage:
    """For offsets within ±extent: the buckets of the unseen ones (|j − i| ≥ train_length), split by
    whether a seen offset (|j − i| < train_length) shares them. Unidirectional (a causal model):
    only j − i ≤ 0, the future being masked."""
    config = t5_config(num_buckets, max_distance, bidirectional)
    offsets = torch.arange(-extent, (extent if bidirectional else 0) + 1)
    buckets = config.bucket(offsets)
    seen_mask = offsets.abs() < train_length
    seen = set(buckets[seen_mask].tolist())
    unseen = set(buckets[~seen_mask].tolist())
    return TrainingCoverage(train_length, tuple(sorted(unseen & seen)), tuple(sorted(unseen - seen)))


# ---------------------------------------------------------------------------------------
# The T5 page's sentences under each picture, with this setting's numbers (a valid T5Notes)


def nearest_valid_text(info: T5Notes) -> str:
    """Why an invalid setting is refused, and the nearest one the formula serves."""
    return (f"Nearest valid setting: **num_buckets = {info.nearest[0]}, max_distance = {info.nearest[1]}** "
            f"({_direction(info.bidirectional)}). The reference code would divide by zero or "
            "return garbage (even negative) buckets here; relviz refuses instead.")


def map_caption(info: T5Notes) -> str:
    """What the bucket map shows: exact buckets near the diagonal, widening bands, the future's buckets."""
    return (f"**The bucket map.** Near the diagonal every offset has its own colour (exact buckets, "
            f"|j − i| < {info.max_exact}); farther out, bands widen logarithmically"
            + ("; above the diagonal (future keys) a second set of buckets starts at "
               f"{info.buckets_per_direction + 1}." if info.bidirectional else
               "; the whole upper triangle (future keys) is bucket 0.")
            + " Hover shows the bucket's range of j − i (the two end buckets go on forever; hover "
              "stops them at this matrix's edge).")


def distance_curve_caption(info: T5Notes) -> str:
    """What the bucket-against-distance curve shows: its three bands, and the future side's line."""
    return (f"**Bucket vs distance.** The blue line is the past (j − i = −n), the red one the future "
            f"(j − i = +n). Shaded bands, labelled above the plot: **exact**, one bucket per distance up "
            f"to {info.max_exact - 1}; **logarithmic**, from {info.max_exact} until the last bucket "
            f"begins at **{info.last_start}**, before max_distance = {info.max_distance} (dashed); **last bucket**, "
            f"everything from {info.last_start} on."
            + (f" The red line is the blue one shifted up by num_buckets // 2 = "
               f"{info.buckets_per_direction}: bucket {info.buckets_per_direction} itself is never used."
               if info.bidirectional else
               " The red dotted line stays at bucket 0: every future offset shares it."))


def budget_caption(info: T5Notes) -> str:
    """How num_buckets splits: halved for the two directions (bidirectional), then half exact."""
    if info.bidirectional:
        return (f"**\"max_exact halved twice?\"** Yes, on purpose: {info.num_buckets} buckets → "
                f"{info.buckets_per_direction} per direction → half of those, {info.max_exact}, exact. So not "
                f"\"{info.buckets_per_direction} close + {info.buckets_per_direction} far\": {info.max_exact} exact + "
                f"{info.log_buckets} logarithmic per direction.")
    return (f"**Unidirectional: one halving only.** All {info.num_buckets} buckets serve the past: {info.max_exact} "
            f"exact + {info.log_buckets} logarithmic. Bucket 0 also holds every future offset (the "
            "upper triangle of the map above).")


def composition_caption(info: T5Notes) -> str:
    """What stacked layers can locate with exact hops, where one layer is blind inside a bucket."""
    hop = info.max_exact - 1
    return (f"**One layer is blind inside a bucket** (yellow: distances that share a bucket get the "
            f"same bias). Stacked layers can compose exact hops of up to {hop}: "
            f"two layers can in principle locate every distance up to "
            f"{2 * hop} exactly, three up to {3 * hop} (the T5 "
            "paper's argument for coarse far buckets).")


def compare_caption(info: T5Notes) -> str:
    """T5's side of the comparison with Shaw: exact, logarithmic, one last bucket, scalar per bucket and head."""
    return (f"**T5, {info.num_buckets} buckets:** exact up to |j − i| < {info.max_exact}, then logarithmic bands up to "
            f"{info.last_start}, then one last bucket. Far offsets are coarse but not all equal. The table "
            "holds one scalar per bucket and head, shared by all layers.")


def published_caption(presets: list[dict]) -> str:
    """The published T5 settings (``presets``: the T5 entries of relviz's presets file), in one line."""
    return ("Published: " + "; ".join(
        f"{e['label']} {e['config']['relative_attention_num_buckets']} / "
        f"{e['config']['relative_attention_max_distance']}, {e['config']['num_heads']} heads"
        + (f", encoder sees ±{e['config']['local_radius']} only" if "local_radius" in e["config"] else "")
        for e in presets) + " (num_buckets / max_distance, from each model's config.json or paper).")


# ---------------------------------------------------------------------------------------
# What T5's buckets are, the same for every setting


#: What T5 learns instead of a vector per offset.
WHAT_T5_LEARNS = (
    "T5 does not learn a vector per offset. It sorts each offset j − i into one of **num_buckets** buckets and "
    "learns **one scalar per bucket and head**, added to the attention logit. Short distances get a bucket each; "
    "longer ones share buckets whose width grows logarithmically, up to max_distance; everything beyond shares "
    "the last bucket.")

#: Where T5's table sits in a stack, and UMT5's difference.
SHARED_ACROSS_LAYERS = (
    "**Shared across layers:** T5 computes the bias once, in the first layer of a stack, and every layer adds the "
    "same [num_buckets × heads] table. UMT5 learns a table in every layer (layers × as many parameters). Encoder "
    "and decoder have their own.")

#: Why a setting is refused: the two conditions the bucket formula needs.
VALID_SETTINGS = (
    "- **max_exact = (buckets per direction) // 2**: bidirectional T5 first halves num_buckets for the two "
    "directions, then gives half of each direction's buckets to exact distances. With num_buckets = 2 or 3 that "
    "leaves max_exact = 0, and the formula divides by log(max_distance / 0).\n"
    "- **max_distance must exceed max_exact**, or log(max_distance / max_exact) is zero or negative and the "
    "reference returns garbage (even negative) buckets.")

#: The precision view when Mesh TensorFlow and Hugging Face agree on every offset, with a setting where they differ.
NO_REFERENCE_EDGE = (
    "None for this setting: no exact value of the formula sits on an integer. Try num_buckets 34, max_distance 27 "
    "(j − i = −18: Hugging Face 13, Mesh TensorFlow 14).")

#: What Shaw's clip and T5's buckets share, beside the comparison of the two maps.
BOTH_ARE_BLIND = (
    "**Both make one layer blind to some offset differences**: Shaw beyond ±k, T5 inside each bucket. Neither is "
    "a dead end, because attention is stacked: a later layer can combine exact short offsets into longer ones, so "
    "a deep model can still tell distances apart that one layer cannot.")


def precision_caption(max_offset: int) -> str:
    """What the precision view marks for j − i within ±``max_offset``: low precision, and Mesh TF's arithmetic."""
    return (f"relviz computes T5's buckets like Hugging Face's T5: float32, dividing. The markers show, for j − i "
            f"within ±{max_offset}, the offsets whose bucket changes when the same formula runs in bfloat16 or "
            "float16 (the log and the quotients are rounded to 8 or 11 significant bits), and where Mesh "
            "TensorFlow, the original T5 code, lands on the other side of a float32 edge: it multiplies by "
            "reciprocals where Hugging Face divides. A checkpoint trained with one and run with the other reads a "
            "neighbouring bias at those offsets.")
