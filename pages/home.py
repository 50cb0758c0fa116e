"""Landing page: what relative position is, in one picture, and the way through the app."""
from __future__ import annotations

import streamlit as st

from relviz.app import display, navigation
from relviz._words import signed
from relviz.figures.intro import relative_intro_figure
from relviz.snippets import home_snippet

navigation.ensure_app_navigation()

TOKENS = ["The", "cat", "sat", "on", "the", "mat", "."]
DEFAULT_QUERY = 2  # "sat": keys on both sides

#: What each page answers, by path; a page added to navigation.PAGES later still gets its link.
ANSWERS = {
    "pages/shaw.py": "What is the relative index j − i, and what does Shaw et al.'s clipping at ±k do to it?",
    "pages/t5.py": "How does T5 squeeze every offset into 32 buckets, and where do those buckets go wrong?",
    "pages/skew.py": "How does the Music Transformer get q_i · e(j − i) without an L × L × D tensor, "
                     "and why is its upper triangle garbage?",
    "pages/absolute.py": "What does an absolute encoding know about relative position, and how does ALiBi "
                         "turn distance into a penalty?",
    "pages/images.py": "How do image patches and video frames get relative positions: Swin's 2-D table, 2-D RoPE, "
                       "and M-RoPE's three ids per token?",
    "pages/attention.py": "Where does a small transformer trained with each scheme look, and what did it learn?",
    "pages/experiments.py": "What can each scheme measurably do: tell offsets apart, run longer than it was trained, fit in memory?",
    "pages/rope.py": "How do RoPE's rotations make the score depend on j − i alone, and how do its scalings "
                     "stretch a model to longer contexts?",
    "pages/your_model.py": "What position structure does a real checkpoint hold (T5 buckets, ALiBi slopes, "
                           "RoPE scaling), and where does it attend on your text?",
    "pages/check.py": "Does the matrix my own code produced match the reference, and if not, which mistake made it?",
    "pages/tour.py": "How do I present this in a lecture, step by step, or share my own sequence of views?",
}


@st.cache_resource(max_entries=len(TOKENS), show_spinner=False)
def picture(query: int):
    return relative_intro_figure(TOKENS, query=query)


display.page_title("relviz: relative position, visible")
st.markdown(
    "Attention compares every **query** token i with every **key** token j, and on its own it has no idea "
    "which comes first. An *absolute* encoding stamps each token with its position. A *relative* scheme "
    "gives the attention score the **offset between the two tokens, j − i**, instead: \"the key two "
    "tokens back\" means the same thing anywhere in the sentence.")
display.sign_convention(compact=True)

left, right = st.columns([1.25, 1])
with right:
    query = int(st.slider("query i (the outlined row)", 0, len(TOKENS) - 1, DEFAULT_QUERY, key="home_q",
                          bind="query-params"))
with left:  # the picture right after the slider it follows, before the text beside it: the chart reaches
    # the browser, which then loads plotly.js (most of a fresh visitor's wait), as early as it can
    display.show_figure(picture(query), key="home_fig")
with right:
    keys = ", ".join(f"*“{token}”* {signed(j - query)}" for j, token in enumerate(TOKENS))
    st.markdown(
        f"**Read one row.** The outlined row is the query *“{TOKENS[query]}”*. Each key is labelled by where "
        f"it sits relative to it: {keys}. Negative keys lie before the query, positive after.\n\n"
        "**Read a diagonal.** Every diagonal holds one number: the matrix depends only on j − i (it is "
        "*Toeplitz*). So a relative scheme needs one parameter per offset, 2L − 1 of them, not one per cell; "
        "and a model trained on these offsets can meet a longer sentence and still recognise \"one token "
        "back\".\n\n"
        "The schemes differ in what they do with j − i: look it up in a table (Shaw et al.), group it into "
        "buckets (T5), multiply a query by one vector per distance (Music Transformer), or subtract a "
        "penalty proportional to it (ALiBi).")
with left:
    display.code_for_this_view(home_snippet(len(TOKENS)), note="result is the matrix of j − i above.", key="home_code")

st.subheader("The way through")
st.caption("In learning order; each page also stands on its own. Every control is in the URL, so a copied "
           "link opens the exact view.")
for number, page in enumerate((p for p in navigation.PAGES if not p.default), start=1):
    with st.container(gap=None):  # the link directly above what its page answers (no columns: fewer elements)
        st.page_link(page.path, label=f"**{number}. {page.title}**", icon=page.icon)
        st.caption(ANSWERS.get(page.path, ""))
