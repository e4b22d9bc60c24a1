"""Where gradients die and mystery mode, on the page in a real headless Chromium against
the real sandbox: a dead variable's box carries a badge in words and the list says why,
with the sandbox's numbers; a student starts a mystery, runs the case under the hidden
bug, names the node and proves it with numbers the server grades. Screenshots at
1280×800 and 390×844 under test-artifacts/, axe-core finds no serious or critical
violation, no console error."""

from __future__ import annotations

import pytest
from browser_session import ARTIFACTS, axe_serious, run_python, runs, shot, table, wait_run

from glassllm.course.zoo import mystery as M
from glassllm.sandbox.expr import evaluate

pytestmark = [pytest.mark.browser, pytest.mark.slow]

DEAD_CASE = {"expression": "relu(x @ w).sum() + detach(v).sum()",
             "variables": {"x": {"value": [[1.0, -1.0]]},
                           "w": {"value": [[1.0, -1.0], [0.5, 1.0]]}, "v": {"value": [1.0, 2.0]}}}


def new_page(browser, url, size):
    context = browser.new_context(viewport={"width": size[0], "height": size[1]})
    pg = context.new_page()
    errors: list[str] = []
    pg.on("pageerror", lambda exc: errors.append(str(exc)))
    pg.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    pg.goto(url + "/")
    pg.wait_for_selector("body[data-ready]")
    return context, pg, errors


def test_dead_variables_get_a_badge_in_words_and_the_list_says_why(browser, url):
    context, pg, errors = new_page(browser, url, (1280, 800))
    pg.check("#mode-expr")
    pg.fill("#expr-text", DEAD_CASE["expression"])
    pg.evaluate("""async (vars) => {
        (await import('/static/js/case.js')).showVariables(vars); }""", DEAD_CASE["variables"])
    assert pg.is_checked("#dead")
    before = runs(pg)
    pg.click("#run")
    wait_run(pg, before)
    answer = evaluate(**DEAD_CASE, dead=True)
    texts = {n["id"]: n["text"] for n in answer["nodes"]}
    badges = pg.eval_on_selector_all("#graph .dead-badge", "gs => gs.map(g =>"
                                     " [Number(g.dataset.node), g.textContent])")
    by_node = dict(badges)
    for d in answer["dead"]:
        assert d["node"] in by_node and by_node[d["node"]].startswith("no grad")
    w = next(d for d in answer["dead"] if d["variable"] == "w")
    assert by_node[w["node"]] == "no grad (2/4): ReLU off"
    cut = next(d for d in answer["dead"] if d["variable"] == "v")["causes"][0]["node"]
    assert texts[cut] == "detach(v)" and by_node[cut] == "cuts here: detach()"
    items = pg.eval_on_selector_all("#dead-list .dead-item", "li => li.map(x => [x.dataset"
                                    ".variable, x.textContent])")
    assert [v for v, _ in items] == [d["variable"] for d in answer["dead"]]
    assert "v gets no gradient at all." in dict(items)["v"]
    assert w["causes"][0]["words"] in dict(items)["w"]
    pg.locator("#graph-panel").scroll_into_view_if_needed()
    shot(pg, "dead-gradients-1280")
    pg.locator("#graph-scroll").screenshot(path=str(ARTIFACTS / "page-dead-graph-1280.png"))
    assert axe_serious(pg, "#graph-panel") == []
    # copied as Python, detach(...) runs in the library too: v gets no gradient there
    pg.click("#copy-python")
    out = run_python(pg.input_value("#copy-text"))
    assert "value: 3.5" in out and "grad of v: None" in out
    context.close()
    assert not errors, errors


@pytest.mark.parametrize("size", [(1280, 800), (390, 844)], ids=["wide", "phone"])
def test_a_student_finds_and_proves_the_bug_of_a_mystery(browser, url, size):
    context, pg, errors = new_page(browser, url, size)
    m = {x.id: x for x in M.load_dir()}["mystery-mlp"]
    bug = M.bug_for(m, "practice")                   # practice mode's student
    pg.wait_for_selector("#mystery:not([hidden])")
    pg.select_option("#mystery-select", m.id)
    before = runs(pg)
    pg.click("#mystery-go")
    wait_run(pg, before)
    assert "Mystery mode is on" in pg.text_content("#mystery-banner")
    page_text = pg.text_content("body")
    assert bug.id not in page_text and bug.title not in page_text
    # the run went through the bug: the page's gradients are the bug's, not the real ones
    under = M.evaluate(m, "practice", expression=m.expression, variables=m.variables)
    real = evaluate(m.expression, m.variables)
    assert under["grads"] != real["grads"]
    order = pg.get_attribute("#graph-panel", "hidden")
    assert order is None
    # the hunt: the Taylor test on the case fails under the bug (shown by the check view)
    assert "first order" in pg.text_content("#output")
    # the proof: the node of the bug's op, the numbers on screen
    node = next(n["id"] for n in real["nodes"] if n["op"] == bug.op)
    pg.select_option("#mystery-node", str(node))
    pg.click("#mystery-prove")
    pg.wait_for_selector("#mystery-score")
    assert pg.text_content("#mystery-node-verdict").startswith("Node: right")
    assert pg.text_content("#mystery-input-verdict").startswith("Input: it exposes the bug")
    assert pg.text_content("#mystery-score").startswith(f"Score: {m.points:g} of {m.points:g}")
    pg.locator("#mystery").scroll_into_view_if_needed()
    shot(pg, f"mystery-proved-{size[0]}")
    pg.locator("#mystery").screenshot(path=str(ARTIFACTS / f"page-mystery-panel-{size[0]}.png"))
    assert axe_serious(pg, "#mystery") == []
    assert axe_serious(pg, ".case") == []
    # off again: the next run is the real one
    pg.click("#mystery-off")
    before = runs(pg)
    pg.click("#run")
    wait_run(pg, before)
    assert table(pg, "grad:w2") == pytest.approx(
        [x for row in real["grads"]["w2"] for x in row], rel=1e-12, abs=1e-15)
    context.close()
    assert not errors, errors
