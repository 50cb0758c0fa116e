"""Figures of the Experiments page: offset resolution, length extrapolation, the memory wall.

Every builder takes a validated results section (relviz.experiments.load_results) and plain
scalars; live results (a rerun from the page) are passed as small lists and drawn on top
of the stored ones. No Streamlit here.
"""
from __future__ import annotations

import math
from typing import Any

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from relviz.figures.grid_canvas import GridPanel, GridPanels
from relviz.figures.heatmap import legend_below_axis, narrow_title, readable, wrap_words
from relviz.experiments import (
    IMPLEMENTATIONS,
    Setting,
    attention_matrix_bytes,
    bucket_segments,
    chunked_bytes,
    cost_rows,
    naive_gather_bytes,
    offset_matrix,
    skew_table_bytes,
)
from relviz.memory import format_bytes

#: One hue per position scheme, so a scheme keeps its colour in every chart of the page; hues far
#: apart (no two oranges). A second and third setting of one scheme in a chart get a darker and a
#: lighter shade. Schemes not listed take the spare colours in order.
SCHEME_COLOURS = {"shaw": "#1F77B4", "sinusoidal": "#FF7F0E", "t5": "#2CA02C", "alibi": "#D62728",
                  "skew": "#9467BD", "learned": "#8C564B", "none": "#7F7F7F", "rope": "#17BECF"}
SPARE_COLOURS = ["#BCBD22", "#E377C2", "#000080", "#808000"]
IMPL_COLOURS = {"skew_naive": "#C73E1D", "shaw_naive": "#E07A5F", "skew": "#2E86AB", "shaw": "#6A994E",
                "chunked": "#8E7DBE"}
CHANCE = 0.1


def _rgba(hex_colour: str, alpha: float) -> str:
    r, g, b = (int(hex_colour[i:i + 2], 16) for i in (1, 3, 5))
    return f"rgba({r}, {g}, {b}, {alpha})"


def _shade(hex_colour: str, factor: float) -> str:
    """factor < 1 darkens towards black, > 1 lightens towards white."""
    r, g, b = (int(hex_colour[i:i + 2], 16) for i in (1, 3, 5))
    mix = (lambda c: c * factor) if factor <= 1 else (lambda c: c + (255 - c) * (factor - 1))
    return "#" + "".join(f"{int(round(min(255, max(0, mix(c))))):02X}" for c in (r, g, b))


def setting_colours(settings: list[dict[str, Any]]) -> dict[str, str]:
    """Colour of every setting id of one section: its scheme's hue; further settings of the same
    scheme get a darker, then a lighter shade."""
    seen: dict[str, int] = {}
    colours = {}
    palette = dict(SCHEME_COLOURS)
    spare = iter(SPARE_COLOURS * 4)
    for s in settings:
        scheme = s.get("scheme", s["id"])
        base = palette.get(scheme) or palette.setdefault(scheme, next(spare))
        n = seen.get(scheme, 0)
        seen[scheme] = n + 1
        colours[s["id"]] = _shade(base, (1.0, 0.55, 1.45)[n % 3])
    return colours


# ---------------------------------------------------------------------------------------
# 1. Offset resolution


def _layers(n: int) -> str:
    return f"{n} layer{'s' if n > 1 else ''}"


def _overview_cells(section: dict[str, Any], n: int) -> tuple[list[str], list[str], np.ndarray, np.ndarray]:
    """One panel of the overview at ``n`` layers: row labels, column labels (the shifts), mean accuracy [rows, cols]
    as stored (float64: the ✓ compares these with the threshold, as the reading does) and per cell (min, max, std,
    most steps taken) [rows, cols, 4] in float32, as the figure sends them."""
    lookup = {(r["setting"], r["layers"], r["s"]): r for r in section["results"]}
    settings, shifts, rows = offset_matrix(section, n)
    custom = np.array([[[lookup[(st.id, n, s)]["min"], lookup[(st.id, n, s)]["max"],
                         lookup[(st.id, n, s)]["std"], max(lookup[(st.id, n, s)]["steps"])]
                        for s in shifts] for st in settings], dtype=np.float32)
    return [s.label for s in settings], [str(s) for s in shifts], np.array(rows, dtype=np.float64), custom


