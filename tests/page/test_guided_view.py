"""The guided view and the attention panel in headless Chromium, at 1280×800 and 390×844:
every lesson is one click from the first screen and opens with Run, its text and its
result in the window; a lesson link opens it; an edit is noticed and undone; the attention
panel shows one head at a time, weights beside their gradient, tokens on both axes, and
fits the window; the page never scrolls sideways on a phone; axe-core finds no serious or
critical violation in any view. Screenshots: test-artifacts/guided-*.png, attention-*.png.
"""

from __future__ import annotations

import httpx
import pytest
from browser_session import ARTIFACTS, axe_serious

from glassllm.course.lesson_requests import LESSONS

pytestmark = [pytest.mark.browser, pytest.mark.slow]

SIZES = [(1280, 800), (390, 844)]
IDS = [f"{w}x{h}" for w, h in SIZES]


def open_page(browser, url, size, path="/"):
    context = browser.new_context(viewport={"width": size[0], "height": size[1]})
    pg = context.new_page()
    errors: list[str] = []
    pg.on("pageerror", lambda exc: errors.append(str(exc)))
    pg.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    pg.goto(url + path)
    pg.wait_for_selector("body[data-ready]")
    return context, pg, errors


def rect(pg, selector: str) -> dict:
    return pg.eval_on_selector(selector, "e => e.getBoundingClientRect().toJSON()")


def page_width(pg) -> int:
    return pg.evaluate("Math.max(document.documentElement.scrollWidth, document.body.scrollWidth)")


def shot(pg, name: str) -> None:
    ARTIFACTS.mkdir(exist_ok=True)
    pg.screenshot(path=str(ARTIFACTS / f"{name}.png"))


def start(pg, lesson_id: str) -> None:
    pg.click(f'#lessons button[data-lesson="{lesson_id}"]')
    pg.wait_for_selector(f'body[data-lesson="{lesson_id}"]')


@pytest.mark.parametrize("size", SIZES, ids=IDS)
def test_every_lesson_is_one_click_away_with_run_its_text_and_its_result_in_view(browser, url,
                                                                                 size):
    context, pg, errors = open_page(browser, url, size)
    width, height = size
    try:
        for lesson in LESSONS:
            pg.goto(url + "/")
            pg.wait_for_selector("body[data-ready]")
            chip = rect(pg, f'#lessons button[data-lesson="{lesson["id"]}"]')
            assert chip["bottom"] <= height, f"{lesson['id']} is not on the first screen"
            start(pg, lesson["id"])                             # the one click
            assert pg.inner_text("#status").startswith("Done"), lesson["id"]
            assert pg.inner_text("#guide-title") == lesson["title"]
            text = pg.inner_text("#guide-body").replace("\n", " ")
            for note in lesson["notes"]:
                assert note["text"][:40] in text
            run = rect(pg, "#run")
            assert run["top"] >= 0 and run["bottom"] <= height, "Run is out of view"
            bar = rect(pg, ".action-bar")["bottom"]
            notes = rect(pg, "#guide-body ol")
            assert bar - 1 <= notes["top"] and notes["bottom"] <= height, (lesson["id"], notes)
            value = rect(pg, 'figure[data-name="value"]')
            assert bar - 1 <= value["top"], (lesson["id"], value)
            if width >= 1000:          # beside the text: all of the value, and its gradients
                assert value["bottom"] <= height and value["left"] > notes["right"]
                grad = rect(pg, "#output figure.heatmap:nth-of-type(2)")
                assert grad["top"] < height - 40
            else:                      # just under the text, scrolled into view
                assert value["top"] > notes["bottom"] and value["top"] + 40 <= height
            assert page_width(pg) <= width
            shot(pg, f"guided-{lesson['id']}-{width}")
        assert axe_serious(pg, "body") == []
    finally:
        context.close()
    assert errors == []


