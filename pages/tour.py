"""Lecture mode: present a guided tour (the built-in one, a shared link or a file) and build your own."""
from __future__ import annotations

import pandas as pd
import streamlit as st

from relviz.app import controls, lecture_mode, navigation, tours
from relviz.app.links import as_text

navigation.ensure_app_navigation()
P = "tour"  # widget-key prefix of this page (the tour itself travels in the ?tour= link value)

# The presenter view: a second tab opened from the presenter bar's "Notes" (?lecture=ID) follows the tour
# the audience's tab shows: this step's note, what comes next, every step.
if st.query_params.get(lecture_mode.LECTURE_PARAM):
    st.title("Presenter view")
    lecture_mode.presenter_view(st.query_params.get(lecture_mode.LECTURE_PARAM))
    navigation.end_page()

TITLES = {page.path.removeprefix("pages/").removesuffix(".py"): page.title for page in navigation.PAGES}


def share_link(code: str) -> str:
    """This page's address with the tour in it (the browser's own host, or a relative link)."""
    base = (st.context.url or "").split("?")[0].rstrip("/")
    base = base[: base.rfind("/")] if base.endswith("/tour") else base
    return f"{base}/tour?{tours.TOUR_PARAM}={code}"


def steps_table(tour: tours.Tour) -> pd.DataFrame:
    return pd.DataFrame([{"step": n, "page": TITLES.get(step.page, step.page), "what": step.title,
                          "note for the presenter": step.note}
                         for n, step in enumerate(tour.steps, start=1)])


def move(index: int, by: int) -> None:
    draft = st.session_state[lecture_mode.DRAFT_STATE]
    target = index + by
    if 0 <= target < len(draft):
        draft[index], draft[target] = draft[target], draft[index]
        _forget_step_widgets()


def remove(index: int) -> None:
    del st.session_state[lecture_mode.DRAFT_STATE][index]
    _forget_step_widgets()


def _forget_step_widgets() -> None:
    """The title/note boxes are keyed by position: after a move or delete they must re-read the steps."""
    for key in [k for k in st.session_state if str(k).startswith(f"{P}_s")]:
        del st.session_state[key]


def adopt(tour: tours.Tour) -> None:
    st.session_state[lecture_mode.DRAFT_STATE] = list(tour.steps)
    st.session_state[f"{P}_title"] = tour.title
    _forget_step_widgets()


st.title("Lecture mode")
st.markdown(
    "A **tour** is an ordered list of views, each a page with every control set, plus a short note for you. "
    "Start one and a bar at the top of every page shows the step's title and big **◀ Back** / "
    "**Next ▶** buttons (**Page Up / Page Down** work too: most presentation clickers send them). The audience "
    "sees the step's picture whole on the first screen; **Notes** in the bar opens the presenter view in a new "
    "tab (for your own screen): the step's note, a small copy of the audience's screen, every step, and its own "
    "Back / Next (Page Up / Page Down there too). The audience's tab follows it within about a second.")

# ---- which tour: a shared link, else the built-in one --------------------------------------
code = st.query_params.get(tours.TOUR_PARAM)
tour = tours.BUILTIN
if not code:
    tour = tours.BUILTINS[st.selectbox("tour", list(tours.BUILTINS), key=f"{P}_pick", bind="query-params",
                                       help="The tours relviz ships; a shared link opens its own tour instead.")]
if code:
    try:
        tour = tours.decode(code)
        st.success(f"Tour from the link: **{as_text(tour.title)}**, {len(tour.steps)} steps.", icon=":material/link:")
    except ValueError as error:
        st.error(f"This tour link was refused: {as_text(str(error))}. Showing the built-in tour instead.",
                 icon=":material/link_off:")

st.header(as_text(tour.title))
minutes = tours.tour_minutes(tour)
st.caption(f"{len(tour.steps)} steps" + (f", about {minutes} minutes (the sum of the notes' timings)"
                                         if minutes is not None else ""))
# a row that wraps: in fixed columns the copy button read "Copy into my tour t…" at 819 px (1024 × 768 at 125 %)
row = st.container(horizontal=True, vertical_alignment="bottom")
start_col, at_col, copy_col = (row.container(width=w) for w in ("stretch", "stretch", "content"))
first = controls.number_control("start at step", 1, len(tour.steps), 1, key=f"{P}_at", where=at_col)
if start_col.button("▶ Start presenting", key=f"{P}_start", type="primary", width="stretch"):
    lecture_mode.go_to_step(tour, int(first) - 1)