def overview_title(threshold: float) -> str:
    return f"Mean accuracy over seeds · ✓ = at least {threshold:.0%}"


@readable
def offset_overview(section: dict[str, Any], threshold: float, *, height: int = 380) -> go.Figure:
    """Mean accuracy per (setting, s), one panel per layer count; ✓ marks cells ≥ threshold."""
    layers = section["setup"]["layers"]
    fig = make_subplots(rows=1, cols=len(layers), shared_yaxes=True, horizontal_spacing=0.04,
                        subplot_titles=[_layers(n) for n in layers])
    for col, n in enumerate(layers, start=1):
        labels, xs, mean, custom = _overview_cells(section, n)
        fig.add_trace(go.Heatmap(
            z=mean.astype(np.float32), x=xs, y=labels, zmin=0, zmax=1, colorscale="Viridis", customdata=custom,
            colorbar=dict(title="accuracy", tickformat=".0%", len=0.9) if col == 1 else None,
            showscale=col == 1, xgap=1, ygap=1,
            hovertemplate=("%{y}, " + _layers(n) + ", s = %{x} (answer at j − i = −%{x})"
                           "<br>mean accuracy %{z:.1%} (3 seeds: %{customdata[0]:.1%}–%{customdata[1]:.1%}, "
                           "std %{customdata[2]:.3f})<br>most steps taken: %{customdata[3]:.0f}<extra></extra>")),
            row=1, col=col)
        passing = [(x, y) for y, row in zip(labels, mean.tolist()) for x, v in zip(xs, row) if v >= threshold]
        fig.add_trace(go.Scatter(
            x=[p[0] for p in passing], y=[p[1] for p in passing], mode="text", text=["✓"] * len(passing),
            textfont=dict(color="white", size=13), hoverinfo="skip", showlegend=False,
            name=f"≥ {threshold:.0%}"), row=1, col=col)
        fig.update_xaxes(title_text="shift s", type="category", row=1, col=col)
    fig.update_yaxes(autorange="reversed")
    fig.update_layout(height=height, margin=dict(l=10, r=10, t=70, b=40),
                      title=dict(text=overview_title(threshold), font=dict(size=14)))
    return fig


def offset_overview_canvas(section: dict[str, Any], threshold: float, *, title: str | None = None,
                           height: int = 380) -> GridPanels:
    """:func:`offset_overview` for the canvas component (relviz.figures.grid_canvas): the same cells, colours over
    [0, 1], ✓ marks and hover texts, redrawn in place when the threshold moves (a plotly figure is mounted anew)."""
    panels = []
    rows: list[str] = []
    for n in section["setup"]["layers"]:
        rows, xs, mean, custom = _overview_cells(section, n)
        z = mean.astype(np.float32)     # what the colour and the hover show, as the plotly twin sends it
        hover = tuple((f"{y}, {_layers(n)}, s = {x} (answer at j − i = −{x})",
                       f"mean accuracy {float(z[r, c]):.1%} (3 seeds: {float(custom[r, c, 0]):.1%}–"
                       f"{float(custom[r, c, 1]):.1%}, std {float(custom[r, c, 2]):.3f})",
                       f"most steps taken: {float(custom[r, c, 3]):.0f}")
                      for r, y in enumerate(rows) for c, x in enumerate(xs))
        panels.append(GridPanel(_layers(n), tuple(xs), z, mean >= threshold, hover, x_title="shift s"))
    ticks = (0.0, 0.2, 0.4, 0.6, 0.8, 1.0)
    return GridPanels(tuple(rows), tuple(panels), 0.0, 1.0, "accuracy", ticks, tuple(f"{t:.0%}" for t in ticks),
                      title=overview_title(threshold) if title is None else title, height=height,
                      name="offset_resolution_overview")


