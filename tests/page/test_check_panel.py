"""The playground's "check my gradient" panel in a real headless Chromium
against the real sandbox: after a run the student pastes their gradient for one input and
the page shows POST /api/v1/check's verdict per element (blue match / orange mismatch
cells, each also labelled in words) and the summary; a wrong shape is a message naming the
input; reveal off hides the expected numbers; axe-core finds no serious or critical
violation in the panel. Screenshots go to test-artifacts/page-check-*.png.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
from browser_session import ARTIFACTS, inject_axe

pytestmark = [pytest.mark.browser, pytest.mark.slow]



# softmax's first example (its inputs fill the form when the page opens), with a seed
A = np.array([[1000.0, 1000.0], [0.0, 1.0]])
SEED = np.array([[1.0, 0.0], [0.0, 1.0]])


def softmax_backward(a: np.ndarray, g: np.ndarray) -> np.ndarray:
    """The reference: d(sum(softmax(a) * g))/da = s * (g - sum(g * s)) along the last axis."""
    s = np.exp(a - a.max(axis=-1, keepdims=True))
    s /= s.sum(axis=-1, keepdims=True)
    return s * (g - (g * s).sum(axis=-1, keepdims=True))


RIGHT = softmax_backward(A, SEED)      # [[0.25, -0.25], [-0.1966…, 0.1966…]]


VIEWPORT = (1280, 900)          # the page fixture (tests/page/conftest.py)


def shot(pg, name: str) -> None:
    ARTIFACTS.mkdir(exist_ok=True)
    pg.screenshot(path=str(ARTIFACTS / f"page-check-{name}.png"), full_page=True)


def run_softmax(pg) -> None:
    """Softmax's example with the seed, run; the panel then lists what can be checked."""
    assert pg.is_hidden("#check-panel")                  # nothing ran yet: nothing to check
    pg.fill("#grad-output", json.dumps(SEED.tolist()))
    pg.click("#run")
    pg.wait_for_selector("#check-panel:not([hidden])")


def check(pg, claim: str, reveal: bool = True) -> None:
    pg.select_option("#check-target", "grad:a")
    pg.fill("#check-claim", claim)
    if pg.is_checked("#check-reveal") != reveal:
        pg.click("#check-reveal")
    pg.evaluate("document.querySelector('#check-result').replaceChildren()")
    pg.click("#check-go")
    pg.wait_for_function("() => document.querySelector('#check-result').childElementCount > 0"
                         " || document.querySelector('#check-msg').textContent !== ''")


def verdicts(pg) -> dict[str, str]:
    """Each drawn cell's index -> its verdict, and every cell's words agree with it."""
    cells = pg.eval_on_selector_all("#check-result td", "tds => tds.map(td => [td.dataset.index,"
                                    " td.dataset.verdict, td.className, td.textContent])")
    out = {}
    for index, verdict, cls, text in cells:
        assert text.endswith(" " + verdict), text        # the word, not only the colour
        assert cls == {"match": "good", "mismatch": "bad"}[verdict]
        out[index] = verdict
    return out


def summary(pg) -> dict[str, str]:
    """The summary list: each <dt> -> its <dd>."""
    pairs = pg.eval_on_selector_all(".check-summary dt", "dts => dts.map(dt => [dt.textContent,"
                                    " dt.nextElementSibling.textContent])")
    return dict(pairs)


def test_the_panel_offers_the_value_and_each_gradient(page):
    run_softmax(page)
    options = page.eval_on_selector_all("#check-target option", "os => os.map(o => o.value)")
    assert options == ["value", "grad:a"]
    assert page.input_value("#check-target") == "grad:a"   # a gradient first


def test_a_right_gradient_passes_with_every_cell_a_match(page):
    run_softmax(page)
    assert RIGHT[0].tolist() == [0.25, -0.25]
    check(page, json.dumps(RIGHT.tolist()))
    assert page.get_attribute("#check-result", "data-passed") == "true"
    assert "✓ passed" in page.text_content("#check-result .verdict")
    assert verdicts(page) == {"0,0": "match", "0,1": "match", "1,0": "match", "1,1": "match"}
    assert summary(page) == {"shape": "(2, 2) ✓ matches",
                             "allclose": "yes (rtol 0.00001, atol 1e-8): 0 of 4 elements mismatch",
                             "max abs error": "0", "max rel error": "0"}
    assert page.text_content("#check-msg") == ""
    shot(page, "right")


def test_a_wrong_gradient_marks_the_wrong_cells(page):
    run_softmax(page)
    wrong = RIGHT.copy()
    wrong[0, 1] = 0.25                                    # a sign slip
    wrong[1, 0] += 1e-3                                   # and a small one, past rtol 1e-5
    check(page, json.dumps(wrong.tolist()))
    assert page.get_attribute("#check-result", "data-passed") == "false"
    assert "✗ not passed" in page.text_content("#check-result .verdict")
    assert verdicts(page) == {"0,0": "match", "0,1": "mismatch", "1,0": "mismatch",
                              "1,1": "match"}
    # max rel error: |0.25 - (-0.25)| / 0.25 = 2, larger than 1e-3 / 0.1966… at [1, 0]
    assert summary(page) == {"shape": "(2, 2) ✓ matches",
                             "allclose": "no (rtol 0.00001, atol 1e-8): 2 of 4 elements mismatch",
                             "max abs error": "0.5", "max rel error": "2",
                             "first mismatch": "at [0, 1]: expected −0.25, given 0.25"}
    shot(page, "wrong")


