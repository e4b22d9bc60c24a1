"""The graph of an expression on the playground (SPEC Part P) in headless Chromium: the
backward step-through visits every node that gets a gradient, skips constants, names the
first non-finite node, and points an expression's error at its token.

Playwright for Python drives Debian's Chromium (/usr/bin/chromium; `make test` installs
it). A screenshot of each state is saved under test-artifacts/ for a human to look at.
"""

from __future__ import annotations

import math

import httpx
import pytest
from browser_session import assert_numbers, click_and_wait, examples, flat, shot, table

pytestmark = [pytest.mark.browser, pytest.mark.slow]


def needs_eval(url: str) -> None:
    if httpx.post(url + "/api/v1/eval", json={}).status_code in (404, 405):
        pytest.skip("POST /api/v1/eval is not served")


def step_through(pg) -> list[str]:
    """Press Next until it is disabled; the id of the node highlighted at each step."""
    order = []
    while not pg.locator("#step-next").is_disabled():
        pg.click("#step-next")
        current = pg.locator("#graph g.node.current")
        assert current.count() == 1
        order.append(current.get_attribute("data-id"))
        assert pg.inner_text("#node-detail .ledger")
        assert len(order) <= pg.locator("#graph g.node").count()
    return order


def test_backward_step_through_reaches_every_node_that_gets_a_gradient(page, url):
    needs_eval(url)
    page.check("#mode-expr")
    remove = page.locator(".var-row .var-head button")
    while remove.count():
        remove.first.click()
    page.fill("#expr-text", "softmax(masked_fill(scores, mask, -inf)).sum()")
    page.click("#add-var")
    page.fill("#var-name-0", "scores")
    page.fill("#var-0-value", "[[0, 0, 0], [0, 0, 0], [0, 0, 0]]")
    page.click("#add-var")
    page.fill("#var-name-1", "mask")
    page.fill("#var-1-value", "[[false, true, true], [false, false, true], [false, false, false]]")
    click_and_wait(page, "#run")
    ids = page.locator("#graph g.node").evaluate_all("gs => gs.map(g => g.dataset.id)")
    # scores, mask, masked_fill, softmax, sum: all but the mask get a gradient
    assert len(ids) == 5
    assert page.locator("#graph g.node.constant").evaluate_all(
        "gs => gs.map(g => g.dataset.id)") == ["1"]
    visited = step_through(page)
    assert visited == ["4", "3", "2", "0"]          # output first, back to the variable
    assert page.inner_text("#step-label") == "Backward step 4 of 4: node #0 (scores)"
    assert page.inner_text("#step-skipped").startswith("Skipped (grey): #1 mask — a constant")
    shot(page, "step-through")
    page.check("#grad-check")                      # analytic vs numeric, per variable
    click_and_wait(page, "#run")
    assert "✓ agree" in page.inner_text(".grad-check")
    assert len(table(page, "check:scores")) == 9
    page.locator("#graph g.node >> nth=0").click()
    assert page.locator("#node-detail figure").count() >= 1


def test_step_through_skips_constants_instead_of_computing_them(page, url):
    # rope's cos and sin tables are constants: they are never "the node whose gradient is
    # being computed", and the page says they are skipped and why
    needs_eval(url)
    rope, ex = next((i, ex) for i, ex in enumerate(examples(url))
                    if ex["request"].get("expression") == "rope(x, cos, sin)")
    click_and_wait(page, f"button.example >> nth={rope}")
    constants = page.locator("#graph g.node.constant")
    assert constants.evaluate_all("gs => gs.map(g => g.dataset.id)") == ["1", "2"]
    assert "constant: no gradient" in constants.first.locator("title").text_content()
    visited = []
    for k, want in enumerate(["3", "0"]):
        page.click("#step-next")
        visited.append(page.get_attribute("#graph g.node.current", "data-id"))
        label = page.inner_text("#step-label")
        assert label.startswith(f"Backward step {k + 1} of 2: node #{want}")
        assert "No gradient flows here" not in page.inner_text("#node-detail")
        assert page.locator('#node-detail figure[data-name^="node-grad:"]').count() == 1
    assert visited == ["3", "0"] and page.locator("#step-next").is_disabled()
    # x's gradient: each pair rotated back, d(sum)/d(x0, x1) = (cos + sin, cos - sin)
    cos, sin = (flat(ex["request"]["variables"][k]["value"]) for k in ("cos", "sin"))
    want = [g for c, s in zip(cos, sin, strict=True) for g in (c + s, c - s)]
    assert_numbers(table(page, "node-grad:0"), want, "x's gradient at its node")
    assert table(page, "grad:x") == table(page, "node-grad:0")
    assert page.inner_text("#step-skipped") == (
        "Skipped (grey): #1 cos, #2 sin — constants (requires grad off): the backward pass"
        " computes no gradient for them.")
    shot(page, "step-through-rope")
    # clicking a constant still shows its value, and says why it has no gradient
    page.click('#graph g.node[data-id="1"]')
    assert "No gradient flows here" in page.inner_text("#node-detail")
    assert page.locator("#graph g.node.current").count() == 1       # the step is unchanged