@readable
def offset_detail(section: dict[str, Any], setting_ids: list[str], *, live: list[dict[str, Any]] | None = None,
                  live_label: str = "live", height: int = 640) -> go.Figure:
    """Accuracy against s for the chosen settings (solid: fewest layers, dashed: most), with
    the seeds' min–max band; below, on the same s axis, how one layer of each setting sees
    offset −s: T5's buckets and Shaw's exact range / clipped tail."""
    settings = {s["id"]: Setting.from_dict(s) for s in section["settings"]}
    order = [s["id"] for s in section["settings"]]
    chosen = [sid for sid in order if sid in setting_ids]
    shifts = section["setup"]["shifts"]
    layers = section["setup"]["layers"]
    max_s = max(shifts)
    strips = [sid for sid in chosen if bucket_segments(settings[sid], max_s)]
    n_strips = len(strips)
    fig = make_subplots(rows=2, cols=1, shared_xaxes=True, vertical_spacing=0.06,
                        row_heights=[0.78, 0.22] if n_strips else [0.97, 0.03])
    lookup = {(r["setting"], r["layers"], r["s"]): r for r in section["results"]}
    colours = setting_colours(section["settings"])
    for sid in chosen:
        colour = colours[sid]
        for n in layers:
            dash = "solid" if n == min(layers) else "dash"
            entries = [lookup[(sid, n, s)] for s in shifts]
            name = f"{settings[sid].label}, {n} layer{'s' if n > 1 else ''}"
            fig.add_trace(go.Scatter(
                x=shifts + shifts[::-1], y=[e["max"] for e in entries] + [e["min"] for e in entries][::-1],
                fill="toself", mode="lines", fillcolor=_rgba(colour, 0.12), line=dict(width=0), hoverinfo="skip",
                showlegend=False, legendgroup=name), row=1, col=1)
            fig.add_trace(go.Scatter(
                x=shifts, y=[e["mean"] for e in entries], mode="lines+markers", name=name, legendgroup=name,
                line=dict(color=colour, dash=dash, width=2), marker=dict(size=6),
                customdata=[[e["min"], e["max"], max(e["steps"])] for e in entries],
                hovertemplate=(f"{name}<br>s = %{{x}}: mean %{{y:.1%}}, seeds %{{customdata[0]:.1%}}–"
                               "%{customdata[1]:.1%}<br>most steps taken %{customdata[2]}<extra></extra>")),
                row=1, col=1)
    if live:
        fig.add_trace(go.Scatter(
            x=[r["s"] for r in live], y=[r["accuracy"] for r in live], mode="lines+markers", name=live_label,
            line=dict(color="#111111", width=2, dash="dot"), marker=dict(symbol="star", size=11),
            customdata=[r["steps"] for r in live],
            hovertemplate=f"{live_label}<br>s = %{{x}}: %{{y:.1%}} after %{{customdata}} steps<extra></extra>"),
            row=1, col=1)
    fig.add_hline(y=CHANCE, line=dict(color="grey", dash="dot", width=1), row=1, col=1,
                  annotation_text="chance (10 tokens)", annotation_position="bottom right")
    # the edges of every shared group (T5's buckets, Shaw's clipped tail from k on) on the accuracy
    # axis too; exact one-offset groups would only clutter
    for sid in strips:
        colour = colours[sid]
        segments = bucket_segments(settings[sid], max_s)
        for previous, (first, last, _) in zip(segments, segments[1:]):
            if last > first or previous[1] > previous[0]:
                fig.add_vline(x=first - 0.5, line=dict(color=colour, dash="dot", width=1), opacity=0.6,
                              row=1, col=1)
    # the strips: one row per setting, one bar per group of offsets one layer cannot tell apart
    for row_index, sid in enumerate(strips):
        colour = colours[sid]
        segments = bucket_segments(settings[sid], max_s)
        for n, (first, last, label) in enumerate(segments):
            shared = last > first
            fig.add_trace(go.Bar(
                x=[last - first + 1], base=[first - 0.5], y=[settings[sid].label], orientation="h",
                marker=dict(color=_rgba(colour, 0.75 if n % 2 == 0 else 0.4),
                            line=dict(color="white", width=1)),
                text=[f"{first}–{last}" if shared else ""], textposition="inside", insidetextanchor="middle",
                hovertemplate=(f"{settings[sid].label}: s = {first}" + (f"…{last}" if shared else "")
                               + f"<br>{label}" + ("<br>one layer cannot tell these offsets apart" if shared
                                                   else "") + "<extra></extra>"),
                showlegend=False), row=2, col=1)
    fig.update_yaxes(title_text="accuracy", range=[0, 1.04], tickformat=".0%", row=1, col=1)
    fig.update_yaxes(autorange="reversed", row=2, col=1, tickfont=dict(size=11))
    fig.update_xaxes(range=[0.4, max_s + 0.6], row=1, col=1)
    fig.update_xaxes(title_text="shift s (the answer sits at j − i = −s)", range=[0.4, max_s + 0.6], row=2, col=1)
    # a strip's label that does not fit its group at 11 px is left out (its hover names the group): plotly shrank
    # "4–6" to 9.9 px at 819 px
    fig.update_layout(height=height, barmode="overlay", margin=dict(l=10, r=10, t=40, b=10),
                      legend=dict(orientation="h", yanchor="top", y=-0.14, x=0),
                      hovermode="closest", uniformtext=dict(minsize=11, mode="hide"))
    return fig


