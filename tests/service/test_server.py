"""The real sandbox: uvicorn in a subprocess on a free port, answering over HTTP (H2, H4-H6)."""

from __future__ import annotations

import itertools
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest
from sandbox_server import running_sandbox

pytestmark = pytest.mark.slow
JSON = {"content-type": "application/json"}


@pytest.fixture(scope="module")
def http(url):
    with httpx.Client(base_url=url, timeout=60) as c:
        yield c


def test_real_server_answers(http):
    assert http.get("/healthz").json() == {"status": "ok"}
    assert http.get("/readyz").json()["status"] == "ready"
    r = http.post("/api/v1/ops/repeat_kv", json={"inputs": {"x": [[[[1.0]], [[2.0]]]],
                                                            "repeats": 2}})
    assert r.json()["value"] == [[[[1.0]], [[1.0]], [[2.0]], [[2.0]]]]
    assert r.json()["grads"] == {"x": [[[[2.0]], [[2.0]]]]}
    assert "swagger-ui-bundle.js" in http.get("/docs").text
    assert http.get("/docs-assets/swagger-ui-bundle.js").status_code == 200
    assert http.get("/").headers["content-type"].startswith("text/html")


def test_real_server_answers_head_on_the_page(http):
    """H8 (QA pass 3, defect 7): HEAD / was 405; over real HTTP the body is dropped."""
    for path in ("/", "/static/js/main.js", "/docs", "/api/v1/ops"):
        r = http.head(path)
        assert r.status_code == 200 and r.content == b"", path
        assert int(r.headers["content-length"]) == len(http.get(path).content), path


def chunks(total: int, piece: bytes):
    """A streamed body of `total` bytes (no Content-Length: the server must count)."""
    yield b'{"inputs": {"a": ['
    for _ in range(total // len(piece)):
        yield piece


def hostile():
    zeros = b"0.0," * 25_000_000
    return [
        ("20 MiB body", "add", b'{"inputs": {"a": [' + b"1.0," * (5 * 2**20) + b'1]}}', 413,
         "request body"),
        ("20 MiB streamed", "add", chunks(20 * 2**20, b"1.0," * 4096), 413, "request body"),
        ("nesting 100 000 deep", "neg", b'{"inputs": {"a": ' + b"[" * 100_000 + b"]" * 100_000
         + b"}}", 422, "request body"),
        ("(20000, 1) + (1, 20000)", "add", b'{"inputs": {"a": ' + b"[" + b"[0.0]," * 19999
         + b'[0.0]], "b": [[' + b"0.0," * 19999 + b"0.0]]}}", 413, "a, b"),
        ("repeat_kv repeats 10**9", "repeat_kv",
         b'{"inputs": {"x": [[[[1.0]]]], "repeats": 1000000000}}', 413, "repeats"),
        ("matmul (5000, 5000) @ (5000, 5000)", "matmul",
         b'{"inputs": {"a": [[' + zeros[:40] + b"0.0]], " + b'"b": [' + zeros, 413, "request body"),
        ("ids 7 for V = 4", "embedding", b'{"inputs": {"weight": [[0.0], [0.0], [0.0], [0.0]],'
         b' "ids": [7]}}', 400, "ids"),
        ("ids NaN", "embedding", b'{"inputs": {"weight": [[0.0]], "ids": ["NaN"]}}', 422, "ids"),
        ("ids NaN literal", "embedding", b'{"inputs": {"weight": [[0.0]], "ids": [NaN]}}', 422,
         "request body"),
        ("mask of strings", "masked_fill", b'{"inputs": {"a": [1.0], "mask": ["x"], "value": 0}}',
         422, "mask"),
        ("__class__", "__class__", b'{"inputs": {}}', 404, "name"),
        ("../../etc/passwd", "..%2F..%2Fetc%2Fpasswd", b'{"inputs": {}}', 404, ""),
        ("grad_output wrong shape", "neg", b'{"inputs": {"a": [1.0, 2.0]}, "grad_output": [1.0]}',
         422, "grad_output"),
        ("empty body", "neg", b"", 422, "request body"),
    ]


CASES = hostile()


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_hostile_input_is_4xx_and_server_stays_healthy(http, case):
    _, op, body, status, named = case
    try:
        r = http.post(f"/api/v1/ops/{op}", content=body, headers=JSON)
    except httpx.RemoteProtocolError:       # the server may close while we are still sending
        r = None
    if r is not None:
        assert r.status_code == status, r.text[:300]
        assert "Traceback" not in r.text
        if named:
            e = r.json()["error"]
            assert named in (e["input"] or "") + e["message"]
    assert http.get("/healthz").status_code == 200
    ok = http.post("/api/v1/ops/neg", json={"inputs": {"a": [1.0]}})
    assert ok.json()["value"] == [-1.0]


def test_text_plain_is_415(http):
    r = http.post("/api/v1/ops/neg", content=b'{"inputs": {"a": 1}}',
                  headers={"content-type": "text/plain"})
    assert r.status_code == 415 and r.json()["error"]["input"] == "Content-Type"


@pytest.fixture(scope="module")
def roomy_url():
    with running_sandbox(env={"GLASSLLM_MAX_CONCURRENCY": "16"}) as u:
        yield u


def test_concurrency_8_threads_x_50_over_http(roomy_url, mixed_requests):
    url = roomy_url
    reqs = list(itertools.islice(itertools.cycle(mixed_requests), 400))

    def call(req):
        with httpx.Client(base_url=url, timeout=60) as c:
            out = []
            for name, body in req:
                r = c.post(f"/api/v1/ops/{name}", json=body)
                out.append((r.status_code, r.text))
            return out

    batches = [reqs[i::8] for i in range(8)]
    serial = [call(b) for b in batches]
    with ThreadPoolExecutor(8) as pool:
        parallel = list(pool.map(call, batches))
    assert parallel == serial
