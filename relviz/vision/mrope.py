"""M-RoPE (Qwen2-VL, Qwen2.5-VL, Qwen3-VL): three position ids per token and the pairs each axis owns.

Every token of the language model carries (t, h, w). A text run continues one counter on all three
rows, so its angles are plain 1-D RoPE's. An image or a video of t × h × w tokens (after the vision
tower's spatial merge) starting where the counter stands (s) gets t ids s + ⌊f·interval⌋, h ids s + row,
w ids s + column; the counter then moves on by max(h, w) (transformers 5.23's ``get_rope_index``). The
rules differ per model, as data (:class:`MropeRule`):

- Qwen2-VL: interval 1 (frame f's t id is s + f).
- Qwen2.5-VL: a video's interval is tokens_per_second · second_per_grid_t (an image's stays 1).
- Qwen3-VL: a video's frames are separate grids of one frame each, separated by timestamp text, and
  the pairs are interleaved across the axes instead of sectioned.

Sectioned (``mrope_section`` [s_t, s_h, s_w]): pairs 0..s_t − 1 turn with t, the next s_h with h, the
last s_w with w. Interleaved (Qwen3-VL): pair p turns with h if p ≡ 1 (mod 3) and p < 3·s_h, with w if
p ≡ 2 (mod 3) and p < 3·s_w, with t otherwise: every axis gets fast and slow pairs alike.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from relviz._checks import check_bool, check_int, check_tensor, resolve_device
from relviz._words import article, counted
from relviz.rope.math import score_per_offset
from relviz.vision.grid import MAX_FRAMES, MAX_SIDE

#: The most tokens a sequence here may hold (ids are per token: 2^22 is 64 frames of 256 × 256 tokens).
MAX_TOKENS = 1 << 22
#: Token kinds, as transformers' ``mm_token_type_ids``.
TEXT, IMAGE, VIDEO = 0, 1, 2
AXES = ("t", "h", "w")
KIND_WORDS = {IMAGE: "image", VIDEO: "video"}


@dataclass(frozen=True)
class MropeRule:
    """How one model family builds the ids and splits the pairs. ``interleaved`` and ``section`` are None for a
    family whose ids relviz reads (tests/test_vision_sweep.py: exact against its get_rope_index) but whose text
    rotary's split it has not checked: its score maps are refused, not drawn with a guessed split."""

    label: str
    time_scaled: bool          # a video's t ids step by tokens_per_second · second_per_grid_t (Qwen2.5-VL)
    frames_apart: bool         # a video's frames are one-frame grids separated by text (Qwen3-VL)
    interleaved: bool | None   # pairs interleaved across t, h, w (Qwen3-VL) instead of sectioned
    section: tuple[int, int, int] | None   # the default mrope_section


#: Qwen3-VL's ids: every frame its own grid after its timestamp text, t ids not scaled by time.
_FRAMES_APART = dict(time_scaled=False, frames_apart=True, interleaved=None, section=None)

#: model_type → its rule (the default sections are transformers' defaults for a 128-wide head). The families after
#: Qwen3-VL run Qwen3-VL's get_rope_index (GLM-4V's splits video_grid_thw per frame the same way, its docstring's
#: "timestamps separate each video frame"): their ids are read, their text rotary's split is not.
MROPE_RULES: dict[str, MropeRule] = {
    "qwen2_vl": MropeRule("Qwen2-VL", time_scaled=False, frames_apart=False, interleaved=False, section=(16, 24, 24)),
    "qwen2_5_vl": MropeRule("Qwen2.5-VL", time_scaled=True, frames_apart=False, interleaved=False,
                            section=(16, 24, 24)),
    "qwen3_vl": MropeRule("Qwen3-VL", time_scaled=False, frames_apart=True, interleaved=True, section=(24, 20, 20)),
    **{t: MropeRule(label, **_FRAMES_APART) for t, label in (
        ("qwen3_vl_moe", "Qwen3-VL-MoE"), ("qwen3_5", "Qwen3.5"), ("qwen3_5_moe", "Qwen3.5-MoE"),
        ("qwen4_exp", "Qwen4-Exp"), ("cohere_compass", "Cohere Compass"), ("glm4v", "GLM-4V"),
        ("glm4v_moe", "GLM-4V-MoE"), ("glm46v", "GLM-4.6V"), ("glm_ocr", "GLM-OCR"))},
}


