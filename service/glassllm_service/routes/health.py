"""Liveness and readiness: cheap, no compute."""

from fastapi import APIRouter, Request
from starlette.responses import Response

from glassllm.sandbox import registry
from glassllm_service.codec import dumps
from glassllm_service.schemas import Health, Ready

router = APIRouter(tags=["health"])
_OK = b'{"status":"ok"}'


# HEAD as well as GET (load balancers and `curl -I` probe with HEAD): app.py's allow_head.
@router.get("/healthz", response_model=Health, summary="Liveness")
async def healthz() -> Response:
    return Response(_OK, media_type="application/json")


@router.get("/readyz", response_model=Ready, summary="Readiness: the registry is loaded")
async def readyz(request: Request) -> Response:
    slots = request.app.state.admission
    body = {"status": "ready", "ops": len(registry.OPS), "busy": slots.running,
            "capacity": slots.capacity, "waiting": slots.waiting}
    return Response(dumps(body), media_type="application/json")
