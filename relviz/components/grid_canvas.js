// relviz's grid canvas: heatmaps of labelled rows × labelled columns in panels side by side (one row axis, one
// colour bar), with a mark drawn in chosen cells (relviz.figures.grid_canvas.GridPanels). Drawn in place when the
// data change: a changed plotly figure is a new chart to Streamlit (its element id includes the spec), which
// plotly.js mounts and draws from scratch; the Experiments page's threshold moved only the ✓ marks, and that
// redraw was most of a move (~100 ms in Chromium).
//
// Streamlit (st.components.v2) calls the default export on mount and whenever the data change, with the same
// parentElement: the state lives on that element. Every text is set with textContent or drawn, never parsed as
// HTML. After each drawing the root carries data-draws (a counter) and the window receives "relviz:drawn" (the
// slider bench listens), as relviz/components/toeplitz_canvas.js does.
//
// FONT, STATES, the root with its canvas, tooltip and PNG button, the PNG download and announceDrawn come from
// relviz/components/canvas_common.js, which relviz.components.component_js serves before this file.

const GAP = 14;         // px between two panels
const BAR = 14;         // the colour bar's width

function build(parent) {
  return canvasFrame(parent, "relviz-grid", {
    top: "2px",
    title: "Download this picture as PNG (twice the size shown). It is drawn on a canvas, so PNG only.",
  }, {draw, hover, paint});
}

// Where everything sits, in CSS px: the row labels at the left, the panels, the colour bar at the right.
function layout(state, ctx, width) {
  const data = state.data, font = data.font || 14;
  ctx.font = font + "px " + FONT;
  const labelW = Math.max(...data.rows.map(t => ctx.measureText(t).width));
  const tickW = Math.max(...data.colour.ticktext.map(t => ctx.measureText(t).width));
  const top = (data.title ? 34 : 8) + font + 12;          // the title, then the panels' titles
  const left = labelW + 10;
  const right = 16 + BAR + 6 + tickW + 8 + font + 4;      // the colour bar, its ticks and its title
  const n = data.panels.length;
  const panelW = Math.max(40, (width - left - right - GAP * (n - 1)) / n);
  // column labels wider than their column stand upright (as plotly turns a category axis's crowded labels)
  ctx.font = (font - 1) + "px " + FONT;
  const columnW = Math.max(...data.panels.flatMap(p => p.columns.map(t => ctx.measureText(t).width)));
  const upright = data.panels.some(p => columnW + 4 > panelW / p.columns.length);
  const ticksH = upright ? columnW : font;
  const bottom = 6 + ticksH + 10 + font + 8;               // tick labels, axis title
  const h = Math.max(40, data.height - top - bottom);
  const panels = data.panels.map((p, k) => ({x: left + k * (panelW + GAP), y: top, w: panelW, h,
                                             cw: panelW / p.columns.length, ch: h / data.rows.length}));
  return {width, height: data.height, font, top, left, panels, barX: width - right + 16, upright, ticksH};
}

