"""glassllm.apps.client against a real sandbox, and its retry / error logic against
stubbed transports (httpx.MockTransport)."""

from __future__ import annotations

import ast
import asyncio
import contextlib
import email.utils
import http.server
import re
import socket
import subprocess
import sys
import threading
from pathlib import Path

import httpx
import numpy as np
import pytest
from sandbox_server import running_sandbox

from glassllm.apps import client as gc
from glassllm.apps import client_errors, exercise_client, mystery_client
from glassllm.apps.client import (
    AsyncSandbox,
    BadAnswerError,
    BadRequestError,
    BusyError,
    ClientError,
    InvalidInputError,
    InvalidURLError,
    NoAnswerError,
    NotFoundError,
    Sandbox,
    SandboxError,
    ServerError,
    TimedOutError,
    TooLargeError,
    UnreachableError,
    UnsupportedMediaTypeError,
)

EDGES = np.array([np.nan, np.inf, -np.inf, -0.0, 0.0, 5e-324, -5e-324,
                  2.2250738585072014e-308, np.finfo(np.float64).max,
                  -np.finfo(np.float64).max, 0.1, 1 / 3])


@pytest.fixture(scope="module")
def url():
    with running_sandbox(env={"GLASSLLM_MAX_ARRAY_ELEMENTS": "100000"}) as u:
        yield u


@pytest.fixture
def sb(url):
    with Sandbox(url) as s:
        yield s


@pytest.mark.parametrize("base64_min", [1, 10**9], ids=["base64", "json"])
def test_round_trip_is_bit_exact_for_edge_values(url, base64_min):
    """mul(a, ones): the value and b's gradient are `a`, every bit (H3): NaN, ±Infinity,
    -0.0, subnormals, the largest finite float, in both wire forms."""
    with Sandbox(url, base64_min=base64_min) as sb:
        r = sb.op("mul", {"a": EDGES, "b": np.ones_like(EDGES)})
    assert r.value.dtype == np.float64
    assert r.value.tobytes() == EDGES.tobytes()
    assert r.grads["b"].tobytes() == EDGES.tobytes()
    assert r.grads["a"].tobytes() == np.ones_like(EDGES).tobytes()
    assert (r.value + 1)[3] == 1.0                   # numbers, not strings: "+ 1" works


def test_base64_and_json_answers_are_identical(url):
    rng = np.random.default_rng(1)
    a, b = rng.standard_normal((16, 9)), rng.standard_normal((9, 7))
    with Sandbox(url, base64_min=1) as s1, Sandbox(url, base64_min=10**9) as s2:
        r1, r2 = s1.op("matmul", {"a": a, "b": b}), s2.op("matmul", {"a": a, "b": b})
    # bit for bit: the sandbox runs np.matmul on C-ordered float64 arrays of these shapes,
    # as `a @ b` here does, on the same machine (the same BLAS kernel)
    assert r1.value.tobytes() == r2.value.tobytes() == (a @ b).tobytes()
    for k in ("a", "b"):
        assert r1.grads[k].tobytes() == r2.grads[k].tobytes()


def test_eval_ops_examples(sb):
    r = sb.eval("(x * x).sum()", {"x": np.array([1.0, -2.0])})
    assert float(r.value) == 5.0 and r.value.shape == () and r.grads["x"].tolist() == [2.0, -4.0]
    assert [n["op"] for n in r.raw["nodes"]][-1] == "tsum"
    names = {o["name"] for o in sb.ops()}
    assert {"matmul", "softmax", "transformer_block"} <= names
    assert all("value" in e["expected"] for e in sb.examples())


def test_warnings_come_back(sb):
    r = sb.op("div", {"a": [1.0, 0.0], "b": [0.0, 0.0]}, requires_grad=[])
    assert r.value.tolist()[0] == np.inf and np.isnan(r.value[1]) and r.grads == {}
    assert any("divide by zero" in w for w in r.warnings)