# ---------------------------------------------------------------------------------------
# 2. Length extrapolation


@readable
def extrapolation_figure(section: dict[str, Any], *, live: list[dict[str, Any]] | None = None,
                         live_label: str = "live", height: int = 500) -> go.Figure:
    """Accuracy against evaluation length (1× … 8× the training length), one line per scheme
    with the seeds' band; ✕ at the bottom where a scheme cannot run, with the reason on hover."""
    setup = section["setup"]
    train_length = setup["train_length"]
    factors = setup["factors"]
    fig = go.Figure()
    lookup = {(r["setting"], r["factor"]): r for r in section["results"]}
    colours = setting_colours(section["settings"])
    for s in section["settings"]:
        colour = colours[s["id"]]
        ok = [lookup[(s["id"], f)] for f in factors if lookup[(s["id"], f)]["cannot_run"] is None]
        bad = [lookup[(s["id"], f)] for f in factors if lookup[(s["id"], f)]["cannot_run"] is not None]
        xs = [e["eval_length"] for e in ok]
        if ok:
            fig.add_trace(go.Scatter(
                x=xs + xs[::-1], y=[e["max"] for e in ok] + [e["min"] for e in ok][::-1], fill="toself", mode="lines",
                fillcolor=_rgba(colour, 0.1), line=dict(width=0), hoverinfo="skip", showlegend=False,
                legendgroup=s["id"]))
            fig.add_trace(go.Scatter(
                x=xs, y=[e["mean"] for e in ok], mode="lines+markers", name=s["label"], legendgroup=s["id"],
                line=dict(color=colour, width=2), marker=dict(size=7),
                customdata=[[e["factor"], e["min"], e["max"]] for e in ok],
                hovertemplate=(f"{s['label']}<br>L = %{{x}} (%{{customdata[0]}}×): mean %{{y:.1%}}, seeds "
                               "%{customdata[1]:.1%}–%{customdata[2]:.1%}<extra></extra>")))
        if bad:
            fig.add_trace(go.Scatter(
                x=[e["eval_length"] for e in bad], y=[-0.04] * len(bad), mode="markers", legendgroup=s["id"],
                name=f"{s['label']}: cannot run", marker=dict(symbol="x-thin", size=12, color=colour,
                                                              line=dict(width=2.5, color=colour)),
                text=[e["cannot_run"] for e in bad],
                hovertemplate=f"{s['label']} cannot run at L = %{{x}}:<br>%{{text}}<extra></extra>"))
    if live:
        ok = [r for r in live if r["accuracy"] is not None]
        fig.add_trace(go.Scatter(
            x=[r["eval_length"] for r in ok], y=[r["accuracy"] for r in ok], mode="lines+markers", name=live_label,
            line=dict(color="#111111", width=2, dash="dot"), marker=dict(symbol="star", size=11),
            hovertemplate=f"{live_label}<br>L = %{{x}}: %{{y:.1%}}<extra></extra>"))
    # The training length is named in its tick: a note beside the line sat at the bottom, under the ✕ markers
    # of the schemes that cannot run (their row is the only free band, and it is theirs).
    fig.add_vline(x=train_length, line=dict(color="grey", dash="dash", width=1))
    fig.add_hline(y=CHANCE, line=dict(color="grey", dash="dot", width=1), annotation_text="chance",
                  annotation_position="bottom right")
    fig.update_xaxes(title_text="evaluation length L", tickvals=[f * train_length for f in factors],
                     ticktext=[f"{f * train_length}<br>{f}×" + ("<br>trained" if f == 1 else "") for f in factors])
    fig.update_yaxes(title_text="accuracy", range=[-0.08, 1.04], tickformat=".0%")
    fig.update_layout(height=height, margin=dict(l=10, r=10, t=30, b=40), hovermode="closest",
                      legend=dict(orientation="v", x=1.01, y=1))
    return fig


