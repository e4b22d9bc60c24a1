"""Edges a hostile client found (fresh-eyes QA of the class-load and training work):
a client that hangs up mid-body is a 499, not a 500; a percent-decoded path cannot forge
an access-log line; training counts are strict JSON integers (H3)."""

from __future__ import annotations

import asyncio

import pytest
from fastapi.testclient import TestClient

from glassllm_service.app import create_app
from glassllm_service.settings import Settings


def test_a_client_that_hangs_up_mid_body_is_a_499_not_a_500(access_lines):
    app = create_app(Settings())
    incoming = [{"type": "http.request", "body": b'{"inputs":', "more_body": True},
                {"type": "http.disconnect"}]
    sent: list[dict] = []

    async def receive() -> dict:
        return incoming.pop(0) if incoming else {"type": "http.disconnect"}

    async def send(message: dict) -> None:
        sent.append(message)

    scope = {"type": "http", "method": "POST", "path": "/api/v1/ops/mul", "raw_path":
             b"/api/v1/ops/mul", "query_string": b"", "root_path": "", "scheme": "http",
             "http_version": "1.1", "asgi": {"version": "3.0"}, "client": ("127.0.0.1", 9),
             "server": ("testserver", 80),
             "headers": [(b"content-type", b"application/json"), (b"content-length", b"100")]}
    asyncio.run(app(scope, receive, send))
    start = next(m for m in sent if m["type"] == "http.response.start")
    assert start["status"] == 499
    assert access_lines == [access_lines[0]] and " op=mul 499 " in access_lines[0]


def test_a_path_cannot_forge_an_access_log_line(access_lines):
    with TestClient(create_app()) as c:
        assert c.get("/api/v1/ops/x%0a127.0.0.1%20GET%20/fake%20200").status_code == 404
    assert len(access_lines) == 1
    assert "\n" not in access_lines[0]
    assert "/api/v1/ops/x\\n127.0.0.1 GET /fake 200" in access_lines[0]


@pytest.mark.parametrize("body,field", [
    ({"steps": True}, "steps"), ({"steps": "20"}, "steps"), ({"seed": 1.0}, "seed"),
    ({"batch": False}, "batch"), ({"lr": True}, "lr"),
    ({"model": {"d_model": 64.0}}, "model.d_model"), ({"model": {"n_heads": "4"}}, "model.n_heads"),
])
def test_training_counts_are_strict_json_integers(body, field):
    with TestClient(create_app()) as c:
        r = c.post("/api/v1/train", json=body)
    assert r.status_code == 422, r.text[:200]
    err = r.json()["error"]
    assert err["code"] == "invalid_request" and err["input"] == field


@pytest.mark.parametrize("seed", [True, "3", 2.0])
def test_an_attention_seed_is_a_strict_integer(seed):
    with TestClient(create_app()) as c:
        r = c.post("/api/v1/model/attention", json={"prompt": "ab", "seed": seed})
    assert r.status_code == 422 and r.json()["error"]["input"] == "seed"


def _asgi_post(app, path: str, messages: list[dict], headers: list) -> tuple[int, bytes]:
    incoming, sent = list(messages), []

    async def receive() -> dict:
        return incoming.pop(0) if incoming else {"type": "http.disconnect"}

    async def send(message: dict) -> None:
        sent.append(message)

    scope = {"type": "http", "method": "POST", "path": path, "raw_path": path.encode(),
             "query_string": b"", "root_path": "", "scheme": "http", "http_version": "1.1",
             "asgi": {"version": "3.0"}, "client": ("127.0.0.1", 9),
             "server": ("testserver", 80), "headers": headers}
    asyncio.run(app(scope, receive, send))
    start = next(m for m in sent if m["type"] == "http.response.start")
    return start["status"], b"".join(m.get("body", b"") for m in sent
                                      if m["type"] == "http.response.body")


def test_a_body_in_several_messages_is_read_whole():
    """read_body joins the ASGI messages of a chunked upload (no Content-Length)."""
    import orjson
    parts = [b'{"inputs": {"a": [1.0, ', b'2.0], ', b'"b": [3.0, 4.0]}}']
    messages = [{"type": "http.request", "body": p, "more_body": i < 2}
                for i, p in enumerate(parts)]
    status, body = _asgi_post(create_app(Settings()), "/api/v1/ops/mul", messages,
                              [(b"content-type", b"application/json")])
    assert status == 200
    answer = orjson.loads(body)
    assert answer["value"] == [3.0, 8.0] and answer["grads"] == {"a": [3.0, 4.0],
                                                                 "b": [1.0, 2.0]}


def test_a_chunked_body_over_the_limit_is_413_as_it_arrives():
    messages = [{"type": "http.request", "body": b"[" * 60, "more_body": True},
                {"type": "http.request", "body": b"[" * 60, "more_body": True}]
    status, body = _asgi_post(create_app(Settings(max_body_bytes=100)), "/api/v1/ops/mul",
                              messages, [(b"content-type", b"application/json")])
    assert status == 413 and b"exceeds 100 bytes" in body


@pytest.mark.parametrize("headers, body_is_gzip, rule, named", [
    ({"content-type": "application/json; charset=utf-16"}, False,
     "JSON must be UTF-8 (RFC 8259); got charset='utf-16'", "Content-Type"),
    ({"content-type": "application/json", "content-encoding": "gzip"}, True,
     "Content-Encoding 'gzip' is not accepted; send the body uncompressed", "Content-Encoding"),
])
def test_a_body_in_another_charset_or_compressed_is_415_not_invalid_json(
        headers, body_is_gzip, rule, named):
    """Was: both read as UTF-8 JSON text and answered 422 "not valid JSON"."""
    import gzip
    body = b'{"inputs": {"a": [1.0, 2.0]}}'
    with TestClient(create_app()) as c:
        for path in ("/api/v1/ops/neg", "/api/v1/eval"):
            r = c.post(path, content=gzip.compress(body) if body_is_gzip else body,
                       headers=headers)
            assert r.status_code == 415, r.text
            err = r.json()["error"]
            assert err["message"] == rule and err["input"] == named
        if body_is_gzip:
            assert r.headers["accept-encoding"] == "identity"


@pytest.mark.parametrize("headers", [
    {"content-type": "application/json; charset=UTF-8"},
    {"content-type": 'application/json;charset="utf-8"'},
    {"content-type": "application/json", "content-encoding": "identity"},
])
def test_utf8_and_identity_are_accepted(headers):
    with TestClient(create_app()) as c:
        r = c.post("/api/v1/ops/neg", content=b'{"inputs": {"a": [1.0, 2.0]}}', headers=headers)
    assert r.status_code == 200 and r.json()["value"] == [-1.0, -2.0]
