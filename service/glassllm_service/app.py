"""The app factory: ``create_app(settings)`` builds the sandbox's FastAPI app (SPEC Part H)."""

from __future__ import annotations

import contextlib
import functools
import gc

import anyio.to_thread
from fastapi import FastAPI
from starlette.middleware.cors import CORSMiddleware

from glassllm.course.attempts import AttemptStore
from glassllm.sandbox import float_warnings
from glassllm.sandbox.runtime import tune_malloc
from glassllm_service import admission, graded, http_errors, metrics, openapi, training_queue
from glassllm_service.allow import AllowEveryMethod, allow_head
from glassllm_service.auth import BearerToken
from glassllm_service.course_state import CourseState, spread
from glassllm_service.files import remove_private_dirs
from glassllm_service.hop import NoHopByHop
from glassllm_service.observability import Observability
from glassllm_service.record.access import CourseAccess, Gate
from glassllm_service.record.revocations import Revocations
from glassllm_service.record.setup import (
    RETRY_AFTER_S,
    keep_cases,
    keyring_of,
    open_record,
    reroll_note,
)
from glassllm_service.record.setup import install_errors as install_record_errors
from glassllm_service.requests import public_cases, training_run
from glassllm_service.routes import (
    contract,
    dist,
    exercises,
    expressions,
    health,
    hidden,
    mysteries,
    ops,
    pages,
    record,
    tools,
    train,
)
from glassllm_service.security import SecurityHeaders, TrustedHosts, content_security_policy
from glassllm_service.settings import Settings

DESCRIPTION = """Runs glassllm's ops forward and backward and returns values and gradients.

Arrays are JSON numbers and nested lists of float64; non-finite floats are the strings
"NaN", "Infinity", "-Infinity"; any array may also travel exactly as
{"dtype", "shape", "base64"} (little-endian), and "encoding": "base64" asks for answers in
that form. Every op, its inputs and runnable examples: `GET /api/v1/ops`.
"""
ROUTERS = (health.router, expressions.router, tools.router, train.router, dist.router,
           dist.simple_router, exercises.router, mysteries.router, record.router,
           hidden.router)


def create_app(settings: Settings | None = None, attempts: AttemptStore | None = None
               ) -> FastAPI:
    """The app of `settings` (default: the environment's). `attempts`: where the class
    record keeps attempts and hints (default `NoRecord`: nothing recorded)."""
    settings = settings or Settings()
    _prepare_process(settings)
    app = FastAPI(title="glassllm gradient sandbox", version="0.1.0", description=DESCRIPTION,
                  docs_url=None, redoc_url=None, lifespan=_lifespan(settings),
                  generate_unique_id_function=openapi.operation_id)
    app.state.settings = settings
    app.state.admission = admission.from_settings(settings)
    app.state.training_queue = training_queue.from_settings(settings)
    # course mode: the class record in its database (docs/record.md), unless one is given
    app.state.keyring = keyring_of(settings)
    app.state.record = None
    if attempts is None and settings.mode == "course":
        attempts = app.state.record = open_record(settings)
    elif attempts is not None and hasattr(attempts, "generation"):
        app.state.record = attempts
    app.state.course = CourseState.from_settings(settings, attempts)   # exercises: a bad
    # file stops here (glassllm-sandbox checks it before starting its workers)
    if app.state.record is not None:
        # a case changed under the same version stops here too, named (CaseChanged)
        _hold_cases(app.state.record, app.state.course)
    if app.state.course.course and any(ex.hide for ex in app.state.course.catalogue):
        _trace_what_requests_run()
    http_errors.install(app)
    if app.state.record is not None:
        install_record_errors(app)
    # The busiest routes, every op's POST among them, are the app's own first routes: its
    # router matches them before any other, without FastAPI's included-router step.
    app.router.routes[:0] = allow_head(ops.router).routes
    for router in (*ROUTERS, *([health.metrics_router] if settings.metrics else [])):
        app.include_router(allow_head(router))       # HEAD wherever GET (the page: pages.py)
    pages.install(app, settings.static_dir)
    app.include_router(allow_head(contract.router))  # the contract, docs/*.md (H7)
    _add_middleware(app, settings)
    openapi.install(app, token=bool(settings.api_token))
    if settings.mode == "course":
        _course_document(app)
    return app


def _hold_cases(record, course: CourseState) -> None:
    """The served cases held to the versions the record remembers (`keep_cases`: raises
    `CaseChanged` naming the file and the field); the upgrade's one re-roll said."""
    import logging
    note = reroll_note(record)
    if note:
        logging.getLogger("glassllm.record").warning("%s", note)
    try:
        keep_cases(record, course.catalogue)
    except BaseException:
        record.close()                # no pool left behind by an app that never starts
        raise


def _course_document(app: FastAPI) -> None:
    """Course mode's /openapi.json: the hiding routes' 403, and no op summary that speaks
    of a rule an open exercise hides now (a graded session's students read a pruned one:
    graded.Room)."""
    build = app.openapi

    @functools.lru_cache(maxsize=8)
    def without(rules: tuple) -> dict:
        return openapi.without_rules(document(), dict(rules))

    def document() -> dict:
        return graded.with_hiding(build())

    def now() -> dict:
        rules = tuple(sorted(spread(app.state.course.hidden(), "rule").items()))
        return without(rules) if rules else document()

    app.openapi = now


def _trace_what_requests_run() -> None:
    """What the hiding check asks, worked out before the first request rather than on it:
    every op's closure, the public cases' fingerprints, what a model runs (a training
    step traced takes a quarter of a second). Once per process."""
    public_cases.fingerprints()
    training_run.model_runs("train")
    training_run.model_runs("attention")


def _prepare_process(settings: Settings) -> None:
    """What every uvicorn worker process sets once, before its first request."""
    # NumPy's warnings-module warnings become exceptions that the routes turn into the
    # response's "warnings" (H4)
    float_warnings.install()
    tune_malloc()  # each worker process keeps freed NumPy buffers for reuse (runtime.py)
    # workers × compute slots × BLAS threads ≤ CPUs: one BLAS thread per slot by default
    from threadpoolctl import threadpool_limits
    threadpool_limits(limits=settings.blas_threads)
    if settings.metrics:
        metrics.enable()


def _add_middleware(app: FastAPI, settings: Settings) -> None:
    """Innermost first: Allow on 405s, the token, CORS, the trusted hosts, then the access
    log and metrics around everything, the security headers, then the connection-specific
    headers removed."""
    app.add_middleware(AllowEveryMethod, routes=app.router.routes)
    if app.state.keyring is not None:        # per-student tokens, the shared one too
        app.state.gate = Gate(app.state.keyring, settings.api_token)
        engine = getattr(app.state.record, "engine", None)
        # each worker's set of revoked tokens, read from the record (record/revocations.py)
        app.state.revocations = None if engine is None else Revocations(
            engine, settings.course_id, settings.revocation_refresh_s,
            graded=settings.graded_session)
        # a graded session's lock (graded.py); the document read late: it is built last
        room = graded.Room(lambda: app.openapi()) if settings.graded_session else None
        app.add_middleware(CourseAccess, gate=app.state.gate,
                           revocations=app.state.revocations, room=room,
                           retry_after=RETRY_AFTER_S)
    elif settings.api_token:
        app.add_middleware(BearerToken, token=settings.api_token)
    if settings.cors_origin_list:
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


def worker_threads(settings: Settings) -> int:
    """Threads of the shared pool (computations, sync routes, static files): the compute
    slots already bound the computations, so a burst of page loads need not grow the pool
    to anyio's 40 threads, whose stacks stay resident after it (a worker's memory)."""
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