# ---------------------------------------------------------------------------------------
# 3. Cost: the memory wall and forward time

#: Legend names wrap to lines of at most this many characters: the memory wall in 3/5 of the page, the forward
#: time in 2/5; unwrapped they ran 24–83 px past their charts at 1024 px and at 819 px (a 125 % laptop).
WALL_CHARS = 32
TIME_CHARS = 24


def legend_lines(fig: go.Figure) -> int:
    """The lines a legend of one entry a row takes: each shown entry's lines (a wrapped name has several)."""
    return sum((t.name or "").count("<br>") + 1 for t in fig.data if t.showlegend is not False)


@readable
def memory_wall_figure(section: dict[str, Any], *, live: list[dict[str, Any]] | None = None,
                       height: int = 600) -> go.Figure:
    """Peak memory against L (log–log): measured Δpeak per implementation (markers), the
    analytic sizes of the naive L × L × D table, the skew's L × D table, one [B, H, L, L]
    tensor and the chunked temporaries (lines; dashed where extrapolated beyond the measured
    lengths), and this machine's memory (horizontal line)."""
    setup = section["setup"]
    dim, heads, batch, chunk = setup["dim"], setup["heads"], setup["batch"], setup["chunk"]
    memory = setup["memory_total_bytes"]
    measured_lengths = sorted({r["L"] for r in section["rows"]})
    l_min, l_max = min(measured_lengths), max(measured_lengths)
    top = max(l_max * 8, 65536)
    grid = np.unique(np.round(np.logspace(math.log10(l_min), math.log10(top), 80)))
    fig = go.Figure()

    def analytic(name: str, fn, colour: str, dash_beyond: bool = True) -> None:
        inside = grid[grid <= l_max]
        beyond = grid[grid >= l_max]
        fig.add_trace(go.Scatter(x=inside, y=[fn(x) for x in inside], mode="lines",
                                 name=wrap_words(name, WALL_CHARS),
                                 legendgroup=name, line=dict(color=colour, width=2),
                                 hovertemplate=f"{name}<br>L = %{{x:,.0f}}: %{{customdata}}<extra></extra>",
                                 customdata=[format_bytes(fn(x)) for x in inside]))
        fig.add_trace(go.Scatter(x=beyond, y=[fn(x) for x in beyond], mode="lines", showlegend=False,
                                 legendgroup=name, line=dict(color=colour, width=2, dash="dash"),
                                 customdata=[format_bytes(fn(x)) for x in beyond],
                                 hovertemplate=(f"{name} (analytic, beyond the measured lengths)<br>L = "
                                                "%{x:,.0f}: %{customdata}<extra></extra>")))

    analytic(f"naive table L²·D (D = {dim})", lambda x: naive_gather_bytes(x, dim), IMPL_COLOURS["skew_naive"])
    analytic(f"one [B, H, L, L] tensor (H = {heads})", lambda x: attention_matrix_bytes(x, batch, heads),
             "#555555")
    analytic(f"chunked working set 3·chunk·L·H + 4·L·H·D (chunk = {chunk})",
             lambda x: chunked_bytes(x, chunk=chunk, batch=batch, heads=heads, dim=dim), IMPL_COLOURS["chunked"])
    analytic(f"skew table L·D", lambda x: skew_table_bytes(x, dim), IMPL_COLOURS["skew"])
    for impl, label in IMPLEMENTATIONS.items():
        rows = [r for r in cost_rows(section, impl) if r["skipped"] is None]
        if not rows:
            continue
        fig.add_trace(go.Scatter(
            x=[r["L"] for r in rows], y=[max(1, r["delta_bytes"] or r["peak_bytes"]) for r in rows],
            mode="markers+lines", name=wrap_words(f"measured: {label}", WALL_CHARS),
            line=dict(color=IMPL_COLOURS[impl], width=1),
            marker=dict(color=IMPL_COLOURS[impl], size=10, symbol="diamond", line=dict(color="white", width=1)),
            customdata=[[format_bytes(max(1, r["delta_bytes"] or r["peak_bytes"])), r["forward_s"] * 1e3]
                        for r in rows],
            hovertemplate=(f"measured: {label}<br>L = %{{x}}: Δpeak %{{customdata[0]}}, forward "
                           "%{customdata[1]:.1f} ms<extra></extra>")))
    if live:
        rows = [r for r in live if r["skipped"] is None]
        if rows:
            fig.add_trace(go.Scatter(
                x=[r["L"] for r in rows], y=[max(1, r["delta_bytes"] or r["peak_bytes"]) for r in rows],
                mode="markers", name="live measurement", marker=dict(symbol="star", size=14, color="#111111"),
                customdata=[[format_bytes(max(1, r["delta_bytes"] or r["peak_bytes"])), r["forward_s"] * 1e3]
                            for r in rows],
                hovertemplate="live: L = %{x}: Δpeak %{customdata[0]}, %{customdata[1]:.1f} ms<extra></extra>"))
    fig.add_trace(go.Scatter(x=[grid[0], grid[-1]], y=[memory, memory], mode="lines",
                             name=wrap_words(f"this machine's memory ({format_bytes(memory)})", WALL_CHARS),
                             line=dict(color="black", width=3),
                             hovertemplate=f"this machine's memory: {format_bytes(memory)}<extra></extra>"))
    fig.add_vrect(x0=l_max, x1=top, fillcolor="rgba(0,0,0,0.05)", line_width=0)
    fig.add_annotation(xref="paper", yref="paper", x=0.99, y=0.02, xanchor="right", yanchor="bottom",
                       showarrow=False, text=f"beyond L = {l_max}: extrapolated (analytic), not measured",
                       font=dict(size=11, color="#555555"))
    fig.add_annotation(xref="paper", yref="y", x=0.01, y=math.log10(memory), xanchor="left", yanchor="bottom",
                       showarrow=False, text=f"this machine's memory: {format_bytes(memory)}",
                       font=dict(size=12, color="black"))
    _log_length_axis(fig, l_min, top)
    exponents = range(5, int(math.log10(memory * 30)) + 1)
    fig.update_yaxes(type="log", title_text="bytes (fp32)", range=[5, math.log10(memory * 30)],
                     tickvals=[10.0 ** e for e in exponents], ticktext=[format_bytes(10.0 ** e) for e in exponents])
    layout = legend_below_axis(dict(height=height, margin=dict(l=10, r=10, t=40, b=10)),
                               rows=legend_lines(fig))  # long names: one a row
    fig.update_layout(hovermode="closest", **layout)
    return fig


