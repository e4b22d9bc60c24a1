// Heatmap tables: every array as an HTML table whose cells are coloured and still carry
// their numbers (readable as text by everyone, including screen readers).
//  - gradients: a diverging scale centred on 0 (blue negative, white 0, orange positive);
//  - probabilities: a sequential scale on [0, 1] (viridis);
//  - other values: diverging when they change sign, sequential otherwise.
// Both palettes are colour-blind safe (blue/orange never rely on red vs green).
// 0-D is one cell, 1-D one row, 2-D a table, 3-D and up a row of 2-D slices labelled by
// their leading indices.

import { flat, formatNumber, labelNumber, shapeOf, shapeText } from "./wire.js";
import { el } from "./dom.js";

const DIVERGING = [[33, 102, 172], [146, 197, 222], [247, 247, 247], [253, 184, 99], [179, 88, 6]];
const SEQUENTIAL = [[68, 1, 84], [59, 82, 139], [33, 145, 140], [94, 201, 98], [253, 231, 37]];
const MAX_CELLS = 4096;

function lerpStops(stops, t) {
  const x = Math.min(Math.max(t, 0), 1) * (stops.length - 1);
  const i = Math.min(Math.floor(x), stops.length - 2);
  const f = x - i;
  return stops[i].map((c, k) => Math.round(c + (stops[i + 1][k] - c) * f));
}

/** The text colour with the higher WCAG contrast against the cell's background: black
 *  or white (a fixed luminance cut let white text sit on viridis' mid teal at 3.3:1, and a
 *  #111 in place of black fell under 4.5:1 on some mid colours). */
function textColour(rgb) {
  const [r, g, b] = rgb.map((c) => { c /= 255; return c <= 0.03928 ? c / 12.92 : ((c + 0.055) / 1.055) ** 2.4; });
  const lum = 0.2126 * r + 0.7152 * g + 0.0722 * b;
  return (lum + 0.05) / 0.05 >= 1.05 / (lum + 0.05) ? "#000" : "#fff";
}

/** Float round-off: a value within ROUND_OFF of the scale (the larger of the array's
 *  own largest magnitude and the run's, `context`) is drawn as 0 and said to be round-off,
 *  never in a saturated colour on a scale of its own (softmax's summed gradient, ±6e−17). */
export const ROUND_OFF = 1e-12;

function largest(numbers) {
  let m = 0;                                              // a loop: arrays can be large
  for (const x of numbers) if (typeof x === "number" && Number.isFinite(x)) m = Math.max(m, Math.abs(x));
  return m;
}

/** The magnitude at or below which a nonzero element of `numbers` is round-off. */
export function roundOffLimit(numbers, context = 0) {
  return ROUND_OFF * Math.max(largest(numbers), context || 0);
}

const isRoundOff = (x, limit) => typeof x === "number" && x !== 0 && Math.abs(x) <= limit;

/** How to colour an array: "diverging" centred on 0, or "sequential" over [lo, hi];
 *  round-off (at or below `limit`) counts as 0. */
export function chooseScale(numbers, role, limit = 0) {
  let lo = Infinity, hi = -Infinity;                      // a loop: arrays can be large
  for (let x of numbers) {
    if (typeof x !== "number" || !Number.isFinite(x)) continue;
    if (isRoundOff(x, limit)) x = 0;
    lo = Math.min(lo, x); hi = Math.max(hi, x);
  }
  if (lo > hi) lo = hi = 0;
  if (role === "probability") return { kind: "sequential", lo: 0, hi: 1, limit };
  if (role === "grad" || lo < 0 || lo === hi) {
    const m = Math.max(Math.abs(lo), Math.abs(hi)) || 1;
    return { kind: "diverging", lo: -m, hi: m, limit };
  }
  return { kind: "sequential", lo, hi, limit };
}

function cellColour(x, scale) {
  if (typeof x !== "number") return null;
  if (Number.isNaN(x)) return null;                        // NaN: hatched grey (CSS)
  if (isRoundOff(x, scale.limit)) x = 0;
  let t;
  if (scale.kind === "diverging") {
    const m = scale.hi || 1;
    t = x === Infinity ? 1 : x === -Infinity ? 0 : 0.5 + 0.5 * (x / m);
  } else {
    const span = scale.hi - scale.lo;
    t = x === Infinity ? 1 : x === -Infinity ? 0 : span > 0 ? (x - scale.lo) / span : 0.5;
  }
  return lerpStops(scale.kind === "diverging" ? DIVERGING : SEQUENTIAL, t);
}


