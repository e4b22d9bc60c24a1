// Refusals, warnings and non-finite values in plain words, each beside what it names:
// the input field, the backward seed, the expression (with a caret), or the list above
// the result. Clause ids in the words link to the contract.

import { BUSY_TEXT } from "./api.js";
import { el, elLinked, withClauseLinks } from "./dom.js";
import { exprMessage } from "./case.js";
import { setMessage } from "./editors.js";
import { $, setStatus, state } from "./state.js";
import { flat } from "./wire.js";

const STATUS_WORDS = {
  400: "NumPy refused this case", 404: "Unknown name", 413: "Too large for the sandbox",
  415: "Wrong content type", 422: "This input does not fit", 401: "This sandbox needs an access token",
};

function fieldsNamed(names) {
  const fields = [...document.querySelectorAll(state.mode === "op" ? "#op-inputs .field" : "#expr-vars .field")];
  return names.flatMap((n) => fields.filter((f) => f.dataset.input === n));
}

/** The busy notice: a polite status, styled apart from the red input errors. */
export function busyNotice() {
  return el("p", { class: "msg busy", role: "status", text: BUSY_TEXT });
}

/** A refused case leaves no stale result on screen. */
export function clearResult(reason) {
  $("#output").replaceChildren(el("p", { class: "hint", text: reason }));
  $("#reference").hidden = true;
  $("#graph-panel").hidden = true;
  state.nodes = [];
}

/** The sandbox's refusal {message, input, position …} (H4) beside the input it names. */
export function showError(err, status) {
  clearResult("No result: the sandbox refused this case (the message in red says why).");
  const words = STATUS_WORDS[status] ?? `Refused (HTTP ${status})`;
  const text = `${words}: ${err.message}`;
  const names = String(err.input ?? "").split(/,\s*/)
    .map((n) => n.replace(/^(body|inputs|variables)\./, "").split(".")[0]).filter(Boolean);
  if (names.includes("grad_output")) {
    const msg = $("#msg-grad-output");
    msg.replaceChildren(...withClauseLinks(text));
    msg.className = "msg error";
    setStatus(`${words} (HTTP ${status}) — see the message beside grad_output.`);
    return;
  }
  const fields = fieldsNamed(names);
  fields.forEach((f) => setMessage(f, text));
  const aboutExpression = state.mode === "expr" && (names.includes("expression") || err.position != null || !fields.length);
  if (aboutExpression) {
    exprMessage(text);
    if (err.position != null) $("#msg-expression").append(caretBlock($("#expr-text").value, err.position));
  }
  if (!fields.length && !aboutExpression) $("#messages").append(elLinked("p", { class: "msg error" }, text));
  setStatus(`${words} (HTTP ${status})` + (fields.length ? ` — see the message beside ${names.join(", ")}.` : "."));
  (fields[0]?.querySelector("[data-control]") ?? (aboutExpression ? $("#expr-text") : null))?.scrollIntoView?.({ block: "nearest" });
}

/** The line of `src` holding code point `position` (the API counts Unicode code points,
 *  docs/http.md#positions; JS strings index UTF-16 units), in monospace, with a caret
 *  under that character. Lines end where Python's tokenizer ends them (\r\n, \r, \n);
 *  the caret's line repeats the tabs before it, so a tab moves both lines alike. */
export function caretBlock(src, position) {
  const points = Array.from(src);
  const at = Math.max(0, Math.min(position, points.length));
  const index = points.slice(0, at).join("").length;          // code points -> UTF-16 index
  const isEnd = (c) => c === "\n" || c === "\r";
  let start = index;
  while (start > 0 && !isEnd(src[start - 1])) start -= 1;
  let end = index;
  while (end < src.length && !isEnd(src[end])) end += 1;
  const line = src.slice(start, end);
  const col = index - start;
  const before = line.slice(0, col);
  const ch = Array.from(line.slice(col))[0] ?? " ";
  const pad = Array.from(before).map((c) => (c === "\t" ? "\t" : " ")).join("");
  const lineNo = src.slice(0, start).split(/\r\n|\r|\n/).length;
  return el("pre", { class: "caret-block", "aria-label": `line ${lineNo}, column ${Array.from(before).length + 1}` },
    before, el("span", { class: "caret-char", text: ch }), line.slice(col + ch.length), "\n",
    pad, el("span", { class: "caret", text: "^" }));
}