def mrope_rule(model_type: str) -> MropeRule:
    """The rule of ``model_type``'s get_rope_index, or a ValueError naming what relviz cannot read."""
    if not isinstance(model_type, str) or model_type not in MROPE_RULES:
        raise ValueError(f"relviz has no M-RoPE rule for model_type {model_type!r}: how its get_rope_index numbers "
                         f"image and video tokens is not read (rules: {', '.join(MROPE_RULES)})")
    return MROPE_RULES[model_type]


@dataclass(frozen=True)
class Text:
    """``length`` text tokens (markers such as <|vision_start|> included)."""

    length: int


@dataclass(frozen=True)
class Image:
    """An image of ``rows`` × ``cols`` tokens, as the language model sees it (after the spatial merge)."""

    rows: int
    cols: int


@dataclass(frozen=True)
class Video:
    """``frames`` × ``rows`` × ``cols`` tokens; ``seconds_per_grid`` (Qwen2.5-VL's second_per_grid_t);
    ``frame_text`` tokens before each frame (Qwen3-VL's timestamp, e.g. "<0.5 seconds>", and markers)."""

    frames: int
    rows: int
    cols: int
    seconds_per_grid: float = 1.0
    frame_text: int = 0


Segment = Text | Image | Video


def _check_rule(rule: object) -> MropeRule:
    if not isinstance(rule, MropeRule):
        raise ValueError(f"rule must be an MropeRule (one of MROPE_RULES: {', '.join(MROPE_RULES)}); "
                         f"got {type(rule).__name__}")
    return rule


def _check_segment(segment: object, rule: MropeRule, n: int) -> None:
    where = f"segments[{n}]"
    if isinstance(segment, Text):
        check_int(f"{where}.length", segment.length, minimum=1, maximum=MAX_TOKENS)
    elif isinstance(segment, (Image, Video)):
        check_int(f"{where}.rows", segment.rows, minimum=1, maximum=MAX_SIDE)
        check_int(f"{where}.cols", segment.cols, minimum=1, maximum=MAX_SIDE)
    else:
        raise ValueError(f"{where} must be a Text, Image or Video; got {type(segment).__name__}")
    if isinstance(segment, Video):
        frames = check_int(f"{where}.frames", segment.frames, minimum=1, maximum=MAX_FRAMES)
        seconds = segment.seconds_per_grid
        if isinstance(seconds, bool) or not isinstance(seconds, (int, float)) or not 0 < seconds <= 3600:
            raise ValueError(f"{where}.seconds_per_grid must be a number of seconds above 0 and at most 3600; "
                             f"got {seconds!r}")
        between = check_int(f"{where}.frame_text", segment.frame_text, minimum=0, maximum=4096)
        if rule.frames_apart and frames > 1 and between == 0:
            raise ValueError(f"{where}.frame_text must be at least 1 for {rule.label}: its frames are separate "
                             "grids told apart by the timestamp text between them")
        if not rule.frames_apart and between:
            raise ValueError(f"{where}.frame_text must be 0 for {rule.label}: a video is one grid, no text "
                             "between its frames")


def _vision_ids(start: int, frames: int, rows: int, cols: int, interval: torch.Tensor | int) -> torch.Tensor:
    """[3, frames·rows·cols] as ``get_vision_position_ids``: t ids ⌊f·interval⌋ + start, h and w + start."""
    t = (torch.arange(frames) * interval).long()
    grid_t, grid_h, grid_w = torch.meshgrid(t, torch.arange(rows) + start, torch.arange(cols) + start, indexing="ij")
    ids = torch.stack([grid_t, grid_h, grid_w], dim=0).reshape(3, -1)
    ids[0] += start
    return ids


