"""The sandbox API in-process (SPEC H1-H6): examples, wire format, errors, limits, threads."""

from __future__ import annotations

import json
import math
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest
from fastapi.testclient import TestClient

from glassllm.sandbox import registry as R
from glassllm_service.app import create_app
from glassllm_service.settings import Settings

EXAMPLES = [(op, ex) for op in R.OPS.values() for ex in op.examples]


@pytest.fixture(scope="module")
def client():
    with TestClient(create_app(Settings())) as c:
        yield c


def strict_loads(text: str):
    def reject(name):
        raise ValueError(f"non-strict JSON constant {name}")
    return json.loads(text, parse_constant=reject)


def as_array(wire) -> np.ndarray:
    tokens = {"NaN": math.nan, "Infinity": math.inf, "-Infinity": -math.inf}

    def leaf(v):
        return [leaf(x) for x in v] if isinstance(v, list) else tokens.get(v, v)
    return np.array(leaf(wire), dtype=np.float64)


@pytest.mark.parametrize("op,example", EXAMPLES, ids=[f"{o.name}:{e.title}" for o, e in EXAMPLES])
def test_every_registry_example_equals_the_library(client, op, example):
    """H1/H2: POST returns exactly what glassllm returns, values and grads, bit for bit."""
    r = client.post(f"/api/v1/ops/{op.name}", json=example.request())
    assert r.status_code == 200, r.text
    body = strict_loads(r.text)
    lib = R.run(op, R.coerce_inputs(op, example.inputs), example.requires_grad)
    np.testing.assert_array_equal(as_array(body["value"]), lib.value)
    assert body["shape"] == list(lib.value.shape)
    assert body["grads"].keys() == lib.grads.keys()
    for name, grad in lib.grads.items():
        np.testing.assert_array_equal(as_array(body["grads"][name]), grad)
    if op.output == "ndarray":
        assert body["grads"] == {}, "ndarray ops return no grads (H2)"
    if lib.value.ndim == 0:
        assert isinstance(body["value"], float), "a scalar is a JSON number (H2)"


def test_ops_listing_is_the_registry(client):
    ops = client.get("/api/v1/ops").json()["ops"]
    assert [o["name"] for o in ops] == list(R.OPS)
    emb = client.get("/api/v1/ops/embedding").json()
    ids = next(i for i in emb["inputs"] if i["name"] == "ids")
    assert ids["kind"] == "int_array" and ids["differentiable"] is False
    assert emb["examples"][0]["expected"]["grads"]["weight"][1] == [2.0, 2.0]


def test_float64_round_trips_exactly(client):
    """H3: what goes in comes back bit-equal through an identity (reshape to the same shape)."""
    rng = np.random.default_rng(0)
    x = np.concatenate([rng.normal(size=200) * 10.0 ** rng.integers(-300, 300, 200),
                        [5e-324, 1.7976931348623157e308, -0.0, 0.1, 1 / 3]])
    r = client.post("/api/v1/ops/reshape", json={"inputs": {"a": x.tolist(), "shape": [-1]}})
    got = np.array(strict_loads(r.text)["value"])
    assert got.tobytes() == x.tobytes()


def test_nonfinite_in_and_out_is_strict_json(client):
    r = client.post("/api/v1/ops/div", json={"inputs": {"a": [1.0, -1.0, 0.0, "nan", "inf"],
                                                         "b": [0.0, 0.0, 0.0, 1.0, "-Infinity"]}})
    assert r.status_code == 200
    body = strict_loads(r.text)
    assert body["value"] == ["Infinity", "-Infinity", "NaN", "NaN", "NaN"]
    assert any("divide by zero" in w for w in body["warnings"])
    assert any("invalid value" in w for w in body["warnings"])


def test_warnings_are_per_request(client):
    """H4/H6: a clean request after a warning one has no warnings."""
    client.post("/api/v1/ops/log", json={"inputs": {"a": [0.0]}})
    assert client.post("/api/v1/ops/log", json={"inputs": {"a": [1.0]}}).json()["warnings"] == []


