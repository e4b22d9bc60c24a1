"""``/api/v1/ops``: running one op (H2), every op of the registry (H1), and one op."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import orjson
from fastapi import APIRouter, Request
from fastapi.routing import APIRoute
from starlette.responses import Response
from starlette.routing import request_response

from glassllm.sandbox import registry
from glassllm_service import compute, openapi, schemas
from glassllm_service.course_state import guarded, spread, without_rule
from glassllm_service.deps import CourseDep
from glassllm_service.requests import op_call

router = APIRouter(prefix="/api/v1/ops", tags=["ops"],  # not included: the app's first routes
                   generate_unique_id_function=openapi.operation_id)
_OPS_JSON = orjson.dumps({"ops": [registry.describe(op) for op in registry.OPS.values()],
                          "kinds": registry.DTYPES})


class BareRoute(APIRoute):
    """A route whose endpoint takes the request and nothing else, answered as a plain
    Starlette route is: no parameters or dependencies for FastAPI to solve. The busiest
    path (a (4, 8) softmax) answers measurably faster without them (docs/performance.md)."""

    def __init__(self, path: str, endpoint: Callable, **kwargs: Any) -> None:
        super().__init__(path, endpoint, **kwargs)
        self.app = request_response(endpoint)


async def run_op(request: Request) -> Response:
    """Every op's POST: the op named by the path, computed (`glassllm_service.compute`).

    /openapi.json documents one POST per op, each with its own request schema and
    example, generated from the registry (`glassllm_service.openapi.op_paths`)."""
    op = op_call.find(request.path_params["name"])
    prepare = guarded(functools.partial(op_call.prepare, op), request.app.state.course)
    return await compute.answer(request, request.app.state.settings, prepare, op=op.name,
                                send=op_call.SEND)


# First in the router, and the router first in the app (app.py): tried before any other.
router.add_api_route("/{name}", run_op, methods=["POST"], name="run", include_in_schema=False,
                     route_class_override=BareRoute)


@functools.lru_cache(maxsize=16)
def _ops_without(rules: tuple, expected: tuple = ()) -> tuple[bytes, dict[str, bytes]]:
    """The op list, and each op, without the rules and expected numbers open exercises
    hide: (op, exercise ids) pairs of each."""
    ops = [without_rule(registry.describe(op), dict(rules), dict(expected))
           for op in registry.OPS.values()]
    return (orjson.dumps({"ops": ops, "kinds": registry.DTYPES}),
            {op["name"]: orjson.dumps(op) for op in ops})


def _hiding(course) -> tuple[tuple, tuple] | None:
    """The (rule, expected) parts open exercises hide now, carried to every op that runs
    a hidden one (`spread`: linear's rule is matmul's), as cache keys, or None."""
    hidden = course.hidden()
    rules, expected = spread(hidden, "rule"), spread(hidden, "expected")
    if not rules and not expected:
        return None
    return tuple(sorted(rules.items())), tuple(sorted(expected.items()))


@router.get("", response_model=schemas.OpList, summary="Every op of the registry")
def list_ops(course: CourseDep) -> Response:
    if hiding := _hiding(course):
        return Response(_ops_without(*hiding)[0], media_type="application/json")
    return Response(_OPS_JSON, media_type="application/json")


@router.get("/{name}", response_model=schemas.OpInfo, responses=schemas.error_responses(
                404, why={404: "no op of that name (`unknown_op`); the message names close ones"}),
            summary="One op: its inputs, output kind and runnable examples")
def get_op(name: str, course: CourseDep) -> Response:
    op = op_call.find(name)
    if hiding := _hiding(course):
        return Response(_ops_without(*hiding)[1][op.name], media_type="application/json")
    return Response(orjson.dumps(registry.describe(op)), media_type="application/json")
