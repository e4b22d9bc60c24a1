"""``/api/v1/batch`` (several op calls and expressions, each answered on its own),
``/api/v1/check`` (a claimed value and gradients graded against the sandbox's own) and
``/api/v1/torch`` (a case as a PyTorch script that checks the sandbox's numbers)."""

from __future__ import annotations

from fastapi import APIRouter, Request
from starlette.responses import Response

from glassllm_service import compute, schemas
from glassllm_service.course_state import guarded
from glassllm_service.deps import CourseDep, SettingsDep
from glassllm_service.requests import batch, check, torch_case

router = APIRouter(prefix="/api/v1", tags=["tools"])


@router.post("/batch", response_model=schemas.BatchResult, openapi_extra=batch.BODY,
             operation_id="batch",
             responses=schemas.error_responses(413, 415, 422, 503),  # a case's: in its result
             summary="Several op calls and expressions, each answered on its own, in order")
async def run_batch(request: Request, settings: SettingsDep, course: CourseDep) -> Response:
    return await compute.answer(request, settings, guarded(batch.prepare, course),
                                send=batch.SEND)


@router.post("/check", response_model=schemas.CheckResult, openapi_extra=check.BODY,
             operation_id="check",
             responses=schemas.error_responses(400, 404, 413, 415, 422, 503, why={
                 404: "the case names no op of the registry (`unknown_op`)"}),
             summary="Grade a claimed value and gradients against the sandbox's own",
             description="A convenience for graded feedback, not secrecy: with reveal false"
                         " the answer holds verdicts and mismatch locations only, but the"
                         " same sandbox computes any gradient on request.")
async def run_check(request: Request, settings: SettingsDep, course: CourseDep) -> Response:
    return await compute.answer(request, settings, guarded(check.prepare, course),
                                send=check.SEND)


@router.post("/torch", response_model=schemas.TorchScript, openapi_extra=torch_case.BODY,
             operation_id="torch_script",
             responses=schemas.error_responses(400, 404, 413, 415, 422, 503, why={
                 404: "the case names no op of the registry (`unknown_op`)",
                 422: "a bad case, or an op with no PyTorch form here (`not_exportable`)"}),
             summary="A case as a PyTorch script that recomputes it and checks the numbers")
async def run_torch(request: Request, settings: SettingsDep, course: CourseDep) -> Response:
    return await compute.answer(request, settings, guarded(torch_case.prepare, course),
                                send=torch_case.SEND)
