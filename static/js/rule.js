// A step of the backward pass in words and numbers: the op's backward rule as its
// docstring writes it (GET /api/v1/ops, `vjp`), then the same rule with this step's
// arrays — every number of an array of up to 64 elements, so the numbers a lesson speaks
// of are on screen, not a range — and, for the ops whose rule a lesson takes apart
// (cross_entropy: p − one-hot, divided by N), its terms side by side.

import { el } from "./dom.js";
import { shapeLabel, summary } from "./graph.js";
import { numberTable } from "./heatmap.js";
import { opByName, state } from "./state.js";
import { labelNumber, shapeOf } from "./wire.js";

/** Arrays up to this many elements are written out in full. */
export const FULL_ELEMENTS = 64;

/** An array as text: every element when it has at most FULL_ELEMENTS (one row per line,
 *  columns aligned), else its summary and shape. */
export function arrayText(v) {
  if (v == null) return "none";
  if (!Array.isArray(v)) return summary(v);
  const shape = shapeOf(v) ?? [];
  const count = shape.reduce((a, b) => a * b, 1);
  if (count > FULL_ELEMENTS) return `${summary(v)} (shape ${shapeLabel(shape)})`;
  const leaf = (x) => (typeof x === "boolean" ? (x ? "T" : "F") : labelNumber(x));
  let width = 1;
  const measure = (x) => { if (Array.isArray(x)) x.forEach(measure); else width = Math.max(width, leaf(x).length); };
  measure(v);
  const write = (x, indent) => {
    if (!Array.isArray(x)) return leaf(x).padStart(width);
    if (!x.some(Array.isArray)) return "[" + x.map((y) => leaf(y).padStart(width)).join(", ") + "]";
    const gap = x[0] && Array.isArray(x[0][0]) ? ",\n\n" : ",\n";   // a blank line between 2-D slices
    return "[" + x.map((y, i) => (i ? indent + " " : "") + write(y, indent + " ")).join(gap) + "]";
  };
  return write(v, "");
}

/** The node's backward rule, then the same rule with this step's arrays: the incoming
 *  gradient g, the saved forward values, and what each input receives. Array inputs map
 *  in order to the node's inputs. */
export function backwardRule(n) {
  const op = opByName(n.op);
  if (!op || !op.vjp || !Object.keys(op.vjp).length) return null;
  const arrayInputs = op.inputs.filter((i) => i.array);
  const pairs = arrayInputs.map((spec, k) => [spec, state.nodes.find((x) => x.id === n.inputs[k])]).filter(([, x]) => x);
  const box = el("div", { class: "rule" }, el("h5", { text: `Backward rule of ${op.name} (g = incoming gradient, out = result)` }));
  const rules = el("ul", { class: "rule-lines" });
  for (const [spec] of pairs) {
    if (op.vjp[spec.name]) rules.append(el("li", {}, el("code", { text: `∂${spec.name} = ${op.vjp[spec.name]}` })));
  }
  box.append(rules, el("h5", { text: "With this step's numbers" }));
  const nums = el("dl", { class: "rule-numbers" });
  // a long array scrolls sideways in its own line: focusable, so a keyboard scrolls it too
  const row = (k, v, note = "") => nums.append(el("dt", {}, el("code", { text: k })),
    el("dd", {}, el("code", { class: "array-text", text: v, ...(v.includes("\n") || v.length > 24
      ? { tabindex: "0", role: "region", "aria-label": `${k}, every number` } : {}) }),
    note ? el("span", { class: "hint", text: note }) : null));
  row("g", arrayText(n.grad));
  row("out", arrayText(n.value));
  for (const [spec, x] of pairs) row(`${spec.name} (#${x.id})`, arrayText(x.value));
  for (const [spec, x] of pairs) {
    if (!op.vjp[spec.name]) continue;
    const shared = state.nodes.filter((m) => m.inputs.includes(x.id)).length > 1;
    row(`∂${spec.name} → #${x.id}`, x.grad == null ? "no gradient (a constant)" : arrayText(x.grad),
      shared ? ` the total: #${x.id} also feeds other nodes` : "");
  }
  box.append(nums);
  const terms = WORKED[op.name]?.(n, pairs);
  if (terms) box.append(terms);
  return box;
}

// --------------------------------------------------------------------------------------
// rules taken apart, term by term
// --------------------------------------------------------------------------------------

const WORKED = { "cross_entropy": crossEntropyTerms };

/** softmax of each row, with the row's largest entry subtracted first (as log_softmax). */
function softmaxRows(rows) {
  return rows.map((r) => {
    const top = Math.max(...r);
    const e = r.map((x) => Math.exp(x - top));
    const total = e.reduce((a, b) => a + b, 0);
    return e.map((x) => x / total);
  });
}

/** cross_entropy's ∂logits = g · (p − one-hot) / N as its terms: p, the one-hot targets,
 *  their difference, and the division by N (times g when g is not 1), each a small table,
 *  and whether the last equals the gradient the sandbox sent back. */
function crossEntropyTerms(n, pairs) {
  const logits = pairs.find(([spec]) => spec.name === "logits")?.[1];
  const targets = state.nodes.find((x) => x.id === n.inputs[1]);
  if (!logits || !targets || typeof n.grad !== "number") return null;
  const shape = shapeOf(logits.value) ?? [];
  if (shape.length !== 2 || shape[0] * shape[1] > FULL_ELEMENTS || !shape[0]) return null;
  const [N, V] = shape;
  const g = n.grad;
  const p = softmaxRows(logits.value);
  const ids = (Array.isArray(targets.value) ? targets.value : [targets.value]).map((t) => (t < 0 ? t + V : t));
  const onehot = ids.map((t) => Array.from({ length: V }, (_, j) => (j === t ? 1 : 0)));
  const diff = p.map((r, i) => r.map((x, j) => x - onehot[i][j]));
  const grad = diff.map((r) => r.map((x) => (g * x) / N));
  const term = (value, label, role = "grad") => el("div", { class: "term" }, numberTable(value, { role, label }));
  const sign = (text) => el("span", { class: "term-op", "aria-hidden": "true", text });
  const row = el("div", { class: "terms-row", role: "group", "aria-label": "the logits' gradient, term by term" },
    term(p, "p = softmax(logits)", "probability"), sign("−"), term(onehot, "one-hot(targets)", "probability"), sign("="),
    term(diff, "p − one-hot"), sign(g === 1 ? `÷ ${N} =` : `× ${labelNumber(g)} ÷ ${N} =`),
    term(grad, g === 1 ? `(p − one-hot) / N` : `g · (p − one-hot) / N`));
  const wrap = el("div", { class: "worked" },
    el("h5", { text: `The logits' gradient, term by term (N = ${N} rows, so divide by ${N})` }), row);
  const sent = logits.grad;
  const sole = state.nodes.filter((m) => m.inputs.includes(logits.id)).length === 1;
  if (sole && Array.isArray(sent)) {
    const same = grad.every((r, i) => r.every((x, j) => Math.abs(x - sent[i][j]) <= 1e-12 * Math.max(1, Math.abs(x))));
    wrap.append(el("p", { class: same ? "match" : "mismatch",
      text: same ? `✓ the same numbers as the sandbox's gradient at #${logits.id}; each row of p − one-hot sums to 0`
        : `✗ differs from the sandbox's gradient at #${logits.id}` }));
  }
  return wrap;
}
