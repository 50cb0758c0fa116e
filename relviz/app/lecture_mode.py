"""Lecture mode: the presenter bar every page shows while a tour runs, the presenter view that follows it,
and collecting the view on screen into a teacher's tour.

Exists so that the tour's session state, its page switches and the shared live lecture are handled in
one place; the tours themselves (data, validation, links) are relviz.app.tours'.
"""
from __future__ import annotations

from pathlib import Path

import streamlit as st

from relviz.app import internals as app_internals
from relviz.app.lectures import Lectures
from relviz.app.link_schema import PAGE_PARAMS, page_keys, page_param, view_subject
from relviz.app.links import LINK_CHECKED_KEY, as_text
from relviz.app.navigation import PAGES
from relviz.app.tours import Step, check_step


TOUR_STATE = "_relviz_tour"          # (Tour, step index) while presenting
DRAFT_STATE = "_relviz_tour_draft"   # list[tours.Step]: the views a teacher collected
LECTURE_STATE = "_relviz_lecture"    # this tab's live lecture id (relviz.app.lectures), followed by its presenter view
LECTURE_PARAM = "lecture"            # the presenter view's link value on the Lecture mode page, a step's elsewhere
STEP_PARAM = "lecture_step"          # a step's link: which step (1-based) of the lecture the link shows
COPY_PARAM = "lecture_copy"          # "1": this tab is the presenter view's small copy of the audience's screen
#: How often the presenter view looks at the lecture it follows (seconds).
FOLLOW_EVERY_S = 1.0
#: The presenter view's copy of the audience's 1280 × 720 screen, scaled to fit half of a 1280 px tab.
MIRROR_SCALE = 0.3


def presenting() -> bool:
    """Whether this tab shows a tour step to an audience: the audience's tab (the presenter bar is on screen) or
    the presenter view's small copy of it (a page opened with ?lecture=ID&lecture_copy=1)."""
    return st.session_state.get(TOUR_STATE) is not None or _mirrored_step() is not None


def _mirrored_step():
    """The step this tab copies for the presenter view (a page, not Lecture mode, opened with ?lecture=ID and
    lecture_copy=1), or None. The step comes from the server's lecture, never from the link."""
    lecture_id = st.query_params.get(LECTURE_PARAM)
    if not lecture_id or st.query_params.get(COPY_PARAM) != "1":
        return None
    shared = lectures().get(lecture_id)
    return None if shared is None else shared.tour.steps[shared.index]


@st.cache_resource
def lectures():
    """The server's live lectures: the step an audience tab and its presenter view share."""

    return Lectures()


def _page_name(url_path: str) -> str:
    """st.navigation's url_path ('' for the default page) -> the page's file stem."""
    default = next(Path(page.path).stem for page in PAGES if page.default)
    return url_path or default


def go_to_step(tour, index: int) -> None:
    """Open step ``index`` of ``tour`` exactly: its page with its link values, every other control of
    that page back at its default (their kept values are forgotten first)."""

    index = min(max(index, 0), len(tour.steps) - 1)
    step = tour.steps[index]
    st.session_state[TOUR_STATE] = (tour, index)
    shared = lectures().get(st.session_state.get(LECTURE_STATE))
    if shared is None or shared.tour != tour:
        st.session_state[LECTURE_STATE] = lectures().start(tour, index)
    else:
        lectures().move(st.session_state[LECTURE_STATE], index)
    kept = {key: st.session_state.pop(key, None)
            for key in page_keys(step.page, [key for key in st.session_state if isinstance(key, str)])}
    st.session_state.pop(LINK_CHECKED_KEY, None)
    # a control of the page on screen keeps its on-screen value over a link value equal to its default (the
    # browser sends it back): the controls the step sets get the step's value in their state, typed as before.
    # The lecture's id and the step's number ride in the link: a reload of the tab, or the next step's link, finds
    # the lecture again on this step.
    _switch_page(f"pages/{step.page}.py",
                 {**step.params, LECTURE_PARAM: st.session_state[LECTURE_STATE], STEP_PARAM: str(index + 1)}, kept)


