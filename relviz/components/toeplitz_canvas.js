// relviz's Toeplitz canvas: draws a window of a Toeplitz matrix (or a pooled overview) from its
// per-offset values, in the browser, and computes the hover there.
//
// Streamlit (st.components.v2) calls the default export on mount and again whenever the data change,
// with the same parentElement (a shadow root): the drawing state lives on that element. Every text a
// visitor sees is set with textContent, never parsed as HTML. After each drawing the root carries
// data-draws (a counter) and the window receives a "relviz:drawn" event (the slider bench listens).
//
// data.kind == "window": cell (r, c) of the window holds entry c − r + rows − 1 of each per-offset
//   slice (pixels: colour index; fields[n].values: hover field n).
// data.kind == "overview": the whole q_len × k_len matrix pooled in blocks of `block`; each block's
//   exact mean, min and max come from the server per class of blocks (a few thousand numbers at any
//   length, 2^20 positions included). A moved window only moves the rectangle: the picture is not
//   recomputed.
// data.kind == "grid": any rows × cols map (relviz.figures.toeplitz_canvas.GridImage): pixels and values are
//   base64, one uint8 colour index and one float32 value per cell, row-major; an optional outlined block
//   of cells; hover lines name {y} (the row's label, y_first + r), {x}, {a} (|x − y|: a distance) and {v} (the value).
// data.bar_below (any kind): the colour bar lies under the picture, its labels horizontal (a map in a third of
//   the page: a bar at the right took ~70 of ~190 px at 1024 px wide).
//
// FONT, STATES, the root with its canvas, tooltip and PNG button, the PNG download and announceDrawn come from
// relviz/components/canvas_common.js, which relviz.components.component_js serves before this file.

function format(value, fmt) {
  if (value === null || value === undefined || Number.isNaN(value)) return "NaN";
  if (fmt === "d") return minus(Math.round(value).toString());
  const digits = /\.(\d+)g/.exec(fmt);
  return minus(Number(value).toPrecision(digits ? Number(digits[1]) : 4));
}

// How many blocks apart the ticks of a pooled axis (count blocks of `block` entries) sit, at most
// `most` ticks: a 1-2-5 number of entries that is a whole number of blocks (200 entries of 8-blocks)
// if one gives at least 3 ticks, else a power of two of blocks (2048 entries of 64-blocks). Any other
// multiple of the block reads as an odd number (79 blocks of 64 = 5056).
function blockTickEvery(count, block, most) {
  const fits = e => Math.ceil(count / e) <= most;
  const mult = [2, 2.5, 2];
  for (let s = 1, k = 0; s <= count * block; s = Math.round(s * mult[k++ % 3])) {
    if (s % block === 0 && fits(s / block)) {
      if (Math.ceil(count / (s / block)) >= 3) return s / block;
      break;
    }
  }
  let e = 1;
  while (!fits(e)) e *= 2;
  return e;
}

function build(parent) {
  return canvasFrame(parent, "relviz-toeplitz", {
    top: "2px",
    title: "Download this picture as PNG (twice the size shown). It is drawn on a canvas, so PNG only: " +
      "for the exact numbers use the window and per-offset downloads below.",
  }, {draw, hover, paint});
}

// --- Geometry: the picture, its cells, and what each cell holds -----------------------------------

function grid(data) {
  if (data.kind === "overview") {
    const b = data.block;
    return {rows: Math.ceil(data.q_len / b), cols: Math.ceil(data.k_len / b)};
  }
  return {rows: data.rows, cols: data.cols};
}

// Overview: mean, min, max of block (R, C). The grid of blocks is Toeplitz but for its last row and
// column (the only blocks that may be clipped), so the server sends one entry per class of blocks
// (relviz.toeplitz_display.PooledView): class ((C − R + rows − 1) · 2 + [R last]) · 2 + [C last].
function blockStats(state, R, C) {
  const data = state.data, b = data.block, {rows, cols} = grid(data);
  const r0 = R * b, r1 = Math.min(r0 + b, data.q_len), c0 = C * b, c1 = Math.min(c0 + b, data.k_len);
  const k = ((C - R + rows - 1) * 2 + (R === rows - 1 ? 1 : 0)) * 2 + (C === cols - 1 ? 1 : 0);
  const p = data.pooled;
  return {mean: p.mean[k], min: p.min[k], max: p.max[k], r0, r1, c0, c1};
}

