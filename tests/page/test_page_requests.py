"""Every request the playground can build is accepted by the endpoint it goes to (P1, H1).

The requests are built by the page's own code in a real headless Chromium (its modules:
`currentRequest` of run.js, the op and expression builders of case.js, `checkRequest` of
checkpanel.js, the lesson loader and the seeds of teach.js), for every op's examples, every
op example turned into an expression ("as an expression"), every reference example and
every lesson, under every option of the expression mode ("Open composite ops", "Check every
gradient", the paths, the checks that do not hinge on eps in float32) and both seeds, and
posted with the page's own `postJSON` to a real sandbox; so is the check panel's request
for every array the run answered (the value and each gradient, claimed as the sandbox
answered it), with "show expected numbers" on and off.
Every answer must be 2xx. (A student on the cross-entropy lesson once pressed Check and
got "Refused (HTTP 422), request body.expand: unknown field 'expand'".)
"""

from __future__ import annotations

import pytest

pytestmark = [pytest.mark.browser, pytest.mark.slow]

# Runs in the page: builds each case with the page's modules, posts it and each check.
BUILD_AND_POST = r"""
async () => {
  const [caseJs, runJs, checkJs, teachJs, api, stateJs, wire] = await Promise.all([
    "case", "run", "checkpanel", "teach", "api", "state", "wire"].map(
      (m) => import(`/static/js/${m}.js`)));
  const { $, state } = stateJs;
  const sent = new Set();
  const answers = [];

  async function post(label, url, body) {
    const key = url + " " + wire.toJSON(body);
    if (sent.has(key)) return null;                  // the same request twice: once is enough
    sent.add(key);
    const a = await api.postJSON(url, body);
    answers.push({ label, url, status: a.status, error: a.ok ? null : a.data.error,
                   expand: Boolean(body.expand), check: Boolean(body.check),
                   modes: Boolean(body.check?.modes), paths: Boolean(body.paths) });
    return a;
  }

  /** The case on screen, as Run sends it, then every check the panel can send after it. */
  async function runAndCheck(label) {
    const req = runJs.currentRequest();
    if (!req) {
      answers.push({ label, url: "", status: 0, error: "the page built no request" });
      return;
    }
    const a = await post(label, req.url, req.body);
    if (!a || !a.ok) return;
    const targets = ["value", ...Object.keys(a.data.grads).map((n) => `grad:${n}`)];
    for (const [i, target] of targets.entries()) {
      const answered = target === "value" ? a.data.value : a.data.grads[target.slice(5)];
      for (const reveal of i === 0 ? [true, false] : [true]) {
        // what a student pastes: the array as the page shows it, read by the panel's parser
        const claim = wire.parseValue(wire.formatValue(answered), 3);
        const body = checkJs.checkRequest(target, claim, reveal);
        await post(`${label} / check ${target}`, "api/v1/check", body);
      }
    }
  }

  /** An expression on screen under every option of the expression mode. */
  async function everyOption(label) {
    for (const expand of [true, false]) {
      for (const gradCheck of [false, true]) {
        $("#expand").checked = expand;
        $("#grad-check").checked = gradCheck;
        await runAndCheck(`${label} [expand ${expand}, check ${gradCheck}]`);
      }
    }
    const modes = ["#check-taylor", "#check-adjoint", "#check-sweep", "#check-float32"];
    for (const box of modes) $(box).checked = true;   // every check, float32, no paths
    $("#paths").checked = false;
    await runAndCheck(`${label} [every check in float32, no paths]`);
    for (const box of modes) $(box).checked = false;
    $("#expand").checked = true;                      // the page's defaults
    $("#paths").checked = true;
    $("#grad-check").checked = false;
  }

  for (const op of state.ops) {
    for (const [k, ex] of op.examples.entries()) {
      caseJs.setMode("op");
      caseJs.showOp(op.name, ex.request.inputs, ex.request.requires_grad);
      const seed = ex.request.grad_output;
      $("#grad-output").value = seed == null ? "" : wire.toJSON(seed);
      await runAndCheck(`op ${op.name} example ${k}`);
      caseJs.opAsExpression();                        // "as an expression"
      caseJs.setMode("expr");
      await everyOption(`op ${op.name} example ${k} as an expression`);
    }
  }
  for (const ex of state.examples) {
    teachJs.loadCase(ex.request);
    await everyOption(`example ${ex.id ?? ex.title}`);
  }
  const lessons = (await api.getJSON("/api/v1/lessons")).lessons;
  for (const lesson of lessons) {
    teachJs.loadCase(lesson.request);
    await everyOption(`lesson ${lesson.id}`);
    await teachJs.onesSeed();                         // the seed buttons (each runs too)
    await everyOption(`lesson ${lesson.id}, seed ones`);
    await teachJs.randomSeed();
    await everyOption(`lesson ${lesson.id}, random seed`);
  }
  return { answers, ops: state.ops.length, examples: state.examples.length,
           lessons: lessons.length };
}
"""


VIEWPORT = (1280, 900)          # the page fixture (tests/page/conftest.py)


def test_every_request_the_page_builds_is_accepted(page):
    seen: list[tuple[str, int]] = []  # every API answer the page got, the UI's own runs too
    page.on("response", lambda r: seen.append((f"{r.request.method} {r.url}", r.status))
            if "/api/" in r.url else None)
    out = page.evaluate(BUILD_AND_POST)
    answers = out["answers"]
    refused = [a for a in answers if not 200 <= a["status"] < 300]
    assert not refused, "\n".join(f"{a['label']}: {a['url']} HTTP {a['status']} {a['error']}"
                                  for a in refused[:20])
    # every kind was built: op calls, expressions with composite ops opened and not, the
    # gradient check on and off, and checks of expanded expressions (the lessons')
    assert out["ops"] >= 30 and out["examples"] >= 10 and out["lessons"] >= 6
    urls = {a["url"] for a in answers}
    # the sandbox's paths, relative to its root: it may sit under a prefix (base.js)
    assert {"api/v1/eval", "api/v1/check"} <= urls
    assert any(u.startswith("api/v1/ops/") for u in urls)
    checks = [a for a in answers if a["url"] == "api/v1/check"]
    assert any(a["expand"] for a in checks) and any(not a["expand"] for a in checks)
    evals = [a for a in answers if a["url"] == "api/v1/eval"]
    assert any(a["check"] and a["expand"] for a in evals)
    assert any(a["modes"] for a in evals) and any(a["paths"] for a in evals)
    assert any(a["label"].startswith("lesson ") and a["expand"] for a in checks)
    bad = [s for s in seen if not 200 <= s[1] < 300]
    assert not bad, bad[:20]
    assert len(seen) >= len(answers)
