"""Lecture mode: guided tours through relviz, each step an exact view (a page and its controls) and a note.

A tour is data: an ordered list of steps, each naming a page and the query parameters that set
its controls (exactly what a shared link carries), with a short note for the presenter. relviz
ships one tour ("relative position from Shaw to RoPE"); a teacher collects views into their own
and shares it as ONE link (the tour encoded as a compact URL-safe string) or a small JSON file.

Everything read from a link or a file is validated strictly before use: bounded size (also after
decompression), an exact schema, only pages relviz has, only the keys each page binds to the URL,
and only values those controls accept (relviz.app.link_schema says which). The Live attention page's scheme and its scheme's own
training parameters come from the scheme registry, which needs torch: a tour checks them by shape
(a short lower-case name, a finite number), and the page's own link check drops, with a notice, a
value its control does not take. A tour that fails any check is refused with a message naming what
was wrong; nothing in it ever names a file or a server path (a page is a name from a fixed list,
not a path).
"""
from __future__ import annotations

import base64
import json
import re
import zlib
from dataclasses import dataclass, field

from relviz.app.link_schema import PAGE_KEY_FAMILIES, PAGE_PARAMS, page_param

#: Largest tour JSON (bytes) read from a file or decoded from a link.
MAX_JSON_BYTES = 32_000
#: Longest encoded tour accepted in a link (browsers and proxies handle URLs up to ~8 kB safely).
MAX_CODE_CHARS = 6_000
MAX_STEPS = 40
MAX_TITLE = 100
MAX_NOTE = 700
FORMAT_VERSION = 1
#: The query parameter that carries an encoded tour on the Lecture mode page.
TOUR_PARAM = "tour"


# ---------------------------------------------------------------------------------------
# Tours


@dataclass(frozen=True)
class Step:
    """One view: a page, the link values of its controls (unlisted controls keep their defaults), a note."""

    page: str
    params: dict[str, str | list[str]] = field(default_factory=dict)
    title: str = ""
    note: str = ""
    #: the key of the step's subject chart: while the step is on a projector, everything above it is dropped
    #: so that it sits whole on the first screen (empty: the page as it is, less its title and intro note)
    subject: str = ""


#: What a subject may be: a chart's widget key as the pages write them (letters, digits, _).
_SUBJECT = re.compile(r"[a-z][a-z0-9_]{0,47}")


@dataclass(frozen=True)
class Tour:
    title: str
    steps: tuple[Step, ...]


#: A timing at the end of a step's note: "(2 min)".
_NOTE_MINUTES = re.compile(r"\((\d+) min\)\s*$")


def tour_minutes(tour: Tour) -> int | None:
    """The tour's length from its notes' timings ("… (2 min)" at a note's end), or None when a step has none.

    The one place a tour's length comes from: the Lecture mode page and the README state it, so the two
    cannot drift from the notes (the built-in tour said 20 minutes while its notes added up to 26)."""
    found = [_NOTE_MINUTES.search(step.note) for step in tour.steps]
    return sum(int(m.group(1)) for m in found) if found and all(found) else None


def _text(name: str, value: object, limit: int) -> str:
    if not isinstance(value, str):
        raise ValueError(f"{name} must be text; got {type(value).__name__}")
    if len(value) > limit:
        raise ValueError(f"{name} must be at most {limit} characters; got {len(value)}")
    if any(ord(c) < 32 and c not in "\n\t" or 0x7f <= ord(c) < 0xa0 for c in value):
        raise ValueError(f"{name} must not contain control characters")
    return value


def check_step(step: Step, number: int = 0) -> Step:
    """A step whose page is one relviz has and whose every key and value that page's controls accept."""
    where = f"step {number + 1}"
    if step.page not in PAGE_PARAMS:
        raise ValueError(f"{where}: page must be one of {', '.join(PAGE_PARAMS)}; got {str(step.page)[:40]!r}")
    if not isinstance(step.params, dict):
        raise ValueError(f"{where}: params must be an object of key: value")
    params: dict[str, str | list[str]] = {}
    for key, value in step.params.items():
        accepted = page_param(step.page, key)
        if accepted is None:
            family = PAGE_KEY_FAMILIES.get(step.page)
            raise ValueError(f"{where}: the {step.page} page has no control {str(key)[:40]!r} (its keys: "
                             f"{', '.join(PAGE_PARAMS[step.page])}{f', {family[0]}' if family else ''})")
        params[key] = accepted.check(f"{where}: {key}", value)
    if not isinstance(step.subject, str) or step.subject and not _SUBJECT.fullmatch(step.subject):
        raise ValueError(f"{where}: subject must be a chart's key ({_SUBJECT.pattern}) or empty; "
                         f"got {str(step.subject)[:40]!r}")
    return Step(step.page, params, _text(f"{where}: title", step.title, MAX_TITLE),
                _text(f"{where}: note", step.note, MAX_NOTE), step.subject)