function cell(x, scale, compact, where) {
  const roundOff = isRoundOff(x, scale.limit);
  const td = el("td", { text: compact ? "" : roundOff ? "≈0" : formatNumber(x) });
  // String(-0) is "0": the full value keeps the sign of zero, as the cell's text does
  const full = typeof x === "number" ? (Number.isNaN(x) ? "NaN" : Object.is(x, -0) ? "-0" : String(x)) : String(x);
  td.dataset.v = full;
  td.title = `${where} = ${full}` + (roundOff ? " (round-off: drawn as 0)" : "");
  if (roundOff) td.classList.add("round-off");
  if (compact) { td.tabIndex = -1; td.setAttribute("aria-label", `${where} = ${full}`); }
  const rgb = cellColour(x, scale);
  if (rgb) {
    td.style.background = `rgb(${rgb.join(",")})`;
    td.style.color = textColour(rgb);
  } else if (Number.isNaN(x)) {
    td.classList.add("nan");
  }
  return td;
}

/** One 2-D (or 1-D / 0-D) block as a table with row and column indices; `compact`: colour
 *  only, the number on hover or focus (the readout under the table says it too). */
function table2d(block, scale, label, compact = false, offset = [0, 0], lead = "") {
  const rows = Array.isArray(block) ? (Array.isArray(block[0]) ? block : [block]) : [[block]];
  const isVector = Array.isArray(block) && !Array.isArray(block[0]);
  const tbl = el("table", { class: compact ? "heat compact" : "heat" });
  if (label) tbl.append(el("caption", { text: label }));
  if (Array.isArray(block)) {
    const head = el("tr", {}, el("th", { scope: "col", class: "corner", "aria-label": "index" }));
    rows[0].forEach((_, j) => head.append(el("th", { scope: "col", text: compact && (j + offset[1]) % 4 ? "" : String(j + offset[1]) })));
    tbl.append(el("thead", {}, head));
  }
  const body = el("tbody");
  rows.forEach((row, i) => {
    const tr = el("tr");
    if (Array.isArray(block)) tr.append(el("th", { scope: "row", text: isVector ? "" : String(i + offset[0]) }));
    row.forEach((x, j) => tr.append(cell(x, scale, compact,
      isVector ? `[${lead}${j + offset[1]}]` : `[${lead}${i + offset[0]}, ${j + offset[1]}]`)));
    body.append(tr);
  });
  tbl.append(body);
  return tbl;
}

const MAX_COLS = 256;

/** The top-left corner of a big 1-D / 2-D array (the page stays responsive). */
function clip(value, shape) {
  if (shape.length === 1) return shape[0] > MAX_COLS ? value.slice(0, MAX_COLS) : value;
  if (shape.length !== 2) return value;
  const cols = Math.min(shape[1], MAX_COLS);
  const rows = Math.min(shape[0], Math.max(1, Math.floor(MAX_CELLS / cols)));
  return rows === shape[0] && cols === shape[1] ? value : value.slice(0, rows).map((r) => r.slice(0, cols));
}

/** Every leading-index combination of a >2-D array, with its 2-D slice. */
function slices(value, shape) {
  const lead = shape.slice(0, -2);
  const out = [];
  const walk = (v, idx) => {
    if (idx.length === lead.length) out.push([idx, v]);
    else v.forEach((sub, i) => walk(sub, [...idx, i]));
  };
  walk(value, []);
  return out;
}

function legend(scale) {
  const stops = scale.kind === "diverging" ? DIVERGING : SEQUENTIAL;
  const bar = el("span", { class: "legend-bar", "aria-hidden": "true" });
  bar.style.background = `linear-gradient(to right, ${stops.map((s) => `rgb(${s.join(",")})`).join(", ")})`;
  const words = scale.kind === "diverging"
    ? `diverging, centred on 0 (±${labelNumber(scale.hi)})`
    : `sequential ${labelNumber(scale.lo)} … ${labelNumber(scale.hi)}`;
  return el("span", { class: "legend" }, el("span", { text: labelNumber(scale.lo) }), bar,
    el("span", { text: labelNumber(scale.hi) }), el("span", { class: "legend-words", text: words }));
}