def test_typed_errors_from_the_live_sandbox(sb):
    with pytest.raises(NotFoundError) as e:
        sb.op("matmull", {"a": 1.0})
    assert (e.value.status, e.value.code) == (404, "unknown_op")
    assert "matmul" in e.value.body["close"]
    with pytest.raises(InvalidInputError) as e:
        sb.op("mul", {"a": [1.0], "b": "one"})
    assert (e.value.status, e.value.input, e.value.op) == (422, "b", "mul")
    with pytest.raises(BadRequestError) as e:
        sb.op("matmul", {"a": np.ones((2, 3)), "b": np.ones((2, 3))})
    assert e.value.status == 400 and e.value.code in ("shape_error", "numpy_error")
    with pytest.raises(TooLargeError) as e:
        sb.op("neg", {"a": np.ones(100_001)})            # base64: refused from its shape
    assert e.value.status == 413 and e.value.input == "a"
    assert isinstance(e.value, ClientError) and isinstance(e.value, SandboxError)


def _stub(*responses):
    calls = []

    def handler(request: httpx.Request) -> httpx.Response:
        calls.append(request)
        return responses[min(len(calls), len(responses)) - 1]
    return httpx.MockTransport(handler), calls


def _error(status, code="x", **headers):
    return httpx.Response(status, headers=headers, json={"error": {
        "status": status, "code": code, "message": "m", "op": None, "input": "a"}})


@pytest.mark.parametrize("status, cls", [
    (400, BadRequestError), (404, NotFoundError), (413, TooLargeError),
    (415, UnsupportedMediaTypeError), (422, InvalidInputError), (409, ClientError),
    (500, ServerError), (502, ServerError)])
def test_every_status_has_its_exception(status, cls):
    transport, _ = _stub(_error(status, "some_code"))
    with Sandbox("http://sandbox", transport=transport) as sb, pytest.raises(cls) as e:
        sb.op("neg", {"a": 1.0})
    assert type(e.value) is cls
    assert (e.value.status, e.value.code, e.value.input, e.value.message) == \
        (status, "some_code", "a", "m")


def test_a_body_that_is_not_the_sandboxs_still_gives_a_typed_error():
    transport, _ = _stub(httpx.Response(502, text="<html>Bad gateway</html>"))
    with Sandbox("http://sandbox", transport=transport) as sb, pytest.raises(ServerError) as e:
        sb.ops()
    assert (e.value.status, e.value.code) == (502, "http_error")
    assert "Bad gateway" in e.value.message


def test_503_is_retried_after_retry_after(monkeypatch):
    slept = []
    monkeypatch.setattr(gc.time, "sleep", slept.append)
    monkeypatch.setattr(gc.random, "uniform", lambda lo, hi: hi)       # the largest jitter
    ok = httpx.Response(200, json={"op": "neg", "value": -1.0, "shape": [], "grads": {},
                                   "warnings": []})
    transport, calls = _stub(_error(503, "busy", **{"Retry-After": "2"}),
                             _error(503, "busy", **{"Retry-After": "1"}), ok)
    with Sandbox("http://sandbox", transport=transport) as sb:
        assert float(sb.op("neg", {"a": 1.0}).value) == -1.0
    assert len(calls) == 3
    assert slept == [pytest.approx(2 + 0.25), pytest.approx(1 + 0.15)]   # + 10 % + 0.05


def test_retry_after_as_an_http_date(monkeypatch):
    now = 1_800_000_000.0                              # the client's clock, held still
    when = email.utils.formatdate(now + 3, usegmt=True)
    r = httpx.Response(503, headers={"Retry-After": when})
    monkeypatch.setattr(gc.random, "uniform", lambda lo, hi: 0.0)
    monkeypatch.setattr(gc.time, "time", lambda: now)
    assert gc._retry_delay(r, 0) == 3.0


