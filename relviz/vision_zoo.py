"""Every image and video position family transformers ships, found by walking its source, read by relviz on
odd, non-square and tiny grids and compared with what transformers computes: exact, refused, or WRONG.

A family is a modeling module holding one of the markers below (``MARKERS``: ``get_rope_index``, a
``*VisionRotaryEmbedding`` or ``*RopePositionEmbedding``, a ``relative_position_bias_table``, an
``interpolate_pos_encoding``), or one whose config names such a module's config as a part; not a hand list. For each family and case relviz reads what the family applies the way a user would (the
family's config through ``relviz.model_plan.read_plan``, M-RoPE's ids through the family's
``relviz.vision.mrope`` rule); only where relviz answers does the case build transformers' own module and
compare, with ``torch.equal``: both run the same operations. A case ends in one of:

- ``exact``: relviz's answer equals transformers' bit for bit;
- ``refused``: relviz raised a ValueError naming what it cannot read (the reason is kept);
- ``WRONG``: relviz answered and transformers computes something else (or cannot compute the case at all);
- ``not run``: relviz answered but this harness could not run transformers' module (the reason is kept).

Imports transformers (only here, inside the functions); nothing in the app imports this module.
"""
from __future__ import annotations

import importlib
import re
import time
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import torch

EXACT, REFUSED, WRONG, UNRUN = "exact", "refused", "WRONG", "not run"
STATUSES = (EXACT, REFUSED, WRONG, UNRUN)


@dataclass(frozen=True)
class Family:
    """A modeling module of transformers and the position marker found in it (``kind``: a key of MARKERS)."""

    module: str
    kind: str
    target: str          # what the marker matched (a class name, or the marker's own text)
    via: str = ""        # the module holding the marker, where it is not ``module`` (Mistral 3's tower is Pixtral's)

    @property
    def source(self) -> str:
        return self.via or self.module


@dataclass(frozen=True)
class CaseOutcome:
    family: Family
    case: str
    status: str
    reason: str = ""
    seconds: float = 0.0


# ---------------------------------------------------------------------------------------
# Finding the families


@cache
def _models_dir() -> Path:
    return Path(_transformers().__file__).parent / "models"


@cache
def _module_types() -> dict[str, list[str]]:
    """module directory -> the model_types whose config lives there (transformers' own table)."""
    auto = _transformers().models.auto.configuration_auto
    out: dict[str, list[str]] = {}
    for model_type in auto.CONFIG_MAPPING_NAMES:
        out.setdefault(auto.model_type_to_module_name(model_type), []).append(model_type)
    return out


def discover(kinds: Iterable[str] | None = None) -> list[Family]:
    """Every (module, kind) whose modeling source holds the kind's marker, sorted by kind then module."""
    chosen = list(MARKERS) if kinds is None else list(kinds)
    found = []
    for path in sorted(_models_dir().glob("*/modeling_*.py")):
        text = path.read_text(encoding="utf-8")
        for kind in chosen:
            match = re.search(MARKERS[kind][0], text)
            if match:
                found.append(Family(path.parent.name, kind, match.group(match.lastindex or 0)))
    # families whose config names a found family's config as a part (Mistral 3's vision_config is Pixtral's)
    types: dict[str, list[Family]] = {}
    for f in found:
        for t in _module_types().get(f.module, []):
            types.setdefault(t, []).append(f)
    for path in sorted(_models_dir().glob("*/configuration_*.py")):
        text = path.read_text(encoding="utf-8")
        for model_type in re.findall(r'model_type="(\w+)"|CONFIG_MAPPING\["(\w+)"\]', text):
            for part in types.get(model_type[0] or model_type[1], []):
                if part.module != path.parent.name and path.parent.name in _module_types():
                    found.append(Family(path.parent.name, part.kind, part.target, via=part.module))
    unique = {(f.module, f.kind): f for f in sorted(found, key=lambda f: f.via)}   # a module's own marker first
    return sorted(unique.values(), key=lambda f: (chosen.index(f.kind), f.module))


def model_type_of(module: str) -> str:
    """The module's top model_type: the one named as the module, else the first transformers lists."""
    types = _module_types().get(module, [])
    if not types:
        raise ValueError(f"transformers lists no config for module {module!r}")
    return module if module in types else types[0]


