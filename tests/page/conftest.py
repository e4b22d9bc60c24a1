"""What the page's tests share: a fresh page of the playground per test, in the module's
browser, against the module's sandbox (tests/conftest.py gives both); a JavaScript error
on the page fails the test. A module sets ``VIEWPORT = (width, height)`` for another size
(default 1280 × 800); one that needs another start defines its own ``page``."""

from __future__ import annotations

import pytest


@pytest.fixture
def page(request, browser, url):
    width, height = getattr(request.module, "VIEWPORT", (1280, 800))
    context = browser.new_context(viewport={"width": width, "height": height})
    pg = context.new_page()
    errors: list[str] = []
    pg.on("pageerror", lambda exc: errors.append(str(exc)))
    pg.goto(url + "/")
    pg.wait_for_selector("body[data-ready]")
    yield pg
    context.close()
    assert not errors, f"JavaScript errors on the page: {errors}"