def check_tour(tour: Tour) -> Tour:
    title = _text("title", tour.title, MAX_TITLE)
    if not 1 <= len(tour.steps) <= MAX_STEPS:
        raise ValueError(f"a tour must have from 1 to {MAX_STEPS} steps; got {len(tour.steps)}")
    return Tour(title, tuple(check_step(step, n) for n, step in enumerate(tour.steps)))


def tour_to_json(tour: Tour) -> dict[str, object]:
    return {"relviz_tour": FORMAT_VERSION, "title": tour.title,
            "steps": [{"page": s.page, "params": dict(s.params), "title": s.title, "note": s.note}
                      | ({"subject": s.subject} if s.subject else {}) for s in tour.steps]}


def tour_from_json(data: object) -> Tour:
    """Build and validate a tour from parsed JSON; refuses any key or value outside the schema."""
    if not isinstance(data, dict):
        raise ValueError("a tour file must hold one JSON object")
    extra = set(data) - {"relviz_tour", "title", "steps"}
    if extra:
        raise ValueError(f"unknown tour field(s): {', '.join(sorted(map(str, extra)))[:80]}")
    if data.get("relviz_tour") != FORMAT_VERSION:
        raise ValueError(f"not a relviz tour (relviz_tour must be {FORMAT_VERSION})")
    steps = data.get("steps")
    if not isinstance(steps, list):
        raise ValueError("steps must be a list")
    if not 1 <= len(steps) <= MAX_STEPS:
        raise ValueError(f"a tour must have from 1 to {MAX_STEPS} steps; got {len(steps)}")
    built = []
    for number, item in enumerate(steps):
        if not isinstance(item, dict):
            raise ValueError(f"step {number + 1} must be an object")
        extra = set(item) - {"page", "params", "title", "note", "subject"}
        if extra:
            raise ValueError(f"step {number + 1}: unknown field(s) {', '.join(sorted(map(str, extra)))[:80]}")
        built.append(Step(item.get("page"), item.get("params", {}), item.get("title", ""), item.get("note", ""),
                          item.get("subject", "")))
    return check_tour(Tour(data.get("title", ""), tuple(built)))


def dumps(tour: Tour) -> str:
    """The tour as a small, readable JSON file."""
    return json.dumps(tour_to_json(check_tour(tour)), ensure_ascii=False, indent=1)


def loads(data: bytes | str) -> Tour:
    """Read a tour file (JSON, at most MAX_JSON_BYTES), validated; ValueError says what was wrong."""
    if isinstance(data, str):
        data = data.encode("utf-8")
    if len(data) > MAX_JSON_BYTES:
        raise ValueError(f"a tour file must be at most {MAX_JSON_BYTES:,} bytes; got {len(data):,}")
    try:
        parsed = json.loads(data.decode("utf-8-sig"))
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as exc:
        raise ValueError(f"not a tour file: the JSON does not parse ({str(exc)[:80]})") from None
    return tour_from_json(parsed)


def encode(tour: Tour) -> str:
    """The tour as one compact URL-safe string (compressed JSON, base64url without padding)."""
    raw = json.dumps(tour_to_json(check_tour(tour)), ensure_ascii=False, separators=(",", ":")).encode()
    code = base64.urlsafe_b64encode(zlib.compress(raw, 9)).decode().rstrip("=")
    if len(code) > MAX_CODE_CHARS:
        raise ValueError(f"the tour is too long for one link ({len(code)} characters, at most {MAX_CODE_CHARS}); "
                         "shorten the notes, split it, or share it as a file")
    return code


def decode(code: object) -> Tour:
    """Read a tour from its link string; refuses oversized, malformed or tampered ones with a message."""
    if not isinstance(code, str) or not code:
        raise ValueError("the tour link holds no tour")
    if len(code) > MAX_CODE_CHARS:
        raise ValueError(f"the tour link is too long ({len(code)} characters, at most {MAX_CODE_CHARS})")
    if not re.fullmatch(r"[A-Za-z0-9_-]+", code):
        raise ValueError("the tour link is damaged: it may only hold letters, digits, - and _")
    try:
        packed = base64.urlsafe_b64decode(code + "=" * (-len(code) % 4))
        inflater = zlib.decompressobj()
        raw = inflater.decompress(packed, MAX_JSON_BYTES + 1)
    except (ValueError, zlib.error):
        raise ValueError("the tour link is damaged (it does not decode); ask for the link again") from None
    if len(raw) > MAX_JSON_BYTES or inflater.unconsumed_tail:
        raise ValueError(f"the tour in the link expands beyond {MAX_JSON_BYTES:,} bytes: refused")
    return loads(raw)