def mrope_position_ids(segments: list[Segment] | tuple[Segment, ...], rule: MropeRule, *,
                       tokens_per_second: int = 2, device: torch.device | str | None = None,
                       ) -> tuple[torch.Tensor, torch.Tensor]:
    """(position ids LongTensor [3, N], token kinds LongTensor [N]: 0 text, 1 image, 2 video) of a
    sequence of segments, as ``get_rope_index`` builds them for the language model.

    ``tokens_per_second``: Qwen2.5-VL's vision_config.tokens_per_second (its t ids step by it times each
    video's seconds_per_grid); the other rules ignore it.
    """
    rule = _check_rule(rule)
    if not isinstance(segments, (list, tuple)) or not segments:
        raise ValueError("segments must be a non-empty list of Text, Image and Video")
    tokens_per_second = check_int("tokens_per_second", tokens_per_second, minimum=1, maximum=1000)
    total = 0
    for n, segment in enumerate(segments):
        _check_segment(segment, rule, n)
        total += segment.length if isinstance(segment, Text) else (
            getattr(segment, "frames", 1) * (segment.rows * segment.cols + getattr(segment, "frame_text", 0)))
        if total > MAX_TOKENS:
            raise ValueError(f"segments must hold at most {MAX_TOKENS:,} tokens in all; reached {total:,} at "
                             f"segments[{n}]")
    ids, kinds, pos, last = [], [], 0, TEXT

    def text(length: int) -> None:
        nonlocal pos, last
        ids.append(torch.arange(length).view(1, -1).expand(3, -1) + pos)
        kinds.append(torch.full((length,), TEXT))
        pos += length
        last = TEXT

    for segment in segments:
        if isinstance(segment, Text):
            text(segment.length)
            continue
        if isinstance(segment, Image):
            grids, kind, interval = [(1, segment)], IMAGE, 1
        else:
            kind = VIDEO
            interval = (torch.tensor(segment.seconds_per_grid, dtype=torch.float32) * tokens_per_second
                        if rule.time_scaled else 1)
            grids = [(1, segment)] * segment.frames if rule.frames_apart else [(segment.frames, segment)]
        for frames, grid in grids:
            if isinstance(grid, Video) and grid.frame_text:
                text(grid.frame_text)
            if last == kind:
                raise ValueError(f"segments[{segments.index(segment)}] follows another {KIND_WORDS[kind]} with no text "
                                 "between: get_rope_index reads a run of tokens of one kind as one grid, so two grids "
                                 "side by side are one grid of the wrong size to it (its processor always puts "
                                 "<|vision_start|> and <|vision_end|> text around each)")
            last = kind
            ids.append(_vision_ids(pos, frames, grid.rows, grid.cols, interval))
            kinds.append(torch.full((frames * grid.rows * grid.cols,), kind))
            pos += max(grid.rows, grid.cols)
    device = resolve_device(device)
    return torch.cat(ids, dim=1).to(device), torch.cat(kinds).to(device)


def check_section(section: tuple[int, ...] | list[int], pairs: int) -> tuple[int, int, int]:
    """``mrope_section``: three positive pair counts (t, h, w) summing to the head's pairs (head_dim / 2)."""
    pairs = check_int("pairs", pairs, minimum=3, maximum=512)
    if not isinstance(section, (tuple, list)) or len(section) != 3:
        raise ValueError(f"section must be three pair counts (t, h, w); got {section!r}")
    counts = tuple(check_int(f"section[{n}]", v, minimum=1, maximum=pairs) for n, v in enumerate(section))
    if sum(counts) != pairs:
        raise ValueError(f"section must sum to the head's {pairs} pairs (head_dim / 2); got {list(counts)} "
                         f"= {sum(counts)}")
    return counts  # type: ignore[return-value]


def mrope_pair_axes(section: tuple[int, int, int] | list[int], *, interleaved: bool) -> torch.Tensor:
    """LongTensor [P]: the axis (0 t, 1 h, 2 w) each frequency pair turns with (P = sum(section))."""
    interleaved = check_bool("interleaved", interleaved)
    counts = check_section(section, sum(section) if isinstance(section, (tuple, list)) else 0)
    if not interleaved:
        return torch.repeat_interleave(torch.arange(3), torch.tensor(counts))
    axes = torch.zeros(sum(counts), dtype=torch.long)
    for axis in (1, 2):
        axes[axis:counts[axis] * 3:3] = axis
    return axes


def mrope_angles(position_ids: torch.Tensor, inv_freq: torch.Tensor, section: tuple[int, int, int] | list[int], *,
                 interleaved: bool) -> torch.Tensor:
    """float32 [N, P]: each token's angle per pair, ids [3, N] × θ [P] on the axis the pair owns (the
    float32 operations of the models' text rotary module: cos/sin of it are theirs bit for bit)."""
    position_ids = check_tensor("position_ids", position_ids, ndim=2)
    inv_freq = check_tensor("inv_freq", inv_freq, ndim=1, floating=True)
    if position_ids.shape[0] != 3:
        raise ValueError(f"position_ids must have 3 rows (t, h, w); got shape {tuple(position_ids.shape)}")
    check_section(section, inv_freq.shape[0])
    axes = mrope_pair_axes(section, interleaved=interleaved).to(position_ids.device)
    freqs = position_ids.float()[..., None] * inv_freq.to(position_ids.device).float()    # [3, N, P]
    return freqs.gather(0, axes.view(1, 1, -1).expand(1, freqs.shape[1], -1))[0]           # [N, P]


