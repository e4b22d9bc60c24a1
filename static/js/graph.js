// The computation graph of an expression as SVG, laid out by dagre (static/vendor/dagre,
// MIT): top to bottom, the output last, and every input one rank above the node that
// consumes it (dagre's network-simplex ranking keeps edges short). Each box reads like
// micrograd's drawings: the operator with its constant (`× 0.5`, `@`, `[0, 1]`,
// `mask −∞`), the shape, and a value / gradient summary. The SVG is drawn at 1:1 (text
// never shrinks with the column); pan by dragging or scrolling, zoom with the buttons or
// Ctrl+wheel, never below the scale that keeps labels at 11 px. A number folded into its
// consumer's label gets no box of its own. Nodes are focusable
// buttons: click or Enter selects one.

import dagre from "../vendor/dagre/dagre.esm.js";
import { opByName } from "./state.js";
import { flat, formatNumber } from "./wire.js";

const NS = "http://www.w3.org/2000/svg";
const W = 168, H = 78, PAD = 12;
const FONT_MIN = 12;                          // the smallest label font in CSS px at zoom 1
export const MIN_ZOOM = 11 / FONT_MIN;        // labels never below 11 px
const MAX_ZOOM = 2.5;

function svgEl(tag, attrs = {}) {
  const node = document.createElementNS(NS, tag);
  for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, v);
  return node;
}

/** A node's operator as the formula writes it, with its constant when it has one. */
export function nodeLabel(n, nodes = []) {
  if (n.name) return n.name;
  if (n.op === "constant") return formatNumber(typeof n.value === "number" ? n.value : NaN);
  const ins = n.inputs.map((i) => nodes.find((x) => x.id === i)).filter(Boolean);
  const constant = ins.find((x) => x.op === "constant");
  const sym = opByName(n.op)?.symbol;                   // from GET /api/v1/ops
  if (sym && constant && ins.length === 2) {
    return ins[0] === constant ? `${formatNumber(constant.value)} ${sym} ·` : `${sym} ${formatNumber(constant.value)}`;
  }
  // an index written after its operand, x[0, 1]: the label is the index
  if (ins.length === 1 && ins[0].text && n.text?.startsWith(ins[0].text) && n.text.slice(ins[0].text.length).trim().startsWith("[")) {
    return n.text.slice(ins[0].text.length).trim();
  }
  if (n.op === "masked_fill") {
    const tail = (n.text ?? "").replace(/\)\s*$/, "").split(",").at(-1)?.trim() ?? "";
    return `mask ${tail.replace(/^-\s*inf$/, "−∞").replace(/^inf$/, "∞")}`;
  }
  return sym ?? n.op;
}

export function shapeLabel(shape) {
  if (!Array.isArray(shape)) return "";
  return shape.length === 1 ? `(${shape[0]},)` : `(${shape.join(", ")})`;
}

/** A few characters for an array: the number itself for a scalar, else its range. */
export function summary(v) {
  if (v == null) return "—";
  if (!Array.isArray(v)) return formatNumber(v);
  const all = flat(v);
  if (all.length && typeof all[0] === "boolean") return `${all.filter(Boolean).length} of ${all.length} true`;
  const xs = all.filter((x) => typeof x === "number" && Number.isFinite(x));
  if (!xs.length) return "—";
  let lo = Infinity, hi = -Infinity;
  for (const x of xs) { lo = Math.min(lo, x); hi = Math.max(hi, x); }
  return lo === hi ? `all ${formatNumber(lo)}` : `${formatNumber(lo)}…${formatNumber(hi)}`;
}

function layout(nodes) {
  const g = new dagre.graphlib.Graph();
  g.setGraph({ rankdir: "TB", nodesep: 18, ranksep: 34, marginx: PAD, marginy: PAD });
  g.setDefaultEdgeLabel(() => ({}));
  for (const n of nodes) g.setNode(String(n.id), { width: W, height: H });
  const shown = new Set(nodes.map((n) => n.id));
  for (const n of nodes) for (const i of n.inputs) if (shown.has(i)) g.setEdge(String(i), String(n.id));
  dagre.layout(g);
  const pos = new Map();
  for (const n of nodes) {
    const p = g.node(String(n.id));
    pos.set(n.id, { x: p.x - W / 2, y: p.y - H / 2 });
  }
  const edges = g.edges().map((e) => ({ from: Number(e.v), to: Number(e.w), points: g.edge(e).points }));
  return { pos, edges, width: g.graph().width, height: g.graph().height };
}

/**
 * Draw `nodes` (the eval response's list, in evaluation order) into `svg`.
 * @returns {{highlight: (id, cls) => void, mark: (ids, cls) => void, zoom: (z) => void}}
 */
