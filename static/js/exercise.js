// The exercise view: a link (/#exercise=<id>) opens one exercise — its text, the student's
// own numbers, a box per answer to type or paste into, the feedback the exercise allows
// (per element: the digits it agrees to, or right / wrong; the pattern of a mistake in
// words) and hints one at a time. It shows only what GET /api/v1/exercises/{id} gives: no
// rule, graph or step-through of the playground, so nothing an exercise hides is on screen.
// The text arrives as a tree of [tag, attrs, ...children] (no HTML) and is built here with
// DOM calls, each string a text node. docs/page.md#exercises.

import { BusyError, getAnswer, getJSON, postJSON } from "./api.js";
import { el } from "./dom.js";
import { isAccessProblem, showAccessProblem, signInAvailable, whoIsSignedIn } from "./signin.js";
import { $ } from "./state.js";
import { formatNumber, formatValue, fromWire, readValue, shapeOf, shapeText } from "./wire.js";

const STUDENT_KEY = "glassllm.student";
const TAGS = new Set(["p", "em", "strong", "code", "pre", "blockquote", "ul", "ol", "li", "a",
  "br", "hr", "h3", "h4", "h5", "h6", "table", "thead", "tbody", "tr", "th", "td", "s"]);
const MAX_CELLS = 1024;                 // a verdict grid larger than this is summarised
const OUTER = 3;                        // {"answers": {"key": ...}} nests the answer 3 deep

const view = { exercise: null, hintsShown: 0, list: null };