def test_503_retries_are_bounded_in_number_and_time(monkeypatch):
    monkeypatch.setattr(gc.time, "sleep", lambda s: None)
    transport, calls = _stub(_error(503, "busy", **{"Retry-After": "1"}))
    with Sandbox("http://sandbox", transport=transport, retries=2) as sb, \
            pytest.raises(BusyError):
        sb.ops()
    assert len(calls) == 3                               # the first try and 2 retries
    transport, calls = _stub(_error(503, "busy", **{"Retry-After": "100"}))
    with Sandbox("http://sandbox", transport=transport, retry_time=30) as sb, \
            pytest.raises(BusyError):
        sb.ops()
    assert len(calls) == 1                               # 100 s would pass the 30 s budget


def test_a_4xx_is_never_retried():
    transport, calls = _stub(_error(422))
    with Sandbox("http://sandbox", transport=transport) as sb, pytest.raises(InvalidInputError):
        sb.ops()
    assert len(calls) == 1


def test_url_falls_back_to_glassllm_url_and_token_is_sent(monkeypatch):
    monkeypatch.setenv("GLASSLLM_URL", "http://example.test:9/")
    seen = []
    transport = httpx.MockTransport(lambda r: seen.append(r) or httpx.Response(
        200, json={"ops": []}))
    with Sandbox(token="t0k", transport=transport) as sb:
        assert sb.url == "http://example.test:9" and sb.ops() == []
    assert str(seen[0].url) == "http://example.test:9/api/v1/ops"
    assert seen[0].headers["authorization"] == "Bearer t0k"


def test_connection_is_reused(sb):
    for _ in range(3):
        sb.op("neg", {"a": 1.0})
    pool = sb._http._transport._pool
    assert len(pool.connections) == 1


def test_async_sandbox(url):
    async def go():
        async with AsyncSandbox(url) as sb:
            rs = await asyncio.gather(sb.op("neg", {"a": EDGES}),
                                      sb.eval("x.sum()", {"x": [1.0, 2.0]}))
            with pytest.raises(NotFoundError):
                await sb.op("nope", {})
            return rs
    r1, r2 = asyncio.run(go())
    # JSON's "NaN" has no sign bit (base64 keeps it); every other bit pattern is exact
    np.testing.assert_array_equal(r1.value, -EDGES)
    assert np.signbit(r1.value[3:5]).tolist() == [False, True] and float(r2.value) == 3.0


def test_batch_and_check_through_the_client(sb):
    res = sb.batch([{"op": "neg", "inputs": {"a": np.arange(100.0)}},
                    {"op": "neg", "inputs": {"a": "x"}},
                    {"expression": "x.sum()", "variables": {"x": [1.0, 2.0]}}])
    assert res[0].value.tolist() == (-np.arange(100.0)).tolist()
    assert isinstance(res[1], InvalidInputError) and res[1].input == "a"
    assert float(res[2].value) == 3.0
    report = sb.check("mul", {"a": [1.0, 2.0], "b": [3.0, 4.0]}, grads={"a": [3.0, 5.0]},
                      reveal=False)
    assert report["passed"] is False
    assert report["grads"]["a"]["mask"].tolist() == [False, True]
    assert "max_abs_err" not in report["grads"]["a"]


def test_paths_and_check_modes_through_the_client(sb):
    """Tied weights: w's gradient split by its two readers comes back as float64 arrays
    (a 200-element w travels as base64) that add up to w's gradient; check's modes ride
    along as asked."""
    w = np.random.default_rng(4).normal(size=(50, 4))
    r = sb.eval("(embedding(w, ids) @ w.T).sum()", {"w": w, "ids": [0, 3]}, paths=True,
                check={"modes": ["taylor", "adjoint"], "float32": True})
    (entry,) = r.paths
    parts = [e["grad"] for e in entry["edges"]]
    assert all(isinstance(p, np.ndarray) and p.shape == (50, 4) for p in parts)
    np.testing.assert_allclose(sum(parts), r.grads["w"], rtol=1e-13, atol=1e-13)
    assert r.raw["check"]["float32"] and r.raw["check"]["adjoint"]["passed"]
    assert sb.eval("(w * 2.0).sum()", {"w": [1.0]}).paths is None