# ---------------------------------------------------------------------------------------
# The built-in tour

_BUILTIN_STEPS = (
    Step("home", {"home_q": "2"}, "Relative position is j − i",
         "Start with one sentence. Each cell is key position − query position. Read the outlined row "
         "(the query \"sat\"): negative to the left, positive to the right. Then read a diagonal: every "
         "cell on it holds the same number. That is all a relative scheme sees. (2 min)", subject="home_fig"),
    Step("shaw", {"sh_q": "10", "sh_k": "10", "sh_clip": "3"}, "Shaw et al.: clip at ±k",
         "Shaw et al. (2018) learn 2k + 1 vectors and look one up per cell: clip(j − i, −k, k) + k. With "
         "k = 3, row 0 reads 3, 4, 5, 6, 6, 6, …: every key farther than 3 shares the end vector. Point at "
         "the bands beyond the clipping distance. (2 min)", subject="sh_fig_relative"),
    Step("shaw", {"sh_q": "10", "sh_k": "10", "sh_clip": "0"}, "k = 0: no position at all",
         "At k = 0 every key reads the same vector: the model loses word order (Table 2: 12.5 BLEU, against "
         "25.5 at k = 1 and about 25.8 from k = 2 on). A little relative information goes a long way. (1 min)", subject="sh_fig_relative"),
    Step("t5", {"t5_nb": "32", "t5_md": "128", "t5_bi": "true", "t5_q": "128", "t5_k": "128"},
         "T5: logarithmic buckets",
         "T5 stores one scalar per bucket and head, shared by every layer. 32 buckets, bidirectional: 16 per "
         "direction, of which 8 are exact (|j − i| < 8), then bands that widen logarithmically up to 128. "
         "Bucket 16 is never used. Hover a band to read its range. (3 min)", subject="t5_fig_map"),
    Step("t5", {"t5_nb": "32", "t5_md": "128", "t5_bi": "false", "t5_q": "128", "t5_k": "128"},
         "T5's decoder: the future is bucket 0",
         "Unidirectional (the decoder): every future offset falls in bucket 0, and all 32 buckets go to the "
         "past: 16 exact, 16 logarithmic. The causal mask hides the future anyway. (1 min)", subject="t5_fig_map"),
    Step("t5", {"t5_q": "32", "t5_k": "32", "t5_tab": "Compare with Shaw", "t5_ck": "8"}, "Shaw vs T5 side by side",
         "Both turn j − i into a small table index. Shaw is exact up to k, then flat; T5 is exact near the "
         "diagonal and coarse but not flat far away. One layer is blind inside a bucket; stacked layers "
         "can combine short exact offsets into long ones. (2 min)", subject="t5_fig_cmp_shaw"),
    Step("skew", {"skew_L": "6", "skew_colour": "source row", "skew_tab": "Causal skew (decoder)"},
         "The Music Transformer's skew",
         "Shaw's gather needs an L × L × D tensor. The skew computes Q E_rᵀ once (L × L), pads one zero "
         "column, reshapes and drops the first row: every cell on or below the diagonal lands where it "
         "belongs. Colour by source row: the upper triangle came from the wrong rows; only the causal mask "
         "makes it harmless. (3 min)", subject="skew_fig_qer"),
    Step("skew", {"skew_L": "6", "skew_tab": "Bidirectional skew (encoder)"}, "An encoder needs the other skew",
         "Using the causal skew unmasked in an encoder is a real bug in several codebases. The bidirectional "
         "variant uses 2L − 1 distances and is exact everywhere. (1 min)", subject="skew_fig_bi_qer"),
    Step("absolute", {"abs_heads": "12", "abs_head": "1", "abs_causal": "true"}, "Absolute encodings and ALiBi",
         "A sinusoidal encoding's dot products PE_i · PE_j depend only on j − i; a head's projections "
         "W_Q, W_K blur that. ALiBi drops position vectors altogether: it subtracts slope × distance, one slope per head. "
         "With 12 heads, note the extra slopes: the first is steeper than every power-of-2 one. (2 min)", subject="abs_fig_pe"),
    Step("absolute", {"abs_L": "64", "abs_d": "64", "abs_shift": "100"}, "Shift the whole sequence",
         "Move every token 100 positions along. Left: every position's own vector changes, so a model that reads "
         "absolute vectors sees a new input and must have learned each position. Right: the dot products by "
         "j − i are the same curve before and after: a relative scheme scores the offset, which did not move. "
         "(2 min)", subject="abs_fig_shift"),
    Step("rope", {"rp_preset": "custom", "rp_len": "8192", "rp_L": "48"}, "RoPE: rotate, do not add",
         "RoPE rotates each pair of query and key dimensions by an angle m·θ_i, θ_i = base^(−2i/d). The dot "
         "product q_m · k_n then depends only on n − m: section 2's score matrix is Toeplitz without any "
         "table. Fast pairs turn many times inside the context; at base 10000 the slowest do not complete "
         "one turn in 8192 tokens. (2 min)", subject="rp_fig_wave"),
    Step("rope", {"rp_preset": "Llama-3.1 8B", "rp_len": "131072"}, "Longer contexts: scaling RoPE",
         "Llama-3.1 stretches an 8192-token training context to 131072: it keeps the high-frequency pairs, "
         "divides the low-frequency ones by 8 and blends in between. Linear, dynamic NTK and YaRN are the "
         "other rules; compare which pairs still fit inside the original context. (2 min)", subject="rp_fig_wave"),
    Step("attention", {"at_ck": "t5-shift", "at_layer": "1", "at_head": "1"}, "Live attention: a trained model",
         "A tiny transformer trained to copy the token s positions back. Its attention lights up the diagonal "
         "j − i = −s: the relative position it learned. Change the checkpoint to compare schemes. (2 min)", subject="at_fig_head"),
    Step("attention", {"at_ck": "rope-shift", "at_layer": "1", "at_head": "1"}, "Live attention with RoPE",
         "The same task with RoPE: no position table, only rotations, and the trained heads still find the "
         "offset. Switch back to t5-shift to compare the two. (1 min)", subject="at_fig_head"),
    Step("experiments", {}, "What each scheme can measurably do",
         "Offsets a scheme can tell apart, lengths it runs at beyond training, and what it costs in memory. "
         "Close with: choose the scheme by what your task needs to distinguish. (2 min)", subject="ex_fig_overview"),
)

