"""One access-log line per request, an ``X-Request-ID`` on every answer, and the request
metrics. A plain ASGI middleware: it times the whole answer, 401s, 405s and
CORS preflights included, and never buffers a body.

The line (``GLASSLLM_LOG_FORMAT=plain``, the default)::

    127.0.0.1 POST /api/v1/ops/softmax op=softmax 200 1.8ms rid=5f0c…

or one JSON object (``json``) with the keys client, method, path, route, op, status,
duration_ms, request_id. ``GLASSLLM_ACCESS_LOG=0`` turns the line off. The request id is
the client's ``X-Request-ID`` when it is 1–128 characters of ``[A-Za-z0-9._:-]``, else a
new uuid4 hex; it is echoed in the response and available as ``scope["state"]["request_id"]``.
"""

from __future__ import annotations

import logging
import re
import sys
import time
import uuid
from typing import Any

import orjson

from glassllm.sandbox import registry
from glassllm_service import metrics
from glassllm_service.allow import template_of

log = logging.getLogger("glassllm.access")
_SAFE_ID = re.compile(rb"[A-Za-z0-9._:-]{1,128}")


def route_labels(scope: dict, routes: list | None = None) -> tuple[str, str]:
    """(route template, op) from bounded sets: the matched route's path template (a
    mount's prefix; "unmatched" when nothing matched) and a registry op name, "eval" or "".

    Where the router named no route (FastAPI names only its own: a mount, /openapi.json,
    a 401 answered before routing), the template is looked up in ``routes``."""
    route = scope.get("route")
    template = getattr(route, "path", None)
    name = scope.get("path_params", {}).get("name")
    if template is None and routes is not None:
        template = template_of(routes, scope.get("path", ""))
        if template == "/api/v1/ops/{name}":
            name = scope.get("path", "").removeprefix("/api/v1/ops/")
    template = template or "unmatched"
    if template == "/api/v1/ops/{name}" and scope.get("method") == "POST" and name in registry.OPS:
        return f"/api/v1/ops/{name}", name  # the op's documented path (one route runs all)
    if template.startswith("/api/v1/ops/"):
        op = name if name in registry.OPS else template.removeprefix("/api/v1/ops/")
        op = op if op in registry.OPS else ""
    else:
        op = "eval" if template == "/api/v1/eval" else ""
    return template, op


def _request_id(scope: dict) -> str:
    for key, value in scope.get("headers", ()):
        if key == b"x-request-id" and _SAFE_ID.fullmatch(value):
            return value.decode()
    return uuid.uuid4().hex


def configure_logging(fmt: str) -> None:
    """INFO lines of the access logger to stderr (uvicorn configures only its own loggers)."""
    log.setLevel(logging.INFO)
    log.propagate = False
    if not any(getattr(h, "glassllm", False) for h in log.handlers):
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("%(message)s"))
        handler.glassllm = True
        log.addHandler(handler)


def printable(text: str) -> str:
    """`text` with control and other non-printable characters escaped (``\\n``, ``\\x1b``):
    a percent-decoded path must not write a second, forged line into the access log."""
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)


class Observability:
    """The ASGI middleware; see the module docstring."""

    def __init__(self, app: Any, access_log: bool = True, fmt: str = "plain",
                 record_metrics: bool = True, routes: list | None = None) -> None:
        self.app, self.access_log, self.json = app, access_log, fmt == "json"
        self.routes = routes
        self.record_metrics = record_metrics
        if access_log:
            configure_logging(fmt)

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        rid = _request_id(scope)
        scope.setdefault("state", {})["request_id"] = rid
        t0 = time.perf_counter()
        status = 500

        async def send_with_id(message: dict) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
                headers = [(k, v) for k, v in message.get("headers", ())
                           if k.lower() != b"x-request-id"]
                message = {**message, "headers": [*headers, (b"x-request-id", rid.encode())]}
            await send(message)

        try:
            await self.app(scope, receive, send_with_id)
        finally:
            self.done(scope, status, time.perf_counter() - t0, rid)

    def done(self, scope: dict, status: int, seconds: float, rid: str) -> None:
        route, op = route_labels(scope, self.routes)
        if self.record_metrics and route != "/metrics":
            metrics.record_request(route, op, status, seconds)
        if not self.access_log:
            return
        client = scope.get("client")
        host = client[0] if client else "-"
        path = printable(scope.get("path", ""))
        if self.json:
            log.info(orjson.dumps({"client": host, "method": scope["method"], "path": path,
                                   "route": route, "op": op, "status": status,
                                   "duration_ms": round(seconds * 1000, 3),
                                   "request_id": rid}).decode())
        else:
            log.info("%s %s %s op=%s %d %.1fms rid=%s", host, scope["method"], path,
                     op or "-", status, seconds * 1000, rid)