copy_col.button("Copy into my tour to edit", key=f"{P}_adopt", on_click=adopt, args=(tour,))
# a static table wraps each note in its cell (a data grid's cells are one line each: long notes scrolled sideways)
st.table(steps_table(tour), hide_index=True)

# ---- your own tour --------------------------------------------------------------------------
st.header("Make your own tour")
st.markdown(
    "Open any page, set it up as you want to show it, and click **Add this view to my tour** in the sidebar. "
    "Your views collect here: give each a title and a note, reorder them, then share the tour as one link or "
    "a small file. (The collection lives in this browser tab until you share or download it.) "
    "Check my implementation and Lecture mode have no such button: they are tools whose picture comes from a "
    "model, a file or a tour, not views a tour can return to.")

draft: list[tours.Step] = st.session_state.setdefault(lecture_mode.DRAFT_STATE, [])
loaded = st.file_uploader("Open a tour file (.json)", type=["json"], key=f"{P}_file", max_upload_size=1,
                          help=f"A file saved from this page: at most {tours.MAX_JSON_BYTES // 1000} kB, "
                               "checked before use.")
if loaded is not None:
    try:
        from_file = tours.loads(loaded.getvalue())
    except ValueError as error:
        st.error(f"This tour file was refused: {as_text(str(error))}", icon=":material/block:")
    else:
        st.button(f"Use “{as_text(from_file.title)}” ({len(from_file.steps)} steps) as my tour", key=f"{P}_usefile",
                  on_click=adopt, args=(from_file,))

if not draft:
    st.info("No views collected yet.", icon=":material/playlist_add:")
else:
    title = st.text_input("tour title", "My relviz tour", key=f"{P}_title", max_chars=tours.MAX_TITLE)
    for n, step in enumerate(draft):
        with st.container(border=True):
            head, up, down, drop = st.columns([8, 1, 1, 1], vertical_alignment="center")
            shown = ", ".join(f"{k}={v}" for k, v in step.params.items()) or "every control at its default"
            head.markdown(f"**{n + 1}. {TITLES.get(step.page, step.page)}** · `{shown[:160]}`")
            up.button("↑", key=f"{P}_up{n}", on_click=move, args=(n, -1), disabled=n == 0, help="move up")
            down.button("↓", key=f"{P}_down{n}", on_click=move, args=(n, 1), disabled=n == len(draft) - 1,
                        help="move down")
            drop.button("✕", key=f"{P}_del{n}", on_click=remove, args=(n,), help="remove this view")
            step_title = st.text_input("title", step.title, key=f"{P}_st{n}", max_chars=tours.MAX_TITLE)
            note = st.text_area("note for the presenter", step.note, key=f"{P}_sn{n}", max_chars=tours.MAX_NOTE,
                                height=80)
            draft[n] = tours.Step(step.page, step.params, step_title, note, step.subject)
    mine = None
    try:
        mine = tours.check_tour(tours.Tour(title, tuple(draft)))
    except ValueError as error:
        st.error(str(error), icon=":material/error:")
    if mine is not None:
        present, download = st.columns(2)
        if present.button("▶ Present my tour", key=f"{P}_mine", type="primary", width="stretch"):
            lecture_mode.go_to_step(mine, 0)
        download.download_button("Download the tour file (.json)", tours.dumps(mine), file_name="relviz-tour.json",
                                 mime="application/json", key=f"{P}_dl", width="stretch", on_click="ignore")
        try:
            link = share_link(tours.encode(mine))
        except ValueError as error:
            st.warning(str(error), icon=":material/warning:")
        else:
            # A text box, not st.code: a code block, even closed, makes the browser load Streamlit's
            # syntax highlighter (1.5 MB of JavaScript). The box always shows the current tour's link.
            st.session_state[f"{P}_link"] = link
            st.text_input("Share as one link (opens this page with your tour)", key=f"{P}_link",
                          help="Click in the box, then Ctrl+A and Ctrl+C (⌘A, ⌘C on a Mac) to copy it.")
