"""Security headers on every answer and the trusted hosts (glassllm_service/security.py).

In process: every kind of answer carries a Content-Security-Policy that allows the own
origin only (no inline code but the sandbox's own, by hash; no eval; no other host),
``X-Content-Type-Options: nosniff`` and a same-origin framing policy; a Host outside
``GLASSLLM_TRUSTED_HOSTS`` is refused. In Chromium: the page, the Train view, Swagger UI
and the contract pages work under the policy with no violation, and another origin cannot
frame the sandbox while its own origin can.
"""

from __future__ import annotations

import re

import orjson
import pytest
from fastapi.testclient import TestClient

from glassllm_service.app import create_app
from glassllm_service.security import inline_hashes
from glassllm_service.settings import Settings, SettingsError


@pytest.fixture(scope="module")
def client():
    with TestClient(create_app(Settings())) as c:
        yield c


def policy(response) -> dict[str, list[str]]:
    text = response.headers["content-security-policy"]
    return {d.split()[0]: d.split()[1:] for d in text.split("; ")}


ANSWERS = [("GET", "/", None), ("GET", "/static/js/main.js", None), ("GET", "/docs", None),
           ("GET", "/docs/contract/http", None), ("GET", "/openapi.json", None),
           ("GET", "/api/v1/ops", None), ("GET", "/healthz", None), ("GET", "/nowhere", None),
           ("PUT", "/api/v1/ops/add", None), ("POST", "/api/v1/ops/neg", {"inputs": {"a": [1.0]}}),
           ("POST", "/api/v1/ops/neg", {"inputs": {"a": "x"}}), ("GET", "/dist/", None)]


@pytest.mark.parametrize("method,path,body", ANSWERS)
def test_every_answer_carries_the_security_headers(client, method, path, body):
    r = client.request(method, path, content=None if body is None else orjson.dumps(body),
                       headers={"content-type": "application/json"})
    assert r.headers["x-content-type-options"] == "nosniff"
    assert r.headers["x-frame-options"] == "SAMEORIGIN"
    assert r.headers["referrer-policy"] == "same-origin"
    csp = policy(r)
    assert csp["default-src"] == ["'self'"] and csp["frame-ancestors"] == ["'self'"]
    assert csp["object-src"] == ["'none'"] and csp["base-uri"] == ["'self'"]
    for directive, sources in csp.items():
        for source in sources:                   # the own origin, hashes, data: images only
            assert source in ("'self'", "'none'") or source.startswith("'sha256-") or (
                directive == "img-src" and source == "data:"), (directive, source)


def test_the_only_inline_code_allowed_is_the_sandboxs_own(client):
    """The hashes in the policy are exactly those of the inline blocks the sandbox serves:
    Swagger UI's start script and the contract pages' style sheet; the page has none."""
    csp = policy(client.get("/"))
    served = inline_hashes(client.get("/docs").text, client.get("/docs/contract/http").text,
                           client.get("/").text)
    assert sorted(csp["script-src"][1:]) == sorted(set(served["script"]))
    assert sorted(csp["style-src"][1:]) == sorted(set(served["style"]))
    page = client.get("/").text
    assert not re.search(r"<script(?![^>]*\bsrc=)[^>]*>", page)       # no inline script
    assert not re.search(r"\son[a-z]+=", page) and "style=" not in page


def test_trusted_hosts_refuse_another_host_with_the_error_envelope():
    settings = Settings(trusted_hosts="sandbox.example, *.course.example")
    with TestClient(create_app(settings), base_url="http://sandbox.example") as c:
        ok = c.get("/api/v1/ops")
        sub = c.get("/api/v1/ops", headers={"host": "hub.course.example:8443"})
        other = c.post("/api/v1/ops/neg", content=b'{"inputs": {"a": [1.0]}}',
                       headers={"host": "evil.example", "content-type": "application/json"})
        bare = c.get("/", headers={"host": "course.example"})
        probe = c.get("/healthz", headers={"host": "10.0.0.7:8000"})
    assert ok.status_code == 200 and sub.status_code == 200 and probe.status_code == 200
    assert other.status_code == 400 and bare.status_code == 400
    err = other.json()["error"]
    assert err["code"] == "untrusted_host" and err["input"] == "Host"
    assert "GLASSLLM_TRUSTED_HOSTS" in err["message"] and "evil.example" in err["message"]
    assert other.headers["x-content-type-options"] == "nosniff"


