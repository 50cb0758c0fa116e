// relviz's xy canvas: bars, lines and markers with min … max bars against x, in panels side by side, and one
// legend under them (relviz.figures.xy_canvas.XYImage, kind "xy"). Drawn in place when the data change: a changed
// plotly figure is a new chart to Streamlit, which plotly.js draws from scratch (the Absolute page's shift figure,
// ~2,500 SVG elements, 100-400 ms a move).
//
// Streamlit (st.components.v2) calls the default export on mount and whenever the data change, with the same
// parentElement: the state lives on that element. Every text is set with textContent or drawn, never parsed as
// HTML. After each drawing the root carries data-draws (a counter) and the window receives "relviz:drawn" (the
// slider bench listens), as relviz/components/toeplitz_canvas.js does.
//
// Arrays arrive as plotly sends them: {dtype: "f8" | "f4" | "i4", bdata: base64 of little-endian bytes}.
//
// FONT, STATES, the root with its canvas, tooltip and PNG button, the PNG download and announceDrawn come from
// relviz/components/canvas_common.js, which relviz.components.component_js serves before this file.

const TYPES = {f8: Float64Array, f4: Float32Array, i4: Int32Array};
const GAP = 56;          // px between two panels (room for the right panel's tick labels)
const LEGEND_ROW = 21;   // px per legend row

function typed(spec) {
  return new TYPES[spec.dtype](decoded(spec.bdata).buffer);
}

// {y:.4f}: fixed point as d3's ".4f"; {x} and {y} alone: the number as it is
function fill(line, values) {
  return line.replace(/\{(\w+)(?::\.(\d+)f)?\}/g, (_, name, digits) => {
    const v = values[name];
    if (v === undefined || Number.isNaN(v)) return "";
    return minus(digits === undefined ? String(v) : v.toFixed(Number(digits)));
  });
}

// Ticks on lo..hi about `spacing` px apart; `integer`: the axis holds whole numbers only, so whole-number steps.
function ticks(lo, hi, lengthPx, spacing, integer) {
  if (!(hi > lo)) return [lo];
  return stepsBetween(lo, hi, niceStep(hi - lo, Math.max(3, Math.floor(lengthPx / spacing)), integer));
}

function build(parent) {
  return canvasFrame(parent, "relviz-xy", {top: "2px", title: "Download this picture as PNG (twice the size shown)."},
                     {draw, hover, paint});
}

// Each panel's arrays decoded and its axis ranges: bars from 0 and ±0.5 around their x (plotly's category-like
// padding of a bar axis), other traces over their extent (markers with their min … max) plus 5 %. An axis whose
// every array arrived as integers (dtype i4: positions, offsets) is an integer axis (xInteger, yInteger).
function prepare(data) {
  return data.panels.map(panel => {
    const traces = panel.traces.map(t => ({...t, x: typed(t.x), y: typed(t.y),
      below: t.below ? typed(t.below) : null, above: t.above ? typed(t.above) : null}));
    let x0 = Infinity, x1 = -Infinity, y0 = Infinity, y1 = -Infinity, bars = false;
    for (const t of traces) {
      for (let k = 0; k < t.x.length; k++) {
        const lo = t.y[k] - (t.below ? t.below[k] : 0), hi = t.y[k] + (t.above ? t.above[k] : 0);
        if (t.x[k] < x0) x0 = t.x[k];
        if (t.x[k] > x1) x1 = t.x[k];
        if (lo < y0) y0 = lo;
        if (hi > y1) y1 = hi;
      }
      bars = bars || t.kind === "bar";
    }
    if (bars || panel.y_from_zero) { y0 = Math.min(0, y0); y1 = Math.max(0, y1); }
    const pad = (y1 - y0) * 0.05 || 1;
    if (!(bars || panel.y_from_zero) || y0 < 0) y0 -= pad;
    y1 += pad;
    const xpad = bars ? 0.5 : (x1 - x0) * 0.02;
    const whole = spec => !spec || spec.dtype === "i4";
    const xInteger = panel.traces.every(t => whole(t.x));
    const yInteger = panel.traces.every(t => whole(t.y) && whole(t.below) && whole(t.above));
    return {...panel, traces, x0: x0 - xpad, x1: x1 + xpad, y0, y1, xInteger, yInteger};
  });
}

function legendRows(ctx, entries, width, font) {
  ctx.font = (font - 1) + "px " + FONT;
  const rows = [[]];
  let used = 0;
  for (const t of entries) {
    const w = 36 + ctx.measureText(t.name).width + 18;
    if (used && used + w > width) { rows.push([]); used = 0; }
    rows[rows.length - 1].push({t, at: used});
    used += w;
  }
  return rows;
}

