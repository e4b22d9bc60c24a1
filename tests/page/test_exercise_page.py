"""The exercise view in headless Chromium against a real sandbox (docs/page.md#exercises):
a link opens an exercise with the student's own numbers; a wrong answer gets its pattern
and the digits per element, a right one passes; hints come one at a time; the text's
HTML stays text; no console error, axe-core clean, screenshots at 1280×800 and 390×844
(test-artifacts/exercise-*.png)."""

from __future__ import annotations

import json

import numpy as np
import pytest
from browser_session import ARTIFACTS, axe_serious

from glassllm.course import build_case, load
from glassllm.course.exercise import SHIPPED

pytestmark = [pytest.mark.browser, pytest.mark.slow]
CE = load(SHIPPED / "softmax-ce-logits.toml")


def open_link(browser, url, link, width, height):
    context = browser.new_context(viewport={"width": width, "height": height})
    pg = context.new_page()
    errors: list[str] = []
    pg.on("pageerror", lambda exc: errors.append(str(exc)))
    pg.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    pg.goto(url + link)
    pg.wait_for_selector("body[data-ready]")
    return context, pg, errors


def shot(pg, name: str) -> None:
    ARTIFACTS.mkdir(exist_ok=True)
    pg.screenshot(path=str(ARTIFACTS / f"exercise-{name}.png"), full_page=True)


def numpy_printout(a: np.ndarray) -> str:
    with np.printoptions(precision=6, suppress=False):
        return repr(a)


@pytest.mark.parametrize(("width", "height"), [(1280, 800), (390, 844)])
def test_open_by_link_answer_wrongly_then_rightly_and_reveal_a_hint(browser, url, width,
                                                                      height):
    context, pg, errors = open_link(browser, url, "/#exercise=softmax-ce-logits", width, height)
    pg.wait_for_selector("#exercise-form")
    assert pg.is_hidden("main.layout")                  # the playground is out of the way
    assert pg.inner_text("#exercise-title") == CE.title
    case = build_case(CE, "practice")
    shown = pg.inner_text(".exercise-numbers figure:first-of-type pre")
    assert json.loads(shown.replace("\n", "")) == case.variables["logits"].tolist()
    # wrong: the mean forgotten, pasted as NumPy prints it
    pg.fill("#answer-0", numpy_printout(case.expected["logits"] * 4))
    pg.click("#exercise-submit")
    pg.wait_for_selector('#exercise-feedback[data-passed="false"] .pattern')
    said = pg.inner_text(".answer-verdict .pattern")
    assert "N times the expected array" in said and "batch size" in said
    cells = pg.eval_on_selector_all(".answer-verdict td", "tds => tds.map(t => t.dataset.verdict)")
    assert cells == ["mismatch"] * 20
    # a hint, then the next
    pg.click("#exercise-hint")
    pg.wait_for_selector("#exercise-hint-list li")
    assert pg.inner_text("#exercise-hint-list li") == CE.hints[0].replace("`", "")
    shot(pg, f"wrong-{width}")
    # right: rounded to the exercise's 4 significant digits, typed as rows of numbers
    rows = "\n".join(" ".join(f"{x:.4g}" for x in row) for row in case.expected["logits"])
    pg.fill("#answer-0", rows)
    pg.click("#exercise-submit")
    pg.wait_for_selector('#exercise-feedback[data-passed="true"]')
    assert pg.inner_text("#exercise-verdict").startswith("✓ Right: 5")
    digits = pg.eval_on_selector_all(".answer-verdict td", "tds => tds.map(t => t.dataset.verdict)")
    assert digits == ["match"] * 20
    shot(pg, f"right-{width}")
    assert axe_serious(pg, "#exercise-view") == []
    scroll = pg.evaluate("document.documentElement.scrollWidth <= window.innerWidth + 1")
    assert scroll, "the exercise scrolls sideways"
    assert errors == []
    context.close()


def test_a_typing_slip_is_named_beside_its_box_and_nothing_is_sent(browser, url):
    context, pg, errors = open_link(browser, url, "/#exercise=broadcast-bias", 1280, 800)
    pg.wait_for_selector("#exercise-form")
    pg.fill("#answer-0", "[[1, 2], [3]]")
    pg.click("#exercise-submit")
    assert "is ragged" in pg.inner_text("#answer-0-msg")
    assert pg.get_attribute("#answer-0", "aria-invalid") == "true"
    assert pg.inner_text("#exercise-feedback") == ""
    # the broadcast shape, as a student leaves it: the pattern names it
    case = build_case(load(SHIPPED / "broadcast-bias.toml"), "practice")
    pg.fill("#answer-0", json.dumps(case.grad_output.tolist()))
    pg.click("#exercise-submit")
    pg.wait_for_selector(".answer-verdict .pattern")
    assert pg.get_attribute(".answer-verdict .pattern", "data-pattern") == "broadcast_not_summed"
    assert errors == []
    context.close()


def test_the_gallery_lists_exercises_and_the_back_link_returns(browser, url):
    context, pg, errors = open_link(browser, url, "/", 1280, 800)
    pg.wait_for_selector('a.exercise-link[data-exercise="rmsnorm-backward"]')
    pg.click('a.exercise-link[data-exercise="rmsnorm-backward"]')
    pg.wait_for_selector("#exercise-form")
    assert "rms_norm_backward(x, weight, g) -> (dx, dweight)" in pg.inner_text("#exercise-body")
    assert pg.locator(".function-case").count() == 3
    # the playground's rule and step-through are not on screen in the exercise view
    assert pg.is_hidden("#graph-panel") and pg.is_hidden("main.layout")
    pg.click("#exercise-back")
    pg.wait_for_selector("main.layout", state="visible")
    assert pg.is_hidden("#exercise-view")
    # a lesson's permalink (its case in the link) still opens and runs
    lesson = {"mode": "expr", "expression": "rms_norm(x, weight, 0.0)",
              "variables": {"x": {"value": [[3.0, 4.0]]}, "weight": {"value": [1.0, 2.0]}}}
    pg.goto(url + "/#" + json.dumps(lesson))
    pg.reload()
    pg.wait_for_selector("body[data-ready]")
    pg.wait_for_function("() => Number(document.body.dataset.runs || 0) > 0")
    assert pg.input_value("#expr-text") == "rms_norm(x, weight, 0.0)"
    assert errors == []
    context.close()