def _log_length_axis(fig: go.Figure, lo: float, hi: float) -> None:
    """A log L axis with ticks at powers of two (the lengths people use), not plotly's 2 / 5 minor labels."""
    powers = [2 ** p for p in range(int(math.log2(lo)), int(math.log2(hi)) + 2)]
    fig.update_xaxes(type="log", title_text="sequence length L", tickvals=powers,
                     ticktext=[f"{p // 1024}k" if p >= 8192 else str(p) for p in powers])


@readable
def time_figure(section: dict[str, Any], *, live: list[dict[str, Any]] | None = None,
                height: int = 470) -> go.Figure:
    """Median forward time against L per implementation (log–log); skipped cases are listed on hover."""
    fig = go.Figure()
    for impl, label in IMPLEMENTATIONS.items():
        rows = cost_rows(section, impl)
        ok = [r for r in rows if r["skipped"] is None]
        if not ok:
            continue
        fig.add_trace(go.Scatter(
            x=[r["L"] for r in ok], y=[r["forward_s"] * 1e3 for r in ok], mode="lines+markers",
            name=wrap_words(label, TIME_CHARS),
            line=dict(color=IMPL_COLOURS[impl], width=2), marker=dict(size=8),
            hovertemplate=f"{label}<br>L = %{{x}}: %{{y:.1f}} ms<extra></extra>"))
    if live:
        ok = [r for r in live if r["skipped"] is None]
        if ok:
            fig.add_trace(go.Scatter(x=[r["L"] for r in ok], y=[r["forward_s"] * 1e3 for r in ok], mode="markers",
                                     name="live measurement", marker=dict(symbol="star", size=14, color="#111111"),
                                     hovertemplate="live: L = %{x}: %{y:.1f} ms<extra></extra>"))
    lengths = [r["L"] for r in section["rows"]] + [r["L"] for r in live or []]
    _log_length_axis(fig, min(lengths), max(lengths))
    fig.update_yaxes(type="log", title_text="forward time (ms, median)", dtick=1)
    layout = legend_below_axis(dict(height=height, margin=dict(l=10, r=10, t=40, b=10)),
                               rows=legend_lines(fig))  # long names: one a row
    fig.update_layout(hovermode="closest", **layout)
    return fig


