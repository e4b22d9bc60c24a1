"""The teaching views of the page in headless Chromium against a real sandbox:
the lessons run with no console error, the step-through shows a rule with numbers, a
30-node graph lays out with no overlapping boxes and no label under 11 px, a (16, 32)
heatmap fits its panel, variables are created from the expression, the caret sits under
the offending character, an example tapped at 400 px scrolls its result into view, and
axe-core finds no serious or critical violation. Screenshots: test-artifacts/teach-*.png.
"""

from __future__ import annotations

import json

import pytest
from browser_session import ARTIFACTS, axe_serious

from glassllm.course.lesson_requests import LESSONS

pytestmark = [pytest.mark.browser, pytest.mark.slow]




def open_page(browser, url, width=1280, height=900):
    context = browser.new_context(viewport={"width": width, "height": height})
    pg = context.new_page()
    errors: list[str] = []
    pg.on("pageerror", lambda exc: errors.append(str(exc)))
    pg.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    pg.goto(url + "/")
    pg.wait_for_selector("body[data-ready]")
    pg.wait_for_selector("#lessons button")
    return context, pg, errors


@pytest.fixture
def page(browser, url):
    context, pg, errors = open_page(browser, url)
    pg.errors = errors
    yield pg
    context.close()


def shot(pg, name: str, full: bool = True) -> None:
    ARTIFACTS.mkdir(exist_ok=True)
    pg.screenshot(path=str(ARTIFACTS / f"teach-{name}.png"), full_page=full)


def run_after(pg, action) -> None:
    before = int(pg.evaluate("document.body.dataset.runs || '0'"))
    action()
    pg.wait_for_function(f"() => Number(document.body.dataset.runs || 0) > {before}")


def test_every_lesson_runs_with_its_notes_and_no_console_error(page):
    for lesson in LESSONS:
        selector = f'button[data-lesson="{lesson["id"]}"]'
        run_after(page, lambda selector=selector: page.click(selector))
        assert page.inner_text("#status").startswith("Done"), lesson["id"]
        notes = page.inner_text("#guide-body")
        for note in lesson["notes"]:
            assert note["text"][:40] in notes.replace("\n", " ")
        shot(page, f"lesson-{lesson['id']}")
    assert page.errors == []
    assert axe_serious(page, ".lessons") == []
    assert axe_serious(page, ".results") == []


def test_the_step_through_shows_the_rule_with_numbers(page):
    run_after(page, lambda: page.click('button[data-lesson="neuron"]'))
    page.click("#step-next")                           # step 1: the output, tanh
    rule = page.inner_text(".rule")
    assert "∂a = g * (1 - out**2)" in rule               # tanh's docstring, as written
    assert "0.7071" in rule                              # out, the saved forward value
    page.click("#step-next")                           # step 2: the add below it
    rule = page.inner_text(".rule")
    assert "unbroadcast(g)" in rule and "0.5" in rule
    assert page.inner_text(".node-detail").count("broadcast ledger") == 1
    shot(page, "step-rule")
    assert axe_serious(page, "#graph-panel") == []


