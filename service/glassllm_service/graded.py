"""A graded session (``GLASSLLM_GRADED_SESSION=1``, course mode with course secrets only,
docs/modes.md): for a student the sandbox is a locked room.

Whoever is not a signed-in instructor — a student's token, the shared token, no token —
reaches only what an exam needs, listed below as `ON` (a list of what is on, not of what
is off: a route added later is off until it is listed here):

- the page and its own files (``/``, ``/static/...``) but those that state a backward
  rule (`RULES`: ``static/js/rule.js`` takes cross_entropy's apart, p − one-hot over N;
  the page loads it only when a backward step is shown, which a student cannot reach in
  a graded session), the health probes and metrics;
- the sign-in (``/api/v1/session``);
- the exercises: the list, one exercise, its submission and its hints; and the
  student's own record (``/api/v1/record/...``, whose gradebook answers instructors only);
- ``/openapi.json`` and Swagger UI at ``/docs`` (with its assets): the document is the
  students' one (`for_students`), the routes above and the schemas they use, nothing else:
  no op, no rule text.

Everything else answers 403 ``off_in_graded_session`` before routing: every route that
computes (ops, eval, check, batch, torch, mysteries, training, attention), that shows a
rule or a lesson (``/api/v1/ops``, ``/api/v1/lessons``, ``/api/v1/examples``, the contract
pages at ``/docs/contract``), and the packages (``/dist/``, ``/simple/``). Instructors
keep everything. The check is `glassllm_service.record.access.CourseAccess`'s, which knows
who is asking.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import orjson
from starlette.responses import Response

from glassllm_service.http_errors import ApiError, error_response

ON = re.compile(
    r"/(static/.+|docs|docs-assets/.+|openapi\.json|healthz|readyz|metrics"
    r"|api/v1/session|api/v1/exercises(/[^/]+(/submit|/hints)?)?"
    r"|api/v1/record/(attempts|gradebook\.[^/]+))?")
STUDENTS = ("A graded session (GLASSLLM_GRADED_SESSION=1): a student reaches the exercises"
            " (the list, one exercise with their own numbers, its submission and hints),"
            " the sign-in, their own attempts and the health probes; every other route"
            " answers 403 off_in_graded_session.")
# the page's files that state a backward rule: off to students like the rest of the rules
RULES = frozenset({"/static/js/rule.js"})
METHODS = ("get", "head", "post", "put", "delete", "patch", "options", "trace")
DOCUMENT = "/openapi.json"


def is_on(path: str) -> bool:
    """True for a path a student reaches during a graded session."""
    return ON.fullmatch(path) is not None and path not in RULES


def refusal(path: str) -> ApiError:
    return ApiError(403, "off_in_graded_session", f"{path[:80]} is off during a graded"
                    " session (GLASSLLM_GRADED_SESSION=1): a student reaches the exercises"
                    " (list, one, submit, hints) and the sign-in; an instructor's token"
                    " reaches everything", input="path")


def _refs(node: Any, found: set[str]) -> None:
    if isinstance(node, dict):
        ref = node.get("$ref")
        if isinstance(ref, str) and ref.startswith("#/components/schemas/"):
            found.add(ref.rsplit("/", 1)[1])
        for value in node.values():
            _refs(value, found)
    elif isinstance(node, list):
        for value in node:
            _refs(value, found)


def prune(doc: dict) -> dict:
    """The OpenAPI document with only the paths a student reaches in a graded session, and
    only the component schemas those paths use (the op schemas go, their descriptions
    with them)."""
    paths = {path: item for path, item in doc["paths"].items() if is_on(path)
             and any(m in item for m in METHODS)}
    components = dict(doc.get("components", {}))
    schemas = components.get("schemas", {})
    used: set[str] = set()
    _refs(paths, used)
    todo = list(used)
    while todo:                                   # the schemas the schemas use
        found: set[str] = set()
        _refs(schemas.get(todo.pop(), {}), found)
        todo += sorted(found - used)
        used |= found
    components["schemas"] = {name: s for name, s in schemas.items() if name in used}
    info = {k: v for k, v in doc.get("info", {}).items() if k != "x-ops"}
    info["description"] = STUDENTS
    return {**doc, "info": info, "paths": paths, "components": components}


class Room:
    """The lock of a graded session, asked by `CourseAccess` of every request.
    `document`: the whole OpenAPI document (``app.openapi``), an instructor's."""

    def __init__(self, document: Callable[[], dict]) -> None:
        self.document = document
        self._documents: dict[bool, bytes] = {}

    def document_for(self, instructor: bool) -> bytes:
        """The OpenAPI document an instructor (the whole) or anyone else (`prune`) reads."""
        if instructor not in self._documents:
            doc = self.document()
            self._documents[instructor] = orjson.dumps(doc if instructor else prune(doc))
        return self._documents[instructor]

    def answer(self, method: str, path: str, instructor: bool) -> Any:
        """The answer to send instead of routing (an ASGI app), or None: route it."""
        if path == DOCUMENT and method in ("GET", "HEAD"):
            # one address, two documents: no cache may keep one for the other
            return Response(self.document_for(instructor), media_type="application/json",
                            headers={"Cache-Control": "no-store",
                                     "Vary": "Authorization, Cookie"})
        if instructor or is_on(path):
            return None
        return error_response(refusal(path))


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
