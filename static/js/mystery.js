// Mystery mode: one op of a case has a wrong backward rule — which one, the sandbox picks
// for each student and never says. The case loads into expression mode and every run goes
// to /api/v1/mysteries/<id>/eval, the same answer as /api/v1/eval but with the student's
// bug switched on (gradients, path shares, the Taylor test and the dead-gradient report
// all run under it). The proof names a node and sends the numbers on screen: the sandbox
// grades both (docs/mystery.md). Text only, set with textContent.

import { getAnswer, postJSON } from "./api.js";
import { setMode, showVariables } from "./case.js";
import { el } from "./dom.js";
import { nodeLabel } from "./graph.js";
import { run } from "./run.js";
import { $, setStatus, state } from "./state.js";
import { formatNumber } from "./wire.js";

const STUDENT_KEY = "glassllm.student";           // the exercise view's, shared

function withStudent(url) {
  let who = "";
  try { who = localStorage.getItem(STUDENT_KEY) || ""; } catch { /* no storage: practice */ }
  return who ? `${url}?student=${encodeURIComponent(who)}` : url;
}

/** The mysteries the sandbox serves, in the select; the panel stays hidden without any. */
export async function loadMysteries() {
  let answer;
  try { answer = await getAnswer("api/v1/mysteries"); } catch { return; }
  const list = answer.ok ? answer.data.mysteries ?? [] : [];
  if (!list.length) return;
  $("#mystery-select").replaceChildren(...list.map((m) => el("option", { value: m.id, text: `${m.title} (${formatNumber(m.points)} points)` })));
  $("#mystery").hidden = false;
}

async function start() {
  const id = $("#mystery-select").value;
  const base = `api/v1/mysteries/${encodeURIComponent(id)}`;
  const answer = await getAnswer(withStudent(base));
  if (!answer.ok) { setStatus(`The mystery could not be opened: ${answer.data.error?.message ?? answer.status}`); return; }
  const m = answer.data;
  state.mystery = { id: m.id, title: m.title, evalUrl: withStudent(`${base}/eval`), proofUrl: withStudent(`${base}/proof`) };
  setMode("expr");
  $("#expr-text").value = m.expression;
  showVariables(Object.fromEntries(Object.entries(m.variables).map(([k, v]) =>
    [k, v !== null && typeof v === "object" && !Array.isArray(v) && "value" in v ? v : { value: v }])));
  $("#mystery-start").hidden = true;
  $("#mystery-on").hidden = false;
  $("#mystery-banner").textContent = `Mystery mode is on: ${m.title}. Every run below uses your hidden wrong rule.`;
  $("#mystery-text").textContent = m.text.trim();
  $("#mystery-grade").replaceChildren();
  $("#check-taylor").checked = true;                 // the test that proves it, ready
  await run();
}

function stop() {
  state.mystery = null;
  $("#mystery-on").hidden = true;
  $("#mystery-start").hidden = false;
  $("#mystery-grade").replaceChildren();
  setStatus("Mystery mode is off: every rule is the real one again.");
}

/** After each run: the op nodes of the answer, to name one as the culprit. */
function listNodes() {
  if (!state.mystery) return;
  const select = $("#mystery-node");
  const keep = select.value;
  select.replaceChildren(...state.nodes.filter((n) => n.op !== "variable" && n.op !== "constant")
    .map((n) => el("option", { value: String(n.id), text: `#${n.id} ${nodeLabel(n, state.nodes)} — ${n.text}` })));
  if ([...select.options].some((o) => o.value === keep)) select.value = keep;
}

async function prove() {
  const box = $("#mystery-grade");
  const variables = {};
  for (const { nameInput, editor } of state.vars) {
    try { variables[nameInput.value.trim()] = editor.read(); } catch (err) {
      box.replaceChildren(el("p", { class: "msg error", text: `${nameInput.value.trim()} ${err.message}` }));
      return;
    }
  }
  const node = Number($("#mystery-node").value);
  const answer = await postJSON(state.mystery.proofUrl, { node, variables });
  if (!answer.ok) {
    box.replaceChildren(el("p", { class: "msg error", text: answer.data.error?.message ?? `HTTP ${answer.status}` }));
    return;
  }
  const g = answer.data;
  const order = (x) => (x == null ? "none (linear)" : formatNumber(x));
  box.replaceChildren(
    el("p", { class: `mystery-grade ${g.node_right ? "right" : "wrong"}`, id: "mystery-node-verdict",
      text: g.node_right ? "Node: right — this op's backward is the wrong one." : "Node: not this one — its backward is right." }),
    el("p", { class: `mystery-grade ${g.input_exposes ? "right" : "wrong"}`, id: "mystery-input-verdict",
      text: (g.input_exposes ? "Input: it exposes the bug" : "Input: it does not expose the bug") +
        ` (Taylor order ${order(g.orders.bug)} under the bug, ${order(g.orders.real)} with the real rules).` }),
    el("p", { id: "mystery-score", text: `Score: ${formatNumber(g.score)} of ${formatNumber(g.points)}. ` +
      `${g.message.charAt(0).toUpperCase()}${g.message.slice(1)}.` }));
}

export function wireMystery() {
  $("#mystery-go").addEventListener("click", start);
  $("#mystery-off").addEventListener("click", stop);
  $("#mystery-prove").addEventListener("click", prove);
  document.addEventListener("glassllm:result", listNodes);
}