def test_a_30_node_graph_has_no_overlap_and_no_label_under_11px(page):
    page.check("#mode-expr")
    # 30 boxes: the numbers fold into their consumers' labels (× 0.5), so they get none
    expr = " + ".join(f"tanh(p * {k}.5 - r)" for k in range(7)) + " + (p @ r).sum()"
    page.fill("#expr-text", expr)
    page.fill("#auto-vars input#auto-shape-p", "2, 2")
    page.click('button[data-create="p"]')
    page.click('button[data-create="r"]')
    run_after(page, lambda: page.click("#run"))
    boxes = page.evaluate("[...document.querySelectorAll('#graph .node rect')].map(r => {"
                          "const b = r.getBoundingClientRect();"
                          " return [b.x, b.y, b.width, b.height]; })")
    assert 28 <= len(boxes) <= 40, len(boxes)
    for i, (x1, y1, w1, h1) in enumerate(boxes):
        for x2, y2, w2, h2 in boxes[i + 1:]:
            assert x1 + w1 <= x2 + 0.5 or x2 + w2 <= x1 + 0.5 or y1 + h1 <= y2 + 0.5 \
                or y2 + h2 <= y1 + 0.5, "two node boxes overlap"
    smallest = page.evaluate("Math.min(...[...document.querySelectorAll('#graph text')].map(t => "
                             "t.getBoundingClientRect().height))")
    sizes = page.evaluate("[...document.querySelectorAll('#graph text')].map(t => "
                          "parseFloat(getComputedStyle(t).fontSize) * "
                          "Number(document.querySelector('#graph').dataset.zoom))")
    assert min(sizes) >= 11 and smallest >= 11
    page.click("#zoom-out")
    page.click("#zoom-out")                           # clamped: labels stay >= 11 px
    zoom = float(page.get_attribute("#graph", "data-zoom"))
    assert min(sizes) * zoom >= 11 - 1e-9
    labels = page.evaluate("[...document.querySelectorAll('#graph .node-op')]"
                           ".map(t => t.textContent)")
    assert "× 0.5" in labels and "@" in labels and "tanh" in labels
    assert "0.5" not in labels                        # no box for the folded number
    shot(page, "graph-30")
    page.locator("#graph-panel").screenshot(path=str(ARTIFACTS / "teach-graph-30-panel.png"))


def test_a_16_by_32_heatmap_fits_its_panel_and_reads_on_hover(page):
    page.check("#mode-expr")
    page.fill("#expr-text", "tanh(m)")
    page.fill("#auto-shape-m", "16, 32")
    page.click('button[data-create="m"]')
    run_after(page, lambda: page.click("#run"))
    fig = page.locator('figure[data-name="grad:m"]')
    panel = page.locator("#output").bounding_box()
    table = fig.locator("table").bounding_box()
    assert table["x"] + table["width"] <= panel["x"] + panel["width"] + 0.5
    assert fig.locator("td").count() == 16 * 32
    cell = fig.locator("td").nth(5)
    cell.hover()
    readout = page.locator('figure[data-name="grad:m"] .heat-readout')
    assert readout.inner_text().startswith("[0, 5] = ")
    fig.locator(".heat-scroll").focus()               # the keyboard reads cells too:
    page.keyboard.press("ArrowDown")                  # the first arrow enters at [0, 0]
    assert readout.inner_text().startswith("[0, 0] = ")
    page.keyboard.press("ArrowDown")
    page.keyboard.press("ArrowRight")
    assert readout.inner_text().startswith("[1, 1] = ")
    shot(page, "heatmap-16x32")
    page.locator("#output").screenshot(path=str(ARTIFACTS / "teach-heatmap-16x32-panel.png"))
    assert axe_serious(page, "#output") == []


def test_a_scalar_is_a_number_not_a_coloured_cell(page):
    run_after(page, lambda: page.click('button[data-lesson="classifier"]'))
    value = page.locator('figure[data-name="value"]')
    assert value.locator("table").count() == 0
    assert value.locator(".scalar-value").inner_text() == "0.9058"


def test_variables_are_created_from_the_expression(page):
    page.check("#mode-expr")
    page.fill("#expr-text", "(x @ w).sum()")
    assert page.locator("#auto-vars button").count() == 2
    page.fill("#auto-shape-x", "1, 3")
    page.click('button[data-create="x"]')
    page.fill("#auto-shape-w", "3, 2")
    page.click('button[data-create="w"]')
    assert page.locator("#auto-vars button").count() == 0
    run_after(page, lambda: page.click("#run"))
    assert page.inner_text("#status").startswith("Done")
    assert json.loads(page.get_attribute('figure[data-name="grad:w"]', "data-shape")) == [3, 2]
    shot(page, "auto-vars")
    assert axe_serious(page, ".case") == []