def test_a_lesson_link_opens_it_and_an_edit_is_noticed_then_undone(browser, url):
    context, pg, errors = open_page(browser, url, SIZES[0], "/#lesson=rope")
    try:
        pg.wait_for_selector('body[data-lesson="rope"]')
        place = [lesson["id"] for lesson in LESSONS].index("rope") + 1
        assert place == 5
        assert pg.text_content("#guide-kicker") == f"Lesson 5 of {len(LESSONS)}"
        assert pg.evaluate("location.hash") == "#lesson=rope"
        assert pg.get_attribute('#lessons button[data-lesson="rope"]', "aria-current") == "step"
        assert pg.is_hidden("#guide-changed")
        pg.fill("#var-0-value", "[[1, 0]]")                 # q: other numbers than the text's
        assert pg.is_visible("#guide-changed")
        before = int(pg.evaluate("document.body.dataset.runs"))
        pg.click("#run")
        pg.wait_for_function(f"() => Number(document.body.dataset.runs) > {before}")
        assert pg.evaluate("location.hash").startswith("#%7B")       # the edited case itself
        shot(pg, "guided-edited-1280")
        pg.click("#guide-restore")
        pg.wait_for_function("() => location.hash === '#lesson=rope'")
        assert pg.input_value("#var-0-value") == "[[0.6, 0.8]]" and pg.is_hidden("#guide-changed")
        pg.click("#guide-next")
        pg.wait_for_selector('body[data-lesson="swiglu"]')             # the one after rope
        assert pg.is_visible("#guide-next") and pg.is_visible("#guide-prev")
        last = LESSONS[-1]["id"]
        pg.goto(f"{url}/#lesson={last}")
        pg.wait_for_selector(f'body[data-lesson="{last}"]')
        assert pg.is_hidden("#guide-next") and pg.is_visible("#guide-prev")  # the last one
        pg.click("#guide-leave")                           # the playground's columns again
        assert pg.is_hidden("#guide") and pg.is_visible(".gallery")
        assert pg.evaluate("document.body.classList.contains('guided')") is False
        assert pg.locator("#lessons button[aria-current]").count() == 0
        assert axe_serious(pg, "body") == []
    finally:
        context.close()
    assert errors == []


@pytest.mark.parametrize("size", SIZES, ids=IDS)
def test_a_reload_or_the_next_lesson_puts_the_guide_and_its_result_under_the_bar(browser, url,
                                                                                   size):
    """Scrolled far down, a reload of a lesson link lands where the link did (the
    browser's own restore ran before the page had laid the lesson out), and Next brings
    the next lesson's guide and result under the Run bar (the wide screen's guide is
    sticky: its box said nothing of where its row starts)."""
    context, pg, errors = open_page(browser, url, size, "/#lesson=rope")

    def row_top() -> float:           # the guide's row: beside the result, or above it
        return min(rect(pg, "#guide")["top"], rect(pg, ".results")["top"])

    try:
        pg.wait_for_selector('body[data-lesson="rope"]')
        bar = rect(pg, ".action-bar")["bottom"]
        placed, top = pg.evaluate("scrollY"), row_top()
        assert placed > 0 and bar <= top <= bar + 16
        pg.evaluate("window.scrollTo(0, 1500)")
        pg.reload()
        pg.wait_for_selector('body[data-lesson="rope"]')
        assert pg.evaluate("scrollY") == placed and row_top() == top
        pg.evaluate("window.scrollTo(0, 1500)")
        pg.click("#guide-next")
        pg.wait_for_selector('body[data-lesson="swiglu"]')
        assert bar <= row_top() <= bar + 16
        assert rect(pg, "#results-title")["top"] < size[1]           # the result in view
    finally:
        context.close()
    assert errors == []


