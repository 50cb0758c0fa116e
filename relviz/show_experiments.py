"""``relviz.show``'s pictures of the measured studies (the results shipped with relviz, or a results file
of your own ``python -m relviz experiments`` run), drawn as the Experiments page draws them.

Its own module because these pictures read a results file rather than compute; ``relviz.show``
re-exports them.
"""
from __future__ import annotations

from typing import Any

import plotly.graph_objects as go

from relviz.experiments.plan import SHAW_TABLE2
from relviz.experiments.schema import load_results
from relviz.figures import experiments as experiment_figures


# ---------------------------------------------------------------------------------------
# Experiments (the stored results shipped with relviz, or a results file of your own run)


def _section(name: str, path: str | None) -> dict[str, Any]:

    experiments = load_results(path)["experiments"]
    if name not in experiments:
        raise ValueError(f"the results file has no {name} experiment (run python -m relviz experiments)")
    return experiments[name]


def offset_resolution(threshold: float = 0.9, *, path: str | None = None) -> go.Figure:
    """Offset resolution: mean accuracy of every setting at every shift s, ✓ at ≥ ``threshold``.

    Example: ``show.offset_resolution(0.95)``
    """
    return experiment_figures.offset_overview(_section("offset_resolution", path), threshold)


def offset_resolution_detail(settings: tuple[str, ...] = ("shaw-k4", "t5-8-32"), *,
                             path: str | None = None) -> go.Figure:
    """Accuracy against shift s for some settings, with the offsets one layer cannot tell apart.

    ``settings``: ids of the stored run's settings (e.g. "shaw-k4", "t5-8-32", "alibi").
    Example: ``show.offset_resolution_detail(("shaw-k4", "shaw-k16"))``
    """
    section = _section("offset_resolution", path)
    known = [s["id"] for s in section["settings"]]
    unknown = [s for s in settings if s not in known]
    if unknown or not settings:
        raise ValueError(f"settings must be ids from {known}; got {list(settings)!r}")
    return experiment_figures.offset_detail(section, list(settings))


def shaw_reference() -> go.Figure:
    """Shaw et al.'s published Table 2 (BLEU against k) beside the offset-resolution study.

    Example: ``show.shaw_reference()``
    """

    return experiment_figures.shaw_reference_figure(SHAW_TABLE2)


def length_extrapolation(*, path: str | None = None) -> go.Figure:
    """Accuracy against evaluation length: train short, test long.

    Example: ``show.length_extrapolation()``
    """
    return experiment_figures.extrapolation_figure(_section("length_extrapolation", path))


def memory_wall(*, path: str | None = None) -> go.Figure:
    """Peak memory of one attention forward against L: naive gather, skew, query-chunked.

    Example: ``show.memory_wall()``
    """
    return experiment_figures.memory_wall_figure(_section("cost", path))


def forward_time(*, path: str | None = None) -> go.Figure:
    """Forward time of one attention against L, per implementation.

    Example: ``show.forward_time()``
    """
    return experiment_figures.time_figure(_section("cost", path))
