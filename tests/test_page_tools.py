"""AppTest of the two teaching tools: Check my implementation and Lecture mode (through app.py)."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
from plotly_data import decode
from streamlit.testing.v1 import AppTest

from page_support import run_page
from relviz.app import lecture_mode, tours
from relviz.app.links import as_text
from relviz.check import SIGN, Settings, variant_matrix
from relviz.positions import t5_bucket_map
from relviz.schemes import get_scheme

APP = str(Path(__file__).resolve().parents[1] / "app.py")


def csv(matrix: np.ndarray) -> str:
    return "\n".join(",".join(str(v) for v in row) for row in np.atleast_2d(matrix))


# ---------------------------------------------------------------------------------------
# Check my implementation


def test_check_page_asks_for_a_matrix_first():
    at = run_page("check")
    assert at.title[0].value == "Check my implementation"
    assert any("Upload a file or paste" in i.value for i in at.info)
    assert not at.get("plotly_chart")


def test_check_page_names_the_cause_and_draws_the_diff():
    faulty = variant_matrix("t5", SIGN, (12, 12), Settings())
    at = run_page("check", ck_kind="t5")
    at.text_area(key="ck_paste").set_value(csv(faulty)).run()
    assert not at.exception
    assert at.error and "132 of 144 compared cells differ" in at.error[0].value
    assert any(f"Likely cause: {SIGN}" in w.value for w in at.warning)
    (chart,) = at.get("plotly_chart")
    states = decode(json.loads(chart.proto.spec)["data"][0]["z"])
    np.testing.assert_array_equal(states == 1, faulty != t5_bucket_map(12, 12, device="cpu").numpy())
    table = at.dataframe[0].value
    assert list(table.columns) == ["i", "j", "j − i", "expected", "got"]
    assert table.iloc[0].tolist() == [0, 1, 1, 17, 1]


def test_check_page_matches_a_correct_upload_and_uses_the_sidebar_settings():
    at = run_page("check", ck_kind="t5", ck_nb="16", ck_md="64", ck_bi="false")
    at.text_area(key="ck_paste").set_value(
        csv(t5_bucket_map(9, 9, num_buckets=16, max_distance=64, bidirectional=False, device="cpu").numpy())).run()
    assert at.success and "Matches: all 81 compared cells" in at.success[0].value
    assert not at.warning


def test_check_page_examples_load_and_fit():
    at = run_page("check")
    at.selectbox(key="ck_example").set_value("T5 map, log in bfloat16").run()
    at.button(key="ck_load").click().run()
    assert not at.exception
    assert at.toggle(key="ck_fit").value is True
    assert any("Likely cause: log in bfloat16" in w.value for w in at.warning)


def test_check_page_refuses_malformed_input_with_a_message():
    at = run_page("check", ck_kind="t5")
    for junk, message in [("1,2,3\n4,5", "ragged"), ("1,2\nx,4", "not a number"), ("1,nan", "NaN"),
                          ("[[[1]]]\n" * 3, "differ|compared"), ("<script>alert(1)</script>", "not a number"),
                          ("1,2\n3,4", "")]:
        at.text_area(key="ck_paste").set_value(junk).run()
        assert not at.exception, junk
        if message:
            assert any(re_search(message, e.value) for e in at.error), (junk, [e.value for e in at.error])


def re_search(pattern: str, text: str) -> bool:
    import re
    return re.search(pattern, text) is not None


# ---------------------------------------------------------------------------------------
# Lecture mode


def test_tour_page_lists_the_builtin_tour():
    at = run_page("tour")
    assert at.title[0].value == "Lecture mode"
    assert tours.BUILTIN.title in [h.value for h in at.header]
    table = at.table[0].value  # a static table: it wraps long notes (a data grid scrolled them sideways)
    assert len(table) == len(tours.BUILTIN.steps)
    assert table["what"].tolist() == [step.title for step in tours.BUILTIN.steps]


def test_tour_link_opens_that_tour_and_a_damaged_one_is_refused():
    mine = tours.Tour("My seminar", (tours.Step("t5", {"t5_nb": "16"}, "Sixteen buckets", "say why"),))
    at = run_page("tour", tour=tours.encode(mine))
    assert "My seminar" in [h.value for h in at.header]
    assert at.table[0].value["what"].tolist() == ["Sixteen buckets"]
    for junk in ("abc$", "A" * 7000, tours.encode(mine)[:-6], "eJwLycgsVgCiRIWS1OISAA"):
        at = run_page("tour", tour=junk)
        assert any("This tour link was refused" in e.value for e in at.error), junk
        assert tours.BUILTIN.title in [h.value for h in at.header]


def _app() -> AppTest:
    at = AppTest.from_file(APP, default_timeout=60).run()
    assert not at.exception
    return at


def click_bar(at: AppTest, key: str) -> AppTest:
    """Click a presenter-bar button on the step's page. AppTest runs the page it was last told to
    (at.switch_page); the app's own st.switch_page changes what is drawn, not that, so point it at
    the page on screen first. Back and Next move the lecture, and the tab then opens the new step's link (a
    page load, in the browser): returned as a fresh AppTest on that link."""
    tour, index = at.session_state[lecture_mode.TOUR_STATE]
    at.switch_page(f"pages/{tour.steps[index].page}.py")
    at.button(key=key).click().run()
    assert not at.exception, at.exception
    lecture_id = at.session_state[lecture_mode.LECTURE_STATE] if lecture_mode.LECTURE_STATE in at.session_state \
        else None
    shared = lecture_mode.lectures().get(lecture_id)
    if shared is None or shared.index == index:
        return at
    return open_link(lecture_mode.step_link(lecture_id, shared.tour, shared.index))


def open_link(link: str) -> AppTest:
    """A fresh tab on one of the app's relative links ("shaw?sh_clip=3&lecture=..."), as the browser opens it."""
    from urllib.parse import parse_qsl, urlsplit

    parts = urlsplit(link)
    page = parts.path.strip("./") or "home"
    fresh = AppTest.from_file(APP, default_timeout=60)
    fresh.query_params.update(dict(parse_qsl(parts.query)))
    fresh.switch_page(f"pages/{page}.py").run()
    assert not fresh.exception, fresh.exception
    return fresh