def test_requires_grad_and_grad_output(client):
    r = client.post("/api/v1/ops/mul", json={"inputs": {"a": [1.0, 2.0], "b": [3.0, 4.0]},
                                             "requires_grad": ["b"], "grad_output": [10.0, 1.0]})
    assert r.json()["grads"] == {"b": [10.0, 2.0]}
    r = client.post("/api/v1/ops/mul", json={"inputs": {"a": [1.0], "b": [3.0]},
                                             "requires_grad": []})
    assert r.json()["grads"] == {}


def err(r, status: int, *names: str) -> dict:
    assert r.status_code == status, r.text
    assert "Traceback" not in r.text
    e = r.json()["error"]
    for name in names:
        assert name in (e["input"] or "") + e["message"], (name, e)
    return e


@pytest.mark.parametrize("name,body,status,named", [
    ("embedding", {"inputs": {"weight": [[0.0]] * 4, "ids": [7]}}, 400, "ids"),
    ("embedding", {"inputs": {"weight": [[0.0]] * 4, "ids": ["NaN"]}}, 422, "ids"),
    ("embedding", {"inputs": {"weight": [[0.0]] * 4, "ids": [1.5]}}, 422, "ids"),
    ("embedding", {"inputs": {"weight": [[0.0]] * 4, "ids": [True]}}, 422, "ids"),
    ("embedding", {"inputs": {"weight": [[0.0]] * 4, "ids": ["3"]}}, 422, "ids"),
    ("embedding", {"inputs": {"weight": [[0.0]], "ids": [0]}, "requires_grad": ["ids"]}, 422,
     "L0.6"),
    ("masked_fill", {"inputs": {"a": [1.0, 2.0], "mask": ["yes", "no"], "value": 0}}, 422, "mask"),
    ("add", {"inputs": {"a": [[1.0], [1.0, 2.0]], "b": 1}}, 422, "ragged"),
    ("add", {"inputs": {"a": [1.0, 2.0, 3.0], "b": [1.0, 2.0]}}, 400, "broadcast"),
    ("tsum", {"inputs": {"a": [1.0], "axis": 3}}, 400, "axis"),
    ("repeat_kv", {"inputs": {"x": [[[[1.0]]]], "repeats": 10**9}}, 413, "repeats"),
    ("repeat_kv", {"inputs": {"x": [[[[1.0]]]], "repeats": 0}}, 422, "repeats"),
    ("neg", {"inputs": {"a": [1.0, 2.0]}, "grad_output": [1.0, 2.0, 3.0]}, 422, "[3]"),
    ("neg", {"inputs": {}}, 422, "'a'"),
    ("neg", {"inputs": {"a": 1.0, "b": 2.0}}, 422, "'b'"),
    ("neg", {"input": {"a": 1.0}}, 422, "input"),
    ("softmax_np", {"inputs": {"x": [1.0]}, "grad_output": [1.0]}, 422, "grad_output"),
])
def test_bad_input_is_4xx_naming_the_input(client, name, body, status, named):
    err(client.post(f"/api/v1/ops/{name}", json=body), status, named)


@pytest.mark.parametrize("op,inputs,requires_grad,code", [
    ("softmax", {"a": [1.0, 2.0]}, ["zzz"], "invalid_input"),           # not an input
    ("cross_entropy", {"logits": [[1.0, 2.0]], "targets": [0]}, ["targets"],
     "invalid_input"),                                                  # an index input
    ("softmax", {"a": [1.0, 2.0]}, "a", "invalid_request"),             # not a list
])
def test_requires_grad_errors_have_the_codes_docs_http_lists(client, op, inputs,
                                                             requires_grad, code):
    """docs/http.md's table: the envelope's form is `invalid_request`, a name the op cannot
    differentiate is `invalid_input` (found by a fresh QA pass: the table had it wrong)."""
    r = client.post(f"/api/v1/ops/{op}", json={"inputs": inputs, "requires_grad": requires_grad})
    e = r.json()["error"]
    assert (r.status_code, e["code"], e["input"]) == (422, code, "requires_grad")


