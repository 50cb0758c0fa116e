"""Live lectures: which step of which tour a presentation is on, shared by its two browser tabs.

A teacher presents a tour in one tab (the audience's: the projector shows the picture and the step's
title) and opens the presenter view in a second tab (notes, the step list, the next step). Two tabs are
two Streamlit sessions, so the step they share lives here, in a :class:`Lectures` registry that the app
keeps once per server (``relviz.app.lecture_mode`` holds it in ``st.cache_resource``; this module creates no instance
and imports no streamlit). The audience's tab moves the lecture; the presenter view follows by reading it.

A lecture is found by an unguessable id (the presenter link carries it). The registry is bounded: the
least recently used lecture is dropped when a new one would exceed ``limit``.
"""
from __future__ import annotations

import re
import secrets
import threading
from collections import OrderedDict
from dataclasses import dataclass

from relviz.app.tours import Tour

#: What a lecture id looks like (the presenter link's ``lecture`` value): checked before any look-up.
LECTURE_ID = re.compile(r"lec-[A-Za-z0-9_-]{16}")


@dataclass(frozen=True)
class LectureState:
    """One lecture as a tab reads it: the tour and the step on screen (0-based)."""

    tour: Tour
    index: int


class Lectures:
    """Live lectures by id, safe to use from every session's thread at once."""

    def __init__(self, limit: int = 64) -> None:
        if not isinstance(limit, int) or limit < 1:
            raise ValueError(f"limit must be a positive integer; got {limit!r}")
        self._limit = limit
        self._lock = threading.Lock()
        self._items: OrderedDict[str, LectureState] = OrderedDict()

    def start(self, tour: Tour, index: int = 0) -> str:
        """A new lecture on step ``index`` of ``tour``; returns its id."""
        lecture_id = "lec-" + secrets.token_urlsafe(12)
        with self._lock:
            self._items[lecture_id] = LectureState(tour, self._clamp(tour, index))
            while len(self._items) > self._limit:
                self._items.popitem(last=False)
        return lecture_id

    def get(self, lecture_id: object) -> LectureState | None:
        """The lecture, or None for an unknown, ended, dropped or malformed id."""
        if not isinstance(lecture_id, str) or not LECTURE_ID.fullmatch(lecture_id):
            return None
        with self._lock:
            state = self._items.get(lecture_id)
            if state is not None:
                self._items.move_to_end(lecture_id)
            return state

    def move(self, lecture_id: str, index: int, *, from_index: int | None = None) -> LectureState | None:
        """Put the lecture on step ``index`` (clamped to the tour); None when it is gone.

        ``from_index``: only if the lecture is on that step now, else it stays where it is. A Back or Next pressed
        on step n means "from n to n ± 1": pressed twice, or its press handled again after the lecture moved, it
        moves the lecture once."""
        with self._lock:
            state = self._items.get(lecture_id)
            if state is None:
                return None
            if from_index is not None and state.index != from_index:
                self._items.move_to_end(lecture_id)
                return state
            state = LectureState(state.tour, self._clamp(state.tour, index))
            self._items[lecture_id] = state
            self._items.move_to_end(lecture_id)
            return state

    def end(self, lecture_id: str) -> None:
        with self._lock:
            self._items.pop(lecture_id, None)

    @staticmethod
    def _clamp(tour: Tour, index: int) -> int:
        return min(max(int(index), 0), len(tour.steps) - 1)
