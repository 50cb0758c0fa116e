"""Lecture mode on a projector (issue 33): each step's subject chart, the audience's layout, the presenter view
driving the lecture. The browser walk at 1280 × 720 is tests/test_browser_lecture.py."""
from __future__ import annotations

import re
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from relviz.app import lecture_mode, link_schema, tours
from relviz.app.links import as_text
from relviz.app.display import plotly_config
from test_page_tools import open_link

APP = str(Path(__file__).resolve().parents[1] / "app.py")


def test_every_built_in_step_names_its_subject_chart_by_the_pages_key_prefix():
    for tour in tours.BUILTINS.values():
        for step in tour.steps:
            assert step.subject, step.title
            # a page's keys share its prefix (sh_, t5_, ym_, ...): the subject is one of that page's elements
            prefixes = {key.split("_")[0] for key in link_schema.PAGE_PARAMS[step.page]} - {"chart"}
            assert step.subject.split("_")[0] in prefixes, (step.title, step.subject, prefixes)


def test_a_subject_travels_with_the_tour_and_a_bad_one_is_refused():
    tour = tours.Tour("t", (tours.Step("shaw", {"sh_clip": "2"}, "a", "b", "sh_fig_clipped"), tours.Step("home")))
    again = tours.decode(tours.encode(tour))
    assert [s.subject for s in again.steps] == ["sh_fig_clipped", ""]
    assert "subject" not in tours.tour_to_json(again)["steps"][1]          # older readers see no new field
    for bad in ["Sh", "a b", "x" * 49, "x}{display:block", 3]:
        with pytest.raises(ValueError, match="subject"):
            tours.check_step(tours.Step("shaw", {}, "a", "", bad))


def test_the_lecture_layout_drops_what_precedes_the_subject_but_not_the_bar_or_its_row():
    css = lecture_mode.lecture_css("sh_fig_relative")
    assert 'header[data-testid="stHeader"]{display:none}' in css
    rule = re.search(r"(\S.*)\{display:none !important\}", css).group(1)
    assert ":has(~ .st-key-sh_fig_relative)" in rule and ":has(~ * .st-key-sh_fig_relative)" in rule
    assert ".st-key-tour_bar" in rule and '[data-testid="stColumn"]' in rule
    assert "!important" not in lecture_mode.lecture_css("")                 # a collected view: only the band


def test_plotly_shows_only_the_camera_button_and_none_during_a_lecture(monkeypatch):
    config = plotly_config("SVG")
    assert config["modeBarButtons"] == [["toImage"]] and config["toImageButtonOptions"]["format"] == "svg"
    assert "displayModeBar" not in config
    monkeypatch.setattr("relviz.app.display.presenting", lambda: True)
    assert plotly_config()["displayModeBar"] is False


def _audience() -> tuple[AppTest, str]:
    at = AppTest.from_file(APP, default_timeout=60).run()
    at.switch_page("pages/tour.py").run()
    at.button(key="tour_start").click().run()
    assert not at.exception, at.exception
    return at, at.session_state[lecture_mode.LECTURE_STATE]