def test_reveal_off_hides_the_expected_numbers(page):
    run_softmax(page)
    wrong = RIGHT.copy()
    wrong[1, 1] = 0.0
    check(page, json.dumps(wrong.tolist()), reveal=False)
    assert verdicts(page)["1,1"] == "mismatch"
    assert summary(page) == {"shape": "(2, 2) ✓ matches",
                             "allclose": "no (rtol 0.00001, atol 1e-8): 1 of 4 elements mismatch",
                             "first mismatch": "at [1, 1]"}
    assert "Expected numbers and error sizes are hidden" in page.text_content("#check-result")


def test_a_wrong_shape_is_a_message_naming_the_input(page):
    run_softmax(page)
    check(page, json.dumps(RIGHT.reshape(-1).tolist()))
    msg = page.text_content("#check-msg")
    assert msg == ("Your gradient of a has shape (4,), but the gradient of a has shape (2, 2):"
                   " paste a list of the same shape (no broadcasting).")
    assert page.get_attribute("#check-claim", "aria-invalid") == "true"
    assert page.eval_on_selector_all("#check-result td", "tds => tds.length") == 0
    shot(page, "shape")


def test_text_that_is_not_a_list_is_refused_on_the_page(page):
    run_softmax(page)
    check(page, "[[0.25, -0.25], [0.1")
    assert page.text_content("#check-msg").startswith("Your gradient of a ")
    assert page.eval_on_selector_all("#check-result > *", "xs => xs.length") == 0


def test_an_expression_case_is_checked_too(page):
    """x * y: the gradient of y is x. The expression case goes as is (no eval's `check`)."""
    page.click("#mode-expr")
    page.fill("#expr-text", "x * y")
    for remove in page.query_selector_all("#expr-vars .var-row button"):   # start empty
        remove.click()
    page.click("#add-var")
    page.click("#add-var")
    names = page.query_selector_all("#expr-vars .var-name")
    names[0].fill("x")
    names[1].fill("y")
    values = page.query_selector_all("#expr-vars textarea")
    values[0].fill("[1.5, -2.0, 3.0]")
    values[1].fill("[4.0, 5.0, 6.0]")
    page.check("#grad-check")            # eval's `check` flag, which the panel leaves out
    page.click("#run")
    page.wait_for_selector("#check-panel:not([hidden])")
    page.wait_for_function("() => document.querySelectorAll('#check-target option').length === 3")
    page.select_option("#check-target", "grad:y")
    page.fill("#check-claim", "[1.5, -2.0, 2.0]")
    page.click("#check-go")
    page.wait_for_selector("#check-result td")
    assert verdicts(page) == {"0": "match", "1": "match", "2": "mismatch"}
    assert summary(page)["first mismatch"] == "at [2]: expected 3, given 2"


def test_axe_finds_no_serious_violation_in_the_panel(page):
    run_softmax(page)
    wrong = RIGHT.copy()
    wrong[0, 0] = 1.0
    check(page, json.dumps(wrong.tolist()))
    inject_axe(page)
    result = page.evaluate("axe.run('#check-panel').then(r => r.violations"
                           ".filter(v => v.impact === 'serious' || v.impact === 'critical')"
                           ".map(v => [v.id, v.nodes.length, v.nodes[0].target.join(' ')]))")
    assert result == []
    shot(page, "axe")


def test_a_refusal_of_the_sandbox_names_the_input(page):
    """A ragged list is read on the page but refused by the sandbox (422): the message
    names the claimed input, as the case's own refusals do."""
    run_softmax(page)
    check(page, "[[0.25, -0.25], [0.1]]")
    msg = page.text_content("#check-msg")
    assert msg.startswith("Refused (HTTP 422), claimed.grads.a: "), msg
    assert page.eval_on_selector_all("#check-result > *", "xs => xs.length") == 0


def test_a_new_run_clears_the_older_verdict(page):
    run_softmax(page)
    check(page, json.dumps(RIGHT.tolist()))
    assert page.eval_on_selector_all("#check-result td", "tds => tds.length") == 4
    page.click("#run")
    page.wait_for_function("() => document.querySelector('#check-result').childElementCount === 0")
    assert page.is_visible("#check-panel") and page.text_content("#check-msg") == ""


def test_the_value_can_be_checked_too(page):
    run_softmax(page)
    s = np.exp(A - A.max(axis=-1, keepdims=True))
    s /= s.sum(axis=-1, keepdims=True)                    # [[0.5, 0.5], [0.2689…, 0.7310…]]
    page.select_option("#check-target", "value")
    page.fill("#check-claim", json.dumps([[0.5, 0.5], [0.2689, float(s[1, 1])]]))
    page.click("#check-go")
    page.wait_for_selector("#check-result td")
    assert verdicts(page) == {"0,0": "match", "0,1": "match", "1,0": "mismatch", "1,1": "match"}
    expected = float(s[1, 0])
    assert summary(page)["first mismatch"] == f"at [1, 0]: expected {expected!r}, given 0.2689"
