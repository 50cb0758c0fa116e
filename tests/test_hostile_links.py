"""Hostile links open every page with its defaults, a notice naming each refused key, and no traceback; the notice
shows the link's text as text. A seeded subset of tests/hostile_links.py's sweep (the whole sweep: run that file)."""
from __future__ import annotations

import json

import pytest

from hostile_links import (HOSTILE, _markup_rendered, bound_values, notices, open_page, pages, problems, sweep,
                           texts)
from relviz.app import lecture_mode, tours
from relviz.app.link_schema import APP_KEYS
from relviz.app.links import code_span, without_value


@pytest.mark.parametrize("text", ["abc", "", "`[x](https://e.example)`", "a``b`", "a\n\nb [x](https://e.example)",
                                  ":red[x] $x^2$"])
def test_a_code_span_holds_the_text_whole(text):
    span = code_span(text)
    assert not _markup_rendered(span), span
    fence = span[: len(span) - len(span.lstrip("`"))]
    inner = span[len(fence):-len(fence)]
    assert "\n" not in span and inner.strip() == " ".join(text.split())
    assert fence not in inner                      # the span ends where it should, not inside the text


def test_a_reason_drops_the_links_value():
    assert without_value("home_q must be an integer from 0 to 6; got '[x](https://e)'") == \
        "home_q must be an integer from 0 to 6"


@pytest.mark.parametrize("value", ["[log in](https://evil.example)", "`[x](https://evil.example)`",
                                   ":red[x] :material/home:", "$x^2$"])
def test_the_notice_renders_no_markup_from_the_link(value):
    """A link's value drew a live link (or a colour, a formula) inside the app's own notice."""
    at = open_page("home", {"home_q": value, "chart_export": value})
    said = [n for n in notices(at) if "Ignored in the link" in n]
    assert len(said) == 1 and "home_q" in said[0] and "chart_export" in said[0], notices(at)
    assert not _markup_rendered(said[0]), said[0]
    assert "from 0 to 6" in said[0] and "one of PNG, SVG" in said[0]


@pytest.mark.parametrize("page, key, default", [("home", "chart_export", "PNG"), ("attention", "at_th", 4)])
def test_an_empty_choice_keeps_the_default(page, key, default):
    """?chart_export= left the sidebar's format (and Live attention's heads) with nothing chosen."""
    at = open_page(page, {key: ""})
    assert bound_values(at)[key] == default
    assert any(f"{key}=" in n and "must be one of" in n for n in notices(at)), notices(at)


def test_an_overlong_text_keeps_the_default():
    """A 20,000-character sequence filled the box with 4,096 of them under a notice that said 'defaults'."""
    defaults = bound_values(open_page("attention", {}))
    at = open_page("attention", {"at_seq": "7" * 20_000})
    assert bound_values(at)["at_seq"] == defaults["at_seq"]
    assert any("at_seq" in n and "short string" in n for n in notices(at)), notices(at)


@pytest.mark.parametrize("step", ["²", "٣", "１", "0", "99999", "-1", "abc", ""])
def test_a_lecture_steps_number_from_a_link_never_raises(step):
    """?lecture_step=² passed str.isdigit() and int() raised: a traceback on the audience's page."""
    lecture = lecture_mode.lectures().start(tours.BUILTIN, 2)
    at = open_page("home", {"lecture": lecture, "lecture_step": step})
    assert not at.exception
    assert at.session_state[lecture_mode.TOUR_STATE][1] == 2   # not a step number: the lecture's own step
    lecture_mode.lectures().end(lecture)


def test_the_hostile_values_cover_each_kind():
    """The sweep's values hold each kind the issue names (so a trimmed list cannot pass for the sweep)."""
    kinds = {"word": "abc", "empty": "", "nan": "NaN", "inf": "inf", "negative": "-1", "huge": "9" * 30,
             "unicode digit": "٣", "path": "../../etc/passwd", "script": "<script>alert(1)</script>",
             "markdown link": "[click](https://evil.example)", "long": "x" * 20_000}
    assert set(kinds.values()) <= set(HOSTILE)


def test_a_seeded_sample_of_hostile_links_on_every_page():
    """Every page: a seeded hostile value on each of its keys at once, repeated keys, and other pages' keys."""
    found = sweep(pages(), every=False, seed=20261128, log=lambda line: None)
    assert not found, "\n".join(found[:20])


def test_the_check_sees_a_value_taken():
    """problems() finds a control that took a refused value (the sweep's check can fail)."""
    at = open_page("home", {"home_q": "3"})
    defaults = {"home_q": 2}
    found = problems("home", {"home_q": "abc"}, at, defaults)
    assert any("not its default" in f for f in found) and any("no notice names home_q" in f for f in found), found


def test_a_key_of_another_page_or_of_none_is_named():
    """A link's key that this page does not bind was dropped without a word (?t5_nb=8 on the Shaw page)."""
    at = open_page("shaw", {"t5_nb": "8", "no_such_key": "1", "sh_clip": "3"})
    said = [n for n in notices(at) if "Ignored in the link" in n]
    assert len(said) == 1, notices(at)
    assert "`t5_nb=8` (a control of the T5 buckets page, not of this one)" in said[0]
    assert "`no_such_key=1` (no relviz page has this control)" in said[0]
    assert "sh_clip" not in said[0] and bound_values(at)["sh_clip"] == 3


def test_the_keys_no_control_binds_are_the_modules_own():
    """Lecture mode's keys and Streamlit's embedding options are never called foreign (APP_KEYS)."""
    assert {lecture_mode.LECTURE_PARAM, lecture_mode.STEP_PARAM, lecture_mode.COPY_PARAM, tours.TOUR_PARAM} | \
        {"embed", "embed_options"} == APP_KEYS
    at = open_page("home", {"embed": "true", "lecture": "lec-gone", "lecture_step": "2"})
    assert not [n for n in notices(at) if "Ignored in the link" in n], notices(at)


EVIL = "[log in](https://evil.example) :red[x] $x$"


def test_a_tour_links_titles_and_notes_show_as_written():
    """A shared tour titled [log in](https://…) drew a live link on Lecture mode and in the presenter bar."""
    from relviz.app.links import as_text

    assert not _markup_rendered(as_text(EVIL)) and as_text("k = 0: (2 min)") == "k = 0\\: \\(2 min\\)"
    evil = tours.Tour(EVIL, (tours.Step("home", {"home_q": "2"}, EVIL, EVIL, "home_fig"),
                             tours.Step("shaw", {}, "second", "", "")))
    at = open_page("tour", {tours.TOUR_PARAM: tours.encode(evil)})
    shown = [*texts(at), *(h.value for h in at.header)]
    assert any("Tour from the link" in t for t in shown), shown
    assert not [t for t in shown if _markup_rendered(t)], [t for t in shown if _markup_rendered(t)]
    at.button(key="tour_start").click().run()                 # the presenter bar shows the step's title
    assert not at.exception
    bar = [t for t in texts(at) if "1 / 2" in t]
    assert bar and not _markup_rendered(bar[0]) and "log in" in bar[0], texts(at)


def test_a_refused_tour_links_reason_shows_as_written():
    from test_tours import raw_code

    code = raw_code(json.dumps({"relviz_tour": 1, "title": "t", "steps": [{"page": EVIL}]}).encode())
    at = open_page("tour", {tours.TOUR_PARAM: code})
    refused = [e.value for e in at.error if "refused" in e.value]
    assert refused and "page must be one of" in refused[0] and not _markup_rendered(refused[0]), refused
