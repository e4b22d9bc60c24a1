// The guided view: a text and what to notice in it, beside the result on a wide screen and
// just above it on a phone, with the Run bar stuck to the top of the window. A lesson opens
// it (teach.js); anything else that walks a student through a case (an exercise) can open
// it with its own text, items and buttons. Leaving it gives the playground back its
// columns. What the layout does is in playground.css (body.guided).

import { el, withClauseLinks } from "./dom.js";
import { $, state } from "./state.js";

/**
 * Open the guided view.
 * @param content {{
 *   link?: string,          the URL fragment that reopens it (`lesson=neuron`), kept while
 *                           the case is unchanged
 *   kicker?: string,        a line above the title ("Lesson 2 of 8")
 *   title: string,
 *   code?: string,          the case's formula, in monospace
 *   intro?: (Node|string)[], paragraphs before the list (already built, no HTML strings)
 *   listTitle?: string,     "What to notice"
 *   items?: (string | {text: string, show?: () => void})[], one sentence each (clause ids
 *                           become links to the docs); `show` points at what it speaks of
 *   extra?: Node[],         anything else under the list (an answer form, hints)
 *   prev?: () => void, next?: () => void,   the neighbours, when there are any
 *   restore?: () => void,   puts the original case back (offered once the case is edited)
 *   onLeave?: () => void,
 * }} content
 */
export function openGuide(content) {
  state.guide = { ...content, changed: false };
  $("#guide-kicker").textContent = content.kicker ?? "";
  $("#guide-title").textContent = content.title;
  const code = $("#guide-code");
  code.hidden = !content.code;
  code.firstElementChild.textContent = content.code ?? "";
  const body = $("#guide-body");
  body.replaceChildren();
  for (const p of content.intro ?? []) body.append(typeof p === "string" ? el("p", {}, ...withClauseLinks(p)) : p);
  if (content.items?.length) {
    body.append(el("h3", { text: content.listTitle ?? "What to notice" }),
      el("ol", { class: "guide-items" }, ...content.items.map(item)));
  }
  for (const node of content.extra ?? []) body.append(node);
  $("#guide-prev").hidden = !content.prev;
  $("#guide-next").hidden = !content.next;
  $("#guide-changed").hidden = true;
  $("#guide").hidden = false;
  document.body.classList.add("guided");
}

/** One sentence of the guide, with a Show button when it can point at what it says. */
function item(it) {
  const { text, show } = typeof it === "string" ? { text: it } : it;
  const li = el("li", {}, ...withClauseLinks(text));
  if (show) {
    const b = el("button", { type: "button", class: "small show", text: "Show",
      "aria-label": `Show where: ${text.length > 60 ? text.slice(0, 59) + "…" : text}` });
    b.addEventListener("click", show);
    li.append(" ", b);
  }
  return li;
}

/** Scroll `node` to the middle of the window and mark it for a moment: what a guide's
 *  sentence speaks of. */
export function pointAt(node) {
  if (!node) return;
  node.scrollIntoView({ block: "center", behavior: "instant" });
  node.classList.remove("pointed");
  void node.getBoundingClientRect();                  // restart the highlight
  node.classList.add("pointed");
}

/** Back to the playground's columns (the Leave button, or a case that is not the guide's). */
export function closeGuide() {
  if (!state.guide) return;
  const { onLeave } = state.guide;
  state.guide = null;
  $("#guide").hidden = true;
  document.body.classList.remove("guided");
  onLeave?.();
}

/** The case was edited: the guide's sentences speak of the original numbers, so say so
 *  and offer them back (the guide stays open: trying other numbers is the point). */
export function guideCaseChanged() {
  if (!state.guide || state.guide.changed) return;
  state.guide.changed = true;
  $("#guide-changed").hidden = !state.guide.restore;
}

/** The height the sticky Run bar covers at the top of the window. */
function barHeight() {
  const bar = document.querySelector(".action-bar");
  return bar ? bar.getBoundingClientRect().height : 0;
}

/** Whether `node`'s top part (its first `px` pixels) is on screen below the Run bar. */
function onScreen(node, px = 80) {
  const r = node.getBoundingClientRect();
  return r.top >= barHeight() - 1 && r.top + Math.min(px, r.height) <= window.innerHeight;
}

/** Scroll so the guide's text and the result are both in view: the guide's top just under
 *  the Run bar (beside the result on a wide screen, right above it on a phone). Without a
 *  guide, bring the result's top under the bar when it is off screen. */
export function revealResult() {
  const guide = $("#guide");
  const guided = state.guide && !guide.hidden;
  if (guided || !onScreen($("#output"))) {
    // On a wide screen the guide is sticky: its box sits under the bar wherever the page
    // is scrolled, so its row's top is the result's (in the flow beside it). On a phone
    // the guide is in the flow above the result. The higher of the two is the row's top.
    const tops = guided ? [guide, $(".results")] : [$("#results-title")];
    const top = Math.min(...tops.map((n) => n.getBoundingClientRect().top)) + window.scrollY;
    window.scrollTo({ top: Math.max(0, top - barHeight() - 8), behavior: "instant" });
  }
}

/** The guide's buttons, wired once. */
export function wireGuide() {
  $("#guide-prev").addEventListener("click", () => state.guide?.prev?.());
  $("#guide-next").addEventListener("click", () => state.guide?.next?.());
  $("#guide-leave").addEventListener("click", () => { closeGuide(); $("#run").focus(); });
  $("#guide-restore").addEventListener("click", () => state.guide?.restore?.());
}
