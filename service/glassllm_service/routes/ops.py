"""``/api/v1/ops``: the registry (H1) and running one op (H2)."""

from __future__ import annotations

import difflib
from typing import Any

import orjson
from fastapi import APIRouter, Request
from starlette.responses import Response
from starlette.routing import Route

from glassllm.errors import echo_name
from glassllm.sandbox import registry
from glassllm.sandbox.registry import Op, Prepared
from glassllm_service import schemas
from glassllm_service.admission import run_admitted
from glassllm_service.body import read_json_then
from glassllm_service.codec import encoding_of
from glassllm_service.http_errors import ApiError
from glassllm_service.requests.op import answer, prepare_body

router = APIRouter(prefix="/api/v1/ops", tags=["ops"])
_OPS_JSON = orjson.dumps({"ops": [registry.describe(op) for op in registry.OPS.values()],
                          "kinds": registry.DTYPES})


def find(name: str) -> Op:
    op = registry.get(name)
    if op is None:
        close = difflib.get_close_matches(name, list(registry.OPS), n=5, cutoff=0.5)
        hint = f"; did you mean {', '.join(close)}?" if close else "."
        raise ApiError(404, "unknown_op", f"there is no op named {echo_name(name, 60)!r}{hint}"
                       " Every op: GET /api/v1/ops", input="name", close=close)
    return op


@router.get("", response_model=schemas.OpList, summary="Every op of the registry")
def list_ops() -> Response:
    return Response(_OPS_JSON, media_type="application/json")


@router.get("/{name}", response_model=schemas.OpInfo, responses=schemas.error_responses(
                404, why={404: "no op of that name (`unknown_op`); the message names close ones"}),
            summary="One op: its inputs, output kind and runnable examples")
def get_op(name: str) -> Response:
    return Response(orjson.dumps(registry.describe(find(name))), media_type="application/json")


async def run_op(op: Op, request: Request) -> Response:
    settings = request.app.state.settings

    def prepare(parsed: Any, maybe_bools: bool) -> tuple[str, Prepared]:
        return encoding_of(parsed, op.name), prepare_body(op, parsed, maybe_bools, settings)

    # read, parse and prepare in one step: a queued request holds its NumPy inputs, never
    # the JSON lists (glassllm_service/body.py)
    try:
        encoding, prepared = await read_json_then(request, settings, prepare, op=op.name)
        out = await run_admitted(request, prepared.cost, answer, prepared, encoding)
    except ApiError as exc:      # the queue's 503s know no op; this route's answers name it
        if exc.op is None:
            exc.op = op.name
        raise
    return Response(out, media_type="application/json")


async def run(request: Request) -> Response:
    """Every op's POST: one route, the op looked up in the registry by its path name."""
    return await run_op(find(request.path_params["name"]), request)


class _Route(Route):
    """A Starlette route that names itself in ``scope["route"]`` (FastAPI's router does so
    only for its own routes), where the access log and the metrics read the template —
    also when it answers 405 to another method."""

    async def handle(self, scope: dict, receive: Any, send: Any) -> None:
        scope["route"] = self
        await super().handle(scope, receive, send)


# A plain Starlette route, first in the app's table (glassllm_service/app.py): the busiest path
# skips FastAPI's parameter solving and included-router matching, which it does not use
# (the body is read by `read_json_then`, the name looked up by `find`): a (4, 8) softmax
# answered 0.63x /healthz's requests per second this way against 0.55x (issue 18).
RUN = _Route("/api/v1/ops/{name}", run, methods=["POST"], name="run")


def _documented(op: Op):
    async def endpoint(request: Request) -> Response:  # never routed to: documentation only
        return await run_op(op, request)
    endpoint.__name__ = f"run_{op.name}"
    return endpoint


# /openapi.json still documents one POST per op, with the op's own request schema and
# example: these routes are generated from the registry and handed to the schema
# generator only (glassllm_service/app.py); the app routes every op through `run` above.
DOCUMENTED = APIRouter(prefix="/api/v1/ops", tags=["ops"])
for _op in registry.OPS.values():
    DOCUMENTED.add_api_route(
        f"/{_op.name}", _documented(_op), methods=["POST"], summary=_op.summary,
        description=f"Runs `{_op.module}.{_op.name}` forward and backward (SPEC {_op.clause},"
                    " H2).", operation_id=f"run_{_op.name}",
        response_model=schemas.OpResult, responses=schemas.error_responses(
            *schemas.op_error_statuses(_op)),
        openapi_extra={"requestBody": {"required": True, "content": {"application/json": {
            "schema": schemas.request_schema(_op),
            "example": _op.examples[0].request() if _op.examples else {"inputs": {}}}}}})