function overviewLevels(state) {
  const data = state.data;
  const {rows, cols} = grid(data);
  const levels = new Uint8Array(rows * cols);
  const span = data.colour.zmax - data.colour.zmin;
  for (let R = 0; R < rows; R++) {
    for (let C = 0; C < cols; C++) {
      const m = blockStats(state, R, C).mean;
      const level = span > 0 ? Math.round((m - data.colour.zmin) / span * 255) : 0;
      levels[R * cols + C] = Math.max(0, Math.min(255, level));
    }
  }
  return levels;
}

function bitmap(state) {
  const data = state.data;
  const {rows, cols} = grid(data);
  const rgb = palette(data.palette);
  const image = new ImageData(cols, rows);
  const px = image.data;
  const levels = data.kind === "overview" ? overviewLevels(state) : data.kind === "grid" ? decoded(data.pixels) : null;
  if (data.kind === "grid") state.values = new Float32Array(decoded(data.values).buffer);
  for (let r = 0; r < rows; r++) {
    for (let c = 0; c < cols; c++) {
      const k = levels ? levels[r * cols + c] : data.pixels[c - r + rows - 1];
      const o = 4 * (r * cols + c);
      px[o] = rgb[3 * k]; px[o + 1] = rgb[3 * k + 1]; px[o + 2] = rgb[3 * k + 2]; px[o + 3] = 255;
    }
  }
  const off = document.createElement("canvas");
  off.width = cols; off.height = rows;
  off.getContext("2d").putImageData(image, 0, 0);
  return off;
}

// --- Layout ---------------------------------------------------------------------------------------

function axisTicks(first, count, lengthPx, shift, block) {
  // Integer ticks on indices first..first+count−1 (block > 1: ticks at block starts, labelled first + k·block).
  const most = Math.max(2, Math.floor(lengthPx / 55));
  const step = niceStep(Math.max(count - 1, 1) * block, most, true);
  const ticks = [];
  if (block > 1) { // ticks at block starts, a round number of entries apart (64-blocks: 0, 2048, 4096 …)
    const every = blockTickEvery(count, block, Math.min(8, most));
    for (let k = 0; k < count; k += every) ticks.push({at: k, label: minus(String(k * block + shift))});
    return ticks;
  }
  const start = Math.ceil(first / step) * step;
  for (let v = start; v <= first + count - 1; v += step) ticks.push({at: v - first, label: minus(String(v + shift))});
  return ticks;
}

function layout(state, ctx, width) {
  const data = state.data;
  const {rows, cols} = grid(data);
  const font = data.font || 15;
  const height = data.height || 430;
  ctx.font = (font - 1) + "px " + FONT;
  const gridKind = data.kind === "grid";
  const rowFirst = data.kind === "overview" ? 0 : gridKind ? data.y_first : data.q_offset + data.row0;
  const colFirst = data.kind === "overview" ? 0 : gridKind ? data.x_first : data.col0;
  const lastRow = data.kind === "overview" ? data.q_len - 1 + data.q_offset : rowFirst + rows - 1;
  const firstLabel = data.kind === "overview" ? data.q_offset : rowFirst;  // the overview's ticks are labelled from q_offset
  const yLabelWidth = Math.max(ctx.measureText(minus(String(lastRow))).width, ctx.measureText(minus(String(firstLabel))).width);
  const top = data.title ? (data.subtitle ? 58 : 40) : 26; // room for the PNG button above the picture
  const left = 8 + font + 8 + yLabelWidth + 6;
  const below = !!data.bar_below;
  const barWidth = below ? 12 : 14;
  // below: the bar, its labels and its title under the key axis's title
  const bottom = 6 + font + 8 + font + 10 + (below ? 6 + barWidth + 4 + font + 4 + font + 6 : 0);
  // colour bar at the right: gap, bar, tick labels, rotated title
  const barLabels = below ? [] : colourBarTicks(data).map(t => ctx.measureText(t.label).width);
  const right = below ? 12 : 14 + barWidth + 5 + Math.max(20, ...barLabels) + 8 + font + 6;
  const areaW = Math.max(40, width - left - right), areaH = Math.max(40, height - top - bottom);
  const cell = Math.min(areaW / cols, areaH / rows);
  const w = cell * cols, h = cell * rows;
  // square cells: a narrow column shortens the picture instead of leaving empty space below it
  const used = Math.min(height, Math.ceil(top + h + bottom));
  const x0 = left, y0 = top;
  if (below) {
    return {width, height: used, font, rows, cols, cell, x0, y0, w, h, rowFirst, colFirst, below, barWidth,
            barX: x0, barY: y0 + h + 6 + font + 8 + font + 10 + 6, barH: barWidth, barW: w};
  }
  return {width, height: used, font, rows, cols, cell, x0, y0, w, h, rowFirst, colFirst, barWidth,
          barX: x0 + w + 14, barY: y0, barH: h};
}

