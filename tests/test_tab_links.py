"""A link copied on any tab of a page carries every tab's values (issue 34's T5 regression): st.tabs runs only the open
tab's code, and Streamlit deleted a closed tab's bound keys from the URL, so a link made on T5's Precision tab lost the
window (t5_ws, t5_r0, t5_c0) and opened on another one. Swept over every page with URL-bound tabs, and over every page
with a fragment (a fragment's rerun must keep the keys of the controls it does not draw), on a real server (websocket
sessions that send what a tab sends: relviz.bench.class_clients), no browser."""
from __future__ import annotations

import asyncio
import re
import urllib.parse
from pathlib import Path

import pytest

from browser_support import app_server
from relviz.bench.class_clients import Session, streamlit_protos

REPO = Path(__file__).resolve().parents[1]

#: page -> a link that sets a value other than the default on every URL-bound control of every tab, at lengths
#: where T5 draws its window
TAB_LINKS = {
    "t5": {"t5_q": 1024, "t5_k": 1024, "t5_ws": 128, "t5_r0": 100, "t5_c0": 120, "t5_ck": 12},
    "skew": {"skew_L": 5, "skew_dl": "padded"},
}


@pytest.fixture(scope="module")
def base():
    with app_server() as url:
        yield url


def test_every_page_with_url_bound_tabs_is_swept():
    tabbed = {path.stem for path in (REPO / "pages").glob("*.py")
              if re.search(r"st\.tabs\([^)]*bind=", path.read_text(), re.S)}
    assert tabbed == set(TAB_LINKS)


def _address(session: Session, query: str, key: str, label: str) -> str:
    """The address bar after a rerun: what the server last put there, else the frontend's own edit (the tab's key)."""
    if session.address is not None:
        return session.address
    params = [(k, v) for k, v in urllib.parse.parse_qsl(query) if k != key] + [(key, label)]
    return urllib.parse.urlencode(params)


async def _tour_the_tabs(base: str, page: str, link: dict, first: str | None) -> list[tuple[str, dict[str, str]]]:
    """Open ``page`` with ``link`` (on tab ``first``, or the default), then open each tab in turn as a visitor's
    click does, and come back to the first: (tab, the address bar's values) after each click."""
    WidgetState = streamlit_protos()[2]
    query = urllib.parse.urlencode(link | ({} if first is None else {}))
    session = Session(base, page, query)
    await session.connect()
    seen = []
    try:
        opened = await session.run()
        assert opened["errors"] == []
        (key, (widget_id, labels)), = session.tabs.items()
        order = [label for label in labels if label != first] + [first or labels[0]]
        for label in order:
            session.address = None
            state = WidgetState(id=widget_id, string_value=label)
            moved = await session.run(state)
            assert moved["errors"] == [], (label, moved["errors"])
            session.query = _address(session, session.query, key, label)
            seen.append((label, dict(urllib.parse.parse_qsl(session.query))))
        return seen
    finally:
        await session.close()


@pytest.mark.parametrize("page", sorted(TAB_LINKS))
def test_a_link_copied_on_any_tab_keeps_every_tabs_values(base, page):
    link = TAB_LINKS[page]
    for tab, address in asyncio.run(_tour_the_tabs(base, page, link, None)):
        for key, value in link.items():
            assert address.get(key) == str(value), (tab, key, address)


def test_a_t5_link_made_on_the_precision_tab_opens_the_same_window(base):
    """The link as the Precision tab's address bar holds it, opened fresh: the Buckets tab shows its window."""
    link = TAB_LINKS["t5"] | {"t5_tab": "Precision & references"}
    WidgetState = streamlit_protos()[2]

    async def visit() -> dict:
        session = Session(base, "t5", urllib.parse.urlencode(link))
        await session.connect()
        try:
            assert (await session.run())["errors"] == []
            assert "t5_r0" not in session.sliders          # the Buckets tab is closed: its window is not drawn
            (widget_id, _), = session.tabs.values()
            await session.run(WidgetState(id=widget_id, string_value="Buckets"))
            return {key: list(session.sliders[key].value) for key in ("t5_ws", "t5_r0", "t5_c0")}
        finally:
            await session.close()

    assert asyncio.run(visit()) == {"t5_ws": [128], "t5_r0": [100], "t5_c0": [120]}


#: page -> a link that sets values other than the defaults, with a slider drawn inside a fragment; chart_export (the
#: sidebar's, drawn by app.py outside every page) stands for the controls a fragment's rerun does not draw
FRAGMENT_LINKS = {
    "t5": {"t5_q": 1024, "t5_k": 1024, "t5_ws": 128, "t5_r0": 100, "t5_c0": 120, "t5_md": 100},
    "shaw": {"sh_q": 1024, "sh_k": 1024, "sh_ws": 128, "sh_r0": 100, "sh_c0": 120, "sh_clip": 10},
    "absolute": {"abs_L": 96, "abs_d": 64, "abs_shift": 10, "abs_heads": 4},
    "experiments": {"ex_thr": 0.6},
    "skew": {"skew_L": 5, "skew_colour": "distance"},
    "rope": {"rp_L": 64, "rp_seed": 3},
    "images": {"im_rows": 8, "im_cols": 8, "im_qr": 3, "im_qc": 4},
    "attention": {"at_len": 32, "at_seed": 5},
}


def test_every_page_with_a_fragment_is_swept():
    assert {path.stem for path in (REPO / "pages").glob("*.py") if "@st.fragment" in path.read_text()} == \
        set(FRAGMENT_LINKS)


async def _fragment_move(base: str, page: str, link: dict) -> tuple[str, str]:
    """Open ``page`` with ``link``, move the first slider drawn inside a fragment one step, as a tab does: (its key,
    the address bar after the fragment's rerun)."""
    WidgetState = streamlit_protos()[2]
    session = Session(base, page, urllib.parse.urlencode(link))
    await session.connect()
    try:
        assert (await session.run())["errors"] == []
        key = next(k for k, fragment in session.fragments.items() if fragment)
        slider = session.sliders[key]
        now = (slider.value or slider.default)[0]          # a proto carries its value once it differs from the default
        value = now + slider.step if now + slider.step <= slider.max else now - slider.step
        state = WidgetState(id=slider.id)
        state.double_array_value.data.append(value)
        session.address = None
        moved = await session.run(state, session.fragments[key])
        assert moved["errors"] == [] and moved["finished"] == "FINISHED_FRAGMENT_RUN_SUCCESSFULLY"
        return key, session.address if session.address is not None else session.query
    finally:
        await session.close()


@pytest.mark.parametrize("page", sorted(FRAGMENT_LINKS))
def test_a_fragment_move_keeps_the_links_other_values(base, page):
    link = FRAGMENT_LINKS[page] | {"chart_export": "SVG"}
    key, address = asyncio.run(_fragment_move(base, page, link))
    kept = dict(urllib.parse.parse_qsl(address))
    for other, value in link.items():
        if other != key:
            assert kept.get(other) == str(value), (key, other, kept)
