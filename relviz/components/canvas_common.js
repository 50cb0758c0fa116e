// What relviz's canvas components share: relviz.components serves this file before each component's own module
// (toeplitz_canvas.js, xy_canvas.js, grid_canvas.js, step_canvas.js), so both are one module and these top-level
// names are the component's too. Each component keeps what is its own: its layout, its painting, its hover lines.
//
// Streamlit (st.components.v2) calls a component's default export on mount and whenever the data change, with the
// same parentElement: the drawing state lives on that element (STATES). Every text a visitor sees is set with
// textContent or drawn on the canvas, never parsed as HTML. After each drawing the root carries data-draws (a
// counter) and the window receives a "relviz:drawn" event (the slider bench listens): announceDrawn.

// Streamlit 1.67 names its web font "Source Sans" (without it in the list the canvas drew in Arial: defect 8)
const FONT = "'Source Sans', 'Source Sans Pro', 'Source Sans 3', 'Open Sans', verdana, arial, sans-serif";
const STATES = new WeakMap();

// base64 text -> its bytes
function decoded(b64) {
  const text = atob(b64);
  const bytes = new Uint8Array(text.length);
  for (let k = 0; k < text.length; k++) bytes[k] = text.charCodeAt(k);
  return bytes;
}

// "rrggbb…" -> r, g, b, r, g, b, …
function palette(hex) {
  const out = new Uint8Array(hex.length / 2);
  for (let k = 0; k < out.length; k++) out[k] = parseInt(hex.substr(2 * k, 2), 16);
  return out;
}

// Colour k of a palette (r, g, b, r, g, b, …) as CSS.
function colourOf(rgb, k) {
  return "rgb(" + rgb[3 * k] + "," + rgb[3 * k + 1] + "," + rgb[3 * k + 2] + ")";
}

function minus(text) {
  return String(text).replace(/-/g, "\u2212");
}

// A 1-2-2.5-5 step times a power of ten that puts at most `most` steps on `span`; on an axis of whole numbers
// (`integer`: positions, offsets, indices) a 1-2-5 step of at least 1, so no tick falls between two of them (2.5).
function niceStep(span, most, integer = false) {
  const raw = span / Math.max(most, 1);
  if (integer && raw <= 1) return 1;
  const base = Math.pow(10, Math.floor(Math.log10(raw)));
  for (const m of integer ? [1, 2, 5, 10] : [1, 2, 2.5, 5, 10]) if (m * base >= raw) return m * base;
  return 10 * base;
}

// The multiples of `step` from lo to hi (ticks), each rounded to 12 significant digits (0 exactly at 0): the sums
// of a step such as 0.1 drift in the last digits, and a label must read 0.3, not 0.30000000000000004.
function stepsBetween(lo, hi, step) {
  const out = [];
  for (let v = Math.ceil(lo / step) * step; v <= hi + step * 1e-9; v += step) {
    out.push(Math.abs(v) < step * 1e-9 ? 0 : Number(v.toPrecision(12)));
  }
  return out;
}

// data.json: the picture's JSON as the server keeps it (relviz.app.display.canvas_json), the other fields beside it
function unwrapped(raw) {
  if (!raw || typeof raw.json !== "string") return raw;
  const {json, ...rest} = raw;
  return {...JSON.parse(json), ...rest};
}

// The component's root (class `className`): its canvas, its tooltip and a PNG button (title `png.title`, `png.top`
// from the top), appended to `parent`. The button shows while the pointer is on the picture or it has the
// keyboard's focus, as plotly's camera button in the app's other charts; announceDrawn hides it during a lecture.
// hooks.draw(state) draws again (once the web font is ready: a first drawing before it fell back to Arial and
// stayed so; and when the root's width changes), hooks.hover(state, event) shows the tooltip, and
// hooks.paint(state, ctx, L, scale, forExport) paints the PNG (downloadPng).
function canvasFrame(parent, className, png, hooks) {
  const root = document.createElement("div");
  root.className = className;
  root.style.cssText = "position:relative;width:100%;font-family:" + FONT;
  const canvas = document.createElement("canvas");
  canvas.style.cssText = "display:block;cursor:crosshair";
  canvas.setAttribute("role", "img");  // a screen reader gets what the picture shows (its aria-label), not "canvas"
  const tip = document.createElement("div");
  tip.className = "relviz-tooltip";
  tip.setAttribute("role", "tooltip");
  tip.style.cssText = "position:absolute;display:none;pointer-events:none;background:rgba(255,255,255,0.96);" +
    "color:#262730;border:1px solid #555;border-radius:3px;padding:4px 7px;font-size:13px;line-height:1.35;" +
    "white-space:nowrap;z-index:10;box-shadow:0 1px 4px rgba(0,0,0,0.2)";
  const button = document.createElement("button");
  button.type = "button";
  button.className = "relviz-download";
  button.textContent = "\u2913 PNG";
  button.title = png.title;
  button.style.cssText = "position:absolute;top:" + png.top + ";right:2px;font-size:12px;padding:1px 6px;opacity:0;" +
    "background:#fff;color:#262730;border:1px solid #bbb;border-radius:4px;cursor:pointer;transition:opacity .15s";
  root.addEventListener("mouseenter", () => { button.style.opacity = "0.85"; });
  root.addEventListener("mouseleave", () => { if (document.activeElement !== button) button.style.opacity = "0"; });
  button.addEventListener("focus", () => { button.style.opacity = "0.85"; });
  button.addEventListener("blur", () => { button.style.opacity = "0"; });
  root.append(canvas, tip, button);
  parent.appendChild(root);
  const state = {root, canvas, tip, button, data: null, layout: null, draws: 0, signature: ""};
  if (document.fonts && document.fonts.status !== "loaded") {
    document.fonts.ready.then(() => { if (state.data) hooks.draw(state); });
  }
  button.addEventListener("click", () => downloadPng(state, hooks.paint));
  canvas.addEventListener("mousemove", event => hooks.hover(state, event));
  canvas.addEventListener("mouseleave", () => { tip.style.display = "none"; });
  let width = 0;
  new ResizeObserver(() => {
    const now = Math.round(root.getBoundingClientRect().width);
    if (now && now !== width && state.data) { width = now; hooks.draw(state); }
  }).observe(root);
  return state;
}

