"""``POST /api/v1/eval`` (a composed expression, every node's value and adjoint) and
``GET /api/v1/examples`` (SPEC Part L as ready requests) — issue 5.

The work is `glassllm.sandbox.expr.evaluate`, the same function a notebook calls, in its two
halves: this router reads the body under the service's limits (H5), `expr.prepare`s it
(parse, graph, every shape planned, every refusal) before it waits, then waits for a
compute slot in the lane of the planned cost (`glassllm_service.admission`) and `expr.run`s it in a
worker thread; an `ExprError` becomes 422 / 413 / 400 with the offending position in the
app's exception handlers (`glassllm_service.http_errors`, H4).
"""

from __future__ import annotations

from typing import Any

import orjson
from fastapi import APIRouter, Request
from pydantic import BaseModel, Field
from starlette.responses import Response

from glassllm.errors import echo_name
from glassllm.sandbox import expr, float_warnings
from glassllm.sandbox.examples import EXAMPLES
from glassllm.sandbox.lessons import LESSONS
from glassllm_service import schemas
from glassllm_service.admission import run_admitted
from glassllm_service.body import check_answer, read_json_then
from glassllm_service.codec import dumps, encode_as, encoding_of
from glassllm_service.http_errors import ApiError
from glassllm_service.settings import Settings

router = APIRouter(prefix="/api/v1", tags=["expressions"])
ERRORS = schemas.error_responses(400, 413, 415, 422, 503)
FIELDS = ("expression", "variables", "grad_output", "check", "encoding", "expand")
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


def prepare_body(body: Any, maybe_bools: bool, settings: Settings,
                 messages: list[str]) -> expr.PreparedExpression:
    """The envelope, then `glassllm.sandbox.expr.prepare`: every refusal (an ApiError, or an
    ExprError mapped by the app's handlers) before any compute; the result's ``cost`` is
    the planned work the admission lane is chosen by. NumPy's `warnings`-module warnings
    go to `messages`."""
    if not isinstance(body, dict):
        raise ApiError(422, "invalid_request", 'the body must be a JSON object {"expression":'
                       ' "...", "variables": {...}, "grad_output": ..., "check": false}',
                       input="request body")
    extra = sorted(set(body) - set(FIELDS))
    if extra:
        raise ApiError(422, "invalid_request", f"unknown field '{echo_name(extra[0])}'; the fields"
                       f" are {', '.join(FIELDS)}", input=echo_name(extra[0]))
    if "expression" not in body:
        raise ApiError(422, "invalid_request", "'expression' is required", input="expression")
    kwargs = {"expression": body["expression"], "variables": body.get("variables"),
              "grad_output": body.get("grad_output"), "check": body.get("check", False),
              "expand": body.get("expand", False),
              "limits": settings.limits, "maybe_bools": maybe_bools}
    prepared = float_warnings.run_recording(lambda: expr.prepare(**kwargs), messages)
    opened = " and its opened composites" if prepared.expand else ""
    check_answer(prepared.answer_elements, settings, input="expression",
                 what=f"the expression's nodes{opened} (each value and gradient)")
    return prepared


def run_body(prepared: expr.PreparedExpression, messages: list[str],
             arrays: bool = False) -> dict:
    """`glassllm.sandbox.expr.run` (compute only): its dict (wire JSON; with `arrays`, value and
    grads as float64 NumPy arrays, bit-exact), every float warning in it."""
    result = float_warnings.run_recording(lambda: expr.run(prepared, arrays=arrays), messages)
    result["warnings"] += [m for m in messages if m not in result["warnings"]]
    return result


def run_prepared(prepared: expr.PreparedExpression, messages: list[str],
                 encoding: str = "json") -> bytes:
    """Run in a worker thread, inside a compute slot: the response bytes, value and grads in
    the asked ``encoding`` (the nodes stay JSON). A binary answer is written straight from
    the float64 arrays, so a NaN keeps its sign and payload (H3); it never goes through the
    JSON token "NaN"."""
    binary = encoding != "json"
    result = run_body(prepared, messages, arrays=binary)
    if binary:
        result["value"] = encode_as(result["value"], encoding)
        result["grads"] = {k: encode_as(g, encoding) for k, g in result["grads"].items()}
    return dumps(result)


def evaluate_body(body: Any, maybe_bools: bool, settings: Settings) -> dict:
    """One ``/api/v1/eval`` body, prepared and run at once (no admission): the dict."""
    messages: list[str] = []
    return run_body(prepare_body(body, maybe_bools, settings, messages), messages)


@router.post("/eval", response_model=EvalResult, responses=ERRORS, operation_id="eval_expression",
             summary="Evaluate an expression of registry ops: every node's value and gradient",
             openapi_extra={"requestBody": {"required": True, "content": {"application/json": {
                 "schema": {"title": "EvalRequest", "type": "object", "required": ["expression"],
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
                                "encoding": {"enum": ["json", "base64"]},
                                "expand": {"type": "boolean", "description":
                                           "open composite ops (cross_entropy, attention,"
                                           " rms_norm, swiglu, transformer_block): each such"
                                           " node gets an `expansion`, its composition of"
                                           " primitive ops with every value and gradient"}}},
                 "example": EXAMPLES[1]["request"]}}}})
async def eval_expression(request: Request) -> Response:
    settings = request.app.state.settings
    messages: list[str] = []          # an ExprError is mapped by the app's handlers

    def prepare(parsed: Any, maybe_bools: bool) -> tuple[str, expr.PreparedExpression]:
        return encoding_of(parsed), prepare_body(parsed, maybe_bools, settings, messages)

    # Read, parse, build and plan the graph in one step (off the event loop for a big body:
    # a queued request holds its planned graph, never the JSON lists), then wait for a slot
    # in the lane of its planned cost, then compute.
    encoding, prepared = await read_json_then(request, settings, prepare,
                                              send='{"expression": ...}')
    out = await run_admitted(request, prepared.cost, run_prepared, prepared, messages, encoding)
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
