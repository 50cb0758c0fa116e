"""Every control of every page, driven to its limits (AppTest): min, max, random values, random orders.

For each page in relviz.app.navigation.PAGES the test discovers every widget on the rendered page (sliders,
select sliders, number inputs, select boxes, radios, segmented controls, toggles, checkboxes,
text inputs and areas, buttons, keyed tabs) and moves them, re-discovering after every move
because controls come and go (the window sliders appear above 512 per side, the "nearest valid
setting" button only on an invalid T5 setting, the Shaw slider only on the compare tab):

1. extremes: every control to its minimum and its maximum, in a seeded random order;
2. scenarios: the states the sliders cannot prevent, each of which must show the library's
   message: invalid T5 settings (num_buckets 2 or 3 bidirectional, max_distance <= max_exact),
   mismatched query/key lengths at their extremes, heads that do not divide the width, a
   sequence too long or not made of digits, a training run over the caps;
3. junk text: letters, emoji, empty, whitespace, markup, non-ASCII digits, very long strings;
4. random moves: a seeded random walk over all controls (min, max, random values, and what a
   tampered client could send: one step beyond either end, a float for an integer).

Select widgets are set by their option labels, as the browser sends them. A second test opens
each page from shared links whose every URL-bound control carries junk ("abc", emoji, huge
numbers, NaN, 5000 characters...).

After every move: no exception escapes (``at.exception`` is empty, the run does not time out);
every ``st.error`` carries a message, not a traceback; the page still shows its title and
content. The count of moves is printed (``pytest -s``) and written to test-artifacts/controls.json.

The Train button of the live attention page is clicked once, with the smallest settings (its
cost is bounded); the random walk never clicks it. Tune with RELVIZ_CONTROLS_SEED,
RELVIZ_CONTROLS_ROUNDS (random moves per page) and RELVIZ_CONTROLS_BUDGET (seconds per page for
the random walk; it stops early, in seeded order, when the budget is spent).
"""
from __future__ import annotations

import json
import math
import os
import random
import re
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from streamlit.proto.NumberInput_pb2 import NumberInput as NumberInputProto
from streamlit.proto.Slider_pb2 import Slider as SliderProto
from streamlit.proto.WidgetStates_pb2 import WidgetState
from streamlit.testing.v1 import AppTest
from streamlit.testing.v1.element_tree import (
    Block,
    Button,
    ButtonGroup,
    Checkbox,
    DownloadButton,
    Multiselect,
    NumberInput,
    Radio,
    Selectbox,
    SelectSlider,
    Slider,
    TextArea,
    TextInput,
    Toggle,
    Widget,
)

from relviz.app.controls import label_range
from relviz.app.navigation import PAGES

ROOT = Path(__file__).resolve().parents[1]
APP = str(ROOT / "app.py")
ARTIFACT = ROOT / "test-artifacts" / "controls.json"

SEED = int(os.environ.get("RELVIZ_CONTROLS_SEED", "6"))
ROUNDS = int(os.environ.get("RELVIZ_CONTROLS_ROUNDS", "60"))
BUDGET_S = float(os.environ.get("RELVIZ_CONTROLS_BUDGET", "15"))
#: One script run may take this long on a loaded 2-core machine before it counts as a hang.
RUN_TIMEOUT_S = 90

#: Buttons the random walk never clicks: training or measuring costs seconds to minutes of CPU per
#: click (the live attention page's Train is clicked once, deliberately, with the smallest settings:
#: see TRAIN_ONCE). Any other button labelled "Train…" or "Measure…" is skipped too.
EXPENSIVE_BUTTONS = {"at_train", "ex_lo_go", "ex_le_go", "ex_lc_go"}
#: Lecture mode's buttons that open another page by design (tests/test_page_tools.py drives them); the
#: walk skips them with the expensive ones, so that it stays on the page it tests.
EXPENSIVE_BUTTONS |= {"tour_start", "tour_mine", "tour_next", "tour_prev", "tour_end"}
EXPENSIVE_LABEL = re.compile(r"^(Train|Measure)\b")
#: key -> value set before the single Train click (the cheapest run the caps allow).
TRAIN_ONCE = {"at_tsch": "none", "at_ttask": "shift", "at_ts": 1, "at_tl": 1, "at_tsteps": 10, "at_tlen": 8,
              "at_th": 1}

