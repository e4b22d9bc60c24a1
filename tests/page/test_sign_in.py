"""A course sandbox's sign-in in headless Chromium (docs/record.md#the-page): a permalink
asks for the student's token once, trades it for an HttpOnly cookie and opens the
exercise with that student's numbers; a new tab of the same browser is signed in already;
a wrong token is answered inside the sign-in dialog; an expired session is an access
problem shown beside the sign-in, never under the formula. The token is never in the URL
nor in any storage. Screenshots at 1280×800 and 390×844 (test-artifacts/signin-*.png),
axe-core clean."""

from __future__ import annotations

import time

import pytest
from browser_session import ARTIFACTS, axe_serious
from record_course import SALT, environment, keyring
from sandbox_server import running_sandbox

from glassllm.course import build_case
from glassllm.course.exercise import load_dir

pytestmark = [pytest.mark.browser, pytest.mark.slow]
LINK = "/#exercise=ce-record"


@pytest.fixture(scope="module")
def course(tmp_path_factory):
    root = tmp_path_factory.mktemp("signin")
    with running_sandbox(env=environment(root)) as url:
        yield url, root


def unexpected(messages: list[str]) -> list[str]:
    # Chromium logs every 4xx answer as "Failed to load resource"; the 401s asked for here
    # are the point of the test, any other console error fails it
    return [m for m in messages if "status of 401" not in m]


def new_page(browser, width, height, context=None):
    context = context or browser.new_context(viewport={"width": width, "height": height})
    pg = context.new_page()
    errors: list[str] = []
    pg.on("pageerror", lambda exc: errors.append(str(exc)))
    pg.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    return context, pg, errors


def shot(pg, name):
    ARTIFACTS.mkdir(exist_ok=True)
    pg.screenshot(path=str(ARTIFACTS / f"signin-{name}.png"), full_page=True)


@pytest.mark.parametrize(("width", "height"), [(1280, 800), (390, 844)])
def test_a_permalink_signs_in_once_and_a_new_tab_does_not_ask_again(browser, course, width,
                                                                      height):
    url, root = course
    token = keyring().issue("ada", days=1)
    context, pg, errors = new_page(browser, width, height)
    pg.goto(url + LINK)
    pg.wait_for_selector("#signin-dialog[open]")
    pg.fill("#signin-token", token[:-4] + "AAAA")               # a forged signature
    pg.click("#signin-dialog button[type=submit]")
    pg.wait_for_function("() => document.querySelector('#signin-problem').textContent")
    assert "not valid here" in pg.inner_text("#signin-problem")
    assert pg.is_visible("#signin-dialog")
    assert axe_serious(pg, "#signin-dialog") == []
    shot(pg, f"wrong-token-{width}")
    pg.fill("#signin-token", token)
    pg.click("#signin-dialog button[type=submit]")
    pg.wait_for_selector("#exercise-form")
    assert pg.inner_text("#access-who") == "Signed in as ada"
    case = build_case(load_dir(root / "exercises")[0], "ada", SALT)
    shown = pg.inner_text("#exercise-body")
    assert f"{case.variables['logits'][0][0]:.6g}"[:5] in shown
    cookie = next(c for c in context.cookies() if c["name"] == "glassllm_session")
    assert cookie["httpOnly"] and cookie["sameSite"] == "Strict" and cookie["path"] == "/"
    stored = pg.evaluate("() => JSON.stringify([{...localStorage}, {...sessionStorage},"
                         " document.cookie, location.href])")
    assert token not in stored
    assert axe_serious(pg, "#access") == []
    shot(pg, f"signed-in-{width}")
    _, tab, tab_errors = new_page(browser, width, height, context)   # a new tab
    tab.goto(url + LINK)
    tab.wait_for_selector("#exercise-form")
    assert tab.locator("#signin-dialog").count() == 0
    assert tab.inner_text("#access-who") == "Signed in as ada"
    context.close()
    assert unexpected(errors) == [] and unexpected(tab_errors) == []


def test_an_expired_session_is_an_access_problem_beside_the_sign_in(browser, course):
    url, _ = course
    context, pg, errors = new_page(browser, 1280, 800)
    expired = keyring().issue("ada", days=1, now=time.time() - 2 * 86400)
    host = url.split("//")[1].split(":")[0]
    context.add_cookies([{"name": "glassllm_session", "value": expired, "domain": host,
                          "path": "/", "httpOnly": True, "sameSite": "Strict"}])
    pg.goto(url + "/")
    pg.wait_for_selector("body[data-ready]")
    assert "expired" in pg.inner_text("#access-status")
    pg.evaluate("() => document.querySelector('#run').click()")
    pg.wait_for_selector("#signin-dialog[open]")
    pg.click("#signin-dialog button[type=button]")          # Cancel
    pg.wait_for_function("() => document.querySelector('#access-status').textContent"
                         ".includes('has expired')")
    assert pg.inner_text("#msg-expression").strip() == ""      # nothing under the formula
    assert not pg.locator(".field .msg.error").count()
    shot(pg, "expired-1280")
    context.close()
    assert unexpected(errors) == []
