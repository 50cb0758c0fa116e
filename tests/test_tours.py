"""relviz.app.tours: the tour format, its strict validation, the link encoding, and the built-in tour's views."""
from __future__ import annotations

import base64
import json
import zlib
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest
from streamlit.testing.v1.element_tree import Block, NumberInput, Slider, Widget

from relviz.app import tours
from relviz.app.controls import label_range
from relviz.app.link_schema import PAGE_PARAMS, page_param
from relviz.app.tours import BUILTIN, Step, Tour, decode, encode, loads

APP = str(Path(__file__).resolve().parents[1] / "app.py")


def raw_code(payload: bytes) -> str:
    return base64.urlsafe_b64encode(zlib.compress(payload, 9)).decode().rstrip("=")


def test_builtin_tour_round_trips_through_a_link_and_a_file():
    code = encode(BUILTIN)
    assert len(code) <= tours.MAX_CODE_CHARS and code.replace("-", "").replace("_", "").isalnum()
    assert decode(code) == tours.check_tour(BUILTIN)
    assert loads(tours.dumps(BUILTIN)) == tours.check_tour(BUILTIN)
    assert 10 <= len(BUILTIN.steps) <= 16  # about 20 minutes at 1-3 minutes a step
    order = [step.page for step in BUILTIN.steps]
    assert order.index("shaw") < order.index("t5") < order.index("skew") < order.index("absolute") \
        < order.index("rope") < order.index("attention") < order.index("experiments")


def test_a_teachers_tour_keeps_every_value():
    tour = Tour("Mine", (Step("t5", {"t5_nb": "16", "t5_bi": "false", "t5_tab": "Compare with Shaw"}, "a", "b"),
                         Step("experiments", {"ex_set": ["ALiBi", "T5 8/32"], "ex_thr": "0.75"}, "c", "")))
    assert decode(encode(tour)) == tour


def _step(page: str = "t5", **params) -> dict:
    return {"page": page, "params": params, "title": "t", "note": "n"}


def _file(*steps, **top) -> bytes:
    return json.dumps({"relviz_tour": 1, "title": "x", "steps": list(steps), **top}).encode()


@pytest.mark.parametrize("data,message", [
    (_file(_step("../../etc/passwd")), "page must be one of"),
    (_file(_step("/tmp/x.py")), "page must be one of"),
    (_file(_step("check")), "page must be one of"),
    (_file(_step(t5_evil="1")), "has no control"),
    (_file(_step(t5_nb="1000")), "from 2 to 128"),
    (_file(_step(t5_nb="inf")), "from 2 to 128"),
    (_file(_step(t5_nb="nan")), "from 2 to 128"),
    (_file(_step(t5_nb="3.5")), "integer"),
    (_file(_step(t5_nb=16)), "short string"),
    (_file(_step(t5_bi="yes")), "true or false"),
    (_file(_step(t5_tab="<script>")), "one of"),
    (_file(_step("attention", at_seq="12a")), "must match"),
    (_file(_step("attention", at_ck="../secret")), "must match"),
    (_file(_step("experiments", ex_set=["ALiBi", "rm -rf"])), "not one of"),
    (_file(_step("experiments", ex_set="ALiBi")), "list"),
    # the attention page's per-scheme keys are taken by shape: a bounded name, a finite number
    (_file(_step("attention", at_tsch="../alibi")), "must match"),
    (_file(_step("attention", at_tsch="a" * 33)), "must match"),
    (_file(_step("attention", **{"at_t_../x": "1"})), "has no control"),
    (_file(_step("attention", **{"at_t_" + "a" * 41: "1"})), "has no control"),
    (_file(_step("attention", **{"at_T_clip": "1"})), "has no control"),
    (_file(_step("t5", at_t_clip="1")), "has no control"),
    (_file(_step("attention", at_t_clip="inf")), "from -1000000000 to 1000000000"),
    (_file(_step("attention", at_t_clip="nan")), "from -1000000000 to 1000000000"),
    (_file(_step("attention", at_t_clip="1e999")), "from -1000000000 to 1000000000"),
    (_file(_step("attention", at_t_clip="4; rm")), "a number"),
    (_file(_step("attention", at_t_clip=4)), "short string"),
    (_file(_step("attention", at_t_clip="9" * 65)), "short string"),
    (_file(*[_step()] * (tours.MAX_STEPS + 1)), "from 1 to"),
    (_file(), "from 1 to"),
    (_file(dict(_step(), note="x" * (tours.MAX_NOTE + 1))), "at most"),
    (_file(dict(_step(), title="a\x1b[31mb")), "control characters"),
    (_file(dict(_step(), extra=1)), "unknown field"),
    (_file(_step(), evil=1), "unknown tour field"),
    (json.dumps({"relviz_tour": 2, "title": "x", "steps": [_step()]}).encode(), "relviz_tour must be 1"),
    (json.dumps([1, 2]).encode(), "one JSON object"),
    (b"{not json", "does not parse"),
    (b"[" * 50_000 + b"]" * 50_000, "at most"),
    (b"[" * 15_000 + b"]" * 15_000, "does not parse|one JSON object"),
    (b"\xff\xfe{}", "does not parse"),
    (b" " * (tours.MAX_JSON_BYTES + 1), "at most"),
], ids=lambda value: str(value)[:40] if isinstance(value, str) else "")
def test_hostile_tour_files_are_refused_with_a_message(data, message):
    with pytest.raises(ValueError, match=message):
        loads(data)


