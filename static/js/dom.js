// A tiny DOM helper shared by the page's modules.

import { appURL } from "./base.js";

/** el("td", {class: "x", text: "1"}, child, ...) -> a new element. A `style` is set
 *  through the CSSOM: the Content-Security-Policy refuses inline style attributes. */
export function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (k === "class") node.className = v;
    else if (k === "text") node.textContent = v;
    else if (k === "style") node.style.cssText = v;
    else node.setAttribute(k, v);
  }
  for (const c of children) if (c != null) node.append(c);
  return node;
}

/** Where a clause of the contract is served: L → the library, H → HTTP, P → the page. */
const CONTRACT_PAGES = { L: "library", H: "http", P: "page" };
// a clause id, with the word "SPEC" before it dropped: students have the docs the sandbox
// serves, not the contract's source, so the id alone is the link
const CLAUSE_ID = /(?:\bSPEC\s+)?\b([LHP](?:0|[1-9]\d*)(?:\.\d+)?)\b/g;
const PAGE_WORDS = { L: "the library", H: "the HTTP API", P: "the page" };

/** A link to clause `id` (e.g. "L3.5") in the contract the sandbox serves. */
export function clauseLink(id) {
  return el("a", { class: "clause", href: appURL(`docs/contract/${CONTRACT_PAGES[id[0]]}#${id}`),
    target: "_blank", title: `${id} in the docs (${PAGE_WORDS[id[0]]})`, text: id });
}

/** `text` as nodes, each clause id in it (L1.2, H4 …) a link to its anchor in the docs. */
export function withClauseLinks(text) {
  const nodes = [];
  let at = 0;
  for (const m of text.matchAll(CLAUSE_ID)) {
    if (m.index > at) nodes.push(text.slice(at, m.index));
    nodes.push(clauseLink(m[1]));
    at = m.index + m[0].length;
  }
  if (at < text.length) nodes.push(text.slice(at));
  return nodes;
}

/** el(), with the clause ids of `text` as links: el("p", attrs) holding withClauseLinks. */
export function elLinked(tag, attrs, text) {
  return el(tag, attrs, ...withClauseLinks(text));
}
