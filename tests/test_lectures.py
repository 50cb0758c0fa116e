"""relviz.app.lectures: the registry an audience tab and its presenter view share."""
from __future__ import annotations

import threading

import pytest

from relviz.app.lectures import LECTURE_ID, Lectures
from relviz.app.tours import BUILTIN, Step, Tour


def test_a_lecture_is_found_by_its_id_and_moves_within_its_tour():
    lectures = Lectures()
    lecture_id = lectures.start(BUILTIN, 3)
    assert LECTURE_ID.fullmatch(lecture_id)
    assert lectures.get(lecture_id).index == 3 and lectures.get(lecture_id).tour == BUILTIN
    assert lectures.move(lecture_id, 5).index == 5
    assert lectures.move(lecture_id, 99).index == len(BUILTIN.steps) - 1    # clamped to the tour
    assert lectures.move(lecture_id, -4).index == 0
    lectures.end(lecture_id)
    assert lectures.get(lecture_id) is None and lectures.move(lecture_id, 1) is None


def test_a_move_from_a_step_is_taken_once():
    """Next pressed on step n means n -> n + 1: pressed again, or handled again after the lecture moved, it stays."""
    lectures = Lectures()
    lecture_id = lectures.start(BUILTIN, 3)
    assert lectures.move(lecture_id, 4, from_index=3).index == 4
    assert lectures.move(lecture_id, 4, from_index=3).index == 4
    assert lectures.move(lecture_id, 5, from_index=3).index == 4              # a press on step 4 the lecture left
    assert lectures.move(lecture_id, 3, from_index=4).index == 3              # Back, on the step shown


@pytest.mark.parametrize("junk", [None, 3, "", "lec-short", "lec-" + "a" * 16 + "/", "x" * 20])
def test_malformed_or_unknown_ids_find_nothing(junk):
    lectures = Lectures()
    lectures.start(BUILTIN)
    assert lectures.get(junk) is None
    assert lectures.get("lec-" + "a" * 16) is None


def test_the_registry_is_bounded_dropping_the_least_recently_used():
    lectures = Lectures(limit=2)
    tour = Tour("t", (Step("home"), Step("shaw")))
    first, second = lectures.start(tour), lectures.start(tour)
    lectures.get(first)                       # used: the second is now the oldest
    third = lectures.start(tour)
    assert lectures.get(second) is None and lectures.get(first) and lectures.get(third)
    with pytest.raises(ValueError, match="limit"):
        Lectures(limit=0)


def test_ids_are_distinct_and_moves_from_many_threads_stay_in_range():
    lectures = Lectures(limit=1000)
    ids = {lectures.start(BUILTIN) for _ in range(200)}
    assert len(ids) == 200
    lecture_id = next(iter(ids))
    threads = [threading.Thread(target=lambda n=n: [lectures.move(lecture_id, n + k) for k in range(50)])
               for n in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert 0 <= lectures.get(lecture_id).index < len(BUILTIN.steps)
