// The answer on screen: the value and every gradient as heatmaps (P3), the gradient
// check, and the reference's numbers beside them when the case is an example (P2).

import { checkView } from "./checkmodes.js";
import { deadList } from "./dead.js";
import { el, elLinked } from "./dom.js";
import { heatmap } from "./heatmap.js";
import { showWarnings } from "./messages.js";
import { showGraph } from "./stepper.js";
import { explainSeed } from "./teach.js";
import { $, roleOf, state } from "./state.js";
import { fromWire, toJSON } from "./wire.js";

/** How to colour the output: op mode asks the op; an expression, its last node's op. */
function outputRole(data) {
  return roleOf(state.mode === "op" ? state.op.name : data.nodes.at(-1)?.op);
}

/** The case without its seed: the random seed knows the output's shape only while the
 *  case on screen is the one that was answered. */
export function caseKey(req) {
  const { grad_output: _, ...rest } = req.body;
  return `${req.url} ${toJSON(rest)}`;
}

/** The largest finite magnitude among the run's numbers that are not gradients (the
 *  output, every input and node value, the seed): a gradient that is 10⁻¹² of it or less
 *  is round-off of 0, drawn as 0 (heatmap.js). */
function runScale(data, req) {
  let m = 0;
  const visit = (v) => {
    v = fromWire(v);
    if (Array.isArray(v)) v.forEach(visit);
    else if (typeof v === "number" && Number.isFinite(v)) m = Math.max(m, Math.abs(v));
  };
  visit(data.value);
  for (const n of state.nodes) visit(n.value);
  if (state.mode === "op") Object.values(req.body.inputs ?? {}).forEach(visit);
  if (req.body.grad_output != null) visit(req.body.grad_output); else m = Math.max(m, 1);
  return m;
}

export function showResult(data, req) {
  const out = $("#output");
  out.replaceChildren();
  state.nodes = (data.nodes ?? []).map((n) => ({ ...n, value: fromWire(n.value), grad: n.grad == null ? n.grad : fromWire(n.grad) }));
  state.scale = runScale(data, req);
  state.lastCase = caseKey(req);
  state.paths = data.paths ?? [];
  state.dead = data.dead ?? null;
  const context = state.scale;
  out.append(heatmap(fromWire(data.value), { title: "value", role: outputRole(data), name: "value", context }));
  const grads = Object.entries(data.grads);
  for (const [name, g] of grads) {
    out.append(heatmap(fromWire(g), { title: `gradient of ${name}`, role: "grad", name: `grad:${name}`, context }));
  }
  if (data.check) out.append(checkView(data.check));
  if (!grads.length) {
    out.append(elLinked("p", { class: "hint" }, state.mode === "op" && state.op.output === "ndarray"
      ? `${state.op.name} returns an np.ndarray (L0.2): no graph, so no gradients.`
      : "No gradients: tick “requires grad” on an input to see its gradient."));
  } else {
    out.append(elLinked("p", { class: "hint" }, req.body.grad_output == null
      ? "Each gradient is ∂(sum of the output)/∂input, shaped like its input (L0.5)."
      : "Each gradient is ∂(sum of output · grad_output)/∂input, shaped like its input (L0.5)."));
  }
  state.firstNonfinite = data.first_nonfinite ?? null;
  state.lastShape = data.shape;
  explainSeed(data, req);
  syncRequiresGrad();
  showWarnings(data);
  showReference(data);
  showGraph();
  if (state.dead) $("#graph-panel").append(deadList(state.dead, state.nodes));
  document.dispatchEvent(new CustomEvent("glassllm:result"));   // mystery.js's node list
}

/** After an expression run, each variable's checkbox shows whether it got a gradient. */
function syncRequiresGrad() {
  for (const n of state.nodes) {
    if (n.op !== "variable") continue;
    const v = state.vars.find((x) => x.nameInput.value.trim() === n.name);
    if (v && !v.editor.gradExplicit()) v.editor.setRequiresGrad(Boolean(n.requires_grad), false);
  }
}

function close(a, b) {
  if (Array.isArray(a) || Array.isArray(b)) {
    return Array.isArray(a) && Array.isArray(b) && a.length === b.length && a.every((x, i) => close(x, b[i]));
  }
  a = fromWire(a); b = fromWire(b);
  if (typeof a === "boolean" || typeof b === "boolean") return a === b;
  if (Number.isNaN(a) && Number.isNaN(b)) return true;
  if (a === b) return true;
  return Math.abs(a - b) <= 1e-9 * Math.max(1, Math.abs(a), Math.abs(b));
}

/** The example's reference numbers beside the result, each with a match mark. */
function showReference(data) {
  const box = $("#reference");
  box.replaceChildren();
  const ex = state.example;
  box.hidden = !ex?.expected;
  if (!ex?.expected) return;
  box.append(elLinked("h3", {}, `Reference: ${ex.title}${ex.clause ? ` (${ex.clause})` : ""}`));
  const rows = el("dl", { class: "ref-list" });
  const add = (label, expected, actual) => {
    const ok = actual === undefined ? null : close(expected, actual);
    rows.append(el("dt", { text: label }),
      el("dd", {}, el("code", { text: toJSON(expected) }), " ",
        ok === null ? null : el("span", { class: ok ? "match" : "mismatch", text: ok ? "✓ matches" : "✗ differs" })));
  };
  for (const [key, expected] of Object.entries(ex.expected)) {
    if (key === "grads" && expected && typeof expected === "object") {
      for (const [name, g] of Object.entries(expected)) add(`gradient of ${name}`, g, data.grads[name]);
    } else if (key === "value") {
      add("value", expected, data.value);
    } else {
      add(key.replaceAll("_", " "), expected, undefined);
    }
  }
  box.append(rows);
}
