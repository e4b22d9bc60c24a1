// What the sandbox offers: the op list (grouped by clause) and the gallery of reference
// examples, both read from the server; a click on an example loads the case and runs it.

import { getJSON } from "./api.js";
import { clauseLink, el } from "./dom.js";
import { setMode, showOp, showVariables } from "./case.js";
import { run } from "./run.js";
import { hideCopy } from "./share.js";
import { formatValue } from "./wire.js";
import { $, state } from "./state.js";
import { closeGuide, revealResult } from "./guide.js";
import { suggestVariables } from "./teach.js";

export async function load() {
  state.ops = (await getJSON("api/v1/ops")).ops;
  state.examples = (await getJSON("api/v1/examples")).examples;
  buildOpSelect();
  buildGallery();
}

function buildOpSelect() {
  const select = $("#op-select");
  const groups = new Map();
  for (const op of state.ops) {
    const key = op.clause.startsWith("L7") ? "L7 layers" : op.clause.split(".")[0];
    if (!groups.has(key)) groups.set(key, el("optgroup", { label: key }));
    groups.get(key).append(el("option", { value: op.name, text: `${op.name} — ${op.summary}` }));
  }
  select.replaceChildren(...groups.values());
  select.addEventListener("change", () => {
    closeGuide();
    state.example = null;
    $("#grad-output").value = "";
    showOp(select.value);
  });
}

/** Each example of /api/v1/examples (an /api/v1/eval request) as a button; its clause id
 *  beside it links to the clause in the served contract. */
function buildGallery() {
  const list = $("#examples");
  list.replaceChildren();
  for (const ex of state.examples) {
    // a link cannot sit inside a button: the clause id keeps its place in the button
    // (invisible) and its link is laid over that place
    const b = el("button", { type: "button", class: "example" },
      el("span", { class: "ex-title" }, ex.title, el("code", { class: "ex-code", text: ex.request.expression })),
      ex.clause ? el("span", { class: "ex-clause ex-clause-space", "aria-hidden": "true", text: ex.clause }) : null);
    b.dataset.example = ex.id;
    b.addEventListener("click", async () => { closeGuide(); loadExample(ex); await run(); revealResult(); });
    list.append(el("li", { class: "example-item" }, b,
      ex.clause ? el("span", { class: "ex-clause ex-clause-link" }, clauseLink(ex.clause)) : null));
  }
  if (!state.examples.length) list.append(el("li", { class: "hint", text: "No examples served." }));
}

function loadExample(ex) {
  state.example = ex;
  hideCopy();
  $("#grad-output").value = ex.request.grad_output == null ? "" : formatValue(ex.request.grad_output);
  setMode("expr");
  $("#expr-text").value = ex.request.expression;
  showVariables(ex.request.variables);
  suggestVariables();
}