JUNK_TEXT = [
    "", " ", "\n\t ", "abc", "12a34", "😀" * 8, "1😀2", "١٢٣٤", "<script>alert(1)</script>", "'; DROP TABLE x; --",
    "-1", "1.5", "0x1F", "\x00\x01", "%s%n{0}", "9" * 300, "0123456789" * 500, "x" * 20_000,
]

TRACEBACK = re.compile(r"Traceback \(most recent call last\)|File \"[^\"]+\", line \d+")


# ---------------------------------------------------------------------------------------
# Discovering controls


@dataclass
class Control:
    """One control on the page: how to find it again after a rerun and what values to try."""

    kind: str
    key: str
    label: str


def _user_key(widget: Widget) -> str:
    return widget.key if widget.key else widget.id


def discover(at: AppTest) -> dict[str, tuple[Control, Any]]:
    """key -> (Control, live element) for every control in the main area and the sidebar."""
    found: dict[str, tuple[Control, Any]] = {}
    for root in (at.main, at.sidebar):
        for node in root:
            if isinstance(node, DownloadButton):
                continue  # clicking one only fetches a file; nothing on the page changes
            if isinstance(node, Button) and EXPENSIVE_LABEL.match(str(node.label or "")) \
                    and _user_key(node) not in EXPENSIVE_BUTTONS:
                EXPENSIVE_BUTTONS.add(_user_key(node))
            if isinstance(node, Widget):
                key = _user_key(node)
                found[key] = (Control(type(node).__name__, key, str(getattr(node, "label", ""))), node)
            elif isinstance(node, Block) and getattr(node, "type", "") == "tab_container":
                key = node.proto.tab_container.query_param_key or ""
                labels = [child.label for child in node.children.values() if getattr(child, "type", "") == "tab"]
                if key and labels:
                    found[key] = (Control("Tabs", key, " | ".join(labels)), labels)
    return found


SELECTS = (SelectSlider, Selectbox, Radio, ButtonGroup, Multiselect)


def _labels(widget) -> list[str]:
    """The option labels a select widget shows (what a browser sends back when one is picked)."""
    return list(widget.options)


def set_by_labels(element, labels: list[str]) -> None:
    """Select options by their shown labels, exactly as the browser does.

    AppTest's set_value wants the option *values* and formats them again; the proto holds only the
    labels, and a format_func (e.g. an id -> label mapping) cannot be inverted. The browser sends the
    label (a string for selectbox and radio, a list of strings for the others), so this sends that,
    for this one run, by giving the element a widget state built from the labels.
    """
    single = isinstance(element, (Selectbox, Radio))
    base = type(element)

    class ByLabels(base):  # type: ignore[misc, valid-type]
        @property
        def _widget_state(self) -> WidgetState:
            state = WidgetState()
            state.id = self.id
            if single:
                state.string_value = labels[0]
            else:
                state.string_array_value.data[:] = labels
            return state

    element.__class__ = ByLabels


def _max_selections(widget) -> int:
    return int(getattr(widget.proto, "max_selections", 0) or 0) or len(widget.options)


def _number(value: float, is_int: bool):
    return int(value) if is_int else float(value)


def _bounds(widget) -> tuple[float, float, float, bool]:
    proto = widget.proto
    if isinstance(widget, Slider):
        is_int = proto.data_type == SliderProto.DataType.INT
        return proto.min, proto.max, proto.step or 1, is_int
    is_int = proto.data_type == NumberInputProto.DataType.INT
    # relviz's number inputs have no bounds in the browser; their range is in the label (controls.in_range)
    lo, hi = label_range(widget.label) or (proto.min if proto.has_min else -1e9, proto.max if proto.has_max else 1e9)
    return lo, hi, proto.step or 1, is_int


def extremes(widget, labels=None) -> list:
    """The control's minimum and maximum (first and last option; off and on; a click)."""
    if isinstance(widget, (Slider, NumberInput)):
        lo, hi, _, is_int = _bounds(widget)
        return [_number(lo, is_int), _number(hi, is_int)]
    if isinstance(widget, Multiselect):
        labels_ = _labels(widget)
        return [[], labels_[:_max_selections(widget)]]
    if isinstance(widget, SELECTS):
        labels_ = _labels(widget)
        return [[labels_[0]], [labels_[-1]]] if labels_ else []
    if isinstance(widget, (Toggle, Checkbox)):
        return [False, True]
    if isinstance(widget, (TextInput, TextArea)):
        limit = widget.proto.max_chars or 10_000
        return ["", "7" * limit]
    if isinstance(widget, Button):
        return ["click"]
    if labels is not None:
        return [labels[0], labels[-1]]
    return []