@pytest.mark.parametrize("size", SIZES, ids=IDS)
def test_attention_one_head_at_a_time_weights_beside_gradients_fits_the_window(browser, url,
                                                                               size):
    context, pg, errors = open_page(browser, url, size)
    width, height = size
    prompt = "The miller sat by the r"                       # 23 bytes: near the longest
    try:
        pg.fill("#attn-prompt", prompt)
        pg.click("#attn-show")
        pg.wait_for_selector("body[data-attn-shown]")
        want = httpx.post(url + "/api/v1/model/attention",
                          json={"seed": 0, "prompt": prompt, "model": {
                              "d_model": 64, "n_layers": 2, "n_heads": 4, "n_kv_heads": 2}}).json()
        L, H, n, _ = want["shape"]
        assert pg.locator("#attn-head option").count() == L * H
        tokens = [{" ": "␣"}.get(t, t) for t in want["tokens"]]
        tables = pg.locator("table.attn")
        layout = pg.get_attribute("#attn-maps", "data-layout")
        first = tables.nth(0)
        assert first.locator("thead th").all_inner_texts()[1:] == tokens      # keys
        assert first.locator("tbody th").all_inner_texts() == tokens          # queries
        weights = first.locator("tbody tr").nth(3).locator("td").evaluate_all(
            "tds => tds.map(t => Number(t.dataset.v))")
        assert weights[:4] == pytest.approx(want["probs"][0][0][3][:4], abs=1e-12)
        if width >= 1000:                                    # side by side
            assert layout == "side" and tables.count() == 2
            a, b = (tables.nth(k).bounding_box() for k in range(2))
            assert abs(a["y"] - b["y"]) < 1 and b["x"] > a["x"] + a["width"]
        else:                  # a phone: both when they fit, else one at a time with a switch
            assert layout in ("stacked", "one")
            if layout == "one":
                assert tables.count() == 1 and pg.is_visible("#attn-which")
                pg.check('input[name="attn-which"][value="grad"]')
                assert "gradient" in pg.inner_text("table.attn caption")
        top = rect(pg, "#attn-panel")["top"]
        bottom = rect(pg, "#attn-maps")["bottom"]
        assert bottom - top <= height, f"the panel is {bottom - top}px tall"
        assert page_width(pg) <= width
        # the head picker: another head's numbers, and a cell read with its gradient
        pg.select_option("#attn-head", str(L * H - 1))
        assert f"layer {L - 1}, head {H - 1}" in pg.inner_text("table.attn caption")
        cells = pg.locator("table.attn tbody tr").nth(n - 1).locator("td")
        got = cells.evaluate_all("tds => tds.map(t => Number(t.dataset.v))")
        kind = pg.get_attribute("table.attn", "class")
        source = want["probs"] if " prob" in kind else want["grads"]
        assert got == pytest.approx(source[L - 1][H - 1][n - 1], abs=1e-12)
        cells.nth(1).hover()
        readout = pg.inner_text("#attn-readout")
        assert "weight" in readout and "gradient" in readout and f"({n - 1}) → key" in readout
        if layout == "side":
            assert pg.locator("table.attn td.twin").count() == 1     # the same cell, other map
        pg.locator("#attn-panel").screenshot(path=str(ARTIFACTS / f"attention-{width}.png"))
        assert axe_serious(pg, "#attn-panel") == []
    finally:
        context.close()
    assert errors == []


def test_a_phone_never_scrolls_sideways_in_any_view(browser, url):
    size = SIZES[1]
    context, pg, errors = open_page(browser, url, size)
    width = size[0]
    seen = {}
    try:
        seen["first screen"] = page_width(pg)
        shot(pg, "phone-first-screen")
        assert axe_serious(pg, "body") == []
        before = int(pg.evaluate("document.body.dataset.runs || '0'"))
        pg.click("#run")                                       # softmax, one op
        pg.wait_for_function(f"() => Number(document.body.dataset.runs || 0) > {before}")
        seen["one op"] = page_width(pg)
        start(pg, "attention-head")
        for _ in range(4):
            pg.click("#step-next")                             # rules with whole arrays
        seen["a step"] = page_width(pg)
        pg.locator("#node-detail").screenshot(path=str(ARTIFACTS / "phone-step.png"))
        pg.click("#guide-leave")
        seen["explore"] = page_width(pg)
        pg.select_option("#check-target", index=1)
        pg.fill("#check-claim", "[[0, 0], [0, 0], [0, 0]]")
        pg.click("#check-go")
        pg.wait_for_selector("#check-result table")
        seen["check"] = page_width(pg)
        pg.click("#attn-show")
        pg.wait_for_selector("body[data-attn-shown]")
        pg.locator("#train").scroll_into_view_if_needed()
        seen["train"] = page_width(pg)
        shot(pg, "phone-train")
        assert axe_serious(pg, "#node-detail") == []
        pg.goto(url + "/#exercise=rmsnorm-backward")           # an exercise in place of it all
        pg.wait_for_selector("#exercise-form")
        seen["exercise"] = page_width(pg)
        assert pg.is_hidden(".action-bar")                     # it has its own Check button
        shot(pg, "phone-exercise")
        start(pg, "neuron")                                    # a lesson leaves the exercise
        assert pg.is_hidden("#exercise-view") and pg.is_visible("#guide")
        assert pg.evaluate("location.hash") == "#lesson=neuron"   # a reload opens the lesson
        seen["lesson after an exercise"] = page_width(pg)
    finally:
        context.close()
    assert all(w <= width for w in seen.values()), seen
    assert errors == []