// What Streamlit sent (data.json unwrapped), the state kept on its parentElement (made by build(parent) on the
// first call) and whether the data differ from the last call's: null while there are no data.
function received(component, build) {
  const data = unwrapped(component.data);
  if (!data) return null;
  let state = STATES.get(component.parentElement);
  if (!state) {
    state = build(component.parentElement);
    STATES.set(component.parentElement, state);
  }
  const signature = JSON.stringify(data);
  const changed = signature !== state.signature;
  state.signature = signature;
  state.data = data;
  return {state, data, changed};
}

// The pointer's place in the canvas's CSS px and the layout drawn: null before the first drawing.
function pointerAt(state, event) {
  const L = state.layout;
  if (!L) return null;
  const box = state.canvas.getBoundingClientRect();
  return {L, x: event.clientX - box.left, y: event.clientY - box.top};
}

// The root's width in whole CSS px: `otherwise` while it has none (not laid out yet), never below `least`.
function rootWidth(state, least, otherwise) {
  return Math.max(least, Math.round(state.root.getBoundingClientRect().width) || otherwise);
}

// The canvas sized to layout L (L.width × L.height CSS px, at the screen's pixel ratio); returns that ratio.
function sizeCanvas(state, L) {
  const dpr = window.devicePixelRatio || 1;
  state.canvas.width = Math.round(L.width * dpr);
  state.canvas.height = Math.round(L.height * dpr);
  state.canvas.style.width = L.width + "px";
  state.canvas.style.height = L.height + "px";
  state.layout = L;
  return dpr;
}

// The picture as a PNG at twice the size shown, painted for export, saved as data.name + ".png".
function downloadPng(state, paint) {
  if (!state.layout) return;
  const L = state.layout;
  const out = document.createElement("canvas");
  out.width = 2 * L.width; out.height = 2 * L.height;
  paint(state, out.getContext("2d"), L, 2, true);
  out.toBlob(blob => {
    const url = URL.createObjectURL(blob);
    const a = document.createElement("a");
    a.href = url;
    a.download = (state.data.name || "relviz") + ".png";
    document.body.appendChild(a);
    a.click();
    a.remove();
    setTimeout(() => URL.revokeObjectURL(url), 1000);
  }, "image/png");
}

// One div per line of text, for showTip.
function tipRows(lines) {
  return lines.map(line => {
    const div = document.createElement("div");
    div.textContent = line;
    return div;
  });
}

// The tooltip with `rows` near the pointer at (x, y) in the canvas's CSS px: right of it, or left of it where it
// would run past the picture's right edge (its left edge never left of `least`); never below the picture.
function showTip(tip, rows, x, y, L, least = -Infinity) {
  tip.replaceChildren(...rows);
  tip.style.display = "block";
  const flip = x + 16 + tip.offsetWidth > L.width;
  tip.style.left = Math.max(least, flip ? x - 12 - tip.offsetWidth : x + 14) + "px";
  tip.style.top = Math.max(0, Math.min(y + 12, L.height - tip.offsetHeight)) + "px";
}

// After a drawing: the PNG button hidden during a lecture (data.toolbar false), the tooltip hidden, the drawing
// counted on the root (data-draws) and announced to the window ("relviz:drawn" with its kind and whether the data
// changed). Call it last: the event's listeners read what the drawing left on the root.
function announceDrawn(state, kind, changed) {
  state.button.style.display = state.data.toolbar === false ? "none" : "";
  state.tip.style.display = "none";
  state.draws += 1;
  state.root.dataset.draws = String(state.draws);
  window.dispatchEvent(new CustomEvent("relviz:drawn", {detail: {kind, changed}}));
}