def test_the_presenter_views_buttons_move_the_lecture_and_the_audience_follows():
    at, lecture_id = _audience()
    presenter = AppTest.from_file(APP, default_timeout=60)
    presenter.query_params[lecture_mode.LECTURE_PARAM] = lecture_id
    presenter.switch_page("pages/tour.py").run()
    assert not presenter.exception, presenter.exception
    assert presenter.button(key="pv_prev0").disabled                        # step 1: nothing before it
    presenter.button(key="pv_next0").click().run()
    assert lecture_mode.lectures().get(lecture_id).index == 1
    assert any(m.value.startswith(f"### 2 / {len(tours.BUILTIN.steps)}") for m in presenter.markdown)
    at.run()                                                                # the audience's tab looks again
    opener = [c for c in at.get("bidi_component") if "lecture_open" in c.proto.id]
    link = lecture_mode.step_link(lecture_id, tours.BUILTIN, 1)
    assert f"{lecture_mode.STEP_PARAM}=2" in link
    assert len(opener) == 1 and link.replace("&", "\\u0026") in str(opener[0].proto) or link in str(opener[0].proto)
    audience = open_link(link)                                              # ... and opens the step's link
    assert audience.session_state[lecture_mode.TOUR_STATE][1] == 1          # presenting step 2, exactly
    assert audience.slider(key="sh_clip").value == 3 and not audience.title
    presenter.button(key="pv_step3").click().run()                          # the step list: step 4
    assert lecture_mode.lectures().get(lecture_id).index == 3
    presenter.button(key="pv_prev3").click().run()
    assert lecture_mode.lectures().get(lecture_id).index == 2
    # the title as markdown that shows it as written (relviz.app.links.as_text: a tour's titles come from a link)
    assert [b.label for b in presenter.button if b.key == "pv_step2"] == [f"3. {as_text(tours.BUILTIN.steps[2].title)}"]


def test_next_pressed_while_the_audience_loads_moves_one_step_and_the_audience_catches_up():
    """The race of issue 33: the presenter pressed Next while the audience's tab was still opening the step
    before. The link names its step, so the tab shows that step's number over that step's picture, then opens the
    lecture's newer step; a press made on a step the lecture has left moves nothing (two steps before)."""
    at, lecture_id = _audience()
    presenter = AppTest.from_file(APP, default_timeout=60)
    presenter.query_params[lecture_mode.LECTURE_PARAM] = lecture_id
    presenter.switch_page("pages/tour.py").run()
    presenter.button(key="pv_next0").click().run()                         # to step 2 ...
    loading = lecture_mode.step_link(lecture_id, tours.BUILTIN, 1)          # ... the audience opens step 2's link
    presenter.button(key="pv_next1").click().run()                         # ... and Next again: step 3
    assert lecture_mode.lectures().get(lecture_id).index == 2
    assert [b.key for b in presenter.button if b.key.startswith("pv_next")] == ["pv_next2"]
    audience = open_link(loading)
    assert audience.session_state[lecture_mode.TOUR_STATE][1] == 1          # step 2's number over step 2's picture
    assert any(f"2 / {len(tours.BUILTIN.steps)} ·" in m.value for m in audience.markdown)
    opener = [c for c in audience.get("bidi_component") if "lecture_open" in c.proto.id]
    step_3 = lecture_mode.step_link(lecture_id, tours.BUILTIN, 2)
    assert len(opener) == 1 and (step_3 in str(opener[0].proto) or step_3.replace("&", "\\u0026") in
                                 str(opener[0].proto))                      # ... then opens step 3
    presenter.button(key="pv_next2").click().run()                         # step 4
    lecture_mode._move(lecture_id, 2, 1)                                    # Next pressed on step 2, handled again
    assert lecture_mode.lectures().get(lecture_id).index == 3               # no step back to 3
    audience.switch_page(f"pages/{tours.BUILTIN.steps[1].page}.py")
    audience.button(key="tour_next").click().run()                          # the audience's own Next, on step 2
    assert lecture_mode.lectures().get(lecture_id).index == 3


def test_the_presenter_view_shows_a_small_copy_of_the_audiences_step():
    _, lecture_id = _audience()
    presenter = AppTest.from_file(APP, default_timeout=60)
    presenter.query_params[lecture_mode.LECTURE_PARAM] = lecture_id
    presenter.switch_page("pages/tour.py").run()
    html = lecture_mode._mirror_html(lecture_id, tours.BUILTIN, 0)
    assert (f'src="./?home_q=2&amp;lecture={lecture_id}&amp;lecture_step=1&amp;lecture_copy=1&amp;embed=true"'
            in html)
    assert "scale(0.3)" in html and "width:1280px;height:720px" in html
    # a page opened with ?lecture=ID copies the lecture's step: laid out as on the projector, no title
    copy = AppTest.from_file(APP, default_timeout=60)
    copy.query_params.update({"home_q": "2", lecture_mode.LECTURE_PARAM: lecture_id, lecture_mode.COPY_PARAM: "1"})
    copy.run()
    assert not copy.exception and not copy.title
    assert lecture_mode.TOUR_STATE not in copy.session_state                 # a copy: no bar, it moves nothing
    assert any("st-key-home_fig" in h.proto.body for h in copy.get("html"))


