"""What each page's URL-bound controls accept: the link schema a tour step, a shared link and the
presenter's "add this view" are checked against.

Exists apart from the tours (relviz.app.tours: steps, encoding, the built-in tour) because it is a fact
about the pages, one entry per control key; plain numbers only, so checking a link never imports torch.
"""
from __future__ import annotations

import math
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import ClassVar

from relviz.app.page_limits import MAX_LENGTH
from relviz.app.training_caps import CAPS  # plain numbers: no torch for a tour link


@dataclass(frozen=True)
class LinkParam:
    """The values one URL-bound control accepts, as link text: one subclass per kind of control (an integer
    or a number in lo..hi, true/false, one of ``choices``, a list of them, text matching ``pattern``).
    ``dynamic``: the page narrows the range at run time (e.g. the query offset between −q_len and k_len) and
    clamps a value outside it."""

    lo: float = 0
    hi: float = 0
    choices: tuple[str, ...] = ()
    pattern: str = ""
    max_chars: int = 0
    dynamic: bool = False
    #: the link carries a list of values (st.query_params.get_all), not one
    takes_list: ClassVar[bool] = False
    #: a number in lo..hi (a slider or number input: the tests compare the range)
    numeric: ClassVar[bool] = False

    def check(self, key: str, value: object) -> str | list[str]:
        """The value as link text, or ValueError naming the key and what it accepts."""
        if not isinstance(value, str) or len(value) > max(64, self.max_chars):
            raise ValueError(f"{key} must be a short string; got {str(value)[:40]!r}")
        self.check_text(key, value)
        return value

    def check_text(self, key: str, value: str) -> None:
        raise NotImplementedError


class IntParam(LinkParam):
    numeric = True

    def check_text(self, key: str, value: str) -> None:
        try:
            number = int(value)
        except ValueError:
            raise ValueError(f"{key} must be an integer from {_fmt(self.lo)} to {_fmt(self.hi)}; "
                             f"got {value[:40]!r}") from None
        _in_range(self, key, number, value)


class FloatParam(LinkParam):
    numeric = True

    def check_text(self, key: str, value: str) -> None:
        try:
            number = float(value)
        except ValueError:
            raise ValueError(f"{key} must be a number from {_fmt(self.lo)} to {_fmt(self.hi)}; "
                             f"got {value[:40]!r}") from None
        _in_range(self, key, number, value)


class BoolParam(LinkParam):
    def check_text(self, key: str, value: str) -> None:
        if value not in ("true", "false"):
            raise ValueError(f"{key} must be true or false; got {value[:40]!r}")


class ChoiceParam(LinkParam):
    def check_text(self, key: str, value: str) -> None:
        if value not in self.choices:
            raise ValueError(f"{key} must be one of {', '.join(self.choices)}; got {value[:40]!r}")


class TextParam(LinkParam):
    def check_text(self, key: str, value: str) -> None:
        if len(value) > self.max_chars or not re.fullmatch(self.pattern, value):
            raise ValueError(f"{key} must match {self.pattern} (at most {self.max_chars} characters); "
                             f"got {value[:40]!r}")


class MultiParam(LinkParam):
    takes_list = True

    def check(self, key: str, value: object) -> list[str]:
        items = value if isinstance(value, list) else None
        if items is None or len(items) > len(self.choices) or not all(isinstance(v, str) for v in items):
            raise ValueError(f"{key} must be a list of up to {len(self.choices)} of: {', '.join(self.choices)}")
        for item in items:
            if item not in self.choices:
                raise ValueError(f"{key}: {item[:40]!r} is not one of {', '.join(self.choices)}")
        return list(items)


def _in_range(param: LinkParam, key: str, number: float, value: str) -> None:
    if not (math.isfinite(number) and param.lo <= number <= param.hi):
        raise ValueError(f"{key} must be from {_fmt(param.lo)} to {_fmt(param.hi)}; got {value[:40]!r}")


def _fmt(number: float) -> str:
    return str(int(number)) if float(number).is_integer() else str(number)


def _int(lo: int, hi: int, *, dynamic: bool = False) -> LinkParam:
    return IntParam(lo, hi, dynamic=dynamic)


BOOL = BoolParam()
_LENGTH = MAX_LENGTH  # the pages' longest query/key length


def _length_params(prefix: str) -> dict[str, LinkParam]:
    """The keys relviz.app.controls' length and window controls bind (query/key length, offset, window)."""
    return {f"{prefix}_q": _int(1, _LENGTH), f"{prefix}_k": _int(1, _LENGTH),
            f"{prefix}_off": _int(-_LENGTH, _LENGTH, dynamic=True), f"{prefix}_ws": _int(16, 512, dynamic=True),
            f"{prefix}_r0": _int(0, _LENGTH, dynamic=True), f"{prefix}_c0": _int(0, _LENGTH, dynamic=True)}