def test_by_default_every_host_is_answered():
    with TestClient(create_app(Settings()), base_url="http://anything.example") as c:
        assert c.get("/api/v1/ops", headers={"host": "[::1]:8000"}).status_code == 200
        assert c.get("/api/v1/ops").status_code == 200


@pytest.mark.parametrize("bad", ["https://sandbox.example", "sandbox.example:8000",
                                 "sandbox.example/path", "a*.example", "*"])
def test_a_trusted_host_that_is_not_a_host_name_stops_startup(bad, monkeypatch):
    if bad == "*":                                      # the one wildcard that is fine
        assert Settings(trusted_hosts=bad).trusted_host_list == ["*"]
        return
    monkeypatch.setenv("GLASSLLM_TRUSTED_HOSTS", f"ok.example,{bad}")
    with pytest.raises(SettingsError, match="GLASSLLM_TRUSTED_HOSTS"):
        Settings()


# --------------------------------------------------------------------------------------
# in Chromium: no violation anywhere, framing by the own origin only
# --------------------------------------------------------------------------------------

def watched(browser):
    """A page that records every CSP violation, console error and exception (a missing
    /favicon.ico of a contract page is not one: network answers are other tests' business)."""
    context = browser.new_context(viewport={"width": 1280, "height": 800})
    pg = context.new_page()
    problems: list[str] = []
    pg.on("console", lambda m: problems.append(f"console {m.type}: {m.text}")
          if m.type == "error" and not m.text.startswith("Failed to load resource") else None)
    pg.on("pageerror", lambda exc: problems.append(f"exception: {exc}"))
    pg.add_init_script("document.addEventListener('securitypolicyviolation', (e) =>"
                       " console.error('CSP violation: ' + e.violatedDirective + ' '"
                       " + e.blockedURI + ' ' + (e.sample || '')));")
    return context, pg, problems


@pytest.mark.browser
@pytest.mark.slow
def test_the_page_swagger_ui_and_the_contract_work_under_the_policy(browser, url):
    context, pg, problems = watched(browser)
    try:
        pg.goto(url + "/")
        pg.wait_for_selector("body[data-ready]")
        pg.click("button.example >> nth=0")
        pg.wait_for_function("() => Number(document.body.dataset.runs || 0) >= 1")
        pg.wait_for_selector("body[data-train-ready]")
        pg.click("#attn-show")                    # heat-map cells coloured through style
        pg.wait_for_function("() => Number(document.body.dataset.attnShown || 0) >= 1")
        coloured = pg.evaluate("getComputedStyle(document.querySelector('#attn-maps td"
                               "[title]')).backgroundColor")
        assert coloured not in ("", "rgba(0, 0, 0, 0)")
        pg.press("#train-steps", "Enter")         # the form does not submit (no reload)
        assert pg.evaluate("document.body.dataset.trainReady") == "1"
        pg.goto(url + "/docs")
        pg.wait_for_selector(".swagger-ui .information-container", timeout=30_000)
        assert pg.locator(".opblock").count() > 10   # the operations are listed
        pg.goto(url + "/docs/contract/http")
        assert pg.evaluate("getComputedStyle(document.body).maxWidth") == "960px"
    finally:
        context.close()
    assert problems == []


@pytest.mark.browser
@pytest.mark.slow
def test_only_the_own_origin_may_frame_the_sandbox(browser, url):
    """A page of the sandbox's own origin may frame it (a proxy tile under a path prefix
    of the same origin); a page of any other origin may not."""
    frame = ("(src) => new Promise((done) => { const f = document.createElement('iframe');"
             " f.src = src; f.onload = () => done(true); document.body.append(f); })")
    context, pg, problems = watched(browser)
    try:
        pg.goto(url + "/docs/contract/")
        pg.evaluate(frame, url + "/docs/contract/http")
        same = pg.frames[-1]
        assert same.url.endswith("/docs/contract/http") and "HTTP" in same.title()
    finally:
        context.close()
    assert not any("frame" in p for p in problems), problems
    context, pg, problems = watched(browser)       # a fresh page: another (opaque) origin
    try:
        pg.set_content("<p>another origin, with no policy of its own</p>")
        pg.evaluate(frame, url + "/docs/contract/http")
        pg.wait_for_timeout(300)                   # Chromium says it blocked the framing
    finally:
        context.close()
    assert any("frame-ancestors" in p for p in problems), problems