const WARNING_WORDS = [
  [/divide by zero/i, "a division by zero or log(0) gave ±∞; NumPy's value is kept (L1.2)"],
  [/invalid value/i, "an operation with no real answer (0/0, ∞ − ∞, log of a negative) gave NaN (L1.2)"],
  [/overflow/i, "a result too large for float64 became ±∞ (exp does not clip, L1.2)"],
  [/underflow/i, "a result too small for float64 became 0"],
];

function plainWarning(text) {
  const hit = WARNING_WORDS.find(([re]) => re.test(text));
  return hit ? `${hit[1]} — ${text}` : text;
}

/** NumPy's warnings (H4) and the first non-finite node of an expression run. */
export function showWarnings(data) {
  const box = $("#messages");
  for (const w of data.warnings) box.append(elLinked("p", { class: "msg warning" }, `Warning: ${plainWarning(w)}`));
  const nf = data.first_nonfinite;
  if (nf) {
    const { text, kind } = nonfiniteWords(nf);
    box.append(elLinked("p", { class: `msg ${kind} nonfinite` }, text));
    state.nonfiniteExpected = kind === "info";          // the graph marks it in blue, not red
  }
}

/** How many NaN, +∞ and −∞ a node's value (or gradient) holds, out of how many elements. */
function countNonfinite(values) {
  const c = { nan: 0, pos: 0, neg: 0, total: 0 };
  for (const x of flat(values)) {
    c.total += 1;
    if (Number.isNaN(x)) c.nan += 1;
    else if (x === Infinity) c.pos += 1;
    else if (x === -Infinity) c.neg += 1;
  }
  return c;
}

/** The first non-finite node {node, pass, count} in plain words, told apart from the
 *  data: NaN means something went wrong; ±∞ may be intended (−inf is how a mask is
 *  written, L3.5). */
function nonfiniteWords(nf) {
  const node = state.nodes.find((n) => n.id === nf.node);
  const where = `node #${nf.node}${node ? ` (${node.name ?? node.op})` : ""} in the ${nf.pass} pass`;
  const data = node && (nf.pass === "backward" ? node.grad : node.value);
  if (data == null) {
    return { kind: "warning", text: `NaN or ∞ first appeared at ${where}` + (nf.count != null ? ` (${nf.count} element(s))` : "") + "." };
  }
  const c = countNonfinite(data);
  const found = [[c.nan, "NaN"], [c.pos, "+∞"], [c.neg, "−∞"]].filter(([k]) => k > 0);
  const what = found.map(([, w]) => w).join(" and ");
  const counts = `${found.map(([k, w]) => `${k} ${w}`).join(", ")} of ${c.total} element${c.total > 1 ? "s" : ""}`;
  const head = `${what} first appeared at ${where} (${counts})`;
  if (c.nan) {
    return { kind: "warning", text: `${head} — NaN signals a problem: an operation with no real answer` +
      " (0/0, ∞ − ∞, 0 · ∞, log of a negative), and everything computed from it is NaN too." };
  }
  if (node.op === "masked_fill" && !c.pos && nf.pass === "forward") {
    return { kind: "info", text: `${head} — expected when masking with −inf: softmax gives those` +
      " positions weight 0. NaN would signal a problem." };
  }
  return { kind: "warning", text: `${head} — a division by zero, log(0) or an overflow gives ±∞` +
    " (L1.2); check that it is intended. NaN would signal a problem." };
}