/** The exercise id in the page's link (#exercise=<id>), or null. */
export function linkedExercise() {
  const m = location.hash.match(/^#exercise=([a-z0-9-]{1,64})$/);
  return m ? m[1] : null;
}

/** A tree of the sandbox's Markdown (glassllm_service/markdown_tree.py) as DOM nodes. */
export function buildTree(nodes) {
  const out = [];
  for (const node of nodes ?? []) {
    if (typeof node === "string") { out.push(document.createTextNode(node)); continue; }
    const [tag, attrs, ...children] = node;
    if (!TAGS.has(tag)) { out.push(...buildTree(children)); continue; }
    const safe = {};
    if (tag === "a" && typeof attrs?.href === "string" && /^(https?:\/\/|\/|#|\.)/.test(attrs.href)) safe.href = attrs.href;
    if (tag === "ol" && attrs?.start) safe.start = String(Number(attrs.start) || 1);
    out.push(el(tag, safe, ...buildTree(children)));
  }
  return out;
}

function student() {
  try { return localStorage.getItem(STUDENT_KEY) || ""; } catch { return ""; }
}

function withStudent(url) {
  if (signInAvailable()) return url;              // the signed-in token names the student
  const who = student();
  return who ? `${url}?student=${encodeURIComponent(who)}` : url;
}

function say(text, kind = "") {
  const box = $("#exercise-status");
  box.textContent = text;
  box.className = `msg ${kind}`.trim();
}

/** The exercises of GET /api/v1/exercises as links in the gallery (lessons are listed
 *  with the lessons already). */
export async function loadExerciseList() {
  const list = $("#exercise-list");
  try {
    view.list = await getJSON("api/v1/exercises");
  } catch (err) {
    list.replaceChildren(el("li", { class: "hint", text: `Exercises not loaded: ${err.message}` }));
    return;
  }
  list.replaceChildren(...exerciseLinks());
}

/** GET /api/v1/exercises as it answered (null before, or when it failed). */
export function exerciseList() { return view.list; }

/** The exercises (not the lessons) as links, each opening by its link. */
function exerciseLinks() {
  const shown = (view.list?.exercises ?? []).filter((ex) => !ex.lesson);
  if (!shown.length) return [el("li", { class: "hint", text: "No exercises served." })];
  return shown.map((ex) => el("li", {},
    el("a", { href: `#exercise=${ex.id}`, class: "exercise-link", "data-exercise": ex.id },
      ex.title, el("span", { class: "ex-code", text: ` ${ex.points} pt${ex.points === 1 ? "" : "s"}${ex.open ? "" : " · closed"}` }))));
}

/** The exercise view without an exercise: the list of them (a graded session's page). */
export function showExerciseIndex() {
  document.body.classList.add("exercise-mode");
  $("#exercise-view").hidden = false;
  view.exercise = null;
  $("#exercise-title").textContent = "Exercises of this graded session";
  $("#exercise-back").hidden = true;                 // this is where it leads
  say(signInAvailable() && !whoIsSignedIn() ? "Sign in above, then open an exercise." : "");
  $("#exercise-body").replaceChildren(
    el("p", { class: "hint", text: "Work each one out by hand; your own numbers, feedback as the exercise allows, hints one at a time." }),
    el("ul", { id: "exercise-index", class: "examples" }, ...exerciseLinks()));
}

/** Close the exercise view and show the playground again. */
export function closeExercise() {
  document.body.classList.remove("exercise-mode");
  $("#exercise-view").hidden = true;
  view.exercise = null;
}

/** Open exercise `id` for the student (course mode asks for their id first). */
export async function openExercise(id) {
  document.body.classList.add("exercise-mode");
  const box = $("#exercise-view");
  box.hidden = false;
  $("#exercise-back").hidden = false;
  $("#exercise-body").replaceChildren();
  $("#exercise-title").textContent = "Exercise";
  say("Loading the exercise…");
  if (view.list?.student_required && !view.list?.sign_in && !student()) { askStudent(id); return; }
  let answer;
  try {
    answer = await getAnswer(withStudent(`api/v1/exercises/${encodeURIComponent(id)}`));
  } catch (err) {
    say(err instanceof BusyError ? err.message : `The sandbox did not answer (${err.message}).`, "error");
    return;
  }
  const { data } = answer;
  if (!answer.ok) {
    if (data.error?.code === "student_required") { askStudent(id); return; }
    if (isAccessProblem(answer.status, data)) {
      showAccessProblem(data.error, answer.status);
      say("Sign in above to open this exercise with your own numbers.");
      return;
    }
    say(`Refused (HTTP ${answer.status}): ${data.error?.message ?? ""}`, "error");
    return;
  }
  view.exercise = data;
  view.hintsShown = 0;
  say("");
  show(data);
  $("#exercise-title").focus();
}

function askStudent(id) {
  say("");
  const input = el("input", { type: "text", id: "student-id", autocomplete: "username", value: student() });
  const form = el("form", { class: "student-form" },
    el("label", { for: "student-id", text: "Your student id (as your course gave it)" }), input,
    el("button", { type: "submit", class: "primary", text: "Open the exercise" }));
  form.addEventListener("submit", (e) => {
    e.preventDefault();
    try { localStorage.setItem(STUDENT_KEY, input.value.trim()); } catch { /* storage off */ }
    openExercise(id);
  });
  $("#exercise-body").replaceChildren(form);
  input.focus();
}

function ruleText(rule) {
  return rule.digits != null ? `${rule.digits} significant digits` : `atol ${rule.atol}, rtol ${rule.rtol}`;
}

function show(ex) {
  $("#exercise-title").textContent = ex.title;
  const meta = [`${ex.points} point${ex.points === 1 ? "" : "s"}`, `right to ${ruleText(ex.rule)}`,
    `feedback: ${ex.feedback}`];
  if (ex.closes) meta.push(`closes ${ex.closes}`);
  if (ex.attempts?.max) meta.push(`${ex.attempts.max} attempts`);
  if (ex.student !== "practice") meta.push(`student ${ex.student}`);
  const body = $("#exercise-body");
  body.replaceChildren(
    el("p", { class: "hint", id: "exercise-meta", text: meta.join(" · ") }),
    el("div", { class: "exercise-text" }, ...buildTree(ex.text_nodes)),
    numbers(ex), answerForm(ex),
    el("div", { id: "exercise-feedback", "aria-live": "polite" }),
    hintsBox(ex));
}

/** The student's numbers: each variable, the seed of the backward, a function's cases. */
function numbers(ex) {
  const box = el("section", { class: "exercise-numbers", "aria-labelledby": "numbers-title" },
    el("h3", { id: "numbers-title", text: "Your numbers" }),
    el("p", { class: "hint" }, "The case: ", el("code", { text: ex.case.expression })));
  const one = (name, value) => {
    const shape = shapeOf(value) ?? [];
    return el("figure", { class: "number-block" },
      el("figcaption", {}, el("code", { text: name }), ` ${shapeText(shape)}`),
      el("pre", { class: "code", tabindex: "0", "aria-label": `${name}, shape ${shapeText(shape)}`, text: formatValue(value) }));
  };
  for (const [name, value] of Object.entries(ex.case.variables)) box.append(one(name, value));
  const g = ex.case.grad_output;
  if (g != null && !ex.function && ex.case.seed !== "ones") box.append(one("grad_output (the gradient arriving at the output)", g));
  else if (Array.isArray(g) && !ex.function) box.append(el("p", { class: "hint" }, "The gradient arriving at the output is ones (",
    el("code", { text: "grad_output" }), "): the gradient of the output's sum."));
  if (ex.function) {
    box.append(el("p", {}, "Write ", el("code", { text: ex.function.signature }),
      ". Run it on each case below (in a notebook, ", el("code", { text: `sandbox.submit("${ex.id}", function=${ex.function.name})` }),
      " does it all) and paste what it returns."));
    for (const c of ex.function.cases) {
      const details = el("details", { class: "function-case" }, el("summary", { text: `case “${c.name}”` }));
      for (const [name, value] of Object.entries(c.inputs)) details.append(one(name, value));
      box.append(details);
    }
  }
  return box;
}

function answerLabel(a, ex) {
  if (a.of === "value") return "the value of the expression";
  if (ex.function) return `${a.of} on case “${a.case}”`;
  return `∂/∂${a.of}, the gradient of ${a.of}`;
}

function answerForm(ex) {
  const form = el("form", { class: "exercise-answers", id: "exercise-form", "aria-labelledby": "answers-title" },
    el("h3", { id: "answers-title", text: "Your answer" }),
    el("p", { class: "hint", text: "Type or paste each array: a nested list like [[0.1, -0.2], [0.3, 0.4]], NumPy's printout, or rows of numbers." }));
  ex.answers.forEach((a, i) => {
    const id = `answer-${i}`;
    form.append(el("div", { class: "answer-field" },
      el("label", { for: id }, answerLabel(a, ex), el("span", { class: "shape", text: ` shape ${shapeText(a.shape)}` })),
      el("textarea", { id, class: "code", rows: String(a.shape.length > 1 ? Math.min(8, Math.max(2, a.shape[0])) : 2), spellcheck: "false",
        "data-key": a.key, "aria-describedby": `${id}-msg` }),
      el("p", { id: `${id}-msg`, class: "msg", "aria-live": "polite" })));
  });
  form.append(el("div", { class: "actions" },
    el("button", { type: "submit", class: "primary", id: "exercise-submit", text: "Check my answer" })));
  form.addEventListener("submit", (e) => { e.preventDefault(); submit(); });
  return form;
}

/** An answer as typed: JSON-like nested lists, NumPy's printout ([[1. 2.] [3. 4.]],
 *  array(...)), or rows of numbers separated by spaces or commas, reshaped to `shape`
 *  when it was typed flat. Throws an Error saying what is wrong. */
export function parseAnswer(text, shape) {
  let src = text.trim().replace(/^array\(/, "").replace(/\)\s*$/, "").replace(/,\s*dtype=\w+$/, "");
  if (!src) throw new Error("is empty");
  if (!src.includes("[")) {
    const rows = src.split(/\n+/).map((r) => r.trim()).filter(Boolean)
      .map((r) => r.split(/[\s,;]+/).filter(Boolean));
    src = rows.length === 1 ? `[${rows[0].join(",")}]` : `[${rows.map((r) => `[${r.join(",")}]`).join(",")}]`;
  } else {
    // NumPy prints lists without commas: put one between neighbours
    src = src.replace(/([\d.)\]]|inf|nan)\s+(?=[-+\d.[]|inf|nan)/gi, "$1, ");
  }
  let { value } = readValue(src, OUTER);
  const got = shapeOf(value);
  if (got === null) throw new Error("is ragged: every row needs the same length");
  const size = shape.reduce((a, b) => a * b, 1);
  if (got.length <= 1 && shape.length > 1 && (got[0] ?? 1) === size) value = reshape([value].flat(), shape);
  if (shape.length === 0 && Array.isArray(value) && value.length === 1) value = value[0];
  return value;
}

function reshape(flat, shape) {
  if (shape.length === 1) return flat;
  const step = flat.length / shape[0];
  return Array.from({ length: shape[0] }, (_, i) => reshape(flat.slice(i * step, (i + 1) * step), shape.slice(1)));
}

async function submit() {
  const ex = view.exercise;
  const answers = {};
  let bad = false;
  ex.answers.forEach((a, i) => {
    const area = $(`#answer-${i}`);
    const msg = $(`#answer-${i}-msg`);
    msg.textContent = "";
    msg.className = "msg";
    area.removeAttribute("aria-invalid");
    if (!area.value.trim()) return;                       // not given: counted as missing
    try {
      answers[a.key] = parseAnswer(area.value, a.shape);
    } catch (err) {
      bad = true;
      area.setAttribute("aria-invalid", "true");
      msg.textContent = `This answer ${err.message}.`;
      msg.className = "msg error";
    }
  });
  if (bad) { say("Fix the answer marked in red, then check again.", "error"); return; }
  if (!Object.keys(answers).length) { say("Type or paste an answer first.", "error"); return; }
  say("Checking…");
  let res;
  try {
    res = await postJSON(withStudent(`api/v1/exercises/${encodeURIComponent(ex.id)}/submit`), { answers });
  } catch (err) {
    say(err instanceof BusyError ? err.message : `The sandbox did not answer (${err.message}).`, err instanceof BusyError ? "busy" : "error");
    return;
  }
  if (!res.ok && isAccessProblem(res.status, res.data)) {
    showAccessProblem(res.data.error, res.status);
    say("Not checked: sign in above, then check again (your answers are kept).");
    return;
  }
  if (!res.ok) { say(`Refused (HTTP ${res.status}): ${res.data.error?.message ?? ""}`, "error"); return; }
  say("");
  showFeedback(res.data);
}

function showFeedback(data) {
  const box = $("#exercise-feedback");
  box.dataset.passed = String(data.passed);
  box.replaceChildren(el("p", { class: `verdict ${data.passed ? "pass" : "fail"}`, id: "exercise-verdict",
    text: data.passed ? `✓ Right: ${data.score} of ${data.points} points.`
      : `✗ Not yet: ${Math.round(data.score * 100) / 100} of ${data.points} points.` }));
  for (const a of view.exercise.answers) {
    const v = data.answers[a.key];
    if (!v) { box.append(el("p", { class: "hint", text: `${answerLabel(a, view.exercise)}: not given.` })); continue; }
    const part = el("div", { class: "answer-verdict", "data-key": a.key, "data-passed": String(v.passed) },
      el("h4", { text: `${answerLabel(a, view.exercise)}: ${v.passed ? "right" : "wrong"}` }));
    if (v.pattern) part.append(el("p", { class: "pattern", "data-pattern": v.pattern.name }, el("strong", { text: "What went wrong: " }), v.pattern.says));
    if (v.agree) part.append(grid(v, a));
    box.append(part);
  }
  if (data.attempt?.recorded) box.append(el("p", { class: "hint", text: `Attempt ${data.attempt.number}${data.attempt.max ? ` of ${data.attempt.max}` : ""}.` }));
}

/** Per element: the digits it agrees to (digits+pattern), or right / wrong (pattern). */
function grid(v, a) {
  const agree = [v.agree].flat(Infinity);
  const digits = v.digits == null ? null : [fromWire(v.digits)].flat(Infinity);
  const fig = el("figure", { class: "check-map" }, el("figcaption", { text: digits
    ? `Digits each element agrees to (${v.rule.digits ?? "—"} needed): blue right, orange wrong`
    : "Each element: blue ✓ right, orange ✗ wrong" }));
  if (agree.length > MAX_CELLS) {
    fig.append(el("p", { class: "hint", text: `${v.agreed} of ${v.elements} elements right.` }));
    return fig;
  }
  const shape = a.shape.length ? a.shape : [1];
  const cols = shape.at(-1);
  const table = el("table", { class: "verdicts" });
  const head = el("tr", {}, el("th", { scope: "col", text: "row" }));
  for (let j = 0; j < cols; j++) head.append(el("th", { scope: "col", text: String(j) }));
  const tbody = el("tbody");
  for (let i = 0; i < agree.length / cols; i++) {
    const tr = el("tr", {}, el("th", { scope: "row", text: String(i) }));
    for (let j = 0; j < cols; j++) {
      const k = i * cols + j;
      const ok = agree[k];
      const text = digits ? (digits[k] === Infinity ? "=" : formatNumber(digits[k])) : (ok ? "✓" : "✗");
      tr.append(el("td", { class: ok ? "good" : "bad", "data-verdict": ok ? "match" : "mismatch" },
        text, el("span", { class: "sr-only", text: ok ? " right" : " wrong" })));
    }
    tbody.append(tr);
  }
  table.append(el("thead", {}, head), tbody);
  fig.append(el("div", { class: "heat-scroll", tabindex: "0", role: "region", "aria-label": `verdict per element of ${a.key}` }, table));
  return fig;
}

function hintsBox(ex) {
  const box = el("section", { class: "exercise-hints", "aria-labelledby": "hints-title" },
    el("h3", { id: "hints-title", text: "Hints" }));
  if (!ex.hints) { box.append(el("p", { class: "hint", text: "This exercise has no hints." })); return box; }
  const list = el("ol", { id: "exercise-hint-list" });
  const button = el("button", { type: "button", id: "exercise-hint", text: `Show a hint (${ex.hints} available)` });
  button.addEventListener("click", async () => {
    const number = view.hintsShown + 1;
    const res = await postJSON(withStudent(`api/v1/exercises/${encodeURIComponent(ex.id)}/hints`), { number });
    if (!res.ok && isAccessProblem(res.status, res.data)) {
    showAccessProblem(res.data.error, res.status);
    say("Not checked: sign in above, then check again (your answers are kept).");
    return;
  }
  if (!res.ok) { say(`Refused (HTTP ${res.status}): ${res.data.error?.message ?? ""}`, "error"); return; }
    view.hintsShown = number;
    list.append(el("li", {}, ...buildTree(res.data.text_nodes)));
    const left = ex.hints - number;
    button.textContent = left ? `Show the next hint (${left} left)` : "No more hints";
    button.disabled = !left;
  });
  box.append(list, button);
  return box;
}