SUBJECT_VIEWS = [(page, {}, default) for page, (default, _) in link_schema.PAGE_SUBJECTS.items()] + [
    (page, {key: value}, subject) for page, (_, by_value) in link_schema.PAGE_SUBJECTS.items()
    for (key, value), subject in by_value.items()]


def test_every_page_a_teacher_can_collect_names_a_subject():
    assert set(link_schema.PAGE_SUBJECTS) == set(link_schema.PAGE_PARAMS)


@pytest.mark.parametrize("page, params, subject", SUBJECT_VIEWS, ids=[s for _, _, s in SUBJECT_VIEWS])
def test_a_collected_views_subject_is_a_chart_that_view_draws(page, params, subject):
    from page_support import run_page

    at = run_page(page, timeout=120, **params)
    drawn = [e.proto.id for e in [*at.get("plotly_chart"), *at.get("bidi_component")]]
    assert any(i.endswith(f"-{subject}") for i in drawn), (page, params, subject, [i[-30:] for i in drawn])
    assert link_schema.view_subject(page, params) == subject


def test_a_collected_tour_is_laid_out_for_the_projector_like_a_built_in_one():
    """Issue 33: a teacher's own steps named no subject, so only the header band went in a lecture."""
    at = AppTest.from_file(APP, default_timeout=60)
    at.query_params["t5_tab"] = "Compare with Shaw"
    at.switch_page("pages/t5.py").run()
    at.button(key="tour_collect").click().run()
    at.query_params.clear()
    at.switch_page("pages/skew.py").run()
    at.button(key="tour_collect").click().run()
    assert [s.subject for s in at.session_state[lecture_mode.DRAFT_STATE]] == ["t5_fig_cmp_shaw", "skew_fig_qer"]
    at.switch_page("pages/tour.py").run()
    at.text_input(key="tour_st0").set_value("Compare").run()                # editing a step keeps its subject
    assert at.session_state[lecture_mode.DRAFT_STATE][0].subject == "t5_fig_cmp_shaw"
    mine = tours.decode(at.text_input(key="tour_link").value.split(f"{tours.TOUR_PARAM}=")[1])
    assert [s.subject for s in mine.steps] == ["t5_fig_cmp_shaw", "skew_fig_qer"]   # and its shared link
    at.button(key="tour_mine").click().run()
    assert not at.exception, at.exception
    at.switch_page("pages/t5.py").run()
    assert any(lecture_mode.lecture_css("t5_fig_cmp_shaw") == h.proto.body for h in at.get("html"))


def test_the_bar_keeps_its_buttons_whole_in_a_window_narrower_than_a_projector():
    """Seen at 1024 × 768 (item 4 of issue 33's follow-up): the bar's buttons read "◀…", "N", "E" and Next lost its
    label. Below 1280 px the shortcut hints go and each button's column fits its label (screenshot
    bar-1024x768.png in the closing note); at 1280 × 720 the bar is as the walk checks it."""
    at, _ = _audience()
    assert lecture_mode.BAR_CSS in [h.proto.body for h in at.get("html")]
    narrow = lecture_mode.BAR_CSS.split("@media (max-width: 1279px) {", 1)
    assert len(narrow) == 2 and narrow[0] == "<style>"                      # nothing changes at 1280 px and up
    assert "kbd {display: none}" in narrow[1] and "min-width: max-content" in narrow[1]