def step_link(lecture_id: str, tour, index: int, **extra: str) -> str:
    """The link of step ``index`` (0-based) of a lecture, relative to the app's own pages: the step's page with its
    values, the lecture's id and the step's number (which the page adopts: _adopt). The page and values are the
    tour's, checked when it was read."""
    from urllib.parse import urlencode

    step = tour.steps[index]
    default = next(Path(page.path).stem for page in PAGES if page.default)
    query = urlencode({**step.params, LECTURE_PARAM: lecture_id, STEP_PARAM: str(index + 1), **extra}, doseq=True)
    return f"{'./' if step.page == default else step.page}?{query}"


def _linked_step(tour) -> int | None:
    """The step (0-based) a step's link names (?lecture_step=N, 1-based), or None for a missing or wrong number."""
    text = st.query_params.get(STEP_PARAM, "")
    # ASCII digits only: str.isdigit() is true of "²" and "٣", which int() refuses (a traceback on a hostile link)
    number = int(text) if text.isascii() and text.isdigit() and len(text) < 5 else 0
    return number - 1 if 1 <= number <= len(tour.steps) else None


def _adopt(lecture_id: str) -> None:
    """A tab opened on a step's link (?lecture=ID&lecture_step=N, from the lecture's own moves) presents that
    lecture, on the step the link names: a fresh session on the step's exact link, so no control keeps a value from
    the step before. The step is the link's, not the lecture's: when the presenter moved on while this tab loaded,
    the tab knows it shows step N and opens the newer step next (_follow), never a newer number over step N's
    picture. Once per tab and lecture."""
    if st.session_state.get(LECTURE_STATE) == lecture_id and st.session_state.get(TOUR_STATE) is not None:
        return
    shared = lectures().get(lecture_id)
    if shared is not None:
        linked = _linked_step(shared.tour)
        st.session_state[LECTURE_STATE] = lecture_id
        st.session_state[TOUR_STATE] = (shared.tour, shared.index if linked is None else linked)


def _as_kept(text, kept):
    """A link value as the type of the value the control held before."""
    if isinstance(kept, bool):
        return str(text).lower() == "true"
    if isinstance(kept, int):
        return int(float(text))
    if isinstance(kept, float):
        return float(text)
    return text


def _switch_page(path: str, params: dict, kept: dict | None = None) -> None:
    """st.switch_page with exactly ``params`` in the URL. A control of the page on screen stays bound to
    its key until the next run, and Streamlit refuses to set a bound key: release the bindings of the
    keys being set (the next page binds its own controls again). Other bindings stay: Streamlit clears
    them during the next page's run, and that is what updates the address bar to the new page."""
    app_internals.release_url_bindings(params)
    for key, value in (kept or {}).items():
        if key in params and value is not None:
            st.session_state[key] = _as_kept(params[key], value)
    st.switch_page(path, query_params=params)


#: Shown in the sidebar where other pages have "Add this view to my tour".
NO_TOUR_STEP = ("No “Add this view to my tour” on this page: it is a tool whose picture comes from a model, "
                "a file or a tour, not a view a tour can return to.")


def current_view(page_name: str):
    """The view on screen as a tour step (the page and its URL values), or a message why it cannot be one."""

    if page_name not in PAGE_PARAMS:
        return None, NO_TOUR_STEP
    params = {}
    for key in page_keys(page_name, st.query_params.keys()):
        values = st.query_params.get_all(key)
        if values:
            params[key] = values if page_param(page_name, key).takes_list else values[-1]
    try:
        return check_step(Step(page_name, params, title=next(
            (p.title for p in PAGES if Path(p.path).stem == page_name), page_name),
            subject=view_subject(page_name, params))), ""
    except ValueError as error:
        return None, f"This view cannot be collected: {error}"