def test_a_key_given_twice_counts_once_the_last_as_docs_http_says(client):
    r = client.post("/api/v1/ops/exp", content=b'{"inputs": {"a": [1.0], "a": [2.0]}}',
                    headers={"Content-Type": "application/json"})
    assert r.status_code == 200 and r.json()["value"] == [float(np.exp(2.0))]


def test_grad_output_shape_names_both_shapes(client):
    e = err(client.post("/api/v1/ops/neg", json={"inputs": {"a": [[1.0, 2.0]]},
                                                  "grad_output": [1.0]}), 422, "grad_output")
    assert "[1]" in e["message"] and "[1, 2]" in e["message"]


@pytest.mark.parametrize("name", ["__class__", "softmx", "eval", "__import__"])
def test_unknown_op_is_404_with_close_names(client, name):
    e = err(client.post(f"/api/v1/ops/{name}", json={"inputs": {}}), 404, "name")
    if name == "softmx":
        assert "softmax" in e["close"]
    assert client.get(f"/api/v1/ops/{name}").status_code == 404


def test_path_traversal_is_404(client):
    assert client.post("/api/v1/ops/..%2F..%2Fetc%2Fpasswd", json={}).status_code == 404
    assert client.post("/api/v1/ops/../../etc/passwd", json={}).status_code == 404


def test_empty_body_and_text_plain_and_bad_json(client):
    err(client.post("/api/v1/ops/add", content=b"", headers={"content-type": "application/json"}),
        422, "request body")
    err(client.post("/api/v1/ops/add", content=b'{"inputs": {"a": 1, "b": 2}}',
                    headers={"content-type": "text/plain"}), 415, "Content-Type")
    err(client.post("/api/v1/ops/add", content=b'{"inputs": [1,',
                    headers={"content-type": "application/json"}), 422, "request body")
    err(client.post("/api/v1/ops/add", content=b"[]", headers={"content-type": "application/json"}),
        422, "request body")


def test_limits_from_shapes_before_work(client):
    e = err(client.post("/api/v1/ops/add", json={"inputs": {"a": [[0.0]] * 20000,
                                                            "b": [[0.0] * 20000]}}), 413, "a, b")
    assert "400000000" in e["message"]


def test_limits_are_settings():
    small = Settings(max_array_elements=100, max_matmul_madds=999, max_body_bytes=2000,
                     max_json_depth=4)
    with TestClient(create_app(small)) as c:
        err(c.post("/api/v1/ops/neg", json={"inputs": {"a": [0.0] * 101}}), 413, "'a'")
        m = [[0.0] * 10] * 10
        err(c.post("/api/v1/ops/matmul", json={"inputs": {"a": m, "b": m}}), 413, "multiply-adds")
        err(c.post("/api/v1/ops/neg", json={"inputs": {"a": [[[[[1.0]]]]]}}), 422, "depth")
        err(c.post("/api/v1/ops/neg", content=b" " * 3000,
                   headers={"content-type": "application/json"}), 413, "request body")
        assert c.get("/healthz").status_code == 200


def test_busy_is_503_with_retry_after_only_when_the_queue_is_full():
    """A request waits for a slot; 503 + Retry-After only past GLASSLLM_MAX_QUEUE.
    The only slot is held by a task on the app's own loop, released by an event we set."""
    app = create_app(Settings(max_concurrency=1, max_queue=0))
    with TestClient(app) as c:
        release = c.portal.call(_event)
        held = c.portal.start_task_soon(_hold, app.state.admission, release)
        c.portal.call(_until, lambda: app.state.admission.running == 1)
        r = c.post("/api/v1/ops/neg", json={"inputs": {"a": 1.0}})
        assert r.status_code == 503 and r.headers["retry-after"] == "1"
        assert r.json()["error"]["code"] == "queue_full"
        c.portal.call(release.set)
        held.result()
        assert c.post("/api/v1/ops/neg", json={"inputs": {"a": 1.0}}).json()["value"] == -1.0


async def _event():
    import asyncio
    return asyncio.Event()


async def _hold(admission, release) -> None:
    async with admission.slot(cost=1, client="holder"):
        await release.wait()


