// What turns the playground into a place to learn: the lessons (GET /api/v1/lessons),
// each opened in the guided view (guide.js); a seed that explains itself; variables
// created from the expression.

import { getJSON } from "./api.js";
import { el } from "./dom.js";
import { addVariable, caseChanged, setMode, showVariables } from "./case.js";
import { closeExercise, linkedExercise } from "./exercise.js";
import { openGuide, pointAt, revealResult } from "./guide.js";
import { caseKey } from "./results.js";
import { currentRequest, run } from "./run.js";
import { hideCopy } from "./share.js";
import { selectNode } from "./stepper.js";
import { $, opByName, state } from "./state.js";
import { flat, formatValue } from "./wire.js";

// --------------------------------------------------------------------------------------
// lessons
// --------------------------------------------------------------------------------------

let lessons = [];

export async function loadLessons() {
  const list = $("#lessons");
  try {
    lessons = (await getJSON("api/v1/lessons")).lessons;
  } catch (err) {
    list.replaceChildren(el("li", { class: "hint", text: `Lessons not loaded: ${err.message}` }));
    return;
  }
  list.replaceChildren();
  lessons.forEach((lesson, k) => {
    const b = el("button", { type: "button", class: "lesson" },
      el("span", { class: "lesson-number", "aria-hidden": "true", text: String(k + 1) }),
      el("span", { class: "lesson-title", text: lesson.title }));
    b.dataset.lesson = lesson.id;
    b.addEventListener("click", () => startLesson(lesson.id));
    list.append(el("li", { class: "lesson-item" }, b));
  });
}

/** Open lesson `id` in the guided view, run it and bring its text and result into view. */
export async function startLesson(id) {
  const k = lessons.findIndex((l) => l.id === id);
  if (k < 0) return false;
  const lesson = lessons[k];
  if (linkedExercise()) history.replaceState(null, "", location.pathname);
  closeExercise();                         // a lesson runs in the playground the exercise hid
  loadCase(lesson.request);
  openGuide({
    link: `lesson=${lesson.id}`,
    kicker: `Lesson ${k + 1} of ${lessons.length}`,
    title: lesson.title,
    code: lesson.request.expression,
    listTitle: "What to notice",
    items: lesson.notes.map((n) => ({ text: n.text, show: n.claims?.length ? () => showClaim(n.claims[0].path) : null })),
    extra: [el("p", { class: "hint", text: "Step through the backward pass under the graph, or change a number and press Run." })],
    prev: k > 0 ? () => startLesson(lessons[k - 1].id) : null,
    next: k < lessons.length - 1 ? () => startLesson(lessons[k + 1].id) : null,
    restore: () => startLesson(lesson.id),
    onLeave: () => { markCurrent(null); delete document.body.dataset.lesson; },
  });
  markCurrent(lesson.id);
  await run();
  revealResult();
  document.body.dataset.lesson = lesson.id;             // opened and in view (tests wait on it)
  performance.mark("glassllm:lesson-shown");            // bench/page.py times the first screen
  return true;
}

/** Point at the array a note's claim reads (lessons.py: "value", "grads.<variable>",
 *  "node:<source text>.value|grad"): its heatmap, or the node's details in the graph. */
function showClaim(path) {
  const node = path.match(/^node:(.*)\.(value|grad)$/);
  if (!node) {
    pointAt(document.querySelector(`figure[data-name="${path === "value" ? "value" : `grad:${path.slice(6)}`}"]`));
    return;
  }
  const n = state.nodes.find((x) => x.text === node[1]);
  if (!n) return;
  selectNode(n.id);
  pointAt(document.querySelector(`figure[data-name="node-${node[2]}:${n.id}"]`) ?? $("#node-detail"));
}

/** The lesson on screen, marked in the list (aria-current). */
function markCurrent(id) {
  for (const b of document.querySelectorAll("#lessons button")) {
    if (b.dataset.lesson === id) b.setAttribute("aria-current", "step");
    else b.removeAttribute("aria-current");
  }
}

