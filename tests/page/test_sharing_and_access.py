"""Sharing and reaching the playground (SPEC Part P) in headless Chromium: the permalink,
copy as Python and as curl, keyboard-only use, a narrow screen, and every clause id the
page shows linked to its anchor in the served contract.

Playwright for Python drives Debian's Chromium (/usr/bin/chromium; `make test` installs
it). A screenshot of each state is saved under test-artifacts/ for a human to look at.
"""

from __future__ import annotations

import httpx
import pytest
from browser_session import assert_numbers, click_and_wait, run_python, runs, shot, table, wait_run

pytestmark = [pytest.mark.browser, pytest.mark.slow]


def test_permalink_round_trip_reopens_the_same_case(page, browser):
    page.select_option("#op-select", "softmax")
    page.fill("#in-a", "[[1, 2, 3], [0, 0, -inf]]")
    page.fill("#in-axis", "0")
    page.uncheck("#in-a-grad")
    page.check("#in-a-grad")
    # the seed box is always visible: seed the backward with one-hot
    page.fill("#grad-output", "[[1, 0, 0], [0, 0, 0]]")
    click_and_wait(page, "#run")
    value = table(page, "value")
    assert any(g != 0 for g in table(page, "grad:a"))   # not the zero gradient of a sum
    link = page.url
    assert "#" in link
    other = browser.new_context(viewport={"width": 1280, "height": 800}).new_page()
    other.goto(link)
    other.wait_for_selector("body[data-ready]")
    other.wait_for_function("() => Number(document.body.dataset.runs || 0) > 0")
    assert other.input_value("#op-select") == "softmax"
    assert other.input_value("#in-axis") == "0"
    assert other.input_value("#in-a") == "[[1, 2, 3],\n [0, 0, -inf]]"
    assert other.input_value("#grad-output") == "[[1, 0, 0],\n [0, 0, 0]]"
    assert table(other, "value") == value
    assert table(other, "grad:a") == table(page, "grad:a")
    shot(other, "permalink")
    other.context.close()


def test_copy_as_python_runs_and_copy_as_curl_names_the_endpoint(page, url):
    page.select_option("#op-select", "embedding")
    click_and_wait(page, "#run")
    page.click("#copy-python")
    script = page.input_value("#copy-text")
    assert "from glassllm.autograd import embedding" in script
    out = run_python(script)
    assert "grad of weight" in out and "[2. 2.]" in out
    page.click("#copy-curl")
    command = page.input_value("#copy-text")
    assert f"{url}/api/v1/ops/embedding" in command and '"ids":[1,2,1]' in command
    # a new case makes the copied script stale: the panel goes away until asked again
    page.select_option("#op-select", "softmax")
    assert page.locator("#copy-panel").is_hidden()
    page.click("#copy-python")
    assert "from glassllm.autograd import softmax" in page.input_value("#copy-text")
    click_and_wait(page, "button.example >> nth=0")
    assert page.locator("#copy-panel").is_hidden()


def focused_id(pg) -> str:
    return pg.evaluate("document.activeElement && document.activeElement.id")


def test_keyboard_only_run(page):
    for _ in range(80):                         # Tab from the top to the op's first input
        page.keyboard.press("Tab")
        if focused_id(page) == "in-a":
            break
    assert focused_id(page) == "in-a"
    page.keyboard.press("Control+A")
    page.keyboard.type("[[0, 0], [0, 0]]")
    before = runs(page)
    page.keyboard.press("Control+Enter")
    wait_run(page, before)
    assert_numbers(table(page, "value"), [[0.5, 0.5], [0.5, 0.5]], "softmax of zeros")
    outline = page.evaluate("getComputedStyle(document.activeElement).outlineStyle")
    assert outline != "none"
    shot(page, "keyboard")
    for _ in range(80):                         # back up to the Run bar, pressed with Enter
        page.keyboard.press("Shift+Tab")
        if focused_id(page) == "run":
            break
    assert focused_id(page) == "run"
    before = runs(page)
    page.keyboard.press("Enter")
    wait_run(page, before)
    # every control is labelled
    unlabelled = page.evaluate("""() => [...document.querySelectorAll('input, select, textarea')]
        .filter(e => !e.labels?.length && !e.getAttribute('aria-label')).map(e => e.id)""")
    assert unlabelled == []


def test_narrow_screen_has_no_horizontal_overflow(browser, url):
    context = browser.new_context(viewport={"width": 400, "height": 800})
    pg = context.new_page()
    pg.goto(url + "/")
    pg.wait_for_selector("body[data-ready]")
    click_and_wait(pg, "button.example >> nth=0")
    for i in range(pg.locator("button.example").count()):
        click_and_wait(pg, f"button.example >> nth={i}")
        width = pg.evaluate("Math.max(document.documentElement.scrollWidth,"
                            " document.body.scrollWidth)")
        assert width <= 400, f"example {i}: the page is {width}px wide at a 400px viewport"
    shot(pg, "narrow")
    pg.set_viewport_size({"width": 1280, "height": 800})
    shot(pg, "wide")
    context.close()


def test_clause_ids_on_the_page_link_to_the_contract(page, url):
    click_and_wait(page, "button.example >> nth=1")          # a reference, hints, messages
    links = page.eval_on_selector_all("a.clause", "as => as.map(a => [a.textContent,"
                                      " a.href])")   # resolved: under the sandbox's root
    texts = {t for t, _ in links}
    assert {"L3.2", "L3.5", "L0.5"} <= texts, texts
    served: dict[str, str] = {}
    for text, href in links:
        path, anchor = href.split("#")
        assert anchor == text, (text, href)
        if path not in served:
            assert path.startswith(url + "/docs/contract/"), href
            res = httpx.get(path)
            assert res.status_code == 200, href
            served[path] = res.text
        assert f' id="{anchor}"' in served[path], f"{href}: no such anchor"
    # the op summary links its clause too; the gallery's clause stays where it was drawn
    page.check("#mode-op")
    page.select_option("#op-select", "rope")
    assert page.eval_on_selector("#op-summary a.clause", "a => a.href") \
        == url + "/docs/contract/library#L6.1"
    link = page.locator(".example-item >> nth=0 >> .ex-clause-link").bounding_box()
    twin = page.locator(".example-item >> nth=0 >> .ex-clause-space").bounding_box()
    assert abs(link["x"] - twin["x"]) < 1 and abs(link["y"] - twin["y"]) < 1, (link, twin)
