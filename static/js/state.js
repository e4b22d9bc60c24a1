// The page's state, declared in one place: every module reads and writes these fields
// and no others. Everything about ops comes from GET /api/v1/ops and /api/v1/examples.

export const state = {
  mode: "op",              // "op" | "expr"
  ops: [],                 // GET /api/v1/ops: every op with its inputs and examples
  examples: [],            // GET /api/v1/examples: {id, title, clause, request, expected}
  op: null,                // op mode: the op on screen
  editors: new Map(),      // op mode: input name -> editor (editors.js)
  vars: [],                // expression mode: [{index, nameInput, editor, row}]
  example: null,           // the example the case came from, for its reference numbers
  graph: null,             // the drawn computation graph (graph.js), after an expression run
  nodes: [],               // the eval answer's nodes, values and grads read from the wire
  paths: [],               // the eval answer's paths: shared nodes' gradients split by edge
  dead: null,              // the eval answer's dead: variables whose gradient is missing or 0
  mystery: null,           // mystery mode: {id, title, evalUrl, proofUrl} while it is on
  firstNonfinite: null,    // the eval answer's first_nonfinite: {node, pass, count}
  nonfiniteExpected: false,  // that first ±∞ is what a −inf mask gives (shown in blue)
  lastShape: null,         // the last run's output shape (the random seed is shaped like it)
  lastCase: null,          // the last answered case, seed left out: is lastShape still its shape?
  scale: 0,                // the run's largest magnitude: round-off in its heatmaps is judged on it
  guide: null,             // the guided panel's content while one is open (guide.js)
  step: -1,                // the backward stepper's position (-1: not stepping)
  running: 0,              // runs started (a newer run makes an older answer stale)
  finished: 0,             // runs finished: body[data-runs] (tests and scripts wait on it)
};

export const $ = (sel) => document.querySelector(sel);

export function setStatus(text) { $("#status").textContent = text; }

export function opByName(name) { return state.ops.find((op) => op.name === name); }

/** How to colour an output of op `name`: "probability" or "value" (the registry says). */
export function roleOf(name) { return opByName(name)?.role ?? "value"; }
