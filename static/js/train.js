// The Train view: train glassllm's tiny LM from the page and watch it learn.
//
// POST /api/v1/train answers with the run itself, a Server-Sent-Events stream (read with
// api.js's postStream, since an event source cannot POST); Stop aborts the request, which
// closes the stream, which stops the run on the server. The done event carries the final weights,
// which this page keeps and sends back with POST /api/v1/model/attention.
// A run may wait in the worker's training queue first: its queued / position events say
// its place and the estimated wait ("3rd in line, about 40 s"), shown live; Stop leaves
// the line. A full line answers 503: api.js retries after Retry-After plus jitter, and
// the status says so meanwhile.
// Charts are plain SVG and HTML tables; colours: blue–white–orange for signed numbers
// (gradients), white to blue for probabilities — both colour-blind safe.

import { BusyError, postStream } from "./api.js";
import { el } from "./dom.js";

const $ = (id) => document.getElementById(id);
const SVG = "http://www.w3.org/2000/svg";

const training = {
  controller: null,   // AbortController of the running stream
  losses: [],         // [step, loss]
  steps: 0,
  weights: null,      // the done event's weights, sent back for attention
  seed: 0,
  model: null,
};

function s(tag, attrs = {}) {
  const node = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, v);
  return node;
}

function num(id) { return Number($(id).value); }

function settings() {
  const corpus = $("train-corpus").value;
  return {
    model: { d_model: num("train-d-model"), n_layers: num("train-n-layers"),
             n_heads: num("train-n-heads"), n_kv_heads: num("train-n-kv-heads") },
    steps: num("train-steps"), lr: num("train-lr"), batch: num("train-batch"),
    seed: num("train-seed"), optimizer: $("train-optimizer").value,
    every: num("train-every"), corpus: corpus.trim() ? corpus : null,
  };
}

function status(text, kind = "") {
  const p = $("train-status");
  p.textContent = text;
  p.className = "status " + kind;
}

// ---- the SSE stream ------------------------------------------------------------------

async function start() {
  stop();
  reset();
  const body = settings();
  training.seed = body.seed;
  training.model = body.model;
  training.steps = body.steps;
  const controller = new AbortController();
  training.controller = controller;
  $("train-start").disabled = true;
  $("train-stop").disabled = false;
  status("Starting…");
  let response;
  try {
    response = await postStream("api/v1/train", body, controller.signal, {
      onRetry: (attempt, ms) => {
        document.body.dataset.trainState = "retrying";
        status(`The training line is full right now; trying again in ${Math.ceil(ms / 1000)} s…`);
      } });
  } catch (err) {
    finish(controller, err.name === "AbortError" ? "Stopped." : err instanceof BusyError
      ? `${err.error?.message || err.message} Press Start to try again.`
      : `Network error: ${err.message}`, err instanceof BusyError ? "busy" : "error");
    return;
  }
  if (!response.ok) {
    const err = (await response.json().catch(() => ({}))).error || {};
    finish(controller, `Refused (${response.status}): ${err.message || response.statusText}`,
           "error");
    return;
  }
  const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
  let buffer = "";
  try {
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      buffer += value;
      let cut;
      while ((cut = buffer.indexOf("\n\n")) >= 0 || (cut = buffer.indexOf("\r\n\r\n")) >= 0) {
        const block = buffer.slice(0, cut);
        buffer = buffer.slice(cut + (buffer[cut] === "\r" ? 4 : 2));
        handleBlock(block);
      }
    }
    finish(controller, $("train-status").dataset.final || "The stream ended.");
  } catch (err) {
    finish(controller, err.name === "AbortError" ? "Stopped: the run was cancelled." :
      `The stream broke: ${err.message}`);
  }
}

function handleBlock(block) {
  let name = "message";
  const data = [];
  for (const line of block.split(/\r?\n/)) {
    if (line.startsWith("event:")) name = line.slice(6).trim();
    else if (line.startsWith("data:")) data.push(line.slice(5).trimStart());
  }
  if (!data.length) return;                               // a ping (comment) or an id
  const event = JSON.parse(data.join("\n"));
  const handler = HANDLERS[name];
  if (handler) handler(event);
}

/** 1 → "1st", 2 → "2nd", 3 → "3rd", 11 → "11th", 22 → "22nd". */
export function ordinal(n) {
  const tens = n % 100, ones = n % 10;
  const suffix = tens >= 11 && tens <= 13 ? "th" : ["th", "st", "nd", "rd"][ones] || "th";
  return `${n}${suffix}`;
}