def random_value(widget, rng: random.Random, labels=None):
    """A random move for the control: mostly inside its range, sometimes at or beyond its ends."""
    if isinstance(widget, (Slider, NumberInput)):
        lo, hi, step, is_int = _bounds(widget)
        roll = rng.random()
        if roll < 0.15:
            return _number(lo, is_int)
        if roll < 0.3:
            return _number(hi, is_int)
        if roll < 0.38:  # what a tampered client could send: Streamlit must refuse it
            return rng.choice([_number(lo - step, is_int), _number(hi + step, is_int), 2.5 if is_int else 1e300])
        if roll < 0.6:  # near the low end, where most of the interesting states are
            span = min(hi - lo, 64 * step)
        else:
            span = hi - lo
        steps = int(span // step)
        return _number(lo + step * rng.randint(0, max(steps, 0)), is_int)
    if isinstance(widget, Multiselect):
        labels_ = _labels(widget)
        return rng.sample(labels_, rng.randint(0, min(len(labels_), _max_selections(widget))))
    if isinstance(widget, SELECTS):
        labels_ = _labels(widget)
        return [rng.choice(labels_)] if labels_ else None
    if isinstance(widget, (Toggle, Checkbox)):
        return rng.random() < 0.5
    if isinstance(widget, (TextInput, TextArea)):
        if rng.random() < 0.4:
            return rng.choice(JUNK_TEXT)
        return "".join(rng.choice("0123456789") for _ in range(rng.choice([1, 2, 5, 16, 33, 64, 200, 256, 257])))
    if isinstance(widget, Button):
        return "click"
    if labels is not None:
        return rng.choice(labels)
    return None


# ---------------------------------------------------------------------------------------
# Moving a control and checking the page


@dataclass
class Driver:
    """Drives one AppTest session of one page and records every move and every problem."""

    path: str
    at: AppTest = field(init=False)
    title: str = ""
    moves: int = 0
    applied: int = 0
    errors_shown: int = 0
    problems: list[str] = field(default_factory=list)
    log: list[str] = field(default_factory=list)
    seconds: dict[str, float] = field(default_factory=dict)
    slowest: tuple[float, str] = (0.0, "")
    error_texts: set[str] = field(default_factory=set)
    train_outcome: str | None = None

    def start(self) -> None:
        self.at = AppTest.from_file(APP, default_timeout=RUN_TIMEOUT_S)
        self.at.run()
        self.at.switch_page(self.path)
        self._run("open the page")
        titles = [t.value for t in self.at.title]
        assert titles, f"{self.path}: no title on first render"
        self.title = titles[0]

    def controls(self) -> dict[str, tuple[Control, Any]]:
        return discover(self.at)

    def _run(self, what: str) -> None:
        started = time.perf_counter()
        try:
            self.at.run()
        except Exception as error:  # noqa: BLE001 - a timeout or a crash of the test harness
            self.problems.append(f"{what}: the run failed: {type(error).__name__}: {error}"[:600])
            return
        elapsed = time.perf_counter() - started
        if elapsed > self.slowest[0]:
            self.slowest = (elapsed, what)
        self.check(what)

    def check(self, what: str) -> None:
        at = self.at
        for exc in at.exception:
            trace = " | ".join(line.strip() for line in exc.stack_trace[-3:])
            self.problems.append(f"{what}: exception escaped: {exc.proto.type}: {exc.message[:300]} [{trace[:300]}]")
        for error in at.error:
            text = (error.value or "").strip()
            self.errors_shown += 1
            self.error_texts.add(text[:160])
            if not text:
                self.problems.append(f"{what}: an st.error without a message")
            elif TRACEBACK.search(text):
                self.problems.append(f"{what}: an st.error shows a traceback: {text[:300]}")
        titles = [t.value for t in at.title]
        if self.title and self.title not in titles:
            self.problems.append(f"{what}: the page title {self.title!r} is gone (titles: {titles})")
        content = sum(1 for node in at.main if not isinstance(node, Block) and getattr(node, "type", "") != "title")
        if content < 2:
            self.problems.append(f"{what}: the page shows almost nothing ({content} elements besides the title)")

    def move(self, key: str, value: Any, why: str = "") -> bool:
        """Set control ``key`` to ``value`` (or click it) and rerun; False if it is not on the page now."""
        controls = self.controls()
        if key not in controls:
            return False
        control, element = controls[key]
        what = f"#{self.moves + 1} {why}{control.kind} {key} = {_short(value)}"
        self.log.append(what)
        if value is None:
            return False
        try:
            if control.kind == "Tabs":
                self.at.session_state[key] = value
            elif isinstance(element, Button):
                element.click()
            elif isinstance(element, SELECTS):
                labels = [value] if isinstance(value, str) else \
                    list(value) if isinstance(value, (list, tuple)) else [str(value)]  # scenarios name one
                set_by_labels(element, labels)
                value = labels
            else:
                element.set_value(value)
        except Exception as error:  # noqa: BLE001 - AppTest refused to serialise the value
            self.log.append(f"   (AppTest refused {what}: {type(error).__name__}: {error})"[:300])
            return False
        self.moves += 1
        self._run(what)
        if control.kind != "Tabs" and not isinstance(element, Button):
            now = self.controls().get(key)
            if now is not None and _same(_shown(now[1]), value):
                self.applied += 1  # (the rest: clamped by a callback, or refused as out of range)
        return True

    def report(self) -> str:
        return "\n".join(self.problems[:25]) + "\n\nlast moves:\n" + "\n".join(self.log[-15:])


def _shown(element) -> Any:
    """The control's value as a move sets it: labels for select widgets, the value otherwise."""
    if isinstance(element, (Selectbox, Radio)):
        return [] if element.index is None else [element.options[element.index]]
    if isinstance(element, ButtonGroup):
        return list(element.formatted_values)
    if isinstance(element, Multiselect):
        return list(element.values)
    if isinstance(element, SelectSlider):
        return [str(element.format_func(element.value))]
    return element.value


def _same(a: Any, b: Any) -> bool:
    try:
        return a == b or (isinstance(a, float) and isinstance(b, float) and math.isclose(a, b))
    except Exception:  # noqa: BLE001
        return False


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else f"{text[:30]}…({len(str(value))} chars)"


# ---------------------------------------------------------------------------------------
# Scenarios the sliders cannot prevent. Each step: (key, value); a scenario may name words one
# of the page's st.error messages must contain afterwards (the library's message names the parameter).


@dataclass
class Scenario:
    name: str
    steps: list[tuple[str, Any]]
    expect_error: tuple[str, ...] = ()


SCENARIOS: dict[str, list[Scenario]] = {
    "pages/t5.py": [
        # the num_buckets slider starts at the smallest value each direction takes (4 bidirectional, 2 not)
        Scenario("num_buckets at the bidirectional minimum", [("t5_bi", True), ("t5_md", 128), ("t5_nb", 4)]),
        Scenario("max_distance = max_exact", [("t5_nb", 128), ("t5_md", 32)], ("max_distance",)),
        Scenario("compare tab while invalid", [("t5_tab", "Compare with Shaw")], ("max_distance",)),
        Scenario("nearest valid preset", [("t5_fix", "click"), ("t5_tab", "Buckets")]),
        Scenario("max_distance = max_exact again", [("t5_nb", 128), ("t5_md", 32)], ("max_distance",)),
        Scenario("max_distance < max_exact", [("t5_md", 1)], ("max_distance",)),
        Scenario("unidirectional 2 buckets, max_distance 1", [("t5_bi", False), ("t5_nb", 2), ("t5_md", 1)],
                 ("max_distance",)),
        Scenario("valid again", [("t5_md", 1024), ("t5_bi", True)]),
        Scenario("one query, longest keys", [("t5_q", 1), ("t5_k", 8192), ("t5_off", 8192)]),
        Scenario("longest queries, one key", [("t5_k", 1), ("t5_q", 8192), ("t5_off", -8192)]),
        Scenario("both longest, window at the far corner",
                 [("t5_k", 8192), ("t5_ws", 512), ("t5_r0", 8192 - 512), ("t5_c0", 8192 - 512), ("t5_centre", "click")]),
        Scenario("shrink under the window", [("t5_q", 513), ("t5_k", 2), ("t5_last", "click"), ("t5_first", "click")]),
    ],
    "pages/shaw.py": [
        Scenario("k = 0", [("sh_clip", 0)]),
        Scenario("one query, longest keys", [("sh_q", 1), ("sh_k", 8192), ("sh_off", 8192), ("sh_last", "click")]),
        Scenario("longest queries, one key", [("sh_k", 1), ("sh_q", 8192), ("sh_off", -8192)]),
        Scenario("both longest, window at the far corner",
                 [("sh_k", 8192), ("sh_ws", 512), ("sh_r0", 8192 - 512), ("sh_c0", 8192 - 512), ("sh_centre", "click")]),
        Scenario("shrink under the window", [("sh_q", 2), ("sh_k", 600), ("sh_first", "click")]),
    ],
    "pages/skew.py": [
        Scenario("heads do not divide the width", [("skew_mD", 512), ("skew_mH", 3)], ("divisible",)),
        Scenario("more heads than width", [("skew_mD", 1), ("skew_mH", 1024)], ("heads",)),
        Scenario("largest memory figures", [("skew_mL", 1_000_000), ("skew_mD", 65_536), ("skew_mH", 1024),
                                            ("skew_mdtype", "fp16 / bf16")]),
        Scenario("bidirectional at the extremes", [("skew_tab", "Bidirectional skew (encoder)"), ("skew_L", 3),
                                                   ("skew_L", 16), ("skew_seed", 99_999)]),
    ],
    "pages/absolute.py": [
        Scenario("last head, then one head", [("abs_heads", 32), ("abs_head", 32), ("abs_heads", 1)]),
        Scenario("widest and longest", [("abs_L", 512), ("abs_d", 4), ("abs_proj", True), ("abs_d", 512)]),
    ],
    "pages/rope.py": [
        Scenario("llama3 with high <= low", [("rp_preset", "custom"), ("rp_rule", "llama3"), ("rp_low", 2.0), ("rp_high", 1.0)],
                 ("high_freq_factor",)),
        Scenario("longest length, widest window, every preset", [("rp_len", 1048576), ("rp_L", 256),
                                                                 ("rp_preset", "Llama-3.1 8B"),
                                                                 ("rp_preset", "Phi-3-vision 128k (LongRoPE)")]),
    ],
    "pages/attention.py": [
        Scenario("invalid T5 training setting", [("at_tsch", "t5"), ("at_t_num_buckets", 64), ("at_t_max_distance", 1)], ("max_distance",)),
        Scenario("too much work", [("at_tsch", "none"), ("at_tsteps", 800), ("at_tlen", 48), ("at_tl", 3)], ("steps",)),
        Scenario("sequence beyond the page's limit", [("at_seq", "1" * 300)], ("256",)),
        Scenario("letters in the sequence", [("at_seq", "12ab")], ("allowed",)),
        Scenario("empty sequence", [("at_seq", "")]),
        Scenario("learned model beyond its positions", [("at_ck", "learned-shift"), ("at_len", 256)]),
        Scenario("longest sequence, last layer and head", [("at_ck", "shaw-shift"), ("at_len", 256), ("at_layer", 2),
                                                           ("at_head", 4)]),
    ],
}


def run_scenarios(driver: Driver) -> None:
    for scenario in SCENARIOS.get(driver.path, []):
        for key, value in scenario.steps:
            if not driver.move(key, value, why=f"[{scenario.name}] "):
                driver.log.append(f"   ([{scenario.name}] {key} is not on the page now: skipped)")
        if scenario.expect_error:
            texts = [e.value for e in driver.at.error]
            if not any(all(word in text for word in scenario.expect_error) for text in texts):
                driver.problems.append(f"[{scenario.name}] expected an st.error naming {scenario.expect_error}; "
                                       f"errors shown: {[t[:120] for t in texts]}")


def random_walk(driver: Driver, rng: random.Random, rounds: int, budget_s: float, why: str = "[random] ") -> int:
    """Up to ``rounds`` random moves over whatever controls are on the page, within ``budget_s``."""
    started = time.perf_counter()
    moves = 0
    while moves < rounds and time.perf_counter() - started < budget_s:
        controls = {k: v for k, v in driver.controls().items() if k not in EXPENSIVE_BUTTONS}
        if not controls:
            break
        key = rng.choice(sorted(controls))
        control, element = controls[key]
        labels = element if control.kind == "Tabs" else None
        value = random_value(element if labels is None else None, rng, labels)
        moves += 1
        driver.move(key, value, why=why)
    return moves


def train_once(driver: Driver) -> None:
    """Click Train once with the cheapest settings the caps allow: it must end in a message, not a crash."""
    if "at_train" not in driver.controls():
        return
    for key, value in TRAIN_ONCE.items():
        driver.move(key, value, why="[train once] ")
    before = {e.value for e in driver.at.error}
    driver.move("at_train", "click", why="[train once] ")
    successes = [s.value for s in driver.at.success if "Trained" in s.value]
    errors = [e.value for e in driver.at.error if e.value not in before]
    driver.train_outcome = successes[0] if successes else ("refused: " + " | ".join(errors) if errors else "")
    if not successes and not errors:
        driver.problems.append("[train once] clicking Train (cheapest settings) neither trained a model nor "
                               "showed why not")


# ---------------------------------------------------------------------------------------
# The test

RESULTS: dict[str, dict] = {}


@pytest.fixture(scope="module", autouse=True)
def full_error_details():
    """.streamlit/config.toml limits error details for deployment (AppTest reads it too): this test
    wants the whole message of any exception that escapes, so it asks for it, then puts it back."""
    from streamlit import config

    before = config.get_option("client.showErrorDetails")
    config.set_option("client.showErrorDetails", "full")
    yield
    config.set_option("client.showErrorDetails", before)


EXPERIMENTS_ENV = "RELVIZ_EXPERIMENTS_RESULTS"


@pytest.fixture(scope="module")
def experiments_results(tmp_path_factory):
    """The experiments page needs its results file; until the shipped one exists, a tiny run stands in."""
    from relviz import experiments as ex

    if ex.RESULTS_PATH.exists():
        return None
    try:
        from test_experiments import tiny_results
    except ImportError:
        return None
    patch = pytest.MonkeyPatch()
    try:
        data = tiny_results(patch)
    finally:
        patch.undo()
    path = tmp_path_factory.mktemp("experiments") / "tiny.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    return path


@pytest.fixture
def page_data(request, monkeypatch):
    """Per page: whatever it needs to show its controls (the experiments page: a results file)."""
    if request.node.callspec.params.get("path") == "pages/experiments.py":
        path = request.getfixturevalue("experiments_results")
        if path is not None:
            monkeypatch.setenv(EXPERIMENTS_ENV, str(path))


def _write_artifact() -> None:
    ARTIFACT.parent.mkdir(parents=True, exist_ok=True)
    total = sum(r.get("moves", 0) for r in RESULTS.values())
    links = sum(r.get("url_loads", 0) for r in RESULTS.values())
    ARTIFACT.write_text(json.dumps({"seed": SEED, "rounds": ROUNDS, "budget_s": BUDGET_S, "moves_total": total,
                                    "junk_link_loads_total": links,
                                    "pages": RESULTS}, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")


@pytest.mark.parametrize("path", [p.path for p in PAGES], ids=[Path(p.path).stem for p in PAGES])
def test_every_control_at_its_limits(path, page_data):
    started = time.perf_counter()
    rng = random.Random(f"{SEED}:{path}")
    driver = Driver(path)
    driver.start()
    if not driver.controls() and driver.at.error:
        pytest.skip(f"{path} shows no controls, only: {driver.at.error[0].value[:200]}")
    phase_start = time.perf_counter()

    # 1. extremes, every control, in a random order (re-discovered: controls come and go)
    seen: set[str] = set()
    for _ in range(3):  # new controls may appear after the first pass (windows, tabs)
        pending = [key for key in driver.controls() if key not in seen and key not in EXPENSIVE_BUTTONS]
        if not pending:
            break
        rng.shuffle(pending)
        for key in pending:
            seen.add(key)
            controls = driver.controls()
            if key not in controls:
                continue
            control, element = controls[key]
            labels = element if control.kind == "Tabs" else None
            values = extremes(element if labels is None else None, labels)
            if rng.random() < 0.5:
                values.reverse()
            for value in values:
                driver.move(key, value, why="[extreme] ")
    driver.seconds["extremes"] = time.perf_counter() - phase_start

    # 2. scenarios the sliders cannot prevent
    phase_start = time.perf_counter()
    run_scenarios(driver)
    driver.seconds["scenarios"] = time.perf_counter() - phase_start

    # 3. junk in every text control
    phase_start = time.perf_counter()
    for key, (control, _) in sorted(driver.controls().items()):
        if control.kind in ("TextInput", "TextArea"):
            for junk in JUNK_TEXT:
                driver.move(key, junk, why="[junk] ")
    driver.seconds["junk"] = time.perf_counter() - phase_start

    # 4. a seeded random walk over every control, within a time budget
    phase_start = time.perf_counter()
    random_moves = random_walk(driver, rng, ROUNDS, BUDGET_S)
    driver.seconds["random"] = time.perf_counter() - phase_start

    # 5. the expensive button, once, at its cheapest; then a short walk with what it made
    phase_start = time.perf_counter()
    train_once(driver)
    if driver.train_outcome:
        random_moves += random_walk(driver, rng, 15, BUDGET_S / 2, why="[random after training] ")
    driver.seconds["train_once"] = time.perf_counter() - phase_start

    elapsed = time.perf_counter() - started
    RESULTS.setdefault(path, {}).update({
        "moves": driver.moves, "moves_applied_as_set": driver.applied, "random_moves": random_moves, "controls_seen": sorted(seen),
        "errors_shown": driver.errors_shown, "distinct_error_messages": sorted(driver.error_texts),
        "problems": driver.problems, "seconds": round(elapsed, 1),
        "phase_seconds": {k: round(v, 1) for k, v in driver.seconds.items()},
        "slowest_run_s": round(driver.slowest[0], 2), "slowest_move": driver.slowest[1],
        "train_once": driver.train_outcome,
    })
    _write_artifact()
    print(f"\n[controls] {path}: {driver.moves} control moves ({random_moves} random), {len(seen)} controls, "
          f"{driver.errors_shown} st.error shown, {len(driver.problems)} problems, {elapsed:.1f} s, "
          f"slowest run {driver.slowest[0]:.2f} s ({driver.slowest[1][:80]}); "
          f"total so far {sum(r.get('moves', 0) for r in RESULTS.values())} moves")
    assert not driver.problems, f"{path}: {len(driver.problems)} problems\n{driver.report()}"


# ---------------------------------------------------------------------------------------
# Junk in shared links: every URL-bound control of a page gets junk in the query string of a
# fresh session (what a mangled or hostile link sends). Streamlit must ignore what does not fit
# the widget, and the page must render as usual.

URL_JUNK = ["abc", "😀", "-99999999999999999999", "1e308", "nan", "2.5", "", "%00", "x" * 5000, "[1, 2]"]
#: Numbers no control can take: non-finite once parsed (Python's int() of them overflowed before) or too
#: large for a float. Every URL-bound control of every page gets each (every other spelling, e.g. "1e999",
#: "+inf", "-nan", is checked against links.url_value_problem, the one function that drops them).
URL_NON_FINITE = ["inf", "-Infinity", "NaN", "9" * 400]


def url_bound_keys(at: AppTest) -> list[str]:
    keys = []
    for key, (control, element) in discover(at).items():
        if control.kind == "Tabs":
            keys.append(key)
        elif getattr(element.proto, "query_param_key", ""):
            keys.append(element.proto.query_param_key)
    return sorted(set(keys))


@pytest.mark.parametrize("path", [p.path for p in PAGES], ids=[Path(p.path).stem for p in PAGES])
def test_junk_in_shared_links(path, page_data):
    started = time.perf_counter()
    rng = random.Random(f"{SEED}:url:{path}")
    probe = Driver(path)
    probe.start()
    keys = url_bound_keys(probe.at)
    if not keys and probe.at.error:
        pytest.skip(f"{path} shows no controls, only: {probe.at.error[0].value[:200]}")
    assert keys, f"{path}: no URL-bound control found"
    loads = [{key: junk for key in keys} for junk in URL_JUNK]
    loads += [{key: rng.choice(URL_JUNK) for key in keys} for _ in range(4)]
    problems = []
    for params in loads:
        driver = Driver(path)
        driver.at = AppTest.from_file(APP, default_timeout=RUN_TIMEOUT_S)
        driver.at.switch_page(path)  # a deep link: the page is the first thing the session runs
        for key, value in params.items():
            driver.at.query_params[key] = value
        driver.title = probe.title
        driver._run("open " + path + "?" + "&".join(f"{k}={_short(v)}" for k, v in params.items())[:300])
        problems += driver.problems
    elapsed = time.perf_counter() - started
    entry = RESULTS.setdefault(path, {"moves": 0})
    entry["url_loads"] = len(loads)
    entry["url_keys"] = keys
    entry["url_problems"] = problems
    entry["url_seconds"] = round(elapsed, 1)
    _write_artifact()
    print(f"\n[controls] {path}: {len(loads)} junk links over {len(keys)} URL-bound controls, "
          f"{len(problems)} problems, {elapsed:.1f} s")
    assert not problems, f"{path}: junk in a shared link broke the page:\n" + "\n".join(problems[:10])


@pytest.mark.parametrize("path", [p.path for p in PAGES], ids=[Path(p.path).stem for p in PAGES])
def test_non_finite_numbers_in_shared_links(path, page_data):
    """Every URL-bound control gets each non-finite or overflowing number (all controls in one link per
    value): the page renders as usual, every control shows its default, and a short notice names every
    dropped value."""
    probe = Driver(path)
    probe.start()
    keys = url_bound_keys(probe.at)
    assert keys, f"{path}: no URL-bound control found"
    defaults = {key: _shown(element) for key, (control, element) in discover(probe.at).items()
                if key in keys and control.kind != "Tabs"}
    problems = []
    for junk in URL_NON_FINITE:
        driver = Driver(path)
        driver.at = AppTest.from_file(APP, default_timeout=RUN_TIMEOUT_S)
        driver.at.switch_page(path)
        for key in keys:
            driver.at.query_params[key] = junk
        driver.title = probe.title
        what = f"open {path} with every control = {_short(junk)}"
        driver._run(what)
        problems += driver.problems
        notices = " ".join(w.value for w in driver.at.warning if "link" in w.value.lower())
        problems += [f"{what}: no notice names {key}" for key in keys if key not in notices]
        now = discover(driver.at)
        problems += [f"{what}: {key} shows {_shown(now[key][1])!r}, not its default {value!r}"
                     for key, value in defaults.items() if key in now and not _same(_shown(now[key][1]), value)]
    assert not problems, f"{path}: a non-finite number in a shared link broke the page:\n" + "\n".join(problems[:10])


def _as_url_value(value: Any) -> str | list[str]:
    """A control's value as Streamlit's frontend writes it into the address bar."""
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, (list, tuple)):  # an empty selection is written as "key="
        return "" if not value else str(value[0]) if len(value) == 1 else [str(v) for v in value]
    return str(value)


@pytest.mark.parametrize("path", [p.path for p in PAGES], ids=[Path(p.path).stem for p in PAGES])
def test_links_the_app_makes_are_taken_without_notice(path, page_data):
    """The other side of the notice: a link copied from the address bar after moving every URL-bound
    control away from its default opens the same view, with no "ignored in the link" notice."""
    driver = Driver(path)
    driver.start()
    keys = url_bound_keys(driver.at)
    for key in keys:
        controls = driver.controls()
        if key not in controls or controls[key][0].kind == "Tabs":
            continue
        control, element = controls[key]
        labels = _labels(element) if isinstance(element, SELECTS) else None
        candidates = [v for v in extremes(element, labels) if not _same(v, _shown(element))]
        if candidates:
            driver.move(key, candidates[0])  # the minimum where there is one: cheap to draw
    assert not driver.problems, driver.report()
    # the address bar as the browser writes it (AppTest does not: the frontend updates the URL)
    shown = {key: _shown(element) for key, (control, element) in driver.controls().items()
             if key in keys and control.kind != "Tabs"}
    link = {key: _as_url_value(value) for key, value in shown.items()}
    fresh = AppTest.from_file(APP, default_timeout=RUN_TIMEOUT_S)
    fresh.switch_page(path)
    for key, value in link.items():
        fresh.query_params[key] = value
    fresh.run()
    assert not fresh.exception
    notices = [w.value for w in fresh.warning if "ignored in the link" in w.value.lower()]
    assert not notices, f"{path}: a link the app made ({link}) drew {notices}"
    now = discover(fresh)
    differ = {key: (_shown(now[key][1]), value) for key, value in shown.items()
              if key in now and not _same(_shown(now[key][1]), value)}
    assert not differ, f"{path}: the link {link} did not restore {differ}"


def test_url_value_problem_names_every_non_finite_spelling():
    """The public check every link relviz builds goes through (tours): numbers no control can take."""
    from relviz.app.links import url_value_problem, usable_link_params

    for value in URL_NON_FINITE + ["1e999", "-1e999", "+inf", "-nan", " Infinity ", "1E400", ["3", "inf"]]:
        assert url_value_problem(value) == "not a finite number", value
    for value in ["0", "-3", "2.5", "1e308", "abc", "", "Shaw k = 4", "true", "9" * 300, ["inf", "3"]]:
        assert url_value_problem(value) is None, value
    assert usable_link_params({"sh_q": "inf", "sh_k": "64", "t5_tab": "Buckets"}) == (
        {"sh_k": "64", "t5_tab": "Buckets"}, {"sh_q": "not a finite number"})
