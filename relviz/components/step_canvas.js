// relviz's steps component: the steps of the Music Transformer skew as one element (relviz.figures.skew_canvas.
// steps_json): panels in a grid of columns, each a step (its title, its picture, its caption) or a check panel (its
// title and lines looking like Streamlit's success, warning, caption and text). Each step's picture
// (relviz.figures.skew_canvas.step_payload) is drawn on a canvas as its plotly twin (relviz.figures.skew.step_figure)
// draws it: cells coloured from 256 levels with a 1 px gap, the grey pad, hatched and outlined garbage, veiled
// columns about to be dropped, each cell's label (where they fit) and its hover text, integer ticks every `dtick`,
// axis titles and a flat colour bar below.
//
// One element for a tab's steps, where each step was three (a title, a canvas, a caption) and the check five:
// Streamlit's React re-rendered each of them on every move (issue 34). Streamlit (st.components.v2) calls the
// default export on mount and whenever the data change, with the same parentElement: the grid and each picture's
// drawing state live on that element, so an L move redraws in place. Every text is set with textContent or drawn on
// the canvas, never parsed as HTML. After each picture's drawing its root carries data-draws and the window
// receives a "relviz:drawn" event (the slider bench listens).
//
// FONT, STATES, the root with its canvas, tooltip and PNG button, the PNG download and announceDrawn come from
// relviz/components/canvas_common.js, which relviz.components.component_js serves before this file.

const HIDDEN = 1, PAD = 2, HATCHED = 4, VEILED = 8, DARK_LABEL = 16;  // relviz.figures.skew_canvas's looks
const PAD_COLOUR = "#9e9e9e";

// The colour bar's tick step as plotly.js picks it for a flat bar `lengthPx` long (axes.autoTicks): about one tick
// per 80 px, 5 to 10 of them, the rough step rounded up to 2, 5 or 10 times a power of ten.
function barStep(span, lengthPx) {
  const raw = span / (Math.min(Math.max(lengthPx / 80, 4), 9) + 1);
  const base = Math.pow(10, Math.floor(Math.log10(raw)));
  for (const m of [2, 5, 10]) if (m * base >= raw) return m * base;
  return 10 * base;
}

function build(parent) {
  return canvasFrame(parent, "relviz-step", {
    top: "0",
    title: "Download this picture as PNG (twice the size shown); the step's numbers are in the downloads below.",
  }, {draw, hover, paint});
}

// As plotly lays out a heatmap with square cells (scaleanchor) and constrain "domain": the plot area within the
// margins, the cells as large as both sides allow, the spare length split evenly on both sides.
function layout(data, width) {
  const m = data.margin, height = data.height;
  const areaW = Math.max(20, width - m.l - m.r), areaH = Math.max(20, height - m.t - m.b);
  const cell = Math.min(areaW / data.cols, areaH / data.rows);
  const w = cell * data.cols, h = cell * data.rows;
  return {width, height, cell, w, h, x0: m.l + (areaW - w) / 2, y0: m.t + (areaH - h) / 2, paperX: m.l, paperW: areaW};
}