def _choices(*values: object) -> LinkParam:
    return ChoiceParam(choices=tuple(str(v) for v in values))


#: The Your model page's view kinds (relviz.layer_strip.VIEW_KINDS, which needs torch; a test keeps them equal)
YOUR_MODEL_VIEWS = ("all", "rotation", "pattern", "bias", "temperature", "sinks", "structure")
#: A model's label in the Your model list (a preset's label or the operator's name for a directory)
_MODEL_LABEL = r"[A-Za-z0-9][A-Za-z0-9 .()_+,:=/-]{0,99}"

#: Keys the app binds on every page (the sidebar's chart export format).
COMMON_PARAMS: dict[str, LinkParam] = {"chart_export": _choices("PNG", "SVG")}

#: page name (the file stem under pages/, the last part of its URL) -> its URL keys.
PAGE_PARAMS: dict[str, dict[str, LinkParam]] = {
    "home": {"home_q": _int(0, 6)},
    "shaw": {**_length_params("sh"), "sh_clip": _int(0, 64),
             "sh_d": ChoiceParam(choices=("8", "16", "32", "64", "128", "256", "512", "1024")),
             "sh_layers": _int(1, 48)},
    "t5": {**_length_params("t5"), "t5_nb": _int(2, 128, dynamic=True), "t5_md": _int(1, 1024), "t5_bi": BOOL, "t5_logx": BOOL,
           "t5_tab": _choices("Buckets", "Precision & references", "Compare with Shaw"), "t5_ck": _int(0, 64)},
    "skew": {"skew_L": _int(3, 16), "skew_seed": _int(0, 99_999),
             "skew_colour": ChoiceParam(choices=("score", "distance", "source row")),
             "skew_tab": ChoiceParam(choices=("Causal skew (decoder)", "Bidirectional skew (encoder)")),
             "skew_dl": ChoiceParam(choices=("QE_r^T", "padded", "reshaped", "sliced", "masked")),
             "skew_mL": _int(1, 1_000_000), "skew_mD": _int(1, 65_536), "skew_mH": _int(1, 1024),
             "skew_mdtype": ChoiceParam(choices=("fp32", "fp16 / bf16"))},
    "absolute": {"abs_L": _int(8, 512), "abs_d": _int(4, 512), "abs_proj": BOOL, "abs_shift": _int(0, 512),
                 "abs_heads": _int(1, 32),
                 "abs_head": _int(1, 32, dynamic=True), "abs_causal": BOOL, "abs_aL": _int(8, _LENGTH),
                 **{key: param for key, param in _length_params("abs_al").items()
                    if key.endswith(("_ws", "_r0", "_c0"))}},
    "rope": {"rp_preset": TextParam(pattern=r"[A-Za-z0-9 .()_+-]{1,60}", max_chars=60),
             "rp_len": _choices(*(2 ** k for k in range(8, 21))), "rp_dim": _choices(16, 32, 64, 96, 128, 256),
             "rp_base": _choices(100, 500, 1000, 10000, 50000, 100000, 500000, 1000000, 10000000),
             "rp_rule": _choices("default", "linear", "dynamic", "yarn", "llama3"),
             "rp_orig": _choices(*(2 ** k for k in range(9, 18))),
             "rp_factor": _choices(1.0, 1.5, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0),
             "rp_low": _choices(0.5, 1.0, 2.0), "rp_high": _choices(1.0, 2.0, 4.0, 8.0),
             "rp_bf": _choices(4, 8, 16, 32, 64), "rp_bs": _choices(0.25, 0.5, 1, 2, 4),
             "rp_L": _int(8, 256), "rp_same": BOOL, "rp_seed": _int(0, 9999),
             "rp_pair": _int(0, 127, dynamic=True), "rp_m": _int(0, 256), "rp_n": _int(0, 256)},
    "attention": {
        "at_ck": TextParam(pattern=r"[a-z0-9][a-z0-9_.-]{0,63}", max_chars=64),
        "at_layer": _int(1, 12, dynamic=True), "at_head": _int(1, 16, dynamic=True),
        "at_len": _int(1, 256), "at_seed": _int(0, 2**31 - 1),
        "at_seq": TextParam(pattern=r"[0-9]*", max_chars=256),
        # The scheme and its own parameters (at_t_<param>, see PAGE_KEY_FAMILIES) come from the scheme
        # registry, which needs torch; a tour reads them by shape, and the page's link check
        # (relviz.app.links.checked_link_values) refuses a name or value its control does not take.
        "at_tsch": TextParam(pattern=r"[a-z][a-z0-9_]{0,31}", max_chars=32),
        "at_ttask": ChoiceParam(choices=("shift", "window_max", "absolute")),
        "at_ts": _int(1, 16), "at_tw": _int(1, 8), "at_tp": _int(0, 31),
        "at_tl": _int(1, CAPS.max_layers), "at_th": ChoiceParam(choices=("1", "2", "4")),
        "at_tsteps": _int(CAPS.min_steps, CAPS.max_steps), "at_tlen": _int(CAPS.min_length, CAPS.max_length),
        "at_tseed": _int(0, 2**31 - 1)},
    "your_model": {
        "ym_model": TextParam(pattern=_MODEL_LABEL, max_chars=100),
        "ym_vs": TextParam(pattern=_MODEL_LABEL, max_chars=100),
        "ym_len": _choices("own", *(2 ** k for k in range(4, 25))),
        "ym_layer": _int(0, 4095, dynamic=True), "ym_layer2": _int(0, 4095, dynamic=True),
        "ym_view": _choices(*YOUR_MODEL_VIEWS), "ym_stack": _choices("encoder", "decoder", "vision"),
        "ym_ext": _int(16, 512), "ym_head": _int(1, 1 << 14, dynamic=True), "ym_L": _int(8, 256),
        "ym_n": _int(8, 512, dynamic=True)},
    "images": {"im_view": _choices("2-D relative index", "Swin's bias table", "2-D RoPE", "M-RoPE (video)"),
               "im_rows": _int(1, 64), "im_cols": _int(1, 64), "im_qr": _int(0, 63, dynamic=True),
               "im_qc": _int(0, 63, dynamic=True), "im_win": _int(2, 16), "im_pre": _choices(0, 8, 12, 16),
               "im_seed": _int(0, 999), "im_rope": _choices("Pixtral", "Qwen-VL vision", "DINOv3"),
               "im_dim": _choices(16, 32, 64, 80, 128), "im_same": BOOL,
               "im_rule": _choices("Qwen2-VL", "Qwen2.5-VL", "Qwen3-VL"), "im_frames": _int(1, 8),
               "im_dt": _int(-7, 7, dynamic=True), "im_tps": _choices(2, 4),
               "im_sec": _choices("0.5", "1.0", "1.5", "2.0")},
    "experiments": {"ex_thr": FloatParam(0.5, 1.0),
                    "ex_set": MultiParam(choices=("Shaw k = 4", "Shaw k = 16", "T5 32/128", "T5 8/32", "ALiBi",
                                                      "sinusoidal (absolute)"))},
}
for _keys in PAGE_PARAMS.values():
    _keys.update(COMMON_PARAMS)

