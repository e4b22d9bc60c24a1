"""The app factory: ``create_app(settings)`` builds a FastAPI app (SPEC Part H)."""

from __future__ import annotations

from fastapi import FastAPI

from glassllm import float_warnings
from glassllm.registry import OPS
from glassllm.runtime import tune_malloc
from service import errors, schemas
from service.limits import ComputeSlots
from service.openapi import for_generators
from service.routes import allow_head, contract, health, ops, pages
from service.routes import eval as eval_routes
from service.routes import train as train_routes
from service.settings import Settings

DESCRIPTION = """Runs glassllm's ops forward and backward and returns values and gradients.

Arrays are JSON numbers and nested lists of float64; non-finite floats are the strings
"NaN", "Infinity", "-Infinity". Every op, its inputs and runnable examples: `GET /api/v1/ops`.
"""


def create_app(settings: Settings | None = None) -> FastAPI:
    settings = settings or Settings()
    # NumPy's warnings-module warnings become exceptions that the routes turn into the
    # response's "warnings" (H4); set here so every uvicorn worker process has it.
    float_warnings.install()
    tune_malloc()  # each worker process keeps freed NumPy buffers for reuse (runtime.py)
    app = FastAPI(title="glassllm gradient sandbox", version="0.1.0", description=DESCRIPTION,
                  docs_url=None, redoc_url=None,
                  generate_unique_id_function=lambda route: route.name)  # the function: a client method name
    app.state.settings = settings
    app.state.slots = ComputeSlots(settings.max_concurrency, settings.retry_after_seconds)
    errors.install(app)
    for router in (health.router, ops.router, eval_routes.router):
        app.include_router(allow_head(router))       # HEAD wherever GET (the page: pages.py)
    train_routes.install(app)                        # /api/v1/train, /api/v1/model/attention
    pages.install(app, settings.static_dir)
    app.include_router(allow_head(contract.router))  # the contract, docs/*.md (H7)

    def openapi() -> dict:
        if app.openapi_schema is None:
            from fastapi.openapi.utils import get_openapi
            schema = get_openapi(title=app.title, version=app.version,
                                 description=app.description, routes=app.routes)
            schema.setdefault("components", {}).setdefault("schemas", {}).update(
                schemas.COMPONENTS)
            schema["info"]["x-ops"] = len(OPS)
            app.openapi_schema = for_generators(schema)     # issue 16: clients generate
        return app.openapi_schema

    app.openapi = openapi
    return app
