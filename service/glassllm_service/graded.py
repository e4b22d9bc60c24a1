"""A graded session (``GLASSLLM_GRADED_SESSION=1``, course mode only, docs/modes.md): the
routes that would hand out answers or packages are off; exercises and checks stay on.

Off, answered 403 ``off_in_graded_session`` before any routing or body reading:

- ``POST /api/v1/ops/{name}``, ``POST /api/v1/eval``, ``POST /api/v1/batch``: the plain
  compute routes, and with eval the finite-difference checks it runs; ``POST
  /api/v1/torch``, whose script holds the case's numbers;
- ``/dist/...`` (the sandbox's own wheel) and ``/simple/...`` (the path of a PEP 503
  package index: none is served, and none may be).

They leave ``/openapi.json`` too (`prune`), so a generated client does not offer them.
"""

from __future__ import annotations

from typing import Any

from glassllm_service.http_errors import ApiError, error_response

COMPUTE = ("/api/v1/eval", "/api/v1/batch", "/api/v1/torch")
PREFIXES = ("/dist", "/simple")


def is_off(method: str, path: str) -> bool:
    """True for a request a graded session refuses."""
    if any(path == p or path.startswith(p + "/") for p in PREFIXES):
        return True
    if method != "POST":
        return False
    return path in COMPUTE or (path.startswith("/api/v1/ops/") and path.count("/") == 4)


def refusal(path: str) -> ApiError:
    return ApiError(403, "off_in_graded_session", f"{path[:80]} is off during a graded"
                    " session (GLASSLLM_GRADED_SESSION=1): the exercises and"
                    " /api/v1/check are on", input="path")


class GradedSession:
    """The ASGI middleware: refuses what a graded session turns off, before routing."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] == "http" and is_off(scope["method"], scope["path"]):
            return await error_response(refusal(scope["path"]))(scope, receive, send)
        await self.app(scope, receive, send)


def prune(doc: dict) -> dict:
    """The OpenAPI document without the operations a graded session turns off."""
    paths = {}
    for path, item in doc["paths"].items():
        kept = {m: op for m, op in item.items()
                if not (m in ("get", "head", "post", "put", "delete", "patch")
                        and is_off(m.upper(), path))}
        if any(m in kept for m in ("get", "head", "post", "put", "delete", "patch")):
            paths[path] = kept
    return {**doc, "paths": paths}


HIDING = ("/api/v1/eval", "/api/v1/check")


def with_hiding(doc: dict) -> dict:
    """Course mode's document: the routes an open exercise can refuse answer 403 too."""
    why = ("an open exercise hides what this would compute (`hidden_by_exercise`,"
           " docs/modes.md)")
    for path, item in doc["paths"].items():
        post = item.get("post")
        if post is not None and (path in HIDING or path.startswith("/api/v1/ops/")):
            post["responses"].setdefault("403", {
                "description": why, "content": {"application/json": {"schema": {
                    "$ref": "#/components/schemas/ErrorBody"}}}})
            post["responses"] = dict(sorted(post["responses"].items()))
    return doc
