"""The full-resolution window's controls live in a fragment with what they move (issue 34): on a real server, a move
of a window slider reruns that fragment alone (the page's other elements are not sent again), and the charts it
sends equal what a fresh visit of the link with the same values draws. Websocket sessions that send what a tab
sends (relviz.bench.class_clients), no browser; no timing is asserted (``python -m relviz bench --only slider``)."""
from __future__ import annotations

import asyncio
import json
import urllib.parse

import pytest

from browser_support import app_server
from plotly_data import canvas_data
from relviz.app.link_schema import view_subject
from relviz.bench.class_clients import Session, streamlit_protos
from relviz import t5_notes as t5_text
from relviz.figures import shaw as shaw_text
from relviz.memory import PAPER_FIGURES
from relviz.rope import load_presets


@pytest.fixture(scope="module")
def base():
    with app_server() as url:
        yield url


def _canonical(specs: list[str]) -> set[str]:
    return {json.dumps(json.loads(spec), sort_keys=True) for spec in specs}


def _first_line(text: str) -> str:
    return text.strip().splitlines()[0]


async def _open_and_move(base: str, page: str, query: str, key: str, value: int) -> tuple[dict, dict, str]:
    """Open ``page?query``, move the slider bound to ``key`` to ``value`` as a tab does (with the fragment it was
    drawn in); (the first run, the move's run, the fragment id)."""
    WidgetState = streamlit_protos()[2]
    session = Session(base, page, query)
    await session.connect()
    try:
        opened = await session.run()
        slider, fragment = session.sliders[key], session.fragments.get(key, "")
        state = WidgetState(id=slider.id)
        state.double_array_value.data.append(value)
        moved = await session.run(state, fragment)
        return opened, moved, fragment
    finally:
        await session.close()


def _check_fragment_move(base: str, page: str, link: dict, key: str, value: int, outside: list[str],
                         share: float = 0.5) -> dict:
    """The move reruns the slider's fragment alone (fewer than ``share`` of a whole run's elements) and draws what a
    fresh link at the new value draws; returns the runs (opened, moved, fresh)."""
    opened, moved, fragment = asyncio.run(_open_and_move(base, page, urllib.parse.urlencode(link), key, value))
    fresh = asyncio.run(Session.visit(base, page, urllib.parse.urlencode(link | {key: value})))
    assert opened["errors"] == moved["errors"] == fresh["errors"] == []
    assert fragment, f"{key} is not drawn inside a fragment"
    assert moved["finished"] == "FINISHED_FRAGMENT_RUN_SUCCESSFULLY"
    # the page's text outside the fragment is not sent again; a whole run sends it
    for text in outside:
        assert any(text in body for body in opened["texts"]), text
        assert not any(text in body for body in moved["texts"]), text
    assert moved["elements"] < opened["elements"] * share
    # what the move drew equals what a fresh visit at the new value draws, and the window did move
    assert moved["charts"] and _canonical(moved["charts"]) <= _canonical(fresh["charts"])
    assert not _canonical(moved["charts"]) <= _canonical(opened["charts"])
    return {"opened": opened, "moved": moved, "fresh": fresh}


T5_LINK = {"t5_q": 1024, "t5_k": 1024, "t5_ws": 256, "t5_r0": 100, "t5_c0": 120}


def test_a_t5_window_move_reruns_only_the_map_fragment(base):
    _check_fragment_move(base, "t5", T5_LINK, "t5_r0", 300,
                         outside=[_first_line(t5_text.WHAT_T5_LEARNS), "Three confusions, in pictures"])


def test_a_t5_window_move_on_the_compare_tab_reruns_only_that_tab(base):
    _check_fragment_move(base, "t5", T5_LINK | {"t5_tab": "Compare with Shaw"}, "t5_c0", 700,
                         outside=[t5_text.published_caption(load_presets()["t5"])])   # the sidebar's caption


def test_a_t5_window_size_move_redraws_the_overview_and_map_as_a_fresh_link_does(base):
    _check_fragment_move(base, "t5", T5_LINK, "t5_ws", 128, outside=[_first_line(t5_text.WHAT_T5_LEARNS)])


SHAW_LINK = {"sh_q": 1024, "sh_k": 1500, "sh_off": 30, "sh_ws": 256, "sh_r0": 100, "sh_c0": 120, "sh_clip": 64}


def test_a_shaw_window_move_reruns_only_the_matrices_fragment(base):
    _check_fragment_move(base, "shaw", SHAW_LINK, "sh_r0", 500,
                         outside=[_first_line(shaw_text.WHAT_SHAW_LEARNS), shaw_text.table_caption(64)])


def test_a_shaw_column_move_redraws_as_a_fresh_link_does(base):
    _check_fragment_move(base, "shaw", SHAW_LINK, "sh_c0", 1200, outside=[shaw_text.table_caption(64)])


ABSOLUTE_LINK = {"abs_L": 96, "abs_d": 64, "abs_shift": 10}


