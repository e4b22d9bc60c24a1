// Where a gradient comes from (POST /api/v1/eval with "paths": true): a node read by more
// than one op input (tied weights, a residual's skip and block, a diamond) or by repeat_kv
// gets its gradient split by those edges. Drawn apart from the graph's layout and fit
// (graph.js): a label on each such edge, its share of the node's gradient, and in a
// node's detail the list of its paths, each part as a heatmap, K/V heads with the query
// heads that read them. docs/page.md, "Where a gradient comes from".

import { el } from "./dom.js";
import { nodeLabel } from "./graph.js";
import { heatmap } from "./heatmap.js";
import { formatNumber, fromWire } from "./wire.js";

const NS = "http://www.w3.org/2000/svg";
const CHAR = 7.4;                       // px per character of the 12 px monospace label

/** A share as a percentage, signed ("62%", "−12%"); "—" when there is none (a zero total). */
export function percent(share) {
  const s = fromWire(share);
  if (s == null || !Number.isFinite(s)) return "—";
  const p = Math.round(s * 100);
  return `${p < 0 ? "−" : ""}${Math.abs(p)}%`;
}

/** The middle of an SVG path written "M x y L x y …" (graph.js's edges), by length. */
function middle(d) {
  const pts = [...d.matchAll(/[ML]\s*(-?[\d.e+-]+)\s+(-?[\d.e+-]+)/g)].map((m) => [Number(m[1]), Number(m[2])]);
  const lens = pts.slice(1).map((p, k) => Math.hypot(p[0] - pts[k][0], p[1] - pts[k][1]));
  let half = lens.reduce((a, b) => a + b, 0) / 2;
  for (const [k, len] of lens.entries()) {
    if (half <= len && len > 0) {
      const t = half / len;
      return [pts[k][0] + t * (pts[k + 1][0] - pts[k][0]), pts[k][1] + t * (pts[k + 1][1] - pts[k][1])];
    }
    half -= len;
  }
  return pts[0] ?? [0, 0];
}

/** Label each edge of `svg` (drawn by graph.js) that carries a path of `paths` with its
 *  share: "62%", or one share per input when an op reads the node twice ("a 50% · b 50%"). */
export function drawShares(svg, paths) {
  svg.querySelector(":scope > .shares")?.remove();
  if (!paths?.length) return;
  const layer = document.createElementNS(NS, "g");
  layer.setAttribute("class", "shares");
  for (const entry of paths) {
    const byConsumer = new Map();
    for (const e of entry.edges) byConsumer.set(e.consumer, [...(byConsumer.get(e.consumer) ?? []), e]);
    for (const [consumer, edges] of byConsumer) {
      const line = svg.querySelector(`path.edge[data-from="${entry.node}"][data-to="${consumer}"]`);
      if (!line) continue;                              // a folded constant: no edge drawn
      line.classList.add("shared");
      const text = edges.map((e) => (edges.length > 1 ? `${e.input} ` : "") + percent(e.share)).join(" · ");
      const [x, y] = middle(line.getAttribute("d"));
      const g = document.createElementNS(NS, "g");
      g.setAttribute("class", "share-label");
      g.setAttribute("transform", `translate(${x} ${y})`);
      g.dataset.from = String(entry.node);
      g.dataset.to = String(consumer);
      const w = text.length * CHAR + 10;
      const rect = document.createElementNS(NS, "rect");
      for (const [k, v] of Object.entries({ x: -w / 2, y: -10, width: w, height: 20, rx: 4 })) rect.setAttribute(k, String(v));
      const label = document.createElementNS(NS, "text");
      label.setAttribute("class", "share-text");
      label.setAttribute("y", "4");
      label.textContent = text;
      g.append(rect, label);
      layer.append(g);
    }
  }
  svg.append(layer);
}

/** Node n's paths as a list for its detail: each reader, its share and norm, its part as a
 *  heatmap; for repeat_kv, which query heads read each K/V head. Null when n is not shared. */
export function pathsDetail(n, nodes, paths) {
  const entry = paths?.find((p) => p.node === n.id);
  if (!entry) return null;
  const box = el("div", { class: "paths-detail" },
    el("h5", { text: `Where the gradient of #${n.id} comes from: ${entry.edges.length} path${entry.edges.length > 1 ? "s" : ""}` }),
    el("p", { class: "hint", text: "Each op that reads this node hands it a part of the gradient: its backward rule for that input, given the op's own incoming gradient. The parts add up to the gradient; a share is ⟨part, gradient⟩ / ⟨gradient, gradient⟩, so the shares add up to 100%." }));
  const list = el("ol", { class: "path-list" });
  for (const e of entry.edges) {
    const c = nodes.find((x) => x.id === e.consumer);
    const who = c ? `#${c.id} ${nodeLabel(c, nodes)}` : `#${e.consumer}`;
    const item = el("li", { class: "path-item" });
    item.dataset.consumer = String(e.consumer);
    item.append(el("p", { class: "path-line", text: `via ${who} (its input ${e.input}): share ${percent(e.share)}, norm ${formatNumber(fromWire(e.norm))}` }));
    if (e.heads) item.append(headsList(e.heads));
    item.append(heatmap(fromWire(e.grad), { title: `the part from ${who}`, role: "grad", name: `path:${n.id}:${e.consumer}:${e.slot}` }));
    list.append(item);
  }
  box.append(list);
  return box;
}

/** repeat_kv's edge: each K/V head and the query heads that read it, with their shares. */
function headsList(heads) {
  const byKv = new Map();
  for (const h of heads) byKv.set(h.kv_head, [...(byKv.get(h.kv_head) ?? []), h]);
  return el("ul", { class: "head-list" }, ...[...byKv].map(([kv, hs]) => el("li", {
    text: `K/V head ${kv} ← query heads ${hs.map((h) => `${h.head} (${percent(h.share)})`).join(", ")}` })));
}