function colourBarTicks(data, most = 6) {
  const c = data.colour;
  if (c.kind === "discrete") {
    const n = c.hi - c.lo + 1;
    return c.tickvals.map((v, k) => ({frac: (v - c.lo + 0.5) / n, label: c.ticktext[k]}));
  }
  const span = c.zmax - c.zmin;
  if (!(span > 0)) return [{frac: 0.5, label: format(c.zmin, ".3g")}];
  const step = niceStep(span, most);
  return stepsBetween(c.zmin, c.zmax, step).map(v => ({frac: (v - c.zmin) / span, label: minus(String(v))}));
}

// --- Drawing --------------------------------------------------------------------------------------

function paint(state, ctx, L, scale, forExport) {
  const data = state.data;
  const text = forExport ? "#262730" : (getComputedStyle(state.root).color || "#262730");
  ctx.save();
  ctx.scale(scale, scale);
  if (forExport) { ctx.fillStyle = "#ffffff"; ctx.fillRect(0, 0, L.width, L.height); }
  else ctx.clearRect(0, 0, L.width, L.height);
  ctx.fillStyle = text;
  ctx.strokeStyle = text;
  if (data.title) {
    ctx.font = "600 " + (data.title_font || 17) + "px " + FONT;
    ctx.textAlign = "left"; ctx.textBaseline = "middle";
    ctx.fillText(data.title, 6, 20, Math.max(60, L.width - 80)); // the PNG button sits at the right
    if (data.subtitle) {
      ctx.font = Math.round((data.title_font || 17) * 0.75) + "px " + FONT;
      ctx.fillText(data.subtitle, 6, 41, Math.max(60, L.width - 80));
    }
  }
  ctx.imageSmoothingEnabled = false;
  ctx.drawImage(state.bitmap, L.x0, L.y0, L.w, L.h);
  if (data.kind === "overview" && data.window) drawWindow(ctx, L, data);
  if (data.kind === "grid" && data.outline) drawOutline(ctx, L, data.outline);
  // axes: key axis at the bottom, query 0 on top; ticks and axis titles muted, as in the app's plotly charts
  ctx.globalAlpha = 0.6;  // plotly's ticks in the app's theme: the text colour at 60 %
  ctx.font = (L.font - 1) + "px " + FONT;
  ctx.lineWidth = 1;
  const block = data.kind === "overview" ? data.block : 1;
  ctx.textAlign = "center"; ctx.textBaseline = "top";
  const xTicks = axisTicks(L.colFirst, L.cols, L.w, 0, block);
  for (const t of xTicks) {
    const x = L.x0 + (t.at + 0.5) * L.cell;
    ctx.beginPath(); ctx.moveTo(x, L.y0 + L.h); ctx.lineTo(x, L.y0 + L.h + 4); ctx.stroke();
    ctx.fillText(t.label, x, L.y0 + L.h + 6);
  }
  ctx.textAlign = "right"; ctx.textBaseline = "middle";
  const rowShift = data.kind === "overview" ? data.q_offset : 0;
  const yTicks = axisTicks(L.rowFirst, L.rows, L.h, rowShift, block);
  state.root.dataset.ticks = JSON.stringify({x: xTicks.map(t => t.label), y: yTicks.map(t => t.label)});
  for (const t of yTicks) {
    const y = L.y0 + (t.at + 0.5) * L.cell;
    ctx.beginPath(); ctx.moveTo(L.x0 - 4, y); ctx.lineTo(L.x0, y); ctx.stroke();
    ctx.fillText(t.label, L.x0 - 6, y);
  }
  ctx.font = L.font + "px " + FONT;
  ctx.textAlign = "center"; ctx.textBaseline = "bottom";
  ctx.fillText(data.x_title, L.x0 + L.w / 2, L.y0 + L.h + 6 + L.font + 8 + L.font);
  ctx.save();
  ctx.translate(8 + L.font / 2, L.y0 + L.h / 2); ctx.rotate(-Math.PI / 2);
  ctx.textBaseline = "middle"; ctx.fillText(data.y_title, 0, 0);
  ctx.restore();
  ctx.globalAlpha = 1;
  drawColourBar(ctx, L, data, text);
  ctx.restore();
}