def reduces_to_rope(position_ids: torch.Tensor) -> torch.Tensor:
    """BoolTensor [N]: the tokens whose three ids agree, for which M-RoPE's angles are plain RoPE's at
    that id whatever the sections (every pair multiplies the same number): all text tokens."""
    position_ids = check_tensor("position_ids", position_ids, ndim=2)
    return (position_ids[0] == position_ids[1]) & (position_ids[1] == position_ids[2])


def video_frame_step(video: Video, rule: MropeRule, *, tokens_per_second: int = 2) -> tuple[int, int, int]:
    """How the ids (t, h, w) of a video token move from one frame to the next at the same (row, column).

    Qwen2-VL: (1, 0, 0). Qwen2.5-VL: (tokens_per_second · seconds_per_grid, 0, 0), a whole number here (the
    ids are ⌊f·interval⌋: a fractional interval steps unevenly and has no single per-offset map). Qwen3-VL: each
    frame is its own grid starting where the counter stands, so all three ids move by max(rows, cols) +
    frame_text: its frames are told apart by a shift on every axis, not by t alone.
    """
    rule = _check_rule(rule)
    _check_segment(video, rule, 0)
    if not isinstance(video, Video):
        raise ValueError(f"video must be a Video; got {type(video).__name__}")
    tokens_per_second = check_int("tokens_per_second", tokens_per_second, minimum=1, maximum=1000)
    if rule.frames_apart:
        shift = max(video.rows, video.cols) + video.frame_text
        return shift, shift, shift
    if not rule.time_scaled:
        return 1, 0, 0
    interval = float(torch.tensor(video.seconds_per_grid, dtype=torch.float32) * tokens_per_second)
    if interval != int(interval):
        raise ValueError(f"tokens_per_second · seconds_per_grid must be a whole number for a per-offset map; got "
                         f"{tokens_per_second} · {video.seconds_per_grid} = {interval:g} (⌊f·interval⌋ steps unevenly)")
    return int(interval), 0, 0


def score_map_3d(q: torch.Tensor, k: torch.Tensor, inv_freq: torch.Tensor, section: tuple[int, int, int] | list[int],
                 *, interleaved: bool, frames: int, rows: int, cols: int,
                 frame_step: tuple[int, int, int] = (1, 0, 0),
                 device: torch.device | str | None = None) -> torch.Tensor:
    """float64 [2T − 1, 2H − 1, 2W − 1]: the logit (R q)·(R k) of fixed content q, k [D = 2P] between two
    tokens of one video at (Δframe, Δh, Δw) = key − query, ascending. Their ids differ by
    Δframe·frame_step + (0, Δh, Δw) (:func:`video_frame_step`). A sum of three per-axis terms, each over
    (2T − 1)(2·side − 1) id offsets at most: never per token pair."""
    q = check_tensor("q", q, ndim=1, floating=True)
    k = check_tensor("k", k, ndim=1, floating=True)
    inv_freq = check_tensor("inv_freq", inv_freq, ndim=1, floating=True)
    pairs = inv_freq.shape[0]
    if q.shape[0] != 2 * pairs or k.shape[0] != 2 * pairs:
        raise ValueError(f"q and k must have 2 · {pairs} entries (one pair per θ); got {q.shape[0]} and {k.shape[0]}")
    sides = (check_int("frames", frames, minimum=1, maximum=MAX_FRAMES),
             check_int("rows", rows, minimum=1, maximum=MAX_SIDE), check_int("cols", cols, minimum=1, maximum=MAX_SIDE))
    if not isinstance(frame_step, (tuple, list)) or len(frame_step) != 3:
        raise ValueError(f"frame_step must be three whole numbers (t, h, w); got {frame_step!r}")
    step = [check_int(f"frame_step[{n}]", v, minimum=0, maximum=1 << 20) for n, v in enumerate(frame_step)]
    check_section(section, pairs)
    device = resolve_device(device)
    axes = mrope_pair_axes(section, interleaved=interleaved)
    df = torch.arange(-(frames - 1), frames, device=device)                                # [2T − 1]
    total = torch.zeros(2 * frames - 1, 2 * rows - 1, 2 * cols - 1, dtype=torch.float64, device=device)
    for axis, side in enumerate(sides):
        chosen = torch.nonzero(axes == axis).flatten()
        dims = torch.cat((chosen, chosen + pairs))
        own = torch.arange(-(side - 1), side, device=device) if axis else torch.zeros(1, device=device, dtype=torch.long)
        offsets = (df[:, None] * step[axis] + own[None, :]).flatten()                     # [(2T − 1)·(2·side − 1)]
        scores = score_per_offset(q[dims].double(), k[dims].double(), inv_freq[chosen].double().to(device), offsets)
        shape = [2 * frames - 1, 1, 1]
        if axis:
            shape[axis] = 2 * side - 1
        total += scores.view(shape)
    return total


