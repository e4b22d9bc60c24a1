"""The sandbox on a network: access log and request ids, Prometheus metrics,
CORS, the optional token, and Allow on every 405 (RFC 9110 §15.5.6). In-process."""

from __future__ import annotations

import orjson
import pytest
from fastapi.testclient import TestClient
from prometheus_client.parser import text_string_to_metric_families

from glassllm.sandbox import registry
from glassllm_service.allow import flat_routes
from glassllm_service.app import create_app
from glassllm_service.settings import Settings

NEG = {"inputs": {"a": [1.0, -2.0]}}


# -- access log and request id -------------------------------------------------------------

def test_one_access_line_per_request_with_its_request_id(access_lines):
    with TestClient(create_app()) as c:
        r = c.post("/api/v1/ops/neg", json=NEG, headers={"X-Request-ID": "lab-3.q7"})
        assert r.headers["x-request-id"] == "lab-3.q7"                      # echoed
        made = c.get("/healthz").headers["x-request-id"]
        bad = c.get("/healthz", headers={"X-Request-ID": "no spaces\tor tabs"})
    assert len(made) == 32 and int(made, 16) >= 0                           # a uuid4 hex
    assert bad.headers["x-request-id"] != "no spaces\tor tabs"
    assert len(access_lines) == 3
    host, method, path, op, status, ms, rid = access_lines[0].split(" ")
    assert (host, method, path, op, status, rid) == (
        "testclient", "POST", "/api/v1/ops/neg", "op=neg", "200", "rid=lab-3.q7")
    assert ms.endswith("ms") and float(ms[:-2]) >= 0
    assert access_lines[1].endswith(f" GET /healthz op=- 200 {access_lines[1].split()[5]}"
                                    f" rid={made}")


def test_the_access_log_in_json(access_lines):
    with TestClient(create_app(Settings(log_format="json"))) as c:
        c.put("/api/v1/ops/add", headers={"X-Request-ID": "r1"})
    line = orjson.loads(access_lines[0])
    assert set(line) == {"client", "method", "path", "route", "op", "status", "duration_ms",
                         "request_id"}
    assert (line["method"], line["path"], line["route"], line["op"], line["status"],
            line["request_id"]) == ("PUT", "/api/v1/ops/add", "/api/v1/ops/{name}", "add",
                                    405, "r1")


def test_the_access_log_can_be_turned_off(access_lines):
    with TestClient(create_app(Settings(access_log=False))) as c:
        assert c.get("/healthz").status_code == 200
    assert access_lines == []


# -- metrics ---------------------------------------------------------------------------------

def samples(text: str) -> dict:
    out = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


def test_metrics_parse_and_count_by_route_template_op_and_status():
    with TestClient(create_app(Settings(max_concurrency=3))) as c:
        before = samples(c.get("/metrics").text)
        for _ in range(3):
            assert c.post("/api/v1/ops/neg", json=NEG).status_code == 200
        assert c.post("/api/v1/ops/nosuch", json=NEG).status_code == 404
        assert c.get("/api/v1/ops/softmax").status_code == 200
        after = samples(c.get("/metrics").text)

    def delta(name, **labels):
        key = (name, tuple(sorted(labels.items())))
        return after.get(key, 0) - before.get(key, 0)

    total = "glassllm_requests_total"
    assert delta(total, route="/api/v1/ops/neg", op="neg", status="200") == 3
    assert delta(total, route="/api/v1/ops/{name}", op="", status="404") == 1  # not a raw path
    assert delta(total, route="/api/v1/ops/{name}", op="softmax", status="200") == 1
    assert delta("glassllm_request_duration_seconds_count", route="/api/v1/ops/neg",
                 op="neg") == 3
    assert delta("glassllm_slot_wait_seconds_count", lane="small") == 3
    assert after[("glassllm_slots", ())] == 3
    assert after[("glassllm_queue_depth", (("lane", "small"),))] == 0
    ops = {dict(k[1]).get("op") for k in after if k[0] == total}
    assert ops <= set(registry.OPS) | {"", "eval"}                 # bounded label values


def test_routes_the_router_does_not_name_get_their_template_not_unmatched():
    """/openapi.json, the page's assets and 401s were all route="unmatched" once:
    a mount is labelled by its prefix, FastAPI's own routes by their path, a 401 answered
    before routing by the route it was for; only a path no route matches is unmatched."""
    with TestClient(create_app(Settings(api_token="t0ken"))) as c:
        before = samples(c.get("/metrics").text)
        assert c.get("/openapi.json").status_code == 200
        assert c.get("/static/js/main.js").status_code == 200
        assert c.post("/api/v1/ops/neg", json=NEG).status_code == 401
        assert c.post("/api/v1/ops/" + "x" * 50, json=NEG).status_code == 401
        assert c.get("/no/such/page").status_code == 404
        after = samples(c.get("/metrics").text)

    def delta(**labels):
        key = ("glassllm_requests_total", tuple(sorted(labels.items())))
        return after.get(key, 0) - before.get(key, 0)

    assert delta(route="/openapi.json", op="", status="200") == 1
    assert delta(route="/static", op="", status="200") == 1
    assert delta(route="/api/v1/ops/neg", op="neg", status="401") == 1
    assert delta(route="/api/v1/ops/{name}", op="", status="401") == 1   # never the raw name
    assert delta(route="unmatched", op="", status="404") == 1