function drawWindow(ctx, L, data) {
  const w = data.window, b = data.block;
  const x = L.x0 + w.col0 / b * L.cell, y = L.y0 + w.row0 / b * L.cell;
  const ww = w.cols / b * L.cell, hh = w.rows / b * L.cell;
  ctx.save();
  ctx.strokeStyle = "#ffffff"; ctx.lineWidth = 3; ctx.setLineDash([]);
  ctx.strokeRect(x, y, ww, hh);
  ctx.strokeStyle = "#000000"; ctx.lineWidth = 1.5; ctx.setLineDash([2, 3]);
  ctx.strokeRect(x, y, ww, hh);
  ctx.restore();
}

// The grid's outlined cells: a red frame 3 px wide, as the plotly maps outline their query patch.
function drawOutline(ctx, L, o) {
  ctx.save();
  ctx.strokeStyle = "#d62728"; ctx.lineWidth = 3;
  ctx.strokeRect(L.x0 + o.col * L.cell, L.y0 + o.row * L.cell, o.cols * L.cell, o.rows * L.cell);
  ctx.restore();
}

function drawColourBar(ctx, L, data, text) {
  if (L.below) { drawColourBarBelow(ctx, L, data, text); return; }
  const rgb = palette(data.palette);
  const n = rgb.length / 3;
  const c = data.colour;
  for (let k = 0; k < n; k++) {
    // discrete: one band per value (lowest at the bottom); continuous: 256 levels
    const y1 = L.barY + L.barH * (1 - k / n), y0 = L.barY + L.barH * (1 - (k + 1) / n);
    ctx.fillStyle = colourOf(rgb, k);
    ctx.fillRect(L.barX, Math.floor(y0), L.barWidth, Math.ceil(y1) - Math.floor(y0));
  }
  ctx.fillStyle = text;
  ctx.font = (L.font - 1) + "px " + FONT;
  ctx.textAlign = "left"; ctx.textBaseline = "middle";
  let widest = 0;
  for (const t of colourBarTicks(data)) {
    const y = L.barY + L.barH * (1 - t.frac);
    ctx.fillText(t.label, L.barX + L.barWidth + 5, y);
    widest = Math.max(widest, ctx.measureText(t.label).width);
  }
  ctx.font = L.font + "px " + FONT;
  ctx.save();
  ctx.translate(L.barX + L.barWidth + 5 + Math.max(20, widest) + 8 + L.font / 2, L.barY + L.barH / 2);
  ctx.rotate(Math.PI / 2); ctx.textAlign = "center"; ctx.textBaseline = "middle";
  ctx.fillText(c.title || data.value_label, 0, 0);
  ctx.restore();
}

// The colour bar under the picture: lowest value at the left, labels under it, its title under them.
function drawColourBarBelow(ctx, L, data, text) {
  const rgb = palette(data.palette);
  const n = rgb.length / 3;
  for (let k = 0; k < n; k++) {
    const x0 = L.barX + L.barW * k / n, x1 = L.barX + L.barW * (k + 1) / n;
    ctx.fillStyle = colourOf(rgb, k);
    ctx.fillRect(Math.floor(x0), L.barY, Math.ceil(x1) - Math.floor(x0), L.barH);
  }
  ctx.fillStyle = text;
  ctx.font = (L.font - 1) + "px " + FONT;
  ctx.textAlign = "center"; ctx.textBaseline = "top";
  // as many labels as fit side by side (a label ~40 px wide), never one over another
  const ticks = colourBarTicks(data, Math.max(3, Math.floor(L.barW / 48)));
  let last = -Infinity;
  for (const t of ticks) {
    const x = L.barX + L.barW * t.frac, half = ctx.measureText(t.label).width / 2;
    if (x - half < last + 4) continue;
    ctx.fillText(t.label, Math.min(Math.max(x, L.barX + half - 6), L.barX + L.barW + 6 - half), L.barY + L.barH + 4);
    last = x + half;
  }
  ctx.font = L.font + "px " + FONT;
  ctx.fillText(data.colour.title || data.value_label, L.barX + L.barW / 2, L.barY + L.barH + 4 + L.font + 4);
}