export function drawGraph(svg, all, { onSelect }) {
  svg.replaceChildren();
  // a number folded into its consumer's label (`× 0.5`) gets no box of its own
  const folded = (n) => n.op === "constant" && all.some((m) => m.inputs.includes(n.id)) &&
    all.every((m) => !m.inputs.includes(n.id) || (opByName(m.op)?.symbol && m.inputs.length === 2));
  const nodes = all.filter((n) => !folded(n));
  if (!nodes.length) return { highlight() {}, mark() {}, zoom() {} };
  const { pos, edges: lines, width, height } = layout(nodes);
  svg.setAttribute("viewBox", `0 0 ${width} ${height}`);
  let scale = 1;
  const setZoom = (z) => {
    scale = Math.min(MAX_ZOOM, Math.max(MIN_ZOOM, z));
    svg.setAttribute("width", String(Math.round(width * scale)));
    svg.setAttribute("height", String(Math.round(height * scale)));
    svg.dataset.zoom = String(scale);
  };
  svg.style.width = svg.style.height = svg.style.maxWidth = svg.style.minWidth = "";
  setZoom(1);
  const defs = svgEl("defs");
  const arrowId = `arrow-${svg.id || Math.random().toString(36).slice(2, 8)}`;
  const marker = svgEl("marker", { id: arrowId, viewBox: "0 0 10 10", refX: "10", refY: "5", markerWidth: "7", markerHeight: "7", orient: "auto-start-reverse" });
  marker.append(svgEl("path", { d: "M 0 0 L 10 5 L 0 10 z", class: "arrowhead" }));
  defs.append(marker);
  svg.append(defs);

  const edges = svgEl("g", { class: "edges" });
  for (const { from, to, points } of lines) {
    const d = points.map((p, k) => `${k ? "L" : "M"} ${p.x} ${p.y}`).join(" ");
    // its ends, for what is drawn over an edge apart from the layout (shares.js)
    edges.append(svgEl("path", { d, class: "edge", "data-from": from, "data-to": to, "marker-end": `url(#${arrowId})` }));
  }
  svg.append(edges);

  const boxes = new Map();
  for (const n of nodes) {
    const { x, y } = pos.get(n.id);
    const label = nodeLabel(n, all);
    const g = svgEl("g", { class: "node", tabindex: "0", role: "button", transform: `translate(${x} ${y})` });
    g.dataset.id = String(n.id);
    g.append(svgEl("rect", { width: W, height: H, rx: "7" }));
    const t1 = svgEl("text", { x: W / 2, y: 18, class: "node-op" });
    t1.textContent = label.length > 20 ? label.slice(0, 19) + "…" : label;
    const t2 = svgEl("text", { x: W / 2, y: 35, class: "node-shape" });
    t2.textContent = `#${n.id} ${shapeLabel(n.shape)}`;
    const t3 = svgEl("text", { x: W / 2, y: 52, class: "node-vals" });
    t3.textContent = `data ${summary(n.value)}`;
    const t4 = svgEl("text", { x: W / 2, y: 68, class: "node-vals" });
    t4.textContent = n.requires_grad === false ? "no grad" : `grad ${summary(n.grad)}`;
    const title = svgEl("title");            // the node's accessible name (SVG-AAM)
    g.append(title, t1, t2, t3, t4);
    // starts with the visible text (WCAG 2.5.3), then the source it came from
    title.textContent = `${t1.textContent} ${t2.textContent} ${t3.textContent} ${t4.textContent}` +
      (n.requires_grad === false ? ", a constant: no gradient" : "") + (n.text ? `; source ${n.text}` : "");
    g.addEventListener("click", () => onSelect(n.id));
    g.addEventListener("keydown", (e) => {
      if (e.key === "Enter" || e.key === " ") { e.preventDefault(); onSelect(n.id); }
    });
    boxes.set(n.id, g);
    svg.append(g);
  }
  enablePan(svg.parentElement, () => scale, setZoom);
  return {
    highlight(id, cls = "selected") {
      for (const [nid, g] of boxes) g.classList.toggle(cls, nid === id);
      if (id != null && cls === "current") boxes.get(id)?.scrollIntoView?.({ block: "nearest", inline: "nearest" });
    },
    mark(ids, cls) {
      for (const [nid, g] of boxes) g.classList.toggle(cls, ids.has(nid));
    },
    zoom(z) { setZoom(z ?? scale); },
    get scale() { return scale; },
  };
}

/** Drag to pan (the box scrolls), Ctrl+wheel to zoom; wired once per scroll box. */
function enablePan(box, getScale, setZoom) {
  if (!box) return;
  box.zoomTo = setZoom;
  box.getScale = getScale;
  if (box.dataset.pan) return;
  box.dataset.pan = "1";
  let drag = null;
  box.addEventListener("pointerdown", (e) => {
    if (e.target.closest?.(".node")) return;
    drag = { x: e.clientX, y: e.clientY, left: box.scrollLeft, top: box.scrollTop };
    box.setPointerCapture?.(e.pointerId);
  });
  box.addEventListener("pointermove", (e) => {
    if (!drag) return;
    box.scrollLeft = drag.left - (e.clientX - drag.x);
    box.scrollTop = drag.top - (e.clientY - drag.y);
  });
  const end = () => { drag = null; };
  box.addEventListener("pointerup", end);
  box.addEventListener("pointercancel", end);
  box.addEventListener("wheel", (e) => {
    if (!e.ctrlKey) return;
    e.preventDefault();
    box.zoomTo(box.getScale() * (e.deltaY < 0 ? 1.1 : 1 / 1.1));
  }, { passive: false });
}
