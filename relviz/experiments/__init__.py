"""Experiments: what each position scheme can and cannot do, measured.

``python -m relviz experiments [--quick] [--out PATH] [--only NAME]`` runs three experiments
and writes their results, with their setup and the spread over seeds, to a small JSON file
(shipped as ``relviz/experiments_results.json``, so the app's page opens instantly):

1. ``offset_resolution``: accuracy on shift-by-s (output the token s places back) for a grid
   of s, per scheme and setting (Shaw k = 4 and 16, T5 32/128 and 8/32, ALiBi, sinusoidal),
   with one layer and with two. **One small model is trained per (setting, layers, s, seed)**,
   with exactly relviz.training's loop (AdamW, warm-up + cosine, gradient clipping) plus early
   stopping. One model trained on "shift by the s named in the input" would be cheaper, but
   it measures something else: a single layer can only point at an offset chosen by the input
   if its position term depends on the query (Shaw does; T5, ALiBi and a linear map of
   absolute positions do not), so T5 and ALiBi would fail for a reason unrelated to their
   buckets. Separate models keep the measurement about resolution.
2. ``length_extrapolation``: train every scheme at one length, evaluate at 1× … 8× that
   length. A scheme that cannot run at a length (learned absolute positions beyond max_len)
   is recorded as "cannot run" with the reason.
3. ``cost``: forward time and peak memory against L for each attention implementation, from
   ``python -m relviz bench --only attention --json`` (relviz skew and Shaw against the naive
   L × L × D gather), plus the query-chunked attention of :mod:`relviz.chunked`, each case in
   a fresh process.

One job per module: ``plan`` (settings, the Plan, reference points), ``fit`` (training with
early stopping), ``pool`` (worker processes), ``offset``, ``extrapolation`` and ``cost`` (the
three studies), ``runner`` (the results document), ``schema`` (validation, loading),
``readings`` (tables and sentences), ``live`` (the page's reruns), ``cli``. This package
re-exports what the app and the tests use, each loaded with its module on first use
(:mod:`relviz._lazy`); ``fit`` is both a module and its function, so import it from
``relviz.experiments.fit``.

Sign convention everywhere: relative position = key index − query index (j − i); the answer
of shift-by-s sits at j − i = −s.
"""
from __future__ import annotations

from relviz._lazy import lazy_exports

__all__, __getattr__, __dir__ = lazy_exports(__name__, {
    "cli": ("add_arguments", "run"),
    "cost": ("attention_matrix_bytes", "chunked_bytes", "naive_gather_bytes", "skew_table_bytes", "wall_length"),
    "fit": ("FitResult", "spread"),
    "live": ("live_cost", "live_extrapolation", "live_extrapolation_work", "live_offset", "live_offset_work",
             "plan_from_setup"),
    "plan": ("ALIBI_HEADLINE", "EXPERIMENTS", "EXTRAPOLATION_SETTINGS", "FORMAT", "FORMAT_VERSION", "FULL_PLAN",
             "IMPLEMENTATIONS", "OFFSET_SETTINGS", "QUICK_PLAN", "RESULTS_PATH", "SHAW_TABLE2", "Plan", "Setting"),
    "readings": ("ALIBI_ON_SHIFT", "EXTRAPOLATION_CHART", "INTRO", "OFFSET_CHART", "ONE_LAYER", "ONE_MODEL_PER_S",
                 "SHAW_REFERENCE", "STORED_CELLS", "cost_chart_caption", "bucket_segments", "bucket_starts", "bucket_width", "cost_reading", "cost_rows",
                 "cost_setup_sentence", "exact_shifts", "extrapolation_reading", "extrapolation_setup_sentence",
                 "live_cost_summary", "live_extrapolation_summary", "live_offset_label", "live_offset_summary",
                 "offset_matrix", "offset_reading", "offset_table", "provenance", "reach", "skipped_cost_summary"),
    "runner": ("run_experiments",),
    "schema": ("load_results", "validate_results"),
})
