"""Where a gradient comes from, and the checks that do not hinge on eps, on the page in a
real headless Chromium against the real sandbox: the tied-weights lesson's graph carries
each path's share on its edges and the shared node's detail lists the paths with their
parts (the sandbox's numbers); the eps sweep is an SVG plot with the best eps marked, the
Taylor order and the adjoint test beside it; screenshots at 1280×800 and 390×844 under
test-artifacts/, axe-core finds no serious or critical violation, no console error."""

from __future__ import annotations

import pytest
from browser_session import axe_serious, runs, shot, table, wait_run

from glassllm.course.lesson_requests import LESSONS
from glassllm.sandbox.expr import evaluate
from glassllm.sandbox.wire import coerce

pytestmark = [pytest.mark.browser, pytest.mark.slow]

TIED = next(lesson for lesson in LESSONS if lesson["id"] == "tied-embeddings")
RESIDUAL = next(lesson for lesson in LESSONS if lesson["id"] == "residual")


def percent(share: float) -> str:
    p = round(share * 100)
    return f"{'−' if p < 0 else ''}{abs(p)}%"


def open_lesson(pg, lesson) -> dict:
    before = runs(pg)
    pg.click(f'button[data-lesson="{lesson["id"]}"]')
    wait_run(pg, before)
    pg.wait_for_selector("#graph .share-label")
    return evaluate(**lesson["request"])


@pytest.mark.parametrize("size", [(1280, 800), (390, 844)], ids=["wide", "phone"])
def test_tied_weights_show_each_paths_share_on_its_edge_and_in_the_nodes_detail(browser, url,
                                                                                size):
    context = browser.new_context(viewport={"width": size[0], "height": size[1]})
    pg = context.new_page()
    errors: list[str] = []
    pg.on("pageerror", lambda exc: errors.append(str(exc)))
    pg.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    pg.goto(url + "/")
    pg.wait_for_selector("body[data-ready]")
    answer = open_lesson(pg, TIED)
    assert pg.is_checked("#paths")
    (entry,) = answer["paths"]
    w = entry["node"]
    labels = pg.eval_on_selector_all("#graph .share-label", "gs => gs.map(g => [Number("
                                     "g.dataset.from), Number(g.dataset.to), g.textContent])")
    assert sorted(map(tuple, labels)) == sorted((w, e["consumer"], percent(e["share"]))
                                                for e in entry["edges"])
    shared = pg.eval_on_selector_all("#graph path.edge.shared", "ps => ps.map(p =>"
                                     " [Number(p.dataset.from), Number(p.dataset.to)])")
    assert sorted(map(tuple, shared)) == sorted((w, e["consumer"]) for e in entry["edges"])
    # the node's detail: one item per path, its share in words and its part's numbers
    pg.click(f'#graph .node[data-id="{w}"]')
    items = pg.eval_on_selector_all("#node-detail .path-item", "li => li.map(x =>"
                                    " [Number(x.dataset.consumer), x.querySelector('.path-line')"
                                    ".textContent])")
    assert [c for c, _ in items] == [e["consumer"] for e in entry["edges"]]
    for (_, text), e in zip(items, entry["edges"], strict=True):
        assert f"share {percent(e['share'])}" in text and f"its input {e['input']}" in text
        got = table(pg, f"path:{w}:{e['consumer']}:{e['slot']}")
        want = coerce("array", "grad", e["grad"]).ravel().tolist()
        assert got == pytest.approx(want, rel=1e-12, abs=1e-15)
    pg.locator("#graph-panel").scroll_into_view_if_needed()
    shot(pg, f"paths-tied-{size[0]}")
    assert axe_serious(pg, "#graph-panel") == []
    assert axe_serious(pg, ".case") == []
    context.close()
    assert not errors, errors


def test_the_residual_lesson_labels_the_skip_and_the_block(page):
    answer = open_lesson(page, RESIDUAL)
    (entry,) = answer["paths"]
    labels = page.eval_on_selector_all("#graph .share-label", "gs => gs.map(g => g.textContent)")
    assert sorted(labels) == sorted(percent(e["share"]) for e in entry["edges"])


