"""The page's Train view in headless Chromium against a real sandbox: the loss
curve grows while a run trains (waiting on events, never on time), Stop ends the run,
attention heatmaps render with token labels on both axes, no console errors, and axe-core
finds no accessibility violation. Screenshots go to test-artifacts/train-*.png.
"""

from __future__ import annotations

import pytest
from browser_session import ARTIFACTS, inject_axe

pytestmark = [pytest.mark.browser, pytest.mark.slow]



SMALL = {"#train-d-model": "16", "#train-n-layers": "1", "#train-n-heads": "2",
         "#train-n-kv-heads": "1", "#train-batch": "4", "#train-every": "10"}


@pytest.fixture
def page(browser, url):
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    pg = context.new_page()
    errors: list[str] = []
    pg.on("pageerror", lambda exc: errors.append(str(exc)))
    pg.on("console", lambda msg: errors.append(msg.text) if msg.type == "error" else None)
    pg.errors = errors  # a test that expects a refusal takes its console line out
    pg.goto(url + "/")
    pg.wait_for_selector("body[data-train-ready]")
    for selector, value in SMALL.items():
        pg.fill(selector, value)
    yield pg
    context.close()
    assert not errors, f"errors in the console: {errors}"


def shot(pg, name: str) -> None:
    ARTIFACTS.mkdir(exist_ok=True)
    pg.locator("#train").screenshot(path=str(ARTIFACTS / f"train-{name}.png"))


def steps_seen(pg) -> int:
    return int(pg.evaluate("document.body.dataset.trainSteps || '0'"))


def points(pg) -> int:
    return int(pg.get_attribute("#train-curve", "data-points") or "0")


def test_the_curve_grows_while_a_run_trains_then_attention_of_the_trained_model(page):
    page.fill("#train-steps", "40")
    page.click("#train-start")
    page.wait_for_function("() => Number(document.body.dataset.trainSteps || 0) >= 3",
                           timeout=120_000)
    first = points(page)
    page.wait_for_function(f"() => Number(document.body.dataset.trainSteps) >= {first + 5}",
                           timeout=120_000)
    page.evaluate("new Promise(r => requestAnimationFrame(() => r()))")  # the next draw
    assert points(page) > first >= 3
    page.wait_for_selector("body[data-train-done]", timeout=120_000)
    page.wait_for_function("() => document.body.dataset.trainState === 'idle'")
    assert points(page) == 40
    assert page.locator("#train-samples li").count() == 4  # steps 10, 20, 30, 40
    assert page.locator(".norms tbody tr").count() == 7  # parameter groups of one block
    assert "Done: 40 steps" in page.inner_text("#train-status")
    shot(page, "trained")

    page.fill("#attn-prompt", "The c")
    page.click("#attn-show")
    page.wait_for_selector("body[data-attn-shown]")
    assert page.inner_text("#attn-source") == "the trained model"
    tables = page.locator("table.attn")
    assert tables.count() == 2  # one head at a time: its probabilities and their gradients
    columns = tables.nth(0).locator("thead th").all_inner_texts()
    rows = tables.nth(0).locator("tbody th").all_inner_texts()
    assert columns == ["q \\ k", "T", "h", "e", "␣", "c"]
    assert rows == ["T", "h", "e", "␣", "c"]
    first_row = [float(v) for v in tables.nth(0).locator("tbody tr").nth(0)
                 .locator("td").evaluate_all("tds => tds.map(t => t.dataset.v)")]
    assert first_row == [1.0, 0.0, 0.0, 0.0, 0.0]  # the first query sees only itself
    shot(page, "attention")


def test_stop_ends_the_run(page):
    page.fill("#train-steps", "2000")
    page.click("#train-start")
    page.wait_for_function("() => Number(document.body.dataset.trainSteps || 0) >= 2",
                           timeout=120_000)
    page.click("#train-stop")
    page.wait_for_function("() => document.body.dataset.trainState === 'idle'")
    assert "Stopped" in page.inner_text("#train-status")
    assert page.is_enabled("#train-start") and not page.is_enabled("#train-stop")
    assert "trainDone" not in page.evaluate("Object.keys(document.body.dataset)")
    shot(page, "stopped")
    page.click("#train-reset")
    assert points(page) == 0


def test_a_refused_run_says_why(page):
    page.fill("#train-steps", "999999")
    page.click("#train-start")
    page.wait_for_function("() => document.body.dataset.trainState === 'idle'")
    assert "GLASSLLM_MAX_TRAIN_STEPS" in page.inner_text("#train-status")
    page.errors.remove("Failed to load resource: the server responded with a status of 422 "
                       "(Unprocessable Entity)")  # Chromium logs every 4xx; this one is meant


def test_axe_finds_no_violation_in_the_train_view(page):
    page.click("#attn-show")  # a fresh model's heatmaps, so the tables are checked too
    page.wait_for_selector("body[data-attn-shown]")
    inject_axe(page)
    result = page.evaluate("axe.run('#train').then(r => r.violations.map(v => "
                           "[v.id, v.nodes.length, v.nodes[0].target.join(' ')]))")
    assert result == []
    shot(page, "fresh-attention")