def lecture_mode(url_path: str) -> None:
    """Call in app.py before the page runs: while a tour runs, the presenter bar above the page. The step's
    note is in the presenter view (a second tab), never on the audience's screen."""
    page_name = _page_name(url_path)
    lecture_id = st.query_params.get(LECTURE_PARAM)
    if page_name != "tour" and lecture_id:
        if (step := _mirrored_step()) is not None:      # the presenter view's small copy
            if step.page == page_name:
                lecture_layout(step.subject)
            return
        _adopt(lecture_id)
    if st.session_state.get(TOUR_STATE) is not None:
        _presenter_bar(page_name)


#: The presenter bar's key (a container): the lecture layout keeps it on screen.
BAR_KEY = "tour_bar"
#: The bar in a window narrower than a 1280 px projector (seen at 1024 × 768: "◀…", no "Next", "N", "E"): each
#: button's column (Notes is a link) fits its whole label (the title's column wraps instead), and the Page Up /
#: Page Down hints go. On a phone (below 640 px) the title takes a row of its own above the buttons: at 390 px it
#: had 45 px ("logari / thmic / bucke / ts"), Notes was cut to its icon and the bar filled half the screen.
_BUTTON_COLUMN = '[data-testid="stColumn"]:has(button, [data-testid="stLinkButton"])'
_TEXT_COLUMN = '[data-testid="stColumn"]:not(:has(button, [data-testid="stLinkButton"]))'
BAR_CSS = ("<style>@media (max-width: 1279px) {"
           f".st-key-{BAR_KEY} kbd {{display: none}}"
           f'.st-key-{BAR_KEY} [data-testid="stHorizontalBlock"] {{flex-wrap: nowrap}}'
           f".st-key-{BAR_KEY} {_BUTTON_COLUMN} "
           "{flex: 0 0 auto !important; width: auto !important; min-width: max-content}"
           f".st-key-{BAR_KEY} {_TEXT_COLUMN} {{flex: 1 1 0 !important; min-width: 0}}"
           "}@media (max-width: 639px) {"
           f'.st-key-{BAR_KEY} [data-testid="stHorizontalBlock"] {{flex-wrap: wrap; row-gap: 0.5rem}}'
           f".st-key-{BAR_KEY} {_TEXT_COLUMN} {{order: -1; flex: 1 1 100% !important; min-width: 100%}}"
           "}</style>")


def lecture_css(subject: str) -> str:
    """The audience's layout of a step, as CSS: no header band (nor its menu and "running" badge), and every
    element above the step's subject chart (the element keyed ``subject``) dropped, at every level of nesting,
    except the presenter bar and the subject's own row of columns (its neighbours and their headings stay
    level with it): the subject then starts at the top of the first screen, whole at 1280 × 720. Elements
    below it stay. An empty subject (a collected view) drops only the header band."""
    rules = ['header[data-testid="stHeader"]{display:none}']
    if subject:
        s, bar = f".st-key-{subject}", f".st-key-{BAR_KEY}"
        column = '[data-testid="stColumn"]'  # the subject's row stays whole: its neighbours, their headings
        rules.append(f'[data-testid="stMainBlockContainer"] :is(:has(~ {s}), :has(~ * {s}))'
                     f':not({bar}, :has({bar}), {column}, {column} *){{display:none !important}}')
    return "<style>" + "\n".join(rules) + "</style>"


def lecture_layout(subject: str) -> None:
    """Lay this page out for the projector (lecture_css); Streamlit's st.html sends a style-only block to the
    page without drawing an element."""
    st.html(lecture_css(subject))


def collect_view_control(url_path: str) -> None:
    """In the sidebar (app.py draws it after the page): the button that adds the view on screen, every
    control as the page left it, to the teacher's own tour; or why this page has none."""
    page_name = _page_name(url_path)
    step, why = current_view(page_name)
    if step is not None:
        draft = st.session_state.setdefault(DRAFT_STATE, [])
        # on_click: the view is added before the rerun draws the button, so its count is already the new one
        st.button(f"Add this view to my tour ({len(draft)})", key="tour_collect", icon=":material/add:",
                  on_click=_collect_view, args=(page_name,),
                  help="Collects this page with every control as it is now; edit notes and share the "
                       "tour on the Lecture mode page.", width="stretch")
    elif why == NO_TOUR_STEP:
        st.caption(why)