function draw(state, fresh) {
  const data = state.data;
  if (fresh) state.bitmap = bitmap(state);
  // never wider than its column (a map in a third of an 819 px page has ~150 px): 120 px at the least
  const width = rootWidth(state, 120, 600);
  const ctx = state.canvas.getContext("2d");
  const L = layout(state, ctx, width);
  paint(state, ctx, L, sizeCanvas(state, L), false);
}

// --- Hover ----------------------------------------------------------------------------------------

function hoverLines(state, r, c) {
  const data = state.data;
  if (data.kind === "overview") {
    const s = blockStats(state, r, c);
    const range = (a, b) => (b - a > 1 ? minus(a) + "\u2013" + minus(b - 1) : minus(a));
    const q = data.q_offset;
    return [
      "i = " + range(s.r0 + q, s.r1 + q),
      "j = " + range(s.c0, s.c1),
      "j \u2212 i = " + format(s.c0 - (q + s.r1 - 1), "d") + " \u2026 " + format(s.c1 - 1 - (q + s.r0), "d"),
      data.value_label + ": mean " + format(s.mean, ".4g") + ", min " + format(s.min, data.format) +
        ", max " + format(s.max, data.format),
      "block " + data.block + " \u00d7 " + data.block,
    ];
  }
  if (data.kind === "grid") {
    const value = state.values[r * data.cols + c];
    return data.lines.map(line => line.replace(/\{(\w+)\}/g, (_, name) => {
      if (name === "y") return minus(data.y_first + r);
      if (name === "x") return minus(data.x_first + c);
      if (name === "a") return String(Math.abs(data.x_first + c - data.y_first - r));
      return name === "v" ? format(value, data.format) : "";
    }));
  }
  const i = data.q_offset + data.row0 + r, j = data.col0 + c, t = c - r + data.rows - 1;
  return data.lines.map(line => line.replace(/\{(\w+)\}/g, (_, name) => {
    if (name === "i") return minus(i);
    if (name === "j") return minus(j);
    if (name === "d") return minus(j - i);
    const f = data.fields[Number(name)];
    return f ? format(f.values[t], f.format) : "";
  }));
}

function hover(state, event) {
  const at = pointerAt(state, event);
  if (!at) return;
  const {L, x, y} = at;
  const c = Math.floor((x - L.x0) / L.cell), r = Math.floor((y - L.y0) / L.cell);
  if (c < 0 || r < 0 || c >= L.cols || r >= L.rows) { state.tip.style.display = "none"; return; }
  state.tip.dataset.row = String(r);
  state.tip.dataset.col = String(c);
  showTip(state.tip, tipRows(hoverLines(state, r, c)), x, y, L);
}

export default function (component) {
  const got = received(component, build);
  if (!got) return;
  const {state, data, changed} = got;
  // everything but an overview's rectangle decides the picture
  const picture = data.kind === "overview" ? JSON.stringify({...data, window: null, name: null}) : state.signature;
  const fresh = picture !== state.picture;
  state.picture = picture;
  draw(state, fresh);
  state.root.dataset.kind = data.kind;
  state.canvas.setAttribute("aria-label", (data.title ? data.title + ": " : "") + data.value_label + " for " +
    data.y_title + " × " + data.x_title);
  const L = state.layout; // where the cells are, in CSS px of the canvas (tests hover a chosen cell)
  state.root.dataset.plot = JSON.stringify({x0: L.x0, y0: L.y0, cell: L.cell, rows: L.rows, cols: L.cols});
  announceDrawn(state, data.kind, changed);
}