/** `#lesson=<id>` in the address opens that lesson: a link a teacher can hand out. */
export function lessonFromLink() {
  const m = location.hash.match(/^#lesson=([\w-]+)$/);
  return m && lessons.some((l) => l.id === m[1]) ? m[1] : null;
}

/** An /api/v1/eval request on screen (expression, variables, seed). */
export function loadCase(request) {
  state.example = null;
  hideCopy();
  $("#grad-output").value = request.grad_output == null ? "" : formatValue(request.grad_output);
  setMode("expr");
  $("#expr-text").value = request.expression;
  if (request.paths) $("#paths").checked = true;        // a lesson on where gradients come from
  showVariables(request.variables ?? {});
  suggestVariables();
}

// --------------------------------------------------------------------------------------
// the seed
// --------------------------------------------------------------------------------------

/** A random seed shaped like the output of the case on screen: uniform in [-1, 1], two
 *  decimals. The last answer's shape serves only if it answered this very case; else the
 *  case runs once with the default seed to learn its shape. */
export async function randomSeed() {
  const req = currentRequest();
  if (!req) return;
  if (state.lastShape == null || state.lastCase !== caseKey(req)) {
    $("#grad-output").value = "";
    await run();                                            // learn the output's shape
    const now = currentRequest();
    if (state.lastShape == null || !now || state.lastCase !== caseKey(now)) return;   // refused
  }
  const make = (shape) => (shape.length ? Array.from({ length: shape[0] }, () => make(shape.slice(1)))
    : Math.round((Math.random() * 2 - 1) * 100) / 100 || 0.5);
  $("#grad-output").value = formatValue(make(state.lastShape));
  caseChanged();
  await run();
}

export async function onesSeed() {
  $("#grad-output").value = "";
  caseChanged();
  await run();
}

/** Say why every gradient is zero when the default seed (ones) is the reason. */
export function explainSeed(data, req) {
  const why = $("#seed-why");
  why.replaceChildren();
  const grads = Object.values(data.grads ?? {});
  if (!grads.length || req.body.grad_output != null) return;
  const allZero = grads.every((g) => flat(g).every((x) => x === 0 || (typeof x === "number" && Math.abs(x) < 1e-12)));
  if (!allZero) return;
  const last = data.nodes?.at(-1)?.op ?? state.op?.name;
  const reason = opByName(last)?.sum_invariant ?? "the output's sum does not change when the inputs move";
  why.append(`Every gradient is 0 because the default seed (ones) asks for the gradient of the output's sum, and ${reason}: `,
    el("button", { type: "button", class: "small", id: "seed-why-random", text: "try a random seed" }), ".");
  $("#seed-why-random").addEventListener("click", randomSeed);
}

// --------------------------------------------------------------------------------------
// variables from the expression
// --------------------------------------------------------------------------------------

const CONSTANTS = new Set(["inf", "nan", "True", "False", "None"]);
const KEYWORDS = new Set(["and", "as", "assert", "async", "await", "break", "class", "continue", "def",
  "del", "elif", "else", "except", "finally", "for", "from", "global", "if", "import", "in", "is",
  "lambda", "nonlocal", "not", "or", "pass", "raise", "return", "try", "while", "with", "yield"]);

/** Names the expression reads but no variable defines (not ops, methods or keywords). */
export function undefinedNames(text) {
  const ops = new Set(state.ops.map((op) => op.name));
  const defined = new Set(state.vars.map((v) => v.nameInput.value.trim()));
  const found = [];
  text = text.replace(/(["'])(?:\\.|(?!\1).)*\1?/g, (q) => " ".repeat(q.length));   // no names in strings
  for (const m of text.matchAll(/[A-Za-z_]\w*/g)) {
    const name = m[0];
    const before = text.slice(0, m.index).trimEnd();
    const after = text.slice(m.index + name.length).trimStart();
    if (before.endsWith(".")) continue;                              // a method, or .T
    if (/\d/.test(text[m.index - 1] ?? "")) continue;                // the e of 1e5
    if (after.startsWith("(") || (after.startsWith("=") && !after.startsWith("=="))) continue;   // a call, a keyword
    if (ops.has(name) || CONSTANTS.has(name) || KEYWORDS.has(name) || defined.has(name) || found.includes(name)) continue;
    found.push(name);
  }
  return found;
}

/** The input `name` fills when it is written straight as an argument of an op, e.g. the
 *  `t` of cross_entropy(x @ w, t) is its int_array `targets`; else null. */
function inputSpecOf(text, name) {
  const at = text.search(new RegExp(`(^|[^\\w.])${name}\\b`));
  if (at < 0) return null;
  let depth = 0, commas = 0, i = at + (/\w/.test(text[at]) ? 0 : 1) - 1;
  for (; i >= 0; i -= 1) {
    const ch = text[i];
    if (ch === ")" || ch === "]") depth += 1;
    else if (ch === "(" || ch === "[") { if (depth === 0) break; depth -= 1; }
    else if (ch === "," && depth === 0) commas += 1;
  }
  if (i < 0 || text[i] !== "(") return null;
  const before = text.slice(0, i).match(/(\w+)\s*$/);
  const op = before && state.ops.find((o) => o.name === before[1]);
  const rest = text.slice(at).replace(/^[^\w]*\w+\s*/, "");
  if (!op || !/^[,)]/.test(rest)) return null;      // the argument is the name itself
  return op.inputs[commas] ?? null;
}

/** Under the expression: for each undefined name, a shape prompt and a Create button. */
export function suggestVariables() {
  const box = $("#auto-vars");
  box.replaceChildren();
  const names = undefinedNames($("#expr-text").value);
  if (!names.length) return;
  box.append(el("p", { class: "hint", text: `Not defined yet: ${names.join(", ")}. Give each a shape and create it (filled with small random numbers).` }));
  for (const name of names) {
    const id = `auto-shape-${name}`;
    const shape = el("input", { id, type: "text", class: "code auto-shape", value: "2, 2", spellcheck: "false", autocomplete: "off" });
    const create = el("button", { type: "button", class: "small", text: `Create ${name}` });
    create.dataset.create = name;
    const spec = inputSpecOf($("#expr-text").value, name);
    create.addEventListener("click", () => createVariable(name, shape.value, spec));
    if (spec && spec.dtype !== "float64") shape.value = "2";
    box.append(el("div", { class: "auto-var" }, el("label", { for: id, text: `shape of ${name}` }), shape, create));
  }
}

function createVariable(name, shapeText, spec = null) {
  const shape = shapeText.split(/[,\s()]+/).filter(Boolean).map(Number);
  if (shape.some((n) => !Number.isInteger(n) || n < 1 || n > 64) || shape.length > 4) {
    $("#auto-vars").prepend(el("p", { class: "msg error", text: `shape of ${name}: write up to 4 whole numbers from 1 to 64, e.g. 2, 3` }));
    return;
  }
  // an op's integer input (class ids, token ids) gets small integers, a mask gets false
  const leaf = spec?.dtype === "int64" ? () => Math.floor(Math.random() * 2)
    : spec?.dtype === "bool" ? () => false : () => Math.round((Math.random() * 2 - 1) * 100) / 100;
  const make = (s) => (s.length ? Array.from({ length: s[0] }, () => make(s.slice(1))) : leaf());
  // requires grad as the sandbox will have it: a tensor gets a gradient, ids and masks not
  addVariable(name, { value: make(shape) }, !spec || spec.kind === "tensor");
  caseChanged();
  suggestVariables();
}
