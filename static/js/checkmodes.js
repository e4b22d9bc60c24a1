// The gradient checks of an expression run (POST /api/v1/eval's "check", docs/http.md):
// finite differences per variable ("Check every gradient": `check: true`, as it always
// was), and the checks that do not hinge on eps — the Taylor remainder's order, the
// adjoint (dot-product) test, the eps sweep drawn as a log-log plot (logplot.js) — each
// maybe in emulated float32: then `check` is {"modes": [...], "float32": true}. The
// choices live in the expression mode's controls; this module reads them into the request
// and draws the answer. docs/page.md, "Checks that do not hinge on eps".

import { el } from "./dom.js";
import { heatmap } from "./heatmap.js";
import { logPlot, plotKey } from "./logplot.js";
import { $, state } from "./state.js";
import { formatNumber, fromWire } from "./wire.js";

const BOXES = [["#grad-check", "finite_differences"], ["#check-taylor", "taylor"],
  ["#check-adjoint", "adjoint"], ["#check-sweep", "eps_sweep"]];

/** The request's `check` from the controls: undefined (none), true (finite differences,
 *  per variable, as before the modes) or {"modes": [...], "float32"?: true}. */
export function checkField() {
  const modes = BOXES.filter(([box]) => $(box).checked).map(([, mode]) => mode);
  const float32 = $("#check-float32").checked;
  if (!modes.length) return undefined;
  if (modes.length === 1 && modes[0] === "finite_differences" && !float32) return true;
  return float32 ? { modes, float32: true } : { modes };
}

/** The controls from a request's `check` (a shared link). */
export function restoreCheck(check) {
  const modes = check === true ? ["finite_differences"] : Array.isArray(check?.modes) ? check.modes : [];
  for (const [box, mode] of BOXES) $(box).checked = modes.includes(mode);
  $("#check-float32").checked = Boolean(check?.float32);
}

/** The answer's `check`, per variable (check: true) or per mode. */
export function checkView(check) {
  if (!("float32" in check)) return perVariable(check, "Gradient check: analytic vs numeric");
  const box = el("div", { class: "grad-check check-modes-result" },
    el("h3", { text: `Gradient checks${check.float32 ? ", in emulated float32" : ""}` }));
  if (check.float32) {
    box.append(el("p", { class: "hint", text: "float32: the function's inputs and outputs are rounded to float32 (about 7 digits); the engine stays float64." }));
  }
  if (check.finite_differences) {
    const fd = check.finite_differences;
    box.append(perVariable(fd.inputs, `Finite differences, eps ${formatNumber(fromWire(fd.eps))}`));
  }
  if (check.taylor) box.append(taylorView(check.taylor));
  if (check.adjoint) box.append(adjointView(check.adjoint));
  if (check.eps_sweep) box.append(sweepView(check.eps_sweep, check.float32));
  if (check.note) box.append(el("p", { class: "hint", text: check.note }));
  return box;
}

/** Analytic (backward) vs numeric (central differences), per variable. */
function perVariable(report, title) {
  const box = el("div", { class: "grad-check" }, el("h3", { text: title }));
  for (const [name, c] of Object.entries(report)) {
    box.append(el("p", { class: c.passed ? "match" : "mismatch",
      text: `${name}: ${c.passed ? "✓ agree" : "✗ disagree"} — max abs error ${formatNumber(fromWire(c.max_abs_err))},` +
        ` max rel error ${formatNumber(fromWire(c.max_rel_err))}` }));
    box.append(heatmap(fromWire(c.numeric), { title: `numeric gradient of ${name}`, role: "grad", name: `check:${name}`, context: state.scale }));
  }
  return box;
}

function verdict(ok, text) { return el("p", { class: ok ? "match" : "mismatch", text: `${ok ? "✓" : "✗"} ${text}` }); }

const TAYLOR_WORDS = [
  [(t) => t.linear, "linear: every remainder is round-off, the first-order prediction is exact"],
  [(t) => t.order >= 1.8, "second order: the remainder shrinks as h², the gradient is right"],
  [(t) => t.order != null && t.order <= 1.2, "first order: the remainder shrinks only as h, the gradient is wrong (or x sits on a kink)"],
  [() => true, "inconclusive: too few remainders clear of round-off; try float64 or another seed"]];

