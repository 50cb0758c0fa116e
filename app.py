"""relviz: the Streamlit entry point. Sets the page config and the navigation; pages do the rest."""
from __future__ import annotations

import streamlit as st

from relviz.app.allocator import start_trimming
from relviz.app.collector import freeze_new_modules
from relviz.app.display import export_format_control
from relviz.app.lecture_mode import collect_view_control, lecture_mode
from relviz.app.links import checked_link_values
from relviz.app.navigation import FAVICON, PAGES, PageEnded, preload_shared_modules, running_app_navigation
from relviz.app.run_profile import begin as begin_run_profile
from relviz.app.run_profile import end as end_run_profile

run_profile = begin_run_profile()  # None unless the class benchmark started this server to measure its runs
st.set_page_config(page_title="relviz: relative position, visible", page_icon=FAVICON, layout="wide")
preload_shared_modules()
start_trimming()  # fewer malloc arenas and a periodic malloc_trim: freed memory goes back to the system

# The sidebar's page links are drawn here, not by st.navigation: config.toml hides Streamlit's
# automatic navigation (on a fresh server it would first list the pages/ folder's file names).
pages = [st.Page(page.path, title=page.title, icon=page.icon, default=page.default) for page in PAGES]
navigation = st.navigation(pages, position="hidden")
lecture_mode(navigation.url_path)  # while a tour runs: the presenter bar, and its note atop the sidebar
# The navigation is drawn after the page, below the page's own sidebar controls: on a 1280 × 720 projector
# the slider a lesson is about is on the first screen (11 links, the sign-convention note and the export
# switch above it pushed it to y ≈ 800), and the page's own elements reach the browser first. A page ends
# early with end_page(), never st.stop(): Streamlit draws nothing after st.stop(), so the navigation
# would be missing.
with running_app_navigation(), checked_link_values(navigation.url_path):
    try:
        navigation.run()
    except PageEnded:
        pass
    finally:  # also after an error or a page switch
        with st.sidebar:
            collect_view_control(navigation.url_path)  # 'add this view to my tour'
            for page in pages:
                st.page_link(page)
            st.caption("Sign convention on every page: **relative position = j − i = key − query** "
                       "(as in T5, Mesh TensorFlow, tensor2tensor and Shaw et al.). Every control is in "
                       "the URL: copy the address bar to share the exact view.")
            export_format_control()
        end_run_profile(run_profile, navigation.url_path)
        freeze_new_modules()  # a run that imported modules: the collector stops walking them (relviz.app.collector)