function paint(state, ctx, L, scale) {
  const data = state.data, font = L.font, palette = state.palette;
  ctx.setTransform(scale, 0, 0, scale, 0, 0);
  ctx.fillStyle = "#ffffff";
  ctx.fillRect(0, 0, L.width, L.height);
  ctx.fillStyle = "#262730";
  ctx.textBaseline = "alphabetic";
  if (data.title) {
    ctx.font = "600 " + (data.title_font || 14) + "px " + FONT;
    ctx.textAlign = "left";
    ctx.fillText(data.title, 6, 22, Math.max(60, L.width - 80));   // the PNG button sits at the right
  }
  const muted = "#5c5f6b";
  data.panels.forEach((p, k) => {
    const box = L.panels[k], levels = state.levels[k], marks = state.marks[k];
    ctx.font = font + "px " + FONT;
    ctx.fillStyle = "#262730";
    ctx.textAlign = "center";
    ctx.textBaseline = "alphabetic";
    ctx.fillText(p.title, box.x + box.w / 2, box.y - 8);
    const cols = p.columns.length;
    for (let r = 0; r < data.rows.length; r++) {
      for (let c = 0; c < cols; c++) {
        const level = levels[r * cols + c];
        ctx.fillStyle = colourOf(palette, level);
        // a 1 px white gap between cells, as plotly's xgap / ygap
        ctx.fillRect(box.x + c * box.cw + 0.5, box.y + r * box.ch + 0.5, box.cw - 1, box.ch - 1);
      }
    }
    ctx.fillStyle = data.mark_colour || "#ffffff";
    ctx.font = (data.mark_size || 13) + "px " + FONT;
    ctx.textBaseline = "middle";
    for (let r = 0; r < data.rows.length; r++) {
      for (let c = 0; c < cols; c++) {
        if (marks[r * cols + c]) ctx.fillText(data.mark, box.x + (c + 0.5) * box.cw, box.y + (r + 0.5) * box.ch);
      }
    }
    ctx.textBaseline = "top";
    ctx.fillStyle = muted;
    ctx.font = (font - 1) + "px " + FONT;
    p.columns.forEach((label, c) => {
      if (!L.upright) { ctx.fillText(label, box.x + (c + 0.5) * box.cw, box.y + box.h + 6); return; }
      ctx.save();
      ctx.translate(box.x + (c + 0.5) * box.cw, box.y + box.h + 6);
      ctx.rotate(-Math.PI / 2);
      ctx.textAlign = "right";
      ctx.textBaseline = "middle";
      ctx.fillText(label, 0, 0);
      ctx.restore();
    });
    ctx.textAlign = "center";
    ctx.textBaseline = "top";
    ctx.fillText(p.x_title, box.x + box.w / 2, box.y + box.h + 6 + L.ticksH + 10);
  });
  // the row labels, once, at the left of the first panel
  const first = L.panels[0];
  ctx.textAlign = "right";
  ctx.textBaseline = "middle";
  ctx.fillStyle = muted;
  ctx.font = (font - 1) + "px " + FONT;
  data.rows.forEach((label, r) => ctx.fillText(label, first.x - 6, first.y + (r + 0.5) * first.ch));
  // the colour bar: its 256 colours bottom (zmin) to top (zmax), its ticks and its rotated title
  const bar = {x: L.barX, y: first.y, h: first.h};
  for (let k = 0; k < 256; k++) {
    ctx.fillStyle = colourOf(palette, k);
    const y0 = bar.y + bar.h * (1 - (k + 1) / 256);
    ctx.fillRect(bar.x, y0, BAR, bar.h / 256 + 0.5);
  }
  const {zmin, zmax, tickvals, ticktext, title} = data.colour;
  ctx.textAlign = "left";
  ctx.fillStyle = muted;
  let tickRight = 0;
  tickvals.forEach((v, k) => {
    const y = bar.y + bar.h * (1 - (v - zmin) / (zmax - zmin));
    ctx.fillRect(bar.x + BAR, y - 0.5, 3, 1);
    ctx.fillText(ticktext[k], bar.x + BAR + 6, y);
    tickRight = Math.max(tickRight, ctx.measureText(ticktext[k]).width);
  });
  ctx.save();
  ctx.translate(bar.x + BAR + 6 + tickRight + 8 + font / 2, bar.y + bar.h / 2);
  ctx.rotate(-Math.PI / 2);
  ctx.textAlign = "center";
  ctx.fillText(title, 0, 0);
  ctx.restore();
}

function draw(state) {
  const width = rootWidth(state, 0, 800);
  const ctx = state.canvas.getContext("2d");
  const L = layout(state, ctx, width);
  paint(state, ctx, L, sizeCanvas(state, L));
}

function hover(state, event) {
  const at = pointerAt(state, event);
  if (!at) return;
  const {L, x, y} = at;
  const k = L.panels.findIndex(p => x >= p.x && x < p.x + p.w && y >= p.y && y < p.y + p.h);
  if (k < 0) { state.tip.style.display = "none"; return; }
  const p = L.panels[k], cols = state.data.panels[k].columns.length;
  const c = Math.min(cols - 1, Math.floor((x - p.x) / p.cw)), r = Math.min(state.data.rows.length - 1,
                                                                          Math.floor((y - p.y) / p.ch));
  Object.assign(state.tip.dataset, {panel: String(k), row: String(r), col: String(c)});
  showTip(state.tip, tipRows(state.data.panels[k].hover[r * cols + c]), x, y, L);
}

export default function (component) {
  const got = received(component, build);
  if (!got) return;
  const {state, data, changed} = got;
  state.palette = palette(data.palette);
  state.levels = data.panels.map(p => decoded(p.levels));
  state.marks = data.panels.map(p => decoded(p.marks));
  draw(state);
  state.canvas.setAttribute("aria-label", data.title || data.colour.title);
  // where the panels are, in CSS px of the canvas (tests hover a chosen cell)
  state.root.dataset.panels = JSON.stringify(state.layout.panels);
  announceDrawn(state, "grid_panels", changed);
}