def test_an_absolute_shift_move_redraws_the_same_canvas_as_a_fresh_link_draws(base):
    """The shift is drawn by the xy canvas (relviz.figures.xy_canvas): a move reruns the shift's fragment alone,
    sends the same canvas element (its id unchanged: the browser redraws it in place, where a changed plotly
    figure is a new chart, mounted and drawn anew) with what a fresh link at that shift draws."""
    from relviz import absolute as absolute_text

    runs = _check_fragment_move(base, "absolute", ABSOLUTE_LINK, "abs_shift", 300,
                                outside=[absolute_text.ABSOLUTE_VS_RELATIVE[:60]])
    opened, moved, fresh = runs["opened"], runs["moved"], runs["fresh"]
    canvas = [i for i in opened["chart_ids"] if i.endswith("-abs_fig_shift")]
    assert len(canvas) == 1 and moved["chart_ids"] == canvas                  # the one chart the move sends
    assert canvas_data(moved["charts"][0])["kind"] == "xy"
    assert moved["charts"][0] == fresh["charts"][fresh["chart_ids"].index(canvas[0])]


@pytest.mark.parametrize("tab", ["Causal skew (decoder)", "Bidirectional skew (encoder)"])
def test_a_skew_length_move_reruns_the_steps_fragment_and_draws_what_a_fresh_link_draws(base, tab):
    """Skew at its longest L, one shorter (the slider bench's arrow key): every step the tab shows is redrawn as a
    fresh link at that L draws it; the memory panel below the steps (its own controls) is not sent again."""
    runs = _check_fragment_move(base, "skew", {"skew_L": 16, "skew_tab": tab}, "skew_L", 15,
                                outside=[_first_line(PAPER_FIGURES)], share=0.7)
    # the causal tab's steps and check are two elements (a row of three each); the encoder tab's three, beside its
    # plotly chart
    assert len(runs["moved"]["charts"]) == len(runs["fresh"]["charts"]) == (2 if tab.startswith("Causal") else 4)
    assert _canonical(runs["moved"]["charts"]) == _canonical(runs["fresh"]["charts"])
    assert set(runs["moved"]["texts"]) <= set(runs["fresh"]["texts"])
    # the steps' words follow L too ("distance m − 14"): they are drawn with the steps, as a fresh link at 15 does

    def captions(run: dict) -> str:
        return " ".join(panel.get("caption", "") for chart in run["charts"] if chart.startswith("{")
                        for panel in canvas_data(chart).get("panels", []))

    assert "distance m − 14" in captions(runs["moved"]) and "distance m − 14" not in captions(runs["opened"])


def test_an_experiments_threshold_move_redraws_the_same_canvas_as_a_fresh_link_draws(base):
    """The overview is drawn by the grid canvas (relviz.figures.grid_canvas): a threshold move reruns its fragment
    alone and sends the same canvas element (its id unchanged: redrawn in place) with what a fresh link draws."""
    from relviz import experiments as ex

    runs = _check_fragment_move(base, "experiments", {"ex_thr": 0.5}, "ex_thr", 0.55,
                                outside=[ex.OFFSET_CHART[:60], ex.EXTRAPOLATION_CHART[:60]])
    opened, moved, fresh = runs["opened"], runs["moved"], runs["fresh"]
    canvas = [i for i in opened["chart_ids"] if i.endswith("-ex_fig_overview")]
    assert len(canvas) == 1 and moved["chart_ids"] == canvas                  # the one chart the move sends
    assert json.loads(json.loads(moved["charts"][0])["json"])["kind"] == "grid_panels"
    assert moved["charts"][0] == fresh["charts"][fresh["chart_ids"].index(canvas[0])]


async def _element_paths(base: str, page: str, query: str) -> dict[str, tuple[int, ...]]:
    """A first run's keyed elements: the key -> where the element sits on the page (its delta path: in page order)."""
    BackMsg, ForwardMsg, _ = streamlit_protos()
    session = Session(base, page, query)
    await session.connect()
    try:
        request = BackMsg()
        request.rerun_script.query_string, request.rerun_script.page_name = query, page
        await session.socket.send(request.SerializeToString())
        paths = {}
        while True:
            message = ForwardMsg.FromString(await session.socket.recv())
            if message.HasField("script_finished"):
                return paths
            if message.HasField("delta") and message.delta.HasField("new_element"):
                element = message.delta.new_element
                inner = getattr(element, element.WhichOneof("type"))
                if "-" in getattr(inner, "id", ""):    # a keyed element's id ends with "-" and its key
                    paths[inner.id.rsplit("-", 1)[1]] = tuple(message.metadata.delta_path)
    finally:
        await session.close()


@pytest.mark.parametrize("page, link", [("t5", T5_LINK), ("t5", T5_LINK | {"t5_tab": "Compare with Shaw"}),
                                        ("shaw", SHAW_LINK)])
def test_the_window_controls_sit_below_the_chart_a_lecture_starts_at(base, page, link):
    """A lecture drops everything above a step's subject chart (relviz.app.lecture_mode.lecture_css): the window's
    controls come after it on the page, so a step at a large length keeps them on the projector."""
    paths = asyncio.run(_element_paths(base, page, urllib.parse.urlencode(link)))
    subject = view_subject(page, {key: str(value) for key, value in link.items()})
    prefix = subject.split("_")[0]
    assert subject in paths
    for key in ("ws", "r0", "c0", "centre"):
        assert paths[subject] < paths[f"{prefix}_{key}"], key
