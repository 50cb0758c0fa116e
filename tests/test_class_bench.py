"""The class benchmark's parts (relviz/bench/class_*.py, relviz/app/run_profile.py): the isolation check finds a
session that drew another's values, the profile's categories, and a small class on a real server (3 students,
a few seconds: the full class is ``python -m relviz bench --only class``; no timing is asserted here)."""
from __future__ import annotations

import json

from relviz.app.run_profile import ENV_FOLDER, category
from relviz.bench.class_clients import ClassPlan, Student, check_isolation, run_plan
from relviz.bench.class_servers import REPO, app_process, site_config


def _student(index: int, moves: list[tuple[float, str]]) -> Student:
    return Student(index, moves=[{"value": v, "charts": d, "seconds": 0.1, "late_s": 0.0} for v, d in moves])


def test_isolation_holds_when_each_value_draws_its_own_picture():
    assert check_isolation([_student(0, [(1, "a"), (2, "b")]), _student(1, [(2, "b"), (1, "a")])]) == []


def test_a_session_drawing_another_value_is_found():
    # student 1 set 2 but drew what 1 draws: value 2 has two pictures, and values 1 and 2 share one
    problems = check_isolation([_student(0, [(1, "a"), (2, "b")]), _student(1, [(2, "a")])])
    assert any("value 2: 2 different pictures" in p for p in problems)
    assert any("drew the same picture" in p for p in problems)


def test_a_link_that_opened_as_two_pictures_is_found():
    first, second = _student(0, []), _student(1, [])
    first.charts_at_open, second.charts_at_open = "a", "b"
    assert check_isolation([first, second]) == ["the same link opened as 2 different pictures"]


def test_profile_categories_follow_the_stack():
    site = "/x/.venv/lib/python3.11/site-packages"
    page = (str(REPO / "pages" / "shaw.py"), "<module>")
    runner = (f"{site}/streamlit/runtime/scriptrunner/script_runner.py", "_run_script")
    assert category([("<frozen importlib._bootstrap>", "_find_and_load"), page, runner]) == "import"
    assert category([("/usr/lib/python3.11/json/encoder.py", "iterencode"),
                     (f"{site}/plotly/io/_json.py", "to_json"), page, runner]) == "serialisation"
    assert category([(f"{site}/plotly/basedatatypes.py", "__init__"), (str(REPO / "relviz/figures/shaw.py"), "strip"),
                     page, runner]) == "figure building"
    assert category([("/usr/lib/python3.11/hashlib.py", "md5"), (f"{site}/streamlit/elements/lib/utils.py", "x"),
                     page, runner]) == "streamlit"
    assert category([(f"{site}/numpy/core/numeric.py", "ones"), (str(REPO / "relviz/positions.py"), "f"),
                     page, runner]) == "script"


def test_a_page_spec_names_its_link_and_the_slider_moved():
    from relviz.bench.class_load import CONTROLS, LINKS, NO_SLIDER, page_spec, tour_link

    assert page_spec("images?im_rows=64#im_dt") == ("images", "im_rows=64", "im_dt")
    assert page_spec("images?im_rows=64") == ("images", "im_rows=64", None)
    assert page_spec("shaw") == ("shaw", tour_link("shaw"), None) and tour_link("shaw")
    # a page no tour shows opens its bench link (Check's default kind has no slider to move)
    assert page_spec("check")[1] == LINKS["check"] != ""
    # every page of the app is measured by default, or named as having no slider
    pages = {path.stem for path in (REPO / "pages").glob("*.py")}
    assert set(CONTROLS) | set(NO_SLIDER) == pages


def test_the_nginx_file_is_used_with_only_its_ports_replaced():
    text = site_config(8080, [9001, 9002])
    assert "server 127.0.0.1:9001;" in text and "server 127.0.0.1:9002;" in text and "listen 127.0.0.1:8080;" in text
    assert "hash $relviz_backend_key consistent;" in text and "8501" not in text


def test_a_small_class_opens_the_link_and_moves_without_seeing_each_other(tmp_path):
    folder = tmp_path / "runs"
    with app_process(None, env={ENV_FOLDER: str(folder)}) as (base, _):
        students = run_plan(ClassPlan(base=base, page="home", query="home_q=2", control="home_q", students=3,
                                 arrive_s=1.0, duration_s=7.0, move_every_s=(1.5, 2.5), seed=3))
    for student in students:
        assert student.errors == [], student.errors
        assert student.first_chart_s is not None and student.first_chart_s <= student.open_s
        assert student.moves and all(move["chart_count"] >= 1 for move in student.moves)
    assert check_isolation(students) == []
    runs = [json.loads(line) for path in folder.glob("runs-*.jsonl") for line in path.read_text().splitlines()]
    # app.py's body was measured in every run: the first visits and the moves (home has no fragment)
    assert len(runs) >= 3 + sum(len(s.moves) for s in students)
    assert all(run["page"] == "home" and run["thread_cpu_s"] > 0 for run in runs)
