// The computation graph of an expression as SVG, laid out by dagre (static/vendor/dagre,
// MIT): the output last, every input one rank before the node that consumes it (dagre's
// network-simplex ranking keeps edges short). Each box reads like micrograd's drawings:
// the operator with its constant (`× 0.5`, `@`, `[0, 1]`, `mask −∞`), the node id and
// shape, and a value / gradient summary. A number folded into its consumer's label gets
// no box of its own. Nodes are focusable buttons: click or Enter selects one.
//
// The graph opens fitted to its box: the richest drawing whose labels stay at 11 px or
// more — every node's data and grad, else its grad, else its operator alone; top to
// bottom, else left to right when that fits better. The box grows to the height of the
// window at most. Zooming out further (any graph within the sandbox's 256 nodes fits)
// hides the labels rather than drawing them under 11 px; hovering a box still names it.

import dagre from "../vendor/dagre/dagre.esm.js";
import { opByName } from "./state.js";
import { flat, labelNumber } from "./wire.js";

const NS = "http://www.w3.org/2000/svg";
const PAD = 12;
const OP_FONT = 13, SMALL_FONT = 12;          // CSS px at zoom 1 (playground.css: .node text)
export const MIN_LABEL_PX = 11;
export const LABEL_ZOOM = MIN_LABEL_PX / SMALL_FONT;   // below it the labels are hidden
const MAX_ZOOM = 2.5;
const CHAR = 0.62;                            // a monospace glyph's advance, in ems (DejaVu: 0.602)
const LINE = 16;
let layoutTime = 0;                           // ms in dagre for the last drawing (bench/page.py reads it)

/** How much each box says, richest first: the fit takes the first that is readable. */
const LEVELS = [
  { name: "full", lines: ["op+id", "data", "grad"], maxW: 250, nodesep: 16, edgesep: 8, ranksep: 28, pad: 16 },
  { name: "grad", lines: ["op", "grad"], maxW: 200, nodesep: 10, edgesep: 6, ranksep: 22, pad: 12 },
  { name: "op", lines: ["op"], maxW: 150, nodesep: 6, edgesep: 4, ranksep: 16, pad: 8 },
];

function svgEl(tag, attrs = {}) {
  const node = document.createElementNS(NS, tag);
  for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, v);
  return node;
}

