"""No answer of the app carries a connection-specific header (RFC 9113 §8.2.2: HTTP/2
forbids Connection, Keep-Alive, Proxy-Connection, Transfer-Encoding and Upgrade, and a
message with one is malformed), on every route, the training event stream included
(sse-starlette set ``Connection: keep-alive``; when the client asked to close, the stream
said ``keep-alive`` and uvicorn's ``close`` both).

What the wire shows on HTTP/1.1 is then exactly the server's (uvicorn's) framing:
``transfer-encoding: chunked`` on a body of unknown length (the stream), ``connection:
close`` once, when the client sent ``Connection: close``. In-process, the app's own
``http.response.start`` messages carry none of them.
"""

from __future__ import annotations

import socket

import anyio
import httpx
import pytest
from httpx import ASGITransport

from glassllm_service.app import create_app
from glassllm_service.settings import Settings

HOP = ("connection", "keep-alive", "proxy-connection", "transfer-encoding", "upgrade")
TINY = {"d_model": 8, "n_layers": 1, "n_heads": 2, "n_kv_heads": 1, "ffn_hidden": 8,
        "max_seq_len": 8}
JSON = {"Content-Type": "application/json"}


def requests(name: str) -> list[tuple[str, str, dict]]:
    """(method, path, httpx kwargs) for every route, answers and refusals of every kind."""
    gets = ["/", "/docs", "/openapi.json", "/healthz", "/readyz", "/metrics", "/api/v1/ops",
            "/api/v1/ops/add", "/api/v1/examples", "/api/v1/lessons", "/dist/",
            f"/dist/{name}", "/static/index.html", "/docs-assets/swagger-ui.css",
            "/docs/contract", "/docs/contract/", "/docs/contract/http",
            "/api/v1/ops/nope", "/dist/nope.whl", "/docs/contract/nope", "/no/such/route"]
    out = [(m, p, {}) for p in gets for m in ("GET", "HEAD")]
    out += [("GET", f"/dist/{name}", {"headers": {"Range": "bytes=0-9"}}),
            ("GET", f"/dist/{name}", {"headers": {"Range": "bytes=99999999-"}}),
            ("PUT", "/api/v1/ops/add", {}),
            ("OPTIONS", "/api/v1/ops/add", {})]
    posts = {"/api/v1/ops/add": {"inputs": {"a": [1.0], "b": [2.0]}},
             "/api/v1/ops/neg": {"inputs": {"a": [[1.0], [2.0, 3.0]]}},
             "/api/v1/ops/matmul": {"inputs": {"a": [[1.0, 2.0]], "b": [[1.0, 2.0]]}},
             "/api/v1/ops/nope": {"inputs": {}},
             "/api/v1/eval": {"expression": "(x * x).sum()", "variables": {"x": [1.0]}},
             "/api/v1/batch": {"cases": [{"op": "neg", "inputs": {"a": [1.0]}}]},
             "/api/v1/check": {"op": "neg", "inputs": {"a": [1.0]},
                               "claimed": {"value": [-1.0]}},
             "/api/v1/model/attention": {"prompt": "The cat", "seed": 0, "model": TINY}}
    for path, body in posts.items():
        out.append(("POST", path, {"json": body}))
    out += [("POST", "/api/v1/ops/add", {"content": b"{}", "headers": {"Content-Type": "text"}}),
            ("POST", "/api/v1/ops/add", {"content": b"", "headers": JSON}),
            ("POST", "/api/v1/ops/add", {"content": b"[" * 100, "headers": JSON}),
            ("POST", "/api/v1/ops/add",          # 413 from the declared length, body unread
             {"content": b" " * (8 * 1024 * 1024 + 1), "headers": JSON}),
            ("POST", "/api/v1/train", {"json": {"steps": 0}})]
    return out


def assert_no_hop_by_hop(r: httpx.Response, what: str) -> None:
    for name in HOP:
        assert name not in r.headers, (what, r.status_code, name, r.headers.get_list(name))


@pytest.fixture(scope="module")
def wheel(url):
    return httpx.get(f"{url}/dist/").json()["wheels"][0]