def test_metrics_can_be_turned_off():
    with TestClient(create_app(Settings(metrics=False))) as c:
        assert c.get("/metrics").status_code == 404


# -- CORS ------------------------------------------------------------------------------------

def test_cors_preflight_and_headers_for_a_listed_origin():
    app = create_app(Settings(cors_origins="https://course.example.edu, https://lms.example"))
    with TestClient(app) as c:
        r = c.options("/api/v1/ops/neg", headers={
            "Origin": "https://lms.example", "Access-Control-Request-Method": "POST",
            "Access-Control-Request-Headers": "content-type, authorization"})
        assert r.status_code == 200
        assert r.headers["access-control-allow-origin"] == "https://lms.example"
        assert "POST" in r.headers["access-control-allow-methods"]
        assert "authorization" in r.headers["access-control-allow-headers"].lower()
        r = c.post("/api/v1/ops/neg", json=NEG, headers={"Origin": "https://lms.example"})
        assert r.headers["access-control-allow-origin"] == "https://lms.example"
        assert "Retry-After" in r.headers["access-control-expose-headers"]
        r = c.post("/api/v1/ops/neg", json=NEG, headers={"Origin": "https://evil.example"})
        assert "access-control-allow-origin" not in r.headers
        bad = c.options("/api/v1/ops/neg", headers={
            "Origin": "https://evil.example", "Access-Control-Request-Method": "POST"})
        assert bad.status_code == 400


def test_cors_is_off_by_default():
    with TestClient(create_app()) as c:
        r = c.post("/api/v1/ops/neg", json=NEG, headers={"Origin": "https://lms.example"})
        assert r.status_code == 200 and "access-control-allow-origin" not in r.headers


# -- the token --------------------------------------------------------------------------------

def test_a_token_guards_every_post_and_leaves_reads_open():
    with TestClient(create_app(Settings(api_token="s3cret-class"))) as c:
        for path, body in (("/api/v1/ops/neg", NEG), ("/api/v1/eval", {"expression": "x"}),
                           ("/api/v1/ops/nosuch", NEG)):
            r = c.post(path, json=body)
            assert r.status_code == 401, path
            assert r.headers["www-authenticate"] == 'Bearer realm="glassllm"'
            err = r.json()["error"]
            assert (err["code"], err["input"]) == ("unauthorized", "Authorization")
            assert "is missing" in err["message"] and "GLASSLLM_API_TOKEN" in err["message"]
        wrong = c.post("/api/v1/ops/neg", json=NEG, headers={"Authorization": "Bearer nope"})
        assert wrong.status_code == 401 and "does not match" in wrong.json()["error"]["message"]
        ok = c.post("/api/v1/ops/neg", json=NEG, headers={"Authorization": "Bearer s3cret-class"})
        assert ok.status_code == 200 and ok.json()["value"] == [-1.0, 2.0]
        for path in ("/healthz", "/readyz", "/", "/docs", "/openapi.json", "/api/v1/ops",
                     "/api/v1/ops/neg", "/api/v1/examples", "/static/js/main.js", "/metrics"):
            assert c.get(path).status_code == 200, path


def test_without_a_token_setting_posts_are_open():
    with TestClient(create_app()) as c:
        assert c.post("/api/v1/ops/neg", json=NEG).status_code == 200


# -- Allow on every 405 -------------------------------------------------------------------

def every_path() -> dict[str, set[str]]:
    """A concrete path for every route of the app and the methods it answers."""
    app = create_app()
    out: dict[str, set[str]] = {}
    for route, prefix in flat_routes(app.router.routes):
        path = prefix + route.path
        if "{" in path:
            path = path.replace("{name}", "softmax")
        if not getattr(route, "methods", None):             # a mount: StaticFiles
            path += "/js/main.js" if path == "/static" else "/favicon.png"
            methods = {"GET", "HEAD"}
        else:
            methods = set(route.methods)
        out.setdefault(path, set()).update(methods)
    for path in out:              # an op's POST route shares its path with GET /ops/{name}
        if path.startswith("/api/v1/ops/"):
            out[path] |= {"GET", "HEAD", "POST"}
    return out


PATHS = every_path()


def test_every_route_is_checked():
    assert {"/", "/docs", "/healthz", "/readyz", "/metrics", "/openapi.json", "/api/v1/ops",
            "/api/v1/eval", "/api/v1/examples", "/static/js/main.js",
            "/docs-assets/favicon.png"} <= set(PATHS)
    assert PATHS["/api/v1/ops/softmax"] == {"GET", "HEAD", "POST"}
    assert PATHS["/api/v1/eval"] == {"POST"}


@pytest.fixture(scope="module")
def plain():
    with TestClient(create_app()) as c:
        yield c


@pytest.mark.parametrize("path", sorted(PATHS))
def test_every_405_names_every_method_of_the_path(plain, path):
    expected = PATHS[path]
    for method in {"PUT", "DELETE", "PATCH", "GET", "POST"} - expected:
        r = plain.request(method, path)
        assert r.status_code == 405, (method, path)
        assert set(r.headers["allow"].split(", ")) == expected, (method, path)


def test_put_on_an_op_names_get_head_and_post():
    """The issue's case: PUT /api/v1/ops/add said Allow: GET."""
    with TestClient(create_app()) as c:
        r = c.put("/api/v1/ops/add")
        assert r.status_code == 405 and r.headers["allow"] == "GET, HEAD, POST"