def _transformers():
    """transformers, or the ValueError saying how to install it (relviz.observe_build's one guarded import)."""
    from relviz.observe_build import transformers_module

    return transformers_module()


def _modeling(module: str):
    return importlib.import_module(f"transformers.models.{module}.modeling_{module}")


def _config(model_type: str):
    return _transformers().AutoConfig.for_model(model_type)


def _plan(config_dict: dict[str, Any], tensor: Callable[[str], torch.Tensor | None] | None = None):
    from relviz.model_plan import read_plan

    return read_plan(config_dict, tensor=tensor)


def _find(plan, kind: type) -> list[Any]:
    return [m for p in plan.all_layers() for m in p.mechanisms if isinstance(m, kind)]


# ---------------------------------------------------------------------------------------
# M-RoPE's position ids (get_rope_index)


def _mrope_cases(frames_apart: bool) -> list[tuple[str, list]]:
    """Sequences as the processors lay them out: text around each grid; Qwen3-VL-like rules put a timestamp
    (two tokens here) before each frame."""
    from relviz.vision.mrope import Image, Text, Video

    between = 2 if frames_apart else 0

    def video(frames: int, rows: int, cols: int, seconds: float = 1.0) -> Video:
        return Video(frames, rows, cols, seconds_per_grid=seconds, frame_text=between)

    return [
        ("1×1 image", [Text(3), Image(1, 1), Text(2)]),
        ("1×7 image first", [Image(1, 7), Text(1)]),
        ("7×1 image last", [Text(2), Image(7, 1)]),
        ("two odd images between text", [Text(2), Image(3, 5), Text(1), Image(5, 3), Text(3)]),
        ("image then video, no text between", [Text(1), Image(2, 3), video(2, 3, 2), Text(1)]),
        ("3-frame 2×3 video, 0.5 s", [Text(4), video(3, 2, 3, 0.5), Text(2)]),
        ("1-frame 1×1 video", [Text(1), video(1, 1, 1), Text(1)]),
        ("9 frames outgrow a 2×2 grid", [Text(1), video(9, 2, 2), Text(3)]),
        ("two videos, 1.5 s and 0.25 s", [Text(2), video(5, 3, 1, 1.5), Text(1), video(2, 1, 4, 0.25), Text(2)]),
        ("uneven interval 0.3 s", [Text(1), video(6, 2, 1, 0.3), Text(1)]),
        ("image, video, image", [Text(1), Image(1, 2), Text(1), video(4, 1, 3, 2.0), Text(2), Image(4, 4), Text(1)]),
        ("two images with no text between", [Text(1), Image(2, 2), Image(3, 3), Text(1)]),
    ]


def _rope_index(module: str, config, segments, kinds: torch.Tensor) -> torch.Tensor:
    """transformers' get_rope_index of the family on ``segments`` (grids × the spatial merge, as its processor
    sends them), run on a model object that holds only the config: [3, N]."""
    from relviz.vision.mrope import Image, Text, Video

    modeling = _modeling(module)
    owners = [getattr(modeling, n) for n in dir(modeling)
              if isinstance(getattr(modeling, n), type) and "get_rope_index" in vars(getattr(modeling, n))]
    if not owners:
        raise LookupError("no class defines get_rope_index")
    owner = owners[0]
    model = owner.__new__(owner)
    torch.nn.Module.__init__(model)
    model.config = config
    merge = config.vision_config.spatial_merge_size
    images = [[1, s.rows * merge, s.cols * merge] for s in segments if isinstance(s, Image)]
    videos = [[s.frames, s.rows * merge, s.cols * merge] for s in segments if isinstance(s, Video)]
    seconds = [s.seconds_per_grid for s in segments if isinstance(s, Video)]
    del Text
    import inspect

    accepted = inspect.signature(owner.get_rope_index).parameters
    if "mm_token_type_ids" not in accepted:
        raise LookupError(f"its get_rope_index takes ({', '.join(list(accepted)[1:])}), not mm_token_type_ids")
    extra = {"second_per_grid_ts": torch.tensor(seconds, dtype=torch.float32)} if (
        videos and "second_per_grid_ts" in accepted) else {}
    ids, _ = model.get_rope_index(torch.zeros(1, kinds.shape[0], dtype=torch.long), kinds[None],
                                  image_grid_thw=torch.tensor(images) if images else None,
                                  video_grid_thw=torch.tensor(videos) if videos else None, **extra)
    return ids[:, 0]