/** "about 40 s", "about 2 min", from the server's estimate in seconds. */
export function about(seconds) {
  if (seconds < 1) return "under a second";
  if (seconds < 90) return `about ${Math.max(1, Math.round(seconds))} s`;
  return `about ${Math.round(seconds / 60)} min`;
}

function queuePlace(e) {
  const line = $("train-queue");
  document.body.dataset.trainQueue = String(e.position);
  if (e.position === 0) {                     // its turn: the start event follows at once
    line.hidden = true;
    status("Starting…");
    return;
  }
  document.body.dataset.trainState = "queued";
  line.hidden = false;
  line.textContent = `${ordinal(e.position)} in line, ${about(e.wait_s)} until your run starts` +
    ` (${e.waiting} waiting, ${e.runs_at_once} training at once on this server).`;
  status("Waiting for a free place to train: keep this page open; Stop leaves the line.");
}

const HANDLERS = {
  queued: queuePlace,
  position: queuePlace,
  start(e) {
    $("train-queue").hidden = true;
    document.body.dataset.trainState = "running";
    document.body.dataset.trainRun = e.run_id;
    status(`Run started: ${e.parameters.toLocaleString("en")} parameters, ` +
           `${e.corpus_bytes.toLocaleString("en")} bytes of text.`);
  },
  step(e) {
    training.losses.push([e.step, e.loss]);
    document.body.dataset.trainSteps = String(e.step);
    scheduleDraw();
    $("train-progress").value = e.step;
    $("train-progress").max = training.steps;
    $("train-loss").textContent = `step ${e.step} / ${training.steps}: loss ${e.loss.toFixed(4)}`;
  },
  stats(e) {
    drawNorms(e.grad_norms, e.step);
    drawDeadParameters(e.dead ?? [], e.step);
    const li = el("li", {}, el("span", { class: "step" }, `step ${e.step}`), " ",
                 el("code", {}, e.sample));
    $("train-samples").prepend(li);
    document.body.dataset.trainSamples = String($("train-samples").children.length);
  },
  done(e) {
    training.weights = e.weights;
    $("train-status").dataset.final =
      `Done: ${e.step} steps in ${e.seconds.toFixed(1)} s, final loss ${e.loss.toFixed(4)}. ` +
      "The attention panel now uses the trained weights.";
    $("attn-source").textContent = "the trained model";
    document.body.dataset.trainDone = "1";
  },
  error(e) {
    $("train-status").dataset.final = `Stopped: ${e.message}`;
    $("train-status").dataset.kind = "error";
  },
};

function finish(controller, text, kind = "") {
  if (training.controller === controller) training.controller = null;
  $("train-start").disabled = false;
  $("train-stop").disabled = true;
  status(text, kind || $("train-status").dataset.kind || "");
  delete $("train-status").dataset.final;
  delete $("train-status").dataset.kind;
  $("train-queue").hidden = true;
  document.body.dataset.trainState = "idle";
}

function stop() {
  if (training.controller) training.controller.abort();   // closes the stream: the run stops
}

function reset() {
  stop();
  training.losses = [];
  training.weights = null;
  $("attn-source").textContent = "a fresh (untrained) model";
  $("train-samples").replaceChildren();
  $("train-norms").replaceChildren();
  $("train-loss").textContent = "";
  $("train-progress").value = 0;
  $("attn-maps").replaceChildren();
  for (const k of ["trainSteps", "trainSamples", "trainDone", "trainRun", "trainQueue"]) {
    delete document.body.dataset[k];
  }
  drawLoss();
  status("");
}

// ---- the loss curve (SVG) ------------------------------------------------------------

let drawPending = false;
function scheduleDraw() {
  if (drawPending) return;
  drawPending = true;
  requestAnimationFrame(() => { drawPending = false; drawLoss(); });
}

function niceTicks(lo, hi, count = 5) {
  const span = hi - lo || 1;
  const step = 10 ** Math.floor(Math.log10(span / count));
  const mult = [1, 2, 5, 10].find((m) => span / (m * step) <= count) || 10;
  const d = mult * step;
  const ticks = [];
  for (let t = Math.ceil(lo / d) * d; t <= hi + 1e-9; t += d) ticks.push(+t.toFixed(10));
  return ticks;
}