@readable
def shaw_reference_figure(table: dict[int, float], *, height: int = 260) -> go.Figure:
    """Shaw et al.'s Table 2: BLEU against the clipping distance k (published, not measured here)."""
    ks = sorted(table)
    # In a third of a 1280-px page the points sit ~30 px apart, at 819 px ~18: labels alternate above and below the
    # line (side by side they ran together, "25.825.925.8"), the first right of its point, clear of the steep line
    # to the second (at 819 px the second's label right of its point ran into the fourth's). Not clipped at the
    # plot's edge (cliponaxis): the first and last labels are wider than half a category, and lost their ends.
    fig = go.Figure(go.Scatter(
        x=[str(k) for k in ks], y=[table[k] for k in ks], mode="lines+markers+text", cliponaxis=False,
        text=[f"{table[k]:.1f}" for k in ks], line=dict(color="#555555"),
        textposition=["middle right" if n == 0 else "top center" if n % 2 else "bottom center"
                      for n in range(len(ks))],
        hovertemplate="k = %{x}: BLEU %{y} (newstest2013 EN-DE, base model)<extra></extra>", name="BLEU"))
    fig.update_xaxes(title_text="clipping distance k", type="category")
    fig.update_yaxes(title_text="BLEU (published)", range=[10, 28.5])
    # a title that fits a third of 1280 px, hung inside the figure's top edge (at plotly's place it ran 2 px above)
    fig.update_layout(narrow_title(dict(height=height, margin=dict(l=10, r=10, t=30, b=40),
                                        title=dict(text="Shaw et al., Table 2", font=dict(size=13))), lines=1))
    return fig