def _mrope_family(family: Family, quick: bool) -> list[CaseOutcome]:
    from relviz.vision.mrope import mrope_position_ids, mrope_rule

    model_type = model_type_of(family.module)
    try:
        rule = mrope_rule(model_type)
    except ValueError as error:
        return [CaseOutcome(family, "every sequence", REFUSED, str(error))]
    config = _config(model_type)
    tps = int(getattr(config.vision_config, "tokens_per_second", 2) or 2)
    out = []
    cases = _mrope_cases(rule.frames_apart)
    for label, segments in cases[::3] if quick else cases:
        start = time.perf_counter()
        try:
            ids, kinds = mrope_position_ids(segments, rule, tokens_per_second=tps, device="cpu")
        except ValueError as error:
            out.append(CaseOutcome(family, label, REFUSED, str(error), time.perf_counter() - start))
            continue
        try:
            expected = _rope_index(family.source, config, segments, kinds)
        except LookupError as error:
            out.append(CaseOutcome(family, label, UNRUN, str(error), time.perf_counter() - start))
            continue
        except Exception as error:  # noqa: BLE001 - transformers cannot compute what relviz answered
            out.append(CaseOutcome(family, label, WRONG, f"relviz gave ids; transformers raised {type(error).__name__}: "
                                                     f"{str(error)[:160]}", time.perf_counter() - start))
            continue
        same = torch.equal(ids, expected)
        out.append(CaseOutcome(family, label, EXACT if same else WRONG,
                           "" if same else _first_difference(ids, expected), time.perf_counter() - start))
    return out


def _first_difference(mine: torch.Tensor, theirs: torch.Tensor) -> str:
    if mine.shape != theirs.shape:
        return f"shape {tuple(mine.shape)} against transformers' {tuple(theirs.shape)}"
    where = torch.nonzero(mine != theirs)[0].tolist()
    return f"first difference at {where}: relviz {mine[tuple(where)].item()!r}, transformers {theirs[tuple(where)].item()!r}"


# ---------------------------------------------------------------------------------------
# 2-D RoPE of a vision tower (*VisionRotaryEmbedding)

GRIDS = ((1, 1), (1, 7), (7, 1), (2, 2), (3, 5), (5, 3), (9, 4))


def _rope2d_read(family: Family) -> tuple[Any, list] | CaseOutcome:
    """The family's default config and the 2-D RoPE layers relviz's plan reads from it, or the refusal."""
    from relviz.mechanisms.rope2d import Rope2DLayer

    model_type = model_type_of(family.module)
    try:
        config = _config(model_type)
        plan = _plan(config.to_dict())
    except ValueError as error:
        return CaseOutcome(family, "every grid", REFUSED, str(error))
    layers = _find(plan, Rope2DLayer)
    if not layers:
        return CaseOutcome(family, "every grid", REFUSED, _not_read(plan, model_type, "2-D RoPE"))
    return config, layers


def _rotary_family(family: Family, quick: bool) -> list[CaseOutcome]:
    from relviz.vision.rope2d import rope2d_cos_sin

    read = _rope2d_read(family)
    if isinstance(read, CaseOutcome):
        return [read]
    config, layers = read
    vision = getattr(config, "vision_config", None) or config
    try:
        rotary = getattr(_modeling(family.source), family.target)(vision)
    except Exception as error:  # noqa: BLE001
        return [CaseOutcome(family, "every grid", UNRUN, f"{family.target}(vision config) raised {error!r:.160}")]
    ropes = {layer.rope() for layer in layers}
    out = []
    for rows, cols in GRIDS[::2] if quick else GRIDS:
        start = time.perf_counter()
        hh, ww = torch.meshgrid(torch.arange(rows), torch.arange(cols), indexing="ij")
        positions = torch.stack([hh.flatten(), ww.flatten()], dim=-1)          # [N, 2] row-major (h, w)
        try:
            cos, sin = rotary(torch.zeros(1), positions)
        except Exception as error:  # noqa: BLE001
            out.append(CaseOutcome(family, f"{rows}×{cols}", UNRUN, f"its forward(x, position_ids) raised {error!r:.160}"))
            continue
        wrong = [r.label for r in ropes
                 if not all(map(torch.equal, rope2d_cos_sin(r, (rows, cols), device="cpu"), (cos, sin)))]
        out.append(CaseOutcome(family, f"{rows}×{cols}", WRONG if wrong else EXACT,
                           f"cos/sin differ from {family.target}'s ({', '.join(wrong)})" if wrong else "",
                           time.perf_counter() - start))
    return out


