"""Small contract edges of the sandbox (SPEC H2, H4, H7) found by the QA pass: error
wording, a grad_output with nothing to seed, HEAD probes, the op named on body refusals,
and the README's pointer to the contract."""

from __future__ import annotations

import numpy as np
import pytest
from fastapi.testclient import TestClient
from sandbox_server import ROOT

from glassllm.sandbox import registry as R
from glassllm.sandbox.wire import WireError
from glassllm_service.app import create_app
from glassllm_service.settings import Settings


@pytest.fixture(scope="module")
def client():
    with TestClient(create_app(Settings(max_body_bytes=1000, max_json_depth=8))) as c:
        yield c


def error(r, status: int) -> dict:
    assert r.status_code == status, r.text
    return r.json()["error"]


# --------------------------------------------------------------------------------------
# H4: the 404 reads as two sentences
# --------------------------------------------------------------------------------------

def test_unknown_op_message_has_a_separator(client):
    err = error(client.get("/api/v1/ops/__class__"), 404)
    assert err["message"] == "there is no op named '__class__'. Every op: GET /api/v1/ops"
    err = error(client.post("/api/v1/ops/softmx", json={"inputs": {}}), 404)
    assert err["message"].startswith("there is no op named 'softmx'; did you mean softmax")
    assert err["message"].endswith("? Every op: GET /api/v1/ops")


# --------------------------------------------------------------------------------------
# H2: a grad_output with no backward to seed is refused, not ignored
# --------------------------------------------------------------------------------------

def test_grad_output_with_empty_requires_grad_is_422(client):
    body = {"inputs": {"a": [1.0, 2.0]}, "requires_grad": [], "grad_output": [5.0, 7.0]}
    err = error(client.post("/api/v1/ops/exp", json=body), 422)
    assert err["input"] == "grad_output" and err["op"] == "exp"
    assert "no input requires grad" in err["message"]
    assert "no backward to seed" in err["message"]
    r = client.post("/api/v1/ops/exp", json={"inputs": {"a": [0.0]}, "requires_grad": []})
    assert r.status_code == 200 and r.json()["grads"] == {} and r.json()["value"] == [1.0]


def test_the_library_refuses_it_too():
    op = R.OPS["exp"]
    with pytest.raises(WireError, match="no input requires grad") as err:
        R.run(op, R.coerce_inputs(op, {"a": [1.0]}), [], np.ones(1))
    assert err.value.input == "grad_output"
    seeded = R.run(op, R.coerce_inputs(op, {"a": [0.0]}), None, np.array([3.0]))
    assert seeded.grads["a"].tolist() == [3.0]                          # exp'(0) · 3


def test_eval_grad_output_without_a_variable_requiring_grad_is_422(client):
    body = {"expression": "exp(x)", "variables": {"x": {"value": [1.0], "requires_grad": False}},
            "grad_output": [2.0]}
    err = error(client.post("/api/v1/eval", json=body), 422)
    assert err["input"] == "grad_output" and "does not require grad" in err["message"]


# --------------------------------------------------------------------------------------
# H7: HEAD probes
# --------------------------------------------------------------------------------------

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
    wheel = client.get("/dist/").json()["wheels"][0]          # issue 12: /dist/{filename}
    gets = [p.replace("{name}", "softmax").replace("{filename}", wheel)
            for p, ops in paths.items() if "get" in ops]
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


# --------------------------------------------------------------------------------------
# H4/H5: refusals of the body name the op the path names
# --------------------------------------------------------------------------------------

def test_body_too_large_names_the_op(client):
    big = b'{"inputs": {"a": [' + b"1.0," * 400 + b"1.0]}}"
    err = error(client.post("/api/v1/ops/softmax", content=big,
                            headers={"Content-Type": "application/json"}), 413)
    assert err["op"] == "softmax" and err["input"] == "request body"

    def streamed():                        # no Content-Length: counted while reading
        yield b'{"inputs": {"a": ['
        for _ in range(400):
            yield b"1.0,"
        yield b"1.0]}}"
    err = error(client.post("/api/v1/ops/softmax", content=streamed(),
                            headers={"Content-Type": "application/json"}), 413)
    assert err["op"] == "softmax" and err["code"] == "body_too_large"


def test_too_deep_names_the_op(client):
    deep = b'{"inputs": {"a": ' + b"[" * 10 + b"1.0" + b"]" * 10 + b"}}"
    err = error(client.post("/api/v1/ops/exp", content=deep,
                            headers={"Content-Type": "application/json"}), 422)
    assert err["op"] == "exp" and err["code"] == "too_deep"


# --------------------------------------------------------------------------------------
# the README points at the contract in words, not with a link that breaks in a clone
# --------------------------------------------------------------------------------------

def test_readme_names_the_contract_without_a_relative_link_out_of_the_repo():
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    assert "](../" not in text
    assert "`shared/SPEC.md`" in text