SWEEP_CASE = {"expression": "tanh(x * w).sum()",
              "variables": {"x": {"value": [[0.5, -1.0, 2.0]]},
                            "w": {"value": [[1.5, 0.3, -0.7]]}}}


@pytest.mark.parametrize("float32", [False, True], ids=["float64", "float32"])
def test_the_eps_sweep_is_a_plot_with_the_best_eps_marked(page, float32):
    page.check("#mode-expr")
    page.fill("#expr-text", SWEEP_CASE["expression"])
    page.evaluate("""async (vars) => {
        const caseJs = await import('/static/js/case.js');
        caseJs.showVariables(vars);
    }""", SWEEP_CASE["variables"])
    for box in ("#check-taylor", "#check-adjoint", "#check-sweep"):
        page.check(box)
    page.set_checked("#check-float32", float32)
    page.set_checked("#grad-check", True)
    before = runs(page)
    page.click("#run")
    wait_run(page, before)
    check = evaluate(SWEEP_CASE["expression"], SWEEP_CASE["variables"],
                     check={"modes": ["finite_differences", "taylor", "adjoint", "eps_sweep"],
                            **({"float32": True} if float32 else {})})["check"]
    sweep = check["eps_sweep"]
    plot = page.locator("svg.eps-plot")
    assert float(plot.get_attribute("data-best-eps")) == sweep["best_eps"]
    points = page.eval_on_selector_all("svg.eps-plot .measured circle", "cs => cs.map(c =>"
                                       " [Number(c.dataset.x), Number(c.dataset.y)])")
    slope = abs(sweep["slope"])
    want = [(e, err / slope) for e, err in zip(sweep["eps"], sweep["error"], strict=True)
            if err > 0]
    assert len(points) == len(want)
    for (x, y), (ex, ey) in zip(points, want, strict=True):
        assert x == pytest.approx(ex, rel=1e-12) and y == pytest.approx(ey, rel=1e-12)
    marker = float(page.locator("svg.eps-plot .plot-marker").get_attribute("data-x"))
    assert marker == sweep["best_eps"]
    assert page.locator("svg.eps-plot .truncation path").count() == 1
    assert page.locator("svg.eps-plot .rounding path").count() == 1
    order = page.locator(".check-mode.taylor").get_attribute("data-order")
    assert float(order) == pytest.approx(check["taylor"]["order"], rel=1e-12)
    assert ("✓" in page.inner_text(".check-mode.adjoint")) == check["adjoint"]["passed"]
    fd_line = page.inner_text(".check-modes-result .grad-check p")
    assert ("✓ agree" in fd_line) == check["finite_differences"]["passed"]
    if float32:                 # float32 at eps 1e-6 fails the right rule; Taylor does not
        assert "✗ disagree" in fd_line and check["taylor"]["passed"]
    page.locator(".check-modes-result").scroll_into_view_if_needed()
    shot(page, f"eps-sweep-{'float32' if float32 else 'float64'}")
    assert axe_serious(page, "#output") == []
    # the link keeps the choices
    page.click("#copy-link")
    link = page.input_value("#copy-text")
    other = page.context.new_page()
    other.goto(link)
    other.wait_for_function("() => Number(document.body.dataset.runs || 0) > 0")
    assert other.is_checked("#check-sweep") and other.is_checked("#check-float32") == float32
    assert other.locator("svg.eps-plot").count() == 1
    other.close()


def test_the_phone_layout_of_the_plot(browser, url):
    context = browser.new_context(viewport={"width": 390, "height": 844})
    pg = context.new_page()
    pg.goto(url + "/")
    pg.wait_for_selector("body[data-ready]")
    pg.check("#mode-expr")
    pg.fill("#expr-text", "tanh(x).sum()")
    pg.evaluate("""async () => (await import('/static/js/case.js')).showVariables(
        {x: {value: [0.5, 1.5]}})""")
    pg.check("#check-sweep")
    pg.check("#check-taylor")
    before = runs(pg)
    pg.click("#run")
    wait_run(pg, before)
    box = pg.locator("svg.eps-plot").bounding_box()
    assert 0 < box["width"] <= 390 and box["height"] > 100
    pg.locator("svg.eps-plot").scroll_into_view_if_needed()
    shot(pg, "eps-sweep-phone")
    assert axe_serious(pg, "#output") == []
    context.close()