function paint(state, ctx, L, scale, forExport) {
  const data = state.data, rows = data.rows, cols = data.cols, c0 = L.cell;
  const text = forExport ? "#262730" : (getComputedStyle(state.root).color || "#262730");
  ctx.save();
  ctx.scale(scale, scale);
  if (forExport) { ctx.fillStyle = "#ffffff"; ctx.fillRect(0, 0, L.width, L.height); }
  else ctx.clearRect(0, 0, L.width, L.height);
  ctx.fillStyle = data.background;
  ctx.fillRect(L.x0, L.y0, L.w, L.h);
  const rgb = state.rgb, levels = state.levels, looks = state.looks;
  const at = (r, c) => [L.x0 + c * c0 + 0.5, L.y0 + r * c0 + 0.5, c0 - 1, c0 - 1];  // a 1 px gap (xgap, ygap)
  for (let r = 0; r < rows; r++) {
    for (let c = 0; c < cols; c++) {
      const k = r * cols + c, look = looks[k];
      if (look & PAD) ctx.fillStyle = PAD_COLOUR;
      else if (look & HIDDEN) continue;
      else ctx.fillStyle = colourOf(rgb, levels[k]);
      ctx.fillRect(...at(r, c));
    }
  }
  for (let r = 0; r < rows; r++) {
    for (let c = 0; c < cols; c++) {
      const look = looks[r * cols + c];
      const [x, y, w, h] = [L.x0 + c * c0, L.y0 + r * c0, c0, c0];
      if (look & HATCHED) {  // "/" lines 9 px apart, outlined as the plotly twin's garbage trace
        ctx.save();
        ctx.beginPath(); ctx.rect(x, y, w, h); ctx.clip();
        ctx.strokeStyle = "rgba(0,0,0,0.55)"; ctx.lineWidth = 1.1;
        ctx.beginPath();
        for (let s = -h; s < w + h; s += 9) { ctx.moveTo(x + s, y + h); ctx.lineTo(x + s + h, y); }
        ctx.stroke();
        ctx.restore();
        ctx.strokeStyle = "#111111"; ctx.lineWidth = 1; ctx.setLineDash([]);
        ctx.strokeRect(x, y, w, h);
      } else if (look & VEILED) {  // about to be cut off: a white veil and a dotted outline
        ctx.fillStyle = "rgba(255,255,255,0.72)"; ctx.fillRect(x, y, w, h);
        ctx.strokeStyle = "#555555"; ctx.lineWidth = 1.5; ctx.setLineDash([2, 3]);
        ctx.strokeRect(x, y, w, h); ctx.setLineDash([]);
      }
    }
  }
  if (data.labels_on) {
    ctx.font = data.text_size + "px " + FONT;
    ctx.textAlign = "center"; ctx.textBaseline = "middle";
    for (let r = 0; r < rows; r++) {
      for (let c = 0; c < cols; c++) {
        const k = r * cols + c, label = data.labels[k];
        if (!label) continue;
        ctx.fillStyle = looks[k] & DARK_LABEL ? "#000000" : "#ffffff";
        ctx.fillText(label, L.x0 + (c + 0.5) * c0, L.y0 + (r + 0.5) * c0);
      }
    }
  }
  // ticks and axis titles, muted as in the app's plotly charts (the text colour at 60 %)
  ctx.globalAlpha = 0.6;
  ctx.fillStyle = text;
  ctx.font = data.tick_font + "px " + FONT;
  ctx.textAlign = "center"; ctx.textBaseline = "top";
  for (let c = 0; c < cols; c += data.dtick[0]) ctx.fillText(String(c), L.x0 + (c + 0.5) * c0, L.y0 + L.h + 5);
  ctx.textAlign = "right"; ctx.textBaseline = "middle";
  let widest = 0;
  for (let r = 0; r < rows; r += data.dtick[1]) {
    ctx.fillText(String(r), L.x0 - 6, L.y0 + (r + 0.5) * c0);
    widest = Math.max(widest, ctx.measureText(String(r)).width);
  }
  ctx.font = data.font + "px " + FONT;
  ctx.textAlign = "center"; ctx.textBaseline = "top";
  ctx.fillText(data.x_title, L.x0 + L.w / 2, L.y0 + L.h + 5 + data.tick_font + 10);
  ctx.save();
  ctx.translate(Math.max(data.font / 2 + 2, L.x0 - 6 - widest - 10 - data.font / 2), L.y0 + L.h / 2);
  ctx.rotate(-Math.PI / 2); ctx.textBaseline = "middle";
  ctx.fillText(data.y_title, 0, 0);
  ctx.restore();
  ctx.globalAlpha = 1;
  if (data.bar) drawBar(ctx, L, data, rgb, text);
  ctx.restore();
}

