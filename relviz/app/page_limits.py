"""The longest query/key length the explorer pages accept: 2^20 positions, today's long contexts.

Plain numbers, in a module of their own: the landing page's controls import it, and the server's first
visitor must not wait for numpy or torch (tests/test_cold_start.py). Nothing on those pages builds the
q_len × k_len matrix: the server works per offset (q_len + k_len − 1 values), the browser gets an exact
window (at most relviz.toeplitz_display.DISPLAY_MAX per side) and a pooled overview (figures.toeplitz_window.OVERVIEW_MAX
blocks per side). Read by relviz.app.controls' length controls and relviz.app.tours' lecture-mode links.
"""
from __future__ import annotations

MAX_LENGTH = 2**20