function layout(state, ctx, width) {
  const data = state.data, font = data.font || 15;
  ctx.font = (font - 1) + "px " + FONT;
  const top = (data.title ? 30 : 0) + 34;     // the panel titles
  const bottom = 8 + font + 10 + font + 8;    // tick labels, axis title
  const plotH = Math.max(60, data.height - top - bottom);
  const entries = state.panels.flatMap(p => p.traces);
  const legend = legendRows(ctx, entries, width - 20, font);
  let x = 0;
  const free = width - 12 - GAP * (state.panels.length - 1);   // 12 px on the right: the last tick label
  const panels = state.panels.map(p => {
    const yTicks = ticks(p.y0, p.y1, plotH, 42, p.yInteger);
    const labelW = Math.max(...yTicks.map(v => ctx.measureText(minus(String(v))).width));
    const left = (p.y_title ? 8 + font + 6 : 4) + labelW + 6;
    const box = {x: x + left, y: top, w: Math.max(30, free * p.share - left - 4), h: plotH, yTicks};
    box.xTicks = ticks(Math.ceil(p.x0), Math.floor(p.x1), box.w, 60, p.xInteger);
    box.slot = {x: x, w: free * p.share};
    x += free * p.share + GAP;
    return box;
  });
  const height = top + plotH + bottom + 8 + legend.length * LEGEND_ROW + 4;
  return {width, height, font, panels, legend, legendY: top + plotH + bottom + 8};
}

function paint(state, ctx, L, scale, forExport = false) {
  const data = state.data, text = forExport ? "#262730" : (getComputedStyle(state.root).color || "#262730");
  ctx.save();
  ctx.scale(scale, scale);
  if (forExport) { ctx.fillStyle = "#ffffff"; ctx.fillRect(0, 0, L.width, L.height); }
  else ctx.clearRect(0, 0, L.width, L.height);
  if (data.title) {
    ctx.fillStyle = text; ctx.font = "600 17px " + FONT; ctx.textAlign = "left"; ctx.textBaseline = "middle";
    ctx.fillText(data.title, 6, 16, L.width - 12);
  }
  state.panels.forEach((p, n) => paintPanel(ctx, p, L.panels[n], L.font, text, data.panel_title_font || 16));
  ctx.font = (L.font - 1) + "px " + FONT;
  ctx.textAlign = "left"; ctx.textBaseline = "middle";
  L.legend.forEach((row, r) => {
    const y = L.legendY + r * LEGEND_ROW + LEGEND_ROW / 2;
    for (const {t, at} of row) {
      const x = 10 + at;
      ctx.fillStyle = ctx.strokeStyle = t.colour;
      if (t.kind === "bar") ctx.fillRect(x + 10, y - 6, 12, 12);
      else if (t.kind === "line") { ctx.lineWidth = t.size; ctx.beginPath(); ctx.moveTo(x, y); ctx.lineTo(x + 30, y); ctx.stroke(); }
      else { ctx.beginPath(); ctx.arc(x + 16, y, t.size / 2, 0, 2 * Math.PI); ctx.fill(); }
      ctx.fillStyle = text;
      ctx.fillText(t.name, x + 36, y);
    }
  });
  ctx.restore();
}

