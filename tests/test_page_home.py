"""AppTest of the landing page (through app.py, whose navigation it links into)."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import plotly.graph_objects as go
from plotly_data import decode
from streamlit.testing.v1 import AppTest

from relviz.figures.heatmap import make_readable
from relviz.positions import relative_positions
from relviz.app.navigation import PAGES

APP = str(Path(__file__).resolve().parents[1] / "app.py")


def _home() -> AppTest:
    at = AppTest.from_file(APP, default_timeout=30).run()
    assert not at.exception, at.exception
    assert at.title[0].value == "relviz: relative position, visible"
    return at


def test_a_link_per_page_in_learning_order():
    at = _home()
    links = [link.proto for link in at.main.get("page_link")]  # the sidebar holds the navigation's
    others = [page for page in PAGES if not page.default]
    assert len(links) == len(others)
    for number, (link, page) in enumerate(zip(links, others), start=1):
        assert link.label == f"**{number}. {page.title}**"
        assert link.page == Path(page.path).stem  # st.Page's URL path for pages/<stem>.py
    # below each link, one line saying what its page answers
    answers = [c.value for c in at.caption if c.value.endswith("?")]
    assert len(answers) == len(others)


def test_the_picture_is_the_relative_index_with_labels():
    at = _home()
    (chart,) = at.get("plotly_chart")
    spec = json.loads(chart.proto.spec)
    go.Figure(spec)  # valid plotly
    trace = spec["data"][0]
    n = 7
    # discrete colours travel shifted to start at 0: lo = -(n - 1)
    z = decode(trace["z"]).astype(int) - (n - 1)
    np.testing.assert_array_equal(z, relative_positions(n, device="cpu").numpy())
    labels = np.array(trace["text"])
    assert labels[2, 0] == "−2" and labels[2, 2] == "0" and labels[2, 6] == "+4"
    outline = spec["data"][1]
    assert outline["name"] == "query row"
    assert sorted(set(decode(outline["y"]).tolist())) == [1.5, 2.5]  # the row of the query "sat"
    assert "sat" in spec["layout"]["yaxis"]["ticktext"][2]
    assert any("j − i" in el.value for el in at.info)  # the sign convention


def test_the_picture_is_what_the_shared_heatmap_builder_draws():
    """figures.intro builds the picture from lists (no numpy on the landing page); it is the figure
    matrix_heatmap draws from arrays, cell for cell, for every query and other sentence lengths."""
    from relviz.figures.heatmap import matrix_heatmap
    from relviz.figures.intro import relative_intro_figure

    def reference(tokens: list[str], query: int) -> go.Figure:  # the builder the other pages use
        n = len(tokens)
        i, j = np.indices((n, n))
        rel = j - i
        labels = np.char.replace(np.where(rel > 0, np.char.add("+", rel.astype(str)), rel.astype(str)), "-", "−")
        figure = matrix_heatmap(rel, x=np.arange(n), y=np.arange(n), hover={"j − i": rel}, value_label="j − i",
                                discrete_range=(-(n - 1), n - 1), colorscale="PuOr", text=labels, text_size=15,
                                height=400)
        ticks = [f"{k}: {t}" for k, t in enumerate(tokens)]
        figure.update_xaxes(tickvals=list(range(n)), ticktext=ticks, side="top", title_text="key j",
                            tickfont=dict(size=13))
        figure.update_yaxes(tickvals=list(range(n)), ticktext=ticks, title_text="query i", tickfont=dict(size=13))
        figure.add_trace(go.Scatter(x=[-0.5, n - 0.5, n - 0.5, -0.5, -0.5],
                                    y=[query - 0.5, query - 0.5, query + 0.5, query + 0.5, query - 0.5],
                                    mode="lines", line=dict(color="black", width=3), hoverinfo="skip",
                                    showlegend=False, name="query row"))
        figure.update_layout(margin=dict(l=80, r=10, t=60, b=10))
        figure.data[0].update(xgap=1, ygap=1, showscale=False)
        return make_readable(figure)

    def plain(value):  # typed arrays decoded, so lists and arrays compare by value
        if isinstance(value, dict):
            return decode(value).tolist() if "bdata" in value else {k: plain(v) for k, v in value.items()}
        return [plain(v) for v in value] if isinstance(value, list) else value

    for tokens in (["The", "cat", "sat", "on", "the", "mat", "."], ["a"], list("abcdefghijkl")):
        for query in {0, len(tokens) // 2, len(tokens) - 1}:
            built = plain(json.loads(relative_intro_figure(tokens, query=query).to_json()))
            assert built == plain(json.loads(reference(tokens, query).to_json())), (len(tokens), query)


def test_the_query_slider_moves_the_outline_and_the_text():
    at = _home()
    at.slider(key="home_q").set_value(6).run()
    assert not at.exception
    spec = json.loads(at.get("plotly_chart")[0].proto.spec)
    assert sorted(set(decode(spec["data"][1]["y"]).tolist())) == [5.5, 6.5]
    assert any("the query *“.”*" in m.value and "*“The”* −6" in m.value for m in at.markdown)
    at.slider(key="home_q").set_value(0).run()
    assert any("*“.”* +6" in m.value for m in at.markdown)


def test_links_open_the_pages():
    at = _home()
    for page in PAGES:
        if page.default:
            continue
        at.switch_page(page.path).run()
        assert not at.exception, (page.path, at.exception)