/** The Taylor remainder r(h) = |L(x + h d) − L(x) − h ⟨g, d⟩| against h, and its order. */
function taylorView(t) {
  const steps = fromWire(t.steps), r = fromWire(t.remainders), floor = fromWire(t.roundoff);
  const words = TAYLOR_WORDS.find(([test]) => test(t))[1];
  const order = t.order == null ? "none" : formatNumber(fromWire(t.order));
  const series = [
    { name: "remainder r(h)", cls: "measured", dots: true, points: steps.map((h, k) => [h, r[k]]) },
    { name: "round-off level", cls: "rounding", points: steps.map((h, k) => [h, floor[k]]) }];
  const box = el("div", { class: "check-mode taylor" }, el("h4", { text: "Taylor remainder: the order of the error" }),
    verdict(t.passed, `order ${order} — ${words}`));
  box.dataset.order = t.order == null ? "" : String(fromWire(t.order));
  box.append(el("p", { class: "hint", text: "r(h) is the error of the first-order prediction L(x) + h ⟨g, d⟩ along a random direction d; halving h divides it by 4 when g is right (order 2), by 2 when it is wrong (order 1). No tolerance, no eps to choose." }),
    el("figure", { class: "plot" }, logPlot({ title: "Taylor remainder against the step h",
      desc: `The remainder of the first-order prediction for h from ${formatNumber(steps[0])} down, halving; observed order ${order}.`,
      xLabel: "step h", yLabel: "remainder", series }), plotKey(series)));
  return box;
}

/** ⟨J^T u, v⟩ from backward against ⟨u, J v⟩ from central differences. */
function adjointView(a) {
  const box = el("div", { class: "check-mode adjoint" }, el("h4", { text: "Adjoint (dot-product) test" }),
    verdict(a.passed, `⟨Jᵀu, v⟩ = ${formatNumber(fromWire(a.vjp))} (backward) and ⟨u, J v⟩ = ${formatNumber(fromWire(a.jvp))}` +
      ` (central differences along v, eps ${formatNumber(fromWire(a.eps))}): they differ by ${formatNumber(fromWire(a.abs_err))},` +
      ` ${a.passed ? "within" : "beyond"} the tolerance ${formatNumber(fromWire(a.tolerance))}`),
    el("p", { class: "hint", text: "One random direction v and one random seed u: two forward passes and one backward, however many elements the inputs have." }));
  return box;
}

/** The eps sweep: the directional central difference's error against eps, the best marked. */
function sweepView(s, float32) {
  const eps = fromWire(s.eps), slope = Math.abs(fromWire(s.slope));
  const scale = slope > 0 ? slope : 1;                       // relative when it can be
  const rel = (xs) => fromWire(xs).map((y, k) => [eps[k], y / scale]);
  const series = [
    { name: "measured error", cls: "measured", dots: true, points: rel(s.error) },
    { name: "truncation ≈ c·eps²", cls: "truncation", guide: true, points: rel(s.truncation) },
    { name: "rounding ≲ u·S / eps", cls: "rounding", guide: true, points: rel(s.rounding) }];
  const best = fromWire(s.best_eps);
  const plot = logPlot({ title: `Finite-difference error against eps${float32 ? " (float32)" : ""}`,
    desc: `As eps falls the truncation error falls as eps² and the rounding error rises as 1/eps; the error is least at eps = ${formatNumber(best)}.`,
    xLabel: "eps", yLabel: slope > 0 ? "relative error" : "error", series,
    marker: { x: best, label: `best eps ${formatNumber(best)}` } });
  plot.classList.add("eps-plot");
  plot.dataset.bestEps = String(best);
  const box = el("div", { class: "check-mode eps-sweep" }, el("h4", { text: "eps sweep" }),
    el("p", { text: `The best eps here is ${formatNumber(best)}, with an error of ${formatNumber(fromWire(s.best_error))}` +
      `${slope > 0 ? ` (${formatNumber(fromWire(s.best_error) / slope)} of the slope)` : ""}.` }),
    el("figure", { class: "plot" }, plot, plotKey(series)),
    el("p", { class: "hint", text: "Right of the best eps the truncation error of (L(x + eps v) − L(x − eps v)) / 2eps dominates, c·eps² (c from the third derivative); left of it rounding does, growing as eps shrinks: u, the unit roundoff (2⁻⁵³, float32's 2⁻²⁴), times S, the size of what L sums. float32's best eps is about 1000 times float64's." }));
  return box;
}