def _pixel_rotary_family(family: Family, quick: bool) -> list[CaseOutcome]:
    """A rotary module that reads the grid from the pixels (DINOv3's ``*RopePositionEmbedding(pixel_values)``), in
    eval mode (training jitters the coordinates): its cos/sin against relviz's at the plan's 2-D RoPE."""
    from relviz.vision.rope2d import rope2d_cos_sin

    read = _rope2d_read(family)
    if isinstance(read, CaseOutcome):
        return [read]
    config, layers = read
    rotary = getattr(_modeling(family.source), family.target)(config).eval()
    patch = config.patch_size if isinstance(config.patch_size, int) else config.patch_size[0]
    rope = layers[0].rope()
    out = []
    for rows, cols in GRIDS[::2] if quick else GRIDS:
        start = time.perf_counter()
        with torch.no_grad():
            cos, sin = rotary(torch.zeros(1, 3, rows * patch, cols * patch))
        mine_cos, mine_sin = rope2d_cos_sin(rope, (rows, cols), device="cpu")
        same = torch.equal(mine_cos, cos) and torch.equal(mine_sin, sin)
        out.append(CaseOutcome(family, f"{rows}×{cols}", EXACT if same else WRONG,
                               "" if same else f"cos/sin differ from {family.target}'s", time.perf_counter() - start))
    return out


# ---------------------------------------------------------------------------------------
# Swin-style bias tables (relative_position_bias_table)

#: (rows, cols of patches, window): a window that divides the grid, one that does not, one larger than the grid,
#: a 1 × 1 image, non-square images (a window larger than their short side: Swin v2 shrinks each side)
SWIN_CASES = ((8, 8, 4), (6, 6, 3), (3, 3, 5), (5, 5, 2), (1, 1, 1), (3, 5, 7), (4, 10, 2), (2, 6, 4))


def _tiny(config_class, **fields):
    """The config class with those of ``fields`` it declares (tiny widths), the rest its defaults."""
    default = config_class()
    return config_class(**{k: v for k, v in fields.items() if hasattr(default, k)})


def _bias_family(family: Family, quick: bool) -> list[CaseOutcome]:
    from relviz.mechanisms.swin_bias import SwinBias

    model_type = model_type_of(family.module)
    config_class = type(_config(model_type))
    out = []
    for rows, cols, window in SWIN_CASES[::2] if quick else SWIN_CASES:
        label = f"{rows}×{cols} patches, window {window}"
        start = time.perf_counter()
        try:
            config = _tiny(config_class, image_size=[rows * 2, cols * 2] if rows != cols else rows * 2, patch_size=2,
                           embed_dim=8, depths=[2], num_heads=[2], window_size=window)
        except Exception as error:  # noqa: BLE001
            out.append(CaseOutcome(family, label, UNRUN, f"its config class refused tiny sizes: {error!r:.160}"))
            continue
        try:
            _plan(config.to_dict())
        except ValueError as error:
            out.append(CaseOutcome(family, label, REFUSED, str(error), time.perf_counter() - start))
            continue
        torch.manual_seed(rows * 31 + cols * 7 + window)
        try:
            model = _transformers().AutoModel.from_config(config).eval()
        except Exception as error:  # noqa: BLE001
            out.append(CaseOutcome(family, label, UNRUN, f"AutoModel.from_config raised {error!r:.160}"))
            continue
        for name, parameter in model.named_parameters():
            if "relative_position_bias_table" in name or "continuous_position_bias_mlp" in name:
                torch.nn.init.normal_(parameter.data)
        state = dict(model.state_dict())
        try:
            mechanisms = _find(_plan(config.to_dict(), tensor=state.get), SwinBias)
            if not mechanisms:
                raise ValueError(f"relviz's plan of {model_type!r} reads no Swin bias")
            mine = [m.bias() for m in mechanisms]
            windows = [m.window for m in _find(_plan(config.to_dict()), SwinBias)]    # from the config alone
        except ValueError as error:
            out.append(CaseOutcome(family, label, REFUSED, str(error), time.perf_counter() - start))
            continue
        theirs = _bias_of_blocks(model)
        if [round(b.shape[-1] ** 0.5) for b in theirs] != windows:
            out.append(CaseOutcome(family, label, WRONG, f"windows read from the config alone {windows}, transformers' "
                                                     f"{[round(b.shape[-1] ** 0.5) for b in theirs]}"))
            continue
        out.append(_compare_biases(family, label, mine, theirs, start))
    return out


