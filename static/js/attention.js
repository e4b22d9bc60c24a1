// Attention for a prompt: one head at a time (a picker walks the layers' heads), its
// weights P and their gradient ∂loss/∂P side by side, the prompt's tokens on both axes.
// Pointing at (or focusing) a cell reads it out and marks the same cell in the other map,
// so a weight and its gradient are read together. Cells are sized to the room there is:
// numbers in them when they fit, colour alone (the number on hover or focus) when not,
// so the panel fits a screen, a phone's too, for the longest prompt (24 bytes).
//
// POST /api/v1/model/attention answers {tokens, loss, shape: [L, H, n, n], probs, grads};
// the Train view's model (train.js) is the one asked about: its trained weights once a run
// is done, else a fresh model of its settings.

import { postJSON } from "./api.js";
import { el } from "./dom.js";
import { attentionModel } from "./train.js";

const $ = (id) => document.getElementById(id);
const NUMBERS_FROM = 36;                 // px: a cell at least this wide holds its number
const MAX_CELL = 44, MIN_CELL = 12;      // px: a row of tokens set at 11 px needs 12
const LABEL = 36, CAPTION = 44, GAP = 16, READOUT = 40;   // px: the row labels, a caption, ...

const view = { data: null, head: 0, which: "prob" };   // the last answer, the head, and the
                                                      // map shown when only one fits

// blue (−), white (0), orange (+) for gradients; white to blue for weights in [0, 1]
const DIVERGING = [[33, 102, 172], [146, 197, 222], [247, 247, 247], [253, 184, 99], [179, 88, 6]];

function blueOrange(t) {            // t in [-1, 1]
  const u = (Math.max(-1, Math.min(1, t)) + 1) / 2 * (DIVERGING.length - 1);
  const i = Math.min(Math.floor(u), DIVERGING.length - 2), f = u - i;
  return DIVERGING[i].map((c, k) => Math.round(c + (DIVERGING[i + 1][k] - c) * f));
}

function whiteBlue(t) {            // t in [0, 1]
  const a = [247, 247, 247], b = [33, 102, 172];
  const u = Math.max(0, Math.min(1, t));
  return a.map((c, k) => Math.round(c + (b[k] - c) * u));
}

// The text colour with the higher WCAG contrast against the cell's background.
function ink(rgb) {
  const [r, g, b] = rgb.map((c) => { c /= 255; return c <= 0.03928 ? c / 12.92 : ((c + 0.055) / 1.055) ** 2.4; });
  const lum = 0.2126 * r + 0.7152 * g + 0.0722 * b;
  return (lum + 0.05) / 0.05 >= 1.05 / (lum + 0.05) ? "#000" : "#fff";
}

function tokenText(t) { return t === " " ? "␣" : t === "\n" ? "⏎" : t; }

function cellText(v, kind) {
  if (kind === "prob" || v === 0 || Math.abs(v) >= 0.01) return v.toFixed(2).replace("-", "−");
  return v.toExponential(0).replace("e-", "e−").replace("-", "−");
}

/** One map as a table: a row per query, a column per key, the future left empty. */
function heat(matrix, tokens, kind, caption, cell) {
  const m = kind === "grad" ? Math.max(...matrix.flat().map(Math.abs), 1e-300) : 1;
  const numbers = cell >= NUMBERS_FROM;
  const head = el("tr", {}, el("th", { scope: "col", class: "corner" }, "q \\ k"),
    ...tokens.map((t) => el("th", { scope: "col" }, tokenText(t))));
  const rows = matrix.map((row, i) => el("tr", {}, el("th", { scope: "row" }, tokenText(tokens[i])),
    ...row.map((v, j) => {
      const future = j > i;
      const rgb = future ? [255, 255, 255] : kind === "grad" ? blueOrange(v / m) : whiteBlue(v);
      const td = el("td", { style: `background:rgb(${rgb});color:${ink(rgb)}`, title: String(v), "data-v": String(v) },
        future || !numbers ? "" : cellText(v, kind));
      td.dataset.at = `${i},${j}`;
      if (!numbers && !future) { td.tabIndex = -1; td.setAttribute("aria-label", `${tokenText(tokens[i])} → ${tokenText(tokens[j])}: ${v}`); }
      return td;
    })));
  const table = el("table", { class: `heat attn ${kind}${numbers ? "" : " colour-only"}` }, el("caption", {}, caption),
    el("thead", {}, head), el("tbody", {}, ...rows));
  table.style.setProperty("--attn-cell", `${cell}px`);
  return table;
}

/** How the maps fit the panel's width and, with the controls above them and the readout
 *  below, the window's height: side by side when that leaves cells of MIN_CELL px or more,
 *  else one above the other, else (a phone, a long prompt) one at a time with a switch —
 *  the readout still gives a cell's weight and gradient together. */