async def _async_paths(url):
    async with AsyncSandbox(url) as asb:
        return await asb.eval("x * x", {"x": [1.0, 2.0]}, paths=True)


def test_paths_through_the_async_client(url):
    r = asyncio.run(_async_paths(url))
    assert [e["input"] for e in r.paths[0]["edges"]] == ["a", "b"]
    assert r.paths[0]["edges"][0]["grad"].tolist() == [1.0, 2.0]


def test_the_client_imports_neither_the_service_nor_fastapi():
    code = ("import sys, glassllm.apps.client; bad = [m for m in sys.modules if m.split('.')[0] in"
            " ('service', 'fastapi', 'starlette', 'pydantic')]; print(bad)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_without_orjson_the_stdlib_writes_the_same_exact_json():
    code = ("import sys; sys.modules['orjson'] = None\n"
            "from glassllm import client as c\n"
            "body = c.to_wire({'a': [-0.0, 5e-324, float('nan'), 1.7976931348623157e308]})\n"
            "print(c._dumps(body).decode()); print(c._loads(c._dumps(body)) == body)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ['{"a":[-0.0,5e-324,"NaN",1.7976931348623157e+308]}', "True"]


def test_without_pybase64_the_stdlib_decodes_the_same_bytes():
    code = ("import sys; sys.modules['pybase64'] = None\n"
            "import numpy as np; from glassllm import wire\n"
            "a = np.array([np.nan, -0.0, 5e-324, 1.7976931348623157e308])\n"
            "e = wire.encode_base64(a)\n"
            "print(wire.b64decode.__module__, e['base64'],"
            " wire.coerce('tensor', 'x', e).tobytes() == a.tobytes())")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["base64", "AAAAAAAA+H8AAAAAAAAAgAEAAAAAAAAA////////738=", "True"]


def test_without_httpx_the_import_says_what_to_install():
    code = ("import sys; sys.modules['httpx'] = None\n"
            "try:\n    import glassllm.apps.client\nexcept ImportError as e:\n    print(e)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert "pip install 'glassllm[client]'" in out.stdout


def test_uint64_ids_past_int64_are_refused_before_sending_at_any_size():
    """H3: the 64-element uint64 ids travel as base64, the 2-element ones as JSON; neither may
    become id -1 (the last row). The binary form raises before any request, naming the rule."""
    transport, calls = _stub(httpx.Response(200, json={}))
    w = np.arange(15.0).reshape(5, 3)
    ids = np.r_[np.zeros(63, np.uint64), np.uint64(2**64 - 1)]
    with Sandbox("http://sandbox", transport=transport) as sb, \
            pytest.raises(ValueError, match=r"unsigned values above 2\*\*63-1 do not fit int64"):
        sb.op("embedding", {"weight": w, "ids": ids})
    assert calls == []


def test_uint64_ids_past_int64_are_refused_by_the_live_sandbox_as_json(sb):
    """H3, H4: the small array goes as JSON numbers and the sandbox refuses it (422, ids)."""
    with pytest.raises(InvalidInputError) as e:
        sb.op("embedding", {"weight": np.ones((5, 3)),
                            "ids": np.array([0, 2**64 - 1], dtype=np.uint64)})
    assert e.value.input == "ids" and "outside int64" in e.value.message


def _ok(request: httpx.Request) -> httpx.Response:
    return httpx.Response(200, json={"op": "x", "value": 1.0, "shape": [], "grads": {},
                                     "warnings": []})


@pytest.mark.parametrize("name, path", [
    ("neg", "/api/v1/ops/neg"),
    ("../eval", "/api/v1/ops/..%2Feval"),
    ("softmax?x=1", "/api/v1/ops/softmax%3Fx%3D1"),
    ("neg#frag", "/api/v1/ops/neg%23frag"),
    ("a/b", "/api/v1/ops/a%2Fb"),
    ("..", "/api/v1/ops/%2E%2E"),
    (".", "/api/v1/ops/%2E"),
    ("a b", "/api/v1/ops/a%20b"),
])
def test_op_names_are_one_quoted_path_segment(name, path):
    """H2: `POST /api/v1/ops/{name}` — the name is one path segment, never a way to another
    route (``../eval``), a query (``?x=1``) or a fragment; sync and async alike."""
    calls: list[httpx.Request] = []
    transport = httpx.MockTransport(lambda r: calls.append(r) or _ok(r))
    with Sandbox("http://sandbox", transport=transport) as sb:
        sb.op(name, {"a": 1.0})

    async def go():
        async with AsyncSandbox("http://sandbox", transport=transport) as asb:
            await asb.op(name, {"a": 1.0})
    asyncio.run(go())
    assert len(calls) == 2
    for request in calls:
        assert request.url.raw_path == path.encode() and request.url.query == b""
        assert request.method == "POST"


def test_a_traversing_op_name_gets_the_live_sandboxs_404(sb):
    """H2, H4: "softmax?x=1" is an unknown op (its 404 suggests softmax), not softmax; "../eval"
    is a 404 too, never the eval route; ".." never reaches /api/v1."""
    with pytest.raises(NotFoundError) as e:
        sb.op("softmax?x=1", {"x": [1.0, 2.0]})
    assert e.value.code == "unknown_op" and "softmax?x=1" in e.value.message
    for name in ("../eval", "..", "."):
        with pytest.raises(NotFoundError) as e:
            sb.op(name, {"a": [1.0]})
        assert e.value.status == 404 and "/api/v1/eval" not in e.value.message


# -- every failure is a SandboxError naming the URL ------------------------------------------

def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def _http_server(status: int, body: bytes, content_type: str = "text/html"):
    """A real HTTP server on a free port answering every request with `status` and `body`
    (what a proxy in front of a sandbox answers when the sandbox is down)."""
    class Handler(http.server.BaseHTTPRequestHandler):
        def _answer(self):
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        do_GET = do_POST = _answer

        def log_message(self, *args):  # quiet
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


@contextlib.contextmanager
def _silent_listener():
    """A socket that accepts connections (the kernel's backlog) and never answers."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen(8)
        yield f"http://127.0.0.1:{s.getsockname()[1]}"


@contextlib.contextmanager
def _hanging_up():
    """A server that accepts each connection and closes it before answering."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    s.listen(8)
    stop = threading.Event()

    def serve():
        s.settimeout(0.1)
        while not stop.is_set():
            try:
                conn, _ = s.accept()
            except OSError:
                continue
            conn.recv(65536)
            conn.close()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{s.getsockname()[1]}"
    finally:
        stop.set()
        thread.join()
        s.close()


def test_nothing_listening_is_an_unreachable_error_naming_the_url():
    url = f"http://127.0.0.1:{_free_port()}"
    with Sandbox(url) as sb, pytest.raises(UnreachableError) as e:
        sb.op("neg", {"a": 1.0})
    assert isinstance(e.value, NoAnswerError) and isinstance(e.value, SandboxError)
    assert e.value.status is None and e.value.code == "unreachable"
    assert e.value.url == f"POST {url}/api/v1/ops/neg" and e.value.url in str(e.value)
    assert "is a sandbox running there" in str(e.value)
    assert isinstance(e.value.__cause__, httpx.ConnectError)

    async def go():
        async with AsyncSandbox(url) as sb:
            await sb.ops()
    with pytest.raises(UnreachableError, match=re.escape(f"(GET {url}/api/v1/ops)")):
        asyncio.run(go())


def test_sandbox_with_no_url_and_nothing_listening_says_how_to_start_one(monkeypatch):
    monkeypatch.delenv("GLASSLLM_URL", raising=False)
    monkeypatch.setattr(gc, "DEFAULT_URL", f"http://127.0.0.1:{_free_port()}")
    with Sandbox() as sb, pytest.raises(UnreachableError) as e:
        sb.ops()
    text = str(e.value)
    assert gc.DEFAULT_URL in text and "make run" in text and "glassllm-sandbox" in text
    assert "GLASSLLM_URL" in text and "Sandbox('http://host:port')" in text


def test_no_answer_in_time_is_a_timed_out_error_naming_the_url():
    with _silent_listener() as url, Sandbox(url, timeout=0.3) as sb, \
            pytest.raises(TimedOutError) as e:
        sb.eval("x.sum()", {"x": [1.0]})
    assert e.value.code == "timeout" and e.value.url == f"POST {url}/api/v1/eval"


def test_a_connection_closed_before_the_answer_is_a_no_answer_error():
    with _hanging_up() as url, Sandbox(url) as sb, pytest.raises(NoAnswerError) as e:
        sb.ops()
    assert e.value.status is None and url in str(e.value)


@pytest.mark.parametrize(("status", "cls"), [(502, ServerError), (200, BadAnswerError)])
def test_a_proxys_html_page_is_a_typed_error_naming_the_url(status, cls):
    page = b"<html><body><h1>502 Bad Gateway</h1>nginx</body></html>"
    with _http_server(status, page) as url, Sandbox(url) as sb, pytest.raises(cls) as e:
        sb.check("neg", {"a": [1.0]}, value=[-1.0])
    assert e.value.status == status and e.value.url == f"POST {url}/api/v1/check"
    assert "502 Bad Gateway" in e.value.message and "not" in e.value.message


def test_json_that_is_not_the_sandboxs_answer_is_a_bad_answer_error():
    with _http_server(200, b'{"hello": "proxy"}', "application/json") as url, \
            Sandbox(url) as sb, pytest.raises(BadAnswerError) as e:
        sb.op("neg", {"a": 1.0})
    assert e.value.code == "bad_answer" and "KeyError" in e.value.message


@pytest.mark.parametrize("url", ["localhost:8000", "ftp://127.0.0.1:8000", "http://", "::"])
def test_a_url_that_is_not_http_is_refused_by_the_constructor(url):
    with pytest.raises(InvalidURLError) as e:
        Sandbox(url)
    assert isinstance(e.value, SandboxError) and isinstance(e.value, ValueError)
    assert repr(url) in str(e.value)


def test_error_answers_name_the_url_too(url):
    with Sandbox(url) as sb, pytest.raises(NotFoundError) as e:
        sb.op("nope", {})
    assert e.value.url == f"POST {url}/api/v1/ops/nope" and e.value.url in str(e.value)
    with Sandbox(url) as sb:
        [refused] = sb.batch([{"op": "neg", "inputs": {"a": "x"}}])
    assert refused.url == f"POST {url}/api/v1/batch, cases[0]"


def test_all_is_sorted_and_is_every_public_name_the_module_defines():
    """`from glassllm.client import *` gives the API and nothing else; ruff's RUF022 order.
    The exceptions are defined in glassllm.apps.client_errors and given by the client, and
    so are an exercise's and a mystery's result types (glassllm.apps.exercise_client,
    glassllm.apps.mystery_client), which a caller holds, and `Result` with the wire
    helpers (glassllm.apps.client_types, where they live for the line budget); the mixins
    that add those calls to Sandbox stay inside."""
    tree = ast.parse(Path(gc.__file__).read_text())
    defined = set()
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            defined.add(node.name)
        elif isinstance(node, ast.Assign):
            defined |= {t.id for t in node.targets if isinstance(t, ast.Name)}
    defined |= {n for n in client_errors.__all__ if n[0].isupper() and n != "BY_STATUS"}
    defined |= {n for n in exercise_client.__all__ + mystery_client.__all__
                if not n.endswith("Calls")}
    defined |= {"BASE64_MIN_ELEMENTS", "Result", "from_wire", "to_wire"}
    public = {n for n in defined if not n.startswith("_")}
    assert set(gc.__all__) == public and len(gc.__all__) == len(public)
    kinds = [0 if n.isupper() else 1 if n[0].isupper() else 2 for n in gc.__all__]
    assert gc.__all__ == sorted(gc.__all__, key=lambda n: (kinds[gc.__all__.index(n)], n))
    assert all(getattr(gc, n) is not None for n in gc.__all__)
