"""relviz: the Streamlit entry point. Sets the page config and the navigation; pages do the rest."""
from __future__ import annotations

import streamlit as st

from relviz.ui import PAGES, checked_link_values

st.set_page_config(page_title="relviz: relative position, visible", page_icon=":material/swap_horiz:", layout="wide")

navigation = st.navigation([st.Page(page.path, title=page.title, icon=page.icon, default=page.default)
                            for page in PAGES])
with st.sidebar:
    st.caption("Sign convention on every page: **relative position = j − i = key − query** "
               "(as in T5, Mesh TensorFlow, tensor2tensor and Shaw et al.). Every control is in "
               "the URL: copy the address bar to share the exact view.")
with checked_link_values():
    navigation.run()