// The flat colour bar under the plot (relviz.figures.heatmap.colour_bar_below): 10 px tall, its top 24 px below
// the top of the figure's bottom COLOUR_BAR_BELOW px, as wide as the plot area; its title above, ticks below.
function drawBar(ctx, L, data, rgb, text) {
  const top = L.height - (data.bar_below - 24), x = L.paperX, w = L.paperW;
  const n = rgb.length / 3;
  for (let k = 0; k < n; k++) {
    ctx.fillStyle = colourOf(rgb, k);
    ctx.fillRect(x + (w * k) / n, top, Math.ceil(w / n) + 0.5, 10);
  }
  ctx.fillStyle = text;
  ctx.font = data.font + "px " + FONT;
  ctx.textAlign = "center"; ctx.textBaseline = "bottom";
  ctx.fillText(data.bar, x + w / 2, top - 3);
  ctx.globalAlpha = 0.6;
  ctx.font = data.tick_font + "px " + FONT;
  ctx.textBaseline = "top";
  const span = data.zmax - data.zmin, step = barStep(span, w);
  for (const v of stepsBetween(data.zmin, data.zmax, step)) {
    ctx.fillText(minus(v), x + w * (v - data.zmin) / span, top + 13);
  }
  ctx.globalAlpha = 1;
}

function draw(state) {
  const width = rootWidth(state, 120, 300);
  const L = layout(state.data, width);
  paint(state, state.canvas.getContext("2d"), L, sizeCanvas(state, L), false);
}

function hover(state, event) {
  const at = pointerAt(state, event);
  if (!at) return;
  const {L, x, y} = at;
  const c = Math.floor((x - L.x0) / L.cell), r = Math.floor((y - L.y0) / L.cell);
  const tip = state.tip;
  if (c < 0 || r < 0 || c >= state.data.cols || r >= state.data.rows) { tip.style.display = "none"; return; }
  tip.dataset.row = String(r);
  tip.dataset.col = String(c);
  showTip(tip, tipRows(state.data.hover[r * state.data.cols + c].split("<br>")), x, y, L, 0);
}

// The grid's look, as Streamlit lays out st.columns (a 16 px gap; one column under 640 px of window) and draws
// st.markdown (a bold title), st.caption, st.success and st.warning in the app's light theme.
const STEPS_CSS = `
.relviz-steps { display: grid; column-gap: 16px; row-gap: 16px; color: rgb(47, 45, 43); font-family: ${FONT};
  font-size: 16px; line-height: 1.6; overflow-wrap: break-word; }
.relviz-panel { display: flex; flex-direction: column; gap: 16px; min-width: 0; }
.relviz-title { font-weight: 600; margin: 0; }
.relviz-caption { font-size: 14px; color: rgba(47, 45, 43, 0.6); margin: 0; }
.relviz-line { margin: 0; }
.relviz-success, .relviz-warning { display: flex; gap: 8px; padding: 16px; border-radius: 8px; line-height: 1.5; }
.relviz-success { background: rgb(241, 251, 246); color: rgb(12, 90, 68); }
.relviz-warning { background: rgb(255, 250, 229); color: rgb(149, 107, 15); }
.relviz-icon { font-family: "Material Symbols Rounded"; font-size: 20px; line-height: 24px; font-weight: 400;
  user-select: none; }
.relviz-steps code { font-family: "Source Code Pro", monospace; font-size: 12px; background: rgb(247, 247, 246);
  padding: 2.4px 4.8px; border-radius: 4px; }
@media (max-width: 640px) { .relviz-steps { grid-template-columns: 1fr !important; }
  .relviz-panel { grid-column: auto !important; } }
`;
const ICONS = {success: "check_circle", warning: "warning"};
const GRIDS = new WeakMap();

// A line's runs ([text, mark]: relviz.figures.skew_canvas.inline_runs) as elements, each text set with textContent.
function runsInto(element, runs) {
  element.replaceChildren(...runs.map(([text, mark]) => {
    const tag = {b: "strong", i: "em", code: "code"}[mark];
    const node = tag ? document.createElement(tag) : document.createTextNode(text);
    if (tag) node.textContent = text;
    return node;
  }));
}