@pytest.mark.parametrize("code,message", [
    ("", "holds no tour"),
    (None, "holds no tour"),
    ("abc$%", "damaged"),
    ("a" * (tours.MAX_CODE_CHARS + 1), "too long"),
    ("AAAA", "damaged"),
    (raw_code(b" " * 3_000_000), "expands beyond"),  # a zip bomb: 3 MB of spaces in 4 kB of link
    (raw_code(b"{}"), "not a relviz tour"),
    (raw_code(_file(_step("../../etc/passwd"))), "page must be one of"),
], ids=lambda value: str(value)[:40] if isinstance(value, str) and len(value) < 60 else "long")
def test_hostile_tour_links_are_refused_with_a_message(code, message):
    with pytest.raises(ValueError, match=message):
        decode(code)


# ---------------------------------------------------------------------------------------
# The schema matches the pages, and every built-in step is a view the page takes whole


def bound_controls(at: AppTest) -> dict[str, object]:
    """query-parameter key -> element, for every URL-bound control on the rendered page."""
    found = {}
    for root in (at.main, at.sidebar):
        for node in root:
            if isinstance(node, Widget) and getattr(node.proto, "query_param_key", ""):
                found[node.proto.query_param_key] = node
            elif isinstance(node, Block) and getattr(node, "type", "") == "tab_container":
                key = node.proto.tab_container.query_param_key
                if key:
                    found[key] = [c.label for c in node.children.values() if getattr(c, "type", "") == "tab"]
    return found


@pytest.fixture(scope="module")
def app() -> AppTest:
    return AppTest.from_file(APP, default_timeout=120).run()


@pytest.mark.parametrize("page", sorted(PAGE_PARAMS))
def test_schema_lists_every_url_control_of_the_page(app, page):
    """Every control a page binds to the URL is in PAGE_PARAMS with the same range or options."""
    app.switch_page(f"pages/{page}.py").run()
    assert not app.exception, app.exception
    for key, element in bound_controls(app).items():
        param = page_param(page, key)
        assert param is not None, f"{page}: control {key} is missing from relviz.app.link_schema.PAGE_PARAMS"
        if isinstance(element, list):  # tabs
            assert param.choices == tuple(element), key
        elif isinstance(element, NumberInput):  # no bounds in the browser: the range is in the label
            assert param.numeric and label_range(element.label) is not None, (key, element.label)
            if not param.dynamic:
                assert (param.lo, param.hi) == label_range(element.label), (key, element.label)
        elif param.numeric and not param.dynamic and isinstance(element, Slider):
            assert (param.lo, param.hi) == (element.proto.min, element.proto.max), key
        elif param.choices:
            assert set(element.options) <= set(param.choices), (key, element.options)


@pytest.mark.parametrize("number", range(len(BUILTIN.steps)))
def test_each_builtin_step_opens_its_exact_view(number):
    step = BUILTIN.steps[number]
    at = AppTest.from_file(APP, default_timeout=120)
    for key, value in step.params.items():
        at.query_params[key] = value
    at.switch_page(f"pages/{step.page}.py").run()
    assert not at.exception, at.exception
    assert not [w.value for w in at.warning if "Ignored in the link" in str(w.value)]
    controls = bound_controls(at)
    for key, value in step.params.items():
        element = controls[key]
        if isinstance(element, list):
            continue  # a tab: taken when no notice says otherwise
        shown = element.value
        assert str(shown).lower() == str(value).lower() or (isinstance(shown, (int, float)) and
                                                            float(shown) == float(value)), (key, shown, value)


def test_the_stated_tour_length_is_the_sum_of_its_notes():
    """The README and the Lecture mode page state the built-in tour's length; the notes' timings decide it."""
    import re
    from pathlib import Path

    from relviz.app.tours import BUILTIN, Step, Tour, tour_minutes

    notes = [re.search(r"\((\d+) min\)$", step.note) for step in BUILTIN.steps]
    assert all(notes)
    total = sum(int(m.group(1)) for m in notes)
    assert tour_minutes(BUILTIN) == total
    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text(encoding="utf-8")
    assert f"({len(BUILTIN.steps)} steps, about {total} minutes)" in readme
    assert tour_minutes(Tour("t", (Step("home", note="no timing"),))) is None
