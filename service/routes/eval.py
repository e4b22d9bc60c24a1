"""``POST /api/v1/eval`` (a composed expression, every node's value and adjoint) and
``GET /api/v1/examples`` (SPEC Part L as ready requests) — issue 5.

The work is `glassllm.expr.evaluate`, the same function a notebook calls; this router only
reads the body under the service's limits (H5), runs it in a worker thread inside a
compute slot; an `ExprError` becomes 422 / 413 / 400 with the offending position in the
app's exception handlers (`service.errors`, H4).
"""

from __future__ import annotations

from typing import Any

import orjson
from fastapi import APIRouter, Request
from pydantic import BaseModel, Field
from starlette.concurrency import run_in_threadpool
from starlette.responses import Response

from glassllm import float_warnings
from glassllm.examples import EXAMPLES
from glassllm.expr import evaluate
from glassllm.lessons import LESSONS
from service import schemas
from service.codec import dumps
from service.errors import ApiError
from service.limits import read_json
from service.settings import Settings

router = APIRouter(prefix="/api/v1", tags=["expressions"])
ERRORS = {s: {"model": schemas.ErrorBody} for s in (400, 413, 415, 422, 503)}
FIELDS = ("expression", "variables", "grad_output", "check", "expand")
_EXAMPLES_JSON = orjson.dumps({"examples": EXAMPLES})
_LESSONS_JSON = orjson.dumps({"lessons": LESSONS})


class EvalResult(schemas.Computed):
    """The answer of ``POST /api/v1/eval`` (H2, H3)."""

    grads: dict[str, Any] = Field(description="one array per variable that requires grad")
    output: int = Field(description="the id of the output node")
    nodes: list[dict[str, Any]] = Field(
        description="in evaluation order: id, op, span [start, end), text, inputs (node ids),"
                    " shape, requires_grad, value, grad (the adjoint ∂out/∂node), ledger"
                    " ([{input, summed_axes}]: axes summed to undo broadcasting); variables"
                    " also have name and kind; with expand, a composite op's node has"
                    " expansion: {expression, value, grads, nodes, ...}")
    first_nonfinite: dict[str, Any] | None = Field(
        description="{node, pass: forward | backward, count} of the first non-finite node")
    check: dict[str, Any] | None = Field(
        description="with check: per variable analytic, numeric, max_abs_err, max_rel_err,"
                    " passed")


class ExampleList(BaseModel):
    examples: list[dict[str, Any]]


def evaluate_body(body: Any, maybe_bools: bool, settings: Settings) -> bytes:
    """Run in a worker thread; every refusal is an ApiError."""
    if not isinstance(body, dict):
        raise ApiError(422, "invalid_request", 'the body must be a JSON object {"expression":'
                       ' "...", "variables": {...}, "grad_output": ..., "check": false}',
                       input="request body")
    extra = sorted(set(body) - set(FIELDS))
    if extra:
        raise ApiError(422, "invalid_request", f"unknown field '{extra[0][:40]}'; the fields"
                       f" are {', '.join(FIELDS)}", input=extra[0][:40])
    if "expression" not in body:
        raise ApiError(422, "invalid_request", "'expression' is required", input="expression")
    kwargs = {"expression": body["expression"], "variables": body.get("variables"),
              "grad_output": body.get("grad_output"), "check": body.get("check", False),
              "expand": body.get("expand", False),
              "limits": settings.limits, "maybe_bools": maybe_bools}
    messages: list[str] = []          # an ExprError is mapped by the app's handlers
    result = float_warnings.run_recording(lambda: evaluate(**kwargs), messages)
    result["warnings"] += [m for m in messages if m not in result["warnings"]]
    return dumps(result)


@router.post("/eval", response_model=EvalResult, responses=ERRORS,
             summary="Evaluate an expression of registry ops: every node's value and gradient",
             openapi_extra={"requestBody": {"required": True, "content": {"application/json": {
                 "schema": {"type": "object", "required": ["expression"],
                            "additionalProperties": False, "properties": {
                                "expression": {"type": "string"},
                                "variables": {"type": "object", "additionalProperties": {
                                    "anyOf": [{"$ref": "#/components/schemas/FloatArray"},
                                              {"type": "object", "required": ["value"],
                                               "properties": {"value": {},
                                                              "requires_grad": {
                                                                  "type": "boolean"}}}]}},
                                "grad_output": {"anyOf": [
                                    {"type": "null"},
                                    {"$ref": "#/components/schemas/FloatArray"}]},
                                "check": {"type": "boolean"},
                                "expand": {"type": "boolean", "description":
                                           "open composite ops (cross_entropy, attention,"
                                           " rms_norm, swiglu, transformer_block): each such"
                                           " node gets an `expansion`, its composition of"
                                           " primitive ops with every value and gradient"}}},
                 "example": EXAMPLES[1]["request"]}}}})
async def eval_expression(request: Request) -> Response:
    settings = request.app.state.settings
    parsed, maybe_bools = await read_json(request, settings, send='{"expression": ...}')
    with request.app.state.slots:
        out = await run_in_threadpool(evaluate_body, parsed, maybe_bools, settings)
    return Response(out, media_type="application/json")


@router.get("/examples", response_model=ExampleList,
            summary="Every example of SPEC Part L as a ready /api/v1/eval request")
def list_examples() -> Response:
    return Response(_EXAMPLES_JSON, media_type="application/json")


class LessonList(BaseModel):
    lessons: list[dict[str, Any]]


@router.get("/lessons", response_model=LessonList,
            summary="Lessons: prepared /api/v1/eval requests with what to notice (issue 14)")
def list_lessons() -> Response:
    return Response(_LESSONS_JSON, media_type="application/json")