function textDiv(className, text) {
  const div = document.createElement("div");
  div.className = className;
  if (text !== undefined) div.textContent = text;
  return div;
}

// A step's panel: title, picture (a canvas frame, its state kept on the panel), caption.
function stepPanel(panel) {
  const title = textDiv("relviz-title"), holder = document.createElement("div"), caption = textDiv("relviz-caption");
  title.setAttribute("role", "heading");
  title.setAttribute("aria-level", "4");
  panel.element.append(title, holder, caption);
  panel.parts = {title, caption, picture: build(holder)};
}

function updateStep(panel, data, toolbar) {
  const {title, caption, picture: state} = panel.parts;
  if (title.textContent !== data.title) title.textContent = data.title;
  if (caption.textContent !== data.caption) caption.textContent = data.caption;
  const signature = JSON.stringify(data.picture);
  const changed = signature !== state.signature;
  state.signature = signature;
  state.data = Object.assign({}, data.picture, {toolbar});
  if (changed) {
    state.rgb = palette(state.data.palette);
    state.levels = decoded(state.data.levels);
    state.looks = decoded(state.data.looks);
  }
  drawStep(state, data.title, changed);
}

function drawStep(state, title, changed) {
  const data = state.data;
  draw(state);
  state.root.dataset.kind = data.kind;
  state.canvas.setAttribute("aria-label", title + " (" + data.y_title + " \u00d7 " + data.x_title + ")");
  const L = state.layout; // where the cells are, in CSS px of the canvas (tests hover a chosen cell)
  state.root.dataset.plot = JSON.stringify({x0: L.x0, y0: L.y0, cell: L.cell, rows: data.rows, cols: data.cols,
                                            bar: data.bar ? L.paperW : 0});
  announceDrawn(state, data.kind, changed);
}

// A check panel: its title and its lines, rebuilt when their text changes.
function updateCheck(panel, data) {
  const signature = JSON.stringify(data);
  if (signature === panel.signature) return;
  panel.signature = signature;
  const title = textDiv("relviz-title", data.title);
  title.setAttribute("role", "heading");
  title.setAttribute("aria-level", "4");
  panel.element.replaceChildren(title, ...data.lines.map(line => {
    const box = textDiv(line.style === "text" ? "relviz-line" : "relviz-" + line.style);
    const text = document.createElement("div");
    runsInto(text, line.runs);
    if (ICONS[line.style]) {
      box.setAttribute("role", "status");
      const icon = textDiv("relviz-icon", ICONS[line.style]);
      icon.setAttribute("aria-hidden", "true");
      box.append(icon, text);
    } else {
      box.append(text);
    }
    return box;
  }));
}

export default function (component) {
  const data = unwrapped(component.data);
  if (!data || !data.panels) return;
  let grid = GRIDS.get(component.parentElement);
  if (!grid) {
    const style = document.createElement("style");
    style.textContent = STEPS_CSS;
    const root = textDiv("relviz-steps");
    component.parentElement.append(style, root);
    grid = {root, panels: []};
    GRIDS.set(component.parentElement, grid);
  }
  // minmax(0, …): a track no wider than its share, whatever a picture drawn at an earlier width holds (an "fr"
  // alone grows to its content, and the page scrolled sideways)
  grid.root.style.gridTemplateColumns = data.columns.map(w => "minmax(0, " + w + "fr)").join(" ");
  const kinds = data.panels.map(p => p.kind).join(",");
  if (grid.kinds !== kinds) {   // a new layout (another tab's grid in this element): the panels anew
    grid.kinds = kinds;
    grid.panels = data.panels.map(p => ({kind: p.kind, element: textDiv("relviz-panel")}));
    grid.root.replaceChildren(...grid.panels.map(p => p.element));
    grid.panels.forEach(p => { if (p.kind === "step") stepPanel(p); });
  }
  data.panels.forEach((p, k) => {
    const panel = grid.panels[k];
    panel.element.style.gridColumn = "span " + (p.span || 1);
    if (p.kind === "step") updateStep(panel, p, data.toolbar);
    else updateCheck(panel, p);
  });
}