def _bias_of_blocks(model) -> list[torch.Tensor]:
    """Each block's gathered bias [heads, M², M²], as its attention computes it (Swin: its bias module's
    forward; Swin v2: transformers' lines, gather then 16·sigmoid on the contiguous result)."""
    out = []
    for module in model.modules():
        if hasattr(module, "relative_position_bias_table") and not list(module.children()):
            out.append(module()[0].detach())                        # Swin's bias module: its forward
        elif hasattr(module, "relative_position_bias_table"):       # Donut's self-attention: its forward's lines
            area = module.window_size[0] * module.window_size[1]
            bias = module.relative_position_bias_table[module.relative_position_index.view(-1)].view(area, area, -1)
            out.append(bias.permute(2, 0, 1).contiguous().detach())
        elif hasattr(module, "continuous_position_bias_mlp"):
            table = module.continuous_position_bias_mlp(module.relative_coords_table).view(
                -1, module.num_attention_heads)
            area = module.window_size[0] * module.window_size[1]
            bias = table[module.relative_position_index.view(-1)].view(area, area, -1)
            out.append((16 * torch.sigmoid(bias.permute(2, 0, 1).contiguous())).detach())
    return out


def _compare_biases(family: Family, label: str, mine: list[torch.Tensor], theirs: list[torch.Tensor],
                    start: float) -> CaseOutcome:
    if len(mine) != len(theirs):
        return CaseOutcome(family, label, WRONG, f"relviz read {len(mine)} blocks, transformers has {len(theirs)}",
                       time.perf_counter() - start)
    for n, (bias, expected) in enumerate(zip(mine, theirs)):
        if bias.shape != expected.shape:
            return CaseOutcome(family, label, WRONG, f"block {n}: relviz's bias {tuple(bias.shape)}, transformers' "
                                                 f"{tuple(expected.shape)}", time.perf_counter() - start)
        if not torch.equal(bias, expected):
            return CaseOutcome(family, label, WRONG, f"block {n}: bias differs", time.perf_counter() - start)
    return CaseOutcome(family, label, EXACT, "", time.perf_counter() - start)


# ---------------------------------------------------------------------------------------
# Learned absolute tables interpolated to the image's grid (interpolate_pos_encoding)