/** The sentence under a heatmap whose round-off is drawn as 0 (null when it has none). */
function roundOffNote(numbers, limit, context) {
  let count = 0, biggest = 0;
  for (const x of numbers) if (isRoundOff(x, limit)) { count += 1; biggest = Math.max(biggest, Math.abs(x)); }
  if (!count) return null;
  const all = count === numbers.filter((x) => typeof x === "number" && x !== 0 && Number.isFinite(x)).length;
  const scale = labelNumber(limit / ROUND_OFF);
  const what = count === 1 ? "1 value" : `${count} values`;
  const note = el("p", { class: "hint round-off-note", text: `${all && count > 1 ? `All ${count} nonzero values` : what} ` +
    `of magnitude ≤ ${labelNumber(biggest)}, below 10⁻¹² of the scale ${scale}${context ? " (this run's largest number)" : ""}, ` +
    "are float round-off of 0: drawn as 0 (≈0), the exact value on hover." });
  return note;
}

/**
 * An array as a captioned heatmap figure.
 * @param value  nested lists of numbers (already through fromWire)
 * @param opts   {title, role: "grad" | "probability" | "value", name, context: the run's
 *               largest magnitude, against which round-off is judged}
 */
export function heatmap(value, { title, role = "value", name = "", context = 0 } = {}) {
  const shape = shapeOf(value) ?? [];
  if (!shape.length) return scalar(value, { title, role, name });
  const numbers = flat(value);
  const limit = roundOffLimit(numbers, context);
  const scale = chooseScale(numbers, role, limit);
  const note = roundOffNote(numbers, limit, context);
  const fig = el("figure", { class: `heatmap role-${role}` });
  fig.dataset.name = name;
  fig.dataset.shape = JSON.stringify(shape);
  if (shape.at(-1) > COMPACT_COLS || numbers.length > COMPACT_CELLS) {
    return bigHeatmap(fig, value, shape, scale, title, numbers.length, note);
  }
  fig.append(el("figcaption", {},
    el("strong", { text: title }), " ",
    el("span", { class: "shape", text: `shape ${shapeText(shape)}` }), " ", legend(scale)));
  const wrap = el("div", { class: "heat-scroll", tabindex: "0", role: "region", "aria-label": `${title}, shape ${shapeText(shape)}` });
  if (shape.length <= 2) {
    wrap.append(table2d(clip(value, shape), scale));
    if (numbers.length > MAX_CELLS || (shape.length === 1 && shape[0] > MAX_COLS)) {
      wrap.append(el("p", { class: "hint", text: `Showing the top-left corner of ${numbers.length} elements.` }));
    }
  } else {
    const row = el("div", { class: "slices" });
    let shown = 0;
    for (const [idx, block] of slices(value, shape)) {
      if (shown >= MAX_CELLS) {
        row.append(el("p", { class: "hint", text: `… more slices not drawn (${numbers.length} elements)` }));
        break;
      }
      row.append(table2d(clip(block, shape.slice(-2)), scale, `[${idx.join(", ")}, :, :]`));
      shown += shape.at(-1) * shape.at(-2);
    }
    wrap.append(row);
  }
  fig.append(wrap);
  if (note) fig.append(note);
  return fig;
}

// --------------------------------------------------------------------------------------
// scalars, and arrays too wide for numbers in their cells
// --------------------------------------------------------------------------------------

const COMPACT_COLS = 8;          // wider than this: colour-only cells
const COMPACT_CELLS = 96;
const WINDOW = 32;               // rows / columns drawn at once; sliders move the window

/** A 0-d value is a number, not a coloured cell. */
function scalar(value, { title, role, name }) {
  const full = typeof value === "number" ? (Number.isNaN(value) ? "NaN" : String(value)) : String(value);
  const fig = el("figure", { class: `heatmap scalar role-${role}` });
  fig.dataset.name = name;
  fig.dataset.shape = "[]";
  fig.append(el("figcaption", {}, el("strong", { text: title }), " ", el("span", { class: "shape", text: "scalar", title: "shape (): a scalar" })),
    el("p", { class: "scalar-value", text: formatNumber(value), title: full }));
  fig.querySelector(".scalar-value").dataset.v = full;
  return fig;
}

/** Colour-only cells in a window of at most WINDOW × WINDOW, with a zoom, row and column
 *  sliders when the array is larger, and a readout of the cell under the pointer or focus. */