function drawLoss() {
  const svg = $("train-curve");
  const W = 560, H = 240, L = 44, R = 12, T = 10, B = 30;
  svg.replaceChildren();
  svg.setAttribute("viewBox", `0 0 ${W} ${H}`);
  const pts = training.losses;
  const maxStep = Math.max(training.steps || num("train-steps") || 1, 1);
  const losses = pts.map((p) => p[1]);
  const hi = losses.length ? Math.max(...losses) : 6;
  const lo = losses.length ? Math.min(0, Math.min(...losses)) : 0;
  const x = (step) => L + (step / maxStep) * (W - L - R);
  const y = (v) => T + (1 - (v - lo) / ((hi - lo) || 1)) * (H - T - B);
  for (const t of niceTicks(lo, hi)) {
    svg.append(s("line", { x1: L, x2: W - R, y1: y(t), y2: y(t), class: "grid" }));
    const label = s("text", { x: L - 6, y: y(t) + 4, "text-anchor": "end", class: "tick" });
    label.textContent = String(t);
    svg.append(label);
  }
  for (const t of niceTicks(0, maxStep)) {
    const label = s("text", { x: x(t), y: H - 10, "text-anchor": "middle", class: "tick" });
    label.textContent = String(t);
    svg.append(label);
  }
  const xName = s("text", { x: W - R, y: H - 22, "text-anchor": "end", class: "tick" });
  xName.textContent = "step";
  const yName = s("text", { x: L + 8, y: T + 14, class: "tick" });
  yName.textContent = "loss (cross-entropy, nats)";
  svg.append(xName, yName);
  const path = s("polyline", {
    class: "loss", points: pts.map(([st, v]) => `${x(st).toFixed(1)},${y(v).toFixed(1)}`).join(" "),
  });
  svg.append(path);
  svg.dataset.points = String(pts.length);
  const last = pts.at(-1);
  svg.setAttribute("aria-label", last
    ? `Training loss by step: ${pts.length} steps, from ${pts[0][1].toFixed(3)} to ${last[1].toFixed(3)}`
    : "Training loss by step: no steps yet");
}

// ---- gradient norms per parameter group ----------------------------------------------

function drawNorms(norms, step) {
  const entries = Object.entries(norms);
  const max = Math.max(...entries.map(([, v]) => v), 1e-12);
  const rows = entries.map(([name, v]) => el("tr", {},
    el("th", { scope: "row" }, name),
    el("td", { class: "bar-cell" }, el("span", { class: "bar", style: `width:${(100 * v / max).toFixed(1)}%` })),
    el("td", { class: "num" }, v.toExponential(2))));
  const table = el("table", { class: "norms" },
    el("caption", {}, `Gradient L2 norm per parameter group at step ${step} (before clipping)`),
    el("thead", {}, el("tr", {}, el("th", { scope: "col" }, "group"), el("th", { scope: "col" }, "relative"),
                     el("th", { scope: "col" }, "norm"))),
    el("tbody", {}, ...rows));
  $("train-norms").replaceChildren(table);
}

/** The parameters that got no gradient in the step, in words: the embedding's rows of the
 *  bytes the batch did not hold, most often. */
function drawDeadParameters(dead, step) {
  const items = dead.map((d) => el("li", {}, `${d.name}: ` + (d.dead_rows
    ? `${d.dead_rows} of ${d.rows} rows got no gradient`
    : `${d.dead} of ${d.size} weights got no gradient`)));
  $("train-dead").replaceChildren(
    el("p", {}, dead.length ? `No gradient at step ${step}:` : `At step ${step} every parameter got a gradient.`),
    ...(items.length ? [el("ul", {}, ...items)] : []));
}

// ---- the model the attention panel asks about (attention.js) ------------------------

/** The trained weights once a run is done, else a fresh model of the settings on screen. */
export function attentionModel() {
  return training.weights ? { weights: training.weights }
    : { seed: num("train-seed"), model: settings().model };
}

// ---- wiring ----------------------------------------------------------------------------

function init() {
  // Enter in a field must not submit the form (a page reload); a listener, not an inline
  // onsubmit: the Content-Security-Policy allows no inline script
  document.querySelector(".train-form").addEventListener("submit", (e) => e.preventDefault());
  $("train-start").addEventListener("click", start);
  $("train-stop").addEventListener("click", stop);
  $("train-reset").addEventListener("click", reset);
  drawLoss();
  document.body.dataset.trainReady = "1";
}

init();