def _absolute_family(family: Family, quick: bool) -> list[CaseOutcome]:
    """relviz's patch table resized to each grid against the model's own interpolate_pos_encoding; a family whose
    plan reads a learned table as a 1-D sequence (no grid) is counted as not run, one it does not read as refused."""
    from relviz.mechanisms.absolute import LearnedAbsolute
    from relviz.mechanisms.patch_table import PatchTable

    model_type = model_type_of(family.module)
    try:
        plan = _plan(_config(model_type).to_dict())
    except ValueError as error:
        return [CaseOutcome(family, "every grid", REFUSED, str(error))]
    if not _find(plan, PatchTable):
        if _find(plan, LearnedAbsolute):
            return [CaseOutcome(family, "every grid", UNRUN, "relviz reads its learned table as a 1-D sequence; "
                                                         "interpolated grids are not compared")]
        return [CaseOutcome(family, "every grid", REFUSED, _not_read(plan, model_type, "a learned position table"))]
    patch, side = 2, 4
    config = _tiny(type(_config(model_type)), image_size=patch * side, patch_size=patch, hidden_size=8,
                   num_attention_heads=2, num_hidden_layers=1, intermediate_size=8)
    torch.manual_seed(0)
    model = _transformers().AutoModel.from_config(config).eval()
    state = dict(model.state_dict())
    table = _find(_plan(config.to_dict(), tensor=state.get), PatchTable)[0]
    out = []
    for rows, cols in ABSOLUTE_GRIDS[::2] if quick else ABSOLUTE_GRIDS:
        start = time.perf_counter()
        label = f"{rows}×{cols} (trained {side}×{side})"
        try:
            mine = table.grid_table(rows, cols)
        except ValueError as error:
            out.append(CaseOutcome(family, label, REFUSED, str(error), time.perf_counter() - start))
            continue
        tokens = torch.zeros(1, table.prefix + rows * cols, 8)
        with torch.no_grad():
            theirs = model.embeddings.interpolate_pos_encoding(tokens, rows * patch, cols * patch)[0]
        same = torch.equal(mine, theirs)
        out.append(CaseOutcome(family, label, EXACT if same else WRONG, "" if same else _first_difference(mine, theirs),
                           time.perf_counter() - start))
    return out


#: grids against a trained 4 × 4: itself, 1 × 1, a row, a column, odd, non-square of the same 16 patches, larger
ABSOLUTE_GRIDS = ((4, 4), (1, 7), (2, 8), (9, 2), (1, 1), (7, 1), (3, 5), (5, 5))


def _not_read(plan, model_type: str, what: str) -> str:
    """The reason a plan gives for what it does not read: its own notes on a nested config left unread, else the
    stacks it read."""
    unread = [n for n in plan.notes if "not in relviz's family table" in n] + [n for n in plan.notes
                                                                              if "is not read" in n]
    return " ".join(unread) if unread else (f"relviz's plan of {model_type!r} reads no {what} (its stacks: "
                                     f"{', '.join(plan.stack_names)})")


#: kind -> (its marker in a modeling module's source, the function that sweeps a family of that kind)
MARKERS: dict[str, tuple[str, Callable[[Family, bool], list[CaseOutcome]]]] = {
    "mrope_ids": (r"def (get_rope_index)\(", _mrope_family),
    "vision_rotary": (r"class (\w*VisionRotaryEmbedding)\(", _rotary_family),
    "pixel_rotary": (r"class (\w*RopePositionEmbedding)\(", _pixel_rotary_family),
    "bias_table": (r"(relative_position_bias_table)", _bias_family),
    "absolute": (r"def (interpolate_pos_encoding)\(", _absolute_family),
}


def sweep(families: Iterable[Family] | None = None, *, quick: bool = False,
          progress: Callable[[Family, list[CaseOutcome]], None] | None = None) -> list[CaseOutcome]:
    """Each family's cases (``quick``: a few per family), in the order given (default: ``discover()``)."""
    import warnings

    _transformers().logging.set_verbosity_error()
    outcomes: list[CaseOutcome] = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for family in discover() if families is None else families:
            start = time.perf_counter()
            try:
                done = MARKERS[family.kind][1](family, quick)
            except Exception as error:  # noqa: BLE001 - a family the harness cannot build: said, never hidden
                done = [CaseOutcome(family, "every case", UNRUN, f"the harness raised {error!r:.200}",
                                time.perf_counter() - start)]
            outcomes += done
            if progress:
                progress(family, done)
    return outcomes


def counts(outcomes: list[CaseOutcome]) -> dict[str, dict[str, int]]:
    """kind -> {families, cases, exact, refused, WRONG, not run}."""
    out: dict[str, dict[str, int]] = {}
    for kind in dict.fromkeys(o.family.kind for o in outcomes):
        mine = [o for o in outcomes if o.family.kind == kind]
        tally = Counter(o.status for o in mine)
        out[kind] = {"families": len({o.family.module for o in mine}), "cases": len(mine),
                     **{s: tally.get(s, 0) for s in STATUSES}}
    return out