async def _until(condition) -> None:
    import asyncio
    for _ in range(10_000):
        if condition():
            return
        await asyncio.sleep(0)
    raise AssertionError("condition never held")


def test_concurrent_answers_equal_serial_answers(mixed_requests):
    """H6: 8 threads × 50 mixed requests (graph ops, ndarray ops, warnings, errors)."""
    reqs = mixed_requests[:400]
    client = TestClient(create_app(Settings(max_concurrency=8)))

    def call(req):
        r = client.post(f"/api/v1/ops/{req[0]}", json=req[1])
        return r.status_code, r.text

    serial = [call(q) for q in reqs]
    with ThreadPoolExecutor(8) as pool:
        parallel = list(pool.map(call, reqs))
    assert parallel == serial
    assert {s for s, _ in serial} == {200, 400}


def test_empty_mean_is_nan_with_a_warning_not_an_error(client):
    # glassllm's mean is a floating-point 0/0 here (no global warnings-module state, H6)
    r = client.post("/api/v1/ops/mean", json={"inputs": {"a": []}})
    assert r.status_code == 200 and r.json()["value"] == "NaN"
    assert r.json()["warnings"] == ["invalid value encountered (NumPy floating-point warning)"]


@pytest.mark.parametrize("length,ellipsis", [(20, False), (21, True)])
def test_a_long_string_is_cut_at_20_characters_in_messages(client, length, ellipsis):
    r = client.post("/api/v1/ops/neg", json={"inputs": {"a": "x" * length}})
    message = r.json()["error"]["message"]
    assert r.status_code == 422 and ("x" * 20) in message and ("x" * 21) not in message
    assert ("…" in message) is ellipsis


def test_no_content_type_is_415_naming_the_header(client):
    r = client.post("/api/v1/ops/neg", content=b'{"inputs": {"a": 1.0}}')
    assert r.status_code == 415
    err = r.json()["error"]
    assert err["code"] == "unsupported_media_type" and err["input"] == "Content-Type"
    assert err["message"] == "Content-Type must be application/json; got 'none'"
    r = client.post("/api/v1/ops/neg", content=b"{}", headers={"Content-Type": "text/plain"})
    assert r.json()["error"]["message"] == "Content-Type must be application/json; got 'text/plain'"


def test_an_empty_and_an_invalid_body_are_422_naming_the_body(client):
    for path, send in (("/api/v1/ops/neg", '{"inputs": {...}}'),
                       ("/api/v1/eval", '{"expression": ...}')):
        empty = client.post(path, content=b"  ", headers={"Content-Type": "application/json"})
        err = empty.json()["error"]
        assert empty.status_code == 422 and err["input"] == "request body"
        assert err["code"] == "invalid_request"
        assert err["message"] == f"the body is empty; send {send}"
        bad = client.post(path, content=b"{nope", headers={"Content-Type": "application/json"})
        err = bad.json()["error"]
        assert bad.status_code == 422 and err["code"] == "invalid_json"
        assert err["input"] == "request body" and "not valid JSON" in err["message"]


@pytest.mark.parametrize(("body", "rule"), [
    (b'{"inputs": {"a": [NaN, 1.0]}}', 'write them as the strings "NaN", "Infinity"'),
    (b'{"inputs": {"a": [-Infinity]}}', 'write them as the strings "NaN", "Infinity"'),
    (b'{"inputs": {"a": [1' + b"0" * 5000 + b"]}}", "a number must fit a float64"),
])
def test_invalid_json_names_the_rule_json_itself_does_not(client, body, rule):
    """orjson says where it stopped; a bare NaN or a number past float64 also gets why."""
    r = client.post("/api/v1/ops/neg", content=body, headers={"Content-Type": "application/json"})
    err = r.json()["error"]
    assert r.status_code == 422 and err["code"] == "invalid_json" and rule in err["message"]
    plain = client.post("/api/v1/ops/neg", content=b"{nope",
                        headers={"Content-Type": "application/json"}).json()["error"]
    assert "NaN" not in plain["message"] and "float64" not in plain["message"]
