"""A link's value outside the range a control takes with the page's other settings is refused naming that range
(issue 34's leftover: ``at_layer=9`` on a two-layer checkpoint said only "not a value this control takes"). The link
schema (relviz.app.link_schema) knows only the widest range of such a ``dynamic`` key; the page notes the range the
control took in the run (relviz.app.controls.note_range, clamp_state), and the notice names it. Swept over every
dynamic key of the schema."""
from __future__ import annotations

import re

import pytest

from page_support import run_page
from relviz.app.link_schema import LINK_ONLY_PARAMS, PAGE_KEY_FAMILIES, PAGE_PARAMS

#: page, a link with each dynamic key outside the range its control takes there (inside the schema's)
LINKS = [
    ("attention", {"at_layer": 9, "at_head": 16, "at_t_num_buckets": 100}),
    ("t5", {"t5_q": 1024, "t5_k": 1024, "t5_ws": 512, "t5_r0": 600, "t5_c0": 600, "t5_off": 2000, "t5_nb": 2}),
    ("shaw", {"sh_q": 1024, "sh_k": 1024, "sh_ws": 512, "sh_r0": 600, "sh_c0": 600, "sh_off": 2000}),
    ("absolute", {"abs_heads": 4, "abs_head": 20, "abs_aL": 1024, "abs_al_ws": 512, "abs_al_r0": 600,
                  "abs_al_c0": 600}),
    ("rope", {"rp_dim": 16, "rp_pair": 100}),
    ("images", {"im_rows": 8, "im_cols": 8, "im_qr": 60, "im_qc": 60}),
    ("images", {"im_view": "M-RoPE (video)", "im_frames": 2, "im_dt": 7}),
    ("your_model", {"ym_model": "T5-small (published config)", "ym_layer": 4000,
                    "ym_vs": "T5-base (published config)", "ym_layer2": 4000}),
]
#: keys set above only to make room for the dynamic ones
SETTINGS = {"t5_q", "t5_k", "sh_q", "sh_k", "abs_heads", "abs_aL", "rp_dim", "im_rows", "im_cols", "im_view",
            "im_frames", "ym_model", "ym_vs"}
#: the window size's control takes the schema's whole range (16 to 512) at every setting: nothing narrower to name
SAME_RANGE = {"sh_ws", "t5_ws", "abs_al_ws"}
#: the number input names its range itself (relviz.app.controls.number_control), checked below
NUMBER_INPUTS = {"ck_head"}
#: drawn only for a model directory's weights: tests/test_page_your_model.py checks them with its tiny models
WEIGHTS = {"ym_head", "ym_n"}


def dynamic_keys() -> set[str]:
    keys = {key for params in [*PAGE_PARAMS.values(), *LINK_ONLY_PARAMS.values()]
            for key, param in params.items() if param.dynamic}
    return keys | {pattern for pattern, param in PAGE_KEY_FAMILIES.values() if param.dynamic}


def test_every_dynamic_key_is_swept():
    families = [pattern for pattern, _ in PAGE_KEY_FAMILIES.values()]
    covered = {next((p for p in families if re.fullmatch(p, key)), key) for _, link in LINKS for key in link}
    assert covered - SETTINGS | SAME_RANGE | NUMBER_INPUTS | WEIGHTS == dynamic_keys()


def control_range(at, key: str) -> tuple[float, float]:
    """The range the control bound to ``key`` took in the run, read from the widget itself."""
    for kind in ("slider", "segmented_control"):
        found = [w for w in at.get(kind) if getattr(w, "key", None) == key]
        if found:
            widget = found[0]
            ends = (widget.min, widget.max) if kind == "slider" else (min(map(int, widget.options)),
                                                                       max(map(int, widget.options)))
            return tuple(int(end) if float(end).is_integer() else end for end in ends)
    raise AssertionError(f"no control with key {key}")


@pytest.mark.parametrize("page, link", LINKS, ids=[f"{page}-{'-'.join(link)[:40]}" for page, link in LINKS])
def test_a_value_outside_the_controls_range_is_refused_naming_it(page, link):
    at = run_page(page, timeout=120, **link)
    notices = [w.value for w in at.warning if w.value.startswith("Ignored in the link")]
    assert len(notices) == 1, [w.value for w in at.warning]
    for key, value in link.items():
        if key in SETTINGS | SAME_RANGE:
            continue
        lo, hi = control_range(at, key)
        assert not lo <= value <= hi, (key, lo, hi)            # the link's value is outside the control's range
        # the value once, in its code span (relviz.app.links.code_span), the range in words
        named = f"`{key}={value}` ({key} must be from {lo:,} to {hi:,} with the page's other settings)"
        assert named in notices[0], (named, notices[0])


def test_a_number_inputs_range_is_named_beside_it():
    at = run_page("check", timeout=120, ck_kind="alibi", ck_nh=4, ck_head=60)
    assert any("takes 0 to 3: 60 was not applied" in e.value for e in at.error), [e.value for e in at.error]
