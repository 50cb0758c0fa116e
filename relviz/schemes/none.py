"""``none``: no position information at all.

A causal model still knows something: how many tokens it can see (attention averages over
i + 1 keys), and nothing more: it cannot tell which key is 5 back.
"""
from __future__ import annotations

from relviz.mechanisms.none import NoPosition
from relviz.schemes.base import Scheme


class NoPositions(Scheme):
    """Plain attention, nothing added (the base class's behaviour, unchanged)."""

    name = "none"
    concept = NoPosition
    summary = "no position information (a causal model still sees how many tokens precede it)"
    order = 0
    family = "none"