def test_presenting_walks_the_steps_with_the_exact_views():
    at = _app()
    at.switch_page("pages/tour.py").run()
    at.button(key="tour_start").click().run()
    assert not at.exception, at.exception
    assert at.session_state[lecture_mode.TOUR_STATE][1] == 0
    assert at.slider(key="home_q").value == 2       # step 1: the landing page
    assert any(m.value.startswith(f"**1 / {len(tours.BUILTIN.steps)} · Relative position is j − i**") for m in at.markdown)
    assert not at.title and not at.info            # the bar stands in for the page's title and sign note
    at = click_bar(at, "tour_next")                      # step 2: Shaw, k = 3
    # the title as markdown that shows it as written (relviz.app.links.as_text)
    assert at.slider(key="sh_clip").value == 3 and any(f"2 / 15 · {as_text('Shaw et al.')}" in m.value
                                                       for m in at.markdown)
    at = click_bar(at, "tour_next")                      # step 3: Shaw, k = 0
    assert at.slider(key="sh_clip").value == 0
    note = tours.BUILTIN.steps[2].note               # the note is the presenter view's, not the audience's
    assert not any(text in e.value for text in (note[:40], as_text(note)[:40])
                   for e in [*at.markdown, *at.info, *at.sidebar.markdown, *at.caption])
    at = click_bar(at, "tour_next")                      # step 4: T5 at 128 × 128
    assert at.number_input(key="t5_q").value == 128 and at.toggle(key="t5_bi").value is True
    at = click_bar(at, "tour_next")                      # step 5: unidirectional
    assert at.toggle(key="t5_bi").value is False
    at = click_bar(at, "tour_prev")                      # back: bidirectional again, nothing left over
    assert at.toggle(key="t5_bi").value is True and at.number_input(key="t5_q").value == 128
    at = click_bar(at, "tour_end")
    assert lecture_mode.TOUR_STATE not in at.session_state and at.title[0].value == "Lecture mode"


def test_a_teacher_collects_views_and_shares_them():
    at = AppTest.from_file(APP, default_timeout=60)
    at.query_params["t5_nb"] = "16"  # AppTest does not write moved controls to the URL; a browser test does
    at.switch_page("pages/t5.py").run()
    assert at.slider(key="t5_nb").value == 16
    assert at.button(key="tour_collect").label == "Add this view to my tour (0)"
    at.button(key="tour_collect").click().run()
    assert at.button(key="tour_collect").label == "Add this view to my tour (1)"  # the count follows at once
    at.query_params.clear()
    at.switch_page("pages/skew.py").run()
    at.button(key="tour_collect").click().run()
    draft = at.session_state[lecture_mode.DRAFT_STATE]
    assert [(s.page, s.params.get("t5_nb")) for s in draft] == [("t5", "16"), ("skew", None)]
    at.switch_page("pages/tour.py").run()
    at.text_input(key="tour_title").set_value("Buckets, then the skew").run()
    at.text_area(key="tour_sn0").set_value("Sixteen buckets: eight per direction.").run()
    at.button(key="tour_down0").click().run()  # reorder: the skew first
    assert [s.page for s in at.session_state[lecture_mode.DRAFT_STATE]] == ["skew", "t5"]
    assert not at.code  # the link is in a text box: no code block (it loads a 1.5 MB highlighter)
    shared = tours.decode(at.text_input(key="tour_link").value.split(f"{tours.TOUR_PARAM}=")[1])
    assert shared.title == "Buckets, then the skew"
    assert [s.page for s in shared.steps] == ["skew", "t5"]
    assert shared.steps[1].params == {"t5_nb": "16"} and shared.steps[1].note.startswith("Sixteen")
    at.button(key="tour_del0").click().run()
    assert [s.page for s in at.session_state[lecture_mode.DRAFT_STATE]] == ["t5"]
    # the box follows the tour (a keyed box would keep the old link)
    assert [s.page for s in tours.decode(at.text_input(key="tour_link").value.split("=", 1)[1]).steps] == ["t5"]
    # the tool pages say where the button is not and why
    at.switch_page("pages/check.py").run()
    assert not at.sidebar.button or all(b.key != "tour_collect" for b in at.sidebar.button)
    assert any(c.value == lecture_mode.NO_TOUR_STEP for c in at.sidebar.caption)