# a tab before the offence on the second line; an astral character (one code point, two
# UTF-16 units: the API counts code points) after a tab
@pytest.mark.parametrize("expr,offence", [("(softmax(x) +\n\tx $ 2)", "$"), ("x +\t'😀'", "😀")])
def test_the_caret_sits_under_the_offending_character(page, expr, offence):
    page.check("#mode-expr")
    page.fill("#expr-text", expr)
    run_after(page, lambda: page.click("#run"))
    assert page.inner_text("#msg-expression .caret-char") == offence
    char = page.locator("#msg-expression .caret-char").bounding_box()
    caret = page.locator("#msg-expression .caret").bounding_box()
    assert abs(char["x"] - caret["x"]) < 1.0, (char, caret)
    assert caret["y"] > char["y"]
    shot(page, "caret")
    page.locator(".case").screenshot(path=str(ARTIFACTS / f"teach-caret-{len(expr)}.png"))


def test_the_random_seed_explains_and_replaces_zero_gradients(page):
    page.select_option("#op-select", "softmax")
    run_after(page, lambda: page.click("#run"))
    why = page.inner_text("#seed-why")
    assert "each softmax row sums to 1" in why
    run_after(page, lambda: page.click("#seed-why-random"))
    assert page.input_value("#grad-output").strip()
    assert page.inner_text("#seed-why") == ""
    shot(page, "seed")
    page.locator(".case").screenshot(path=str(ARTIFACTS / "teach-seed-case.png"))
    assert axe_serious(page, ".seed") == []


def test_tapping_an_example_at_400px_scrolls_its_result_into_view(browser, url):
    context, pg, errors = open_page(browser, url, width=400, height=800)
    try:
        run_after(pg, lambda: pg.click("#examples button >> nth=1"))
        top = pg.evaluate("document.querySelector('#results-title').getBoundingClientRect().top")
        assert -2 <= top < 800  # scrolled to its start (sub-pixel)
        shot(pg, "narrow-example", full=False)
        run_after(pg, lambda: pg.click('button[data-lesson="rope"]'))
        top = pg.evaluate("document.querySelector('#results-title').getBoundingClientRect().top")
        assert -2 <= top < 800  # scrolled to its start (sub-pixel)
        assert errors == []
    finally:
        context.close()


def test_a_composite_op_opens_into_its_primitive_ops(page):
    run_after(page, lambda: page.click('button[data-lesson="classifier"]'))
    page.click('#graph .node[data-id="4"]')           # cross_entropy(x @ w, t)
    inner = page.locator(".expansion-graph .node")
    assert inner.count() > 3
    assert "log_softmax" in page.inner_text(".expansion-expr")
    labels = page.evaluate("[...document.querySelectorAll('.expansion-graph .node-op')]"
                           ".map(t => t.textContent)")
    assert "log_softmax" in labels
    last = inner.nth(inner.count() - 1)
    last.click()
    assert page.locator(".expansion-detail figure").count() >= 1
    # the composition's output is the fused loss
    value = page.locator(".expansion-detail .scalar-value").first.inner_text()
    assert value == "0.9058"
    shot(page, "expansion")
    assert axe_serious(page, "#graph-panel") == []


def test_the_issues_example_starts_from_nothing(page):
    """`cross_entropy(x @ w, t)`: three names become variables; t, the op's targets, gets
    integer class ids, so the case runs as created."""
    page.check("#mode-expr")
    page.fill("#expr-text", "cross_entropy(x @ w, t)")
    assert page.input_value("#auto-shape-t") == "2"
    page.fill("#auto-shape-x", "2, 3")
    page.click('button[data-create="x"]')
    page.fill("#auto-shape-w", "3, 2")
    page.click('button[data-create="w"]')
    page.click('button[data-create="t"]')
    run_after(page, lambda: page.click("#run"))
    assert page.inner_text("#status").startswith("Done"), page.inner_text("#status")
    assert json.loads(page.get_attribute('figure[data-name="grad:w"]', "data-shape")) == [3, 2]
