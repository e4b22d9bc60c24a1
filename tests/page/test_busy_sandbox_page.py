"""The page under a busy or guarded sandbox, in headless Chromium: a 503 is
retried after Retry-After (+ jitter) and then succeeds; a sandbox busy on every try shows
a neutral "not your formula" notice, never a red input error; a 401 asks for the token
once and sends it as a Bearer header. The 503s and the 401 are routed by Playwright, so
no test depends on how loaded the machine is."""

from __future__ import annotations

import pytest
from browser_session import assert_numbers, click_and_wait, table

pytestmark = [pytest.mark.browser, pytest.mark.slow]
BUSY = '{"error": {"status": 503, "code": "queue_full", "message": "busy"}}'


@pytest.fixture
def page(browser, url):
    context = browser.new_context(viewport={"width": 1280, "height": 800})
    pg = context.new_page()
    errors: list[str] = []
    pg.on("pageerror", lambda exc: errors.append(str(exc)))
    pg.goto(url + "/")
    pg.wait_for_selector("body[data-ready]")
    pg.select_option("#op-select", "matmul")
    pg.fill("#in-a", "[[1, 2], [3, 4]]")
    pg.fill("#in-b", "[[1], [1]]")
    yield pg
    context.close()
    assert not errors, f"JavaScript errors on the page: {errors}"


def test_a_503_is_retried_after_retry_after_then_succeeds(page):
    seen = []

    def handle(route):
        seen.append(route.request.headers)
        if len(seen) == 1:
            route.fulfill(status=503, headers={"Retry-After": "0"}, body=BUSY,
                          content_type="application/json")
        else:
            route.continue_()

    page.route("**/api/v1/ops/matmul", handle)
    click_and_wait(page, "#run")
    assert len(seen) == 2
    assert seen[0]["x-client-id"] == seen[1]["x-client-id"] and len(seen[0]["x-client-id"]) == 16
    assert_numbers(table(page, "value"), [[3.0], [7.0]], "matmul value after the retry")
    assert page.locator(".msg.error").count() == 0
    assert page.locator(".msg.busy").count() == 0


def test_busy_on_every_try_is_a_neutral_notice_not_an_input_error(page):
    tries = []

    def handle(route):
        tries.append(1)
        route.fulfill(status=503, headers={"Retry-After": "0"}, body=BUSY,
                      content_type="application/json")

    page.route("**/api/v1/ops/matmul", handle)
    click_and_wait(page, "#run")
    assert len(tries) == 4                                        # api.js TRIES
    notice = page.locator(".msg.busy")
    assert notice.count() == 1 and notice.get_attribute("role") == "status"
    assert "not a problem with your formula" in notice.inner_text()
    assert "GLASSLLM" not in notice.inner_text()                  # no server variable named
    assert page.locator(".msg.error").count() == 0
    assert "not your formula" in page.inner_text("#status")
    colour = notice.evaluate("n => getComputedStyle(n).color")
    assert colour != page.evaluate("getComputedStyle(document.documentElement)"
                                   ".getPropertyValue('--error')")


def test_a_401_asks_for_the_token_once_and_sends_it_as_bearer(page):
    seen = []

    def handle(route):
        seen.append(route.request.headers.get("authorization"))
        if len(seen) == 1:
            route.fulfill(status=401, headers={"WWW-Authenticate": 'Bearer realm="glassllm"'},
                          body='{"error": {"status": 401, "code": "unauthorized",'
                               ' "message": "token", "input": "Authorization"}}',
                          content_type="application/json")
        else:
            route.continue_()

    page.route("**/api/v1/ops/matmul", handle)
    before = int(page.evaluate("document.body.dataset.runs || '0'"))
    page.click("#run")
    page.wait_for_selector("dialog#token-dialog[open]")
    assert page.evaluate("document.activeElement.id") == "token-input"
    assert page.inner_text("label[for=token-input]").startswith("This sandbox needs")
    page.fill("#token-input", "class-token")
    page.keyboard.press("Enter")
    page.wait_for_function(f"() => Number(document.body.dataset.runs || 0) > {before}")
    assert seen == [None, "Bearer class-token"]
    assert_numbers(table(page, "value"), [[3.0], [7.0]], "matmul value with the token")
    assert page.evaluate("sessionStorage.getItem('glassllm.token')") == "class-token"
    click_and_wait(page, "#run")                                  # kept: no second prompt
    assert seen[-1] == "Bearer class-token" and len(seen) == 3