def _collect_view(page_name: str) -> None:
    """The button's callback: the view as the page left it (its URL values) joins the teacher's tour."""
    step, _ = current_view(page_name)
    if step is None:
        return
    draft = st.session_state.setdefault(DRAFT_STATE, [])
    draft.append(step)
    st.toast(f"Added: {as_text(step.title)} (step {len(draft)} of your tour)", icon=":material/playlist_add:")


def _presenter_bar(page_name: str) -> None:
    """One compact row above the page: the step and its title, Back / Next (Page Up / Page Down), the
    presenter view's link and End. The step's note is in the presenter view, which follows this tab."""
    tour, index = st.session_state[TOUR_STATE]
    lecture_id = st.session_state.get(LECTURE_STATE)
    shared = lectures().get(lecture_id)
    step = tour.steps[index]
    last = len(tour.steps) - 1
    away = page_name != step.page
    if not away:
        lecture_layout(step.subject)
    st.html(BAR_CSS)
    with st.container(border=True, key=BAR_KEY):
        # widths: "◀ Back PageUp" and "Next ▶ PageDown" whole at 1280 px
        prev_col, text_col, next_col, notes_col, end_col = st.columns([2.1, 3.6, 2.1, 1.4, 0.9],
                                                                       vertical_alignment="center")
        previous = prev_col.button("◀ Back", key="tour_prev", disabled=index == 0, width="stretch",
                                   shortcut="pageup", help="Previous step (Page Up)")
        label = f"Step {index + 1}" if away else ("Next ▶" if index < last else "Finish")
        advance = next_col.button(label, key="tour_next", type="primary", width="stretch", shortcut="pagedown",
                                  help="Back to this step's view" if away else
                                  "Next step (Page Down: most presentation clickers send it)")
        if shared is not None:
            notes_col.link_button("Notes", f"tour?{LECTURE_PARAM}={lecture_id}", icon=":material/open_in_new:",
                                  width="stretch", help="The presenter view in a new tab (for your own screen): "
                                                        "this step's note, what comes next, every step, Back and "
                                                        "Next. This tab follows it.")
        end = end_col.button("End", key="tour_end", width="stretch", help="Leave lecture mode")
        text_col.markdown(f"**{index + 1} / {len(tour.steps)} · {as_text(step.title)}**"
                          + ("  \n:gray[You left this step's page.]" if away else
                             "  \n:gray[relative position = j − i = key − query]"))
    if end or (advance and index == last and not away):
        del st.session_state[TOUR_STATE]
        if lecture_id is not None:
            lectures().end(lecture_id)
            st.session_state.pop(LECTURE_STATE, None)
        _switch_page("pages/tour.py", {})
    if shared is None or shared.tour != tour:  # the lecture is gone from the registry: move this tab alone
        if previous:
            go_to_step(tour, index - 1)
        if advance:
            go_to_step(tour, index if away else index + 1)
        return
    if previous or advance:  # from this tab's step: a press the lecture already moved past changes nothing
        lectures().move(lecture_id, index - 1 if previous else index if away else index + 1, from_index=index)
    with text_col:
        _follow(lecture_id, again=bool(advance and away))


def _open(url: str) -> None:
    """Open ``url`` in this tab (a page load: a fresh session on the step's exact link)."""
    global _opener
    if _opener is None:
        _opener = st.components.v2.component(
            "relviz_lecture_open",
            js="export default function ({data}) {\n"
               "  if (!data || !data.url) return;\n"
               "  const target = new URL(data.url, window.location.href);\n"
               "  if (target.href !== window.location.href) window.location.assign(target.href);\n"
               "}\n")
    _opener(key="lecture_open", data={"url": url})


_opener = None


