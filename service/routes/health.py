"""Liveness and readiness: cheap, no compute."""

from fastapi import APIRouter, Request
from starlette.responses import Response

from glassllm import registry
from service.codec import dumps
from service.schemas import Health, Ready

router = APIRouter(tags=["health"])
_OK = b'{"status":"ok"}'


# HEAD as well as GET: load balancers and `curl -I` probe with HEAD. A route of its own,
# out of the schema, so OpenAPI keeps one operation (and one operationId) per probe.
@router.get("/healthz", response_model=Health, summary="Liveness")
@router.head("/healthz", include_in_schema=False)
async def healthz() -> Response:
    return Response(_OK, media_type="application/json")


@router.get("/readyz", response_model=Ready, summary="Readiness: the registry is loaded")
@router.head("/readyz", include_in_schema=False)
async def readyz(request: Request) -> Response:
    slots = request.app.state.admission
    body = {"status": "ready", "ops": len(registry.OPS), "busy": slots.running,
            "capacity": slots.capacity, "waiting": slots.waiting}
    return Response(dumps(body), media_type="application/json")
