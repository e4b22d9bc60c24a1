"""Liveness, readiness and the metrics: cheap, no compute."""

from __future__ import annotations

from fastapi import APIRouter, Request
from starlette.responses import PlainTextResponse, Response

from glassllm.sandbox import registry
from glassllm_service import metrics
from glassllm_service.codec import dumps
from glassllm_service.deps import AdmissionDep
from glassllm_service.record.setup import record_status
from glassllm_service.schemas import Health, Ready

router = APIRouter(tags=["health"])
metrics_router = APIRouter(tags=["health"])        # included when GLASSLLM_METRICS is on
_OK = b'{"status":"ok"}'


@router.get("/healthz", response_model=Health, summary="Liveness")
async def healthz() -> Response:
    return Response(_OK, media_type="application/json")


@router.get("/readyz", response_model=Ready, summary="Readiness: the registry is loaded")
async def readyz(request: Request, admission: AdmissionDep) -> Response:
    body = {"status": "ready", "ops": len(registry.OPS), "busy": admission.running,
            "capacity": admission.capacity, "waiting": admission.waiting}
    record = getattr(request.app.state, "record", None)
    if record is not None:
        # said, not a reason to be unready: the ops, expressions and lessons work without
        # the record, and a database down would otherwise take every replica out of the
        # Service at once (docs/record.md)
        body["record"] = await record_status(record)
    return Response(dumps(body), media_type="application/json")


@metrics_router.get("/metrics", response_class=PlainTextResponse, operation_id="metrics",
                    responses={200: {"content": {"text/plain": {"schema": {"type": "string"}}}}},
                    summary="Prometheus metrics, in the text exposition format (off:"
                            " GLASSLLM_METRICS=0)")
async def metrics_text() -> Response:
    body, ctype = metrics.exposition()
    return Response(body, media_type=ctype.split(";")[0], headers={"Content-Type": ctype})