function bigHeatmap(fig, value, shape, scale, title, count, note) {
  const two = shape.length === 1 ? [1, shape[0]] : [shape.at(-2), shape.at(-1)];
  const blocks = shape.length <= 2 ? [[[], shape.length === 1 ? [value] : value]] : slices(value, shape).slice(0, 4);
  fig.append(el("figcaption", {},
    el("strong", { text: title }), " ", el("span", { class: "shape", text: `shape ${shapeText(shape)}` }), " ", legend(scale)));
  const controls = el("div", { class: "heat-controls" });
  const readout = el("p", { class: "heat-readout", "aria-live": "polite", text: "Point at or focus a cell to read its value." });
  const wrap = el("div", { class: "heat-scroll", tabindex: "0", role: "region", "aria-label": `${title}, shape ${shapeText(shape)}; colour only, values on hover or focus` });
  let zoom = 1, r0 = 0, c0 = 0;
  const draw = () => {
    wrap.replaceChildren();
    wrap.style.setProperty("--cell", `${Math.round(11 * zoom)}px`);
    for (const [idx, block] of blocks) {
      const win = block.slice(r0, r0 + WINDOW).map((row) => row.slice(c0, c0 + WINDOW));
      const lead = idx.length ? idx.join(", ") + ", " : "";
      const t = table2d(shape.length === 1 ? win[0] : win, scale, idx.length ? `[${lead}:, :]` : "", true, [r0, c0], lead);
      wrap.append(t);
    }
    if (shape.length > 2 && slices(value, shape).length > 4) wrap.append(el("p", { class: "hint", text: "First 4 slices shown." }));
  };
  const zoomBtn = (label, f, aria) => {
    const b = el("button", { type: "button", class: "small", text: label, "aria-label": aria });
    b.addEventListener("click", () => { zoom = Math.min(3, Math.max(1, zoom * f)); draw(); });
    return b;
  };
  controls.append(zoomBtn("−", 1 / 1.4, `Zoom out of ${title}`), zoomBtn("+", 1.4, `Zoom into ${title}`));
  const slider = (label, max, set) => {
    const id = `heat-${Math.random().toString(36).slice(2, 8)}`;
    const input = el("input", { type: "range", id, min: "0", max: String(max), value: "0", step: "1" });
    input.addEventListener("input", () => { set(Number(input.value)); draw(); });
    return el("span", { class: "heat-slider" }, el("label", { for: id, text: label }), input);
  };
  if (two[0] > WINDOW) controls.append(slider(`first row (of ${two[0]})`, two[0] - WINDOW, (v) => { r0 = v; }));
  if (two[1] > WINDOW) controls.append(slider(`first column (of ${two[1]})`, two[1] - WINDOW, (v) => { c0 = v; }));
  const show = (e) => { const td = e.target.closest?.("td"); if (td) readout.textContent = td.title; };
  wrap.addEventListener("pointerover", show);
  wrap.addEventListener("focusin", show);
  wrap.addEventListener("click", (e) => { const td = e.target.closest?.("td"); if (td) { td.focus(); show(e); } });
  // the keyboard: arrows move the focus from cell to cell (the readout follows)
  wrap.addEventListener("keydown", (e) => {
    const moves = { ArrowLeft: [0, -1], ArrowRight: [0, 1], ArrowUp: [-1, 0], ArrowDown: [1, 0] };
    if (!moves[e.key]) return;
    const td = document.activeElement?.closest?.("td");
    const cells = (td ?? wrap).closest("table") ?? wrap.querySelector("table");
    if (!cells) return;
    e.preventDefault();
    const rows = [...cells.tBodies[0].rows];
    let r = td ? rows.indexOf(td.parentElement) : 0, c = td ? td.cellIndex : 1;
    if (td) { r += moves[e.key][0]; c += moves[e.key][1]; }
    const next = rows[Math.max(0, Math.min(rows.length - 1, r))];
    next?.cells[Math.max(1, Math.min(next.cells.length - 1, c))]?.focus();
  });
  draw();
  fig.append(controls, wrap, readout);
  if (note) fig.append(note);
  if (count > WINDOW * WINDOW) fig.append(el("p", { class: "hint", text: `${count} elements; the sliders move the ${WINDOW} × ${WINDOW} window.` }));
  return fig;
}

/** A small 1-D or 2-D array as a bare coloured table holding its numbers, captioned
 *  `label` (no legend, no scroll box): the terms of a worked step, side by side. */
export function numberTable(value, { role = "value", label = "", context = 0 } = {}) {
  const numbers = flat(value);
  const tbl = table2d(value, chooseScale(numbers, role, roundOffLimit(numbers, context)), label);
  tbl.classList.add("terms");
  return tbl;
}