BUILTIN = Tour("Relative position from Shaw to RoPE", _BUILTIN_STEPS)


def _ym(model: str, **params: str) -> dict[str, str]:
    return {"ym_model": f"{model} (published config)", **params}


_TODAY_STEPS = (
    Step("your_model", _ym("Llama-3.1 8B", ym_layer="0", ym_view="rotation"), "One RoPE on every layer",
         "Llama 3.1: all 32 layers rotate q and k with the same base (500,000) and the same llama3 scaling. The strip "
         "is one colour. Read the wavelengths against the model's own 131,072 positions: fast pairs wrap thousands "
         "of times, the slowest never complete a turn; grey rings are the base alone, before llama3 divides the slow "
         "pairs by 8. (2 min)", subject="ym_fig_view_0"),
    Step("your_model", _ym("Gemma 3 27B", ym_layer="0", ym_view="rotation"), "Two bases: Gemma 3's local layers",
         "Gemma 3 alternates five local layers and one global layer (the strip's two blues). Why two bases? A local "
         "layer sees at most 1,024 keys, so base 10,000 is plenty: every pair it needs turns within its window. "
         "(1 min)", subject="ym_fig_view_0"),
    Step("your_model", _ym("Gemma 3 27B", ym_layer="5", ym_view="rotation"), "…and its global layers",
         "Layer 5 is global: it sees the whole 131,072-token context, so it uses base 1,000,000 with linear scaling "
         "×8: its slow pairs must not wrap within the context, or far keys would look like near ones. One base "
         "could not serve both reaches. (2 min)", subject="ym_fig_view_0"),
    Step("your_model", _ym("Gemma 3 27B", ym_layer="0", ym_view="pattern"), "A window never sees past w",
         "Why can a sliding-window layer never see past w tokens while the model still reads 128k? Left: the keys a "
         "query sees stop growing at 1,024. Right: the band of offsets j − i. Far tokens reach a local layer only "
         "through the global layers' hidden states. (2 min)", subject="ym_fig_view_0"),
    Step("your_model", _ym("Llama 4 Scout 17B-16E", ym_layer="0", ym_view="pattern"), "Chunks: Llama 4 Scout",
         "Scout's RoPE layers attend in chunks of 8,192: the first token of a chunk sees only itself, the last the "
         "whole chunk. The band is a saw over 10M positions. (1 min)", subject="ym_fig_view_0"),
    Step("your_model", _ym("Llama 4 Scout 17B-16E", ym_layer="3", ym_view="temperature"), "No RoPE on every fourth layer",
         "Why does Llama 4 drop RoPE on every fourth layer, and what replaces it? Layer 3 has no rotation and no "
         "chunk: it attends over the whole context by content alone, with no offset it could have never seen in "
         "training. Its queries are scaled up slowly with position (the curve), so attention does not flatten out "
         "over millions of keys. (3 min)", subject="ym_fig_view_0"),
    Step("your_model", _ym("Command R7B (Cohere 2)", ym_layer="3", ym_view="all"), "Cohere 2: global layers with no position",
         "Command R7B turns the same idea around: windowed layers rotate (RoPE), and every fourth, full-attention "
         "layer has no position at all. SmolLM3 also drops RoPE on every fourth layer. (1 min)", subject="ym_strip"),
    Step("your_model", _ym("Qwen3-Next 80B-A3B (hybrid: Gated DeltaNet + attention)", ym_layer="0", ym_view="all"),
         "Layers that do not attend: hybrids",
         "In Qwen3-Next three layers of every four run Gated DeltaNet, not softmax attention: no pattern, no RoPE, "
         "no logits; order reaches them through the recurrent state the delta rule updates token by token. Only "
         "the fourth layer attends, with RoPE. Jamba does the same with Mamba layers and no RoPE at all. (2 min)",
         subject="ym_strip"),
    Step("your_model", _ym("GPT-OSS 20B", ym_layer="0", ym_view="sinks"), "Where the mass goes: sinks",
         "GPT-OSS adds a learned sink logit per head: an extra softmax column, dropped after. On a window layer "
         "(128 keys) the sink can keep a large share at every position; on a full layer its share fades as the row "
         "grows. A config holds no sink values, so the curves are illustrative; a model directory shows each "
         "head's. (2 min)", subject="ym_fig_view_0"),
    Step("your_model", _ym("GPT-OSS 20B", ym_layer="1", ym_view="rotation"), "YaRN ×32 at the model's own context",
         "GPT-OSS trained at 4,096 positions and runs at 131,072 with YaRN ×32: the fast pairs stay, the slow ones "
         "are interpolated, a ramp in between, and cos and sin are scaled up slightly. (2 min)", subject="ym_fig_view_0"),
    Step("your_model", _ym("DeepSeek-V3", ym_layer="0", ym_view="rotation"), "DeepSeek-V3: YaRN ×40 on part of the head",
         "DeepSeek-V3 rotates only 64 of each head's 192 q·k dims (the rest carry content), with YaRN ×40 over "
         "4,096; its softmax scale is raised by mscale² to match. (2 min)", subject="ym_fig_view_0"),
    Step("images", {"im_view": "2-D RoPE", "im_rows": "64", "im_cols": "64", "im_qr": "20", "im_qc": "40",
                    "im_rope": "Pixtral"}, "Images: RoPE in two dimensions",
         "Inside a vision tower, position is 2-D. Pixtral turns half of each head's pairs with the patch's row and "
         "half with its column, so a score depends only on (Δh, Δw): a row term plus a column term. A 1024-pixel "
         "image is 4,096 patches, 16.8 million pairs and only 127 × 127 offsets. (2 min)",
         subject="im_fig_rope_plane"),
    Step("images", {"im_view": "M-RoPE (video)", "im_rows": "16", "im_cols": "16", "im_frames": "4",
                    "im_rule": "Qwen2.5-VL"}, "Video: three ids per token (M-RoPE)",
         "Qwen2.5-VL's language model gives every token three ids, time, row and column. Text counts on all three "
         "at once, so for text M-RoPE is plain RoPE; an image's tokens share one time id, a video's frames step it "
         "by tokens_per_second × seconds. The pairs are split in sections: the column owns the slowest. (2 min)",
         subject="im_fig_mrope_ids"),
    Step("your_model", _ym("Llama-3.1 8B", ym_vs="Llama 4 Scout 17B-16E (published config)", ym_layer="3",
                           ym_layer2="3", ym_view="pattern"), "Side by side: Llama 3.1 and Llama 4",
         "The same family one generation apart: every layer alike against RoPE + chunk with a NoPE layer in every "
         "four. Close with: position is now a per-layer design choice. (2 min)", subject="ym_fig_a_0"),
)

TODAY = Tour("Position in today's models", _TODAY_STEPS)
#: The tours relviz ships, by title (the Lecture mode page offers them).
BUILTINS: dict[str, Tour] = {tour.title: tour for tour in (BUILTIN, TODAY)}
