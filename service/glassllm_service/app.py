"""The app factory: ``create_app(settings)`` builds a FastAPI app (SPEC Part H)."""

from __future__ import annotations

import contextlib
import gc

import anyio.to_thread
from fastapi import FastAPI

from glassllm.sandbox import float_warnings
from glassllm.sandbox.registry import OPS
from glassllm.sandbox.runtime import tune_malloc
from glassllm_service import admission, http_errors, metrics, schemas
from glassllm_service.allow import AllowEveryMethod
from glassllm_service.auth import BearerToken
from glassllm_service.files import remove_private_dirs
from glassllm_service.hop import NoHopByHop
from glassllm_service.observability import Observability
from glassllm_service.openapi import describe_errors, for_generators
from glassllm_service.requests import batch, check
from glassllm_service.requests import expression as eval_routes
from glassllm_service.requests import training_run as train_routes
from glassllm_service.routes import allow_head, contract, dist, health, ops, pages
from glassllm_service.security import SecurityHeaders, TrustedHosts, content_security_policy
from glassllm_service.settings import Settings

DESCRIPTION = """Runs glassllm's ops forward and backward and returns values and gradients.

Arrays are JSON numbers and nested lists of float64; non-finite floats are the strings
"NaN", "Infinity", "-Infinity"; any array may also travel exactly as
{"dtype", "shape", "base64"} (little-endian), and "encoding": "base64" asks for answers in
that form. Every op, its inputs and runnable examples: `GET /api/v1/ops`.
"""


def worker_threads(settings: Settings) -> int:
    """Threads of the shared pool (computations, sync routes, static files): the compute
    slots already bound the computations, so a burst of page loads need not grow the pool
    to anyio's 40 threads, whose stacks stay resident after it (issue 9: RSS)."""
    return max(8, 4 * settings.compute_slots)


def _lifespan(settings: Settings):
    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI):
        anyio.to_thread.current_default_thread_limiter().total_tokens = worker_threads(settings)
        # The app, the registry and the libraries are built: move them out of the
        # collector's sight. Without this each full collection walked every one of them
        # (36 ms, twice per ~7 000 small requests, stalling whatever request triggered it).
        gc.collect()
        gc.freeze()
        try:
            yield
        finally:
            remove_private_dirs()         # the /dist/ wheel this worker built (files.py)
    return lifespan


def create_app(settings: Settings | None = None) -> FastAPI:
    settings = settings or Settings()
    # NumPy's warnings-module warnings become exceptions that the routes turn into the
    # response's "warnings" (H4); set here so every uvicorn worker process has it.
    float_warnings.install()
    tune_malloc()  # each worker process keeps freed NumPy buffers for reuse (runtime.py)
    # workers × compute slots × BLAS threads ≤ CPUs: one BLAS thread per slot by default
    from threadpoolctl import threadpool_limits
    threadpool_limits(limits=settings.blas_threads)
    # operationId = the route function's name: the generated clients' method names (issue 16)
    app = FastAPI(title="glassllm gradient sandbox", version="0.1.0", description=DESCRIPTION,
                  docs_url=None, redoc_url=None, lifespan=_lifespan(settings),
                  generate_unique_id_function=lambda route: route.name)
    app.state.settings = settings
    if settings.metrics:
        metrics.install(app)
    app.state.admission = admission.from_settings(settings)
    http_errors.install(app)
    for router in (health.router, ops.router, eval_routes.router, batch.router, check.router,
                   dist.router):
        app.include_router(allow_head(router))       # HEAD wherever GET (the page: pages.py)
    app.router.routes.insert(0, ops.RUN)             # every op's POST, matched first
    train_routes.install(app)                        # /api/v1/train, /api/v1/model/attention
    pages.install(app, settings.static_dir)
    app.include_router(allow_head(contract.router))  # the contract, docs/*.md (H7)
    # Middleware, innermost first: Allow on 405s, the token, CORS, the trusted hosts, then
    # the access log and metrics around everything (issue 9), the security headers, then
    # the connection-specific headers removed.
    app.add_middleware(AllowEveryMethod, routes=app.router.routes)
    if settings.api_token:
        app.add_middleware(BearerToken, token=settings.api_token)
    if settings.cors_origin_list:
        from starlette.middleware.cors import CORSMiddleware
        app.add_middleware(CORSMiddleware, allow_origins=settings.cors_origin_list,
                           allow_methods=["GET", "HEAD", "POST"],
                           allow_headers=["Content-Type", "Authorization", "X-Request-ID",
                                          "X-Client-ID"],
                           expose_headers=["Retry-After", "X-Request-ID"], max_age=600)
    if settings.trusted_host_list != ["*"]:
        app.add_middleware(TrustedHosts, patterns=settings.trusted_host_list)
    app.add_middleware(Observability, access_log=settings.access_log,
                       fmt=settings.log_format, record_metrics=settings.metrics,
                       routes=app.router.routes)
    # every answer, errors and refusals included, carries the security headers
    app.add_middleware(SecurityHeaders, csp=content_security_policy(
        [pages.swagger_ui().body.decode(), f"<style>{contract.STYLE}</style>"]))
    app.add_middleware(NoHopByHop)        # outermost: no answer names the connection (hop.py)

    def openapi() -> dict:
        if app.openapi_schema is None:
            from fastapi.openapi.utils import get_openapi
            # one POST per op, generated from the registry (the app routes them all
            # through one /api/v1/ops/{name} route: glassllm_service/routes/ops.py)
            schema = get_openapi(title=app.title, version=app.version,
                                 description=app.description,
                                 routes=[*app.routes, *ops.DOCUMENTED.routes])
            schema.setdefault("components", {}).setdefault("schemas", {}).update(
                schemas.COMPONENTS)
            schema["info"]["x-ops"] = len(OPS)
            describe_errors(schema, token=bool(settings.api_token))
            app.openapi_schema = for_generators(schema)     # issue 16: clients generate
        return app.openapi_schema

    app.openapi = openapi
    return app