function paintPanel(ctx, p, B, font, text, titleFont) {
  const X = v => B.x + (v - p.x0) / (p.x1 - p.x0) * B.w;
  const Y = v => B.y + B.h - (v - p.y0) / (p.y1 - p.y0) * B.h;
  ctx.save();
  // grid lines at the y ticks, as the app's plotly theme draws them
  ctx.strokeStyle = "rgba(49,51,63,0.1)"; ctx.lineWidth = 1;
  for (const v of B.yTicks) { ctx.beginPath(); ctx.moveTo(B.x, Math.round(Y(v)) + 0.5); ctx.lineTo(B.x + B.w, Math.round(Y(v)) + 0.5); ctx.stroke(); }
  ctx.beginPath(); ctx.rect(B.x, B.y, B.w, B.h); ctx.clip();
  const unit = B.w / (p.x1 - p.x0);
  for (const t of p.traces) {
    ctx.fillStyle = ctx.strokeStyle = t.colour;
    if (t.kind === "bar") {
      const half = Math.max(0.5, unit * 0.4);
      for (let k = 0; k < t.x.length; k++) {
        const y = Y(t.y[k]), base = Y(0);
        ctx.fillRect(X(t.x[k]) - half, Math.min(y, base), 2 * half, Math.abs(base - y));
      }
    } else if (t.kind === "line") {
      ctx.lineWidth = t.size; ctx.lineJoin = "round"; ctx.beginPath();
      for (let k = 0; k < t.x.length; k++) (k ? ctx.lineTo : ctx.moveTo).call(ctx, X(t.x[k]), Y(t.y[k]));
      ctx.stroke();
    } else {
      if (t.below) {    // each point's min … max, 2 px as plotly's error bars
        ctx.lineWidth = 2; ctx.beginPath();
        for (let k = 0; k < t.x.length; k++) {
          const x = X(t.x[k]);
          ctx.moveTo(x, Y(t.y[k] - t.below[k])); ctx.lineTo(x, Y(t.y[k] + t.above[k]));
        }
        ctx.stroke();
      }
      ctx.beginPath();
      for (let k = 0; k < t.x.length; k++) {
        const x = X(t.x[k]), y = Y(t.y[k]);
        ctx.moveTo(x + t.size / 2, y); ctx.arc(x, y, t.size / 2, 0, 2 * Math.PI);
      }
      ctx.fill();
    }
  }
  ctx.restore();
  ctx.save();
  ctx.fillStyle = ctx.strokeStyle = text;
  ctx.globalAlpha = 0.6;   // ticks and axis titles muted, as in the app's plotly charts
  ctx.font = (font - 1) + "px " + FONT;
  ctx.textAlign = "center"; ctx.textBaseline = "top";
  for (const v of B.xTicks) ctx.fillText(minus(String(v)), X(v), B.y + B.h + 8);
  ctx.textAlign = "right"; ctx.textBaseline = "middle";
  for (const v of B.yTicks) ctx.fillText(minus(String(v)), B.x - 6, Y(v));
  ctx.font = font + "px " + FONT;
  ctx.textAlign = "center"; ctx.textBaseline = "top";
  if (p.x_title) ctx.fillText(p.x_title, B.x + B.w / 2, B.y + B.h + 8 + font + 10);
  if (p.y_title) {
    ctx.save(); ctx.translate(B.x - 6 - Math.max(...B.yTicks.map(v => ctx.measureText(minus(String(v))).width)) - 8 - font / 2, B.y + B.h / 2);
    ctx.rotate(-Math.PI / 2); ctx.textBaseline = "middle"; ctx.fillText(p.y_title, 0, 0); ctx.restore();
  }
  // the title over the panel's whole slot (its tick labels' margin too), smaller where even that is too narrow
  ctx.globalAlpha = 0.8;
  let size = titleFont;
  ctx.font = size + "px " + FONT;
  while (size > 11 && ctx.measureText(p.title).width > B.slot.w) { size -= 1; ctx.font = size + "px " + FONT; }
  ctx.textBaseline = "bottom";
  const centre = Math.min(Math.max(B.x + B.w / 2, B.slot.x + B.slot.w / 2), B.slot.x + B.slot.w - ctx.measureText(p.title).width / 2);
  ctx.fillText(p.title, Math.max(ctx.measureText(p.title).width / 2, centre), B.y - 8);
  ctx.restore();
}

function draw(state) {
  const width = rootWidth(state, 240, 600);
  const ctx = state.canvas.getContext("2d");
  const L = layout(state, ctx, width);
  paint(state, ctx, L, sizeCanvas(state, L));
  state.root.dataset.ticks = JSON.stringify(L.panels.map(B => ({x: B.xTicks, y: B.yTicks})));   // as drawn
}

// The hover: the panel under the pointer, the x nearest to it, and every trace's lines at that x.
function hover(state, event) {
  const at = pointerAt(state, event);
  if (!at) return;
  const {L, x: px, y: py} = at;
  const n = L.panels.findIndex(B => px >= B.x && px <= B.x + B.w && py >= B.y && py <= B.y + B.h);
  if (n < 0) { state.tip.style.display = "none"; return; }
  const p = state.panels[n], B = L.panels[n];
  const xv = p.x0 + (px - B.x) / B.w * (p.x1 - p.x0);
  const lines = [];
  for (const t of p.traces) {
    let lo = 0, hi = t.x.length - 1;     // x ascending: the nearest by bisection
    while (hi - lo > 1) { const mid = (lo + hi) >> 1; if (t.x[mid] <= xv) lo = mid; else hi = mid; }
    const k = Math.abs(t.x[hi] - xv) < Math.abs(t.x[lo] - xv) ? hi : lo;
    lines.push({colour: t.colour, text: t.hover.map(line => fill(line, {x: t.x[k], y: t.y[k]})).join("  ")});
  }
  const rows = tipRows(lines.map(line => line.text));
  rows.forEach((div, k) => {
    div.style.borderLeft = "4px solid " + lines[k].colour;
    div.style.paddingLeft = "5px";
  });
  showTip(state.tip, rows, px, py, L);
}

export default function (component) {
  const got = received(component, build);
  if (!got) return;
  const {state, data, changed} = got;
  if (changed) state.panels = prepare(data);
  draw(state);
  state.root.dataset.kind = data.kind;
  state.canvas.setAttribute("aria-label", data.panels.map(p => p.title).join("; "));
  announceDrawn(state, data.kind, changed);
}