def expression_case(pg, expression: str, **variables: str) -> None:
    pg.check("#mode-expr")
    remove = pg.locator(".var-row .var-head button")
    while remove.count():
        remove.first.click()
    pg.fill("#expr-text", expression)
    for k, (name, value) in enumerate(variables.items()):
        pg.click("#add-var")
        pg.fill(f"#var-name-{k}", name)
        pg.fill(f"#var-{k}-value", value)
    click_and_wait(pg, "#run")


def test_the_first_nonfinite_node_is_named_for_what_it_holds(page, url):
    # the masked softmax's -inf is the mask working, not a fault: said so, calmly, and told
    # apart from NaN by the node's own numbers
    needs_eval(url)
    masked = next(i for i, ex in enumerate(examples(url))
                  if "masked_fill" in ex["request"].get("expression", ""))
    click_and_wait(page, f"button.example >> nth={masked}")
    note = page.locator("#messages .nonfinite")
    assert note.inner_text() == (
        "−∞ first appeared at node #2 (masked_fill) in the forward pass (3 −∞ of 9 elements)"
        " — expected when masking with −inf: softmax gives those positions weight 0."
        " NaN would signal a problem.")
    assert "info" in note.get_attribute("class") and "NaN or ∞" not in page.inner_text("body")
    assert page.get_attribute('#graph g.node[data-id="2"]', "class") == "node nonfinite expected"
    shot(page, "nonfinite-mask")
    # NaN: log of a negative number
    expression_case(page, "log(x)", x="[-1, 1, 4]")
    assert note.inner_text().startswith(
        "NaN first appeared at node #1 (log) in the forward pass (1 NaN of 3 elements)"
        " — NaN signals a problem")
    assert "warning" in note.get_attribute("class")
    assert page.get_attribute('#graph g.node[data-id="1"]', "class") == "node nonfinite"
    # NumPy's log (a SIMD one on some CPUs) against Python's: two libms, each within an
    # ulp of ln 4, so within 2 ulps (2·2⁻⁵² relative, ln 4 being in [1, 2)) of each other
    value = table(page, "value")
    assert value[1] == 0.0 and value[2] == pytest.approx(math.log(4), rel=2 * 2**-52, abs=0)
    assert math.isnan(value[0])
    shot(page, "nonfinite-nan")
    # +-inf that no mask explains: log(0)
    expression_case(page, "log(x) * 2", x="[0, 1]")
    assert note.inner_text() == (
        "−∞ first appeared at node #1 (log) in the forward pass (1 −∞ of 2 elements)"
        " — a division by zero, log(0) or an overflow gives ±∞ (L1.2); check that it is"
        " intended. NaN would signal a problem.")
    # in the backward pass, read from the node's gradient: d sqrt(x)/dx at 0
    expression_case(page, "(x ** 0.5).sum()", x="[0, 4]")
    assert note.inner_text().startswith(
        "+∞ first appeared at node #0 (x) in the backward pass (1 +∞ of 2 elements)")
    assert table(page, "grad:x") == [math.inf, 0.25]


def test_the_caret_sits_under_the_token_on_its_own_line(page, url):
    """Positions are code points over the whole text (docs/http.md#positions): the page
    shows the line holding the position, the caret under the token, a tab kept a tab."""
    needs_eval(url)
    click_and_wait(page, "button.example >> nth=0")
    page.fill("#expr-text", "embedding(weight,\n\tids).sum() + zz")
    click_and_wait(page, "#run")
    msg = page.inner_text("#msg-expression")
    assert "undefined name 'zz'" in msg
    assert msg.endswith("\tids).sum() + zz\n\t" + " " * 13 + "^"), repr(msg)


def test_expression_errors_point_at_the_token_and_the_variable(page, url):
    needs_eval(url)
    click_and_wait(page, "button.example >> nth=0")
    page.fill("#expr-text", "embedding(weight, ids).sum( +")
    click_and_wait(page, "#run")
    msg = page.inner_text("#msg-expression")
    assert "position" in msg and msg.rstrip().endswith("^")
    page.fill("#expr-text", "embedding(weight, ids).sum()")
    page.fill("#var-0-value", "[[0, 0], [0]]")
    click_and_wait(page, "#run")
    assert "ragged" in page.inner_text('#expr-vars .field[data-input="weight"] .msg')
    assert page.inner_text("#msg-expression") == ""
    shot(page, "expression-error")