@pytest.mark.parametrize("close", [False, True], ids=["keep-alive", "client-closes"])
def test_no_answer_on_the_wire_carries_a_hop_by_hop_header_of_the_app(url, wheel, close):
    seen = set()
    for method, path, kw in requests(wheel):
        headers = {**kw.pop("headers", {}), **({"Connection": "close"} if close else {})}
        r = httpx.request(method, url + path, headers=headers, **kw)
        seen.add(r.status_code)
        assert r.headers.get_list("keep-alive") == [] and "proxy-connection" not in r.headers
        assert "upgrade" not in r.headers
        # uvicorn's framing: chunked only for a body of unknown length (none here)
        assert "transfer-encoding" not in r.headers, (method, path)
        # uvicorn's connection: close, once, and only when the client asked for it
        assert r.headers.get_list("connection") == (["close"] if close else []), (method, path)
    assert {200, 206, 307, 400, 404, 405, 413, 415, 416, 422} <= seen


@pytest.mark.parametrize("close", [False, True], ids=["keep-alive", "client-closes"])
def test_the_training_stream_carries_only_the_servers_framing(url, close):
    body = {"model": TINY, "steps": 2, "every": 1, "batch": 1, "seed": 1}
    headers = {"Connection": "close"} if close else {}
    with httpx.stream("POST", f"{url}/api/v1/train", json=body, headers=headers,
                      timeout=60) as r:
        assert r.status_code == 200 and r.headers["content-type"].startswith("text/event-stream")
        text = "".join(r.iter_text())
    assert "event: done" in text
    assert r.headers.get_list("connection") == (["close"] if close else [])
    assert r.headers.get_list("transfer-encoding") == ["chunked"]     # uvicorn's, HTTP/1.1
    assert "keep-alive" not in r.headers and "upgrade" not in r.headers
    assert r.headers["x-accel-buffering"] == "no" and r.headers["cache-control"] == "no-store"


def test_a_413_leaves_the_connection_usable():
    """The 413's Connection: close is gone: the rest of the refused body is uvicorn's to read
    and drop (RFC 9112 §9.3), and the next request on the same connection is answered."""
    from sandbox_server import running_sandbox
    with running_sandbox(env={"GLASSLLM_MAX_BODY_BYTES": "1000"}) as url:
        port = int(url.rsplit(":", 1)[1])
        with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
            body = b'{"inputs": {"a": [' + b"1.0, " * 2000 + b'1.0]}}'
            s.sendall(b"POST /api/v1/ops/neg HTTP/1.1\r\nHost: x\r\nContent-Type:"
                      b" application/json\r\nContent-Length: %d\r\n\r\n" % len(body) + body)
            s.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
            got = b""
            while got.count(b"HTTP/1.1 ") < 2 or not got.endswith(b'{"status":"ok"}'):
                chunk = s.recv(65536)
                assert chunk, got
                got += chunk
    first, second = got.split(b"HTTP/1.1 ")[1:]
    assert first.startswith(b"413 ") and b"body_too_large" in first
    assert b"connection:" not in first.lower()
    assert second.startswith(b"200 ")


class Recorder:
    """The app's own response-start messages (in-process, no server between)."""

    def __init__(self, app):
        self.app, self.starts = app, []

    async def __call__(self, scope, receive, send):
        async def record(message):
            if message["type"] == "http.response.start":
                self.starts.append((scope["path"], [k.decode().lower()
                                                    for k, _ in message["headers"]]))
            await send(message)
        await self.app(scope, receive, record)


def test_the_apps_own_messages_carry_none_of_them():
    """In-process: what the app hands the server (CORS and the token on, so their answers
    are in too), for every request above and a training stream."""
    app = Recorder(create_app(Settings(cors_origins="https://a.example", api_token="t")))
    anyio.run(_every_request, app)
    assert len(app.starts) > 60
    for path, names in app.starts:
        assert not set(names) & set(HOP), (path, names)


async def _every_request(app: Recorder) -> None:
    transport = ASGITransport(app=app)
    auth = {"Authorization": "Bearer t", "Origin": "https://a.example"}
    async with httpx.AsyncClient(transport=transport, base_url="http://sandbox") as c:
        name = (await c.get("/dist/")).json()["wheels"][0]
        for method, path, kw in requests(name):
            await c.request(method, path, headers={**auth, **kw.pop("headers", {})}, **kw)
        await c.post("/api/v1/ops/add", json={})                     # 401: no token
        await c.options("/api/v1/ops/add", headers={                 # a CORS preflight
            "Origin": "https://a.example", "Access-Control-Request-Method": "POST"})
        r = await c.post("/api/v1/train", headers=auth, json={
            "model": TINY, "steps": 1, "every": 1, "batch": 1})
        assert r.status_code == 200 and "event: done" in r.text
