"""``POST /api/v1/batch``: several op calls and expressions in one request (issue 12).

The cases are answered independently and in order: each answer is the case's result (the
body ``POST /api/v1/ops/{name}`` or ``POST /api/v1/eval`` would give, without the eval's
node list) or its own ``{"error": {...}}``, so one bad case never spoils the others.

Bounded up front (H5): at most ``GLASSLLM_MAX_BATCH`` cases, and the planned work of all
cases together — the sum of each case's ``Prepared.cost``
(`glassllm_service.requests.case.prepare_case`: the elements it builds plus its matmul
multiply-adds) — at most
``GLASSLLM_MAX_MATMUL_MADDS``, the work one request may do; and the arrays all cases
return together (each case's value and gradients, an expression's nodes), held until the
answer is written, at most ``GLASSLLM_MAX_ANSWER_ELEMENTS``. Every case is prepared (all
its checks, no compute) first; a batch past any bound is refused whole with 413, naming
the case that pushes it over, before any case is computed. Then each prepared case runs.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request
from starlette.responses import Response

from glassllm.errors import InputError, echo_name
from glassllm_service import schemas
from glassllm_service.admission import run_admitted
from glassllm_service.body import check_answer, read_json_then
from glassllm_service.codec import computed, dumps, encoding_of
from glassllm_service.http_errors import ApiError, from_input_error
from glassllm_service.requests.case import Case, prepare_case, run_case
from glassllm_service.settings import Settings

router = APIRouter(prefix="/api/v1", tags=["tools"])
ERRORS = schemas.error_responses(413, 415, 422, 503)  # a case's own error: in its result


def prepare_batch(body: Any, maybe_bools: bool,
                  settings: Settings) -> tuple[list[Case], int, str]:
    """Every case checked and planned (no compute), the batch's total planned work bounded
    up front: the prepared cases, their total work, the answer's encoding."""
    if not isinstance(body, dict) or not isinstance(body.get("cases"), list):
        raise ApiError(422, "invalid_request", 'the body must be {"cases": [...], "encoding":'
                       ' "json" | "base64"}', input="cases")
    extra = sorted(set(body) - {"cases", "encoding"})
    if extra:
        raise ApiError(422, "invalid_request", f"unknown field '{echo_name(extra[0])}'; the fields"
                       " are cases, encoding", input=echo_name(extra[0]))
    encoding = encoding_of(body)
    cases = body["cases"]
    if len(cases) > settings.max_batch:
        raise ApiError(413, "too_large", f"the batch has {len(cases)} cases; the limit is"
                       f" {settings.max_batch} (GLASSLLM_MAX_BATCH)",
                       input=f"cases[{settings.max_batch}]")
    prepared, total, answer = [], 0, 0
    for i, case in enumerate(cases):
        prepared.append(prepare_case(case, maybe_bools, settings, f"cases[{i}]"))
        total += prepared[-1].work
        if total > settings.max_matmul_madds:
            raise ApiError(413, "too_large", f"cases[{i}] brings the batch's planned work to"
                           f" {total} (elements plus multiply-adds); the limit is"
                           f" {settings.max_matmul_madds} (GLASSLLM_MAX_MATMUL_MADDS)",
                           input=f"cases[{i}]")
        answer += prepared[-1].answer      # the answers are held until the last case's
        check_answer(answer, settings, what=f"cases[0..{i}] together", input=f"cases[{i}]")
    return prepared, total, encoding


def answer_batch(prepared: list[Case], encoding: str, maybe_bools: bool,
                 settings: Settings) -> bytes:
    """Run in a worker thread, inside one compute slot: each case answered on its own."""
    results = []
    for i, case in enumerate(prepared):
        try:
            solved = run_case(case, maybe_bools, settings)
        except (ApiError, InputError) as exc:
            err = exc if isinstance(exc, ApiError) else from_input_error(exc)
            err.extra["case"] = i
            results.append(err.body())
            continue
        head = {"op": solved.op} if solved.op else {}
        results.append(computed(solved.value, solved.grads, solved.warnings, encoding, **head))
    return dumps({"results": results})


CASE = {"type": "object", "description": "an op call {op, inputs, requires_grad, grad_output}"
        " or an expression {expression, variables, grad_output, expand}",
        "properties": {"op": {"type": "string"}, "inputs": {"type": "object"},
                       "requires_grad": {"anyOf": [{"type": "null"},
                                                   {"type": "array",
                                                    "items": {"type": "string"}}]},
                       "expression": {"type": "string"}, "variables": {"type": "object"},
                       "grad_output": {"anyOf": [{"type": "null"},
                                                 {"$ref": "#/components/schemas/FloatArray"}]},
                       "expand": {"type": "boolean", "description": "taken as /api/v1/eval"
                                  " takes it; changes no value or gradient"}}}


@router.post("/batch", responses=ERRORS, response_model=schemas.BatchResult,
             summary="Several op calls and expressions, each answered on its own, in order",
             openapi_extra={"requestBody": {"required": True, "content": {"application/json": {
                 "schema": {"type": "object", "required": ["cases"],
                            "additionalProperties": False, "properties": {
                                "cases": {"type": "array", "items": CASE},
                                "encoding": {"enum": ["json", "base64"]}}},
                 "example": {"cases": [
                     {"op": "mul", "inputs": {"a": [1.0, 2.0], "b": [3.0, 4.0]}},
                     {"expression": "(x * x).sum()", "variables": {"x": [1.0, 2.0]}},
                     {"op": "nope", "inputs": {}}]}}}}})
async def batch(request: Request) -> Response:
    settings = request.app.state.settings

    def prepare(parsed: Any, maybe_bools: bool) -> tuple[tuple[list[Case], int, str], bool]:
        return prepare_batch(parsed, maybe_bools, settings), maybe_bools

    # one step (glassllm_service/body.py): a queued batch holds its prepared cases, not the lists
    (prepared, total, encoding), maybe_bools = await read_json_then(
        request, settings, prepare, send='{"cases": [...]}')
    out = await run_admitted(request, total, answer_batch, prepared, encoding, maybe_bools,
                             settings)
    return Response(out, media_type="application/json")
