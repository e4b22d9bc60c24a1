// The computation graph of an expression run, a node's details (value, gradient, broadcast
// ledger), and the backward step-through: output first, constants skipped.

import { el } from "./dom.js";
import { drawGraph, nodeLabel, shapeLabel } from "./graph.js";
import { heatmap } from "./heatmap.js";
import { drawDead } from "./dead.js";
import { drawShares, pathsDetail } from "./shares.js";
import { $, roleOf, state } from "./state.js";
import { fromWire } from "./wire.js";

/** Draw state.nodes (or hide the panel when the run made none: op mode). */
export function showGraph() {
  const panel = $("#graph-panel");
  panel.hidden = !state.nodes.length;
  $("#node-detail").replaceChildren();
  document.getElementById("dead-list")?.remove();
  state.step = -1;
  $("#step-label").textContent = "";
  if (!state.nodes.length) return;
  state.graph = drawGraph($("#graph"), state.nodes, { onSelect: selectNode, onRender: (svg) => {
    drawShares(svg, state.paths);                     // each shared edge's share
    drawDead(svg, state.dead);                        // where gradients die, in words
  } });
  const nf = state.firstNonfinite;
  state.graph.mark(new Set(nf ? [nf.node] : []), "nonfinite");
  state.graph.mark(new Set(nf && state.nonfiniteExpected ? [nf.node] : []), "expected");
  const constants = state.nodes.filter((n) => !n.requires_grad);
  state.graph.mark(new Set(constants.map((n) => n.id)), "constant");
  // the constants drawn as boxes (a number folded into its consumer's label has none)
  const boxed = constants.filter((n) => document.querySelector(`#graph .node[data-id="${n.id}"]`));
  const named = boxed.slice(0, 8).map((n) => `#${n.id} ${nodeLabel(n, state.nodes)}`).join(", ") +
    (boxed.length > 8 ? ` and ${boxed.length - 8} more` : "");
  $("#step-skipped").textContent = !boxed.length ? ""
    : !backwardOrder().length ? "Nothing to step through: no node requires grad, so the backward pass computes no gradient."
      : `Skipped (grey): ${named} — ` +
        `${boxed.length > 1 ? "constants" : "a constant"} (requires grad off): the backward pass computes no gradient for ${boxed.length > 1 ? "them" : "it"}.`;
  updateStepButtons();
}

/** A node's ledger [{input, summed_axes}] in words: the axes its inputs' gradients were
 *  summed over to undo broadcasting (L0.5). */
function describeLedger(ledger) {
  if (!ledger.length) return "No broadcasting to undo: each incoming gradient already had its input's shape.";
  return ledger.map(({ input, summed_axes: axes }) => `gradient to input #${input}: ` +
    (axes.length ? `summed over axes (${axes.join(", ")}) to undo broadcasting` : "no axis summed (no broadcasting)"))
    .join("; ");
}

/** Select node `id`: it is marked in the graph and its details open under it. */
export function selectNode(id) {
  const n = state.nodes.find((x) => x.id === id);
  if (!n) return;
  state.graph.highlight(id, "selected");
  const box = $("#node-detail");
  box.replaceChildren();
  box.append(el("h4", { text: `Node #${n.id}: ${nodeLabel(n, state.nodes)} ${shapeLabel(n.shape)}` }));
  const facts = el("dl", { class: "ref-list" });
  facts.append(el("dt", { text: "op" }), el("dd", { text: n.op }));
  if (n.text) facts.append(el("dt", { text: "source" }), el("dd", {}, el("code", { text: n.text })));
  if (n.inputs.length) facts.append(el("dt", { text: "inputs" }), el("dd", { text: n.inputs.map((i) => `#${i}`).join(", ") }));
  facts.append(el("dt", { text: "broadcast ledger" }), el("dd", { class: "ledger", text: describeLedger(n.ledger) }));
  box.append(facts);
  // the rules' module is loaded when a step is first shown, not at boot: in a graded
  // session a student's page never asks for it (the sandbox refuses it to students)
  const slot = el("div", { class: "rule-slot" });
  box.append(slot);
  import("./rule.js").then(({ backwardRule }) => {
    const rule = box.contains(slot) ? backwardRule(n) : null;
    if (rule) slot.replaceWith(rule); else slot.remove();
  });
  const split = pathsDetail(n, state.nodes, state.paths);
  if (split) box.append(split);
  if (n.expansion) box.append(expansionView(n));
  if (n.value !== undefined) box.append(heatmap(n.value, { title: `value of #${n.id}`, role: roleOf(n.op), name: `node-value:${n.id}`, context: state.scale }));
  if (n.grad != null) box.append(heatmap(n.grad, { title: `gradient at #${n.id} (∂out/∂node)`, role: "grad", name: `node-grad:${n.id}`, context: state.scale }));
  else box.append(el("p", { class: "hint", text: "No gradient flows here: it does not depend on a variable that requires grad." }));
}

