"""`/docs` renders the API in a real headless Chromium with no internet (SPEC H7).

FastAPI writes OpenAPI 3.1; Swagger UI 4 shows "Unable to render this definition" for it,
which a plain HTTP check of /docs cannot see. So this opens the page, as a reader would,
against the real sandbox, refusing every request that would leave 127.0.0.1.
The sandbox and the browser are the page tests' fixtures (tests/page/test_playground.py).
"""

from __future__ import annotations

from urllib.parse import urlparse

import pytest
from browser_session import ARTIFACTS

pytestmark = [pytest.mark.browser, pytest.mark.slow]


def test_docs_render_every_op_offline(browser, url):
    context = browser.new_context(viewport={"width": 1280, "height": 800})
    outside: list[str] = []

    def local_only(route):
        parts = urlparse(route.request.url)
        if parts.scheme in ("data", "blob") or parts.hostname == "127.0.0.1":
            route.continue_()
        else:
            outside.append(route.request.url)
            route.abort()

    context.route("**/*", local_only)
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    try:
        page.goto(url + "/docs")
        softmax = page.locator("#operations-ops-run_softmax")
        softmax.wait_for(state="visible", timeout=30_000)
        assert softmax.locator(".opblock-summary-path").inner_text().replace("\u200b", "") \
            == "/api/v1/ops/softmax"
        assert page.locator(".opblock").count() >= 30, "every op and route is listed"
        assert page.locator("#operations-expressions-eval_expression"
                            ).is_visible()
        title = page.locator(".info .title").inner_text()
        assert title.startswith("glassllm gradient sandbox")
        assert "OAS 3.1" in title, "Swagger UI 5 reads the OpenAPI 3.1 FastAPI writes"
        assert page.get_by_text("Unable to render this definition").count() == 0
        assert page.locator(".errors-wrapper").count() == 0
        ARTIFACTS.mkdir(exist_ok=True)
        page.screenshot(path=str(ARTIFACTS / "docs.png"))
    finally:
        context.close()
    assert outside == [], "/docs must work with no internet (H7)"
    assert errors == []