# ---------------------------------------------------------------------------------------
# M-RoPE in words (the Images and video page)


def ids_words(rows: int, cols: int, frames: int) -> str:
    """How get_rope_index numbers the page's sequence: text, a rows × cols image, text, a video, text."""
    return ("**Three position ids per token**, as transformers' get_rope_index builds them for a sequence of text, "
            f"{article(rows)} {rows} × {cols} image (tokens after the vision tower's 2 × 2 merge), text, "
            f"{article(frames)} {frames}-frame video and "
            "text. Text continues one counter on all three rows; a grid starting at s gets t ids s + ⌊f·interval⌋, "
            "h ids s + row, w ids s + column, and the counter moves on by max(H, W). Qwen2.5-VL's interval is "
            "tokens_per_second × seconds per temporal patch; Qwen3-VL makes each frame its own grid after its "
            "timestamp text (two tokens here; a real timestamp, `<0.5 seconds>`, takes a few more). When the "
            "video's t ids outgrow max(H, W), the text after it starts below them: transformers 5.23 moves the "
            "counter by max(H, W) only.")


def frame_offset_words(dt: int, rows: int, cols: int, frames: int) -> str:
    """Two video tokens Δt frames apart: one slice of the (Δt, Δh, Δw) volume."""
    return (f"**Two video tokens {counted(dt, 'frame', spec='+d')} apart**, score per (Δh, Δw) (k = q). Their ids "
            "differ by Δt on the time axis (Qwen2.5-VL: times the interval; Qwen3-VL: every axis moves by the "
            "frame's start), so the map of each Δt is one slice of a (Δt, Δh, Δw) volume: "
            f"{counted((2 * frames - 1) * (2 * rows - 1) * (2 * cols - 1), 'value')} for "
            f"{counted((frames * rows * cols) ** 2, 'pair')}.")


#: Which pairs each axis owns, sectioned and interleaved.
SECTIONS_WORDS = (
    "**Which pairs each axis owns.** Sectioned (Qwen2-VL, 2.5-VL, mrope_section [16, 24, 24]): the fastest pairs "
    "turn with time, then a block with the row, then the slowest with the column, whose wavelengths (base 10,000 "
    "here) run from about 2,000 to 54,000 ids: across a few dozen columns they hardly turn, so the map beside barely "
    "changes along Δw. Interleaved (Qwen3-VL, [24, 20, 20]): t, h, w take turns, so every axis gets fast and slow "
    "pairs.")

#: Why M-RoPE between two text tokens is 1-D RoPE.
TEXT_IS_PLAIN_ROPE = (
    "**Why text is plain RoPE.** A text token carries the same id n on all three rows, so every pair turns by n·θ_i "
    "whichever axis owns it: the sections no longer matter, and between two text tokens M-RoPE is 1-D RoPE at "
    "offset j − i. Only image and video tokens, whose three ids differ, use the split.")


def rules_words() -> str:
    """Which families' ids relviz reads (MROPE_RULES), which it draws score maps for, and the sequence it refuses."""
    drawn = [r.label for r in MROPE_RULES.values() if r.section is not None]
    ids_only = [r.label for r in MROPE_RULES.values() if r.section is None]
    return ("**Which families relviz reads.** The ids of " + ", ".join(drawn) + " and of " + ", ".join(ids_only)
            + ": the last " + str(len(ids_only)) + " number their tokens as Qwen3-VL does (each frame its own grid "
            "after its timestamp text). Each equals its family's get_rope_index on odd, tiny, several-image and "
            "several-frame sequences (`python -m relviz bench --only vision_zoo`). How those "
            f"{len(ids_only)} split the pairs between t, h and w in their text rotary is not checked, so the score "
            "maps here are drawn for the first " + str(len(drawn)) + " only. Families whose get_rope_index numbers "
            "tokens its own way (ERNIE-4.5-VL, PaddleOCR-VL, HunYuan-VL, Qwen2.5-Omni and others) are refused, "
            "with their model_type named. Two images with no text between them are one run of image tokens, so get_rope_index reads them "
            "as one grid and fails on the sequence; relviz refuses it too (the processors put "
            "<|vision_start|> and <|vision_end|> around every image).")