#: Pages whose links are checked but which a tour does not collect (the tool pages): page -> its URL keys.
LINK_ONLY_PARAMS: dict[str, dict[str, LinkParam]] = {
    # the Check page: its kind is a command-line kind name (--kind t5; the names are the checker's registry,
    # which needs torch: the page's selectbox refuses a name it does not list)
    "check": {"ck_kind": TextParam(pattern=r"[a-z][a-z0-9_]{0,31}", max_chars=32), "ck_fit": BOOL,
              "ck_off": _int(-512, 512), "ck_k": _int(0, 64), "ck_nb": _int(2, 128), "ck_md": _int(1, 1024),
              "ck_bi": BOOL, "ck_nh": _int(1, 64), "ck_head": _int(0, 63, dynamic=True), "ck_causal": BOOL,
              "ck_full": BOOL, "ck_hd": _int(0, 1024), "ck_rd": _int(0, 1024),
              "ck_base": TextParam(pattern=r"[0-9,]{1,16}", max_chars=16),
              "ck_layout": TextParam(pattern=r"[a-z]{1,16}", max_chars=16)},
}

#: Keys a link may carry that no control binds: lecture mode's (relviz.app.lecture_mode's lecture, lecture_step and
#: lecture_copy, relviz.app.tours' tour) and Streamlit's own (embed, embed_options). A link's other keys that the
#: page does not bind are named in its notice (relviz.app.links); tests/test_hostile_links.py keeps this list equal
#: to the modules' constants.
APP_KEYS = frozenset({"lecture", "lecture_step", "lecture_copy", "tour", "embed", "embed_options"})

#: page name -> (key pattern, what such a key accepts) for keys a page makes from data it loads at run time:
#: the attention page's training form binds one slider at_t_<param> per parameter its scheme declares.
#: Any finite number is taken here; the slider's own range is the page's to check.
PAGE_KEY_FAMILIES: dict[str, tuple[str, LinkParam]] = {
    "attention": (r"at_t_[a-z][a-z0-9_]{0,39}", FloatParam(-1e9, 1e9, dynamic=True)),
}