/** A composite op opened up: its composition of primitive ops as a graph of its own, every
 *  inner node with its value and gradient (POST /api/v1/eval with expand). */
function expansionView(n) {
  const ex = n.expansion;
  const inner = ex.nodes.map((m) => ({ ...m, value: fromWire(m.value), grad: m.grad == null ? m.grad : fromWire(m.grad) }));
  const wrap = el("div", { class: "expansion" },
    el("h5", { text: `Opened up: ${n.op} as primitive ops` }),
    el("p", {}, el("code", { class: "expansion-expr", text: ex.expression })),
    el("p", { class: "hint", text: "Its value and the gradients it passes to its inputs equal the op's. Select an inner node:" }));
  const scroll = el("div", { class: "graph-scroll expansion-scroll" });
  const svg = document.createElementNS("http://www.w3.org/2000/svg", "svg");
  svg.setAttribute("role", "group");
  svg.setAttribute("aria-label", `the composition of ${n.op}`);
  svg.classList.add("expansion-graph");
  scroll.append(svg);
  const detail = el("div", { class: "expansion-detail", "aria-live": "polite" });
  wrap.append(scroll, detail);
  queueMicrotask(() => {
    const g = drawGraph(svg, inner, { onSelect: (id) => {
      const m = inner.find((x) => x.id === id);
      g.highlight(id, "selected");
      detail.replaceChildren(el("h5", { text: `Inner node #${m.id}: ${nodeLabel(m, inner)} ${shapeLabel(m.shape)}` }),
        el("p", {}, el("code", { text: m.text })),
        heatmap(m.value, { title: `value of inner #${m.id}`, role: roleOf(m.op), name: `inner-value:${m.id}`, context: state.scale }),
        m.grad != null ? heatmap(m.grad, { title: `gradient at inner #${m.id}`, role: "grad", name: `inner-grad:${m.id}`, context: state.scale })
          : el("p", { class: "hint", text: "No gradient: a constant." }));
    }, onRender: (drawn) => drawShares(drawn, ex.paths) });
    g.mark(new Set(inner.filter((m) => !m.requires_grad).map((m) => m.id)), "constant");
  });
  return wrap;
}

/** The nodes whose gradient the backward pass computes, output first; constants (masks,
 *  ids, trig tables, whatever depends on no variable that requires grad) skipped. */
function backwardOrder() { return [...state.nodes].reverse().filter((n) => n.requires_grad); }

export function showStep(k) {
  const order = backwardOrder();
  state.step = Math.max(-1, Math.min(k, order.length - 1));
  updateStepButtons();
  if (state.step < 0) {
    state.graph.mark(new Set(), "done");
    state.graph.highlight(null, "current");
    $("#step-label").textContent = "";
    return;
  }
  const n = order[state.step];
  state.graph.mark(new Set(order.slice(0, state.step).map((x) => x.id)), "done");
  state.graph.highlight(n.id, "current");
  selectNode(n.id);
  $("#step-label").textContent = `Backward step ${state.step + 1} of ${order.length}: node #${n.id} (${nodeLabel(n, state.nodes)})`;
}

function updateStepButtons() {
  const n = backwardOrder().length;
  $("#step-back").disabled = state.step < 0;
  $("#step-next").disabled = state.step >= n - 1;
}