function fitMaps(n) {
  const maps = $("attn-maps");
  const room = Math.max(200, maps.clientWidth || 320);
  const above = maps.getBoundingClientRect().top - $("attn-panel").getBoundingClientRect().top;
  const tall = window.innerHeight - above - READOUT - 8;
  const side = Math.min(Math.floor(((room - GAP) / 2 - LABEL) / n), Math.floor((tall - CAPTION) / (n + 1)));
  if (side >= MIN_CELL) return { cell: Math.min(MAX_CELL, side), layout: "side" };
  const wide = Math.floor((room - LABEL) / n);
  const stacked = Math.min(wide, Math.floor((tall - 2 * CAPTION - GAP) / (2 * (n + 1))));
  if (stacked >= MIN_CELL) return { cell: Math.min(MAX_CELL, stacked), layout: "stacked" };
  const one = Math.min(wide, Math.floor((tall - CAPTION) / (n + 1)));
  return { cell: Math.max(MIN_CELL, Math.min(MAX_CELL, one)), layout: "one" };
}

function headName(k) {
  const H = view.data.shape[1];
  return `layer ${Math.floor(k / H)}, head ${k % H}`;
}

/** Draw the picked head's two maps. */
function draw() {
  const out = view.data;
  if (!out) return;
  const [L, H] = out.shape;
  const k = view.head, l = Math.floor(k / H), h = k % H;
  const maps = $("attn-maps");
  maps.replaceChildren();
  const { cell, layout } = fitMaps(out.tokens.length);
  maps.dataset.layout = layout;
  $("attn-which").hidden = layout !== "one";
  const show = (kind) => layout !== "one" || view.which === kind;
  maps.append(...[
    show("prob") ? el("figure", { class: "attn-head" }, heat(out.probs[l][h], out.tokens, "prob",
      `Weights P, ${headName(k)} (row: query, column: key)`, cell)) : null,
    show("grad") ? el("figure", { class: "attn-head" }, heat(out.grads[l][h], out.tokens, "grad",
      `Their gradient ∂loss/∂P, ${headName(k)}`, cell)) : null].filter(Boolean));
  $("attn-head").value = String(k);
  $("attn-prev").disabled = k === 0;
  $("attn-next").disabled = k === L * H - 1;
  $("attn-readout").textContent = cell >= NUMBERS_FROM ? "" : "Point at or focus a cell to read its weight and gradient.";
}

/** A cell pointed at or focused: both maps' numbers for it, and the twin cell marked. */
function readCell(td) {
  const out = view.data;
  if (!td?.dataset.at || !out) return;
  const [i, j] = td.dataset.at.split(",").map(Number);
  const H = out.shape[1], l = Math.floor(view.head / H), h = view.head % H;
  for (const c of $("attn-maps").querySelectorAll("td.twin")) c.classList.remove("twin");
  for (const c of $("attn-maps").querySelectorAll(`td[data-at="${i},${j}"]`)) if (c !== td) c.classList.add("twin");
  const q = tokenText(out.tokens[i]), key = tokenText(out.tokens[j]);
  $("attn-readout").textContent = j > i ? `query “${q}” (${i}) cannot see key “${key}” (${j}): it is in the future`
    : `query “${q}” (${i}) → key “${key}” (${j}): weight ${out.probs[l][h][i][j].toFixed(4)}, ` +
      `gradient ∂loss/∂P ${out.grads[l][h][i][j].toExponential(3)}`;
}

async function showAttention() {
  const prompt = $("attn-prompt").value;
  $("attn-status").textContent = "Computing…";
  const r = await postJSON("api/v1/model/attention", { ...attentionModel(), prompt });
  const out = r.data;
  if (!r.ok) {
    $("attn-status").textContent = `Refused (${r.status}): ${out.error?.message}`;
    return;
  }
  const [L, H] = out.shape;
  view.data = out;
  view.head = Math.min(view.head, L * H - 1);
  const select = $("attn-head");
  select.replaceChildren(...Array.from({ length: L * H }, (_, k) => el("option", { value: String(k), text: headName(k) })));
  for (const id of ["attn-head", "attn-prev", "attn-next"]) $(id).disabled = false;
  draw();
  $("attn-status").textContent = `Next-token loss of the prompt: ${out.loss.toFixed(4)} ` +
    `(${L} layers × ${H} heads, ${out.tokens.length} tokens).`;
  document.body.dataset.attnShown = String(Number(document.body.dataset.attnShown || 0) + 1);
}

function pick(k) {
  if (!view.data || !$("attn-maps").children.length) return;   // none shown, or a reset cleared them
  view.head = Math.max(0, Math.min(k, view.data.shape[0] * view.data.shape[1] - 1));
  draw();
}

function init() {
  $("attn-show").addEventListener("click", () => showAttention().catch((err) => {
    $("attn-status").textContent = `Network error: ${err.message}`;
  }));
  $("attn-head").addEventListener("change", (e) => pick(Number(e.target.value)));
  for (const radio of document.querySelectorAll('input[name="attn-which"]')) {
    radio.addEventListener("change", () => { view.which = radio.value; pick(view.head); });
  }
  $("attn-prev").addEventListener("click", () => pick(view.head - 1));
  $("attn-next").addEventListener("click", () => pick(view.head + 1));
  const maps = $("attn-maps");
  maps.addEventListener("pointerover", (e) => readCell(e.target.closest?.("td")));
  maps.addEventListener("focusin", (e) => readCell(e.target.closest?.("td")));
  maps.addEventListener("click", (e) => { const td = e.target.closest?.("td"); if (td?.tabIndex === -1) td.focus(); });
  let width = maps.clientWidth;
  window.addEventListener("resize", () => {
    if (Math.abs(maps.clientWidth - width) > 1 && maps.children.length) { width = maps.clientWidth; draw(); }
  });
}

init();