def test_a_schemes_own_parameter_is_collected_and_presented():
    """The attention page's at_t_<param> keys come from the scheme registry, not from relviz.app.tours: a
    collected view keeps them, presenting it sets the slider even after the teacher moved it, and a
    step without the key puts the slider back at its default."""
    at = AppTest.from_file(APP, default_timeout=60)
    at.query_params.update({"at_tsch": "shaw", "at_t_clip": "5"})
    at.switch_page("pages/attention.py").run()
    assert at.slider(key="at_t_clip").value == 5
    at.button(key="tour_collect").click().run()
    (step,) = at.session_state[lecture_mode.DRAFT_STATE]
    assert step.params["at_tsch"] == "shaw" and step.params["at_t_clip"] == "5"
    at.slider(key="at_t_clip").set_value(7).run()
    at.query_params.clear()
    at.query_params["tour"] = tours.encode(tours.Tour("mine", (step, tours.Step("attention", {"at_tsch": "shaw"}))))
    at.switch_page("pages/tour.py").run()
    at.button(key="tour_start").click().run()
    at.switch_page("pages/attention.py").run()
    assert not at.exception, at.exception
    assert at.slider(key="at_t_clip").value == 5
    at = click_bar(at, "tour_next")
    assert at.slider(key="at_t_clip").value == get_scheme("shaw").params[0].default


def test_the_presenter_view_follows_the_lecture():
    """The presenter view (a second session: ?lecture=ID on the Lecture mode page) shows the audience tab's
    step with its note, and the next step once the audience's tab moves on."""
    at = _app()
    at.switch_page("pages/tour.py").run()
    at.button(key="tour_start").click().run()
    lecture_id = at.session_state[lecture_mode.LECTURE_STATE]
    at = click_bar(at, "tour_next")                      # the audience on step 2
    presenter = AppTest.from_file(APP, default_timeout=60)
    presenter.query_params[lecture_mode.LECTURE_PARAM] = lecture_id
    presenter.switch_page("pages/tour.py").run()
    assert not presenter.exception, presenter.exception
    assert any(m.value.startswith(f"### 2 / 15 · {as_text('Shaw et al.')}") for m in presenter.markdown)
    assert as_text(tours.BUILTIN.steps[1].note) in [i.value for i in presenter.info]
    at = click_bar(at, "tour_next")                      # the audience on step 3
    presenter.run()                                 # the view looks again (every second in a browser)
    assert any(m.value.startswith(f"### 3 / 15 · {as_text('k = 0:')}") for m in presenter.markdown)
    assert as_text(tours.BUILTIN.steps[2].note) in [i.value for i in presenter.info]
    at = click_bar(at, "tour_end")
    presenter.run()
    assert any("This lecture has ended" in w.value for w in presenter.warning)


def test_check_page_links_use_kind_names_and_a_refused_value_says_the_range():
    at = run_page("check", ck_kind="rope_cos")
    assert not at.exception and at.selectbox(key="ck_kind").value == "rope_cos"
    at = run_page("check", ck_kind="t5", ck_nb="500")
    assert not at.exception and at.slider(key="ck_nb").value == 32
    notice = " ".join(str(w.value) for w in at.warning)
    assert "ck_nb must be from 2 to 128" in notice, notice
    from relviz.app.link_schema import LINK_ONLY_PARAMS  # the ranges the notice cites are the controls' own

    for key in ("ck_nb", "ck_md", "ck_k"):
        slider = at.slider(key=key) if key != "ck_k" else run_page("check", ck_kind="shaw").slider(key=key)
        assert (LINK_ONLY_PARAMS["check"][key].lo, LINK_ONLY_PARAMS["check"][key].hi) == \
            (slider.proto.min, slider.proto.max), key