#: page -> (the chart a view of it shows first, {(link key, value): the chart that value shows first instead}): the
#: subject of a view a teacher collects (relviz.app.lecture_mode.current_view), as each built-in step names its own.
#: In a lecture everything above the subject goes, and what is below it stays: the first chart keeps the most.
PAGE_SUBJECTS: dict[str, tuple[str, dict[tuple[str, str], str]]] = {
    "home": ("home_fig", {}),
    "shaw": ("sh_fig_relative", {}),
    "t5": ("t5_fig_map", {("t5_tab", "Precision & references"): "t5_fig_precision",
                          ("t5_tab", "Compare with Shaw"): "t5_fig_cmp_shaw"}),
    "skew": ("skew_fig_qer", {("skew_tab", "Bidirectional skew (encoder)"): "skew_fig_bi_qer"}),
    "absolute": ("abs_fig_pe", {}),
    "rope": ("rp_fig_wave", {}),
    "images": ("im_fig_dh", {("im_view", "Swin's bias table"): "im_fig_swin_index",
                             ("im_view", "2-D RoPE"): "im_fig_rope_plane",
                             ("im_view", "M-RoPE (video)"): "im_fig_mrope_ids"}),
    "attention": ("at_fig_head", {}),
    "your_model": ("ym_fig_view_0", {}),
    "experiments": ("ex_fig_overview", {}),
}


def view_subject(page: str, params: dict[str, object]) -> str:
    """The subject chart of a view (a page and its link values, PAGE_SUBJECTS), or "" for a page with none."""
    default, by_value = PAGE_SUBJECTS.get(page, ("", {}))
    return next((subject for (key, value), subject in by_value.items() if params.get(key) == value), default)


def page_param(page: str, key: object) -> LinkParam | None:
    """What ``key`` accepts on ``page`` (a fixed key or one of the page's key families), or None."""
    fixed = PAGE_PARAMS.get(page, {})
    if isinstance(key, str) and key in fixed:
        return fixed[key]
    family = PAGE_KEY_FAMILIES.get(page)
    if family is not None and isinstance(key, str) and re.fullmatch(family[0], key):
        return family[1]
    return None


def range_problem(key: str, value: str) -> str | None:
    """What the control bound to ``key`` (on whichever page binds it: keys carry their page's prefix) accepts,
    when ``value`` is outside it (e.g. "ck_nb must be from 2 to 128; got '500'"); None when the schema takes it
    or no page lists the key."""
    for page in [*PAGE_PARAMS, *LINK_ONLY_PARAMS]:
        param = page_param(page, key) or LINK_ONLY_PARAMS.get(page, {}).get(key)
        if param is not None:
            try:
                param.check(key, value)
            except ValueError as exc:
                return str(exc)
            return None
    return None


def seed_problem(key: str, value: str) -> str | None:
    """range_problem for the values a control would take wrongly if seeded with them (None for other values): a
    link's number outside every range
    the control can take. relviz.app.links drops such a value before the page runs, because relviz's number inputs
    carry no bounds of their own in the browser (relviz.app.controls.number_control) and would take it.
    Also an empty value for a choice control: Streamlit seeds a segmented control with it as "nothing chosen", even
    one that requires a choice (?chart_export= left the sidebar's format and Live attention's heads unselected);
    and text longer than its control takes, which Streamlit cuts to the box's length and keeps (a 20,000-character
    at_seq filled the box with 4,096 of them under a notice that said the default was used)."""
    for page in [*PAGE_PARAMS, *LINK_ONLY_PARAMS]:
        param = page_param(page, key) or LINK_ONLY_PARAMS.get(page, {}).get(key)
        if param is not None:
            empty_choice = isinstance(param, ChoiceParam) and not value.strip()
            too_long = isinstance(param, TextParam) and len(value) > param.max_chars
            return range_problem(key, value) if param.numeric or empty_choice or too_long else None
    return None


def takes_list(key: str) -> bool:
    """Whether the control bound to ``key`` (on whichever page binds it) takes a list: its key may repeat in a link."""
    for page in [*PAGE_PARAMS, *LINK_ONLY_PARAMS]:
        param = page_param(page, key) or LINK_ONLY_PARAMS.get(page, {}).get(key)
        if param is not None:
            return param.takes_list
    return False


def page_keys(page: str, present: Iterable[str]) -> list[str]:
    """The page's fixed keys, then those of ``present`` (e.g. the URL's or the session's) in its key families."""
    fixed = list(PAGE_PARAMS.get(page, {}))
    return fixed + [key for key in present if key not in fixed and page_param(page, key) is not None]

