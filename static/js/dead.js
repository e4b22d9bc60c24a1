// Where a gradient dies (POST /api/v1/eval with "dead": true): each variable whose
// gradient is missing or zero, and why. In the graph, a dead variable's box gets a badge
// in words ("no grad: ReLU off") and the node where its path was cut the same words; the
// list under the graph says it in full sentences. Words, not colour alone; textContent
// only. Drawn apart from the graph's layout (graph.js). docs/dead-gradients.md.

import { el } from "./dom.js";
import { nodeLabel } from "./graph.js";

const NS = "http://www.w3.org/2000/svg";
const CHAR = 6.8;                        // px per character of the 11 px badge text

/** A reason in two or three words, for a badge. */
export const SHORT = {
  no_grad: "no_grad()", detached: "detach()", requires_grad_false: "requires_grad off",
  integer_input: "integer input", boolean_input: "boolean input", constant_input: "a constant",
  not_connected: "not on any path", zero_seed: "seed is 0", masked: "masked",
  fully_masked_row: "row fully masked", where_untaken: "where: other branch",
  max_non_winner: "max: not the winner", dead_relu: "ReLU off",
  softmax_symmetry: "softmax symmetry", multiplied_by_zero: "times 0",
  unused_rows: "unused rows", not_selected: "not indexed", saturated: "flat here",
  cancelled: "paths cancel",
};

function badge(svg, id, text, cls) {
  const box = svg.querySelector(`g.node[data-id="${id}"]`);
  if (!box) return;
  box.dataset.dead = cls;                   // a data attribute: the box's classes stay the stepper's
  const m = /translate\(([-\d.e]+)[ ,]+([-\d.e]+)\)/.exec(box.getAttribute("transform") ?? "");
  if (!m) return;
  const g = document.createElementNS(NS, "g");
  g.setAttribute("class", `dead-badge ${cls}`);
  g.dataset.node = String(id);
  const w = text.length * CHAR + 10;
  const r = box.querySelector("rect");             // the box's size: the graph's level of detail
  const bw = Number(r?.getAttribute("width") ?? 0), bh = Number(r?.getAttribute("height") ?? 0);
  // under the box, kept inside the drawing (a box at its edge: the badge slides in; the
  // last row: the badge goes over the box's top edge instead)
  const [, , vw, vh] = (svg.getAttribute("viewBox") ?? "0 0 1e9 1e9").split(/\s+/).map(Number);
  const x = Math.min(Math.max(Number(m[1]) + bw / 2, w / 2 + 1), vw - w / 2 - 1);
  const y = Number(m[2]) + bh + 9 <= vh - 9 ? Number(m[2]) + bh + 9 : Number(m[2]) - 1;
  g.setAttribute("transform", `translate(${x} ${y})`);
  const rect = document.createElementNS(NS, "rect");
  for (const [k, v] of Object.entries({ x: -w / 2, y: -9, width: w, height: 17, rx: 3 })) rect.setAttribute(k, String(v));
  const t = document.createElementNS(NS, "text");
  t.setAttribute("y", "4");
  t.textContent = text;
  g.append(rect, t);
  svg.append(g);
  const title = box.querySelector("title");         // the accessible name says it too
  if (title) title.textContent += `; ${text}`;
}

/** Mark the dead variables of `dead` in the graph drawn in `svg`, and the nodes that cut
 *  their paths. */
export function drawDead(svg, dead) {
  svg.querySelectorAll(":scope > .dead-badge").forEach((b) => b.remove());
  if (!dead?.length) return;
  const cuts = new Map();
  for (const d of dead) {
    const reasons = d.causes.map((c) => SHORT[c.reason] ?? c.reason);
    badge(svg, d.node, `no grad${d.missing ? "" : ` (${d.dead}/${d.size})`}: ${reasons.join(", ")}`, "dead");
    for (const c of d.causes) if (c.node != null && c.node !== d.node) cuts.set(c.node, SHORT[c.reason] ?? c.reason);
  }
  for (const [id, text] of cuts) badge(svg, id, `cuts here: ${text}`, "cut");
}

/** The list under the graph: each dead variable, how much of it, why, and where. */
export function deadList(dead, nodes) {
  const box = el("div", { class: "dead-list", id: "dead-list" });
  if (!dead) return box;
  box.append(el("h3", { text: "Where gradients die" }));
  if (!dead.length) {
    box.append(el("p", { class: "hint", text: "Every variable's gradient is alive: none is missing or zero." }));
    return box;
  }
  const list = el("ul", {});
  for (const d of dead) {
    const item = el("li", { class: "dead-item" });
    item.dataset.variable = d.variable;
    const what = d.missing ? "gets no gradient at all" : `gets a zero gradient at ${d.dead} of ${d.size} elements` +
      (d.rows ? ` (${d.rows} whole row${d.rows > 1 ? "s" : ""})` : "");
    item.append(el("p", { class: "dead-what", text: `${d.variable} ${what}.` }));
    const why = el("ul", { class: "dead-causes" });
    for (const c of d.causes) {
      const at = c.node == null ? (c.op ? ` (inside ${c.op})` : "")
        : ` — cut at #${c.node} ${nodeLabel(nodes.find((n) => n.id === c.node) ?? { op: c.op, inputs: [] }, nodes)}`;
      const units = c.units == null ? "" : c.reason === "dead_relu" ? `; ${c.units} unit${c.units === 1 ? "" : "s"} off for every row`
        : `; ${c.units} row${c.units === 1 ? "" : "s"}`;
      why.append(el("li", { class: "dead-cause", "data-reason": c.reason,
        text: `${c.elements} element${c.elements === 1 ? "" : "s"}: ${c.words}${at}${units}.` }));
    }
    item.append(why);
    list.append(item);
  }
  box.append(list);
  return box;
}
