"""``POST /api/v1/check``: grade a claimed value and gradients (issue 12).

The body is one case (an op call or an expression, see `glassllm_service.requests.case`)
plus ``claimed``
(``{"value": ..., "grads": {name: ...}}``, either part optional), ``rtol`` / ``atol``
(default NumPy's 1e-5 / 1e-8) and ``reveal`` (default true). The sandbox computes the case
as its own route would, then compares each claimed array with `glassllm.sandbox.compare.compare`.

``reveal: false`` answers verdicts and mismatch locations only. It is a convenience for
graded feedback, not secrecy: the same sandbox computes any value or gradient on request.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from fastapi import APIRouter, Request
from starlette.responses import Response

from glassllm.errors import echo_name
from glassllm.sandbox.compare import ATOL, RTOL, compare
from glassllm.sandbox.wire import coerce
from glassllm_service import schemas
from glassllm_service.admission import run_admitted
from glassllm_service.body import check_answer, read_json_then
from glassllm_service.codec import dumps
from glassllm_service.http_errors import ApiError
from glassllm_service.requests.case import Case, prepare_case, run_case
from glassllm_service.settings import Settings

router = APIRouter(prefix="/api/v1", tags=["tools"])
ERRORS = schemas.error_responses(400, 404, 413, 415, 422, 503, why={
    404: "the case names no op of the registry (`unknown_op`)"})
CHECK_FIELDS = ("claimed", "rtol", "atol", "reveal")


def _tolerance(body: dict, name: str, default: float) -> float:
    value = body.get(name, default)
    if isinstance(value, bool) or not isinstance(value, int | float) or not (
            math.isfinite(value) and value >= 0):
        raise ApiError(422, "invalid_request", f"'{name}' must be a finite number >= 0",
                       input=name)
    return float(value)


def _claimed(body: dict, settings: Settings) -> tuple[Any, dict]:
    claimed = body.get("claimed")
    if not isinstance(claimed, dict) or not claimed or set(claimed) - {"value", "grads"}:
        raise ApiError(422, "invalid_request", "'claimed' must be an object with \"value\""
                       " and / or \"grads\" (input name → array)", input="claimed")
    grads = claimed.get("grads", {})
    if not isinstance(grads, dict):
        raise ApiError(422, "invalid_request", "'claimed.grads' must be an object: input name"
                       " → array", input="claimed.grads")
    # the one coercion of glassllm.sandbox.wire: a binary array's declared size is held to the limit
    # before decoding; a WireError (422) or LimitError (413) is mapped by the app's handlers
    limit = settings.limits.max_array_elements
    value = None if "value" not in claimed else coerce(
        "tensor", "claimed.value", claimed["value"], max_elements=limit)
    grads = {name: coerce("tensor", f"claimed.grads.{name}", g, max_elements=limit)
             for name, g in grads.items()}
    return value, grads


def prepare_check(body: Any, maybe_bools: bool, settings: Settings) -> tuple[Case, dict]:
    """Every check of a check request, no compute: the prepared case and the claim."""
    if not isinstance(body, dict):
        raise ApiError(422, "invalid_request", "the body must be a JSON object: a case plus"
                       " claimed, rtol, atol, reveal", input="request body")
    rtol, atol = _tolerance(body, "rtol", RTOL), _tolerance(body, "atol", ATOL)
    reveal = body.get("reveal", True)
    if not isinstance(reveal, bool):
        raise ApiError(422, "invalid_request", "'reveal' must be true or false", input="reveal")
    value, grads = _claimed(body, settings)
    case = prepare_case({k: v for k, v in body.items() if k not in CHECK_FIELDS}, maybe_bools,
                        settings)
    if case.error is not None:
        raise case.error
    # held: the case's value and gradients and the claims; returned: a mask per claim
    claims = int(np.size(value)) if value is not None else 0
    claims += sum(int(np.size(g)) for g in grads.values())
    check_answer(case.answer + 2 * claims, settings, input="claimed",
                 what="the case's value and gradients with the claims and their masks")
    return case, {"value": value, "grads": grads, "rtol": rtol, "atol": atol, "reveal": reveal}


def answer_check(case: Case, claim: dict, maybe_bools: bool, settings: Settings) -> bytes:
    """Run in a worker thread, inside a compute slot: the case, then each claimed array
    compared with it."""
    solved = run_case(case, maybe_bools, settings)
    value, grads = claim["value"], claim["grads"]
    rtol, atol, reveal = claim["rtol"], claim["atol"], claim["reveal"]
    for name in grads:
        if name not in solved.grads:
            raise ApiError(422, "invalid_input", f"claimed.grads names '{echo_name(name)}', which"
                           " has no gradient here; gradients computed: "
                           + (", ".join(solved.grads) or "none"),
                           op=solved.op, input=f"claimed.grads.{echo_name(name)}")
    kw = {"rtol": rtol, "atol": atol, "reveal": reveal}
    out: dict[str, Any] = {
        "value": None if value is None else compare(solved.value, value, **kw),
        "grads": {name: compare(solved.grads[name], g, **kw) for name, g in grads.items()},
        "rtol": rtol, "atol": atol, "reveal": reveal, "warnings": solved.warnings}
    reports = [r for r in (out["value"], *out["grads"].values()) if r is not None]
    out["passed"] = all(r["allclose"] for r in reports)
    return dumps(out)


@router.post("/check", responses=ERRORS, response_model=schemas.CheckResult,
             summary="Grade a claimed value and gradients against the sandbox's own",
             description="A convenience for graded feedback, not secrecy: with reveal false"
                         " the answer holds verdicts and mismatch locations only, but the"
                         " same sandbox computes any gradient on request.",
             openapi_extra={"requestBody": {"required": True, "content": {"application/json": {
                 "schema": {"type": "object", "required": ["claimed"], "properties": {
                     "op": {"type": "string"}, "inputs": {"type": "object"},
                     "requires_grad": {"anyOf": [{"type": "null"}, {
                         "type": "array", "items": {"type": "string"}}]},
                     "expression": {"type": "string"}, "variables": {"type": "object"},
                     "grad_output": {"anyOf": [{"type": "null"},
                                               {"$ref": "#/components/schemas/FloatArray"}]},
                     "expand": {"type": "boolean", "description": "taken as /api/v1/eval"
                                " takes it (the page sends it with composite ops opened);"
                                " changes no value or gradient"},
                     "claimed": {"type": "object", "additionalProperties": False, "properties": {
                         "value": {"$ref": "#/components/schemas/FloatArray"},
                         "grads": {"type": "object", "additionalProperties": {
                             "$ref": "#/components/schemas/FloatArray"}}}},
                     "rtol": {"type": "number", "minimum": 0, "default": RTOL},
                     "atol": {"type": "number", "minimum": 0, "default": ATOL},
                     "reveal": {"type": "boolean", "default": True}}},
                 "example": {"op": "softmax", "inputs": {"a": [[1.0, 2.0, 3.0]]},
                             "grad_output": [[1.0, 0.0, 0.0]],
                             "claimed": {"grads": {"a": [[0.0, 0.0, 0.0]]}},
                             "reveal": False}}}}})
async def check(request: Request) -> Response:
    settings = request.app.state.settings

    def prepare(parsed: Any, maybe_bools: bool) -> tuple[tuple[Case, Any], bool]:
        return prepare_check(parsed, maybe_bools, settings), maybe_bools

    # one step (glassllm_service/body.py): a queued check holds its case, not the JSON lists
    (case, claim), maybe_bools = await read_json_then(
        request, settings, prepare, send='{"op": ..., "claimed": ...}')
    out = await run_admitted(request, case.cost, answer_check, case, claim, maybe_bools, settings)
    return Response(out, media_type="application/json")
