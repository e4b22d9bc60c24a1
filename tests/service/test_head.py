"""HEAD wherever GET (RFC 9110 §9.3.2; glassllm_service/allow.py): the probes, the page and
its files, every GET route; the HEAD twins stay out of /openapi.json."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from glassllm_service.app import create_app
from glassllm_service.settings import Settings


@pytest.fixture(scope="module")
def client():
    with TestClient(create_app(Settings())) as c:
        yield c


@pytest.mark.parametrize("path", ["/healthz", "/readyz"])
def test_head_on_the_probes_is_200(client, path):
    r = client.head(path)
    assert r.status_code == 200 and r.content == b""
    assert r.headers["content-type"] == "application/json"
    assert int(r.headers["content-length"]) == len(client.get(path).content)


def test_head_stays_out_of_the_schema(client):
    paths = client.get("/openapi.json").json()["paths"]
    assert set(paths["/healthz"]) == {"get"} and set(paths["/readyz"]) == {"get"}
    assert not [p for p, ops in paths.items() if "head" in ops]


PAGE_PATHS = ["/", "/static/index.html", "/static/playground.css", "/static/js/main.js",
              "/docs", "/docs-assets/swagger-ui.css", "/openapi.json"]


@pytest.mark.parametrize("path", PAGE_PATHS)
def test_head_on_the_page_and_static_files_is_200(client, path):
    """H7, H8 (QA pass 3, defect 7): HEAD / was 405 while HEAD /healthz was 200."""
    r, g = client.head(path), client.get(path)
    assert (r.status_code, g.status_code) == (200, 200) and r.content == b""
    assert r.headers["content-type"] == g.headers["content-type"]
    assert int(r.headers["content-length"]) == len(g.content)
    assert client.head("/static/missing.js").status_code == 404


def test_every_get_route_answers_head(client):
    """HEAD wherever GET (RFC 9110): every GET path of the schema, the page's too."""
    paths = client.get("/openapi.json").json()["paths"]
    wheel = client.get("/dist/").json()["wheels"][0]          # /dist/{filename}
    exercise = client.get("/api/v1/exercises").json()["exercises"][0]["id"]
    gets = [p.replace("{name}", "softmax").replace("{filename}", wheel)
            .replace("{exercise_id}", exercise).replace("{mystery_id}", "mystery-mlp")
            for p, ops in paths.items() if "get" in ops
            # the class record's routes and the instructor's list of what is hidden answer
            # only a course's tokens: HEAD there is tested in tests/record/test_record_http.py
            # and tests/service/test_hiding_computation.py
            and not p.startswith(("/api/v1/record/", "/api/v1/hidden"))]
    assert {"/healthz", "/api/v1/ops", "/api/v1/ops/softmax", "/api/v1/examples"} <= set(gets)
    for path in gets:
        r, g = client.head(path), client.get(path)
        assert r.status_code == g.status_code == 200, path
        assert r.content == b"" and r.headers["content-type"] == g.headers["content-type"], path
        if path == "/metrics":      # live counters and timestamps: the body changes per call
            assert int(r.headers["content-length"]) > 0
        else:
            assert int(r.headers["content-length"]) == len(g.content), path
    assert client.head("/api/v1/ops/nope").status_code == 404         # as GET: unknown op
    assert client.request("PUT", "/").status_code == 405               # HEAD only, not all