/** A node's operator as the formula writes it, with its constant when it has one. */
export function nodeLabel(n, nodes = []) {
  if (n.name) return n.name;
  if (n.op === "constant") return labelNumber(typeof n.value === "number" ? n.value : NaN);
  const ins = n.inputs.map((i) => nodes.find((x) => x.id === i)).filter(Boolean);
  const constant = ins.find((x) => x.op === "constant");
  const sym = opByName(n.op)?.symbol;                   // from GET /api/v1/ops
  if (sym === "ᵀ" && ins.length === 1) return `${ins[0].name ?? "(·)"}ᵀ`;   // a postfix mark alone is too small to see
  if (sym && constant && ins.length === 2) {
    return ins[0] === constant ? `${labelNumber(constant.value)} ${sym} ·` : `${sym} ${labelNumber(constant.value)}`;
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

/** A few characters for an array: the number itself for a scalar, else its finite range
 *  and how many ±∞ and NaN it holds (`0…0.75, 3 × −∞`): a range alone would hide them. */
export function summary(v) {
  if (v == null) return "—";
  if (!Array.isArray(v)) return labelNumber(v);
  const all = flat(v);
  if (all.length && typeof all[0] === "boolean") return `${all.filter(Boolean).length} of ${all.length} true`;
  let lo = Infinity, hi = -Infinity, finite = 0, neg = 0, pos = 0, nan = 0;
  for (const x of all) {
    if (typeof x !== "number") continue;
    if (Number.isFinite(x)) { finite += 1; lo = Math.min(lo, x); hi = Math.max(hi, x); }
    else if (Number.isNaN(x)) nan += 1;
    else if (x > 0) pos += 1;
    else neg += 1;
  }
  const odd = [[neg, "−∞"], [pos, "∞"], [nan, "NaN"]].filter(([k]) => k);
  if (!finite && odd.length === 1) return `all ${odd[0][1]}`;
  const parts = [];
  if (finite) {
    parts.push(lo !== hi ? `${labelNumber(lo)}…${labelNumber(hi)}`
      : odd.length ? `${finite} × ${labelNumber(lo)}` : `all ${labelNumber(lo)}`);
  }
  for (const [k, word] of odd) parts.push(`${k} × ${word}`);
  return parts.length ? parts.join(", ") : "—";
}

/** The lines of a node's box at a level: [text, css class, font px, tail]; the tail (the
 *  node's id and shape after its operator) is set smaller, in its own span. */
function boxLines(n, all, level) {
  const make = {
    op: () => [nodeLabel(n, all), "node-op", OP_FONT],
    "op+id": () => [nodeLabel(n, all), "node-op", OP_FONT, ` #${n.id} ${shapeLabel(n.shape)}`],
    data: () => [`data ${summary(n.value)}`, "node-vals", SMALL_FONT],
    grad: () => [n.requires_grad === false ? "no grad" : `grad ${summary(n.grad)}`, "node-vals", SMALL_FONT],
  };
  return level.lines.map((k) => make[k]());
}

/** Text cut to the characters `room` px hold (an ellipsis marks the cut). */
function fitText(text, font, room) {
  const chars = Math.floor((room + 0.5) / (CHAR * font));
  return text.length <= chars ? text : text.slice(0, Math.max(1, chars - 1)) + "…";
}

/** A node's box at a level: its size from its text (a monospace font: characters ×
 *  advance), and its lines cut to fit the level's widest box. */
function boxOf(n, all, level) {
  const lines = boxLines(n, all, level);
  const px = ([t, , f, tail = ""]) => (t.length * f + tail.length * SMALL_FONT) * CHAR;
  const w = Math.ceil(Math.min(level.maxW, Math.max(28, ...lines.map((l) => px(l) + level.pad))));
  const h = 10 + LINE * lines.length;
  return { w, h, lines: lines.map(([t, cls, f, tail = ""]) => {
    const text = fitText(t, f, w - level.pad);
    const room = w - level.pad - text.length * CHAR * f;           // what is left for the tail
    return [text, cls, tail && room + 0.5 >= tail.length * CHAR * SMALL_FONT ? tail : ""];
  }) };
}

function layout(nodes, all, level, rankdir) {
  const g = new dagre.graphlib.Graph();
  g.setGraph({ rankdir, nodesep: level.nodesep, edgesep: level.edgesep, ranksep: level.ranksep, marginx: PAD, marginy: PAD });
  g.setDefaultEdgeLabel(() => ({}));
  const boxes = new Map();
  for (const n of nodes) {
    const b = boxOf(n, all, level);
    boxes.set(n.id, b);
    g.setNode(String(n.id), { width: b.w, height: b.h });
  }
  const shown = new Set(nodes.map((n) => n.id));
  for (const n of nodes) for (const i of n.inputs) if (shown.has(i)) g.setEdge(String(i), String(n.id));
  const t0 = performance.now();
  dagre.layout(g);
  layoutTime += performance.now() - t0;
  for (const n of nodes) {
    const p = g.node(String(n.id));
    const b = boxes.get(n.id);
    b.x = p.x - b.w / 2;
    b.y = p.y - b.h / 2;
  }
  const edges = g.edges().map((e) => ({ from: Number(e.v), to: Number(e.w), points: g.edge(e).points }));
  return { level, rankdir, boxes, edges, width: g.graph().width, height: g.graph().height };
}

/** The length of the graph's longest chain along the flow, each node counting its box's
 *  extent and a gap: no layout is shorter, so one that cannot fit is never computed. */
function chainLength(nodes, all, level, dir) {
  const d = new Map();
  for (const n of nodes) {
    const { w, h } = boxOf(n, all, level);
    d.set(n.id, (dir === "TB" ? h : w) + level.ranksep + Math.max(0, ...n.inputs.map((i) => d.get(i) ?? 0)));
  }
  return Math.max(...d.values()) - level.ranksep + 2 * PAD;
}

/** The drawing that fits a box of bw × bh: the first level (and direction) whose scale
 *  keeps labels readable, else the barest drawing at the scale that shows it whole. */
function fitLayout(nodes, all, bw, bh) {
  let barest = null;
  for (const level of LEVELS) {
    for (const dir of ["TB", "LR"]) {
      const last = level === LEVELS.at(-1);
      if ((dir === "TB" ? bh : bw) / chainLength(nodes, all, level, dir) < LABEL_ZOOM && !last) continue;
      const lay = layout(nodes, all, level, dir);
      lay.fitScale = Math.min(1, bw / lay.width, bh / lay.height);
      if (lay.fitScale >= LABEL_ZOOM) return lay;
      if (last && (!barest || lay.fitScale > barest.fitScale)) barest = lay;
    }
  }
  return barest;
}

/**
 * Draw `all` (the eval response's nodes, in evaluation order) into `svg`, fitted to the
 * box around it (its scroll parent).
 * `onRender(svg)` runs after every drawing (a refit redraws), for what lies over it.
 * @returns {{highlight, mark, zoom, fit, full, scale, level}}
 */
export function drawGraph(svg, all, { onSelect, onRender }) {
  const box = svg.parentElement;
  // a number folded into its consumer's label (`× 0.5`) gets no box of its own
  const folded = (n) => n.op === "constant" && all.some((m) => m.inputs.includes(n.id)) &&
    all.every((m) => !m.inputs.includes(n.id) || (opByName(m.op)?.symbol && m.inputs.length === 2));
  const nodes = all.filter((n) => !folded(n));
  svg.replaceChildren();
  const noop = { highlight() {}, mark() {}, zoom() {}, fit() {}, full() {}, scale: 1, level: "", mode: "fit" };
  if (!nodes.length) return noop;
  const marks = new Map();                       // class → ids, kept across redraws
  let lay = null, scale = 1, mode = "fit", current = null, selected = null;
  const boxes = new Map();

  /** Scale the drawing; the graph's point under `at` (px in the box; default its centre)
   *  stays where it is. */
  const setZoom = (z, at = null) => {
    const old = scale;
    const ax = at?.x ?? (box ? box.clientWidth / 2 : 0), ay = at?.y ?? (box ? box.clientHeight / 2 : 0);
    const gx = box ? (box.scrollLeft + ax) / old : 0, gy = box ? (box.scrollTop + ay) / old : 0;
    scale = Math.min(MAX_ZOOM, Math.max(Math.min(lay.fitScale ?? 1, LABEL_ZOOM), z));
    svg.setAttribute("width", String(Math.floor(lay.width * scale)));
    svg.setAttribute("height", String(Math.floor(lay.height * scale)));
    svg.dataset.zoom = String(scale);
    svg.classList.toggle("labels-hidden", SMALL_FONT * scale < MIN_LABEL_PX - 1e-9);
    if (box && at !== false) { box.scrollLeft = gx * scale - ax; box.scrollTop = gy * scale - ay; }
    box?.dispatchEvent(new CustomEvent("graphzoom", { detail: { scale, mode, level: lay.level.name } }));
  };

  const render = (next) => {
    lay = next;
    svg.replaceChildren();
    boxes.clear();
    svg.setAttribute("viewBox", `0 0 ${lay.width} ${lay.height}`);
    svg.dataset.level = lay.level.name;
    svg.dataset.direction = lay.rankdir;
    const defs = svgEl("defs");
    const arrowId = `arrow-${svg.id || Math.random().toString(36).slice(2, 8)}`;
    const marker = svgEl("marker", { id: arrowId, viewBox: "0 0 10 10", refX: "10", refY: "5", markerWidth: "7", markerHeight: "7", orient: "auto-start-reverse" });
    marker.append(svgEl("path", { d: "M 0 0 L 10 5 L 0 10 z", class: "arrowhead" }));
    defs.append(marker);
    const edges = svgEl("g", { class: "edges" });
    for (const { from, to, points } of lay.edges) {
      const d = points.map((p, k) => `${k ? "L" : "M"} ${p.x} ${p.y}`).join(" ");
      // its ends, for what is drawn over an edge apart from the layout (shares.js)
      edges.append(svgEl("path", { d, class: "edge", "data-from": from, "data-to": to, "marker-end": `url(#${arrowId})` }));
    }
    svg.append(defs, edges);
    for (const n of nodes) svg.append(nodeBox(n));
    for (const [cls, ids] of marks) for (const [nid, g] of boxes) g.classList.toggle(cls, ids.has(nid));
    for (const [nid, g] of boxes) { g.classList.toggle("current", nid === current); g.classList.toggle("selected", nid === selected); }
    onRender?.(svg);                             // what is drawn over the layout (shares.js)
  };

  const nodeBox = (n) => {
    const b = lay.boxes.get(n.id);
    const g = svgEl("g", { class: "node", tabindex: "0", role: "button", transform: `translate(${b.x} ${b.y})` });
    g.dataset.id = String(n.id);
    g.append(svgEl("rect", { width: b.w, height: b.h, rx: "7" }));
    const title = svgEl("title");            // the node's accessible name (SVG-AAM)
    g.append(title);
    b.lines.forEach(([text, cls, tail], k) => {
      const t = svgEl("text", { x: b.w / 2, y: 17 + LINE * k, class: cls === "node-op" ? "node-line" : cls });
      if (cls === "node-op") {                 // the operator, then its id and shape, smaller
        const op = svgEl("tspan", { class: "node-op" });
        op.textContent = text;
        t.append(op);
        if (tail) {
          const span = svgEl("tspan", { class: "node-shape" });
          span.textContent = tail;
          t.append(span);
        }
      } else {
        t.textContent = text;
      }
      g.append(t);
    });
    // starts with the visible text (WCAG 2.5.3), then all a full box would say
    const shown = b.lines.map(([t, , tail]) => t + tail);
    const everything = boxLines(n, all, LEVELS[0]).map(([t, , , tail = ""]) => t + tail);
    title.textContent = [...new Set([...shown, ...everything])].join(" ") +
      (n.requires_grad === false ? ", a constant: no gradient" : "") + (n.text ? `; source ${n.text}` : "");
    g.addEventListener("click", () => onSelect(n.id));
    g.addEventListener("keydown", (e) => {
      if (e.key === "Enter" || e.key === " ") { e.preventDefault(); onSelect(n.id); }
    });
    boxes.set(n.id, g);
    return g;
  };

  const room = () => {
    const cs = box ? getComputedStyle(box) : null;
    const maxH = cs ? parseFloat(cs.maxHeight) : NaN;
    const border = cs ? parseFloat(cs.borderLeftWidth) + parseFloat(cs.borderRightWidth) : 0;
    const w = (box?.clientWidth || box?.getBoundingClientRect().width - border || 600) - 2;
    const h = (Number.isFinite(maxH) ? maxH : window.innerHeight * 0.8) - 2 - border;
    return [Math.max(120, w), Math.max(120, h)];
  };

  const api = {
    highlight(id, cls = "selected") {
      if (cls === "current") current = id;
      if (cls === "selected") selected = id;
      for (const [nid, g] of boxes) g.classList.toggle(cls, nid === id);
      if (id != null && cls === "current") boxes.get(id)?.scrollIntoView?.({ block: "nearest", inline: "nearest" });
    },
    mark(ids, cls) {
      marks.set(cls, ids);
      for (const [nid, g] of boxes) g.classList.toggle(cls, ids.has(nid));
    },
    /** Scale the drawing (the buttons, Ctrl+wheel at the pointer); its level stays. */
    zoom(z, at = null) { mode = "zoom"; setZoom(z ?? scale, at); },
    /** The richest readable drawing that shows the whole graph in its box. */
    fit() {
      const t = performance.now();
      layoutTime = 0;
      mode = "fit";
      const [bw, bh] = room();
      render(fitLayout(nodes, all, bw, bh));
      setZoom(lay.fitScale, false);
      svg.dataset.layoutMs = layoutTime.toFixed(1);             // dagre's part (bench/page.py)
      svg.dataset.drawMs = (performance.now() - t).toFixed(1);  // the whole fitted drawing
    },
    /** Every node's data and grad at 1:1; pan to read it. */
    full() {
      mode = "full";
      const next = layout(nodes, all, LEVELS[0], "TB");
      next.fitScale = Math.min(1, ...room().map((r, k) => r / (k ? next.height : next.width)));
      render(next);
      setZoom(1, false);
    },
    get scale() { return scale; },
    get level() { return lay.level.name; },
    get mode() { return mode; },
  };
  api.fit();
  svg.style.width = svg.style.height = svg.style.maxWidth = svg.style.minWidth = "";
  enablePan(box, () => scale, (z, at) => api.zoom(z, at));
  watchWidth(box, () => { if (mode === "fit") api.fit(); });
  return api;
}

/** Refit when the box's width changes (a rotated phone, a resized window). */
function watchWidth(box, refit) {
  if (!box || typeof ResizeObserver === "undefined") return;
  box.refit = refit;
  if (box.dataset.watched) return;
  box.dataset.watched = "1";
  let width = box.clientWidth;
  new ResizeObserver(() => {
    if (Math.abs(box.clientWidth - width) < 2) return;
    width = box.clientWidth;
    box.refit();
  }).observe(box);
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
    const r = box.getBoundingClientRect();
    box.zoomTo(box.getScale() * (e.deltaY < 0 ? 1.1 : 1 / 1.1), { x: e.clientX - r.left, y: e.clientY - r.top });
  }, { passive: false });
}