@st.fragment(run_every=FOLLOW_EVERY_S)
def _follow(lecture_id: str, again: bool = False) -> None:
    """In the audience's tab: every FOLLOW_EVERY_S seconds, look at the lecture; when it moved (the presenter
    view's Back / Next, or this tab's own), open the new step's link. A page load rather than a page switch in
    this session: the fragment's timer keeps sending the old page's control values while a switched page runs,
    and a control could take a value from the step before. ``again``: open this step's link anew (the bar's
    "Step N" after the presenter left the step's page). Draws nothing until it moves."""
    shared, here = lectures().get(lecture_id), st.session_state.get(TOUR_STATE)
    if shared is None or here is None or shared.tour != here[0]:
        return
    if shared.index != here[1] or again:
        _open(step_link(lecture_id, shared.tour, shared.index))


def _move(lecture_id: str, index: int, from_index: int | None = None) -> None:
    """A presenter-view button's callback: the lecture's step, which the audience's tab follows; ``from_index``:
    Back / Next, pressed on that step (Lectures.move)."""
    lectures().move(lecture_id, index, from_index=from_index)


def _mirror_html(lecture_id: str, tour, index: int, *, scale: float = MIRROR_SCALE) -> str:
    """A small copy of the audience's picture: the step's page laid out as on the projector (1280 × 720, the
    lecture layout: ?lecture=ID makes that page a copy of the lecture's step), scaled down. The page and its
    values are the tour's, checked when the tour was read (a page from relviz's list, values its controls take)."""
    from html import escape

    src = escape(step_link(lecture_id, tour, index, **{COPY_PARAM: "1", "embed": "true"}))
    width, height = round(1280 * scale), round(720 * scale)
    return (f'<div style="width:{width}px;height:{height}px;overflow:hidden;border:1px solid #ccc">'
            f'<iframe src="{src}" title="the audience\'s screen" style="width:1280px;height:720px;border:0;'
            f'transform:scale({scale});transform-origin:0 0"></iframe></div>')


@st.fragment(run_every=FOLLOW_EVERY_S)
def presenter_view(lecture_id: str) -> None:
    """The presenter's tab (Lecture mode page, ?lecture=ID): the step on the audience's screen, its note, what
    comes next and every step, and the presenter's own Back / Next (Page Up / Page Down here too) and step list:
    they move the lecture, and the audience's tab follows within FOLLOW_EVERY_S seconds. It looks every
    FOLLOW_EVERY_S seconds, so it also follows Back / Next clicked in the audience's tab."""
    shared = lectures().get(lecture_id)
    if shared is None:
        st.warning("This lecture has ended, or its link is from another server or an older session. Start the "
                   "tour again and open **Notes** from its bar.", icon=":material/co_present:")
        return
    tour, index = shared.tour, shared.index
    step, last = tour.steps[index], len(tour.steps) - 1
    left, right = st.columns([1, 1.05])
    with left:
        st.markdown(f"### {index + 1} / {len(tour.steps)} · {as_text(step.title)}")
        back, forward = st.columns(2)
        # Back / Next mean "from the step shown here": their keys carry the step, so a press handled once more after
        # the view moved on (a timer's run resending it) finds no button, and Lectures.move takes it once
        back.button("◀ Back", key=f"pv_prev{index}", disabled=index == 0, width="stretch", shortcut="pageup",
                    on_click=_move, args=(lecture_id, index - 1, index), help="The audience's tab goes back (Page Up)")
        forward.button("Next ▶", key=f"pv_next{index}", type="primary", disabled=index == last, width="stretch",
                       shortcut="pagedown", on_click=_move, args=(lecture_id, index + 1, index),
                       help="The audience's tab moves on (Page Down: most presentation clickers send it)")
        st.info(as_text(step.note) or "No note for this step.", icon=":material/co_present:")
        st.caption(f"Next: **{as_text(tour.steps[index + 1].title)}**" if index < last else "This is the last step.")
    with right:
        st.caption("The audience's screen (a small copy, reloaded at each step)")
        st.iframe(_mirror_html(lecture_id, tour, index), height=round(720 * MIRROR_SCALE) + 4)
        for n, item in enumerate(tour.steps):
            st.button(f"{n + 1}. {as_text(item.title)}", key=f"pv_step{n}", type="primary" if n == index else "tertiary",
                      on_click=_move, args=(lecture_id, n), help="Show this step to the audience")
